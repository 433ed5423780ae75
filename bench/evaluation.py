"""Evaluation: the test set in one pass (the old default, 4,096 images a pass) against cache-sized batches (256, the
default), measured in the same run on the models and test sets of the `mini` reproductions.

For each setting: the seed-0 federation after one round of FedAvg, its test set evaluated alternately both ways,
`--repeats` times each after a warm-up. Prints the median seconds and their ratio, and checks that both ways return
exactly the same accuracy and loss (`evaluate` reduces the loss once over every logit, so the batch cannot change it).

    python bench/evaluation.py [--repeats 5] [--device auto]
"""

import argparse
import statistics
import time
import torch
from fedrepro.engine import Federation, evaluate, synchronize
from fedrepro.fedreg import FEDREG
from fedrepro.fedgc import FEDGC
from _args import at_least, known_device  # bench/_args.py: python puts the script's folder first

SETTINGS = [(FEDREG, 'MNIST (one class)'), (FEDREG, 'EMNIST'), (FEDREG, 'CIFAR-100 (ResNet-9)'), (FEDGC, 'HWDigits-4')]
ONE_PASS, CACHED = 4096, 256


def timed(fed, batch_size):
    synchronize(fed.device)
    t0 = time.perf_counter()
    m = evaluate(fed.fm.model, fed.data.x_test, fed.data.y_test, batch_size, fed.data.prepare)
    synchronize(fed.device)
    return time.perf_counter() - t0, m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=at_least(1), default=5)
    ap.add_argument('--device', type=known_device, default='auto')
    args = ap.parse_args()
    print(f'{"setting":<24} {"model":<14} {"test":>5} {ONE_PASS:>6} s {CACHED:>6} s  ratio  same result')
    for paper, setting in SETTINGS:
        fed = Federation(paper.config(setting, 'FedAvg', 'mini', seed=0, device=args.device))
        fed.round(1)
        fed.fm.load_(fed.algo.x)
        timed(fed, ONE_PASS)
        timed(fed, CACHED)  # warm-up
        one, cached = [], []
        for _ in range(args.repeats):
            (t1, m1), (t2, m2) = timed(fed, ONE_PASS), timed(fed, CACHED)
            one.append(t1)
            cached.append(t2)
        a, b = statistics.median(one), statistics.median(cached)
        print(
            f'{setting:<24} {fed.cfg.model:<14} {len(fed.data.y_test):>5} {a:>8.3f} {b:>8.3f}  {a / b:5.2f}  {m1 == m2}'
        )
    print(f'torch {torch.__version__}, {torch.get_num_threads()} thread(s)')


if __name__ == '__main__':
    main()
