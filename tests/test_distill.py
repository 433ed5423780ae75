"""MOON, FedNTD and the reconstructed FedCAD: zero weight is FedAvg, the losses on hand-made cases, MOON's per-client
previous model, resume, each one's per-round term_share."""

import math
import pandas as pd
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
import fedrepro.distill  # noqa: F401
from fedrepro.distill import moon_contrastive, not_true_logits, ntd_loss, fedcad_loss, credibility_matrix, FrozenModel
from fedrepro.config import ExperimentConfig
from fedrepro.core import ALGORITHMS, FlatModel
from fedrepro.engine import Federation, ClientStore
from fedrepro.runner import run

BASE = dict(model='mlp', num_clients=6, clients_per_round=3, lr=0.05, batch_size=32, device='cpu', aux_per_class=10)
COLS = ['round', 'test_acc', 'test_loss', 'up_params', 'down_params']


def final_x(algorithm, params, rounds=2, **kw):
    fed = Federation(ExperimentConfig(algorithm=algorithm, params=params, **{**BASE, **kw}))
    for t in range(1, rounds + 1):
        fed.round(t)
    return fed.algo.x


@pytest.fixture(scope='module')
def fedavg_x():
    return final_x('fedavg', {})


@pytest.mark.filterwarnings('ignore:algorithm .* is switched off')  # the zero weight is the point here
@pytest.mark.parametrize('algo, zero', [('moon', {'mu': 0.0}), ('fedntd', {'beta': 0.0}), ('fedcad', {'beta': 0.0})])
def test_zero_weight_is_fedavg(fedavg_x, algo, zero):
    assert torch.equal(final_x(algo, zero), fedavg_x)
    assert not torch.equal(final_x(algo, {}), fedavg_x)  # the term does act with its default weight


# ---- MOON
def test_moon_loss_by_hand():
    z = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    # row 0: z along z_glob, orthogonal to z_prev; row 1: z along z_prev, against z_glob; tau = 0.5
    zg, zp = torch.tensor([[2.0, 0.0, 0.0], [0.0, -1.0, 0.0]]), torch.tensor([[0.0, 3.0, 0.0], [0.0, 4.0, 0.0]])
    want = (math.log(1 + math.exp(-2)) + math.log(1 + math.exp(4))) / 2
    assert moon_contrastive(z, zg, zp, 0.5).item() == pytest.approx(want, rel=1e-6)
    zr, zgr = torch.randn(7, 5), torch.randn(7, 5)
    c1, c2 = F.cosine_similarity(zr, zgr, dim=1), F.cosine_similarity(zr, -zgr.flip(0), dim=1)
    by_hand = -torch.log(torch.exp(c1 / 0.2) / (torch.exp(c1 / 0.2) + torch.exp(c2 / 0.2))).mean()
    assert moon_contrastive(zr, zgr, -zgr.flip(0), 0.2).item() == pytest.approx(by_hand.item(), rel=1e-5)
    assert moon_contrastive(zr, zgr, zgr.clone(), 0.5).item() == pytest.approx(math.log(2), rel=1e-6)
    assert moon_contrastive(zr, zgr, None, 0.5).item() == 0.0


def test_moon_previous_model_is_per_client_and_used_next_time():
    fed = Federation(ExperimentConfig(algorithm='moon', **BASE))
    algo, orig, seen = fed.algo, fed.algo.client_update, []

    def spy(ctx, down, state=None):
        up, new = orig(ctx, down, state)
        seen.append((ctx.cid, None if algo._prev is None else algo._prev.fm.snapshot(), up['x']))
        return up, new

    algo.client_update = spy
    last, used, fresh = {}, 0, 0
    for t in range(1, 6):
        seen.clear()
        fed.round(t)
        for cid, prev, up in seen:
            if cid in last:
                assert torch.equal(prev, last[cid])
                used += 1
            else:
                assert prev is None
                fresh += 1
            assert torch.equal(fed.store.get(cid), up)  # the store keeps this client's trained model
        for cid, _, up in seen:
            last[cid] = up.clone()
    assert used > 0 and fresh > 0
    assert len(fed.store) == len(last)


def test_moon_spilling_store_gives_the_same_run(tmp_path):
    cfg = ExperimentConfig(algorithm='moon', **BASE)
    a, b = Federation(cfg), Federation(cfg)
    b.store = ClientStore(tmp_path, max_in_memory=1)  # set after construction: an empty store is falsy
    for t in range(1, 5):
        a.round(t)
        b.round(t)
    assert list(tmp_path.glob('client*-v*.pt'))  # b really spilled to disk
    assert torch.equal(a.algo.x, b.algo.x)


# ---- FedNTD
def test_not_true_logits_drop_exactly_the_true_class():
    logits = torch.arange(24.0).view(4, 6)
    y = torch.tensor([0, 5, 2, 3])
    nt = not_true_logits(logits, y)
    assert nt.shape == (4, 5)
    for b in range(4):
        assert nt[b].tolist() == [logits[b, c].item() for c in range(6) if c != y[b]]


def test_ntd_loss_by_hand():
    z, zg, y = torch.tensor([[5.0, 1.0, 0.0, 2.0]]), torch.tensor([[-3.0, 0.0, 2.0, 1.0]]), torch.tensor([0])
    tau = 2.0
    sm = lambda v: [math.exp(a / tau) / sum(math.exp(b / tau) for b in v) for a in v]
    q, g = sm([1.0, 0.0, 2.0]), sm([0.0, 2.0, 1.0])
    want = sum(gi * math.log(gi / qi) for gi, qi in zip(g, q))  # no tau^2 factor, as FedNTD's code
    assert ntd_loss(z, zg, y, tau).item() == pytest.approx(want, rel=1e-5)
    # batch mean: two copies of the same row give the same value
    assert ntd_loss(z.repeat(2, 1), zg.repeat(2, 1), y.repeat(2), tau).item() == pytest.approx(want, rel=1e-5)


def test_ntd_is_zero_when_logits_agree_off_the_true_class():
    z, y = torch.randn(8, 10), torch.randint(0, 10, (8,))
    assert ntd_loss(z, z.clone(), y, 1.0).item() == pytest.approx(0.0, abs=1e-7)
    other = z.clone().scatter_(1, y.view(-1, 1), -50.0)  # differ only on the true class
    assert ntd_loss(z, other, y, 3.0).item() == pytest.approx(0.0, abs=1e-6)
    assert ntd_loss(z, torch.randn(8, 10), y, 1.0).item() > 1e-4


# ---- FedCAD (reconstructed)
def test_fedcad_loss_and_credibility_by_hand():
    y, pred = torch.tensor([0, 0, 1, 1, 1, 1, 2]), torch.tensor([0, 1, 1, 1, 1, 0, 0])
    A = credibility_matrix(nn.Identity(), F.one_hot(pred, 3).float(), y, 3)
    assert torch.allclose(A, torch.tensor([[0.5, 0.5, 0.0], [0.25, 0.75, 0.0], [1.0, 0.0, 0.0]]))
    z, zg, yb = torch.randn(3, 3), torch.randn(3, 3), torch.tensor([0, 1, 2])
    kl = (F.softmax(zg, 1) * (F.log_softmax(zg, 1) - F.log_softmax(z, 1))).sum(1)
    want = (0.5 * kl[0] + 0.75 * kl[1] + 0.0 * kl[2]) / 3
    assert fedcad_loss(z, zg, yb, A.diagonal()).item() == pytest.approx(want.item(), rel=1e-5)


def test_fedcad_is_labelled_reconstructed_and_needs_aux():
    from fedrepro.core import ALGORITHMS

    cls = ALGORITHMS['fedcad']
    assert 'reconstructed' in cls.description.lower() and 'reconstructed' in cls.__doc__.lower()
    with pytest.raises(ValueError, match='aux_per_class=0'):
        Federation(ExperimentConfig(**{**BASE, 'algorithm': 'fedcad', 'aux_per_class': 0}))
    fed = Federation(ExperimentConfig(algorithm='fedcad', **BASE))
    assert fed.algo.payload(100) == {'up': 100, 'down': 110}


# ---- teachers, parameters
def test_teacher_is_a_frozen_eval_copy():
    m = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    fm = FlatModel(m)
    t = FrozenModel(m).load_(fm.snapshot())
    assert not t.model.training and not any(p.requires_grad for p in t.model.parameters())
    x = torch.randn(6, 4)
    m.train()
    fm.grad.zero_()
    m(x).sum().backward()
    fm.params.add_(fm.grad, alpha=-1.0)
    assert not torch.equal(t.fm.state, fm.state)  # training the student leaves the teacher alone
    m.eval()
    assert torch.equal(t.logits(x), FrozenModel(m).load_(t.fm.state).logits(x))


@pytest.mark.parametrize(
    'algo, params, msg',
    [
        ('moon', {'tau': 0}, "params['tau']=0"),
        ('moon', {'tau': -1.0}, "params['tau']"),
        ('moon', {'mu': -0.1}, "params['mu']"),
        ('moon', {'mu': float('inf')}, "params['mu']"),
        ('fedntd', {'beta': -1}, "params['beta']"),
        ('fedntd', {'tau': 0.0}, "params['tau']"),
        ('fedntd', {'tau': True}, "params['tau']"),
        ('fedcad', {'beta': -2}, "params['beta']"),
        ('fedcad', {'tau': 1}, 'one of'),
    ],
)
def test_bad_params_are_refused(algo, params, msg):
    with pytest.raises(ValueError, match=msg.replace('[', r'\[').replace(']', r'\]')):
        ExperimentConfig(algorithm=algo, params=params, model='mlp')


# ---- runs: finish, and resume to identical metrics
class Stop(Exception):
    pass


@pytest.mark.parametrize('algo, params', [('moon', {'mu': 1.0}), ('fedntd', {}), ('fedcad', {'beta': 0.5})])
def test_run_resumes_identically(tmp_path, algo, params):
    cfg = ExperimentConfig(
        algorithm=algo, params=params, rounds=4, partition='dirichlet', partition_params={'alpha': 0.3}, **BASE
    )

    def stop(row):
        if row['round'] == 2:
            raise Stop

    full = run(cfg, tmp_path / 'a')
    assert full.metrics['round'].tolist() == [0, 1, 2, 3, 4] and full.metrics['test_acc'].notna().all()
    with pytest.raises(Stop):
        run(cfg, tmp_path / 'b', callbacks=[stop])
    resumed = run(cfg, tmp_path / 'b')
    pd.testing.assert_frame_equal(resumed.metrics[COLS + ['term_share']], full.metrics[COLS + ['term_share']])


# ---- term_share: the term's share of the local loss, per round
def _old_moon_loss(self, ctx, x, y, logits, z):
    ce = F.cross_entropy(logits, y)
    if self._prev is None:
        return ce
    return ce + self.hp['mu'] * moon_contrastive(z, self._glob.features(x), self._prev.features(x), self.hp['tau'])


OLD_LOSSES = {
    'moon': _old_moon_loss,  # the hooks before the diagnostic
    'fedntd': lambda self, ctx, x, y, logits, z: (
        F.cross_entropy(logits, y) + self.hp['beta'] * ntd_loss(logits, self._glob.logits(x), y, self.hp['tau'])
    ),
    'fedcad': lambda self, ctx, x, y, logits, z: (
        F.cross_entropy(logits, y) + self.hp['beta'] * fedcad_loss(logits, self._glob.logits(x), y, self._a)
    ),
}
RUNS = [('moon', {'mu': 5.0}), ('fedntd', {}), ('fedcad', {'beta': 0.5})]


@pytest.mark.parametrize('algo, params', RUNS)
def test_term_share_leaves_the_trajectory_unchanged(monkeypatch, algo, params):
    x = final_x(algo, params, rounds=3)
    monkeypatch.setattr(ALGORITHMS[algo], 'loss', OLD_LOSSES[algo])
    assert torch.equal(final_x(algo, params, rounds=3), x)


def _share(a, x, y, logits, z):
    "The term's share of one step's loss, from the formulas: term / (CE + term)."
    ce = F.cross_entropy(logits, y).item()
    if a.name == 'moon':
        if a._prev is None:
            return 0.0
        term = a.hp['mu'] * moon_contrastive(z, a._glob.features(x), a._prev.features(x), a.hp['tau']).item()
    elif a.name == 'fedntd':
        term = a.hp['beta'] * ntd_loss(logits, a._glob.logits(x), y, a.hp['tau']).item()
    else:
        term = a.hp['beta'] * fedcad_loss(logits, a._glob.logits(x), y, a._a).item()
    return term / (ce + term)


@pytest.mark.parametrize('algo, params', RUNS)
def test_term_share_is_the_rounds_mean_step_share(monkeypatch, algo, params):
    fed = Federation(ExperimentConfig(algorithm=algo, params=params, **BASE))
    loss, seen = ALGORITHMS[algo].loss, []
    monkeypatch.setattr(
        ALGORITHMS[algo],
        'loss',
        lambda self, ctx, x, y, logits, z: (
            seen.append(_share(self, x, y, logits.detach(), z.detach())),
            loss(self, ctx, x, y, logits, z),
        )[1],
    )
    for t in (1, 2, 3):
        seen.clear()
        got = fed.round(t)['diagnostics']['term_share']
        assert got == pytest.approx(sum(seen) / len(seen), rel=1e-5)
        assert (got == 0) == (algo == 'moon' and t == 1) and 0 <= got < 1  # MOON: no previous model in round 1


@pytest.mark.filterwarnings('ignore:algorithm .* is switched off')
@pytest.mark.parametrize('algo, zero', [('moon', {'mu': 0.0}), ('fedntd', {'beta': 0.0}), ('fedcad', {'beta': 0.0})])
def test_term_share_is_exactly_zero_at_zero_weight(algo, zero):
    fed = Federation(ExperimentConfig(algorithm=algo, params=zero, **BASE))
    assert [fed.round(t)['diagnostics']['term_share'] for t in (1, 2, 3)] == [0.0] * 3


def test_term_share_one_step_by_hand():
    """Large weights, hand-made logits and teachers: the loss is CE + term as before, the share term / (CE + term)
    exactly; read once, then reset."""
    z, zg, y = torch.tensor([[5.0, 1.0, 0.0, 2.0]]), torch.tensor([[-3.0, 0.0, 2.0, 1.0]]), torch.tensor([0])
    ce = -math.log(math.exp(5) / sum(math.exp(v) for v in (5.0, 1.0, 0.0, 2.0)))
    sm = lambda v, tau: [math.exp(a / tau) / sum(math.exp(b / tau) for b in v) for a in v]
    kl = lambda p, q: sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))
    ntd = kl(sm([0.0, 2.0, 1.0], 2.0), sm([1.0, 0.0, 2.0], 2.0))  # not-true classes, tau 2, no tau^2
    cad = 0.25 * kl(sm([-3.0, 0.0, 2.0, 1.0], 1.0), sm([5.0, 1.0, 0.0, 2.0], 1.0))  # recall of class 0: 0.25
    con = math.log(1 + math.exp(-2))  # z along z_glob, orthogonal to z_prev, tau 0.5
    teacher = lambda feats: type(
        'T', (), {'logits': staticmethod(lambda x: zg), 'features': staticmethod(lambda x: feats)}
    )()
    for algo, params, term in (
        ('fedntd', {'beta': 10.0, 'tau': 2.0}, 10.0 * ntd),
        ('fedcad', {'beta': 10.0}, 10.0 * cad),
        ('moon', {'mu': 50.0}, 50.0 * con),
    ):
        a = ALGORITHMS[algo](ExperimentConfig(algorithm=algo, params=params, **BASE), torch.zeros(1))
        a._glob, a._prev, a._a = (
            teacher(torch.tensor([[2.0, 0.0, 0.0]])),
            teacher(torch.tensor([[0.0, 3.0, 0.0]])),
            torch.tensor([0.25, 1.0, 1.0, 1.0]),
        )
        feats = torch.tensor([[1.0, 0.0, 0.0]])
        assert a.loss(None, None, y, z, feats).item() == pytest.approx(ce + term, rel=1e-5)
        assert a.diagnostics() == pytest.approx({'term_share': term / (ce + term)}, rel=1e-5), algo
        assert math.isnan(a.diagnostics()['term_share'])
