"The Ray backend of `run_many`: the same numbers as the local processes, and a worker killed mid-grid loses no finished run."
import os, json
from pathlib import Path
import pandas as pd
import pytest

ray = pytest.importorskip('ray', reason='Ray is not installed (the optional extra: pip install -e ".[ray]")')

from fedrepro.fedreg import FEDREG
from fedrepro.repro import run_table, seed_cells, table_rows
from fedrepro.results import run_many

SETTING, METHODS, SEEDS = 'MNIST (two classes)', ['FedAvg', 'FedReg'], [0, 1]


def untimed(df: pd.DataFrame) -> pd.DataFrame:
    "`df` without its wall-clock columns (`*seconds*`): those differ between any two runs."
    return df.drop(columns=[c for c in df if 'seconds' in c])


@pytest.fixture(scope='module')
def local_ray():
    "One local Ray of 2 CPUs for the module, shut down after it; run_many finds it initialised and leaves it running."
    ray.init(address='local', num_cpus=2, num_gpus=0, include_dashboard=False)
    yield
    ray.shutdown()


def grid(out, backend, **kw):
    return run_table(FEDREG, [SETTING], 'smoke', SEEDS, out, device='cpu', methods=METHODS, workers=2, backend=backend, rounds=4, **kw)


def test_ray_grid_equals_local(local_ray, tmp_path):
    local, on_ray = grid(tmp_path / 'local', 'local'), grid(tmp_path / 'ray', 'ray')
    assert len(local) == len(METHODS) * len(SEEDS) * 5 and ray.is_initialized()      # 2 methods x 2 seeds x rounds 0-4; Ray left running
    pd.testing.assert_frame_equal(untimed(on_ray), untimed(local), check_exact=True)        # bit for bit: no tolerance
    rows = [table_rows(FEDREG, seed_cells(FEDREG, c, 'smoke'), 'smoke') for c in (local, on_ray)]
    pd.testing.assert_frame_equal(*rows, check_exact=True)                                 # the repro table the CSV is written from


def killer(marker: str, at_round: int):
    "A callback that kills its own worker process at `at_round` the first time any run reaches it (the marker file makes it once)."
    def cb(row):
        if row['round'] != at_round: return
        try: fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError: return
        os.write(fd, str(os.getpid()).encode()); os.close(fd)
        os._exit(1)                                   # no cleanup, no exception: the worker dies as if killed
    return cb


def files(run_dir: Path) -> dict:
    "Every record of a run with its bytes and mtime, except the lock file (opening it to lock it touches it)."
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(run_dir.rglob('*')) if p.is_file() and p.name != '.lock'}


def test_killed_worker_is_retried_and_resumes(local_ray, tmp_path):
    cfgs = [FEDREG.config(SETTING, m, 'smoke', seed=s, device='cpu', rounds=4) for m in METHODS for s in SEEDS]
    finished = run_many(cfgs[:2], tmp_path / 'runs', workers=2)                  # half the grid done before
    before = {r.run_dir.name: files(r.run_dir) for r in finished}
    marker = tmp_path / 'killed'
    results = run_many(cfgs, tmp_path / 'runs', backend='ray', callbacks=[killer(str(marker), 2)])
    assert marker.exists(), 'a worker was killed'
    assert [r.cfg for r in results] == cfgs and all(r.summary['rounds'] == 4 for r in results)
    assert {r.run_dir.name: files(r.run_dir) for r in results[:2]} == before, 'finished runs are loaded, not touched'
    segments = {r.run_dir.name: [s['from_round'] for s in json.loads((r.run_dir / 'env.json').read_text())['segments']] for r in results[2:]}
    assert sorted(segments.values()) == [[1], [1, 3]], segments    # one ran through; the killed one resumed after its round-2 checkpoint
    whole = run_many(cfgs, tmp_path / 'whole', workers=2)                         # the same grid, never interrupted
    for a, b in zip(results, whole): pd.testing.assert_frame_equal(untimed(a.metrics), untimed(b.metrics), check_exact=True)
