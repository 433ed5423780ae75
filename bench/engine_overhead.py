"""Engine overhead: FedAvg local-training throughput against a bare PyTorch loop, measured in the same run.

FedReg's 5-layer CNN, 100 clients of 50 real MNIST images (all 5,000 of mnist5k), batch 10, one local epoch, every
client in every round. The bare loop trains one model with `torch.optim.SGD` over exactly the same batches (the
engine's own batch order), with none of the engine: no flat view, no client contexts, no weight reloads.
Both run alternately, `--repeats` times each after a warm-up; the ratio of median throughputs is printed.

    python bench/engine_overhead.py [--repeats 5] [--device auto]
"""

import argparse
import statistics
import time
import torch
import torch.nn.functional as F
from fedrepro.config import ExperimentConfig
from fedrepro.core import DATASETS, derive_seed, get_device, torch_rng
from fedrepro.data import FedData, load_dataset
from fedrepro.engine import Federation, batch_schedule, sample_clients
from fedrepro.models import build_model
from _args import at_least, known_device  # bench/_args.py: python puts the script's folder first

CLIENTS, PER_CLIENT, BATCH, LR = 100, 50, 10, 0.05


def mnist5k_clients(device):
    raw, spec = load_dataset('mnist5k'), DATASETS['mnist5k']
    x, y = torch.cat([raw.x_train, raw.x_test]), torch.cat([raw.y_train, raw.y_test])
    clients = list(torch.arange(len(y)).view(CLIENTS, PER_CLIENT))
    return FedData('mnist5k-all', x, y, raw.x_test, raw.y_test, clients, 10, spec.mean, spec.std).to(device)


def sync(device):
    if device.type == 'cuda':
        torch.cuda.synchronize()


def engine_round(fed, t):
    return fed.round(t)['train_seconds']


def bare_round(model, opt, data, cfg, t, device):
    batches = [
        data.clients[c][pos.to(device)]
        for c in sample_clients(CLIENTS, CLIENTS, cfg.seed, t).tolist()
        for pos in batch_schedule(PER_CLIENT, BATCH, 1, None, torch_rng(cfg.seed, t, c, 'batches'))
    ]
    sync(device)
    t0 = time.perf_counter()
    for idx in batches:
        opt.zero_grad()
        F.cross_entropy(
            model(data.prepare(data.x_train.index_select(0, idx))), data.y_train.index_select(0, idx)
        ).backward()
        opt.step()
    sync(device)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--repeats', type=at_least(1), default=5)
    ap.add_argument('--device', type=known_device, default='auto')
    args = ap.parse_args()
    device = get_device(args.device)
    data = mnist5k_clients(device)
    cfg = ExperimentConfig(
        model='cnn5',
        num_clients=CLIENTS,
        clients_per_round=CLIENTS,
        batch_size=BATCH,
        lr=LR,
        local_epochs=1,
        device=str(device),
    )
    fed = Federation(cfg, data=data)
    model = build_model('cnn5', (1, 28, 28), 10, seed=derive_seed(cfg.seed, 'init'), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    engine_round(fed, 1)
    bare_round(model, opt, data, cfg, 1, device)  # warm-up
    eng, bare = [], []
    for t in range(2, 2 + args.repeats):
        eng.append(engine_round(fed, t))
        bare.append(bare_round(model, opt, data, cfg, t, device))
    n = CLIENTS * PER_CLIENT
    e, b = n / statistics.median(eng), n / statistics.median(bare)
    print(f'device {device}, torch {torch.__version__}, {torch.get_num_threads()} threads, {args.repeats} repeats')
    print(f'engine FedAvg local training: {e:9.0f} samples/s')
    print(f'bare PyTorch loop:            {b:9.0f} samples/s')
    print(f'ratio engine/bare:            {e / b:9.3f}   (target >= 0.85)')


if __name__ == '__main__':
    main()
