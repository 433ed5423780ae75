"""What each artefact costs at paper scale, in GPU-hours, from the timings of `bench/gpu_check.py`.

GPU-hours of an artefact = Σ over its runs (setting × method × seed) of rounds × seconds a round / 3600, where seconds a
round = `round_s` + `eval_s` / `eval_every` of that (paper, setting, method) in gpu_check.csv, and the seeds are the
protocol's paper-scale `SEEDS`. The attack artefacts add each attack's `attack_s` a seed. Which runs an artefact makes
is declared below (`RUNS`), read off its job notebook in nbs/repro; `check_declared` refuses an artefact a paper has
that is not declared, and a setting or method a paper does not have. Where a run has no timing the artefact's GPU-hours
say "not yet measured" instead of a guess; `timed` says how many of its (setting, method) runs have a timing and
`gpu_hours_timed` what those alone take, a lower bound on the artefact's cost. Runs two artefacts share are made once
(`run_many` reuses them): the sum over artefacts counts them twice.

    python bench/paper_cost.py [--gpu-check bench/results/gpu_check.csv] [--out bench/results/paper_cost.csv]
"""

from __future__ import annotations
import argparse
import math
from pathlib import Path
import pandas as pd
from fedrepro.core import PAPERS, load_modules
from fedrepro.repro import SEEDS, paper_artefacts

ALL = None  # every method the setting runs at paper scale
_GC4 = ['HWDigits-4', 'CIFAR10-10', 'CIFAR100-100', 'HWDigits-40']
_GC6 = ['FedAvg', 'FedProx', 'FedCurv', 'SCAFFOLD', 'FedReg', 'FedGC']
_GG = ['SVHN (β=0.5)', 'CIFAR-10 (β=0.5)', 'CIFAR-100 (β=0.5)', 'SVHN (β=0.1)', 'CIFAR-10 (β=0.1)', 'CIFAR-100 (β=0.1)']
_IMP = ['FedAvg', 'FedProx', 'FedAvg + EWC', 'FedAvg + weighted average', 'FedImp']
_REG = ['SGD', 'FedAvg', 'FedProx', 'SCAFFOLD', 'FedCurv', 'FedReg']
_SSD1 = ['CIFAR-10', 'CIFAR-100', 'TinyImageNet']
_SSD2 = ['CIFAR-10 (#K=2)', 'CIFAR-10 (#K=5)', 'CIFAR-10 (δ=0.1)', 'CIFAR-10', 'CIFAR-10 (δ=10)']
_T4 = ['EMNIST', 'CIFAR-10 (uniform)', 'CIFAR-10 (one class)', 'CT images of COVID-19']
_PRIV = ['DPSGD', 'FedAvg with DPSGD', 'FedProx with DPSGD', 'FedCurv with DPSGD', 'FedReg with MG', 'FedReg']
# artefact: [(settings, methods or ALL, rounds or None for the setting's, runs a seed per (setting, method))];
# ('attack', setting, trained method, rounds trained, attack rows, attacks a seed) for the privacy figures
RUNS = {
    'fedgc_table1': [(_GC4, _GC6[:5] + ['FedGC (w/o SGC)', 'FedGC'], None, 1)],
    'fedgc_table2': [(_GC4, _GC6[:5] + ['FedGC (w/o SGC)', 'FedGC'], None, 1)],
    'fedgc_table3': [
        (['HWDigits-4'], ['FedAvg (B=1)', 'FedAvg (B=10)', 'FedAvg (B=20)', 'FedAvg (B=50)', 'FedAvg (E=1)'], None, 1)
    ],
    'fedgc_table4': [(_GC4, ['FedAvg', 'FedReg', 'FedGC (w/o CGC)', 'FedGC (w/o SGC)', 'FedGC'], None, 1)],
    'fedgc_figure2': [(_GC4, _GC6, None, 1)],
    'fedgc_figure3': [(['HWDigits-4', 'CIFAR10-10'], ['FedReg', 'FedGC (w/o SGC)', 'FedGC'], None, 1)],
    'fedgc_figure6': [(_GC4, _GC6, None, 1)],
    'fedgc_figure5': [
        ('attack', 'CIFAR10-10', 'FedGC', 99, ['attack DLG', 'attack IG'], 4)
    ],  # 4 uploads, each attacked
    'fedgc_figure7': [(['CIFAR10-10'], ['FedAvg'], None, 1)],  # a forgetting curve: a run, plus its losses
    'fedgg_table1': [(_GG, ALL, None, 1)],
    'fedgg_table3': [(_GG, ALL, None, 1)],
    'fedgg_figure1': [],  # the partitions only: no training
    'fedgg_figure3': [(['CIFAR-10 (β=0.5), Figure 3'], ALL, None, 1)],
    'fedimp_table1': [
        (['MNIST MLP', 'MNIST CNN', 'CIFAR-10 MLP', 'CIFAR-10 CNN'], _IMP, None, 1)
    ],  # profile C, the default
    'fedimp_table2': [(['MNIST MLP', 'MNIST CNN'], ['FedAvg', 'FedProx', 'FedImp'], None, 1)],
    'fedimp_table4': [(['MNIST MLP', 'MNIST CNN'], ['FedAvg', 'FedImp (RWalk)', 'FedImp'], None, 1)],
    'fedimp_figure2': [
        (['CIFAR-10 CNN (C=0.1)', 'CIFAR-10 CNN (C=0.2)', 'CIFAR-10 CNN (C=0.5)'], ['FedAvg', 'FedImp'], None, 1)
    ],
    'fedreg_table1': [(['MNIST (two classes)', 'MNIST (one class)', 'EMNIST'], _REG, None, 1)],
    'fedreg_table2': [(['CIFAR-10 (uniform)', 'CIFAR-10 (one class)'], _REG, None, 1)],
    'fedreg_table3': [(['CIFAR-100 (ResNet-9)', 'CIFAR-100 (Transformer)', 'COVID-19 CT Images'], ALL, None, 1)],
    'fedreg_table4': [(_T4, _PRIV, None, 1)],
    'fedreg_tableC1': [(['Landmarks-User-160k (2000 rounds)'], ALL, None, 1)],
    'fedreg_tableC2': [
        (['MNIST (two classes)', 'EMNIST'], ['FedAvg', 'FedProx', 'SCAFFOLD', 'FedCurv', 'FedReg'], 5, 1)
    ],
    'fedreg_figure1': [(['MNIST (two classes)', 'EMNIST'], ['FedAvg'], None, 2)],  # each non-IID and IID
    'fedreg_figure2': [(['MNIST (two classes)', 'EMNIST'], ['FedReg'], None, 1)],
    'fedreg_figureC2': [
        (['EMNIST', 'CIFAR-10 (one class)'], ['FedReg'], None, 5 + 1 / len(SEEDS['paper']))
    ],  # 5 η_s, + calibration
    'fedreg_figureC3': [
        (
            'attack',
            st,
            'FedReg with MG',
            1,
            ['attack IG: FedAvg', 'attack IG: FedAvg with DPSGD', 'attack IG: FedReg with MG'],
            1,
        )
        for st in ('EMNIST', 'CIFAR-10 (uniform)')
    ],
    'fedreg_figureC4': [
        (
            'attack',
            'CT images of COVID-19',
            'FedReg with MG',
            1,
            ['attack IG: FedAvg', 'attack IG: FedAvg with DPSGD', 'attack IG: FedReg with MG'],
            1,
        )
    ],
    'quickstart': [(['MNIST (one class)'], ['SGD', 'FedAvg'], None, 1)],
    'fedssd_table1': [(_SSD1, ALL, None, 1)],
    'fedssd_table2': [(_SSD2, ALL, None, 1)],
    'fedssd_table3': [(['CIFAR-10 (Table III)'], ALL, None, 1)],
    'fedssd_figure2': [(_SSD2, ['FedAvg'], None, 1)],
    'fedssd_figure3': [(['CIFAR-10', 'CIFAR-10 (IID)'], ['FedAvg'], None, 1)],
    'fedssd_figure4': [(['CIFAR-10'], ['FedSSD'], 50, 2)],  # two readings of eq. 3, to half the rounds
    'fedssd_figure6': [],  # the partitions only: no training
    'fedssd_figure7': [(_SSD1, ALL, None, 1)],
    'fedssd_figure8': [
        (['CIFAR-10 (C=0.1)', 'CIFAR-10 (C=0.2)', 'CIFAR-100 (C=0.1)', 'CIFAR-100 (C=0.2)'], ALL, None, 1)
    ],
    'fedssd_figure9': [(['CIFAR-10 (E=1)', 'CIFAR-10 (E=5)', 'CIFAR-10', 'CIFAR-10 (E=20)'], ALL, None, 1)],
}
COLUMNS = ['paper', 'artefact', 'runs', 'timed', 'gpu_hours', 'gpu_hours_timed', 'gpu', 'measured', 'missing']


def paper_of(artefact: str) -> str:
    arts = paper_artefacts()
    return arts.set_index('notebook').loc[artefact, 'paper']


def check_declared():
    "Every artefact of every paper declared, every declared setting and method the paper's."
    arts = paper_artefacts()
    missing = sorted(set(arts['notebook']) - set(RUNS))
    if missing:
        raise ValueError(f'RUNS lacks {missing}: declare their paper-scale runs in bench/paper_cost.py')
    for a, specs in RUNS.items():
        p = PAPERS[paper_of(a)]
        for s in specs:
            settings, methods = ([s[1]], [s[2]]) if s[0] == 'attack' else (s[0], s[1])
            for st in settings:
                if st not in p.settings:
                    raise ValueError(f'RUNS[{a!r}]: setting {st!r} is not one of {p.key}\'s')
            for m in methods or ():  # as `run_table(methods=...)`: a setting runs those of them it has
                if not any(m in p.settings[st].methods for st in settings):
                    raise ValueError(f'RUNS[{a!r}]: no setting has {m!r}')


def artefact_runs(artefact: str) -> list[dict]:
    """The artefact's runs a seed: paper, setting, method, rounds, count; and its attacks (method 'attack ...', rounds
    0)."""
    p, out = PAPERS[paper_of(artefact)], []
    for s in RUNS[artefact]:
        if s[0] == 'attack':
            _, st, trained, rounds, attacks, per_seed = s
            out.append(dict(paper=p.key, setting=st, method=trained, rounds=rounds, count=1))
            out += [dict(paper=p.key, setting=st, method=a, rounds=0, count=per_seed) for a in attacks]
            continue
        settings, methods, rounds, count = s
        for st in settings:
            for m in [m for m in p.run_methods(st, 'paper') if methods is None or m in methods]:
                out.append(
                    dict(paper=p.key, setting=st, method=m, rounds=rounds or p.config(st, m).rounds, count=count)
                )
    return out


def seconds(timings: pd.DataFrame | None, paper: str, setting: str, method: str, rounds: int) -> float:
    "Seconds of one run (rounds × a round's) or one attack; NaN where gpu_check measured none."
    if timings is None:
        return math.nan
    hit = timings[
        (timings.paper == paper)
        & (timings.setting == setting)
        & (timings.method == method)
        & timings.status.astype(str).str.startswith('ok')
    ]
    if hit.empty:
        return math.nan
    r = hit.iloc[0]
    if method.startswith('attack'):
        return float(r.attack_s)
    return rounds * (float(r.round_s) + float(r.eval_s) / float(r.eval_every))


def cost_table(timings: pd.DataFrame | None) -> pd.DataFrame:
    "Per artefact: its runs at paper scale, GPU-hours (or 'not yet measured'), the GPU, and what has no timing."
    load_modules()
    check_declared()
    seeds, gpu = len(SEEDS['paper']), (timings.gpu.dropna().iloc[0] if timings is not None and len(timings) else '')
    rows = []
    for r in paper_artefacts().itertuples():
        runs = artefact_runs(r.notebook)
        secs = [seconds(timings, x['paper'], x['setting'], x['method'], x['rounds']) * x['count'] * seeds for x in runs]
        missing = sorted({f"{x['setting']} / {x['method']}" for x, s in zip(runs, secs) if math.isnan(s)})
        n = round(sum(x['count'] * seeds for x in runs if not x['method'].startswith('attack')))
        hours = f'{sum(secs) / 3600:.3g}' if runs and not missing else '0' if not runs else 'not yet measured'
        timed = [s for s in secs if not math.isnan(s)]
        rows.append(
            dict(
                paper=r.paper,
                artefact=r.notebook,
                runs=n,
                timed=f'{len(timed)} of {len(secs)}',
                gpu_hours=hours,
                gpu_hours_timed=f'{sum(timed) / 3600:.3g}' if timed else '',
                gpu=gpu if timed or not runs else '',
                measured='measured' if timings is not None and not missing else 'not yet measured',
                missing='; '.join(missing) if timings is not None else '',
            )
        )
    return pd.DataFrame(rows, columns=COLUMNS)


if __name__ == '__main__':
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--gpu-check', default='bench/results/gpu_check.csv')
    ap.add_argument('--out', default='bench/results/paper_cost.csv')
    a = ap.parse_args()
    f = Path(a.gpu_check)
    table = cost_table(pd.read_csv(f) if f.is_file() else None)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(a.out, index=False)
    print(table.to_string(index=False, max_colwidth=60))
