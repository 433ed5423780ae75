"""Every bench script refuses bad input as the command line does: argparse's one line naming the argument and what it
takes (exit 2), before anything is measured or written. In this process, each script's `main` given the arguments (a
real process per script is test_method_cost.py's, for one of them)."""

import importlib.util
import sys
from pathlib import Path
import pytest

BENCH = Path(__file__).resolve().parents[1] / 'bench'
ROUNDS = "argument --rounds: '0' is not allowed: an integer >= 1"
UNTIMED = "argument --rounds: '1' is not allowed: an integer >= 2 (round 1 is not timed)"
REPEATS = "argument --repeats: '0' is not allowed: an integer >= 1"
DEVICE = "argument --device: device='tpu' is not allowed: 'auto', 'cpu', 'cuda' or 'cuda:N'"
CASES = {  # script: [(arguments, the error's words)]
    'engine_overhead': [(['--repeats', '0'], REPEATS), (['--device', 'tpu'], DEVICE)],
    'evaluation': [
        (['--repeats', 'x'], "argument --repeats: 'x' is not allowed: an integer >= 1"),
        (['--device', 'tpu'], DEVICE),
    ],
    'fedcurv_round': [(['--rounds', '1'], UNTIMED), (['--device', 'tpu'], DEVICE)],
    'fedreg_floor': [(['--rounds', '0'], ROUNDS), (['--device', 'tpu'], DEVICE)],
    'fedreg_steps': [(['--rounds', '0'], ROUNDS), (['--device', 'tpu'], DEVICE)],
    'method_cost': [(['--rounds', '1'], UNTIMED), (['--repeats', '0'], REPEATS), (['--device', 'tpu'], DEVICE)],
    'parallel_runs': [
        (['--rounds', '0'], ROUNDS),
        (['--workers', '-2'], "argument --workers: '-2' is not allowed: an integer >= 1"),
    ],
    'pooling': [(['--steps', '0'], "argument --steps: '0' is not allowed: an integer >= 1")],
    'startup': [(['--repeats', '0'], REPEATS)],
    'client_workers': [
        (['--rounds', '0'], ROUNDS),
        (['--workers', '1', '0'], "argument --workers: '0' is not allowed: an integer >= 1"),
    ],
    'sgd_reference': [
        (
            ['--rounds', '50'],
            "argument --rounds: '50' is not allowed: an integer >= 100 (the budgets checked are its hundreds)",
        )
    ],
    'eval_share': [(['/nonexistent/runs'], "argument runs: '/nonexistent/runs' is not allowed: a folder that exists")],
}


def script(name: str):
    "bench/<name>.py imported as a module (its folder first on the path, as `python bench/<name>.py` has it)."
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f'bench_{name}', BENCH / f'{name}.py')
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_every_script_with_arguments_is_here():
    takes_arguments = {p.stem for p in BENCH.glob('*.py') if 'add_argument(' in p.read_text()}
    own_tests = {'gpu_check', 'gpu_throughput', 'device_time', 'paper_cost'}  # tested elsewhere, or it reads files
    assert takes_arguments - own_tests == set(CASES), takes_arguments - own_tests ^ set(CASES)


@pytest.mark.parametrize('name, args, words', [(n, a, w) for n, cases in CASES.items() for a, w in cases])
def test_a_bench_script_refuses_bad_input_in_one_line(name, args, words, monkeypatch, capsys, tmp_path):
    main = script(name).main
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, 'argv', [f'{name}.py', *args])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err
    assert e.value.code == 2 and 'Traceback' not in err and not any(tmp_path.iterdir()), err
    assert err.strip().splitlines()[-1] == f'{name}.py: error: {words}', err
