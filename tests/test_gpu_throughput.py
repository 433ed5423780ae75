"""bench/gpu_throughput.py at --device cpu on tiny settings: one row per level that fits the budget, the rates its
timings give, identical runs."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
import pandas as pd
import pytest

BENCH = Path(__file__).resolve().parent.parent / 'bench' / 'gpu_throughput.py'


def bench_module():
    spec = importlib.util.spec_from_file_location('gpu_throughput', BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_budget_estimate():
    fits = bench_module().fits
    assert fits(10, 30, 2, 4, 150) and not fits(100, 30, 2, 4, 150)  # 100 s gone + 60 s estimated > 150 s
    assert not fits(0, 10, 1, 64, 600)  # 64 times the runs of a 10 s level


def smoke(out, *more):
    args = [
        '--device',
        'cpu',
        '--rounds',
        '1',
        '--local-epochs',
        '1',
        '--runs-per-worker',
        '1',
        '--out',
        str(out),
        *more,
    ]
    done = subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={'OMP_NUM_THREADS': '1', 'PATH': '/usr/bin:/bin'},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout, pd.read_csv(out / 'gpu_throughput.csv')


def test_cpu_smoke(tmp_path):
    _, df = smoke(tmp_path, '--levels', '1,2', '--budget-s', '60')
    assert df['runs_per_gpu'].tolist() == [1, 2] and df['workers'].tolist() == [1, 2] and df['runs'].tolist() == [1, 2]
    assert df['identical'].all()
    assert df['runs_per_hour'].to_numpy() == pytest.approx(df['runs'] * 3600 / df['wall_s'], rel=0.02)
    assert df['rounds_per_hour'].to_numpy() == pytest.approx(df['workers'] * 3600 / df['round_s'], rel=0.02)
    assert df['speedup'].iloc[0] == 1 and (df['round_s'] > 0).all()
    assert df['gpu'].str.startswith('cpu').all() and df['peak_gb'].isna().all() and (df['device'] == 'cpu').all()


def test_levels_stop_at_the_budget_and_the_cores(tmp_path):
    printed, df = smoke(tmp_path, '--levels', '1,2', '--budget-s', '0.01')
    assert df['runs_per_gpu'].tolist() == [1] and 'runs_per_gpu=2: skipped, it would end past --budget-s' in printed
    printed, df = smoke(tmp_path, '--levels', f'1,{10 * (os.cpu_count() or 1)}')
    assert df['runs_per_gpu'].tolist() == [1] and 'CPU cores' in printed
