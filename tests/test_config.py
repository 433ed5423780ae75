"Invalid configs fail at creation with the field, the value and what is allowed."
import pytest
from fedrepro.config import ExperimentConfig


@pytest.mark.parametrize('kw, message', [
    (dict(dataset='imagenet'), "dataset='imagenet' is not allowed: choose one of ['cifar10'"),
    (dict(lr=-0.1), 'lr=-0.1 is not allowed: a finite number > 0'),
    (dict(lr=float('nan')), 'lr=nan'),
    (dict(partition='classes', partition_params={'classes_per_client': 11}), 'classes_per_client=11 is not allowed: an integer from 1 to the 10 classes of mnist5k'),
    (dict(rounds=0), 'rounds=0 is not allowed: an integer >= 1'),
    (dict(rounds=2.5), 'rounds=2.5'),
    (dict(num_clients=4, clients_per_round=5), 'clients_per_round=5 is not allowed: at most num_clients=4'),
    (dict(model='resnet1000'), "model='resnet1000'"),
    (dict(algorithm='fedmagic'), "algorithm='fedmagic'"),
    (dict(weighting='median'), "weighting='median' is not allowed: 'samples' or 'uniform'"),
    (dict(device='gpu7'), "device='gpu7'"),
    (dict(params={'mu': 0.1}), "params['mu']=0.1 is not allowed: a hyperparameter of fedavg"),
    (dict(local_steps=0), 'local_steps=0'),
])
def test_invalid_configs_raise_clear_errors(kw, message):
    with pytest.raises(ValueError) as e:
        ExperimentConfig(**kw)
    assert message in str(e.value)


def test_configs_are_hashable_data():
    a, b = ExperimentConfig(rounds=3), ExperimentConfig(rounds=3)
    assert a == b and hash(a) == hash(b) and len({a, b, a.replace(seed=1)}) == 2
    assert ExperimentConfig.from_dict(a.to_dict()) == a
    assert a.hash != a.replace(partition='dirichlet', partition_params={'alpha': 0.1}).hash
