"""Pooling: `MaxPool2` against the stock `nn.MaxPool2d(2)`, measured in one run.

For the small CNNs of the `mini` reproductions: a training step at the setting's batch size (`MaxPool2`: channels-last
forward, NCHW backward) and an evaluation forward pass at 256 images under inference mode (`MaxPool2`: the larger of
each row pair, then of each column pair), each model built twice from the same seed, once with the stock pool swapped
back in. The two are timed alternately, `--repeats` rounds of `--steps` each after a warm-up; the medians and their
ratio are printed. The two models' parameters after the same steps are checked to be bit for bit the same, and their
evaluation logits to be the same numbers (`torch.equal`, for which a zero is a zero whatever its sign).

    OMP_NUM_THREADS=1 python bench/pooling.py [--repeats 5] [--steps 50]
"""

import argparse
import statistics
import time
import torch
import torch.nn.functional as F
from fedrepro.models import build_model, with_stock_pools
from _args import at_least  # bench/_args.py: python puts the script's folder first

MODELS = [  # (name, model, options, input shape, training batch): the mini scales' CNNs
    ('FedReg MNIST', 'cnn5', {'channels': (16, 16, 32), 'hidden': 128}, (1, 28, 28), 10),
    ('FedGC HWDigits', 'hwdigits_cnn', {'channels': (8, 16), 'hidden': (128, 100)}, (3, 32, 32), 20),
    ('FedSSD / FedGG LeNet', 'lenet', {}, (3, 32, 32), 64),
    ('FedImp CNN', 'fedavg_cnn', {'channels': (8, 16), 'hidden': (128,)}, (1, 28, 28), 10),
]


def timed(fn, steps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(steps):
        fn()
    return (time.perf_counter() - t0) / steps


def compare(kind, options, shape, batch, repeats, steps):
    models = []
    for swap in (False, True):
        m = build_model(kind, shape, 10, seed=0, **options)
        models.append(with_stock_pools(m) if swap else m)
    ours, theirs = models
    x, y, xe = torch.randn(batch, *shape), torch.randint(0, 10, (batch,)), torch.randn(256, *shape)
    opts = [torch.optim.SGD(m.parameters(), lr=0.01) for m in models]

    def step(m, opt):
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()

    def forward(m):
        with torch.inference_mode():
            m(xe)

    result = {}
    for what, fns in (
        ('step', [lambda m=m, o=o: step(m, o) for m, o in zip(models, opts)]),
        ('eval', [lambda m=m: forward(m) for m in models]),
    ):
        for fn in fns:
            timed(fn, 5)
        t = [[], []]
        for _ in range(repeats):
            for i, fn in enumerate(fns):
                t[i].append(timed(fn, steps))
        result[what] = statistics.median(t[1]) / statistics.median(t[0]), statistics.median(t[0])
    same = all(torch.equal(a, b) for a, b in zip(ours.parameters(), theirs.parameters()))
    with torch.inference_mode():
        same_logits = torch.equal(ours(xe), theirs(xe))
    return result, same, same_logits


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=at_least(1), default=5)
    ap.add_argument('--steps', type=at_least(1), default=50)
    args = ap.parse_args()
    print(
        f'{"model":<22} {"batch":>5}  {"step ms":>7} {"stock/ours":>10}  '
        f'{"eval ms":>7} {"stock/ours":>10}  same parameters, logits'
    )
    for name, kind, options, shape, batch in MODELS:
        r, same, same_logits = compare(kind, options, shape, batch, args.repeats, args.steps)
        print(
            f'{name:<22} {batch:>5}  {r["step"][1] * 1e3:7.2f} {r["step"][0]:10.2f}  '
            f'{r["eval"][1] * 1e3:7.2f} {r["eval"][0]:10.2f}  {same}, {same_logits}'
        )
    print(
        f'torch {torch.__version__}, {torch.get_num_threads()} thread(s); '
        'ms: ours, per step or per 256-image forward pass'
    )


if __name__ == '__main__':
    main()
