"""The README is the book's landing page (nbs/index.ipynb) exported to GitHub markdown, and its examples run as a reader
would copy them, so they cannot rot: every Python block, and every `fedrepro` command of the shell blocks, in a fresh
process in an empty folder. Changes, all for time: a job given `--scale mini` runs at `smoke` (the same notebook and
code path; mini takes minutes) with its `runs` folder the one test_repro.py's smoke jobs share (a config they ran is not
trained again), a command's run of more than two rounds runs two (round 2 is the first with a previous round) and a
Python example's one (FedReg's round takes 23 s at one thread; the same code runs at every round), `make` lines are
left to CI, which runs `make test` itself, and `fedrepro book` to tests/test_book.py, which runs the same command on a
copy of the project."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
import pytest

ROOT = Path(__file__).parent.parent
README = ROOT / 'README.md'
LANDING = ROOT / 'nbs' / 'index.ipynb'


def texts() -> list[str]:
    "The README (the landing page's markdown, exported)."
    return [README.read_text(encoding='utf-8')]


def blocks(language: str, only=None) -> list[str]:
    return [b for t in (only or texts()) for b in re.findall(rf'```{language}\n(.*?)```', t, flags=re.S)]


def commands() -> list[list[str]]:
    "The `fedrepro` commands of the shell blocks, continuation lines joined, comments dropped, each once."
    lines = '\n'.join(blocks('bash')).replace('\\\n', ' ').splitlines()
    words = [shlex.split(line, comments=True) for line in lines]
    found = [w for w in words if w and Path(w[0]).name == 'fedrepro' and w[1:2] != ['book']]
    return list({tuple(w[1:]): w for w in reversed(found)}.values())[::-1]  # the same arguments run once


def run(argv: list[str], cwd) -> subprocess.CompletedProcess:
    # a job's runs in its own process, as test_repro.py's: a pool's start costs more than a smoke job's runs
    env = {**os.environ, 'MPLBACKEND': 'Agg', 'OMP_NUM_THREADS': '1', 'FEDREPRO_WORKERS': '1'}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_readme_has_examples_to_run():
    assert blocks('python') and {c[1] for c in commands()} >= {'run', 'list', 'reproduce'}


def test_the_readme_is_the_landing_page_exported():
    from fedrepro.book import readme_markdown

    assert README.read_text(encoding='utf-8') == readme_markdown(LANDING), (
        'README.md is out of date: run `fedrepro readme`'
    )


def test_the_readme_is_short_and_starts_with_its_commands():
    lines = README.read_text(encoding='utf-8').splitlines()
    assert len(lines) <= 130
    first = next(i for i, line in enumerate(lines) if line.startswith('make '))
    assert first < 40, f'the first command is on line {first + 1}'


def test_the_landing_page_shows_the_current_verdicts():
    "Its results table is the report's summary of the committed runs: executing its cells again gives what it shows."
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell

    nb = read_nb(LANDING)
    shown = [o.get('data', {}).get('text/markdown') for c in nb.cells for o in c.get('outputs', [])]
    cwd = os.getcwd()
    try:
        os.chdir(LANDING.parent)
        CaptureShell().run_all(nb, exc_stop=True)
    finally:
        os.chdir(cwd)
    assert shown == [o.get('data', {}).get('text/markdown') for c in nb.cells for o in c.get('outputs', [])]


ROUNDS, PYTHON_ROUNDS = 2, 1  # the most rounds a command, a Python example runs here


def as_tested(prev: str, arg: str) -> str:
    "A command's argument as the test runs it: `--scale mini` at smoke, `--rounds N` at most `ROUNDS`."
    if prev == '--scale' and arg == 'mini':
        return 'smoke'
    return str(min(int(arg), ROUNDS)) if prev == '--rounds' and arg.isdigit() else arg


@pytest.mark.parametrize('i', range(len(blocks('python'))))
def test_a_python_example_runs(i, tmp_path):
    code = re.sub(r'\brounds=(\d+)', lambda m: f'rounds={min(int(m[1]), PYTHON_ROUNDS)}', blocks('python')[i])
    p = run([sys.executable, '-c', code], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]


@pytest.mark.parametrize('argv', commands(), ids=lambda a: ' '.join(a[1:3]))
def test_a_command_runs(argv, tmp_path, shared_runs):
    args = [as_tested(prev, a) for prev, a in zip([''] + argv[1:], argv[1:])]
    if '--out' in args and args[0] == 'reproduce':
        (out := tmp_path / args[args.index('--out') + 1]).mkdir()
        (out / 'runs').symlink_to(shared_runs, target_is_directory=True)
    p = run([sys.executable, '-c', 'from fedrepro.cli import main; main()', *args], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
