"""`bench/gpu_check.py` at `--device cpu --scale smoke`: every row runs, the CSV has its columns, CPU against CPU is
exact, and the budget stops rows."""

import csv
import subprocess
import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / 'bench' / 'gpu_check.py'


def run_check(tmp_path, *args) -> list[dict]:
    check_into(tmp_path, *args)
    return rows_of(tmp_path)


def check_into(folder, *args):
    subprocess.run(
        [sys.executable, str(SCRIPT), '--device', 'cpu', '--scale', 'smoke', '--out', str(folder), *args],
        check=True,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def rows_of(folder) -> list[dict]:
    with open(folder / 'gpu_check.csv', newline='') as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope='session')
def smoke(once):
    "The smoke check's rows, run once per test run; every round timed at its K clients however loaded the machine."
    return rows_of(once('gpu_check', lambda d: check_into(d, '--round-cap-s', '1e9')))


def test_columns_and_every_row_ran(smoke):
    sys.path.insert(0, str(SCRIPT.parent))
    from gpu_check import COLUMNS

    assert list(smoke[0]) == COLUMNS
    assert len(smoke) >= 20 and all(r['status'] == 'ok' for r in smoke), [
        (r['method'], r['status']) for r in smoke if r['status'] != 'ok'
    ]
    assert {r['device'] for r in smoke} == {'cpu'} and all(r['torch'] and r['date'] for r in smoke)


def test_covers_every_algorithm_and_the_attacks(smoke):
    algorithms = {r['algorithm'] for r in smoke if r['algorithm']}
    assert {
        'fedavg',
        'fedsgd',
        'fedprox',
        'scaffold',
        'fedcurv',
        'fedreg',
        'fedgc',
        'fedimp',
        'fedimp_rwalk',
        'fedgg',
        'moon',
        'fedntd',
        'fedcad',
        'fedssd',
    } <= algorithms
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


def _gpu_check():
    sys.path.insert(0, str(SCRIPT.parent))
    import gpu_check

    return gpu_check


def test_the_float64_comparison_runs_every_algorithm():
    """The fallback where float32 exceeds the tolerance: each smoke row's first update also runs with model and images
    in float64"""
    "(its own float64 init, the same on every device, so not the float32 numbers), and CPU against CPU it is exact."
    import torch

    gc = _gpu_check()
    args, cpu, seen = gc.parse(['--device', 'cpu', '--scale', 'smoke']), torch.device('cpu'), set()
    for row in gc.all_rows('smoke'):
        cfg = gc.row_config(row, args)
        if (key := gc.workload(cfg)) in seen:
            continue
        seen.add(key)
        n = min(gc.client_size(cfg), cfg.batch_size, args.max_client)
        data = gc.synthetic(cfg, n, 2, n * 4, min(cfg.aux_per_class, 2))
        f32, f64 = (gc.first_update(cfg, data, cpu, 2, dt) for dt in (torch.float32, torch.float64))
        assert f32.keys() == f64.keys() and f64, row
        assert any(not torch.equal(f32[k], f64[k]) for k in f32), row  # float64 did run
        assert gc.compare_update(cfg, data, 2, cpu, torch.float64) == (0.0, True)


def test_a_float32_disagreement_is_judged_in_float64(monkeypatch):
    import torch

    gc = _gpu_check()
    args = gc.parse(['--device', 'cpu', '--scale', 'smoke'])
    cfg = gc.row_config(dict(paper='fedssd', setting='CIFAR-10', method='FedAvg'), args)
    calls = []

    def compare(cfg, data, steps, device, dtype):
        calls.append(dtype)
        return (0.06, False) if dtype == torch.float32 else (3e-11, True)

    monkeypatch.setattr(gc, 'compare_update', compare)
    assert gc.check_update(cfg, args, torch.device('cpu')) == (0.06, 'pass in float64 (3e-11)') and calls == [
        torch.float32,
        torch.float64,
    ]
    monkeypatch.setattr(gc, 'compare_update', lambda *a: (0.06, False))
    assert gc.check_update(cfg, args, torch.device('cpu')) == (0.06, 'fail (float64: 0.06)')


def test_resume_keeps_what_ran_and_measures_failures_again(smoke, tmp_path):
    "`--resume` on its own CSV: rows that ran stay as they were, a failed row is measured again (here: out of budget)."
    earlier = [dict(r) for r in smoke]
    earlier[0]['status'] = 'error: RuntimeError: on another device'
    with open(tmp_path / 'gpu_check.csv', 'w', newline='') as f:
        w = csv.DictWriter(f, list(earlier[0]))
        w.writeheader()
        w.writerows(earlier)
    rows = run_check(tmp_path, '--budget-s', '1e-9', '--resume', str(tmp_path / 'gpu_check.csv'))
    assert rows[0]['status'] == 'not measured (time budget)'
    assert rows[1:] == earlier[1:]


def test_a_zero_test_fraction_keeps_the_datasets_test_set():
    """FedImp's `local_split=[0.8, 0.2, 0.0]` tests on the dataset's test set (as `partition_shards` does), not on an
    empty one: its rows failed on 0/0 in `evaluate`. A non-zero fraction is the clients' test parts."""
    gc = _gpu_check()
    cfg = gc.paper_config(dict(paper='fedimp', setting='MNIST MLP', method='FedAvg'))
    assert cfg.partition_params['local_split'] == [0.8, 0.2, 0.0] and gc.test_size(cfg) == 10000
    split = cfg.replace(partition_params={**cfg.partition_params, 'local_split': [0.8, 0.1, 0.1]})
    assert gc.test_size(split) == 6000
    assert all(gc.test_size(gc.paper_config(r)) > 0 for r in gc.all_rows('paper'))


def test_the_fedgc_attack_reads_the_labels_off_resnet9s_bias():
    """FedGC's Figure 5 attacks ResNet-9 (CIFAR10-10), whose last bias is 'classifier.linear.bias': iDLG's labels come
    from it, not from `idlg_labels`'s default 'classifier.bias' (a KeyError on the H200). IG only: DLG's L-BFGS on
    ResNet-9 takes a minute on the CPU, and both read the labels the same way."""
    import torch

    gc = _gpu_check()
    args = gc.parse(['--device', 'cpu', '--scale', 'smoke'])
    row = next(r for r in gc.attack_rows('paper') if r['paper'] == 'fedgc' and r['method'] == 'attack IG')
    assert row['setting'] == 'CIFAR10-10' and gc.paper_config(row).model == 'resnet9'
    out = gc.attack_time(row, args, torch.device('cpu'))
    assert out['attack_s'] > 0 and out['attack_iters'] == 1000 and out['params'] > 6e6


BAD = {  # case: (arguments, a file's bytes for {file} or None, words of the one line)
    'check steps negative': (['--check-steps=-1'], None, '--check-steps=-1 is not allowed'),
    'resume missing': (['--resume', '{missing}'], None, 'an earlier gpu_check.csv (FileNotFoundError'),
    'resume without its columns': (['--resume', '{file}'], b'paper,setting\nx,y\n', "(KeyError: 'status')"),
    'resume binary': (['--resume', '{file}'], bytes(range(128, 256)), '(UnicodeDecodeError'),
}


@pytest.mark.parametrize('case', BAD)
def test_bad_input_is_one_line_before_any_row(case, tmp_path, capsys):
    sys.path.insert(0, str(SCRIPT.parent))
    from gpu_check import parse

    args, content, words = BAD[case]
    if content is not None:
        (tmp_path / 'earlier.csv').write_bytes(content)
    where = {'{file}': str(tmp_path / 'earlier.csv'), '{missing}': str(tmp_path / 'missing.csv')}
    with pytest.raises(SystemExit) as e:
        parse(['--device', 'cpu', *(where.get(a, a) for a in args)])
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and words in err[-1], err


@pytest.mark.skipif(__import__('torch').cuda.is_available(), reason='this machine has a GPU')
def test_the_default_device_without_a_gpu_is_one_line(capsys):
    sys.path.insert(0, str(SCRIPT.parent))
    from gpu_check import parse

    with pytest.raises(SystemExit) as e:
        parse([])
    assert e.value.code == 2 and "device='cuda' is not allowed" in capsys.readouterr().err
