"""Start-up: the wall time of a one-round `fedrepro run` on the embedded MNIST, and of importing what it imports.

Each is a fresh process, `--repeats` times after one untimed run; the medians are printed, with the import of torch
alone for scale. What is left once imports are lazy is torch's own import and the round's training and two evaluations
(round 0 and round 1): their sum, the floor no import can lower, is printed last (the round's seconds are the run's own
`train_seconds` and `eval_seconds`, from the summary it prints). The processes run as Python does by default, caching
compiled bytecode: `PYTHONDONTWRITEBYTECODE`, if set, is unset for them (with it, an editable install compiles
fedrepro's modules from source at every start).

    python bench/startup.py [--repeats 5]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from _args import at_least  # bench/_args.py: python puts the script's folder first

ENV = {k: v for k, v in os.environ.items() if k != 'PYTHONDONTWRITEBYTECODE'}


def timed(code: str, repeats: int) -> tuple[float, list[str]]:
    "The median wall seconds of `code` in a fresh process, and each run's stdout."
    times, outs = [], []
    for _ in range(repeats + 1):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            done = subprocess.run(
                [sys.executable, '-c', code.replace('OUT', out)], check=True, capture_output=True, text=True, env=ENV
            )
            times.append(time.perf_counter() - t0)
            outs.append(done.stdout)
    return statistics.median(times[1:]), outs[1:]


def round_seconds(stdout: str) -> float:
    "The training and evaluation seconds of the run whose summary `fedrepro run` printed."
    summary = json.loads(stdout[stdout.index('{') : stdout.rindex('}') + 1])
    return summary['train_seconds'] + summary['eval_seconds']


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=at_least(1), default=5)
    args = ap.parse_args()
    run = (
        "from fedrepro.cli import main; main(['run', '--dataset', 'mnist5k', '--num-clients', '10', '--rounds', '1', "
        "'--out', 'OUT', '--no-progress'])"
    )
    for what, code in (
        ('python', 'pass'),
        ('import torch', 'import torch'),
        ('import fedrepro.cli', 'import fedrepro.cli'),
        ('import every fedrepro module', 'from fedrepro.core import load_modules; load_modules()'),
        ('fedrepro run --dataset mnist5k --num-clients 10 --rounds 1', run),
    ):
        seconds, outs = timed(code, args.repeats)
        print(f'{seconds:6.2f} s  {what}')
        if what == 'import torch':
            torch_s = seconds
    work = statistics.median(map(round_seconds, outs))
    print(f'{work:6.2f} s  of which the round itself: training and the two evaluations (the run\'s summary)')
    print(f'{torch_s + work:6.2f} s  the floor: import torch + the round')


if __name__ == '__main__':
    main()
