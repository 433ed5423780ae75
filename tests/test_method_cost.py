"""bench/method_cost.py on bad input: one line, no traceback, before anything runs."""

import subprocess
import sys
from pathlib import Path
import pytest

BENCH = Path(__file__).resolve().parent.parent / 'bench' / 'method_cost.py'


@pytest.mark.parametrize(
    'args, line',
    [
        (['--rounds', '1'], "argument --rounds: '1' is not allowed: an integer >= 2 (round 1 is not timed)"),
        (['--repeats', '0'], "argument --repeats: '0' is not allowed: an integer >= 1"),
    ],
)
def test_bad_input_is_one_line(args, line, tmp_path):
    done = subprocess.run([sys.executable, BENCH, *args, '--out', tmp_path / 'x.csv'], capture_output=True, text=True)
    assert done.returncode == 2 and 'Traceback' not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == f'method_cost.py: error: {line}'
    assert not (tmp_path / 'x.csv').exists()
