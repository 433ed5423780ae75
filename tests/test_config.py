"""Invalid configs fail at creation with the field, the value and what is allowed; hashes stay stable; registries fill
themselves."""

import subprocess
import sys
import textwrap
import pytest
from fedrepro.config import ExperimentConfig


@pytest.mark.parametrize(
    'kw, message',
    [
        (dict(dataset='imagenet'), "dataset='imagenet' is not allowed: choose one of ['cifar10'"),
        (dict(lr=-0.1), 'lr=-0.1 is not allowed: a finite number > 0'),
        (dict(lr=float('nan')), 'lr=nan'),
        (
            dict(partition='classes', partition_params={'classes_per_client': 11}),
            'classes_per_client=11 is not allowed: an integer from 1 to the 10 classes of mnist5k',
        ),
        (dict(rounds=0), 'rounds=0 is not allowed: an integer >= 1'),
        (dict(rounds=2.5), 'rounds=2.5'),
        (dict(num_clients=4, clients_per_round=5), 'clients_per_round=5 is not allowed: at most num_clients=4'),
        (dict(model='resnet1000'), "model='resnet1000'"),
        (dict(algorithm='fedmagic'), "algorithm='fedmagic'"),
        (dict(weighting='median'), "weighting='median' is not allowed: 'samples' or 'uniform'"),
        (dict(device='gpu7'), "device='gpu7'"),
        (dict(params={'mu': 0.1}), "params['mu']=0.1 is not allowed: a hyperparameter of fedavg"),
        (dict(local_steps=0), 'local_steps=0'),
        (dict(momentum=1.0), 'momentum=1.0 is not allowed: a finite number in [0, 1)'),
        (dict(momentum=-0.5), 'momentum=-0.5'),
        (dict(momentum=True), 'momentum=True'),
        (dict(weight_decay=-1e-4), 'weight_decay=-0.0001 is not allowed: a finite number >= 0'),
        (dict(weight_decay=float('nan')), 'weight_decay=nan'),
    ],
)
def test_invalid_configs_raise_clear_errors(kw, message):
    with pytest.raises(ValueError) as e:
        ExperimentConfig(**kw)
    assert message in str(e.value)


def test_configs_are_hashable_data():
    a, b = ExperimentConfig(rounds=3), ExperimentConfig(rounds=3)
    assert a == b and hash(a) == hash(b) and len({a, b, a.replace(seed=1)}) == 2
    assert ExperimentConfig.from_dict(a.to_dict()) == a
    assert a.hash != a.replace(partition='dirichlet', partition_params={'alpha': 0.1}).hash


def test_hash_unchanged_by_fields_left_at_their_defaults():
    "Digests computed before momentum and weight_decay existed: run directories named by them must keep resuming."
    old = ExperimentConfig(
        partition='dirichlet',
        partition_params={'alpha': 0.3},
        model='mlp',
        model_params={'hidden': [200, 200]},
        algorithm='fedprox',
        params={'mu': 0.1},
        num_clients=20,
        clients_per_round=5,
        rounds=7,
        local_steps=12,
        batch_size=32,
        lr=0.03,
        weighting='uniform',
        seed=4,
    )
    assert ExperimentConfig().hash == '23612897b249073e'
    assert old.hash == '5707a42ff25821b8' == old.replace(momentum=0, weight_decay=0.0).hash
    assert (
        old.replace(params={}).hash == '6ed9ca7592d2fda3' == old.replace(params={'mu': 0.01}).hash
    )  # a default written out hashes as left out
    hashes = {
        old.replace(momentum=0.9).hash,
        old.replace(weight_decay=5e-4).hash,
        old.replace(momentum=0.9, weight_decay=5e-4).hash,
    }
    assert len(hashes) == 3 and old.hash not in hashes


def fresh(code: str) -> list:
    "The words `code` prints, run in a new Python process."
    return subprocess.run(
        [sys.executable, '-c', textwrap.dedent(code)], capture_output=True, text=True, check=True
    ).stdout.split()


def test_registries_import_the_package_when_first_consulted(tmp_path):
    (tmp_path / 'zz_paper.py').write_text(
        textwrap.dedent("""
        from fedrepro.core import ALGORITHMS, PAPERS
        from fedrepro.engine import Algorithm
        PAPERS.register('zz', 'a paper')
        @ALGORITHMS.register('zzavg')
        class ZZAvg(Algorithm): name = 'zzavg'
        KNOWN = 'fedavg' in ALGORITHMS     # consulted while discovery imports this module""")
    )
    out = fresh(f"""
        import sys, fedrepro
        import fedrepro.config
        print('fedrepro.fedreg' in sys.modules)
        from fedrepro.config import ExperimentConfig
        print(ExperimentConfig(algorithm='fedreg').algorithm, 'fedrepro.fedreg' in sys.modules)
        fedrepro.__path__.append({str(tmp_path)!r})
        # a module added to the package after the first discovery
        import fedrepro.core as core; core._discovered = False
        from fedrepro.core import PAPERS
        from fedrepro.algorithms import FedReg, FedProx, MOON, ZZAvg
        print('zz' in PAPERS, FedReg.__module__, FedProx.__module__, MOON.__module__, ZZAvg.__module__,
              sys.modules['fedrepro.zz_paper'].KNOWN)
        import fedrepro.algorithms as algorithms
        print(hasattr(algorithms, 'FedMagic'))""")
    assert out == [
        'False',
        'fedreg',
        'True',
        'True',
        'fedrepro.fedreg',
        'fedrepro.baselines',
        'fedrepro.distill',
        'fedrepro.zz_paper',
        'True',
        'False',
    ]
