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
def once(tmp_path_factory):
    """`once(name, make)`: the folder `name`, filled by `make(folder)` once per test run. The first pytest-xdist worker
    to ask fills it while the others wait; a failed filling is started again by the next to ask."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base  # the workers' folders' parent

    def fill(name: str, make) -> Path:
        folder = shared / name
        with FileLock(str(shared / f"{name}.lock")):
            if not (shared / f"{name}.done").is_file():
                shutil.rmtree(folder, ignore_errors=True)  # what a failed filling left
                folder.mkdir()
                make(folder)
                (shared / f"{name}.done").touch()
        return folder

    return fill


@pytest.fixture(scope="session")
def shared_runs(once) -> Path:
    "One `runs` folder for every smoke job of the test run (test_repro.py's, the README's), across xdist's workers."
    return once("smoke_runs", lambda folder: None)


@pytest.fixture(scope="session")
def site(once) -> Path:
    """The book built once per test run in a copy of the project; its _docs/ (test_book.py, test_browser.py only read
    it)."""
    pytest.importorskip(
        "smalldocs", reason="smalldocs is not importable (pip install -e '.[dev]'); the offline book cannot be built"
    )
    return once("book", _build_book) / "_docs"


def _build_book(work: Path):
    "The book built in `work`, a copy of the project."
    nbs = ROOT / "nbs"
    if not [p for p in nbs.glob("*.ipynb") if not p.name.startswith(("_", "."))]:
        pytest.fail(f"no notebooks in {nbs}")
    for name in ("settings.ini", "_quarto.yml"):
        shutil.copy(ROOT / name, work / name)
    shutil.copytree(nbs, work / "nbs", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    code = "from fedrepro.cli import main; main(['book'])"
    r = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=900)
    if r.returncode:
        pytest.fail(f"fedrepro book failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")


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


# `make test` runs pytest on every core (pytest-xdist, --dist loadgroup). A group's tests run on one worker: those that
# share an expensive module or session fixture, or a local Ray. The longest groups are collected first, so they start
# first. xdist's own loadgroup reads `xdist_group` marks into the test ids, which pytest 9.2 no longer lets it change
# (pytest-xdist issue 1386), so the groups are given to its scheduler directly.
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
            'test_prose',
            'test_sixth_paper',
        )
    },  # a module-scoped fixture each
}
FIRST = ['notebooks', 'book', 'ray', 'smoke', 'test_sixth_paper', 'test_readme']  # longest first: none ends the run


def smoke_job(nodeid: str) -> str | None:
    "The job a test runs at smoke in the shared `runs` folder (test_repro.py's, and the README's `reproduce`)."
    module, param = Path(nodeid.split('::')[0]).stem, nodeid.partition('[')[2].rstrip(']')
    if module == 'test_repro' and param:
        return param
    return param.removeprefix('reproduce ') if module == 'test_readme' and param.startswith('reproduce ') else None


def group_of(nodeid: str) -> str | None:
    module = Path(nodeid.split('::')[0]).stem
    if module == 'test_notebooks' and '[' in nodeid:
        return f"notebooks {nodeid.split('[')[1]}"  # each part its own unit, so that the parts run side by side
    if job := smoke_job(nodeid):  # a paper's jobs share runs: on two workers at once, one would wait for the other
        return f"smoke {job.split('_')[0]}"
    return GROUPS.get(module)


def rank(item) -> int:
    "The long groups and modules first, in FIRST's order; a part of the chapters ranks as `notebooks`."
    unit = (group_of(item.nodeid) or Path(item.nodeid.split('::')[0]).stem).split(' ')[0]
    return FIRST.index(unit) if unit in FIRST else len(FIRST)


def pytest_collection_modifyitems(config, items):
    items.sort(key=rank)  # stable: within a rank, the collection order


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    "Under --dist loadgroup: a group's tests are one unit of work, every other test a unit of its own, in this order."
    if config.getvalue('dist') != 'loadgroup':
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid) or nodeid

    config.option.loadscopereorder = False  # keep the order above, not the largest groups first
    return ByGroup(config, log)
