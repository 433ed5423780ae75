"""Prose from the numbers: where a paper chapter's text names a claim's outcome, it is the outcome the protocol gives
that claim on the committed evidence."""

import json
import re
from pathlib import Path
import pytest
from fedrepro.core import PAPERS
from fedrepro.repro import OUTCOMES, artefact_sources, report_verdicts, report_papers

ROOT = Path(__file__).resolve().parent.parent
WORDS = '|'.join(sorted(map(re.escape, map(str, OUTCOMES)), key=len, reverse=True))
# '(16, inconclusive)', '(17b, reproduced: ...)', '**19 is now not reproduced**', 'C1v is inconclusive'
SAID = [
    re.compile(rf'\((?:claim )?(?P<key>C?\d+[a-z]?v?), (?P<outcome>{WORDS})\b'),
    re.compile(rf'\b(?:claim )?(?P<key>C?\d+[a-z]?v?) (?:is|are|stays|becomes) (?:now )?(?P<outcome>{WORDS})\b'),
]


def stated(chapter: Path, keys: set) -> list:
    "The (claim, outcome) pairs a chapter's Markdown states, for the claims of its paper."
    text = '\n'.join(
        ''.join(c['source'])
        for c in json.loads(chapter.read_text(encoding='utf-8'))['cells']
        if c['cell_type'] == 'markdown'
    )
    text = re.sub(r'\s+', ' ', text.replace('**', ''))
    return [(m['key'], m['outcome']) for p in SAID for m in p.finditer(text) if m['key'] in keys]


@pytest.fixture(scope='module')
def verdicts():
    return report_verdicts(artefact_sources())


@pytest.mark.parametrize('key', report_papers())
def test_a_chapter_states_its_claims_outcomes_as_judged(key, verdicts):
    paper = PAPERS[key]
    if not paper.chapter:
        pytest.skip(f'{key} has no chapter')
    judged = verdicts[verdicts['paper'] == key].set_index('claim')['outcome'].astype(str)
    said = stated(ROOT / 'nbs' / f'{paper.chapter}.ipynb', set(judged.index))
    wrong = [(k, o, judged[k]) for k, o in said if judged[k] != o]
    assert not wrong, f'{key}: the text says (claim, outcome) where the protocol gives the third: {wrong}'


def test_the_check_reads_what_a_chapter_says(tmp_path):
    "The patterns find the ways the chapters state an outcome, and only claim keys."
    text = 'so 8b is inconclusive (16, not reproduced) and **19 is now not reproduced**; round 30 is reproduced'
    chapter = tmp_path / 'prose.ipynb'
    chapter.write_text(json.dumps({'cells': [{'cell_type': 'markdown', 'source': [text]}]}))
    assert stated(chapter, {'8b', '16', '19'}) == [
        ('16', 'not reproduced'),
        ('8b', 'inconclusive'),
        ('19', 'not reproduced'),
    ]
