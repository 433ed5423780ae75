"""Every paper-scale setting of the five papers on one device, without any dataset: does each method run, does its first
local update agree with the CPU's, how long does a round take, and how much GPU memory does it use.

For each (paper, setting, method) at paper scale (`Paper.config(setting, method, 'paper')`, the config a job runs) it
builds the paper's model (random init: no weights are downloaded) and synthetic data in the dataset's shapes: the
dataset's input shape, classes and test-set size, the setting's number of clients, every client at the paper's mean
client size (the partition's `samples_per_client` or `total`, else the training set over the clients), all clients
drawing their images from one shared pool of at most `--pool` random images so that memory stays bounded. Then:

* **check**: the first client of round 1 runs its update on the CPU and on the device from the same seed, on the same
  synthetic batches (that client holding at most one batch, `--check-steps` local steps, dropout off since its masks
  come from each device's own generator, TF32 off); `check_diff` is the largest |device − cpu| over every tensor the
  client uploads (model with its BatchNorm statistics, Fisher, control variate, ...), in float32. Tolerance: the check
  passes when, for every uploaded tensor, max |device − cpu| <= 1e-4 × max(1, max |cpu|). Float32 kernels sum in a
  different order on a GPU, which a few steps amplify to about 1e-6; a method that takes the sign of a gradient
  (FedReg's FGSM pseudo data) can flip a sign near zero and exceed it legitimately: read its `check_diff` before
  calling it broken. CPU against CPU it is exactly 0. Where float32 exceeds the tolerance, the same update is compared
  again with the model (its own float64 init, the same on both) and images in float64 on both devices (`check` 'pass
  in float64 (d)' or 'fail (float64: d)'):
  rounding that the model amplifies shrinks with float64's 1e-16 to far below the tolerance, a device difference
  (a wrong stream, a lost transfer) does not. Why: on the H200 FedSSD's ResNet-50 (CIFAR-100) differed by 0.06 (in
  conv1's weights and layer4's BatchNorm `running_var`) while every other model agreed to <= 5e-5, TF32 being off for
  both matmuls and cuDNN. That is the model, not the device: at its random init on random-pixel images, ResNet-50
  without a max-pool amplifies rounding so much that on the CPU alone a sub-ulp nudge of the broadcast model (×(1 +
  1e-8 ε)) moves conv1's one-step update by 5e-4 and its two-step update by 0.04 (0.05 over the upload).
* **timing**: one client a round first (rounds 1 and 2, round 2 timed, synchronised), which estimates the paper's
  round as K × that; when that estimate is at most `--round-cap-s`, rounds 1 and 2 run again at the paper's K clients a
  round and round 2 is timed (`clients_timed` = K); otherwise `round_s` is the one-client round × K (`clients_timed` =
  1: extrapolated). `eval_s` is one evaluation of a test set of the dataset's size. `peak_mib`:
  torch.cuda.max_memory_allocated over the timed federation; `upload_mib`: one client's upload, which the server holds
  K of.
* **privacy attacks** (FedReg Figures C.3/C.4, FedGC Figure 5): one attack on the paper's number of images of one
  upload, `--attack-iters` iterations timed after one warm-up iteration, scaled to the paper's iterations
  (`attack_s`); DLG's L-BFGS steps vary in cost with convergence, so its scaled time is rough.

Rows with the same workload (same model, data shapes, clients, schedule and method, hyperparameter values aside) are
timed once; the others say whose timing they share. Rows go to `--out/gpu_check.csv` as they finish (and to stdout),
with the GPU's name, torch version and date. `--budget-s` bounds the whole run: when it is spent, the remaining rows
are written as "not measured (time budget)". The most informative rows come first: one per model, one per algorithm,
the attacks, then the rest.

On the device machine (torch and the scientific stack present; quadprog, opacus and opt_einsum come as wheels in .whl/):

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .whl/*.whl &&
      PYTHONPATH=/tmp/site:. PYTHONUNBUFFERED=1 python3 bench/gpu_check.py --device cuda --out $OUT --budget-s 300

(.whl/ is git-ignored: the device tool must be told to carry it.) Wall time is about the budget plus the row under way
when it runs out (at most about 2 × `--round-cap-s` + its CPU check) plus a few seconds of start-up: give it
`timeout_s` 420. Then `python bench/paper_cost.py --gpu-check DIR/gpu_check.csv` writes bench/results/paper_cost.csv.

`--device cpu --scale smoke` runs tiny shapes on a few representative settings in seconds (tests/test_gpu_check.py).
"""

from __future__ import annotations
import argparse
import copy
import csv
import datetime
import time
import traceback
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
import torch
from torch import nn

from fedrepro.core import PAPERS, DATASETS, load_modules, get_device
from fedrepro.data import FedData
from fedrepro.engine import Algorithm, ClientStore, Federation, sample_clients
from fedrepro.runner import cpu_model

# the real datasets' train and test sizes (their `DatasetSpec.source` states them); nothing is read from disk
SIZES = {
    'mnist': (60000, 10000),
    'emnist': (240000, 40000),
    'cifar10': (50000, 10000),
    'cifar100': (50000, 10000),
    'svhn': (73257, 26032),
    'tinyimagenet': (100000, 10000),
    'hwdigits': (199549, 47040),
    'covidct': (425, 321),
    'covidct128': (425, 321),
    'landmarks': (164172, 19526),
}
SMOKE_SETTINGS = [
    ('fedreg', 'EMNIST'),
    ('fedgc', 'HWDigits-4'),
    ('fedimp', 'MNIST MLP (P)'),
    ('fedssd', 'CIFAR-10'),
    ('fedgg', 'SVHN (β=0.5)'),
]
# the attacks of FedReg's Figures C.3/C.4 and FedGC's Figure 5: (paper, setting, method trained, images, iterations)
ATTACKS = [
    ('fedreg', 'EMNIST', 'FedReg with MG', 10, 32000),
    ('fedreg', 'CIFAR-10 (uniform)', 'FedReg with MG', 10, 32000),
    ('fedreg', 'CT images of COVID-19', 'FedReg with MG', 10, 32000),
    ('fedgc', 'CIFAR10-10', 'FedGC', 4, None),
]
FEDGC_ITERS = {'DLG': 300, 'IG': 1000}
TOLERANCE = 1e-4
COLUMNS = [
    'paper',
    'setting',
    'method',
    'algorithm',
    'model',
    'dataset',
    'params',
    'num_clients',
    'clients_per_round',
    'client_size',
    'local_epochs',
    'local_steps',
    'batch_size',
    'status',
    'check_diff',
    'check',
    'clients_timed',
    'round_s',
    'eval_s',
    'eval_every',
    'peak_mib',
    'upload_mib',
    'attack_s',
    'attack_iters',
    'device',
    'gpu',
    'torch',
    'date',
]


# ---- the rows: every paper-scale (paper, setting, method), most informative first
def all_rows(scale: str) -> list[dict]:
    "Every (paper, setting, method) at paper scale; at smoke, those of `SMOKE_SETTINGS`."
    load_modules()
    rows = [
        dict(paper=k, setting=st, method=m)
        for k in PAPERS
        for st in PAPERS[k].settings
        for m in PAPERS[k].run_methods(st, 'paper')
    ]
    if scale == 'smoke':
        rows = [r for r in rows if (r['paper'], r['setting']) in SMOKE_SETTINGS]
    return rows


def attack_rows(scale: str) -> list[dict]:
    "One row per attack and upload it attacks."
    out = []
    for k, st, trained, images, iters in ATTACKS:
        if scale == 'smoke' and (k, st) not in SMOKE_SETTINGS:
            continue
        kinds = ['IG: FedAvg', 'IG: FedAvg with DPSGD', 'IG: FedReg with MG'] if k == 'fedreg' else ['DLG', 'IG']
        out += [
            dict(paper=k, setting=st, method=f'attack {kind}', trained=trained, images=images, iters=iters)
            for kind in kinds
        ]
    return out


def ordered(rows: list[dict], attacks: list[dict], rest: bool = True) -> list[dict]:
    """One row per model, then one per algorithm (and DP-SGD), then the attacks, then (`rest`) the others, in the
    papers' order."""
    first, seen_models, seen_algos = [], set(), set()
    for r in rows:
        cfg = paper_config(r)
        if cfg.model not in seen_models and cfg.algorithm == 'fedavg' and cfg.dp_clip is None:
            seen_models.add(cfg.model)
            first.append(r)
    for r in rows:
        cfg = paper_config(r)
        algo = (cfg.algorithm, cfg.dp_clip is not None)
        if algo not in seen_algos and r not in first:
            seen_algos.add(algo)
            first.append(r)
    return first + attacks + ([r for r in rows if r not in first] if rest else [])


def paper_config(row: dict, **overrides):
    "The row's config at paper scale, as a job builds it, with random init for pretrained models."
    p = PAPERS[row['paper']]
    cfg = p.config(row['setting'], row.get('trained', row['method']), 'paper', **overrides)
    if cfg.model_params.get('pretrained'):
        cfg = cfg.replace(model_params={**cfg.model_params, 'pretrained': False})
    return cfg


# ---- synthetic data in the dataset's shapes
def client_size(cfg) -> int:
    """The paper's mean client size: the partition's samples a client, or its total, else the training set, over the
    clients."""
    pp, train = cfg.partition_params, SIZES[cfg.dataset][0]
    if 'samples_per_client' in pp:
        return int(pp['samples_per_client'])
    n = pp.get('total', train) / cfg.num_clients
    if 'local_split' in pp:
        n *= pp['local_split'][0]
    return max(1, round(n))


def test_size(cfg) -> int:
    """The test set's size: the clients' test parts (`local_split`'s test fraction of the training set), else the
    dataset's test set, which a zero test fraction keeps too (FedImp's `[0.8, 0.2, 0.0]`, as `partition_shards`)."""
    train, test = SIZES[cfg.dataset]
    split = cfg.partition_params.get('local_split') or ()
    return round(train * split[2]) if len(split) == 3 and split[2] else test


def synthetic(cfg, n_client: int, n_test: int, pool: int, aux_per_class: int, seed: int = 0) -> FedData:
    """Random uint8 images and labels in the dataset's shapes: `cfg.num_clients` clients of `n_client` images from one
    pool."""
    spec, g = DATASETS[cfg.dataset], torch.Generator().manual_seed(seed)
    shape, c = spec.input_shape, spec.num_classes
    images = lambda n: torch.randint(0, 256, (n, *shape), generator=g, dtype=torch.uint8)
    labels = lambda n: torch.randint(0, c, (n,), generator=g)
    p = min(pool, max(n_client, 1) * cfg.num_clients)
    clients = [torch.randint(0, p, (n_client,), generator=g) for _ in range(cfg.num_clients)]
    aux = aux_per_class * c
    x_aux, y_aux = (images(aux), torch.arange(c).repeat_interleave(aux_per_class)) if aux else (None, None)
    return FedData(
        cfg.dataset,
        images(p),
        labels(p),
        images(n_test),
        labels(n_test),
        clients,
        c,
        spec.mean,
        spec.std,
        spec.augment,
        x_aux=x_aux,
        y_aux=y_aux,
    )


# ---- device helpers
def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


@contextmanager
def exact_float32():
    "TF32 off for matmuls and convolutions while the CPU comparison runs."
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def no_dropout(model: nn.Module):
    for m in model.modules():
        if isinstance(m, nn.modules.dropout._DropoutNd):
            m.p = 0.0


def mib(nbytes: float) -> float:
    return round(nbytes / 2**20, 1)


def upload_bytes(up: dict) -> int:
    return sum(v.numel() * v.element_size() for v in up.values() if torch.is_tensor(v))


# ---- the three measurements of a run row
@contextmanager
def default_dtype(dtype):
    "Models (and every tensor made without a dtype) built in `dtype` meanwhile."
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def in_dtype(data: FedData, dtype) -> FedData:
    """`data` with its images as floats in [0, 1] of `dtype` (as `to_float` makes them; its pipeline normalises them the
    same way)."""
    if dtype == torch.float32:
        return data
    as_float = lambda x: None if x is None else (x.to(dtype) / 255 if x.dtype == torch.uint8 else x.to(dtype))
    return replace(data, x_train=as_float(data.x_train), x_test=as_float(data.x_test), x_aux=as_float(data.x_aux))


def first_update(cfg, data: FedData, device, steps: int, dtype=torch.float32) -> dict:
    """The floating tensors the first client of round 1 uploads after `steps` local steps on `device` in `dtype`, as
    float64 on the CPU."""
    c = cfg.replace(device=str(device), local_steps=min(steps, cfg.local_steps or steps))
    # `in_dtype` stores the images as floats, which only the dataset's own pipeline reads: a config's own
    # normalisation ('none', 'half') needs the stored integers, and both sides of the comparison share this one
    c = c.replace(normalize='dataset')
    with default_dtype(dtype):
        fed = Federation(c, data=in_dtype(data, dtype), store=ClientStore())
        no_dropout(fed.fm.model)
        cid = int(sample_clients(c.num_clients, c.clients_per_round, c.seed, 1)[0])
        with exact_float32():
            up, _, _ = fed.client_update(cid, 1, fed.algo.broadcast(), None)
    return {k: v.detach().double().cpu() for k, v in up.items() if torch.is_tensor(v) and v.is_floating_point()}


def compare_update(cfg, data: FedData, steps: int, device, dtype) -> tuple[float, bool]:
    """Largest |device − cpu| over the first client's uploaded tensors in `dtype`, and whether each tensor is within
    `TOLERANCE`."""
    ref, got = (first_update(cfg, data.to(d), d, steps, dtype) for d in (torch.device('cpu'), device))
    diffs = {k: float((got[k] - ref[k]).abs().max()) if ref[k].numel() else 0.0 for k in ref}
    ok = all(d <= TOLERANCE * max(1.0, float(ref[k].abs().max()) if ref[k].numel() else 0.0) for k, d in diffs.items())
    return max(diffs.values(), default=0.0), ok


def check_update(cfg, args, device) -> tuple[float, str]:
    "The float32 |device − cpu|, and 'pass' at `TOLERANCE`, else the verdict of the same comparison in float64."
    n = min(client_size(cfg), cfg.batch_size, args.max_client)
    data = synthetic(cfg, n, 2, n * 4, min(cfg.aux_per_class, 2))
    diff, ok = compare_update(cfg, data, args.check_steps, device, torch.float32)
    if ok:
        return diff, 'pass'
    try:
        diff64, ok64 = compare_update(cfg, data, args.check_steps, device, torch.float64)
    except Exception as e:
        return diff, f'fail (float64 not run: {one_line(e)})'
    return diff, f'pass in float64 ({diff64:.2g})' if ok64 else f'fail (float64: {diff64:.2g})'


def timed_round(fed: Federation, t: int) -> float:
    sync(fed.device)
    t0 = time.perf_counter()
    fed.round(t)
    sync(fed.device)
    return time.perf_counter() - t0


def two_rounds(cfg, data: FedData, rounds: int) -> tuple[float, Federation]:
    "Round 1 as warm-up, round 2 timed (at smoke, only round 1, timed)."
    fed = Federation(cfg, data=data, store=ClientStore())
    if rounds == 1:
        return timed_round(fed, 1), fed
    fed.round(1)
    return timed_round(fed, 2), fed


def time_rounds(cfg, args, device) -> dict:
    "Seconds a round at the paper's clients per round (measured, or one client's round × K), evaluation, peak memory."
    n = min(client_size(cfg), args.max_client)
    data = synthetic(cfg, n, min(test_size(cfg), args.max_test), args.pool, cfg.aux_per_class).to(device)
    one = cfg.replace(clients_per_round=1)
    reset_peak(device)
    t1, fed = two_rounds(one, data, args.rounds)
    k = cfg.clients_per_round
    if k > 1 and t1 * k <= args.round_cap_s:
        reset_peak(device)
        tk, fed = two_rounds(cfg, data, args.rounds)
        round_s, timed = tk, k
    else:
        round_s, timed = t1 * k, 1
    ev = fed.evaluate()['eval_seconds']
    cid = int(sample_clients(cfg.num_clients, 1, cfg.seed, 3)[0])
    up = fed.client_update(cid, 3, fed.algo.broadcast(), fed.store.get(cid))[0]
    return dict(
        clients_timed=timed,
        round_s=round_s,
        eval_s=ev,
        peak_mib=peak(device),
        upload_mib=mib(upload_bytes(up)),
        params=fed.fm.num_params,
    )


def reset_peak(device):
    if device.type == 'cuda':
        torch.cuda.reset_peak_memory_stats(device)


def peak(device):
    return mib(torch.cuda.max_memory_allocated(device)) if device.type == 'cuda' else ''


# ---- the attacks
def attack_time(row: dict, args, device) -> dict:
    "Seconds of one attack on the paper's images at the paper's iterations, from `--attack-iters` timed ones."
    from fedrepro.privacy import observe_upload, observed_gradient, dummy_gradients, clipped_upload, fedreg_upload
    from fedrepro.privacy import inverting_gradients, dlg, idlg_labels, INVERSION

    cfg = paper_config(row, device=str(device))
    images = row['images'] if args.scale == 'paper' else 2
    fed = Federation(cfg, data=synthetic(cfg, 1, images, max(images, 16), 0), store=ClientStore())
    data = fed.data  # on the device, with the config's pipeline: what its clients train on
    fm, theta, kind = fed.fm, fed.algo.x.clone(), row['method'].split(' ', 1)[1]
    avg = Algorithm(cfg.replace(algorithm='fedavg', params={}), theta)
    dp = (1.0, cfg.dp_noise or 1.0) if 'DPSGD' in kind else None
    uploader = fed.algo if kind.endswith('FedReg with MG') else avg
    target = torch.stack(
        [
            observed_gradient(
                observe_upload(uploader, fm, data, i, cfg.lr, {'x': theta}, dp), theta[: fm.num_params], cfg.lr
            )
            for i in range(images)
        ]
    )
    fm.load_(theta)
    model, y, shape = copy.deepcopy(fm.model), data.y_train[:images], data.input_shape
    mean, std = data.mean, data.std
    if row['paper'] == 'fedgc':
        model, target = model.double(), target.double()
        labels = idlg_labels(fm, target)
        iters = FEDGC_ITERS[kind]
        run = lambda n: (
            dlg(model, target, labels, shape, mean, std, iters=n)
            if kind == 'DLG'
            else inverting_gradients(model, target, labels, shape, mean, std, iters=n)
        )
    else:
        hp, (distance, tv) = fed.algo.hp, INVERSION[row['setting']]
        upload = (
            clipped_upload(1.0)
            if dp
            else (
                lambda m, x, l, mu, sd: fedreg_upload(
                    m, x, l, cfg.lr, hp['eta_s'], fed.algo.eta_p, hp['iters'], mu, sd, hp['clip']
                )
            )
            if kind.endswith('FedReg with MG')
            else dummy_gradients
        )
        iters = row['iters']
        run = lambda n: inverting_gradients(
            model, target, y, shape, mean, std, iters=n, lr=1.0, tv=tv, distance=distance, upload=upload
        )
    run(1)
    sync(device)
    t0 = time.perf_counter()
    run(args.attack_iters)
    sync(device)
    return dict(
        attack_s=(time.perf_counter() - t0) / args.attack_iters * iters, attack_iters=iters, params=fm.num_params
    )


# ---- the loop
def workload(cfg) -> tuple:
    """What a row's timing depends on: the config without its seed, partition parameters and numeric hyperparameter
    values."""
    params = tuple(sorted((k, v if isinstance(v, (str, bool)) else type(v).__name__) for k, v in cfg.params.items()))
    return (
        cfg.dataset,
        cfg.model,
        str(cfg.model_params),
        cfg.algorithm,
        params,
        cfg.num_clients,
        cfg.clients_per_round,
        client_size(cfg),
        cfg.local_epochs,
        cfg.local_steps,
        cfg.batch_size,
        cfg.aux_per_class,
        cfg.dp_clip is not None,
        cfg.eval_every,
        cfg.augment,
    )


def row_config(row: dict, args, device=None):
    "The config a run row measures: the paper's, or at smoke its tiny version."
    cfg = paper_config(row, **({'device': str(device)} if device else {}))
    return smoke_config(cfg) if args.scale == 'smoke' else cfg


def describe(cfg) -> dict:
    "The config's fields, for the CSV."
    return dict(
        algorithm=cfg.algorithm,
        model=cfg.model,
        dataset=cfg.dataset,
        num_clients=cfg.num_clients,
        clients_per_round=cfg.clients_per_round,
        client_size=client_size(cfg),
        local_epochs=cfg.local_epochs,
        local_steps=cfg.local_steps or '',
        batch_size=cfg.batch_size,
        eval_every=cfg.eval_every,
    )


def smoke_config(cfg):
    "Tiny shapes: three clients, two a round, one epoch, at most two local steps of at most four images."
    return cfg.replace(
        num_clients=min(cfg.num_clients, 3),
        clients_per_round=min(cfg.clients_per_round, 2),
        local_epochs=1,
        local_steps=min(cfg.local_steps or 2, 2),
        batch_size=min(cfg.batch_size, 4),
    )


def measure(row: dict, args, device) -> dict:
    if row['method'].startswith('attack'):
        return {'status': 'ok', **attack_time(row, args, device)}
    cfg = row_config(row, args, device)
    diff, verdict = check_update(cfg, args, device) if args.check_steps else ('', '')
    return dict(
        status='ok', check_diff=f'{diff:.3g}' if diff != '' else '', check=verdict, **time_rounds(cfg, args, device)
    )


def one_line(e: BaseException) -> str:
    return f'error: {type(e).__name__}: {" ".join(str(e).split())}'[:300]


def environment(device) -> dict:
    gpu = torch.cuda.get_device_name(device) if device.type == 'cuda' else cpu_model()
    return dict(device=str(device), gpu=gpu, torch=torch.__version__, date=datetime.date.today().isoformat())


class Writer:
    "The CSV, a row at a time, flushed; each row printed too."

    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.f = open(path, 'w', newline='')
        self.w = csv.DictWriter(self.f, COLUMNS, extrasaction='ignore')
        self.w.writeheader()

    def __call__(self, row: dict):
        self.w.writerow(row)
        self.f.flush()
        print(' | '.join(f'{k}={row[k]}' for k in COLUMNS[:3] + COLUMNS[13:24] if row.get(k, '') != ''), flush=True)


def run(args) -> Path:
    device = get_device(args.device)
    start, env = time.perf_counter(), environment(device)
    rows = ordered(all_rows(args.scale), attack_rows(args.scale), rest=args.scale == 'paper')
    out = Path(args.out) / 'gpu_check.csv'
    done = measured_before(args.resume)  # read before the writer empties a CSV resumed in place
    write, timed = Writer(out), {}
    print(f'{len(rows)} rows on {env["gpu"]} ({device}), torch {env["torch"]}, budget {args.budget_s:g} s', flush=True)
    for row in rows:
        attack = row['method'].startswith('attack')
        row = {**row, **env, **({} if attack else describe(row_config(row, args)))}
        key = None if attack else workload(row_config(row, args))
        if (before := done.get((row['paper'], row['setting'], row['method']))) is not None:
            row = before
            if key is not None and row['status'] == 'ok':
                timed[key] = (f"{row['setting']} / {row['method']}", _timing(row))
        elif key in timed:
            row |= {**timed[key][1], 'status': f'ok: timing of {timed[key][0]}', 'check': '', 'check_diff': ''}
        elif time.perf_counter() - start > args.budget_s:
            row['status'] = 'not measured (time budget)'
        else:
            try:
                row |= measure(row, args, device)
            except Exception as e:
                row['status'] = one_line(e)
                if args.traceback:
                    traceback.print_exc()
            if key is not None and row['status'] == 'ok':
                timed[key] = (f"{row['setting']} / {row['method']}", _timing(row))
        for k in ('round_s', 'eval_s', 'attack_s'):
            if isinstance(row.get(k), float):
                row[k] = f'{row[k]:.4g}'
        write(row)
        if device.type == 'cuda':
            torch.cuda.empty_cache()
    print(f'done in {time.perf_counter() - start:.0f} s: {out}', flush=True)
    return out


def measured_before(path) -> dict:
    """The rows of an earlier gpu_check.csv that ran, by (paper, setting, method): `--resume` keeps them (failed rows
    run again)."""
    if path is None:
        return {}
    with open(path, newline='') as f:
        rows = list(csv.DictReader(f))
    return {(r['paper'], r['setting'], r['method']): r for r in rows if r['status'].startswith('ok')}


def _timing(row: dict) -> dict:
    return {k: row[k] for k in ('clients_timed', 'round_s', 'eval_s', 'peak_mib', 'upload_mib', 'params') if k in row}


def parse(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument('--device', default='cuda', help="'cuda', 'cuda:N' or 'cpu'")
    ap.add_argument('--out', default='bench/results', help='folder of gpu_check.csv')
    ap.add_argument(
        '--scale',
        default='paper',
        choices=['paper', 'smoke'],
        help='paper shapes, or tiny ones on one row per model and per algorithm of a few settings',
    )
    ap.add_argument('--budget-s', type=float, default=300, help='stop starting rows after this many seconds')
    ap.add_argument(
        '--round-cap-s',
        type=float,
        default=10,
        help='time the paper\'s K clients only when K × one client\'s round is at most this',
    )
    ap.add_argument('--check-steps', type=int, default=2, help='local steps of the CPU comparison (0: no comparison)')
    ap.add_argument('--attack-iters', type=int, default=5, help='attack iterations timed, then scaled to the paper\'s')
    ap.add_argument('--pool', type=int, default=4096, help='synthetic images the clients share')
    ap.add_argument('--max-client', type=int, default=10**9, help='cap on the images a client holds')
    ap.add_argument('--max-test', type=int, default=10**9, help='cap on the test images')
    ap.add_argument(
        '--resume',
        type=Path,
        help='an earlier gpu_check.csv (this one too): keep the rows it measured, measure the rest',
    )
    ap.add_argument('--traceback', action='store_true', help='print the traceback of a row that fails')
    args = ap.parse_args(argv)
    if args.scale == 'smoke':
        args.rounds, args.pool, args.attack_iters = 1, min(args.pool, 16), min(args.attack_iters, 1)
        args.max_client, args.max_test = min(args.max_client, 8), min(args.max_test, 16)
    else:
        args.rounds = 2
    if args.budget_s <= 0:
        ap.error(f'--budget-s={args.budget_s:g} is not allowed: a number of seconds > 0')
    if args.check_steps < 0:
        ap.error(f'--check-steps={args.check_steps} is not allowed: a number of local steps >= 0 (0: no comparison)')
    try:
        get_device(args.device)
    except ValueError as e:
        ap.error(str(e))
    try:
        measured_before(args.resume)  # a damaged or missing file refused now, not after the first row
    except (OSError, ValueError, KeyError, csv.Error) as e:
        ap.error(f'--resume {args.resume} is not allowed: an earlier gpu_check.csv ({type(e).__name__}: {e})')
    return args


if __name__ == '__main__':
    run(parse())
