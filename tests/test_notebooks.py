"""Every notebook runs (nbdev_test), in two fixed parts, each in one process, in order: nbdev_test's workers each run
several notebooks, so what one leaves in the library's registries reaches the next; fixed parts make that reproducible
instead of a chance pairing, and let the parts run side by side. `make nbtest` runs them all in one process."""

import os
import re
import subprocess
import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).resolve().parents[1]
PARTS = {'the library': r'^0', 'the papers and the report': r'^(1|index)'}  # of about equal time
# `nbdev_test --n_workers 0 --file_re PART`, ended without the exit handlers of the IPython shell each notebook ran in:
# each collects garbage over the whole heap (7 s for the library's notebooks), and nothing else
NBDEV_TEST = '''
import os, sys
from nbdev.test import nbdev_test
try:
    nbdev_test.__wrapped__(n_workers=0, file_re=sys.argv[1])  # the function under its command-line parser
    code = 0
except SystemExit as e:
    code = e.code
sys.stdout.flush()
sys.stderr.flush()
os._exit(code if isinstance(code, int) else 1)
'''


def notebooks(pattern: str) -> list[str]:
    return sorted(p.name for p in (ROOT / 'nbs').glob('*.ipynb') if re.match(pattern, p.name))


def test_the_parts_hold_every_notebook_once():
    every = [n for n in notebooks('') if not n.startswith(('_', '.'))]
    assert sorted(n for pattern in PARTS.values() for n in notebooks(pattern)) == every


@pytest.mark.parametrize('part', PARTS)
def test_every_notebook_runs(part):
    env = {**os.environ, 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '1')}
    argv = [sys.executable, '-c', NBDEV_TEST, PARTS[part]]
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-6000:]
