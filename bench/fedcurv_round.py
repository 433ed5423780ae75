"""FedCurv's round against FedAvg's at every mini setting that runs it, its Fisher by 'vmap' and 'layers', in one run.

The Fisher summed by 'vmap' (per-sample gradients by `torch.func`, the committed runs' until 2026-12-06) and by
'layers' (one backward pass; FedCurv asks for 'auto', which takes it wherever the model allows it), two ways of
`fedrepro.baselines.empirical_fisher`; beside them the floor of any exact Fisher after local training: a round whose
Fisher is one forward and backward pass of the summed loss over the same data, with no per-sample sums. FedCurv's
'fedreg' variant (FedReg's and FedGC's settings) computes each client's per-sample Fisher over all its data after local
training, so where local training is an epoch or less the floor alone is about 2x FedAvg's round; the 'fedntd' variant
(FedSSD's) a mini-batch Fisher over 500 samples, which `how` does not touch (its three columns agree: it is its own
floor). Each setting's seed-0 config runs `--rounds` rounds per method, round 1 untimed (FedCurv has no penalty before
round 2), interleaved `--repeats` times; printed and written to `--out`: the median seconds of a round, each FedCurv's
ratio to FedAvg's and 'layers' over the floor. A model 'layers' cannot take (a Fixup ResNet's scalar parameters) runs
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
import torch.nn.functional as F
from fedrepro import baselines
from fedrepro.core import PAPERS, load_modules
from fedrepro.engine import Federation, synchronize
from fedrepro.runner import cpu_model
from _args import at_least, known_device, write_results  # bench/_args.py: python puts the script's folder first

DEFAULT_FISHER = baselines.empirical_fisher


def fisher_by(way: str):
    "`empirical_fisher` summing by `way` whatever FedCurv asks."
    return lambda fm, x, y, chunk=None, how=None: DEFAULT_FISHER(fm, x, y, chunk, how=way)


def one_pass(fm, x, y, chunk=None, how=None):
    "The floor of an exact Fisher: one forward and backward pass of the summed loss, in the same chunks; zeros."
    chunk = chunk or max(1, min(len(y), 2**24 // fm.num_params))
    for i in range(0, len(y), chunk):
        loss = F.cross_entropy(fm.model(x[i : i + chunk]), y[i : i + chunk], reduction='sum')
        torch.autograd.grad(loss, list(fm.model.parameters()))
    return torch.zeros_like(fm.grad)


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
        times = {'fedavg': [], 'vmap': [], 'layers': [], 'floor': []}
        for _ in range(args.repeats):
            times['fedavg'] += round_seconds(cfg.replace(algorithm='fedavg', params={}), args.rounds)
            for how, fisher in (('vmap', fisher_by('vmap')), ('layers', fisher_by('auto')), ('floor', one_pass)):
                baselines.empirical_fisher = fisher
                try:
                    times[how] += round_seconds(cfg, args.rounds)
                finally:
                    baselines.empirical_fisher = DEFAULT_FISHER
        avg, before, after, floor = (statistics.median(times[k]) for k in ('fedavg', 'vmap', 'layers', 'floor'))
        rows.append(
            {
                'paper': paper,
                'setting': setting,
                'variant': cfg.params.get('variant', 'fedreg'),
                'model': cfg.model,
                'fedavg_s': round(avg, 3),
                'vmap_s': round(before, 3),
                'layers_s': round(after, 3),
                'floor_s': round(floor, 3),
                'vmap_ratio': round(before / avg, 2),
                'layers_ratio': round(after / avg, 2),
                'floor_ratio': round(floor / avg, 2),
                'layers_over_floor': round(after / floor, 2),
            }
        )
        print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1), flush=True)
    table = pd.DataFrame(rows)
    print(f'{cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}, {datetime.date.today()}')
    write_results(table, args.out)


if __name__ == '__main__':
    main()
