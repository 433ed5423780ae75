"""The examples of the README and of the book's landing page (nbs/index.ipynb's markdown) run as a reader would copy
them, so they cannot rot: every Python block, and every `fedrepro` command of the shell blocks, in a fresh process in
an empty folder. Three changes, all for time: a job given `--scale mini` runs at `smoke` (the same notebook and code
path; mini takes minutes), `make` lines are left to CI, which runs `make test` itself, and `fedrepro book` to
tests/test_book.py, which runs the same command on a copy of the project."""
import json, os, re, shlex, subprocess, sys
from pathlib import Path
import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / 'README.md'
LANDING = ROOT / 'nbs' / 'index.ipynb'


def texts() -> list[str]:
    "The README, then the landing page's markdown cells."
    cells = json.loads(LANDING.read_text(encoding='utf-8'))['cells']
    return [README.read_text(encoding='utf-8')] + [''.join(c['source']) for c in cells if c['cell_type'] == 'markdown']


def blocks(language: str, only=None) -> list[str]:
    return [b for t in (only or texts()) for b in re.findall(rf'```{language}\n(.*?)```', t, flags=re.S)]


def commands() -> list[list[str]]:
    "The `fedrepro` commands of the shell blocks, continuation lines joined, comments dropped, each once."
    lines = '\n'.join(blocks('bash')).replace('\\\n', ' ').splitlines()
    words = [shlex.split(line, comments=True) for line in lines]
    found = [w for w in words if w and Path(w[0]).name == 'fedrepro' and w[1:2] != ['book']]
    return list({tuple(w[1:]): w for w in reversed(found)}.values())[::-1]     # the same arguments run once


def run(argv: list[str], cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, 'MPLBACKEND': 'Agg', 'OMP_NUM_THREADS': '1'}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_readme_and_landing_page_have_examples_to_run():
    assert len(blocks('python')) >= 2 and {c[1] for c in commands()} >= {'run', 'list', 'reproduce'}
    assert blocks('python', texts()[1:]) and blocks('bash', texts()[1:]), 'the landing page has examples: they must be collected here'


@pytest.mark.parametrize('i', range(len(blocks('python'))))
def test_a_python_example_runs(i, tmp_path):
    p = run([sys.executable, '-c', blocks('python')[i]], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]


@pytest.mark.parametrize('argv', commands(), ids=lambda a: ' '.join(a[1:3]))
def test_a_command_runs(argv, tmp_path):
    args = ['smoke' if a == 'mini' and prev == '--scale' else a for prev, a in zip([''] + argv[1:], argv[1:])]
    p = run([sys.executable, '-c', 'from fedrepro.cli import main; main()', *args], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
