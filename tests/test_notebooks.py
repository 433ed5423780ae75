"""Every notebook runs (nbdev_test), all in one process, in order: nbdev_test's workers each run several notebooks, so
what one leaves in the library's registries reaches the next; running them together makes that reproducible instead of
a chance pairing. `make nbtest` runs the same command alone."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_notebook_runs():
    nbdev_test = Path(sys.executable).parent / 'nbdev_test'
    env = {**os.environ, 'OMP_NUM_THREADS': os.environ.get('OMP_NUM_THREADS', '1')}
    p = subprocess.run(
        [str(nbdev_test), '--n_workers', '0'], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600
    )
    assert p.returncode == 0, (p.stdout + p.stderr)[-6000:]
