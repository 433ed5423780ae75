"The papers' metrics on hand-made curves and models, and the forgetting measure by hand."

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn
import fedrepro.algorithms  # noqa: F401 (registers fedavg, fedsgd)
from fedrepro.config import ExperimentConfig
from fedrepro.data import FedData
from fedrepro.engine import Algorithm, Federation, sample_clients
from fedrepro.metrics import (
    best_accuracy,
    final_accuracy,
    best_within,
    mean_curve,
    r_a,
    t_reach,
    fmt_rounds,
    communication_cost,
    confusion_matrix,
    per_class_accuracy,
    round_with_locals,
    forgetting_curve,
    local_accuracy_curve,
)


def curve(accs, rounds=None, **cols):
    return pd.DataFrame({'round': list(range(len(accs))) if rounds is None else rounds, 'test_acc': accs, **cols})


# ---------------------------------------------------------------- accuracy and rounds
def test_accuracy_metrics():
    m = curve([0.1, 0.6, np.nan, 0.9, 0.8])
    assert best_accuracy(m) == 0.9 and final_accuracy(m) == 0.8
    assert best_within(m, 2) == 0.6 and best_within(m, 3) == 0.9
    assert best_within(curve([0.5, 0.2]), 1) == 0.2  # FedGG counts rounds 1..100: round 0 excluded
    assert best_accuracy(curve([0.5, 0.2])) == 0.5  # FedReg's ACC includes round 0
    assert final_accuracy(curve([0.1, 0.7, np.nan])) == 0.7  # last *evaluated* round
    assert mean_curve([curve([0.2, 0.4]), curve([0.4, 0.8])])['test_acc'].tolist() == pytest.approx([0.3, 0.6])


def test_r_a_counts_round_zero_ties_and_never():
    sgd = curve([0.5, 0.6, 0.75, 0.8, 0.7])
    A = best_accuracy(sgd)
    assert [r_a(sgd, A, a) for a in (0.5, 0.9, 1.0)] == [
        0.0,
        2.0,
        3.0,
    ]  # round 0 = initial model; >= so SGD reaches its own best
    other = curve([0.05, 0.79, 0.8, 0.81])
    assert r_a(other, A, 1.0) == 2.0  # exactly A counts
    assert r_a(other, A, 0.5) == 1.0
    assert np.isnan(r_a(curve([0.1, 0.2, 0.79]), A, 1.0))
    assert fmt_rounds(r_a(curve([0.1, 0.2, 0.79]), A, 1.0)) == '-' and fmt_rounds(3.0) == '3'
    unsorted = curve([0.85, 0.1], rounds=[2, 0])  # rows out of order, round 1 not evaluated
    assert r_a(unsorted, A, 1.0) == 2.0


def test_t_reach():
    fedavg = curve([0.1, 0.5, 0.7, 0.65])
    target = final_accuracy(fedavg)
    assert t_reach(fedavg, target) == 2.0  # the first round, even if it drops below later
    assert t_reach(curve([0.1, 0.3, 0.66]), target) == 2.0
    assert np.isnan(t_reach(curve([0.1, 0.3, 0.6]), target))
    assert t_reach(curve([0.7, 0.1]), target) == 0.0


def test_communication_cost():
    d, K = 100, 4
    fedavg = curve([0.1, 0.3, 0.5, 0.6], up_params=[0, K * d, K * d, K * d], down_params=[0, K * d, K * d, K * d])
    assert communication_cost(fedavg, 0.5, K, unit=d) == 2.0  # R = 2 rounds x 1|theta| (FedGC's FedAvg unit)
    assert communication_cost(fedavg, 0.6, K) == 3.0 * d
    curv = fedavg.assign(up_params=[0] + [2 * K * d] * 3, down_params=[0] + [3 * K * d] * 3)
    assert communication_cost(curv, 0.5, K, unit=d) == 5.0  # 2 x 2.5|theta|
    varying = fedavg.assign(up_params=[0, K * d, 3 * K * d, 0], down_params=[0, K * d, K * d, 0])
    assert communication_cost(varying, 0.5, K, unit=d) == 3.0  # (1 + 2) : the declared per-round payloads are summed
    assert np.isnan(communication_cost(fedavg, 0.61, K))
    assert communication_cost(fedavg, 0.1, K) == 0.0


def test_communication_cost_on_a_run(tmp_path):
    from fedrepro.runner import run

    cfg = ExperimentConfig(
        model='mlp', num_clients=10, clients_per_round=4, rounds=3, lr=0.05, batch_size=25, device='cpu'
    )
    m = run(cfg, tmp_path).metrics
    d = Federation(cfg).fm.numel
    target = m['test_acc'].iloc[2]
    assert communication_cost(m, target, 4, unit=d) == t_reach(m, target) <= 2  # FedAvg: one |theta| per round


# ---------------------------------------------------------------- per-class accuracy, confusion matrix
def test_per_class_accuracy_and_confusion_matrix():
    lin = nn.Linear(4, 3, bias=False)
    with torch.no_grad():
        lin.weight.copy_(
            torch.tensor([[1.0, 0, 0, 1], [0, 1, 0, 0], [0, 0, 1, 0]])
        )  # input k -> class k, input 3 -> class 0
    x = torch.eye(4)[[0, 0, 1, 2, 2, 3, 3, 3, 1]]
    y = torch.tensor([0, 0, 1, 2, 2, 1, 1, 2, 1])
    counts = confusion_matrix(lin, x, y, 3, normalize=False, batch_size=2)
    np.testing.assert_array_equal(counts, [[2, 0, 0], [2, 2, 0], [1, 0, 2]])
    cm = confusion_matrix(lin, x, y, 3, batch_size=4)
    np.testing.assert_allclose(cm.sum(1), 1)
    np.testing.assert_allclose(cm, [[1, 0, 0], [0.5, 0.5, 0], [1 / 3, 0, 2 / 3]])
    pca = per_class_accuracy(lin, x, y, batch_size=3)
    np.testing.assert_allclose(pca, np.diag(cm))
    np.testing.assert_allclose(pca, [1, 0.5, 2 / 3])
    to_input1 = lambda b: torch.eye(4)[[1]].expand(len(b), 4)
    np.testing.assert_allclose(per_class_accuracy(lin, x, y, prepare=to_input1), [0, 1, 0])  # prepare is applied
    assert np.isnan(per_class_accuracy(lin, x, y, num_classes=4)[3])


# ---------------------------------------------------------------- instrumented rounds and forgetting
def tiny_data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 2, generator=g)
    y = torch.tensor([0, 1, 1, 0, 0, 1, 1, 1])
    return FedData(
        'tiny',
        x,
        y,
        torch.randn(6, 2, generator=g),
        torch.tensor([0, 1, 0, 1, 1, 0]),
        [torch.tensor([0, 1]), torch.tensor([2, 3]), torch.tensor([4, 5]), torch.tensor([6, 7])],
        2,
    )


def hand_loss(data, v, idx):
    "Mean cross-entropy of the 2-3-2 MLP with flat parameters `v` on samples `idx`, by hand."
    W1, b1, W2, b2 = v[:6].view(3, 2), v[6:9], v[9:15].view(2, 3), v[15:17]
    out = []
    for i in idx.tolist():
        z = W2 @ torch.clamp(W1 @ data.x_train[i] + b1, min=0) + b2
        out.append(float(torch.logsumexp(z, 0) - z[data.y_train[i]]))
    return np.mean(out)


def test_forgetting_by_hand():
    data = tiny_data()
    cfg = ExperimentConfig(
        model='mlp',
        model_params={'hidden': (3,)},
        num_clients=4,
        clients_per_round=2,
        rounds=4,
        lr=0.5,
        batch_size=1,
        device='cpu',
        seed=3,
    )
    fed, expected = Federation(cfg, data=data), []
    prev = None
    for t in range(1, 5):
        start = fed.algo.x.clone()
        r = round_with_locals(fed, t)
        assert r['clients'].tolist() == sample_clients(4, 2, cfg.seed, t).tolist()
        if prev is not None:
            for i in prev:
                expected.append(
                    (
                        t,
                        i,
                        hand_loss(data, start, data.clients[i]),
                        np.mean([hand_loss(data, s, data.clients[i]) for s in r['local_states']]),
                    )
                )
        prev = r['clients'].tolist()
    assert any(
        set(sample_clients(4, 2, cfg.seed, t)) != set(sample_clients(4, 2, cfg.seed, t - 1)) for t in range(2, 5)
    )
    fc = forgetting_curve(Federation(cfg, data=data), 4)
    assert fc[['round', 'client']].values.tolist() == [[t, i] for t, i, *_ in expected]
    np.testing.assert_allclose(
        fc[['loss_prev', 'loss_local']].to_numpy(), np.array([e[2:] for e in expected]), rtol=1e-5
    )
    assert not np.allclose(fc['loss_prev'], fc['loss_local'])
    # FedGC's variant: every client's data, from round 1
    fa = forgetting_curve(Federation(cfg, data=data), 2, on='all')
    assert fa['round'].tolist() == [1] * 4 + [2] * 4
    fed = Federation(cfg, data=data)
    np.testing.assert_allclose(
        fa['loss_prev'][:4], [hand_loss(data, fed.algo.x, data.clients[i]) for i in range(4)], rtol=1e-5
    )


class NoisyStateful(Algorithm):
    "FedAvg whose clients add noise from torch's global generator and count their visits in the client store."

    name = 'metrics_test_noisy'

    def client_update(self, ctx, down, state=None):
        up, _ = super().client_update(ctx, down, state)
        up['x'] = up['x'] + 1e-3 * torch.randn_like(up['x']) * (1 + (state or 0))
        ctx.fm.load_(up['x'])
        return up, (state or 0) + 1


def federation(cfg, algorithm):
    fed = Federation(cfg)
    if algorithm == 'noisy':
        fed.algo = NoisyStateful(cfg, fed.algo.x)  # not registered: the registry stays as it was
    return fed


@pytest.mark.parametrize('algorithm,weighting', [('fedavg', 'samples'), ('fedsgd', 'uniform'), ('noisy', 'uniform')])
def test_instrumented_rounds_leave_the_run_unchanged(algorithm, weighting):
    cfg = ExperimentConfig(
        algorithm='fedavg' if algorithm == 'noisy' else algorithm,
        model='mlp',
        num_clients=10,
        clients_per_round=4,
        lr=0.05,
        batch_size=25,
        weighting=weighting,
        partition='classes',
        partition_params={'classes_per_client': 2},
        device='cpu',
    )
    plain, tracked, forgetting = (federation(cfg, algorithm) for _ in range(3))
    fc = forgetting_curve(forgetting, 3)
    for t in (1, 2, 3):
        a, b = plain.round(t), round_with_locals(tracked, t)
        assert torch.equal(plain.algo.x, tracked.algo.x)
        assert a['clients'].tolist() == b['clients'].tolist() and (a['up_params'], a['down_params']) == (
            b['up_params'],
            b['down_params'],
        )
    assert torch.equal(plain.algo.x, forgetting.algo.x)  # the loss evaluations in between change nothing either
    assert plain.evaluate()['test_acc'] == forgetting.evaluate()['test_acc']
    assert len(fc) == 2 * 4
    # the local states are the clients' trained models: one more round's local models average to the global model
    # (uniform)
    if algorithm == 'noisy':
        assert len(tracked.store) > 0
    if weighting == 'uniform':
        r = round_with_locals(tracked, 4)
        torch.testing.assert_close(tracked.algo.x, torch.stack(r['local_states']).mean(0))


def test_local_accuracy_curve():
    """local_acc is the unweighted mean of each local model's test accuracy, computed here by hand from the local
    states; the globals match a plain run."""
    cfg = ExperimentConfig(
        model='mlp', num_clients=10, clients_per_round=3, lr=0.05, batch_size=25, partition='dirichlet', device='cpu'
    )
    lc = local_accuracy_curve(cfg, 3)  # dirichlet: clients of unequal sizes, so a mean weighted by size would differ
    assert lc.columns.tolist() == ['round', 'start_acc', 'local_acc', 'test_acc'] and lc['round'].tolist() == [1, 2, 3]
    ref = Federation(cfg)
    assert lc['start_acc'].iloc[0] == ref.evaluate()['test_acc']
    for t in (1, 2, 3):
        r = round_with_locals(ref, t)
        hand = []
        for s in r['local_states']:
            ref.fm.load_(s)
            ref.fm.model.eval()
            with torch.inference_mode():
                pred = torch.cat(
                    [ref.fm.model(ref.data.prepare(xb)).argmax(1) for xb in ref.data.x_test.split(cfg.eval_batch_size)]
                )
            hand.append((pred == ref.data.y_test).sum().item() / len(ref.data.y_test))
        assert len(set(hand)) > 1
        assert lc['local_acc'].iloc[t - 1] == float(np.mean(hand))
        assert lc['test_acc'].iloc[t - 1] == ref.evaluate()['test_acc']
    assert lc['start_acc'].iloc[1:].tolist() == lc['test_acc'].iloc[:-1].tolist()
    # a Federation is read as it is: it must evaluate the local models at every round asked for
    with pytest.raises(ValueError, match='eval_local'):
        local_accuracy_curve(Federation(cfg), 1)
    with pytest.raises(ValueError, match='eval_every'):
        local_accuracy_curve(Federation(cfg.replace(eval_local=True, eval_every=2)), 1)
    fed = Federation(cfg.replace(eval_local=True))
    assert local_accuracy_curve(fed, 2).equals(lc.iloc[:2])
