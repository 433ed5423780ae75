"""The engine against hand-built references: weighted means of independent local runs, momentum vs torch.optim.SGD,
... (FedAvg with one client as centralised SGD and FedSGD as one full-batch step: the algorithms chapter's checks)."""

import numpy as np
import torch
import torch.nn.functional as F
import pytest
from fedrepro.config import ExperimentConfig
from fedrepro.core import derive_seed, torch_rng
from fedrepro.engine import Algorithm, Federation, batch_schedule, sample_clients
from fedrepro.models import build_model


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def sgd_reference(cfg, data, cid, round, epochs=1):
    """Bare PyTorch SGD (a new optimiser, with the config's momentum and weight decay) on client `cid`'s data from the
    run's initial weights, in the engine's batch order."""
    model = build_model(cfg.model, data.input_shape, data.num_classes, seed=derive_seed(cfg.seed, 'init'))
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    idx_all, seen = data.clients[cid], []
    for pos in batch_schedule(
        len(idx_all), cfg.batch_size, epochs, cfg.local_steps, torch_rng(cfg.seed, round, cid, 'batches')
    ):
        idx = idx_all[pos]
        seen.append(idx)
        opt.zero_grad()
        F.cross_entropy(model(data.prepare(data.x_train[idx])), data.y_train[idx]).backward()
        opt.step()
    if cfg.local_steps is None:
        assert sorted(torch.cat(seen).tolist()) == sorted(idx_all.tolist())  # one epoch covers every sample once
    return flat(model)


def test_fedavg_weighting_matches_the_mean_of_independent_local_runs():
    cfg = ExperimentConfig(
        model='mlp',
        partition='dirichlet',
        partition_params={'alpha': 0.3},
        num_clients=4,
        clients_per_round=2,
        lr=0.05,
        batch_size=16,
        device='cpu',
    )
    fed = Federation(cfg)
    clients = sample_clients(4, 2, cfg.seed, 1)
    local = [sgd_reference(cfg, fed.data, c, 1) for c in clients]
    n = np.array([len(fed.data.clients[c]) for c in clients], dtype=float)
    fed.round(1)
    expected = sum(w * x for w, x in zip(n / n.sum(), local))
    assert torch.allclose(fed.algo.x, expected.float(), atol=1e-6)


def test_every_method_sees_the_same_clients():
    seen = {}
    for alg in ('fedavg', 'fedsgd'):
        fed = Federation(
            ExperimentConfig(algorithm=alg, model='mlp', num_clients=20, clients_per_round=4, device='cpu')
        )
        seen[alg] = [fed.round(t)['clients'].tolist() for t in (1, 2, 3)]
    assert seen['fedavg'] == seen['fedsgd'] and seen['fedavg'][0] != seen['fedavg'][1]


def test_declared_communication():
    fed = Federation(ExperimentConfig(model='cnn5', num_clients=10, clients_per_round=3, device='cpu'))
    r = fed.round(1)
    assert fed.fm.numel == 228_010
    assert r['up_params'] == r['down_params'] == 3 * 228_010


def test_momentum_and_weight_decay_are_torch_sgd_rebuilt_for_each_client():
    cfg = ExperimentConfig(
        model='mlp',
        num_clients=10,
        clients_per_round=2,
        local_steps=10,
        batch_size=20,
        lr=0.05,
        momentum=0.9,
        weight_decay=5e-4,
        device='cpu',
    )
    fed, fresh, ups = Federation(cfg), [], []
    context, aggregate = fed.context, fed.algo.aggregate

    def recording_context(cid, t):
        ctx = context(cid, t)
        fresh.append(ctx.momentum_buffer is None)
        return ctx

    fed.context, fed.algo.aggregate = recording_context, lambda u: (ups.extend(u), aggregate(u))
    clients = fed.round(1)['clients']
    assert fresh == [True, True] and len(ups) == 2
    for cid, up in zip(clients, ups):  # the second client too: its buffer does not carry the first one's
        assert torch.allclose(up['x'], sgd_reference(cfg, fed.data, cid, 1), atol=1e-6, rtol=0)


def test_default_step_is_the_old_fused_sgd_step_bit_for_bit():
    class OldStep(Algorithm):
        def step(self, ctx):
            ctx.fm.params.add_(ctx.fm.grad, alpha=-ctx.lr)

    cfg = ExperimentConfig(model='mlp', num_clients=10, clients_per_round=3, lr=0.05, batch_size=20, device='cpu')
    new = Federation(cfg)
    old = Federation(cfg, data=new.data)
    old.algo = OldStep(cfg, old.fm.snapshot())
    for t in (1, 2):
        new.round(t)
        old.round(t)
    assert torch.equal(new.algo.x, old.algo.x)


@pytest.mark.filterwarnings('ignore:algorithm .* is switched off')  # the zero weight is the point here
def test_methods_with_their_own_step_get_momentum():
    """FedProx adds mu (theta - anchor) to the gradient and calls the shared step: with mu = 0 it is FedAvg, momentum
    included, bit for bit."""

    def trained(**kw):
        fed = Federation(
            ExperimentConfig(
                model='mlp',
                num_clients=10,
                clients_per_round=2,
                local_steps=5,
                batch_size=20,
                lr=0.05,
                device='cpu',
                **kw,
            )
        )
        fed.round(1)
        return fed.algo.x

    prox = trained(algorithm='fedprox', params={'mu': 0.0}, momentum=0.9, weight_decay=5e-4)
    assert torch.equal(prox, trained(momentum=0.9, weight_decay=5e-4))
    assert not torch.equal(prox, trained(algorithm='fedprox', params={'mu': 0.0}))
