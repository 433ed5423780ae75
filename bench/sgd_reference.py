"""How long FedReg's SGD reference needs to level off at mini, and what that costs: the groundwork for judging R_a.

FedReg's R_a is the rounds a method needs to reach a × SGD's best accuracy. At mini the SGD reference gets the
setting's 30-40 one-step rounds and is still rising, so every R_a cell is 'reference not converged'. For each of
Table 1's settings this runs SGD alone for `--rounds` rounds on `--seed` (a sweep seed: no verdict reads it) and reports
the first budget (of 100, 200, ..., `--rounds`) at which the protocol's plateau rule holds, the best accuracy there and
at the mini budget, the rounds to a × the long run's best, and the seconds a round costs.

    python bench/sgd_reference.py [--rounds 1000] [--seed 10] [--out bench/results/sgd_reference.csv]
"""

import argparse
import tempfile
import time
import warnings
from pathlib import Path
import pandas as pd
from fedrepro.core import PAPERS, load_modules
from fedrepro.evidence import plateau
from fedrepro.runner import run
from _args import at_least, write_results  # bench/_args.py: python puts the script's folder first

SETTINGS = ('MNIST (two classes)', 'MNIST (one class)', 'EMNIST')


def levelled_off(curve: pd.DataFrame, budgets) -> int | None:
    "The first of `budgets` at which the plateau rule holds for the run cut there."
    return next((b for b in budgets if plateau(curve[curve['round'] <= b]).ok), None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=at_least(100, ' (the budgets checked are its hundreds)'), default=1000)
    ap.add_argument('--seed', type=at_least(0), default=10)
    ap.add_argument('--out', default=str(Path(__file__).parent / 'results' / 'sgd_reference.csv'))
    args = ap.parse_args()
    warnings.simplefilter('ignore')
    load_modules()
    rows = []
    for setting in SETTINGS:
        cfg = PAPERS['fedreg'].config(setting, 'SGD', 'mini', seed=args.seed)
        mini = cfg.rounds
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            curve = run(cfg.replace(rounds=args.rounds, device='cpu'), out).metrics
            seconds = time.perf_counter() - t0
        acc = curve.dropna(subset=['test_acc']).set_index('round')['test_acc']
        best = acc.max()
        rows.append(
            {
                'setting': setting,
                'seed': args.seed,
                'mini_rounds': mini,
                'best_at_mini': round(acc[acc.index <= mini].max(), 3),
                'levelled_off_by': levelled_off(curve, range(100, args.rounds + 1, 100)),
                'rounds_run': args.rounds,
                'best': round(best, 3),
                **{f'rounds_to_{a:g}': int(acc[acc >= a * best].index.min()) for a in (0.5, 0.9, 0.99)},
                'ms_a_round': round(1000 * seconds / args.rounds, 1),
            }
        )
        print(pd.DataFrame(rows[-1:]).to_string(index=False, header=len(rows) == 1), flush=True)
    write_results(pd.DataFrame(rows), args.out)


if __name__ == '__main__':
    main()
