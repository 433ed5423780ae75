"The `fedrepro` command, end to end, as a user types it."

import contextlib
import io
import json
import re
import subprocess
import sys
from types import SimpleNamespace
import pandas as pd
import torch
from fedrepro.cli import main

FEDREPRO = [sys.executable, '-m', 'fedrepro.cli']


def fedrepro(*args, cwd=None):
    code = 'import sys; from fedrepro.cli import main; main(sys.argv[1:])'
    return subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def fedrepro_here(*args):
    """`fedrepro args` by `main` in this process, for a command that ends before any run or job starts: its exit code
    and what it printed, as `fedrepro` gives them, without a new process's imports."""
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def test_run_reaches_clearly_above_chance_and_writes_records(tmp_path):
    p = fedrepro(
        'run',
        '--dataset',
        'digits',  # the README's own command, on mnist5k with a CNN, runs in test_readme.py
        '--model',
        'mlp',
        '--partition',
        'dirichlet',
        '--alpha',
        '0.5',
        '--num-clients',
        '10',
        '--clients-per-round',
        '10',
        '--algorithm',
        'fedavg',
        '--rounds',
        '5',
        '--device',
        'cpu',
        '--out',
        str(tmp_path),
        '--no-progress',
    )
    assert p.returncode == 0, p.stderr
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert {'config.json', 'metrics.csv', 'summary.json', 'env.json'} <= {f.name for f in run_dir.iterdir()}
    m = pd.read_csv(run_dir / 'metrics.csv')
    assert m['round'].tolist() == list(range(6))
    summary = json.loads((run_dir / 'summary.json').read_text())
    assert summary['final_acc'] > 0.5, summary  # chance is 0.1
    assert json.loads(p.stdout.split('records:')[0])['final_acc'] == summary['final_acc']


def test_client_workers_end_at_the_ordinary_runs_model(tmp_path, monkeypatch):
    """`--client-workers 2` trains each round's clients in 2 processes and writes its records in the run's folder: the
    ordinary run's per-round accuracies, final accuracy and model, bit for bit, at the workers' one thread. What it
    cannot carry is refused in one line."""
    monkeypatch.setenv('OMP_NUM_THREADS', '1')  # the ordinary run at the client workers' thread count
    args = ['run', '--dataset', 'digits', '--model', 'mlp', '--algorithm', 'scaffold', '--num-clients', '4']
    args += ['--clients-per-round', '3', '--rounds', '3', '--batch-size', '20', '--lr', '0.05', '--device', 'cpu']
    args += ['--out', str(tmp_path), '--no-progress']
    ordinary, spread = fedrepro(*args), fedrepro(*args, '--client-workers', '2')
    assert ordinary.returncode == 0 and spread.returncode == 0, ordinary.stderr + spread.stderr
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    folder = run_dir / 'client_workers2'
    assert spread.stdout.rstrip().endswith(f'records: {folder}')
    own, theirs = (json.loads((d / 'summary.json').read_text()) for d in (run_dir, folder))
    assert theirs['final_acc'] == own['final_acc'] and theirs['client_workers'] == 2, (own, theirs)
    x = torch.load(run_dir / 'checkpoint.pt', weights_only=False)['federation']['algo']['x']
    assert torch.equal(torch.load(folder / 'model.pt')['x'], x)
    ours, engine = pd.read_csv(folder / 'metrics.csv'), pd.read_csv(run_dir / 'metrics.csv')
    assert ours['test_acc'].tolist() == engine['test_acc'][1:].tolist()  # rounds 1-3; round 0 is the initial model
    p = fedrepro(*args, '--client-workers', '2', '--set', 'eval_local=true')
    assert p.returncode == 2 and p.stderr.count('\n') == 1 and 'eval_local=True is not allowed' in p.stderr, p.stderr


def test_set_reaches_fields_and_bad_values_exit_2(tmp_path):
    p = fedrepro_here(
        'run', '--model', 'mlp', '--rounds', '1', '--set', 'eval_every=1', '--set', 'lr=-1', '--out', str(tmp_path)
    )
    assert p.returncode == 2 and 'lr=-1.0 is not allowed: a finite number > 0' in p.stderr
    p = fedrepro_here('run', '--partition', 'classes', '--classes-per-client', '12', '--out', str(tmp_path))
    assert p.returncode == 2 and 'classes_per_client=12' in p.stderr


def test_an_unusable_out_is_one_line_naming_it(tmp_path):
    a_file = tmp_path / 'a-file'
    a_file.write_text('')
    for out in (str(a_file), '/dev/null/runs'):
        p = fedrepro_here('run', '--model', 'mlp', '--rounds', '1', '--out', out)
        assert p.returncode == 2 and 'Traceback' not in p.stderr and out in p.stderr, p.stderr


def test_list_names_everything():
    p = fedrepro_here('list')
    assert p.returncode == 0
    for name in ('mnist5k', 'iid', 'classes', 'dirichlet', 'cnn5', 'mlp', 'fedavg', 'fedsgd', 'quickstart'):
        assert name in p.stdout


def test_reproduce_refuses_unknown_names_and_scales(tmp_path):
    p = fedrepro_here('reproduce', 'fedreg_table99', '--out', str(tmp_path))
    assert p.returncode == 2 and "reproduction='fedreg_table99' is not allowed" in p.stderr
    p = fedrepro_here(
        'reproduce', 'quickstart', 'fedssd_figure6', '--set', 'profile=P', '--out', str(tmp_path)
    )  # refused before any job runs
    assert p.returncode == 2 and "parameter='profile' is not allowed" in p.stderr and not list(tmp_path.iterdir())


def test_reproduce_reports_a_failing_notebook_in_one_line_and_keeps_the_previous_results(tmp_path):
    previous = {'quickstart.ipynb': '{}', 'quickstart.csv': 'good', 'quickstart_seeds.csv': 'good seeds'}
    for f, text in previous.items():
        (tmp_path / f).write_text(text)
    p = fedrepro('reproduce', 'quickstart', '--scale', 'paper', '--out', str(tmp_path))
    assert p.returncode == 2
    assert (
        "quickstart failed at cell" in p.stderr
        and "scale='paper' is not allowed" in p.stderr
        and 'previous results are kept' in p.stderr
    )
    assert {f: (tmp_path / f).read_text() for f in previous} == previous
    assert "scale='paper' is not allowed" in (tmp_path / 'quickstart.failed.ipynb').read_text()


def test_reproduce_is_quiet_one_progress_bar_and_no_kernel_warnings(tmp_path):
    """What a job prints is its progress bar, its notebook and its minutes: no warning a user cannot act on (ipykernel's
    'running over TCP without encryption' among them)."""
    p = fedrepro('reproduce', 'fedssd_figure6', '--scale', 'smoke', '--out', str(tmp_path))
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stderr.replace('\r', '\n').splitlines() if l.strip()]
    bar = re.compile(
        r'Executing: +\d+%\|[^|]*\| \d+/\d+ \[[^\]]*\]'
    )  # one tqdm bar, redrawn; nothing after it on a line
    assert lines and all(bar.fullmatch(l) for l in lines), [l for l in lines if not bar.fullmatch(l)]
    assert lines[-1].startswith('Executing: 100%') and p.stdout.splitlines()[-1].startswith('fedssd_figure6 at smoke:')
