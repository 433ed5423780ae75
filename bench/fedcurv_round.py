"""FedCurv's round against FedAvg's at every mini setting that runs it, its Fisher by 'vmap' and 'layers', in one run.

The Fisher summed by 'vmap' (per-sample gradients by `torch.func`, the committed runs' until 2026-12-06) and by
'layers' (one backward pass, FedCurv's own wherever the model allows it), the two ways of
`fedrepro.baselines.empirical_fisher`. FedCurv's 'fedreg' variant (FedReg's and FedGC's settings) computes each
client's per-sample Fisher over all its data after local training; the 'fedntd' variant (FedSSD's) a mini-batch Fisher,
which `how` does not touch. Each setting's seed-0 config runs `--rounds` rounds per method, round 1 untimed (FedCurv
has no penalty before round 2), interleaved `--repeats` times; printed and written to `--out`: the median seconds of a
round and each FedCurv's ratio to FedAvg's. A model 'layers' cannot take (a Fixup ResNet's scalar parameters) runs
'vmap' in both columns.

    python bench/fedcurv_round.py [--rounds 3] [--repeats 2] [--device auto] [--out bench/results/fedcurv_round.csv]
"""

import argparse
import datetime
import statistics
import time
import warnings
from pathlib import Path
import pandas as pd
import torch
from fedrepro import baselines
from fedrepro.core import PAPERS, load_modules
from fedrepro.engine import Federation, synchronize
from fedrepro.runner import cpu_model
from _args import at_least, known_device, write_results  # bench/_args.py: python puts the script's folder first

DEFAULT_FISHER = baselines.empirical_fisher


def fisher_by(way: str):
    "`empirical_fisher` summing by `way` whatever FedCurv asks ('layers' only where the model allows it)."

    def fisher(fm, x, y, chunk=None, how=None):
        fits = way != 'layers' or baselines.summable_layers(fm.model) is not None
        return DEFAULT_FISHER(fm, x, y, chunk, how=way if fits else 'vmap')

    return fisher


def round_seconds(cfg, rounds: int) -> list:
    fed = Federation(cfg)
    out = []
    for t in range(1, rounds + 1):
        synchronize(fed.device)
        t0 = time.perf_counter()
        fed.round(t)
        synchronize(fed.device)
        if t > 1:
            out.append(time.perf_counter() - t0)
    return out


def settings() -> list:
    "(paper, setting, method) of every mini setting with a FedCurv run."
    return [
        (k, st, m)
        for k in ('fedreg', 'fedgc', 'fedssd')
        for st in PAPERS[k].scaled_settings()
        for m in PAPERS[k].run_methods(st, 'mini')
        if m == 'FedCurv'
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=at_least(2, ' (round 1 is not timed)'), default=3)
    ap.add_argument('--repeats', type=at_least(1), default=2)
    ap.add_argument('--device', type=known_device, default='auto')
    ap.add_argument('--out', default=str(Path(__file__).parent / 'results' / 'fedcurv_round.csv'))
    args = ap.parse_args()
    warnings.simplefilter('ignore')
    load_modules()
    rows = []
    for paper, setting, method in settings():
        cfg = PAPERS[paper].config(setting, method, 'mini', seed=0).replace(device=args.device, eval_every=1000)
        times = {'fedavg': [], 'vmap': [], 'layers': []}
        for _ in range(args.repeats):
            times['fedavg'] += round_seconds(cfg.replace(algorithm='fedavg', params={}), args.rounds)
            for how, fisher in (('vmap', fisher_by('vmap')), ('layers', fisher_by('layers'))):
                baselines.empirical_fisher = fisher
                try:
                    times[how] += round_seconds(cfg, args.rounds)
                finally:
                    baselines.empirical_fisher = DEFAULT_FISHER
        avg, before, after = (statistics.median(times[k]) for k in ('fedavg', 'vmap', 'layers'))
        rows.append(
            {
                'paper': paper,
                'setting': setting,
                'variant': cfg.params.get('variant', 'fedreg'),
                'model': cfg.model,
                'fedavg_s': round(avg, 3),
                'vmap_s': round(before, 3),
                'layers_s': round(after, 3),
                'vmap_ratio': round(before / avg, 2),
                'layers_ratio': round(after / avg, 2),
            }
        )
        print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1), flush=True)
    table = pd.DataFrame(rows)
    print(f'{cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}, {datetime.date.today()}')
    write_results(table, args.out)


if __name__ == '__main__':
    main()
