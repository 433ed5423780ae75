"`bench/gpu_check.py` at `--device cpu --scale smoke`: every row runs, the CSV has its columns, CPU against CPU is exact, and the budget stops rows."
import csv, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'bench' / 'gpu_check.py'

def run_check(tmp_path, *args) -> list[dict]:
    subprocess.run([sys.executable, str(SCRIPT), '--device', 'cpu', '--scale', 'smoke', '--out', str(tmp_path), *args],
                   check=True, cwd=ROOT, capture_output=True, text=True, timeout=300)
    with open(tmp_path / 'gpu_check.csv', newline='') as f: return list(csv.DictReader(f))

@pytest.fixture(scope='module')
def smoke(tmp_path_factory): return run_check(tmp_path_factory.mktemp('gpu_check'))

def test_columns_and_every_row_ran(smoke):
    sys.path.insert(0, str(SCRIPT.parent))
    from gpu_check import COLUMNS
    assert list(smoke[0]) == COLUMNS
    assert len(smoke) >= 20 and all(r['status'] == 'ok' for r in smoke), [(r['method'], r['status']) for r in smoke if r['status'] != 'ok']
    assert {r['device'] for r in smoke} == {'cpu'} and all(r['torch'] and r['date'] for r in smoke)

def test_covers_every_algorithm_and_the_attacks(smoke):
    algorithms = {r['algorithm'] for r in smoke if r['algorithm']}
    assert {'fedavg', 'fedsgd', 'fedprox', 'scaffold', 'fedcurv', 'fedreg', 'fedgc', 'fedimp', 'fedimp_rwalk', 'fedgg', 'moon',
            'fedntd', 'fedcad', 'fedssd'} <= algorithms
    attacks = [r for r in smoke if r['method'].startswith('attack')]
    assert attacks and all(float(r['attack_s']) > 0 and int(r['attack_iters']) == 32000 for r in attacks)

def test_cpu_against_cpu_is_exact_and_times_are_positive(smoke):
    runs = [r for r in smoke if not r['method'].startswith('attack')]
    assert all(float(r['check_diff']) == 0 and r['check'] == 'pass' for r in runs)
    assert all(float(r['round_s']) > 0 and float(r['eval_s']) > 0 and float(r['upload_mib']) > 0 for r in runs)
    assert all(int(r['clients_timed']) == int(r['clients_per_round']) for r in runs)

def test_spent_budget_measures_nothing(tmp_path):
    rows = run_check(tmp_path, '--budget-s', '1e-9')
    assert rows and all(r['status'] == 'not measured (time budget)' and r['round_s'] == '' for r in rows)
