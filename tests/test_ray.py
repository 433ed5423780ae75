"""The Ray backend of `run_many`: the same numbers as the local processes, a worker killed mid-grid loses no
finished run, and a failed run (its own error, or its worker dead past the retries) is named at the end while the
others finish, each in a task named by its run."""

import os
import json
import warnings
import shutil
from pathlib import Path
import pandas as pd
import pytest

ray = pytest.importorskip('ray', reason='Ray is not installed (the optional extra: pip install -e ".[ray]")')

from fedrepro.fedreg import FEDREG  # noqa: E402 (after the importorskip)
from fedrepro.repro import run_table  # noqa: E402 (after the importorskip)
from fedrepro.config import ExperimentConfig  # noqa: E402 (after the importorskip)
from fedrepro.results import GridError, MEMORY_PER_RUN_ENV, run_many, run_memory_gb  # noqa: E402 (after the importorskip)

SETTING, METHODS, SEEDS = 'MNIST (two classes)', ['FedAvg', 'FedReg'], [0, 1]


def untimed(df: pd.DataFrame) -> pd.DataFrame:
    "`df` without its wall-clock columns (`*seconds*`): those differ between any two runs."
    return df.drop(columns=[c for c in df if 'seconds' in c])


def test_a_local_ray_is_started_on_demand_and_stopped(tmp_path, monkeypatch):
    """Before the module's Ray: with no Ray initialised and no RAY_ADDRESS, run_many starts a local one and stops it
    after the grid, without Ray's tip about a future default (fedrepro's tasks ask for their GPUs)."""
    monkeypatch.delenv('RAY_ADDRESS', raising=False)
    assert not ray.is_initialized()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        (r,) = run_many([FEDREG.config(SETTING, 'FedAvg', 'smoke', seed=0, device='cpu')], tmp_path, backend='ray')
    assert r.summary['rounds'] == 2 and not ray.is_initialized()
    assert not [w for w in caught if 'RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO' in str(w.message)], 'the tip was shown'


@pytest.fixture(scope='module')
def local_ray():
    "One local Ray of 2 CPUs for the module, shut down after it; run_many finds it initialised and leaves it running."
    ray.init(address='local', num_cpus=2, num_gpus=0, include_dashboard=False)
    yield
    ray.shutdown()


def grid(out, backend):
    "FedReg's Table 1 setting at smoke, FedAvg and FedReg over two seeds, 4 rounds each."
    return run_table(
        FEDREG, [SETTING], 'smoke', SEEDS, out, device='cpu', methods=METHODS, workers=2, backend=backend, rounds=4
    )


@pytest.fixture(scope='module')
def local_grid(tmp_path_factory):
    "The grid on local single-thread processes, once for the module: its run folder and curves."
    out = tmp_path_factory.mktemp('local')
    return out, grid(out, 'local')


def killer(marker: str, at_round: int):
    """A callback that kills its own worker process at `at_round` the first time any run reaches it (the marker file
    makes it once)."""

    def cb(row):
        if row['round'] != at_round:
            return
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        os._exit(1)  # no cleanup, no exception: the worker dies as if killed

    return cb


def files(run_dir: Path) -> dict:
    "Every record of a run with its bytes and mtime, except the lock file (opening it to lock it touches it)."
    return {
        str(p.relative_to(run_dir)): (p.read_bytes(), p.stat().st_mtime_ns)
        for p in sorted(run_dir.rglob('*'))
        if p.is_file() and p.name != '.lock'
    }


def test_killed_worker_is_retried_and_resumes(local_ray, local_grid, tmp_path):
    """Half the grid done before, the rest on Ray, a worker killed at round 2: every run ends bit for bit as on the
    local processes (the killed one resumed, the other run through), the finished ones untouched. (The scale-out
    chapter shows a grid on Ray equal to the local one.)"""
    cfgs = [FEDREG.config(SETTING, m, 'smoke', seed=s, device='cpu', rounds=4) for m in METHODS for s in SEEDS]
    assert all((local_grid[0] / c.run_name / 'summary.json').is_file() for c in cfgs)  # the grid's configs, run whole
    whole = run_many(cfgs, local_grid[0], workers=1)  # loaded, not run again
    for c in cfgs[:2]:
        shutil.copytree(local_grid[0] / c.run_name, tmp_path / 'runs' / c.run_name)  # half the grid done before
    before = {c.run_name: files(tmp_path / 'runs' / c.run_name) for c in cfgs[:2]}
    marker = tmp_path / 'killed'
    results = run_many(cfgs, tmp_path / 'runs', backend='ray', callbacks=[killer(str(marker), 2)])
    assert marker.exists(), 'a worker was killed'
    assert [r.cfg for r in results] == cfgs and all(r.summary['rounds'] == 4 for r in results)
    assert {r.run_dir.name: files(r.run_dir) for r in results[:2]} == before, 'finished runs are loaded, not touched'
    segments = {
        r.run_dir.name: [s['from_round'] for s in json.loads((r.run_dir / 'env.json').read_text())['segments']]
        for r in results[2:]
    }
    assert sorted(segments.values()) == [[1], [1, 3]], (
        segments
    )  # one ran through; the killed one resumed after its round-2 checkpoint
    for a, b in zip(results, whole):
        pd.testing.assert_frame_equal(untimed(a.metrics), untimed(b.metrics), check_exact=True)


def named_killer(marker: str, at_round: int):
    """A callback that records the Ray task it runs in (by name, in `marker`/names) each round, and kills its own
    worker at `at_round` the first time any run reaches it, naming that task in `marker`/killed."""

    def cb(row):
        name = ray.get_runtime_context().get_task_name()
        Path(marker, 'names').mkdir(parents=True, exist_ok=True)
        Path(marker, 'names', name).touch()
        if row['round'] == at_round:
            try:
                fd = os.open(Path(marker, 'killed'), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return
            os.write(fd, name.encode())
            os.close(fd)
            os._exit(1)

    return cb


def test_a_grid_survives_its_failed_runs(local_ray, tmp_path):
    """Three runs as Ray tasks, named by their runs, with no retries: one whose data are missing (its own error), one
    whose worker dies at round 2 (retries exhausted), and one that runs through. The third finishes; the grid ends
    with a `GridError` naming the two others, kept in failed_runs.json; fail_fast=True raises the first error."""
    good = ExperimentConfig(
        dataset='digits', model='mlp', num_clients=4, clients_per_round=2, rounds=2, batch_size=20, device='cpu'
    )
    cfgs = [good.replace(dataset='cifar10', data_root=str(tmp_path / 'no-data')), good, good.replace(seed=1)]
    with pytest.raises(GridError) as e:
        run_many(cfgs, tmp_path / 'runs', backend='ray', retries=0, callbacks=[named_killer(str(tmp_path), 2)])
    killed = (tmp_path / 'killed').read_text()
    survivor = next(c for c in cfgs[1:] if c.run_name != killed)
    print(e.value)
    assert sorted(p.name for p in (tmp_path / 'names').iterdir()) == sorted(c.run_name for c in cfgs[1:])
    assert sorted(f.name for f in e.value.failed) == sorted([cfgs[0].run_name, killed])
    errors = {f.name: f.error for f in e.value.failed}
    assert errors[cfgs[0].run_name].startswith('FileNotFoundError: CIFAR-10') and 'Worker' in errors[killed]
    assert e.value.results[cfgs.index(survivor)].summary['rounds'] == 2
    assert str(e.value).startswith('2 of 3 runs failed; the other 1 finished') and 'Re-run the same call' in str(
        e.value
    )
    assert sorted(json.loads((tmp_path / 'runs' / 'failed_runs.json').read_text())) == sorted(errors)
    with pytest.raises(Exception, match='CIFAR-10: expected') as first:
        run_many(cfgs[:1], tmp_path / 'runs', backend='ray', fail_fast=True)
    assert not isinstance(first.value, GridError)


def assigned(folder: str):
    "A callback that records, at round 1, the resources Ray gave the task it runs in, by the task's name."

    def cb(row):
        if row['round'] == 1:
            ctx = ray.get_runtime_context()
            Path(folder).mkdir(parents=True, exist_ok=True)
            Path(folder, ctx.get_task_name()).write_text(json.dumps(ctx.get_assigned_resources()))

    return cb


def test_each_task_asks_for_its_runs_memory(local_ray, tmp_path, monkeypatch):
    """Each run's task is given the memory its config asks for: its own memory_per_run_gb, else the estimate
    (run_memory_gb); FEDREPRO_MEMORY_PER_RUN_GB replaces the estimate, not a config's own."""
    base = ExperimentConfig(
        dataset='digits', model='mlp', num_clients=4, clients_per_round=2, rounds=1, batch_size=20, device='cpu'
    )
    cfgs = [base, base.replace(seed=1, memory_per_run_gb=0.5)]
    monkeypatch.delenv(MEMORY_PER_RUN_ENV, raising=False)
    run_many(cfgs, tmp_path / 'runs', backend='ray', callbacks=[assigned(str(tmp_path / 'a'))])
    monkeypatch.setenv(MEMORY_PER_RUN_ENV, '0.75')
    run_many(cfgs, tmp_path / 'again', backend='ray', callbacks=[assigned(str(tmp_path / 'b'))])
    got = {
        (d, c.run_name): json.loads((tmp_path / d / c.run_name).read_text())['memory'] / 2**30
        for d in 'ab'
        for c in cfgs
    }
    assert run_memory_gb(base) == 1.0 + 0.25  # 1 GiB and the model's copies, rounded up to a quarter
    assert list(got.values()) == [run_memory_gb(base), 0.5, 0.75, 0.5], got
