import os
import pytest

os.environ.setdefault('PYTHONHASHSEED', '0')


@pytest.fixture
def cpu_cfg():
    "A small, fast config factory on the CPU."
    from fedrepro.config import ExperimentConfig
    def make(**kw):
        base = dict(model='mlp', num_clients=10, clients_per_round=5, rounds=3, lr=0.05, batch_size=20, device='cpu')
        return ExperimentConfig(**{**base, **kw})
    return make
