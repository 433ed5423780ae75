"""The README's examples run as a reader would copy them, so they cannot rot: every Python block, and every `fedrepro`
command of the shell blocks, in a fresh process in an empty folder. Two changes, both for time: a job given
`--scale mini` runs at `smoke` (the same notebook and code path; mini takes minutes), and `make` lines are left to CI,
which runs `make test` itself."""
import os, re, shlex, subprocess, sys
from pathlib import Path
import pytest

README = Path(__file__).parent.parent / 'README.md'


def blocks(language: str) -> list[str]:
    return re.findall(rf'```{language}\n(.*?)```', README.read_text(), flags=re.S)


def commands() -> list[list[str]]:
    "The `fedrepro` commands of the README's shell blocks, continuation lines joined, comments dropped."
    lines = '\n'.join(blocks('bash')).replace('\\\n', ' ').splitlines()
    words = [shlex.split(line, comments=True) for line in lines]
    return [w for w in words if w and Path(w[0]).name == 'fedrepro']


def run(argv: list[str], cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, 'MPLBACKEND': 'Agg', 'OMP_NUM_THREADS': '1'}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_the_readme_has_examples_to_run():
    assert len(blocks('python')) >= 1 and {c[1] for c in commands()} >= {'run', 'list', 'reproduce'}


@pytest.mark.parametrize('i', range(len(blocks('python'))))
def test_a_python_example_runs(i, tmp_path):
    p = run([sys.executable, '-c', blocks('python')[i]], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]


@pytest.mark.parametrize('argv', commands(), ids=lambda a: ' '.join(a[1:3]))
def test_a_command_runs(argv, tmp_path):
    args = ['smoke' if a == 'mini' and prev == '--scale' else a for prev, a in zip([''] + argv[1:], argv[1:])]
    p = run([sys.executable, '-c', 'from fedrepro.cli import main; main()', *args], tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
