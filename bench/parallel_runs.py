"""Parallel runs: `run_many` on one single-thread process per core against the same runs one after another in one process.

The runs are FedReg's Table 1 at mini scale, MNIST (two classes): FedAvg and FedReg over two seeds, a few rounds each.
The serial baseline is what a notebook would do without `run_many`: one process, PyTorch's default threads (one per
core). Both write to fresh directories (nothing is resumed); the ratio of wall times is printed, with a check that
the two give identical metrics.

    python bench/parallel_runs.py [--rounds 5] [--workers 2]
"""
import argparse, os, tempfile, time
import torch
from fedrepro.fedreg import fedreg_config
from fedrepro.results import run_many


def timed(cfgs, workers):
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        results = run_many(cfgs, d, workers=workers)
        return time.perf_counter() - t0, [r.metrics['test_acc'].tolist() for r in results]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=int, default=5)
    ap.add_argument('--workers', type=int, default=os.cpu_count())
    args = ap.parse_args()
    cfgs = [fedreg_config('MNIST (two classes)', m, 'mini', seed=s, rounds=args.rounds, device='cpu') for m in ('FedReg', 'FedAvg') for s in (0, 1)]
    torch.set_num_threads(os.cpu_count())
    serial, a = timed(cfgs, 1)
    parallel, b = timed(cfgs, args.workers)
    gap = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
    print(f'{len(cfgs)} runs of {args.rounds} rounds: serial (1 process, {os.cpu_count()} threads) {serial:.1f} s, '
          f'run_many ({args.workers} processes, 1 thread each) {parallel:.1f} s: speed-up {serial / parallel:.2f}x; largest accuracy difference {gap:.4f}')


if __name__ == '__main__':
    main()
