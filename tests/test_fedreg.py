"FedReg across modules: its step against the closed form and a QP solver, FedAvg as its limit, resume, settings, tables and verdicts."
import math
import numpy as np
import pandas as pd
import pytest
import quadprog
import torch
import fedrepro.config as config
from fedrepro.config import ExperimentConfig
from fedrepro.core import ALGORITHMS, FlatModel
from fedrepro.engine import Federation
from fedrepro.metrics import shared_dir
from fedrepro.models import build_model
from fedrepro.runner import run
from fedrepro.fedreg import (FEDREG_MINI, FEDREG_PAPER, FEDREG_SETTINGS, FedReg, fedreg_config, fedreg_paper, fedreg_table_rows,
                             fedreg_verdicts, fgsm_ascent, project, projection_weights, pseudo_and_perturbed)

config._load_registries()
SMALL = dict(dataset='mnist5k', partition='powerlaw', partition_params={'classes_per_client': 2, 'min_per_class': 1}, model='cnn5',
             num_clients=200, clients_per_round=3, rounds=2, local_epochs=2, batch_size=10, lr=0.1, weighting='uniform', device='cpu')
COLS = ['round', 'test_acc', 'test_loss', 'up_params', 'down_params']


def cfg_of(algorithm='fedreg', **params):
    return ExperimentConfig(**SMALL, algorithm=algorithm, params=params)


def final_x(cfg):
    fed = Federation(cfg)
    for t in range(1, cfg.rounds + 1): fed.round(t)
    return fed.algo.x


# ---- the step

def qp_project(point, anchor, g):
    n = len(point)
    return quadprog.solve_qp(np.eye(n), point, -g[:, None], np.array([-g @ anchor]), 0)[0]


def test_closed_form_equals_two_quadprog_projections():
    rng = np.random.default_rng(1)
    for _ in range(50):
        anchor, theta, gs, gp = (rng.normal(size=30) for _ in range(4))
        closed = project(*(torch.tensor(v) for v in (theta, anchor, gs, gp))).numpy()
        np.testing.assert_allclose(closed, qp_project(qp_project(theta, anchor, gs), anchor, gp), atol=1e-9)


def test_weights_are_zero_when_the_constraints_hold():
    gs, gp = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    ws, wp = projection_weights(torch.tensor([-1.0, -2.0]), gs, gp)   # Δᵀg ≤ 0 for both
    assert ws == 0 and wp == 0
    ws, wp = projection_weights(torch.tensor([3.0, -2.0]), gs, gp)
    assert ws == 3 and wp == 0


def test_fgsm_leaves_the_batch_alone_and_clips():
    net = build_model('cnn5', (1, 28, 28), 10, seed=0).eval()
    x, y = torch.randn(4, 1, 28, 28), torch.randint(0, 10, (4,))
    before = x.clone()
    out = fgsm_ascent(net, x, y, 0.5, iters=3, lo=x.min().item(), hi=x.max().item())
    assert torch.equal(x, before) and not torch.equal(out, x)
    assert out.min() >= x.min() and out.max() <= x.max()
    xs, ys, xp = pseudo_and_perturbed(net, x, y, 0.2, 0.002)
    assert (xs - x).abs().max() > (xp - x).abs().max() and torch.allclose(ys.sum(1), torch.ones(4))


# ---- FedAvg as the limit, and each knob matters

def test_gamma_one_without_projection_is_fedavg():
    avg = final_x(cfg_of('fedavg'))
    assert torch.equal(final_x(cfg_of(gamma=1.0, project=False)), avg)
    assert not torch.allclose(final_x(cfg_of(gamma=1.0)), avg)
    assert not torch.allclose(final_x(cfg_of(gamma=0.5, project=False)), avg)


def test_slow_update_is_the_interpolated_gradient():
    "One step with project=False: θ1 = θ0 - lr ∇L(θ0), since θ_γ = θ0 at the first step, and the model is left at θ1."
    cfg = cfg_of(gamma=0.3, project=False).replace(local_epochs=1, local_steps=1)
    fed = Federation(cfg)
    avg = Federation(cfg.replace(algorithm='fedavg', params={}))
    fed.round(1); avg.round(1)
    assert torch.allclose(fed.algo.x, avg.algo.x, atol=1e-7)


def test_mg_runs_and_changes_the_result():
    a, b = final_x(cfg_of(gamma=0.4, eta_s=0.03)), final_x(cfg_of(gamma=0.4, eta_s=0.03, mg=True))
    assert torch.isfinite(b).all() and not torch.allclose(a, b)


def test_upload_equals_fedavg():
    d = FlatModel(build_model('cnn5', (1, 28, 28), 10)).numel
    assert ALGORITHMS['fedreg'](cfg_of(), torch.zeros(d)).payload(d) == ALGORITHMS['fedavg'](cfg_of('fedavg'), torch.zeros(d)).payload(d)


@pytest.mark.parametrize('params, field', [({'gamma': 0}, "params['gamma']=0"), ({'gamma': 1.5}, "params['gamma']=1.5"),
                                           ({'eta_s': -0.1}, "params['eta_s']=-0.1"), ({'iters': 0}, "params['iters']=0"),
                                           ({'mg': 'yes'}, "params['mg']='yes'"), ({'beta': 0.5}, "params['beta']=0.5")])
def test_bad_hyperparameters_are_refused(params, field):
    with pytest.raises(ValueError, match=field.replace('[', r'\[').replace(']', r'\]')):
        cfg_of(**params)


def test_interrupted_run_resumes_identically(tmp_path):
    cfg = cfg_of(gamma=0.4, eta_s=0.2).replace(rounds=3)
    full = run(cfg, tmp_path / 'a').metrics
    class Stop(Exception): pass
    def stop_after_1(row):
        if row['round'] == 1: raise Stop
    with pytest.raises(Stop): run(cfg, tmp_path / 'b', callbacks=[stop_after_1])
    resumed = run(cfg, tmp_path / 'b').metrics
    pd.testing.assert_frame_equal(full[COLS], resumed[COLS])


# ---- the paper's settings

def test_every_setting_builds_and_scales_derive_from_the_paper():
    for st, s in FEDREG_SETTINGS.items():
        for m in s['methods']:
            paper = fedreg_config(st, m)
            assert paper.weighting == 'uniform' and paper.algorithm == {'SGD': 'fedsgd'}.get(m, m.lower())
            if st in FEDREG_MINI:
                for scale in ('mini', 'smoke'):
                    c = fedreg_config(st, m, scale)
                    assert (c.lr, c.params, c.batch_size, c.partition) == (paper.lr, paper.params, paper.batch_size, paper.partition)
                    assert 1 <= c.local_epochs < paper.local_epochs and c.dataset != paper.dataset
    assert fedreg_config('EMNIST', 'SCAFFOLD').lr == 0.1 and fedreg_config('EMNIST', 'FedAvg').lr == 0.2
    assert fedreg_config('CIFAR-10 (uniform)', 'FedProx').params == {'mu': 0.001, 'convention': 'full'}
    assert fedreg_config('COVID-19 CT Images', 'FedReg').params == {'gamma': 0.5, 'eta_s': 1e-6}


def test_bad_setting_method_scale():
    with pytest.raises(ValueError, match="setting='MNIST'"): fedreg_config('MNIST', 'FedReg')
    with pytest.raises(ValueError, match="method='SCAFFOLD'"): fedreg_config('CIFAR-100 (ResNet-9)', 'SCAFFOLD')
    with pytest.raises(ValueError, match="scale='huge'"): fedreg_config('EMNIST', 'FedReg', 'huge')
    with pytest.raises(ValueError, match='a setting with a mini scale'): fedreg_config('COVID-19 CT Images', 'FedReg', 'mini')


def test_paper_config_without_data_says_where_to_put_it(tmp_path):
    with pytest.raises(FileNotFoundError, match='MNIST'):
        Federation(fedreg_config('MNIST (two classes)', 'FedReg', device='cpu', data_root=str(tmp_path)))


@pytest.mark.skipif(shared_dir() is None, reason='needs the project shared/ folder')
def test_embedded_paper_numbers_equal_the_spec_tables():
    ref = pd.read_csv(shared_dir() / 'papers' / 'fedreg_tables.csv', dtype={'table': str})
    n = 0
    for r in ref.itertuples():
        if r.method == 'SCAFFOLD' and r.setting.startswith('CIFAR-100'): continue     # not run: no cell
        got = fedreg_paper(r.setting, r.method, r.metric, r.table)
        assert got == ('-' if pd.isna(r.value) else pytest.approx(float(r.value))), r
        n += 1
    assert n == sum(len(rows) * len(metrics) for metrics, rows in FEDREG_PAPER.values())


# ---- tables and verdicts

def curves_of(accs: dict, setting='MNIST (two classes)'):
    "accs: {(method, seed): [acc at round 0, 1, ...]}"
    return pd.DataFrame([dict(setting=setting, method=m, seed=s, round=r, test_acc=a) for (m, s), c in accs.items() for r, a in enumerate(c)])


def test_table_rows_follow_the_paper_definitions():
    c = curves_of({('SGD', 0): [0.1, 0.5, 0.8], ('SGD', 1): [0.1, 0.6, 0.6],
                   ('FedReg', 0): [0.1, 0.8, 0.9], ('FedReg', 1): [0.1, 0.2, 0.5]})
    rows = fedreg_table_rows(c, 'mini', '1').set_index(['method', 'metric'])
    # seed 0: SGD best 0.8, FedReg reaches 0.4 at 1, 0.72 at 1, 0.8 at 1; seed 1: SGD best 0.6: FedReg 0.3 at 2, 0.54 never
    assert rows.loc[('FedReg', 'R0.5'), 'ours'] == 1.5
    assert rows.loc[('FedReg', 'R0.9'), 'ours'] == '-' and rows.loc[('FedReg', 'R0.9'), 'shown'].startswith('- (1/2')
    assert rows.loc[('FedReg', 'ACC'), 'ours'] == pytest.approx(0.7)
    assert rows.loc[('SGD', 'R1.0'), 'ours'] == 1.5            # its own best: round 2 (seed 0) and round 1 (seed 1)
    assert rows.loc[('FedReg', 'R0.5'), 'paper'] == 4 and rows.loc[('FedReg', 'ACC'), 'paper'] == 0.977
    assert (rows['scale'] == 'mini').all() and (rows['seeds'] == '0,1').all()


def verdict_rows(fedreg_r05, fedreg_acc):
    st, rows = 'MNIST (two classes)', []
    for m, r05, acc in (('SGD', 10, 0.80), ('FedAvg', 5, 0.81), ('FedProx', 6, 0.80), ('SCAFFOLD', 7, 0.70), ('FedCurv', 5, 0.80),
                        ('FedReg', fedreg_r05, fedreg_acc)):
        later = (lambda k: '-') if r05 == '-' else (lambda k: r05 + k)
        rows += [dict(setting=st, method=m, metric=k, ours=v) for k, v in (('R0.5', r05), ('R0.9', later(1)), ('R1.0', later(2)), ('ACC', acc))]
    return pd.DataFrame(rows)


def test_verdicts_can_fail():
    good = fedreg_verdicts(verdict_rows(2, 0.9)).set_index('claim')['verdict']
    bad = fedreg_verdicts(verdict_rows(5, 0.9)).set_index('claim')['verdict']      # ties FedAvg: not fewer rounds
    never = fedreg_verdicts(verdict_rows('-', 0.9)).set_index('claim')['verdict']
    assert good['4'] == 'reproduced' and bad['4'] == 'not reproduced' and never['4'] == 'not reproduced'
    assert good['13'] == 'reproduced' and good['14'] == 'reproduced'
    assert good['6'] == 'not testable here' and good['10'] == 'not testable here' and good['17'] == 'not testable here'


def test_forgetting_claim_is_split_into_its_halves():
    rows = pd.DataFrame([dict(setting=st, method='FedAvg', metric='loss ratio', ours=v)
                         for st, v in (('MNIST (two classes)', 3.0), ('EMNIST', 5.0), ('MNIST (IID)', 1.2), ('EMNIST (IID)', 1.7))])
    v = fedreg_verdicts(rows).set_index('claim')['verdict']
    assert v['1a'] == 'reproduced' and v['1b'] == 'not reproduced' and v['2'] == 'not testable here'


def test_a_setting_that_learned_nothing_tests_no_claim():
    rows = verdict_rows(2, 0.9)
    rows.loc[rows['metric'] == 'ACC', 'ours'] = [0.11, 0.10, 0.12, 0.10, 0.11, 0.13]     # all within chance (0.1) x 2
    v = fedreg_verdicts(rows).set_index('claim')
    assert v.loc['4', 'verdict'] == 'not testable here' and 'twice chance' in v.loc['4', 'evidence']
    assert v.loc['13', 'verdict'] == 'not testable here'
