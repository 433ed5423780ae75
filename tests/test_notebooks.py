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


def notebooks(pattern: str) -> list[str]:
    return sorted(p.name for p in (ROOT / 'nbs').glob('*.ipynb') if re.match(pattern, p.name))


def test_the_parts_hold_every_notebook_once():
    every = [n for n in notebooks('') if not n.startswith(('_', '.'))]
    assert sorted(n for pattern in PARTS.values() for n in notebooks(pattern)) == every


@pytest.mark.parametrize('part', PARTS)
def test_every_notebook_runs(part):
    nbdev_test = Path(sys.executable).parent / 'nbdev_test'
    env = {**os.environ, 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '1')}
    argv = [str(nbdev_test), '--n_workers', '0', '--file_re', PARTS[part]]
    p = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600)
    assert p.returncode == 0, (p.stdout + p.stderr)[-6000:]
