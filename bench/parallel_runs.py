"""Parallel runs: `run_many` on single-thread processes against the same runs one after another in one process.

The runs are FedReg's Table 1 at mini scale, MNIST (two classes): FedReg and FedAvg over two seeds, a few rounds
each. The baseline is what a notebook does without `run_many`: one process, PyTorch's default threads (one per
core). Two contenders, timed in the same run: the same process at one thread (the arithmetic `run_many`'s workers
do), and `run_many` on `--workers` single-thread processes. All write to fresh directories (nothing is resumed).

PyTorch's float sums depend on the number of threads, so a run at one thread and a run at two differ in the last
bits, and FedReg's FGSM steps amplify that over rounds; runs at the same thread count are bit-identical. The
benchmark checks the identity between the one-thread serial runs and the workers, and reports the gap to the
default-thread runs.

    python bench/parallel_runs.py [--rounds 5] [--workers 2]
"""

import argparse
import os
import tempfile
import time
import torch
from fedrepro.fedreg import FEDREG
from fedrepro.results import run_many
from _args import at_least  # bench/_args.py: python puts the script's folder first


def timed(cfgs, workers, threads):
    torch.set_num_threads(threads)
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        results = run_many(cfgs, d, workers=workers)
        return time.perf_counter() - t0, [r.metrics['test_acc'].tolist() for r in results]


def gap(a, b):
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=at_least(1), default=5)
    ap.add_argument('--workers', type=at_least(1), default=os.cpu_count())
    args = ap.parse_args()
    cores = os.cpu_count()
    cfgs = [
        FEDREG.config('MNIST (two classes)', m, 'mini', seed=s, rounds=args.rounds, device='cpu')
        for m in ('FedReg', 'FedAvg')
        for s in (0, 1)
    ]
    base, acc_base = timed(cfgs, 1, cores)
    one, acc_one = timed(cfgs, 1, 1)
    par, acc_par = timed(cfgs, args.workers, cores)
    print(f'{len(cfgs)} runs of {args.rounds} rounds on {cores} cores')
    print(f'  baseline, one process at {cores} threads: {base:.1f} s')
    print(f'  one process at 1 thread:             {one:.1f} s  ({base / one:.2f}x the baseline)')
    print(f'  run_many, {args.workers} processes of 1 thread:  {par:.1f} s  ({base / par:.2f}x the baseline)')
    print(
        f'  largest accuracy difference, workers vs 1-thread serial: {gap(acc_par, acc_one):.2g} (must be 0); '
        f'vs {cores}-thread serial: {gap(acc_par, acc_base):.2g}'
    )


if __name__ == '__main__':
    main()
