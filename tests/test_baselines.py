"""FedProx, SCAFFOLD and FedCurv: each regulariser at zero is FedAvg, each against its equation, payloads, resume, and
each one's per-round correction_ratio."""

import math
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
import fedrepro.algorithms  # noqa: F401  (fedavg)
import fedrepro.baselines  # noqa: F401
from fedrepro.baselines import prox_penalty, empirical_fisher
from fedrepro.config import ExperimentConfig
from fedrepro.core import ALGORITHMS, torch_rng
from fedrepro.engine import Algorithm, Federation, ClientStore, batch_schedule, sample_clients
from fedrepro.runner import run

COLS = ['round', 'test_acc', 'test_loss', 'up_params', 'down_params']
SMALL = dict(
    model='mlp',
    model_params={'hidden': (16,)},
    num_clients=6,
    clients_per_round=3,
    lr=0.05,
    batch_size=20,
    partition='classes',
    partition_params={'classes_per_client': 1},
    device='cpu',
)


def cfg_of(algorithm='fedavg', params=None, **kw):
    return ExperimentConfig(**{**SMALL, 'algorithm': algorithm, 'params': params or {}, **kw})


def final_x(cfg, rounds=2):
    fed = Federation(cfg)
    for t in range(1, rounds + 1):
        fed.round(t)
    return fed.algo.x


# ---- each regulariser at zero is FedAvg


@pytest.mark.filterwarnings('ignore:algorithm .* is switched off')  # the zero weight is the point here
@pytest.mark.parametrize(
    'algorithm, params, other',
    [
        ('fedprox', {'mu': 0.0}, {'mu': 0.1}),
        ('fedprox', {'mu': 0.0, 'convention': 'full'}, {'mu': 0.1, 'convention': 'full'}),
        ('fedcurv', {'lam': 0.0}, {'lam': 0.1}),
    ],
)
def test_zero_weight_is_fedavg(algorithm, params, other):
    avg = final_x(cfg_of())
    assert torch.equal(final_x(cfg_of(algorithm, params)), avg)
    assert not torch.equal(final_x(cfg_of(algorithm, other)), avg)


@pytest.mark.filterwarnings('ignore:algorithm .* is switched off')  # the zero weight is the point here
def test_zero_weight_run_metrics_equal_fedavg(tmp_path):
    a = run(cfg_of(rounds=2), tmp_path / 'a').metrics
    for algorithm, params in (('fedprox', {'mu': 0.0}), ('fedcurv', {'lam': 0.0})):
        b = run(cfg_of(algorithm, params, rounds=2), tmp_path / algorithm).metrics
        pd.testing.assert_frame_equal(a[['round', 'test_acc', 'test_loss']], b[['round', 'test_acc', 'test_loss']])


def test_fedprox_from_round_and_fedcurv_round_one_have_no_term():
    avg1, avg2 = final_x(cfg_of(), 1), final_x(cfg_of(), 2)
    assert torch.equal(final_x(cfg_of('fedprox', {'mu': 0.1, 'from_round': 3}), 2), avg2)
    assert not torch.equal(final_x(cfg_of('fedprox', {'mu': 0.1, 'from_round': 2}), 2), avg2)
    assert torch.equal(final_x(cfg_of('fedcurv', {'lam': 0.1}), 1), avg1)


# ---- FedProx: the proximal gradient


@pytest.mark.parametrize('convention, factor', [('half', 1.0), ('full', 2.0)])
def test_fedprox_gradient_matches_autograd(convention, factor):
    mu = 0.3
    fed = Federation(cfg_of('fedprox', {'mu': mu, 'convention': convention}, lr=1.0))
    fm, data, idx = fed.fm, fed.data, fed.data.clients[0][:32]
    anchor = fed.algo.x.clone()
    theta = anchor + 0.01 * torch.randn(anchor.shape, generator=torch_rng(0, 'theta'))
    xb, yb = data.prepare(data.x_train[idx]), data.y_train[idx]
    fm.load_(theta)
    fm.grad.zero_()
    F.cross_entropy(fm.model(xb), yb).backward()
    ce = fm.grad.clone()
    fm.grad.zero_()
    flat = torch.cat([p.reshape(-1) for p in fm.model.parameters()])
    (F.cross_entropy(fm.model(xb), yb) + prox_penalty(flat, anchor, mu, convention)).backward()
    auto = fm.grad.clone()
    torch.testing.assert_close(auto - ce, factor * mu * (theta - anchor), rtol=0, atol=1e-6)
    fm.load_(theta)
    fm.grad.copy_(ce)
    fed.algo._anchor, fed.algo._coef = anchor, fed.algo.coef
    fed.algo.step(fed.context(0, 1))  # lr 1: the step is the gradient
    torch.testing.assert_close(theta - fm.snapshot(), auto, rtol=0, atol=1e-6)


# ---- SCAFFOLD: option II by hand


def scaffold_by_hand(cfg, rounds):
    fed = Federation(cfg.replace(algorithm='fedavg', params={}))
    fm, data, P, lr = fed.fm, fed.data, fed.fm.num_params, cfg.lr
    x, c, ci = fm.snapshot(), torch.zeros(P), {}
    for t in range(1, rounds + 1):
        dys, dcs = [], []
        for i in sample_clients(cfg.num_clients, cfg.clients_per_round, cfg.seed, t).tolist():
            c_old, gen, K = ci.get(i, torch.zeros(P)), torch_rng(cfg.seed, t, i, 'batches'), 0
            fm.load_(x)
            for pos in batch_schedule(len(data.clients[i]), cfg.batch_size, cfg.local_epochs, None, gen):
                idx = data.clients[i][pos]
                fm.grad.zero_()
                F.cross_entropy(fm.model(data.prepare(data.x_train[idx], True, gen)), data.y_train[idx]).backward()
                with torch.no_grad():
                    fm.params.sub_(lr * (fm.grad - c_old + c))
                K += 1
            y = fm.snapshot()
            ci[i] = c_old - c + (x - y) / (K * lr)
            dys.append(y - x)
            dcs.append(ci[i] - c_old)
        x = x + cfg.params.get('global_lr', 1.0) * torch.stack(dys).mean(0)
        c = c + torch.stack(dcs).sum(0) / cfg.num_clients
    return x, c, ci


@pytest.mark.parametrize('global_lr', [1.0, 0.5])
def test_scaffold_option_two_by_hand(global_lr):
    cfg = cfg_of('scaffold', {'global_lr': global_lr}, clients_per_round=2, weighting='uniform')  # N=6 > |S|=2
    fed = Federation(cfg)
    for rounds in (1, 2):
        fed.round(rounds)
        x, c, ci = scaffold_by_hand(cfg, rounds)
        torch.testing.assert_close(fed.algo.x, x, rtol=0, atol=1e-6)
        torch.testing.assert_close(fed.algo.c, c, rtol=0, atol=1e-5)
        for i, v in ci.items():
            torch.testing.assert_close(fed.store.get(i), v, rtol=0, atol=1e-5)
        if rounds == 1:  # from zero variates: c = (1/N) Σ c_i, not the mean over the round's clients
            torch.testing.assert_close(
                fed.algo.c, torch.stack(list(ci.values())).sum(0) / cfg.num_clients, rtol=0, atol=1e-6
            )
            assert fed.algo.c.abs().max() > 0


def test_scaffold_variates_spill_to_disk_unchanged(tmp_path):
    cfg = cfg_of('scaffold', clients_per_round=2)
    mem, disk = Federation(cfg), Federation(cfg)
    disk.store = ClientStore(tmp_path, max_in_memory=1)
    for t in (1, 2, 3):
        mem.round(t)
        disk.round(t)
    assert len(disk.store._disk) > 0
    assert torch.equal(mem.algo.x, disk.algo.x) and torch.equal(mem.algo.c, disk.algo.c)


class Stop(Exception):
    pass


def stop_after(k):
    def cb(row):
        if row['round'] == k:
            raise Stop

    return cb


@pytest.mark.parametrize(
    'algorithm, params',
    [
        ('fedprox', {'mu': 0.1}),
        ('scaffold', {}),
        ('fedcurv', {'lam': 0.1}),
        ('fedcurv', {'lam': 0.1, 'variant': 'fedntd'}),
    ],
)
def test_interrupted_run_resumes_to_identical_metrics(tmp_path, algorithm, params):
    """FedCurv 'fedntd': the server's sums and each client's own last Fisher pair (in the store) survive a restart; so
    does each round's `correction_ratio`."""
    cfg = cfg_of(algorithm, params, rounds=4 if params.get('variant') else 3, clients_per_round=2)
    full = run(cfg, tmp_path / 'a')
    with pytest.raises(Stop):
        run(cfg, tmp_path / 'b', callbacks=[stop_after(1)])
    resumed = run(cfg, tmp_path / 'b')
    pd.testing.assert_frame_equal(
        resumed.metrics[COLS + ['correction_ratio']], full.metrics[COLS + ['correction_ratio']]
    )
    assert full.metrics['correction_ratio'].iloc[1:].notna().all()


# ---- FedCurv: the Fisher and the penalty


@pytest.mark.parametrize('model', ['mlp', 'cnn5'])
def test_fisher_is_mean_of_squared_per_sample_gradients(model):
    fed = Federation(
        ExperimentConfig(algorithm='fedcurv', model=model, num_clients=4, clients_per_round=2, device='cpu')
    )
    idx = fed.data.clients[1][:13]
    x, y = fed.data.prepare(fed.data.x_train[idx]), fed.data.y_train[idx]
    expected = torch.zeros_like(fed.fm.grad)
    for xi, yi in zip(x, y):
        fed.fm.grad.zero_()
        F.cross_entropy(fed.fm.model(xi[None]), yi[None]).backward()
        expected += fed.fm.grad**2
    expected /= len(y)
    assert expected.abs().max() > 0
    for how in ('vmap', 'layers', 'loop'):
        torch.testing.assert_close(empirical_fisher(fed.fm, x, y, chunk=5, how=how), expected, rtol=1e-4, atol=1e-9)


def test_the_per_layer_fisher_equals_the_vectorised_one_and_refuses_what_it_cannot_sum():
    "'layers' on a model of convolutions and linears (FedGC's), to float rounding; a Fixup ResNet's scalars refused."
    fed = Federation(
        ExperimentConfig(
            dataset='digits-domains', model='hwdigits_cnn', num_clients=4, clients_per_round=2, device='cpu'
        )
    )
    idx = fed.data.clients[0][:40]
    x, y = fed.data.prepare(fed.data.x_train[idx]), fed.data.y_train[idx]
    fed.fm.model.eval()
    vmapped = empirical_fisher(fed.fm, x, y)
    torch.testing.assert_close(
        empirical_fisher(fed.fm, x, y, how='layers'), vmapped, rtol=1e-5, atol=1e-6 * vmapped.max()
    )
    resnet = Federation(
        ExperimentConfig(dataset='digits-mnist', model='resnet9', num_clients=4, clients_per_round=2, device='cpu')
    )
    with pytest.raises(ValueError, match='Linear and Conv2d layers only'):
        empirical_fisher(resnet.fm, x[:2], y[:2], how='layers')
    with pytest.raises(ValueError, match="how='exact' is not allowed"):
        empirical_fisher(fed.fm, x, y, how='exact')


def test_fedcurv_sums_and_penalty_gradient():
    lam = 1.0
    cfg = cfg_of('fedcurv', {'lam': lam})
    fed, avg = Federation(cfg), Federation(cfg.replace(algorithm='fedavg', params={}))
    x0 = fed.algo.x.clone()
    clients = fed.round(1)['clients']
    Fs, thetas = [], []
    for cid in clients.tolist():
        ctx = avg.context(cid, 1)
        up, _ = avg.algo.client_update(ctx, {'x': x0})
        thetas.append(up['x'])
        Fs.append(fed.algo.fisher(ctx))
    torch.testing.assert_close(fed.algo.u, sum(Fs))
    torch.testing.assert_close(fed.algo.v, sum(f * t for f, t in zip(Fs, thetas)))
    theta = fed.algo.x.clone().requires_grad_()
    expected = torch.autograd.grad(lam * sum((f * (theta - t) ** 2).sum() for f, t in zip(Fs, thetas)), theta)[0]
    fed.fm.load_(fed.algo.x)
    fed.fm.grad.zero_()
    fed.algo._u, fed.algo._neg_v = fed.algo.u, -fed.algo.v
    fed.algo.step(fed.context(0, 2))
    assert expected.abs().max() > 1e-3
    torch.testing.assert_close(
        (fed.algo.x - fed.fm.snapshot()) / cfg.lr, expected, rtol=0, atol=1e-3 * expected.abs().max().item()
    )


# ---- payloads and parameter checks


@pytest.mark.parametrize('algorithm, up, down', [('fedprox', 1, 1), ('scaffold', 2, 2), ('fedcurv', 3, 3)])
def test_declared_payloads(tmp_path, algorithm, up, down):
    fed = Federation(cfg_of(algorithm))
    assert fed.algo.payload(1000) == {'up': up * 1000, 'down': down * 1000}
    r = fed.round(1)
    assert (r['up_params'], r['down_params']) == (up * 3 * fed.fm.numel, down * 3 * fed.fm.numel)


@pytest.mark.parametrize(
    'algorithm, params, msg',
    [
        ('fedprox', {'mu': -0.1}, "params['mu']"),
        ('fedprox', {'mu': float('inf')}, "params['mu']"),
        ('fedprox', {'convention': 'quarter'}, "params['convention']"),
        ('fedprox', {'from_round': 0}, "params['from_round']"),
        ('fedprox', {'lam': 1.0}, "params['lam']"),
        ('scaffold', {'global_lr': 0.0}, "params['global_lr']"),
        ('scaffold', {'global_lr': True}, "params['global_lr']"),
        ('fedcurv', {'lam': -1e-4}, "params['lam']"),
        ('fedcurv', {'mu': 0.1}, "params['mu']"),
        ('fedcurv', {'variant': 'shoham'}, "params['variant']"),
        ('fedcurv', {'fisher_samples': 0}, "params['fisher_samples']"),
        ('fedcurv', {'fisher_samples': 500.0}, "params['fisher_samples']"),
    ],
)
def test_bad_params_are_refused(algorithm, params, msg):
    with pytest.raises(ValueError, match=msg.replace('[', r'\[').replace(']', r'\]')):
        ExperimentConfig(algorithm=algorithm, params=params)


# ---- correction_ratio: the size of each method's own addition to the step, per round


def _old_fedprox_step(self, ctx):
    ctx.fm.grad.add_(ctx.fm.params - self._anchor, alpha=self._coef)
    Algorithm.step(self, ctx)


def _old_scaffold_step(self, ctx):
    if self.hp['correction'] == 'gradient':
        ctx.fm.grad.add_(self._correction)
    Algorithm.step(self, ctx)
    if self.hp['correction'] == 'step':
        ctx.fm.params.sub_(self._correction, alpha=ctx.lr)


def _old_fedcurv_step(self, ctx):
    if self._u is not None:
        ctx.fm.grad.add_(torch.addcmul(self._neg_v, self._u, ctx.fm.params), alpha=2 * self.hp['lam'])
    Algorithm.step(self, ctx)


OLD_STEPS = {
    'fedprox': _old_fedprox_step,
    'scaffold': _old_scaffold_step,
    'fedcurv': _old_fedcurv_step,
}  # the hooks before the diagnostic


@pytest.mark.parametrize(
    'algorithm, params, kw',
    [
        ('fedprox', {'mu': 0.1}, {}),
        ('scaffold', {}, {}),
        ('scaffold', {'correction': 'step'}, {'momentum': 0.9}),
        ('fedcurv', {'lam': 0.1}, {}),
    ],
)
def test_correction_ratio_leaves_the_trajectory_unchanged(monkeypatch, algorithm, params, kw):
    cfg = cfg_of(algorithm, params, **kw)
    x = final_x(cfg, 3)
    monkeypatch.setattr(ALGORITHMS[algorithm], 'step', OLD_STEPS[algorithm])
    assert torch.equal(final_x(cfg, 3), x)


@pytest.mark.parametrize(
    'algorithm, params',
    [
        ('fedprox', {'mu': 0.5}),
        ('fedprox', {'mu': 0.5, 'convention': 'full'}),
        ('scaffold', {}),
        ('fedcurv', {'lam': 1.0}),
    ],
)
def test_correction_ratio_is_the_rounds_mean_step_ratio(monkeypatch, algorithm, params):
    """Each step's ‖added gradient‖ / ‖loss gradient‖, the added gradient recomputed independently (autograd of the
    term, or c - c_i)."""
    fed = Federation(cfg_of(algorithm, params, clients_per_round=2))
    a, P, seen, step = fed.algo, fed.fm.num_params, [], ALGORITHMS[algorithm].step
    monkeypatch.setattr(
        ALGORITHMS[algorithm],
        'step',
        lambda self, ctx: (seen.append((ctx.cid, ctx.fm.grad.clone(), ctx.fm.params.clone())), step(self, ctx)),
    )
    zero = torch.zeros(P)
    for t in (1, 2, 3):
        anchor, c, u, v = a.x[:P].clone(), getattr(a, 'c', None), getattr(a, 'u', None), getattr(a, 'v', None)
        ci = {cid: fed.store.get(cid, zero) for cid in range(6)}

        def added(cid, theta):
            if algorithm == 'scaffold':
                return (zero if c is None else c) - ci[cid]
            theta = theta.clone().requires_grad_()
            if algorithm == 'fedprox':
                term = prox_penalty(theta, anchor, params['mu'], params.get('convention', 'half'))
            else:
                term = 0 * theta.sum() if u is None else params['lam'] * (u * theta**2 - 2 * v * theta).sum()
            return torch.autograd.grad(term, theta)[0]

        seen.clear()
        got = fed.round(t)['diagnostics']['correction_ratio']
        want = sum(added(cid, th).double().norm().item() / g.double().norm().item() for cid, g, th in seen) / len(seen)
        assert got == pytest.approx(want, rel=1e-5)
        assert (got == 0) == (t == 1 and algorithm != 'fedprox')  # SCAFFOLD, FedCurv: nothing added in round 1


@pytest.mark.filterwarnings('ignore:algorithm .* is switched off')
@pytest.mark.parametrize(
    'algorithm, params, zero_rounds',
    [
        ('fedprox', {'mu': 0.0}, [1, 2, 3]),
        ('fedprox', {'mu': 0.1, 'from_round': 3}, [1, 2]),
        ('fedcurv', {'lam': 0.0}, [1, 2, 3]),
        ('fedcurv', {'lam': 0.1, 'variant': 'fedntd'}, [1]),
    ],
)
def test_correction_ratio_is_exactly_zero_without_the_term(algorithm, params, zero_rounds):
    fed = Federation(cfg_of(algorithm, params))
    ratios = [fed.round(t)['diagnostics']['correction_ratio'] for t in (1, 2, 3)]
    assert [r == 0 for r in ratios] == [t in zero_rounds for t in (1, 2, 3)], ratios


def test_fedprox_correction_ratio_one_step_by_hand():
    "A large mu, the 'full' convention (factor 2 mu), hand-made θ, θᵍ and g: the exact ratio; read once, then reset."
    fed = Federation(cfg_of('fedprox', {'mu': 10.0, 'convention': 'full'}))
    a, P = fed.algo, fed.fm.num_params
    anchor, theta, g = (torch.randn(P, generator=torch_rng(0, k)) for k in ('anchor', 'theta', 'g'))
    fed.fm.params.copy_(theta)
    fed.fm.grad.copy_(g)
    a._anchor, a._coef = anchor, a.coef
    a.step(fed.context(0, 1))
    want = 20.0 * (theta - anchor).double().norm().item() / g.double().norm().item()
    assert a.diagnostics() == pytest.approx({'correction_ratio': want}, rel=1e-6)
    assert math.isnan(a.diagnostics()['correction_ratio'])  # no step since: a fresh round
    fed.fm.params.copy_(anchor)
    fed.fm.grad.zero_()
    a.step(fed.context(0, 1))  # nothing added to a vanished gradient: 0, not 0/0
    assert a.diagnostics() == {'correction_ratio': 0.0}
