"""Every reproduction notebook runs at smoke scale and honours the CSV contract.

They run in this process, as nbdev_test runs the chapters, with the parameters papermill would inject and their runs in
this process too (`FEDREPRO_WORKERS=1`): a kernel's and a pool's start cost more than a smoke job's runs. Every job's
`runs` folder is one folder shared by the session, as `reproduce` shares one `--out`: a config two jobs repeat trains
once (the runner's lock makes a second worker wait for it), which is most of a job's time. The path through papermill,
`reproduce`, is tested in test_cli.py and test_readme.py."""

import atexit
from pathlib import Path
import pandas as pd
import pytest
from execnb.nbio import read_nb, mk_cell
from execnb.shell import CaptureShell
from fedrepro.jobs import check_job, job_path, reproductions, repro_dir
from fedrepro.results import REPRO_COLUMNS
from fedrepro.repro import SEED_COLUMNS
from fedrepro.core import PAPERS
import fedrepro.fedreg
import fedrepro.fedgc
import fedrepro.fedimp  # noqa: F401 (with the two above: registers the papers)

NOTEBOOKS = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / 'nbs' / 'repro').glob('*.ipynb'))


def test_repro_notebooks_are_found():
    assert NOTEBOOKS and reproductions() == NOTEBOOKS


def execute_at_smoke(name: str, out: Path):
    "Job `name` run at smoke in this process, a cell after its parameters cell setting them as `reproduce` does."
    check_job(name, 'smoke', 'cpu')
    nb = read_nb(job_path(name))
    at = next(i for i, c in enumerate(nb.cells) if 'parameters' in c.metadata.get('tags', []))
    params = dict(scale='smoke', device='cpu', data_root=str(Path('data').resolve()), out_dir=str(out))
    nb.cells.insert(at + 1, mk_cell('\n'.join(f'{k} = {v!r}' for k, v in params.items())))
    shell = CaptureShell()
    atexit.unregister(shell.atexit_operations)  # it collects garbage at exit: 0.2-1 s a job, at the end of the run
    shell.run_all(nb, exc_stop=True)


@pytest.mark.parametrize('name', NOTEBOOKS)
def test_reproduction_runs_at_smoke_scale(name, tmp_path, monkeypatch, shared_runs):
    monkeypatch.setenv('FEDREPRO_WORKERS', '1')
    monkeypatch.chdir(tmp_path)
    (tmp_path / 'runs').symlink_to(shared_runs, target_is_directory=True)
    execute_at_smoke(name, tmp_path)
    csvs = sorted(c for c in tmp_path.glob('*.csv') if not c.name.endswith('_seeds.csv'))
    assert csvs, 'a reproduction notebook writes its table as CSV into out_dir'
    for csv in csvs:
        df = pd.read_csv(csv)
        assert list(df.columns) == REPRO_COLUMNS
        assert len(df) and (df['scale'] == 'smoke').all()
        paper = PAPERS[name.split('_')[0]] if name.split('_')[0] in PAPERS else None
        shown = sorted(
            set(df['setting'])
        )  # a figure may name settings of its own (e.g. 'EMNIST (IID)'): those run below paper scale
        paper_only = (
            paper is not None and set(shown) <= set(paper.settings) and not paper.scaled_settings(shown, 'smoke')
        )  # e.g. FedReg's CT scans
        if paper_only:
            assert df['ours'].isna().all(), 'a setting that runs at paper scale only measures nothing below it'
        else:
            assert df['ours'].notna().any(), 'ours is measured, never empty everywhere'
        # every job writes its per-seed cells beside its table: a paper's verdicts read them
        seeds = pd.read_csv(tmp_path / f'{csv.stem}_seeds.csv')
        assert list(seeds.columns) == SEED_COLUMNS and (len(seeds) or paper_only) and seeds['health'].notna().all()


def test_parameters_cell_is_tagged():
    import nbformat

    for name in NOTEBOOKS:
        nb = nbformat.read(repro_dir() / f'{name}.ipynb', as_version=4)
        (cell,) = [c for c in nb.cells if 'parameters' in c.metadata.get('tags', [])]
        for p in ('scale', 'seeds', 'device', 'data_root', 'out_dir'):
            assert f'{p} =' in cell.source, (name, p)
