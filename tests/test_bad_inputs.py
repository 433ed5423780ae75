"""Bad and hostile inputs, table-driven: every case is named, and asserts the outcome's class and the key words of its
message, so a regression shows as the case it breaks. Config cases go through the API, command-line cases through
`main(argv)` in this process, damaged-file cases through `run()` on copies of one tiny finished run."""

import contextlib
import dataclasses
import io
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
import torch
from fedrepro.config import ExperimentConfig
from fedrepro.cli import main
from fedrepro import runner
from fedrepro.runner import run
from fedrepro.results import run_many
from fedrepro.repro import artefact_sources, report_verdicts
from test_runner import Stop, stop_after

# ---- the API: a config refused on creation, with the field, the value and what is allowed

REFUSED = {  # case: (config fields, words the ValueError must hold)
    'dataset unknown': (dict(dataset='imagenet'), ["dataset='imagenet' is not allowed", 'mnist5k']),
    'dataset a list': (dict(dataset=['digits']), ["dataset=['digits'] is not allowed: a name"]),
    'dataset None': (dict(dataset=None), ['dataset=None is not allowed: a name']),
    'partition unknown': (dict(partition='grouped'), ["partition='grouped' is not allowed"]),
    'partition a number': (dict(partition=3), ['partition=3 is not allowed: a name']),
    'model unknown': (dict(model='resnet1000'), ["model='resnet1000' is not allowed"]),
    'algorithm unknown': (dict(algorithm='fedxyz'), ["algorithm='fedxyz' is not allowed"]),
    'algorithm a dict': (dict(algorithm={'name': 'fedavg'}), ["algorithm={'name': 'fedavg'} is not allowed: a name"]),
    'num_clients 0': (dict(num_clients=0), ['num_clients=0 is not allowed: an integer >= 1']),
    'num_clients 2.5': (dict(num_clients=2.5), ['num_clients=2.5 is not allowed: an integer >= 1']),
    'num_clients True': (dict(num_clients=True), ['num_clients=True is not allowed']),
    'num_clients text': (dict(num_clients='10'), ["num_clients='10' is not allowed"]),
    'clients_per_round 0': (dict(clients_per_round=0), ['clients_per_round=0 is not allowed']),
    'clients_per_round > num_clients': (
        dict(num_clients=5, clients_per_round=6),
        ['clients_per_round=6 is not allowed: at most num_clients=5'],
    ),
    'rounds 0': (dict(rounds=0), ['rounds=0 is not allowed: an integer >= 1']),
    'rounds 2.0': (dict(rounds=2.0), ['rounds=2.0 is not allowed']),
    'rounds None': (dict(rounds=None), ['rounds=None is not allowed']),
    'local_epochs 0': (dict(local_epochs=0), ['local_epochs=0 is not allowed']),
    'local_steps 0': (dict(local_steps=0), ['local_steps=0 is not allowed: None or an integer >= 1']),
    'local_steps True': (dict(local_steps=True), ['local_steps=True is not allowed']),
    'local_steps 2.5': (dict(local_steps=2.5), ['local_steps=2.5 is not allowed']),
    'batch_size -1': (dict(batch_size=-1), ['batch_size=-1 is not allowed']),
    'eval_every 0': (dict(eval_every=0), ['eval_every=0 is not allowed']),
    'eval_batch_size 0': (dict(eval_batch_size=0), ['eval_batch_size=0 is not allowed']),
    'eval_local text': (dict(eval_local='yes'), ["eval_local='yes' is not allowed: True or False"]),
    'eval_local 1': (dict(eval_local=1), ['eval_local=1 is not allowed: True or False']),
    'checkpoint_every 0': (dict(checkpoint_every=0), ['checkpoint_every=0 is not allowed']),
    'gpus_per_run NaN': (dict(gpus_per_run=float('nan')), ["gpus_per_run=nan is not allowed: None (the grid's)"]),
    'gpus_per_run 1.5': (dict(gpus_per_run=1.5), ['gpus_per_run=1.5 is not allowed', 'a whole number of GPUs']),
    'lr 0': (dict(lr=0), ['lr=0 is not allowed: a finite number > 0']),
    'lr negative': (dict(lr=-0.1), ['lr=-0.1 is not allowed: a finite number > 0']),
    'lr nan': (dict(lr=float('nan')), ['lr=nan is not allowed']),
    'lr inf': (dict(lr=float('inf')), ['lr=inf is not allowed']),
    'lr 10**400': (dict(lr=10**400), ['lr=1000', '(401 characters) is not allowed: a finite number > 0']),
    'lr True': (dict(lr=True), ['lr=True is not allowed']),
    'lr text': (dict(lr='0.1'), ["lr='0.1' is not allowed"]),
    'lr None': (dict(lr=None), ['lr=None is not allowed']),
    'momentum 1': (dict(momentum=1.0), ['momentum=1.0 is not allowed: a finite number in [0, 1)']),
    'momentum negative': (dict(momentum=-0.1), ['momentum=-0.1 is not allowed']),
    'momentum nan': (dict(momentum=float('nan')), ['momentum=nan is not allowed']),
    'weight_decay negative': (dict(weight_decay=-1e-4), ['weight_decay=-0.0001 is not allowed']),
    'weight_decay inf': (dict(weight_decay=float('inf')), ['weight_decay=inf is not allowed']),
    'dp_clip 0': (dict(dp_clip=0), ['dp_clip=0 is not allowed: None (DP-SGD off) or a number > 0']),
    'dp_clip negative': (dict(dp_clip=-1.0), ['dp_clip=-1.0 is not allowed']),
    'dp_clip nan': (dict(dp_clip=float('nan')), ['dp_clip=nan is not allowed']),
    'dp_clip True': (dict(dp_clip=True), ['dp_clip=True is not allowed']),
    'dp_noise negative': (dict(dp_clip=1.0, dp_noise=-1), ['dp_noise=-1 is not allowed: a finite number >= 0']),
    'dp_noise without dp_clip': (dict(dp_noise=0.5), ['dp_noise=0.5 is not allowed: 0 unless dp_clip is set']),
    'dp_noise with an infinite clip': (
        dict(dp_clip=float('inf'), dp_noise=0.5),
        ['dp_noise=0.5 is not allowed: 0 unless dp_clip is set and finite'],
    ),
    'dp_delta 0': (dict(dp_clip=1.0, dp_delta=0), ['dp_delta=0 is not allowed: a number in (0, 1)']),
    'dp_delta 1': (dict(dp_clip=1.0, dp_delta=1.0), ['dp_delta=1.0 is not allowed']),
    'DP-SGD under MOON': (dict(algorithm='moon', dp_clip=1.0), ['dp_clip=1.0 is not allowed: None for moon']),
    'weighting median': (dict(weighting='median'), ["weighting='median' is not allowed: 'samples' or 'uniform'"]),
    'seed negative': (dict(seed=-1), ['seed=-1 is not allowed: an integer >= 0']),
    'seed True': (dict(seed=True), ['seed=True is not allowed']),
    'seed 1.5': (dict(seed=1.5), ['seed=1.5 is not allowed']),
    'device gpu': (dict(device='gpu'), ["device='gpu' is not allowed: 'auto', 'cpu', 'cuda' or 'cuda:N'"]),
    'device None': (dict(device=None), ['device=None is not allowed']),
    'device cuda:x': (dict(device='cuda:x'), ["device='cuda:x' is not allowed"]),
    'params None': (dict(params=None), ['params=None is not allowed: a dict of hyperparameters']),
    'params a list': (dict(params=[('mu', 0.1)]), ["params=[('mu', 0.1)] is not allowed"]),
    'a hyperparameter FedAvg lacks': (
        dict(params={'mu': 0.1}),
        ["params['mu']=0.1 is not allowed: a hyperparameter of fedavg"],
    ),
    'FedProx mu negative': (dict(algorithm='fedprox', params={'mu': -1}), ["params['mu']=-1 is not allowed"]),
    'FedProx convention third': (
        dict(algorithm='fedprox', params={'convention': 'third'}),
        ["params['convention']='third' is not allowed: 'half'"],
    ),
    'FedProx from_round 0': (
        dict(algorithm='fedprox', params={'from_round': 0}),
        ["params['from_round']=0 is not allowed: an integer >= 1"],
    ),
    'FedProx from_round True': (
        dict(algorithm='fedprox', params={'from_round': True}),
        ["params['from_round']=True is not allowed"],
    ),
    'FedCurv lam negative': (dict(algorithm='fedcurv', params={'lam': -1.0}), ["params['lam']=-1.0 is not allowed"]),
    'FedCurv variant unknown': (
        dict(algorithm='fedcurv', params={'variant': 'x'}),
        ["params['variant']='x' is not allowed"],
    ),
    'FedCurv fisher_samples 0': (
        dict(algorithm='fedcurv', params={'fisher_samples': 0}),
        ["params['fisher_samples']=0 is not allowed"],
    ),
    'MOON tau 0': (dict(algorithm='moon', params={'tau': 0}), ["tau", 'is not allowed: a finite number > 0']),
    'FedNTD beta negative': (
        dict(algorithm='fedntd', params={'beta': -1}),
        ['beta', 'is not allowed: a finite number >= 0'],
    ),
    'alpha under iid': (
        dict(partition='iid', partition_params={'alpha': 0.3}),
        ["partition_params['alpha']=0.3 is not allowed: a parameter of partition 'iid'"],
    ),
    'partition_params None': (dict(partition_params=None), ['partition_params=None is not allowed: a dict']),
    'classes_per_client 11 of 10': (
        dict(partition='classes', partition_params={'classes_per_client': 11}),
        ['classes_per_client=11 is not allowed: an integer from 1 to the 10 classes of mnist5k'],
    ),
    'classes_per_client 0': (
        dict(partition='classes', partition_params={'classes_per_client': 0}),
        ['classes_per_client=0 is not allowed'],
    ),
    'classes_per_client True': (
        dict(partition='classes', partition_params={'classes_per_client': True}),
        ['classes_per_client=True is not allowed'],
    ),
    'alpha negative': (
        dict(partition='dirichlet', partition_params={'alpha': -1}),
        ['alpha=-1 is not allowed: a finite number > 0'],
    ),
    'alpha nan': (dict(partition='dirichlet', partition_params={'alpha': float('nan')}), ['alpha=nan is not allowed']),
    'alpha True': (dict(partition='dirichlet', partition_params={'alpha': True}), ['alpha=True is not allowed']),
    'a model option mlp lacks': (
        dict(model='mlp', model_params={'depth': 3}),
        ["model_params['depth']=3 is not allowed: an option of model 'mlp'"],
    ),
    'hidden -3': (
        dict(model='mlp', model_params={'hidden': -3}),
        ["model_params['hidden']=-3 is not allowed: a list of integers >= 1 (widths)"],
    ),
    'hidden with a negative width': (
        dict(model='mlp', model_params={'hidden': [200, -1]}),
        ["model_params['hidden']=[200, -1] is not allowed: a list of integers >= 1"],
    ),
    'hidden text': (dict(model='mlp', model_params={'hidden': 'x'}), ["model_params['hidden']='x' is not allowed"]),
    'hidden a fraction': (dict(model='mlp', model_params={'hidden': [64.5]}), ["model_params['hidden']=[64.5] is not"]),
    'hidden a bool': (dict(model='mlp', model_params={'hidden': [True]}), ["model_params['hidden']=[True] is not"]),
    'hidden one count': (
        dict(model='mlp', model_params={'hidden': 64}),
        ["model_params['hidden']=64 is not allowed: a list of integers >= 1 (widths), e.g. [200]"],
    ),
    'batch_norm 1': (dict(model='vgg16', model_params={'batch_norm': 1}), ["['batch_norm']=1 is not allowed: True or"]),
    'projection_dim 2.5': (dict(model_params={'projection_dim': 2.5}), ["['projection_dim']=2.5 is not allowed"]),
    'cnn5 hidden 0': (
        dict(model='cnn5', model_params={'hidden': 0}),
        ["model_params['hidden']=0 is not allowed: an integer >= 1"],
    ),
    'model_params None': (dict(model_params=None), ['model_params=None is not allowed: a dict']),
    'aux_per_class negative': (dict(aux_per_class=-1), ['aux_per_class=-1 is not allowed: an integer >= 0']),
    'aux_per_class True': (dict(aux_per_class=True), ['aux_per_class=True is not allowed']),
    'aux_from valid': (dict(aux_from='valid'), ["aux_from='valid' is not allowed"]),
    'test_size negative': (dict(test_size=-1), ['test_size=-1 is not allowed: an integer >= 0']),
    'test_size True': (dict(test_size=True), ['test_size=True is not allowed']),
    'download yes': (dict(download='yes'), ["download='yes' is not allowed: True or False"]),
    'data_root None': (dict(data_root=None), ['data_root=None is not allowed: a folder path']),
    'data_root a number': (dict(data_root=3), ['data_root=3 is not allowed: a folder path']),
}


@pytest.mark.parametrize('case', REFUSED)
def test_a_bad_config_is_refused_naming_field_and_value(case):
    fields, words = REFUSED[case]
    with pytest.raises(ValueError) as e:
        ExperimentConfig(**fields)
    assert all(w in str(e.value) for w in words), str(e.value)


FROM_DICT = {
    'None': (None, ['config=None is not allowed: a dict']),
    'a list': ([('rounds', 2)], ["config=[('rounds', 2)] is not allowed"]),
    'a key that is no field': ({'rounds': 2, 'epochs': 3}, ["config key='epochs' is not allowed"]),
}


@pytest.mark.parametrize('case', FROM_DICT)
def test_from_dict_refuses_what_is_not_a_config(case):
    d, words = FROM_DICT[case]
    with pytest.raises(ValueError) as e:
        ExperimentConfig.from_dict(d)
    assert all(w in str(e.value) for w in words), str(e.value)


# ---- the library's functions: a wrong argument refused before anything trains or is written

_CFG = ExperimentConfig(dataset='digits', model='mlp', num_clients=4, clients_per_round=2, rounds=1, device='cpu')
CALLS = {  # case: (call, words the ValueError must hold)
    'run a dataset name': (lambda out: run('digits', out), ["cfg='digits' is not allowed: an ExperimentConfig"]),
    'run a dict': (lambda out: run(_CFG.to_dict(), out), ['is not allowed: an ExperimentConfig (from a dict']),
    'run out a number': (lambda out: run(_CFG, out=123), ['out=123 is not allowed: a folder']),
    # a callable, not a list of them (not `print`: Ray's tqdm_ray replaces it in a process that imported Ray)
    'run callbacks len': (lambda out: run(_CFG, out, callbacks=len), ['callbacks=<built-in function len>']),
    'run_many one config': (lambda out: run_many(_CFG, out), ['is not allowed: a list of ExperimentConfigs']),
    'run_many a name in the list': (lambda out: run_many([_CFG, 'x'], out), ["cfg='x' is not allowed"]),
    'report_verdicts a string': (lambda out: report_verdicts('w'), ["sources='w' is not allowed: the table"]),
    'report_verdicts a paper name': (
        lambda out: report_verdicts(artefact_sources(), 'fedimp'),
        ["papers='fedimp' is not allowed: None or some of"],
    ),
    'artefact_sources a missing folder': (lambda out: artefact_sources(out), ['is not allowed: a folder']),
}


@pytest.mark.parametrize('case', CALLS)
def test_a_library_function_refuses_a_wrong_argument_before_it_trains(case, tmp_path):
    call, words = CALLS[case]
    with pytest.raises(ValueError) as e:
        call(tmp_path / 'runs')
    assert all(w in str(e.value) for w in words), str(e.value)
    assert not (tmp_path / 'runs').exists() or not any((tmp_path / 'runs').rglob('metrics.csv'))


# ---- the public API: every function and declaration the README and the job notebooks show (a sixth paper's job is
# written with them), called with a wrong-typed first argument, refuses it naming the argument and what it takes


def _comparisons() -> dict:
    "Every comparison class of fedrepro.verdicts: a dataclass with a `judge` and a `basis`."
    from fedrepro import verdicts

    is_one = lambda c: dataclasses.is_dataclass(c) and hasattr(c, 'judge') and hasattr(c, 'basis')
    return {n: c for n, c in vars(verdicts).items() if isinstance(c, type) and is_one(c)}


def _made_with_first(cls, first):
    "`cls(first, ...)`, its other required fields filled with values of their types (a comparison where one is taken)."
    from fedrepro.declare import _field_types
    from fedrepro.repro import Compare

    fill = {str: 'x', float: 0.5, int: 1, bool: False, tuple: ('a', 'b', 'c'), object: Compare('s', 'm', 'a', 'b')}
    kinds = dict(_field_types(cls))
    required = [f.name for f in dataclasses.fields(cls) if f.default is f.default_factory is dataclasses.MISSING]
    return cls(first, *[fill[kinds[n][0]] for n in required[1:]])


def _api_calls(out) -> dict:
    "{name: (a call with a wrong-typed first argument, the words its error must hold)}."
    from fedrepro.data import load_federated
    from fedrepro.engine import Federation
    from fedrepro.flower import simulate
    from fedrepro.jobs import reproduce
    from fedrepro.repro import Claim, Elsewhere, Paper, Setting, judge, param_sweep, read_seed_csvs, run_table
    from fedrepro.repro import seed_cells, table_rows, write_seed_csv
    from fedrepro.results import write_repro_csv

    frame = pd.DataFrame()
    calls = {
        'ExperimentConfig': (lambda: ExperimentConfig(123), ['dataset=123 is not allowed']),
        'ExperimentConfig.from_dict': (lambda: ExperimentConfig.from_dict('digits'), ["'digits' is not allowed"]),
        'run': (lambda: run('digits', out), ["cfg='digits' is not allowed: an ExperimentConfig"]),
        'run_many': (lambda: run_many('digits', out), ["cfgs='digits' is not allowed: a list of ExperimentConfigs"]),
        'Federation': (lambda: Federation('digits'), ["cfg='digits' is not allowed: an ExperimentConfig"]),
        'simulate': (lambda: simulate('digits'), ["cfg='digits' is not allowed: an ExperimentConfig"]),
        'load_federated': (lambda: load_federated(123, 'iid', 4, 0), ['dataset=123 is not allowed']),
        'reproduce': (lambda: reproduce(123, 'smoke', out), ['reproduction=123 is not allowed']),
        'run_table': (
            lambda: run_table('fedreg', ['x'], 'smoke', [0], out),
            ["paper='fedreg' is not allowed: a Paper"],
        ),
        'seed_cells': (lambda: seed_cells('fedreg', frame, 'smoke'), ["paper='fedreg' is not allowed: a Paper"]),
        'table_rows': (lambda: table_rows('fedreg', frame, 'smoke'), ["paper='fedreg' is not allowed: a Paper"]),
        'param_sweep': (lambda: param_sweep('fedreg', 'x', 'y', [{}], [10], out), ["paper='fedreg' is not allowed"]),
        'write_seed_csv': (lambda: write_seed_csv([], out, 'x'), ['cells=[] is not allowed: a pandas DataFrame']),
        'write_repro_csv': (lambda: write_repro_csv([], out, 'x'), ['df=[] is not allowed: a pandas DataFrame']),
        'read_seed_csvs': (lambda: read_seed_csvs(123, 'x'), ['folder=123 is not allowed: a folder']),
        'judge': (lambda: judge('C1', frame), ["claims='C1' is not allowed: a list of Claim"]),
        'artefact_sources': (lambda: artefact_sources(123), ['results=123 is not allowed: None, or a folder']),
        'report_verdicts': (lambda: report_verdicts('w'), ["sources='w' is not allowed: the table"]),
        'Paper': (lambda: Paper(123, 'a citation', {}, {}), ['Paper.key=123 is not allowed: a str']),
        'Setting': (lambda: Setting('digits', {}), ["Setting.common='digits' is not allowed: a dict"]),
        'Claim': (lambda: Claim(123, 'a claim', (Elsewhere('why'),)), ['Claim.key=123 is not allowed: a str']),
    }
    for name, cls in _comparisons().items():
        first = dataclasses.fields(cls)[0].name
        calls[name] = (lambda cls=cls: _made_with_first(cls, 123), [f'{name}.{first}=123 is not allowed'])
    return calls


def test_every_shown_function_is_listed():
    "The README's imports and a job's (the sixth paper's template) are all in the table below, and every comparison."
    from test_sixth_paper import JOB

    shown = set()
    for text in (Path(__file__).resolve().parents[1] / 'README.md').read_text(), JOB:
        for line in text.splitlines():
            if line.startswith('from fedrepro') and ' import ' in line:
                shown |= {n.strip() for n in line.split(' import ')[1].split(',')}
    callables = {n for n in shown if n[0].islower() or n == 'ExperimentConfig'}  # not the constants (PAPERS, SEEDS)
    assert callables and callables <= set(_api_calls(None)), callables - set(_api_calls(None))
    assert len(_comparisons()) >= 15


@pytest.mark.parametrize('name', sorted(_api_calls(None)))
def test_a_public_function_refuses_a_wrong_first_argument_by_name(name, tmp_path):
    call, words = _api_calls(tmp_path / 'out')[name]
    with pytest.raises(ValueError) as e:
        call()
    assert all(w in str(e.value) for w in words), str(e.value)
    assert not (tmp_path / 'out').exists()  # refused before anything was written


GRID_SCRIPT = """
from fedrepro.config import ExperimentConfig
from fedrepro.results import check_main_guard, run_many

cfgs = [ExperimentConfig(dataset='digits', model='mlp', num_clients=4, clients_per_round=2, rounds=1, seed=s)
        for s in (0, 1)]
{grid}
"""


@pytest.mark.parametrize('guarded', [False, True])
def test_a_grid_started_by_an_unguarded_script_stops_in_one_line(guarded, tmp_path):
    "Unguarded, a local grid's spawned workers would each run the script again: one line, exit 1, nothing started."
    grid = (
        "if __name__ == '__main__':\n    check_main_guard(2)\n    print('guarded')"
        if guarded
        else ("run_many(cfgs, 'runs', workers=2)")
    )
    (tmp_path / 'grid.py').write_text(GRID_SCRIPT.format(grid=grid))
    p = subprocess.run([sys.executable, 'grid.py'], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    if guarded:
        assert p.returncode == 0 and p.stdout.strip() == 'guarded', p.stderr
    else:
        assert p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert "grid.py:7: a grid on 2 worker processes" in p.stderr and "`if __name__ == '__main__':`" in p.stderr
        assert not (tmp_path / 'runs').exists()


def test_a_claim_comparing_a_method_with_itself_is_refused_when_declared():
    from fedrepro.repro import BEST_ACC, Claim, Compare, Paper, Setting

    common = dict(dataset='digits', model='mlp', num_clients=4, clients_per_round=2)
    setting = Setting(common, {'FedAvg': {'lr': 0.1}, 'Other': {'lr': 0.1}}, mini={})
    claim = lambda b: Claim('T1', 'FedAvg beats b', (Compare('digits', 'ACC', 'FedAvg', b, 'higher'),))
    paper = lambda b: Paper(
        'selfie',
        'nobody',
        {'FedAvg': 'fedavg', 'Other': 'fedprox'},
        {'digits': setting},
        claims=[claim(b)],
        metrics={'ACC': BEST_ACC},
    )
    with pytest.raises(
        ValueError, match=r"selfie claim T1: methods=\('FedAvg', 'FedAvg'\) is not allowed: two different"
    ):
        paper('FedAvg')
    assert paper('Other').claims[0].key == 'T1'  # against another method it is declared


def _declared(**changes):
    "A one-setting paper declared with `changes` to its fields (the declaration itself is valid)."
    from fedrepro.repro import BEST_ACC, Claim, Compare, Paper, Setting

    common = dict(dataset='digits', model='mlp', num_clients=4, clients_per_round=2)
    fields = dict(
        key='decl',
        citation='nobody',
        methods={'FedAvg': 'fedavg', 'Other': 'fedprox'},
        settings={'digits': Setting(common, {'FedAvg': {'lr': 0.1}, 'Other': {'lr': 0.1}}, mini={})},
        claims=[Claim('T1', 'Other beats FedAvg', (Compare('digits', 'ACC', 'Other', 'FedAvg', 'higher'),))],
        metrics={'ACC': BEST_ACC},
    )
    return Paper(**{**fields, **changes})


DECLARATIONS = {  # case: (the change to a valid paper's fields, the words its error must hold)
    'settings a list': (
        lambda: dict(settings=[_declared().settings['digits']]),
        'Paper.settings=[Setting(',
    ),
    'a setting runs a method the paper does not declare': (
        lambda: dict(methods={'FedAvg': 'fedavg'}),
        "decl settings['digits']: method='Other' is not allowed: one of ['FedAvg']",
    ),
    'a setting that is a dict': (
        lambda: dict(settings={'digits': {'common': {}}}),
        "decl settings={'digits': {'common': {}}} is not allowed: str: Setting",
    ),
    'a metric that is a string': (lambda: dict(metrics={'ACC': 'best'}), "decl metrics={'ACC': 'best'}"),
    'claims that are strings': (lambda: dict(claims=['T1']), "decl claims='T1' is not allowed: a list of Claim"),
    'a claim with no comparison': (
        lambda: dict(claims=[__import__('fedrepro.repro').repro.Claim('T1', 'x', ())]),
        'claim T1 checks=() is not allowed: a tuple of comparisons',
    ),
}


@pytest.mark.parametrize('case', DECLARATIONS)
def test_a_bad_declaration_is_refused_when_made_naming_what_is_wrong(case):
    change, words = DECLARATIONS[case]
    assert _declared().key == 'decl'  # the paper it changes is valid
    with pytest.raises(ValueError) as e:
        _declared(**change())
    assert words in str(e.value), str(e.value)


# ---- one value, one spelling: configs written differently but equal hash equally, so a finished run is found, not
# redone

SAME = {
    'lr int and float': (dict(lr=1), dict(lr=1.0)),
    'momentum int and float': (dict(momentum=0), dict()),
    'numpy numbers': (dict(lr=np.float64(0.5), seed=np.int64(3)), dict(lr=0.5, seed=3)),
    'FedProx default mu written out': (dict(algorithm='fedprox', params={'mu': 0.01}), dict(algorithm='fedprox')),
    'FedProx every default written out': (
        dict(algorithm='fedprox', params={'mu': 0.01, 'convention': 'half', 'from_round': 1}),
        dict(algorithm='fedprox'),
    ),
    'FedProx mu as an int': (
        dict(algorithm='fedprox', params={'mu': 1}),
        dict(algorithm='fedprox', params={'mu': 1.0}),
    ),
    'a path as data_root': (dict(data_root=__import__('pathlib').Path('data')), dict()),
}


@pytest.mark.parametrize('case', SAME)
def test_equal_configs_hash_equally(case):
    a, b = (ExperimentConfig(**kw) for kw in SAME[case])
    assert a.hash == b.hash and a.run_name == b.run_name


# ---- hyperparameters that switch a method off: accepted, with a warning that says so

SWITCHED_OFF = {
    'FedProx mu 0': (dict(algorithm='fedprox', params={'mu': 0}), 'mu=0 (no proximal term)'),
    'FedProx from_round after the last round': (
        dict(algorithm='fedprox', rounds=5, params={'from_round': 999, 'mu': 100}),
        'from_round=999 > rounds=5',
    ),
    'FedCurv lam 0': (dict(algorithm='fedcurv', params={'lam': 0.0}), 'lam=0 (no Fisher penalty)'),
    'FedNTD beta 0': (dict(algorithm='fedntd', params={'beta': 0}), 'beta=0 (no not-true distillation)'),
    'MOON mu 0': (dict(algorithm='moon', params={'mu': 0.0}), 'mu=0 (no contrastive term)'),
    'FedCAD beta 0': (dict(algorithm='fedcad', params={'beta': 0}), 'beta=0 (no distillation)'),
}


@pytest.mark.parametrize('case', SWITCHED_OFF)
def test_a_method_switched_off_warns(case):
    fields, words = SWITCHED_OFF[case]
    with pytest.warns(UserWarning, match='is switched off by') as w:
        ExperimentConfig(**fields)
    assert words in str(w[0].message) and 'trains as plain FedAvg' in str(w[0].message)


def test_a_method_left_on_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        ExperimentConfig(algorithm='fedprox', rounds=5, params={'from_round': 5})


# ---- the command line: every expected failure is one line naming the field or path, never a traceback


def fedrepro(argv) -> tuple[int, str]:
    "`fedrepro <argv>` in this process: its exit code and its stderr."
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            main(argv)
            code = 0
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


@pytest.fixture(scope='module')
def a_file(tmp_path_factory):
    f = tmp_path_factory.mktemp('files') / 'a-file'
    f.write_text('not a folder')
    return str(f)


RUN = ['run', '--model', 'mlp', '--rounds', '1', '--device', 'cpu', '--no-progress']
CLI = {  # case: (argv, exit code, words of the message); '{file}' is a file
    'no command': ([], 2, ['the following arguments are required: command']),
    'an unknown command': (['train'], 2, ["invalid choice: 'train'"]),
    'an unknown dataset': (RUN + ['--dataset', 'cifar1000'], 2, ["dataset='cifar1000' is not allowed"]),
    '--lr not a number': (RUN + ['--lr', 'abc'], 2, ["argument --lr: invalid float value: 'abc'"]),
    '--seed not a number': (RUN + ['--seed', 'abc'], 2, ["argument --seed: invalid int value: 'abc'"]),
    '--seed negative': (RUN + ['--seed', '-1'], 2, ['seed=-1 is not allowed']),
    '--eval-local yes': (RUN + ['--eval-local', 'yes'], 2, ["--eval-local: 'yes' is not allowed: true or false"]),
    '--download maybe': (RUN + ['--download', 'maybe'], 2, ["--download: 'maybe' is not allowed: true or false"]),
    '--set lr not a number': (RUN + ['--set', 'lr=abc'], 2, ["lr='abc' is not allowed: a value of type float"]),
    '--set local_steps not a number': (
        RUN + ['--set', 'local_steps=abc'],
        2,
        ["local_steps='abc' is not allowed: a value of type int or None"],
    ),
    '--set without =': (RUN + ['--set', 'mu'], 2, ["--set='mu' is not allowed: key=value"]),
    '--set alpha under iid': (
        RUN + ['--set', 'alpha=0.5'],
        2,
        ["--set alpha='0.5' is not allowed: a parameter of partition 'dirichlet'", "this run's partition is 'iid'"],
    ),
    '--set mu under fedavg': (RUN + ['--set', 'mu=0.1'], 2, ["a parameter of algorithm", "'fedprox'"]),
    '--set a misspelt field': (RUN + ['--set', 'local_step=5'], 2, ["did you mean 'local_steps'?"]),
    '--set a name nothing has': (
        RUN + ['--set', 'zzz=1'],
        2,
        ["--set zzz='1' is not allowed: no config field or parameter has this name"],
    ),
    '--set params not an object': (RUN + ['--set', 'params=[1]'], 2, ["params='[1]' is not allowed: a JSON object"]),
    '--set params with a key fedavg lacks': (
        RUN + ['--set', 'params={"mu": 0.1}'],
        2,
        ["params['mu']=0.1 is not allowed: a hyperparameter of fedavg"],
    ),
    '--set hidden -3': (RUN + ['--set', 'hidden=-3'], 2, ["model_params['hidden']=-3 is not allowed"]),
    '--set hidden text': (RUN + ['--set', 'hidden=abc'], 2, ["model_params['hidden']='abc' is not allowed"]),
    '--set hidden a fraction': (RUN + ['--set', 'hidden=[64.5]'], 2, ["model_params['hidden']=[64.5] is not allowed"]),
    '--set hidden a bool': (RUN + ['--set', 'hidden=[true]'], 2, ["model_params['hidden']=[True] is not allowed"]),
    '--set hidden one count': (RUN + ['--set', 'hidden=64'], 2, ["model_params['hidden']=64 is not allowed: a list"]),
    '--classes-per-client 12': (
        RUN + ['--partition', 'classes', '--classes-per-client', '12'],
        2,
        ['classes_per_client=12 is not allowed'],
    ),
    '--alpha under iid': (RUN + ['--alpha', '0.3'], 2, ["partition_params['alpha']=0.3 is not allowed"]),
    '--device gpu': (RUN + ['--device', 'gpu'], 2, ["device='gpu' is not allowed"]),
    **(
        {}
        if torch.backends.mps.is_available()
        else {'--device mps without one': (RUN + ['--device', 'mps'], 2, ["device='mps' is not allowed: a device"])}
    ),
    '--dp-clip under moon': (
        RUN + ['--algorithm', 'moon', '--dp-clip', '1'],
        2,
        ['dp_clip=1.0 is not allowed: None for moon'],
    ),
    '--partition group on data without groups': (
        RUN + ['--partition', 'group'],
        2,
        ["partition='group' is not allowed", 'carry group ids'],
    ),
    '--out a file': (RUN + ['--out', '{file}'], 2, ['{file}']),
    '--out under /dev/null': (RUN + ['--out', '/dev/null/runs'], 2, ['/dev/null/runs']),
    'reproduce an unknown job': (['reproduce', 'fedreg_table99'], 2, ["reproduction='fedreg_table99' is not allowed"]),
    'reproduce an unknown scale': (
        ['reproduce', 'quickstart', '--scale', 'huge'],
        2,
        ["argument --scale: invalid choice: 'huge'"],
    ),
    'reproduce --seeds not numbers': (
        ['reproduce', 'quickstart', '--seeds', 'a,b'],
        2,
        ["argument --seeds: 'a,b' is not allowed: comma-separated integers >= 0"],
    ),
    'reproduce --seeds negative': (['reproduce', 'quickstart', '--seeds', '0,-1'], 2, ["'0,-1' is not allowed"]),
    'reproduce --device gpu': (['reproduce', 'quickstart', '--device', 'gpu'], 2, ["device='gpu' is not allowed"]),
    'reproduce a parameter the job lacks': (
        ['reproduce', 'fedimp_table1', '--set', 'profle=P'],
        2,
        ["parameter='profle' is not allowed"],
    ),
    'reproduce --set without =': (
        ['reproduce', 'fedimp_table1', '--set', 'profile'],
        2,
        ["--set='profile' is not allowed: key=value"],
    ),
    'book --results a missing folder': (
        ['book', '--results', '/nonexistent/results'],
        2,
        ["results='/nonexistent/results' is not allowed: a folder"],
    ),
    'reproduce --out a file': (['reproduce', 'quickstart', '--scale', 'smoke', '--out', '{file}'], 2, ['{file}']),
    **(
        {}  # where Quarto is installed, the book would be built
        if shutil.which('quarto')
        else {'book --quarto without Quarto': (['book', '--quarto'], 2, ['quarto is not on PATH; render without'])}
    ),
}


@pytest.mark.parametrize('case', CLI)
def test_the_command_line_fails_in_one_clear_line(case, a_file, tmp_path):
    argv, code, words = CLI[case]
    argv = [a.replace('{file}', a_file) for a in argv]
    if argv[:1] == ['run'] and '--out' not in argv:
        argv += ['--out', str(tmp_path / 'runs')]
    got, err = fedrepro(argv)
    assert got == code and 'Traceback' not in err, err
    assert all(w.replace('{file}', a_file) in err for w in words), err
    assert not (tmp_path / 'runs').exists() or not any((tmp_path / 'runs').iterdir()), (
        'a refused run left a directory behind'
    )


@pytest.mark.parametrize('variable', ['FEDREPRO_DETERMINISTIC', 'FEDREPRO_ALLOW_ENV_CHANGE'])
def test_a_flag_in_the_environment_has_one_meaning_per_spelling(variable, tmp_path, monkeypatch):
    "true and 1 turn it on, false and 0 off; 'yes' is refused in one line before anything is written, not read as off."
    monkeypatch.setenv(variable, 'yes')
    code, err = fedrepro(['run', '--dataset', 'digits', '--model', 'mlp', '--rounds', '2', '--out', str(tmp_path)])
    assert code == 2 and 'Traceback' not in err and not any(tmp_path.iterdir()), err
    assert f"the environment variable {variable}='yes' is not allowed: true or false (or 1, 0)" in err, err


# ---- damaged records: a finished run's records come back whole, from whatever of them is intact


@pytest.fixture(scope='module')
def finished(tmp_path_factory):
    "One tiny finished run, to copy and damage."
    cfg = ExperimentConfig(
        model='mlp', num_clients=4, clients_per_round=2, rounds=3, lr=0.05, batch_size=50, device='cpu', test_size=500
    )
    res = run(cfg, tmp_path_factory.mktemp('finished'))
    return cfg, res


def _truncate(f):
    f.write_bytes(f.read_bytes()[:100])


def _drop_last_row(f):
    f.write_text(''.join(f.read_text().splitlines(True)[:-1]))


DAMAGE = {  # case: (file, what is done to it, a warning expected)
    'checkpoint truncated': ('checkpoint.pt', _truncate, 'is damaged'),
    'checkpoint empty': ('checkpoint.pt', lambda f: f.write_bytes(b''), 'is damaged'),
    'checkpoint random bytes': ('checkpoint.pt', lambda f: f.write_bytes(os.urandom(4096)), 'is damaged'),
    'checkpoint not a checkpoint': (
        'checkpoint.pt',
        lambda f: __import__('torch').save({'x': 1}, f),
        'not a run checkpoint',
    ),
    'metrics.csv without its last row': ('metrics.csv', _drop_last_row, None),
    'metrics.csv deleted': ('metrics.csv', lambda f: f.unlink(), None),
    'metrics.csv garbage': ('metrics.csv', lambda f: f.write_bytes(os.urandom(300)), None),
    'summary.json deleted': ('summary.json', lambda f: f.unlink(), None),
    'summary.json edited': (
        'summary.json',
        lambda f: f.write_text(f.read_text().replace('"best_acc"', '"best_acc_"')),
        None,
    ),
    'env.json deleted': ('env.json', lambda f: f.unlink(), None),
}


@pytest.mark.parametrize('case', DAMAGE)
def test_a_damaged_file_of_a_finished_run_is_recovered(case, finished, tmp_path):
    cfg, res = finished
    shutil.copytree(res.run_dir, tmp_path / cfg.run_name)
    name, damage, warns = DAMAGE[case]
    damage(tmp_path / cfg.run_name / name)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter('always')
        again = run(cfg, tmp_path)
    pd.testing.assert_frame_equal(again.metrics, res.metrics)
    # without its checkpoint nothing can verify the records: returned, and said to be unverified
    summary = res.summary | ({'unverified': runner.UNVERIFIED} if name == 'checkpoint.pt' else {})
    assert again.summary == summary
    pd.testing.assert_frame_equal(pd.read_csv(again.run_dir / 'metrics.csv'), pd.read_csv(res.run_dir / 'metrics.csv'))
    assert json.loads((again.run_dir / 'summary.json').read_text()) == summary
    if warns:
        assert any(warns in str(x.message) and 'checkpoint.pt' in str(x.message) for x in w), [
            str(x.message) for x in w
        ]


def test_a_checkpoint_and_metrics_both_damaged_retrain_to_the_same_rows(finished, tmp_path):
    cfg, res = finished
    shutil.copytree(res.run_dir, tmp_path / cfg.run_name)
    _truncate(tmp_path / cfg.run_name / 'checkpoint.pt')
    _drop_last_row(tmp_path / cfg.run_name / 'metrics.csv')
    with pytest.warns(UserWarning, match='starts again from round 0'):
        again = run(cfg, tmp_path)
    cols = ['round', 'test_acc', 'test_loss', 'up_params']
    pd.testing.assert_frame_equal(again.metrics[cols], res.metrics[cols])


def test_a_checkpoint_of_another_config_names_the_file(finished, tmp_path):
    cfg, res = finished
    shutil.copytree(res.run_dir, tmp_path / cfg.run_name)
    other = cfg.replace(lr=0.07)
    shutil.copytree(res.run_dir, tmp_path / other.run_name)
    with pytest.raises(
        ValueError, match=f'checkpoint.pt belongs to config {cfg.hash}, not {other.hash}; use another out directory'
    ):
        run(other, tmp_path)


# ---- code versions and divergence


def test_resuming_under_other_code_is_refused_unless_allowed(tmp_path, monkeypatch):
    cfg = ExperimentConfig(
        model='mlp', num_clients=4, clients_per_round=2, rounds=3, lr=0.05, batch_size=50, device='cpu', test_size=500
    )
    with pytest.raises(Stop):
        run(cfg, tmp_path, callbacks=[stop_after(2)])
    monkeypatch.setattr(runner, '_CODE', 'other+000000000000')
    with pytest.raises(
        RuntimeError,
        match='stopped at round 2 under fedrepro .* this is other\\+000000000000: resuming would mix rounds',
    ):
        run(cfg, tmp_path)
    res = run(cfg, tmp_path, allow_code_change=True)
    codes = [s['code'] for s in json.loads((res.run_dir / 'env.json').read_text())['segments']]
    assert len(res.metrics) == 4 and codes[-1] == 'other+000000000000' and codes[0] != codes[-1]


DIVERGED = {'lr 1e6': dict(lr=1e6), 'lr 1e3 with momentum': dict(lr=1e3, momentum=0.9)}


@pytest.mark.parametrize('case', DIVERGED)
def test_a_diverged_run_is_recorded_as_diverged_and_reports_no_accuracy(case, tmp_path):
    cfg = ExperimentConfig(
        model='mlp',
        num_clients=4,
        clients_per_round=2,
        rounds=4,
        batch_size=50,
        device='cpu',
        test_size=500,
        **DIVERGED[case],
    )
    res = run(cfg, tmp_path)
    d = res.summary['diverged']
    assert d['round'] == res.metrics['round'].iloc[-1] < cfg.rounds and d['reason'] in (
        'parameters not finite',
        'test loss not finite',
    )
    assert res.summary['best_acc'] is res.summary['final_acc'] is None
    assert res.metrics['diverged'].iloc[-1] == d['reason']
    assert run(cfg, tmp_path).summary == res.summary  # found again, not retrained


# ---- round two (#48): identity, forged records, concurrent jobs, damaged evidence, interrupts, messages

KNOWN_HASHES = {  # computed before #48 changed the identity's checks: a config's hash is its runs' directory
    'default': (dict(), '23612897b249073e'),
    'mlp fedprox': (
        dict(model='mlp', algorithm='fedprox', params={'mu': 0.01}, num_clients=20, clients_per_round=5, rounds=3),
        'a41e7f0a7cec98c5',
    ),
    'eval batch 1024': (dict(eval_batch_size=1024, device='cpu'), 'e7b22e7dda2a91e5'),
    'hidden 64': (dict(model='mlp', model_params={'hidden': [64]}), 'd9afc9fdc5049e19'),
    'dirichlet momentum': (
        dict(partition='dirichlet', partition_params={'alpha': 0.5}, momentum=0.9, seed=3, eval_local=True),
        '32daac8c43ecc2b5',
    ),
    'digits test_size': (
        dict(dataset='digits', model='mlp', test_size=100, augment='none', rounds=2, local_steps=5),
        'f3147b78d6a63695',
    ),
}


@pytest.mark.parametrize('case', KNOWN_HASHES)
def test_known_configs_keep_their_hashes(case):
    fields, digest = KNOWN_HASHES[case]
    if case == 'mlp fedprox':
        fields = {**fields, 'lr': 0.05}
    assert ExperimentConfig(**fields).hash == digest


TINY = dict(model='mlp', num_clients=4, clients_per_round=2, rounds=3, lr=0.05, batch_size=50, device='cpu')


def _stopped(tmp_path, **kw):
    "A tiny run stopped after round 1, as an interrupt leaves it."
    cfg = ExperimentConfig(**TINY, test_size=500, **kw)
    with pytest.raises(Stop):
        run(cfg, tmp_path, callbacks=[stop_after(1)])
    return cfg


def test_resuming_under_another_thread_count_is_refused_unless_allowed(tmp_path):
    import torch

    cfg, threads = _stopped(tmp_path), torch.get_num_threads()
    torch.set_num_threads(threads + 1)
    try:
        with pytest.raises(RuntimeError, match=f'torch_threads={threads} \\(this process: {threads + 1}\\).*allow_env'):
            run(cfg, tmp_path)
        res = run(cfg, tmp_path, allow_env_change=True)
    finally:
        torch.set_num_threads(threads)
    assert len(res.metrics) == 4
    segments = json.loads((res.run_dir / 'env.json').read_text())['segments']
    assert [s['torch_threads'] for s in segments] == [threads, threads + 1]


def test_a_resume_keeps_the_recorded_eval_batch_size(tmp_path):
    cfg = _stopped(tmp_path, eval_batch_size=100)
    with pytest.warns(UserWarning, match='evaluated 100 test images a pass; resumed so, not 256'):
        res = run(cfg.replace(eval_batch_size=256), tmp_path)
    assert res.cfg.eval_batch_size == 100 and len(res.metrics) == 4


def _copy(finished, tmp_path):
    cfg, res = finished
    shutil.copytree(res.run_dir, tmp_path / cfg.run_name)
    return cfg, res, tmp_path / cfg.run_name


def test_records_without_their_checkpoint_are_returned_as_unverified(finished, tmp_path):
    cfg, res, d = _copy(finished, tmp_path)
    (d / 'checkpoint.pt').unlink()
    m = pd.read_csv(d / 'metrics.csv')
    m.loc[m['round'] == 3, 'test_acc'] = 0.99  # forged, and the summary forged to agree
    m.to_csv(d / 'metrics.csv', index=False)
    (d / 'summary.json').write_text(json.dumps(runner.summarize_run(cfg, m)))
    with pytest.warns(UserWarning, match='nothing can check them against the trained model'):
        again = run(cfg, tmp_path)
    assert again.summary['unverified'] == runner.UNVERIFIED and again.summary['final_acc'] == 0.99
    assert json.loads((d / 'summary.json').read_text())['unverified'] == runner.UNVERIFIED


def test_an_edited_local_csv_without_its_checkpoint_is_not_trusted(tmp_path):
    cfg = ExperimentConfig(**{**TINY, 'rounds': 1}, test_size=200, eval_local=True)
    first = run(cfg, tmp_path)
    (first.run_dir / 'checkpoint.pt').unlink()
    local = pd.read_csv(first.run_dir / 'local.csv')
    local.loc[local['model'] == 'local', 'test_acc'] = 0.99
    local.to_csv(first.run_dir / 'local.csv', index=False)
    again = run(cfg, tmp_path)  # the records disagree: trained again, to the same rows
    assert 'unverified' not in again.summary
    pd.testing.assert_frame_equal(again.local, first.local, check_dtype=False)


CONFIG_EDITS = {  # case: (how config.json is edited, words of the refusal)
    'lr edited': (lambda c: c['config'].update(lr=0.5), ["config.json records lr=0.5, this run's config has lr=0.05"]),
    'rounds edited': (lambda c: c['config'].update(rounds=30), ['records rounds=30', 'has rounds=3']),
    'hash edited': (lambda c: c.update(hash='0' * 16), ["records hash='0000000000000000'"]),
    'a field deleted': (
        lambda c: c['config'].pop('rounds'),
        ["config.json lacks rounds, this run's config has rounds=3"],
    ),
    'a field no config has': (
        lambda c: c['config'].update(bogus=1),
        ['records bogus=1, which is no field of a config'],
    ),
    'hash deleted': (lambda c: c.pop('hash'), ["config.json lacks the hash of its config, this run's config hashes"]),
    'device edited': (lambda c: c['config'].update(device='cuda'), ["records device='cuda', this run's config has"]),
}


@pytest.mark.parametrize('case', CONFIG_EDITS)
def test_an_edited_config_json_of_a_finished_run_is_refused_naming_the_field(case, finished, tmp_path):
    cfg, res, d = _copy(finished, tmp_path)
    edit, words = CONFIG_EDITS[case]
    c = json.loads((d / 'config.json').read_text())
    edit(c)
    (d / 'config.json').write_text(json.dumps(c))
    with pytest.raises(ValueError) as e:
        run(cfg, tmp_path)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_a_missing_config_json_of_a_finished_run_is_written_again(finished, tmp_path):
    cfg, res, d = _copy(finished, tmp_path)
    (d / 'config.json').write_text('{not json')
    run(cfg, tmp_path)
    assert json.loads((d / 'config.json').read_text())['hash'] == cfg.hash


def test_a_finished_run_reads_without_write_access(finished, tmp_path, monkeypatch):
    cfg, res, d = _copy(finished, tmp_path)
    (d / 'metrics.csv').unlink()  # would be rewritten from the checkpoint if it could be
    monkeypatch.setattr(runner, '_locked', contextlib.contextmanager(lambda run_dir: (yield False)))
    monkeypatch.setattr(runner, 'atomic_write', lambda *a: pytest.fail('wrote to a read-only run'))
    monkeypatch.setattr(runner, 'write_json', lambda *a: pytest.fail('wrote to a read-only run'))
    again = run(cfg, tmp_path)
    pd.testing.assert_frame_equal(again.metrics, res.metrics)
    assert not (d / 'metrics.csv').exists()
    with pytest.raises(PermissionError, match='is not a finished run and this process cannot write there'):
        run(cfg.replace(rounds=4), tmp_path)


def test_a_folder_this_process_cannot_write_is_named_in_one_line(finished, tmp_path, monkeypatch):
    """A run folder whose `.lock` is writable and the folder not (as root, chmod binds nobody: os.access answers for
    it), and one where no file can be created: the folder is named, not a temporary file's name."""
    cfg, res, d = _copy(finished, tmp_path)
    access = os.access
    monkeypatch.setattr(os, 'access', lambda p, mode, **k: tmp_path not in Path(p).parents and access(p, mode, **k))
    pd.testing.assert_frame_equal(run(cfg, tmp_path).metrics, res.metrics)
    args = RUN + ['--num-clients', '4', '--clients-per-round', '2', '--test-size', '200', '--out', str(tmp_path)]
    code, err = fedrepro(args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert 'is not a finished run and this process cannot write there' in err, err
    monkeypatch.undo()
    monkeypatch.setattr(tempfile, 'mkstemp', lambda **k: (_ for _ in ()).throw(PermissionError(13, 'denied', 'tmp')))
    code, err = fedrepro(args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f'cannot write {tmp_path}' in err and 'this process may not create files in' in err, err


def test_a_runs_records_are_as_readable_as_any_new_file(finished):
    "Records are written through temporary files (0600), yet others read them as the umask lets them read any file."
    cfg, res = finished
    mask = os.umask(0o022)
    os.umask(mask)
    modes = {p.name: p.stat().st_mode & 0o777 for p in res.run_dir.iterdir() if p.name != '.lock'}
    assert modes == dict.fromkeys(modes, 0o666 & ~mask) and 'checkpoint.pt' in modes, modes


def test_a_full_disk_says_so_naming_the_run(tmp_path, monkeypatch):
    import torch
    from collections import namedtuple

    def full(*a, **k):
        raise RuntimeError(
            '[enforce fail at inline_container.cc:783] . PytorchStreamWriter failed writing file: '
            'unexpected pos 1152 vs 1046'
        )

    monkeypatch.setattr(torch, 'save', full)
    monkeypatch.setattr(shutil, 'disk_usage', lambda p: namedtuple('u', 'total used free')(10, 10, 0))
    cfg = ExperimentConfig(**{**TINY, 'rounds': 1}, test_size=200)
    code, err = fedrepro(
        RUN + ['--num-clients', '4', '--clients-per-round', '2', '--test-size', '200', '--out', str(tmp_path)]
    )
    assert code == 2 and 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
    assert 'no space left on the device of' in err and str(tmp_path) in err, err
    with pytest.raises(OSError, match='no space left on the device of .*run the same command'):
        run(cfg, tmp_path)


def test_ctrl_c_during_run_ends_in_one_line(tmp_path, monkeypatch):
    import fedrepro.cli as cli

    def interrupted(cfg, out, **kw):
        run(cfg, out)
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, 'run', interrupted)
    code, err = fedrepro(RUN + ['--test-size', '200', '--out', str(tmp_path)])
    assert code == 130 and len(err.strip().splitlines()) == 1, err
    assert 'fedrepro: interrupted:' in err and 'keeps its records to round 1; the same command resumes it' in err, err


def test_ctrl_c_while_the_command_loads_ends_in_one_line(tmp_path):
    """A Ctrl-C while `fedrepro` loads torch and the package ends in one line, as one later does, not a traceback. The
    Ctrl-C is Python's: a KeyboardInterrupt raised inside the import of `fedrepro.cli` (a `sitecustomize` sets it up),
    at the same place every time; a real signal sent after a sleep raced the import and sometimes came after it."""
    (tmp_path / 'sitecustomize.py').write_text(
        'import sys\n\n\n'
        'class CtrlC:\n'
        '    def find_spec(self, name, path=None, target=None):\n'
        "        if name == 'fedrepro.cli':\n"
        '            raise KeyboardInterrupt\n\n\n'
        'sys.meta_path.insert(0, CtrlC())\n'
    )
    command = shutil.which('fedrepro', path=os.path.dirname(sys.executable))
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(tmp_path), os.environ.get('PYTHONPATH', '')])}
    p = subprocess.run([command, 'list'], capture_output=True, text=True, env=env, timeout=120)
    err = p.stderr
    assert p.returncode == 130 and 'Traceback' not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith('fedrepro: interrupted'), err


def test_the_commands_own_warnings_are_one_line_each(monkeypatch):
    """`fedrepro` shows its own warnings (records unverified, a killed job's processes ended, a run waited for) in one
    line each, as its errors, not Python's two with the source of the call; another library's as Python shows them."""
    from fedrepro import launch

    monkeypatch.setattr(warnings, 'formatwarning', warnings.formatwarning)  # as it was after this test
    with contextlib.redirect_stdout(io.StringIO()):
        launch.main(['list'])
    assert warnings.formatwarning is launch.one_line_warning
    mine = warnings.formatwarning(UserWarning('its records\nare unverified'), UserWarning, runner.__file__, 1)
    assert mine == 'fedrepro: warning: its records are unverified\n'
    theirs = warnings.formatwarning(UserWarning('x'), UserWarning, pd.__file__, 1)
    assert theirs.startswith(pd.__file__) and 'UserWarning: x' in theirs


def test_ctrl_c_during_reproduce_ends_in_one_line(tmp_path, monkeypatch):
    import fedrepro.cli as cli

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, 'reproduce', interrupted)
    code, err = fedrepro(['reproduce', 'quickstart', '--scale', 'smoke', '--out', str(tmp_path)])
    assert code == 130 and len(err.strip().splitlines()) == 1, err
    assert 'quickstart stopped: its previous results' in err and 'quickstart.failed.ipynb' in err, err


# ---- concurrent jobs into one --out


def test_a_second_reproduce_of_a_running_job_is_refused_in_one_line(tmp_path):
    from fedrepro.jobs import job_lock

    with job_lock(tmp_path, 'quickstart'):
        code, err = fedrepro(['reproduce', 'quickstart', '--scale', 'smoke', '--out', str(tmp_path)])
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f'quickstart is already being reproduced into {tmp_path} by process {os.getpid()}' in err, err
    assert list(tmp_path.iterdir()) == []  # the lock file goes with its holder


def test_a_ray_cluster_that_does_not_answer_is_refused_in_one_line(tmp_path, monkeypatch):
    "A RAY_ADDRESS where nothing listens is refused at once, naming it, where Ray itself would retry for minutes."
    ray = pytest.importorskip('ray')
    monkeypatch.setattr(ray, 'is_initialized', lambda: False)  # as in a fresh process, whatever ran here before
    with socket.socket() as s:  # bound, never listening
        s.bind(('127.0.0.1', 0))
        address = f'127.0.0.1:{s.getsockname()[1]}'
        monkeypatch.setenv('RAY_ADDRESS', address)
        with pytest.raises(ValueError, match=f"Ray address='{address}' .*answering within .*correct RAY_ADDRESS"):
            run_many([ExperimentConfig(model='mlp', rounds=1)], tmp_path / 'runs', backend='ray')


def test_a_ray_address_that_answers_but_is_no_ray_cluster_is_refused_in_one_line(tmp_path, monkeypatch):
    "Something listens at RAY_ADDRESS, but not Ray: Ray gives up (about 20 s), and so does fedrepro, in one line."
    ray = pytest.importorskip('ray')
    monkeypatch.setattr(ray, 'is_initialized', lambda: False)

    def init(address=None, **kw):  # what ray.init raises once its retries are spent
        raise ConnectionError(f"Failed to connect to Ray cluster at {os.environ['RAY_ADDRESS']}")

    monkeypatch.setattr(ray, 'init', init)
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        s.listen()
        address = f'127.0.0.1:{s.getsockname()[1]}'
        monkeypatch.setenv('RAY_ADDRESS', address)
        with pytest.raises(ValueError, match=f"Ray address='{address}' .*something answers there, but Ray could not"):
            run_many([ExperimentConfig(model='mlp', rounds=1)], tmp_path / 'runs', backend='ray')


def test_what_a_killed_job_left_is_put_back_and_its_processes_ended(tmp_path):
    from fedrepro.jobs import _recover, job_lock

    (tmp_path / 'job.csv').write_text('half written by the killed job')
    (tmp_path / '.job.csv.999.previous').write_text('good')
    (tmp_path / '.job.999.running.ipynb').write_text('where it stopped')
    orphan = subprocess.Popen(['sleep', '60'], cwd=tmp_path, start_new_session=True)  # a killed job's kernel
    sockets = Path(tempfile.mkdtemp(prefix='fedrepro-'))  # and its sockets, outside `out`
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sockets / 'kernel-1'))
    (tmp_path / '.job.lock').write_text(f'999 {orphan.pid} {sockets}\n')
    try:
        with pytest.warns(UserWarning, match='ended 1 processes that a killed job of job left running'):
            with job_lock(tmp_path, 'job'):
                pass
        assert orphan.wait(timeout=5) == -9
        assert not sockets.exists()
    finally:
        orphan.kill()
        shutil.rmtree(sockets, ignore_errors=True)
    _recover(tmp_path, 'job')  # what all_or_nothing does first
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        'job.csv': 'good',
        'job.failed.ipynb': 'where it stopped',
    }


def test_a_jobs_kernel_sockets_are_not_in_its_out_folder(tmp_path):
    from fedrepro.jobs import quiet_kernel

    if os.name != 'posix':
        pytest.skip('local sockets are POSIX')
    km = quiet_kernel(tmp_path / 'sockets')['kernel_manager_class']()
    assert km.transport == 'ipc' and km.ip == str(tmp_path / 'sockets' / 'kernel')


# ---- damaged evidence: the report and `fedrepro book --results` refuse it in one line


def _cut(k):
    def cut(f):
        f.write_text(''.join(f.read_text().splitlines(True)[:-k]))

    return cut


def _replace(old, new):
    return lambda f: f.write_text(f.read_text().replace(old, new, 1))


EVIDENCE = {  # case: (artefact, file, damage, words of the refusal)
    'per-seed file cut by a row': ('fedssd_table2', '_seeds', _cut(1), ['row 999 (line 1000)', 'ends before']),
    'per-seed file cut by ten rows': ('fedreg_table1', '_seeds', _cut(10), ['row 650', 'EMNIST seed 4 ends before']),
    'per-seed file cut by thirty rows': ('fedgc_table1', '_seeds', _cut(30), ['row 1790', 'HWDigits-40 seed 4 lacks']),
    'per-seed file cut inside a row': (
        'fedreg_table1',
        '_seeds',
        lambda f: f.write_text(f.read_text().split(', over 10× the initial')[0]),  # inside a quoted detail
        ['row 630 (line 631): the file ends inside this row'],
    ),
    'a seed missing from a declared cell': (
        'fedreg_figure2',
        '_seeds',
        lambda f: pd.read_csv(f).drop(index=3).to_csv(f, index=False),
        ['declares [0, 1, 2, 3, 4]'],
    ),
    'a malformed seeds cell': ('fedreg_table1', '', _replace('0,1,2,3,4', '0;1'), ["row 1 (line 2): seeds is not"]),
    'a value not a number': ('fedreg_figure2', '_seeds', lambda f: _bad_cell(f, 'value', 'abc'), ['value is not']),
    'a value NaN': ('fedreg_table1', '_seeds', lambda f: _bad_cell(f, 'value', 'nan'), ['value is not a number or']),
    'a healthy value empty where its metric is always defined': (  # FedGC's ratios may be: a baseline never got there
        'fedreg_figure2',
        '_seeds',
        lambda f: _bad_cell(f, 'value', ''),
        ['row 3 (line 4): value is empty in a healthy cell of a metric that declares no', "'mean loss increase'"],
    ),
    'a seed not an integer': ('fedreg_figure2', '_seeds', lambda f: _bad_cell(f, 'seed', '1.5'), ['seed is not']),
    'an unknown health': ('fedreg_figure2', '_seeds', lambda f: _bad_cell(f, 'health', 'fine'), ['health is not']),
    'a row twice': (
        'fedreg_figure2',
        '_seeds',
        lambda f: f.write_text(f.read_text() + f.read_text().splitlines(True)[1]),
        ['a cell a row above holds already'],
    ),
    'a column missing': (
        'fedreg_figure2',
        '',
        lambda f: pd.read_csv(f).drop(columns='scale').to_csv(f, index=False),
        ['its header is'],
    ),
    'binary garbage': ('fedreg_figure2', '_seeds', lambda f: f.write_bytes(os.urandom(400)), ['not a text CSV']),
    'a table without its per-seed file': (
        'fedreg_figure2',
        '_seeds',
        lambda f: f.unlink(),
        ['has no per-seed file fedreg_figure2_seeds.csv beside it'],
    ),
}


def _bad_cell(f, column, value):
    rows = pd.read_csv(f, dtype=str, keep_default_na=False)
    rows.loc[2, column] = value
    rows.to_csv(f, index=False)


@pytest.mark.parametrize('case', EVIDENCE)
def test_damaged_evidence_is_refused_naming_file_and_row(case, tmp_path):
    from fedrepro.repro import check_artefact, committed_results

    name, which, damage, words = EVIDENCE[case]
    for s in ('', '_seeds'):
        shutil.copy(committed_results() / f'{name}{s}.csv', tmp_path)
    damage(tmp_path / f'{name}{which}.csv')
    with pytest.raises(ValueError) as e:
        check_artefact(tmp_path, name)
    msg = str(e.value)
    assert '\n' not in msg and str(tmp_path / name) in msg and all(w in msg for w in words), msg


def test_every_committed_csv_passes_the_reports_checks():
    from fedrepro.repro import artefact_sources

    sources = artefact_sources()
    assert set(sources['source']) == {'committed mini run'}


def test_book_results_refuses_damaged_evidence_before_it_runs(tmp_path):
    from fedrepro.repro import committed_results

    for s in ('', '_seeds'):
        shutil.copy(committed_results() / f'fedreg_figure2{s}.csv', tmp_path)
    _cut(3)(tmp_path / 'fedreg_figure2_seeds.csv')
    code, err = fedrepro(['book', '--results', str(tmp_path)])
    assert code == 2 and len(err.strip().splitlines()) == 1 and 'fedreg_figure2_seeds.csv is damaged' in err, err


def test_a_per_seed_file_without_its_table_is_refused(tmp_path):
    "Without its table, a per-seed file would be passed over and the committed run judged in its place, without a word."
    from fedrepro.repro import artefact_sources, committed_results

    shutil.copy(committed_results() / 'fedreg_figure2_seeds.csv', tmp_path)
    with pytest.raises(ValueError) as e:
        artefact_sources(tmp_path)
    msg = str(e.value)
    assert (
        '\n' not in msg and 'fedreg_figure2_seeds.csv is damaged: it has no table fedreg_figure2.csv beside it' in msg
    )


@pytest.mark.parametrize('landing', ['{}', '{"cells": [', '{"cells": 3}'])
def test_readme_refuses_a_damaged_landing_notebook_in_one_line_and_keeps_the_readme(landing, tmp_path, monkeypatch):
    root = Path(__file__).resolve().parents[1]
    for name in ('settings.ini', '_quarto.yml'):
        shutil.copy(root / name, tmp_path / name)
    (tmp_path / 'nbs').mkdir()
    (tmp_path / 'nbs' / 'index.ipynb').write_text(landing)
    (tmp_path / 'README.md').write_text('kept')
    monkeypatch.chdir(tmp_path)
    code, err = fedrepro(['readme'])
    assert code == 2 and len(err.strip().splitlines()) == 1 and 'index.ipynb' in err and 'a Jupyter notebook' in err
    assert (tmp_path / 'README.md').read_text() == 'kept'
