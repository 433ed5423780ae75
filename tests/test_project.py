"The project's own consistency: one list of requirements, CI runs the README's test command."

import configparser
import json
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _name(req: str) -> str:
    return re.split(r'[<>=!~ \[]', req, maxsplit=1)[0].lower().replace('_', '-')


def test_environment_yml_agrees_with_settings_ini():
    cfg = configparser.ConfigParser(delimiters=['='])
    cfg.read(ROOT / 'settings.ini')
    ini = shlex.split(cfg['DEFAULT']['requirements']) + shlex.split(cfg['DEFAULT']['dev_requirements'])
    ini += shlex.split(cfg['DEFAULT']['ray_requirements']) + shlex.split(cfg['DEFAULT']['flower_requirements'])
    text = (ROOT / 'environment.yml').read_text()
    pip = [l.strip()[2:].strip() for l in text.split('- pip:', 1)[1].splitlines() if l.strip().startswith('- ')]
    assert sorted(pip) == sorted(ini), (
        'environment.yml and settings.ini list different requirements (versions included)'
    )
    assert re.search(r'^\s*- python=3\.11\s*$', text, re.M)
    for pinned in ('nbdev==2.4.14', 'fastcore<1.13', 'execnb<0.2', 'ghapi<1.1'):
        assert pinned in ini


def test_torch_ranges_admit_the_local_builds():
    cfg = configparser.ConfigParser(delimiters=['='])
    cfg.read(ROOT / 'settings.ini')
    from packaging.requirements import Requirement

    reqs = {r.name: r for r in map(Requirement, shlex.split(cfg['DEFAULT']['requirements']))}
    assert reqs['torch'].specifier.contains('2.14.1') and reqs['torchvision'].specifier.contains('0.29.1')


def test_ci_runs_the_readme_test_command():
    readme, ci = (ROOT / 'README.md').read_text(), (ROOT / '.ci' / 'run').read_text()
    assert 'make test' in readme and re.search(r'^make test\s*$', ci, re.M)
    make = (ROOT / 'Makefile').read_text()
    assert re.search(r'^test:.*\bcheck-sync\b.*\bpytest\b', make, re.M)
    assert (ROOT / 'tests' / 'test_notebooks.py').is_file(), 'make test runs every notebook through pytest'


def test_layout():
    for p in (
        'nbs',
        'fedrepro',
        '_quarto.yml',
        'settings.ini',
        'tests',
        'environment.yml',
        'README.md',
        'Makefile',
        'setup.py',
        '.ci/run',
        '.gitignore',
        'LICENSE',
        'nbs/repro/.notest',
        'bench/engine_overhead.py',
    ):
        assert (ROOT / p).exists(), p
    assert 'Apache License' in (ROOT / 'LICENSE').read_text()[:200]


def _long_markdown_lines(nb: Path) -> list[str]:
    "Markdown lines over 120 characters, but table rows and display maths (nbdev's one-line description included)."
    found, cells = [], json.loads(nb.read_text(encoding='utf-8'))['cells']
    for c in (c for c in cells if c['cell_type'] == 'markdown'):
        maths = False
        for line in ''.join(c['source']).splitlines():
            display = maths or '$$' in line
            maths ^= line.count('$$') % 2 == 1
            if len(line) > 120 and not (display or line.lstrip().startswith('|')):
                found.append(f'{nb.relative_to(ROOT)}: {line[:60]}...')
    return found


def test_no_line_a_reader_scrolls_for():
    "No line over 120 characters in the notebooks' prose (ruff checks their code and tests/, `make test` runs it)."
    assert [x for nb in sorted((ROOT / 'nbs').rglob('*.ipynb')) for x in _long_markdown_lines(nb)] == []
    assert (
        '--line-length' not in (ROOT / 'Makefile').read_text()
        and 'line-length = 120' in (ROOT / 'ruff.toml').read_text()
    )
