"""Evaluation's share of finished runs: for every run folder under the given `runs` folders (a `fedrepro reproduce --out
DIR` keeps them in `DIR/runs`), the seconds its rounds spent training, evaluating the global model and, with
`eval_local`, evaluating each client's local model, summed over the runs of one kind (dataset, clients, model,
algorithm, rounds, whether local models are evaluated). Prints the kinds by total seconds, then FedAvg's runs alone,
the baseline #17 sets the 20 % bound on.

    python bench/eval_share.py repro_out/runs [more/runs ...] [--top 25]
"""

import argparse
import json
from collections import defaultdict
from pathlib import Path
import pandas as pd
from _args import at_least, existing_folder  # bench/_args.py: python puts the script's folder first


def run_seconds(run_dir: Path) -> tuple[tuple, dict] | None:
    """A finished run's kind and its training, global-evaluation and local-evaluation seconds (None if it has not
    finished)."""
    try:
        cfg, metrics = json.loads((run_dir / 'config.json').read_text())['config'], pd.read_csv(run_dir / 'metrics.csv')
    except (OSError, ValueError, KeyError):
        return None
    if not (run_dir / 'summary.json').exists():
        return None
    kind = (
        cfg['dataset'],
        f"{cfg['clients_per_round']}/{cfg['num_clients']}",
        cfg['model'],
        cfg['algorithm'],
        cfg['rounds'],
        bool(cfg.get('eval_local')),
    )
    local = float(metrics['local_eval_seconds'].sum()) if 'local_eval_seconds' in metrics else 0.0
    return kind, {
        'train': float(metrics['train_seconds'].sum()),
        'eval': float(metrics['eval_seconds'].sum()),
        'local eval': local,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('runs', nargs='+', type=existing_folder)
    ap.add_argument('--top', type=at_least(1), default=25)
    args = ap.parse_args()
    kinds = defaultdict(lambda: {'runs': 0, 'train': 0.0, 'eval': 0.0, 'local eval': 0.0})
    for folder in args.runs:
        for d in sorted(p for p in folder.iterdir() if p.is_dir()):
            if (r := run_seconds(d)) is None:
                continue
            k = kinds[r[0]]
            k['runs'] += 1
            for key, s in r[1].items():
                k[key] += s
    df = pd.DataFrame(
        [
            dict(zip(('dataset', 'clients', 'model', 'algorithm', 'rounds', 'eval_local'), k)) | v
            for k, v in kinds.items()
        ]
    )
    df['total'] = df[['train', 'eval', 'local eval']].sum(axis=1)
    df['eval share'] = (df['eval'] + df['local eval']) / df['total']
    df['global eval share'] = df['eval'] / (df['train'] + df['eval'])
    df = df.sort_values('total', ascending=False)
    with pd.option_context('display.width', 200, 'display.max_columns', None, 'display.float_format', '{:.2f}'.format):
        print(df.head(args.top).to_string(index=False))
        print(
            f"\nall {df['runs'].sum()} runs: {df['total'].sum() / 60:.1f} core-minutes, "
            f"of which training {df['train'].sum() / df['total'].sum():.0%}, "
            f"global evaluation {df['eval'].sum() / df['total'].sum():.0%}, "
            f"local evaluation {df['local eval'].sum() / df['total'].sum():.0%}"
        )
        base = df[df['algorithm'] == 'fedavg']
        print("\nFedAvg's runs (the global model's evaluation against training and it):")
        print(
            base[
                ['dataset', 'clients', 'model', 'rounds', 'eval_local', 'runs', 'train', 'eval', 'global eval share']
            ].to_string(index=False)
        )


if __name__ == '__main__':
    main()
