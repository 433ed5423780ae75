"""FedReg's local stage with fewer local steps than a pass has batches, before and after lazy synthesis, in one run.

FedReg makes its pseudo and perturbed data (ten FGSM iterations over twice the batch: 20 batch passes) per batch of one
shuffled pass over the client's data. Before, the whole pass was made when the round started (`EagerFedReg`, the
authors' order); now each batch is made when a step first needs it (`SyntheticPass`), the same batches bit for bit.
With `local_steps` S below a pass of N batches the eager pass threw N − S batches away. For the two mini stand-ins
whose clients hold the most batches (FedGC's HWDigits-4, FedReg's EMNIST) and several S: FedAvg's, the eager and the
lazy FedReg's local-training seconds on the same clients, batches and rounds, each ratio to FedAvg's, and the
arithmetic floor, three gradients a step and 20 batch passes for each batch made: 3 + 20·Σmin(S, N_i)/ΣS over the
rounds' clients i (23 where every client has S batches or more).

    python bench/fedreg_steps.py [--rounds 3] [--device auto] [--out bench/results/fedreg_steps.csv]
"""

import argparse
import datetime
import math
import tempfile
import warnings
from pathlib import Path
import pandas as pd
import torch
from fedrepro.core import ALGORITHMS, PAPERS, load_modules
from fedrepro.engine import Federation, sample_clients
from fedrepro.fedreg import EagerFedReg
from fedrepro.runner import cpu_model, run
from _args import at_least, known_device, write_results  # bench/_args.py: python puts the script's folder first

SETTINGS = (('fedgc', 'HWDigits-4'), ('fedreg', 'EMNIST'))  # the mini stand-ins whose clients hold the most batches
STEPS = (1, 2, 10)


def train_seconds(cfg, rounds: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        return float(run(cfg.replace(rounds=rounds), out).metrics['train_seconds'].sum())


def floor(cfg, rounds: int) -> float:
    "Batch passes a step the rounds' clients must make: 3 a step, 20 for each synthetic batch a step uses."
    sizes = [len(c) for c in Federation(cfg).data.clients]
    made = steps = 0
    for t in range(1, rounds + 1):
        for i in sample_clients(cfg.num_clients, cfg.clients_per_round, cfg.seed, t).tolist():
            made += min(cfg.local_steps, math.ceil(sizes[i] / cfg.batch_size))
            steps += cfg.local_steps
    return 3 + 20 * made / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=at_least(1), default=3)
    ap.add_argument('--device', type=known_device, default='auto')
    ap.add_argument('--out', default=str(Path(__file__).parent / 'results' / 'fedreg_steps.csv'))
    args = ap.parse_args()
    warnings.simplefilter('ignore')
    load_modules()
    ALGORITHMS._items['fedreg_eager'] = EagerFedReg
    rows = []
    for paper, setting in SETTINGS:
        base = PAPERS[paper].config(setting, 'FedReg', 'mini', seed=0).replace(device=args.device, eval_every=1000)
        for S in STEPS:
            cfg = base.replace(local_steps=S)
            avg = train_seconds(cfg.replace(algorithm='fedavg', params={}), args.rounds)
            eager, lazy = (train_seconds(cfg.replace(algorithm=a), args.rounds) for a in ('fedreg_eager', 'fedreg'))
            low = floor(cfg, args.rounds)
            rows.append(
                {
                    'paper': paper,
                    'setting': setting,
                    'local_steps': S,
                    'fedavg_s': round(avg, 3),
                    'before_s': round(eager, 3),
                    'after_s': round(lazy, 3),
                    'before_ratio': round(eager / avg, 2),
                    'after_ratio': round(lazy / avg, 2),
                    'floor': round(low, 2),
                    'after_over_floor': round(lazy / avg / low, 2),
                }
            )
    table = pd.DataFrame(rows)
    print(
        f'{cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}, {datetime.date.today()}, '
        f'{args.rounds} rounds of the mini stand-ins'
    )
    print(table.to_string(index=False))
    write_results(table, args.out)


if __name__ == '__main__':
    main()
