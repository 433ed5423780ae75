"""`bench/device_time.py`, the GPU's timings the papers' wall-clock claims are judged on: the script runs (tiny shapes
on the CPU), and every `OnDevice` comparison of every paper declares the ratios the committed measurement gives."""

import re
import sys
from pathlib import Path
import pandas as pd

from fedrepro.core import PAPERS, load_modules
from fedrepro.repro import OnDevice

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'bench'))
import device_time  # noqa: E402


def test_smoke_times_every_method_on_every_seed(tmp_path):
    device_time.main(['--device', 'cpu', '--smoke', '--out', str(tmp_path)])
    rows = pd.read_csv(tmp_path / 'device_time.csv')
    paper, setting, methods, clients = device_time.GROUPS[0]
    assert list(rows.columns) == device_time.COLUMNS and set(rows['gpu']) == {'cpu'}
    assert sorted(zip(rows['method'], rows['seed'])) == sorted((m, s) for m in methods for s in (0, 1))
    assert (rows['stage_s'] > 0).all() and set(rows['clients']) == {clients} and set(rows['setting']) == {setting}


def declared() -> list[tuple]:
    "Every paper's `OnDevice` comparisons: (paper, setting, method, the method its stage is over, values, device)."
    load_modules()
    out = []
    for k in PAPERS:
        for claim in PAPERS[k].claims:
            for c in claim.checks:
                if isinstance(c, OnDevice):
                    ((method, values),) = c.values
                    over = re.fullmatch(r"local stage / (.+)'s", c.comparison.metric).group(1)
                    out.append((k, c.setting, method, over, values, c.device))
    return out


def test_every_claim_on_a_gpu_declares_the_committed_ratios():
    timed = pd.read_csv(ROOT / 'bench' / 'results' / 'device_time.csv')
    stage = timed.pivot_table(index=['paper', 'setting', 'seed'], columns='method', values='stage_s')
    found = declared()
    assert {(k, st, m) for k, st, m, *_ in found} >= {
        ('fedreg', 'EMNIST', 'FedReg'),
        ('fedgc', 'HWDigits-4', 'FedCurv'),
    }
    for k, st, m, over, values, device in found:
        ratio = (stage[m] / stage[over]).loc[(k, st)]
        assert values == tuple(float(f'{v:.3g}') for v in ratio), (k, st, m, over)
        assert set(timed.query('paper == @k and setting == @st')['gpu']) == {device}
