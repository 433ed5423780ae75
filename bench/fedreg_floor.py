"""FedReg's local training against its arithmetic floor, measured in one run.

A FedReg step evaluates three gradients where FedAvg's evaluates one (g_γ at θ_γ, and g_s, g_p at θ_β), and once a
round it synthesises pseudo and perturbed data with ten FGSM iterations over twice the client's data, which is 20
batch-passes spread over the round's E epochs: 3 + 20/E FedAvg steps a step. For each FedReg setting with a mini
stand-in, at the paper's local epochs and at mini's: FedAvg and FedReg on the same clients, batches and rounds, their
local-training seconds, the ratio, and the ratio over the floor (1.0: FedReg costs exactly its arithmetic). Then the
synthesis alone, for 400 images through each setting's mini CNN, in batches of 10 (as FedReg does it, in its training
batches) against one batch of 400 (the FGSM iterations of different samples are independent, so they could be batched).

    python bench/fedreg_floor.py [--rounds 3] [--device auto] [--out bench/results/fedreg_floor.csv]
"""

import argparse
import datetime
import tempfile
import time
import warnings
from pathlib import Path
import pandas as pd
import torch
from fedrepro.core import DATASETS
from fedrepro.fedreg import FEDREG, pseudo_and_perturbed
from fedrepro.models import build_model
from fedrepro.runner import run
from _args import at_least, known_device, write_results  # bench/_args.py: python puts the script's folder first

SETTINGS = ('MNIST (two classes)', 'MNIST (one class)', 'EMNIST')


def train_seconds(setting: str, method: str, epochs: int, rounds: int, device: str) -> float:
    cfg = FEDREG.config(setting, method, 'mini', seed=0).replace(
        rounds=rounds, local_epochs=epochs, device=device, eval_every=1000
    )
    with tempfile.TemporaryDirectory() as out:
        return float(run(cfg, out).metrics['train_seconds'].sum())


def synthesis_seconds(setting: str, batch: int, n: int = 400) -> float:
    """Seconds to synthesise pseudo and perturbed data for `n` random images through the setting's mini model, `batch`
    at a time."""
    cfg = FEDREG.config(setting, 'FedReg', 'mini', seed=0)
    spec = DATASETS[cfg.dataset]
    model = build_model(cfg.model, spec.input_shape, spec.num_classes, **cfg.model_params).eval()
    x, y = torch.randn(n, *spec.input_shape), torch.randint(0, spec.num_classes, (n,))
    t0 = time.perf_counter()
    for i in range(0, n, batch):
        pseudo_and_perturbed(model, x[i : i + batch], y[i : i + batch], 0.1, 0.001)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--rounds', type=at_least(1), default=3)
    ap.add_argument('--device', type=known_device, default='auto')
    ap.add_argument('--out', default=str(Path(__file__).parent / 'results' / 'fedreg_floor.csv'))
    args = ap.parse_args()
    warnings.simplefilter('ignore')
    rows = []
    for setting in SETTINGS:
        for scale in ('paper', 'mini'):
            E = FEDREG.config(setting, 'FedReg', scale).local_epochs
            avg, reg = (train_seconds(setting, m, E, args.rounds, args.device) for m in ('FedAvg', 'FedReg'))
            floor = 3 + 20 / E
            rows.append(
                {
                    'setting': setting,
                    'epochs_of': scale,
                    'local_epochs': E,
                    'fedavg_s': round(avg, 3),
                    'fedreg_s': round(reg, 3),
                    'ratio': round(reg / avg, 2),
                    'floor': round(floor, 2),
                    'ratio_over_floor': round(reg / avg / floor, 2),
                }
            )
    table = pd.DataFrame(rows)
    print(
        f'{torch.get_num_threads()} threads, torch {torch.__version__}, {datetime.date.today()}, '
        f'{args.rounds} rounds of the mini stand-ins'
    )
    print(table.to_string(index=False))
    write_results(table, args.out)
    for setting in SETTINGS:
        small, whole = synthesis_seconds(setting, 10), synthesis_seconds(setting, 400)
        print(
            f'synthesis of 400 images, {setting}: {small:.2f} s in batches of 10, '
            f'{whole:.2f} s in one batch ({whole / small:.2f}×)'
        )


if __name__ == '__main__':
    main()
