"""A sixth paper joins without editing fedrepro: a package of its own registers it by an entry point
(`fedrepro.papers`), with one setting, two methods, one claim and one job notebook beside it; `fedrepro list` names it,
its job runs, its claim is judged, and the report has its section."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]

PAPER = '''
from pathlib import Path
from fedrepro.core import PAPERS
from fedrepro.metrics import best_accuracy
from fedrepro.repro import Paper, Setting, Claim, Compare, BEST_ACC

TOY = PAPERS.register('toy', Paper(
    'toy', 'A. Author, *A toy paper*, Nowhere 2026, arXiv:0000.00000', {'FedAvg': 'fedavg', 'Toy': 'fedprox'},
    {'digits': Setting(dict(dataset='digits', partition='classes', partition_params={'classes_per_client': 2},
                            model='mlp', num_clients=20, clients_per_round=5, rounds=4, batch_size=10),
                       {'FedAvg': {'lr': 0.1}, 'Toy': {'lr': 0.1, 'params': {'mu': 0.01}}}, mini={},
                       stand_in='scikit-learn digits')},
    cells=lambda runs, chance, health: [dict(method=m, metric='ACC', value=best_accuracy(c)) for m, c in runs.items()],
    artefacts={'toy_table1': 'Table 1: accuracy'},
    claims=[Claim('T1', 'Toy beats FedAvg (Table 1)', (Compare('digits', 'ACC', 'Toy', 'FedAvg', 'higher'),))],
    metrics={'ACC': BEST_ACC}, feeds={'toy_table1': ('T1',)}, default_jobs=('toy_table1',),
    job_dir=Path(__file__).parent / 'jobs'))
'''

JOB = '''
from pathlib import Path
from fedrepro.core import PAPERS
from fedrepro.repro import SEEDS, run_table, seed_cells, table_rows, write_seed_csv, judge
from fedrepro.results import write_repro_csv
TOY = PAPERS['toy']
seeds = [int(s) for s in seeds] if seeds is not None else SEEDS[scale]
curves = run_table(TOY, ['digits'], scale, seeds, Path(out_dir) / 'runs', device, data_root)
cells = seed_cells(TOY, curves, scale)
write_repro_csv(table_rows(TOY, cells, scale, '1').drop(columns='shown'), out_dir, 'toy_table1')
write_seed_csv(cells, out_dir, 'toy_table1')
print(judge(TOY.claims_of('toy_table1'), cells)[['claim', 'outcome']])
'''


@pytest.fixture(scope='module')
def plugin(tmp_path_factory):
    """A package `toypaper` on a path of its own, with its entry point and its job notebook, and the environment that
    sees it."""
    root = tmp_path_factory.mktemp('plugin')
    (root / 'toypaper').mkdir()
    (root / 'toypaper' / '__init__.py').write_text(PAPER)
    (root / 'toypaper' / 'jobs').mkdir()
    params = nbformat.v4.new_code_cell(
        "scale = 'smoke'\nseeds = None\ndevice = 'cpu'\ndata_root = 'data'\nout_dir = '.'",
        metadata={'tags': ['parameters']},
    )
    kernel = {
        'kernelspec': {'name': 'python3', 'display_name': 'Python 3', 'language': 'python'},
        'language_info': {'name': 'python'},
    }
    nb = nbformat.v4.new_notebook(cells=[params, nbformat.v4.new_code_cell(JOB)], metadata=kernel)
    nbformat.write(nb, root / 'toypaper' / 'jobs' / 'toy_table1.ipynb')
    info = root / 'toypaper-0.1.dist-info'
    info.mkdir()
    (info / 'METADATA').write_text('Metadata-Version: 2.1\nName: toypaper\nVersion: 0.1\n')
    (info / 'entry_points.txt').write_text('[fedrepro.papers]\ntoy = toypaper\n')
    env = {
        **os.environ,
        'PYTHONPATH': os.pathsep.join([str(root), os.environ.get('PYTHONPATH', '')]),
        'OMP_NUM_THREADS': '1',
        'FEDREPRO_WORKERS': '1',  # its runs in the job's kernel: a pool's start costs more than they do
    }
    return root, env


def fedrepro(env, *args, cwd=ROOT):
    return subprocess.run(
        [sys.executable, '-c', 'from fedrepro.cli import main; main()', *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_a_sixth_paper_is_listed_run_judged_and_reported(plugin, tmp_path):
    root, env = plugin
    listed = fedrepro(env, 'list')
    assert listed.returncode == 0, listed.stderr
    assert 'toy_table1' in listed.stdout and '  toy      1 claims; artefacts: toy_table1' in listed.stdout
    ran = fedrepro(env, 'reproduce', 'toy', '--scale', 'smoke', '--seeds', '0,1,2,3,4', '--out', str(tmp_path))
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert (tmp_path / 'toy_table1_seeds.csv').is_file()
    script = textwrap.dedent(f'''
        from pathlib import Path
        from fedrepro.book import execute_report
        from fedrepro.repro import artefact_sources, report_verdicts, report_papers, default_jobs
        v = report_verdicts(artefact_sources({str(tmp_path)!r}), ['toy']).iloc[0]
        print(report_papers()[-1], default_jobs()[-1], v['claim'], v['outcome'], v['comparisons'], sep='|')
        nb = execute_report(Path({str(ROOT)!r}), Path({str(tmp_path)!r}))
        print('REPORT', nb)
    ''')
    judged = subprocess.run(
        [sys.executable, '-c', script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert judged.returncode == 0, judged.stderr[-2000:]
    head = judged.stdout.splitlines()[0].split('|')
    assert head[:3] == ['toy', 'toy_table1', 'T1'] and head[3] != 'not testable here' and head[4].endswith('of 1'), head
    report = json.loads(Path(judged.stdout.split('REPORT ')[1].strip()).read_text(encoding='utf-8'))
    shown = ''.join(
        ''.join(o.get('data', {}).get('text/markdown', '')) for c in report['cells'] for o in c.get('outputs', [])
    )
    assert '## Toy' in shown and 'A toy paper' in shown and '**1 claims:' in shown


def test_a_misspelt_metric_in_a_claim_fails_at_registration(plugin, tmp_path):
    root, env = plugin
    bad = tmp_path / 'badpaper'
    bad.mkdir()
    (bad / '__init__.py').write_text(
        PAPER.replace("'toy'", "'bad'").replace("Compare('digits', 'ACC'", "Compare('digits', 'AC'")
    )
    info = tmp_path / 'badpaper-0.1.dist-info'
    info.mkdir()
    (info / 'METADATA').write_text('Metadata-Version: 2.1\nName: badpaper\nVersion: 0.1\n')
    (info / 'entry_points.txt').write_text('[fedrepro.papers]\nbad = badpaper\n')
    env = {**env, 'PYTHONPATH': os.pathsep.join([str(tmp_path), env['PYTHONPATH']])}
    listed = fedrepro(env, 'list')
    assert (
        listed.returncode != 0
        and "bad claim T1: metric='AC' is not allowed: a declared metric: one of ['ACC']" in listed.stderr
    )
