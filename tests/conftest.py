import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from filelock import FileLock

os.environ.setdefault('PYTHONHASHSEED', '0')


@pytest.fixture
def cpu_cfg():
    "A small, fast config factory on the CPU."
    from fedrepro.config import ExperimentConfig

    def make(**kw):
        base = dict(model='mlp', num_clients=10, clients_per_round=5, rounds=3, lr=0.05, batch_size=20, device='cpu')
        return ExperimentConfig(**{**base, **kw})

    return make


@pytest.fixture
def cli_run_with(tmp_path):
    """Run `fedrepro <args>` in a fresh process with every hyperparameter of `params` given by `--set`; check each
    was recorded; return the run's metrics."""
    import json
    import subprocess
    import sys
    import pandas as pd

    def run(args, params):
        sets = [
            a for k, v in params.items() for a in ('--set', f'{k}={json.dumps(v) if not isinstance(v, str) else v}')
        ]
        code = 'import sys; from fedrepro.cli import main; main(sys.argv[1:])'
        p = subprocess.run(
            [sys.executable, '-c', code, *args, *sets, '--out', str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert p.returncode == 0, p.stderr
        (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
        assert json.loads((run_dir / 'config.json').read_text())['config']['params'] == params
        return pd.read_csv(run_dir / 'metrics.csv')

    return run


@pytest.fixture
def resumes_identically(tmp_path):
    """Run `cfg` whole, and again interrupted after round `stop_at` then resumed; assert `cols` of both metrics are
    equal; return the whole run."""
    import pandas as pd
    from fedrepro.runner import run

    class Stop(Exception):
        pass

    def check(cfg, cols, stop_at: int = 2):
        def stop(row):
            if row['round'] == stop_at:
                raise Stop

        full = run(cfg, tmp_path / 'whole')
        with pytest.raises(Stop):
            run(cfg, tmp_path / 'cut', callbacks=[stop])
        pd.testing.assert_frame_equal(run(cfg, tmp_path / 'cut').metrics[cols], full.metrics[cols])
        return full

    return check


ROOT = Path(__file__).resolve().parents[1]
_ARTIFACTS = pytest.StashKey[list]()


@pytest.fixture(scope="session")
def site(tmp_path_factory) -> Path:
    """Build the book once per test run in a copy of the project, the first pytest-xdist worker to ask building it
    while the others wait; its _docs/ (test_book.py, test_browser.py only read it)."""
    pytest.importorskip(
        "smalldocs", reason="smalldocs is not importable (pip install -e '.[dev]'); the offline book cannot be built"
    )
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' folders' parent
    with FileLock(str(shared / "book.lock")):
        return _built_book(shared / "book")


def _built_book(work: Path) -> Path:
    "The book's _docs/ built in `work`, a copy of the project, unless an earlier build there finished."
    if (work / "built").is_file():
        return work / "_docs"
    nbs = ROOT / "nbs"
    if not [p for p in nbs.glob("*.ipynb") if not p.name.startswith(("_", "."))]:
        pytest.fail(f"no notebooks in {nbs}")
    shutil.rmtree(work, ignore_errors=True)  # what a failed build left
    work.mkdir()
    for name in ("settings.ini", "_quarto.yml"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(nbs, work / "nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    code = "from fedrepro.cli import main; main(['book'])"
    r = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=900)
    if r.returncode:
        pytest.fail(f"fedrepro book failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    (work / "built").touch()
    return work / "_docs"


@pytest.fixture(scope="session")
def artifacts(request) -> list:
    "Lines naming what tests wrote for people to look at (screenshots): printed at the end of the run."
    return request.config.stash.setdefault(_ARTIFACTS, [])


def pytest_terminal_summary(terminalreporter, config):
    for line in config.stash.get(_ARTIFACTS, []):
        terminalreporter.write_line(line)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    "Under pytest-xdist: the lines a worker's tests named reach the summary the controller prints."
    node.config.stash.setdefault(_ARTIFACTS, []).extend(getattr(node, 'workeroutput', {}).get('artifacts', []))


def pytest_sessionfinish(session):
    if hasattr(session.config, 'workeroutput'):  # an xdist worker: hand its lines to the controller
        session.config.workeroutput['artifacts'] = session.config.stash.get(_ARTIFACTS, [])


# `make test` runs pytest on every core (pytest-xdist, --dist loadgroup); the longest groups are collected first, so
# they start first. The groups are meant to keep tests that share an expensive module or session fixture, or a local
# Ray, on one worker; with pytest 9.2 and pytest-xdist 3.8 loadgroup does not group (pytest-xdist issue 1386: the test
# ids it suffixes with the group no longer change), so the book is shared through a lock (`site`) and Ray's tests and
# Flower's may run side by side, which they pass. Kept so that grouping returns with a pytest-xdist that honours it.
GROUPS = {
    'test_notebooks': 'notebooks',
    'test_book': 'book',
    'test_browser': 'book',  # the book, built once (`site`)
    'test_ray': 'ray',
    'test_flower': 'ray',  # one local Ray at a time
    **{
        m: m
        for m in (
            'test_bad_inputs',
            'test_distill',
            'test_embedded',
            'test_gpu_check',
            'test_partitions',
            'test_sixth_paper',
        )
    },  # a module-scoped fixture each
}
FIRST = ['notebooks', 'book', 'ray']


def pytest_collection_modifyitems(config, items):
    for item in items:
        if group := GROUPS.get(item.module.__name__.rpartition('.')[2]):
            item.add_marker(pytest.mark.xdist_group(group))
    rank = lambda item: next(
        (i for i, g in enumerate(FIRST) if GROUPS.get(item.module.__name__.rpartition('.')[2]) == g), len(FIRST)
    )
    items.sort(key=rank)  # stable: within a rank, the collection order
