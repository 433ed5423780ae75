"""The data contract across modules: loaders → partitions → FedData → engine, with auxiliary sets, per-client test
splits and augmentation."""

import numpy as np
import torch
import pytest
from fedrepro.core import DATASETS
from fedrepro.config import ExperimentConfig
from fedrepro.data import DatasetSpec, RawData, load_federated
from fedrepro.engine import Federation
from fedrepro.runner import run


def _tiny_rgb(data_root=None, download=False):
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (300, 3, 32, 32), generator=g, dtype=torch.uint8)
    y = torch.arange(300) % 10
    return RawData(x[:240], y[:240], x[240:], y[240:], groups_train={'domain': np.arange(240) % 4})


DATASETS.register(
    'tiny-rgb-test',
    DatasetSpec(
        'tiny-rgb-test',
        10,
        (3, 32, 32),
        _tiny_rgb,
        'random test images',
        (0.5, 0.5, 0.5),
        (0.25, 0.25, 0.25),
        'crop_flip',
        embedded=True,
    ),
)


def test_aux_set_is_taken_out_of_the_clients_or_the_test_set_or_shared_with_the_clients():
    d = load_federated('mnist5k', 'iid', 8, seed=1, aux_per_class=20)
    assert len(d.y_aux) == 200 and torch.bincount(d.y_aux).tolist() == [20] * 10
    assert d.client_sizes().sum() == 4000 - 200 and len(d.y_test) == 1000
    clients = set(torch.cat(d.clients).tolist())
    aux_rows = {bytes(r) for r in d.x_aux.flatten(1).numpy()}
    in_clients = sum(bytes(r) in aux_rows for r in d.x_train[sorted(clients)].flatten(1).numpy())
    assert in_clients == 0
    t = load_federated('mnist5k', 'iid', 8, seed=1, aux_per_class=20, aux_from='test')
    assert t.client_sizes().sum() == 4000 and len(t.y_test) == 800 and len(t.y_aux) == 200
    o, plain = (
        load_federated('mnist5k', 'dirichlet', 8, seed=1, aux_per_class=k, aux_from='train_overlap') for k in (20, 0)
    )
    assert (
        torch.equal(o.x_aux, d.x_aux)
        and len(o.y_test) == 1000
        and all(torch.equal(a, b) for a, b in zip(o.clients, plain.clients))
    )


def test_uint8_data_are_normalised_and_augmented_per_batch():
    d = load_federated('tiny-rgb-test', 'iid', 4, seed=0)
    x = d.x_train[:16]
    plain = d.prepare(x)
    assert torch.allclose(plain, (x.float() / 255 - 0.5) / 0.25)
    aug = d.prepare(x, train=True, generator=torch.Generator().manual_seed(0))
    assert aug.shape == plain.shape and not torch.equal(aug, plain)


def test_augmented_training_is_reproducible():
    cfg = ExperimentConfig(
        dataset='tiny-rgb-test', model='mlp', num_clients=4, clients_per_round=2, batch_size=16, lr=0.05, device='cpu'
    )
    a, b = Federation(cfg), Federation(cfg)
    a.round(1), b.round(1)
    assert torch.equal(a.algo.x, b.algo.x)
    c = Federation(cfg.replace(seed=1))
    c.round(1)
    assert not torch.equal(a.algo.x, c.algo.x)


def test_domain_partition_uses_the_loaders_groups():
    d = load_federated('tiny-rgb-test', 'domain', 4, seed=0)
    for cid, idx in enumerate(d.clients):
        assert (
            set(d.groups['domain'][idx.numpy()].tolist()) == {cid % 4}
            or len(set(d.groups['domain'][idx.numpy()].tolist())) == 1
        )


def test_per_client_test_split_becomes_the_test_set():
    d = load_federated('mnist5k', 'powerlaw', 50, seed=0, classes_per_client=2)
    assert d.client_test is not None and len(d.client_test) == 50
    assert sum(len(t) for t in d.client_test) == len(d.y_test)
    train_rows = set(torch.cat(d.clients).tolist())
    assert len(train_rows) == d.client_sizes().sum()


def test_run_records_with_partition_params(tmp_path):
    cfg = ExperimentConfig(
        model='mlp',
        partition='shards',
        partition_params={'shards_per_client': 2},
        num_clients=20,
        clients_per_round=5,
        rounds=1,
        device='cpu',
    )
    res = run(cfg, tmp_path)
    assert res.summary['rounds'] == 1
    assert cfg.hash != cfg.replace(partition_params={'shards_per_client': 3}).hash


SCHEMES = [  # every partition scheme, through the command line, with the parameters it needs
    ('mnist5k', 'iid', 10, []),
    ('mnist5k', 'powerlaw', 50, ['--classes-per-client', '1', '--set', 'min_per_class=1', '--set', 'total=2000']),
    ('mnist5k', 'fixed', 100, ['--classes-per-client', '1', '--set', 'samples_per_client=24']),
    ('mnist5k', 'classes', 20, ['--classes-per-client', '2']),
    ('mnist5k', 'dirichlet', 10, ['--alpha', '0.3']),
    ('mnist5k', 'one_class', 10, []),
    ('mnist5k', 'shards', 20, ['--set', 'shards_per_client=2']),
    ('digits-domains', 'domain', 4, []),
    ('digits-domains', 'domain_class', 40, []),
    ('digits-domains', 'group', 4, ['--set', 'key=domain']),
]


def test_every_scheme_is_reachable_from_the_command_line(tmp_path, capsys):
    from fedrepro.cli import main
    from fedrepro.core import PARTITIONS

    for dataset, scheme, n, extra in SCHEMES:
        main(
            [
                'run',
                '--dataset',
                dataset,
                '--partition',
                scheme,
                '--num-clients',
                str(n),
                '--clients-per-round',
                '2',
                '--model',
                'mlp',
                '--rounds',
                '1',
                '--device',
                'cpu',
                '--no-progress',
                '--out',
                str(tmp_path),
                *extra,
            ]
        )
        out = capsys.readouterr().out
        assert '"rounds": 1' in out, (scheme, out)
    assert len([d for d in tmp_path.iterdir() if d.is_dir()]) == len(SCHEMES)
    assert sorted(s for _, s, _, _ in SCHEMES) == sorted(PARTITIONS)  # none left out


def test_batchnorm_buffers_are_aggregated_and_counted():
    "A BatchNorm model in a FedAvg round: running statistics are averaged like parameters and sent both ways."
    from fedrepro.engine import weighted_mean
    from fedrepro.core import derive_seed

    cfg = ExperimentConfig(
        dataset='tiny-rgb-test',
        model='vgg16',
        model_params={'batch_norm': True},
        num_clients=4,
        clients_per_round=2,
        batch_size=30,
        lr=0.01,
        weighting='uniform',
        device='cpu',
    )
    fed = Federation(cfg)
    assert fed.fm.num_buffers > 0
    x0, ups = fed.algo.x.clone(), []
    from fedrepro.engine import sample_clients

    for c in sample_clients(4, 2, cfg.seed, 1).tolist():
        torch.manual_seed(
            derive_seed(cfg.seed, 1, c, 'torch')
        )  # as Federation.round seeds each client (VGG has dropout)
        up, _ = fed.algo.client_update(fed.context(c, 1), fed.algo.broadcast(), None)
        ups.append(up['x'])
    stats = slice(fed.fm.num_params, fed.fm.numel)
    assert not torch.equal(ups[0][stats], x0[stats]) and not torch.equal(ups[0][stats], ups[1][stats])
    r = Federation(cfg).round(1)
    assert r['up_params'] == 2 * (fed.fm.num_params + fed.fm.num_buffers)
    fed2 = Federation(cfg)
    fed2.round(1)
    assert torch.allclose(fed2.algo.x[stats], weighted_mean(ups)[stats], atol=1e-6)


def test_model_params_reach_the_model(tmp_path):
    cfg = ExperimentConfig(
        model='mlp', model_params={'hidden': [64, 32]}, num_clients=4, clients_per_round=2, rounds=1, device='cpu'
    )
    fed = Federation(cfg)
    assert fed.fm.num_params == 784 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10
    moon = Federation(cfg.replace(model_params={'projection_dim': 16}))
    assert moon.fm.model.features(torch.zeros(2, 1, 28, 28)).shape == (2, 16)
    with pytest.raises(ValueError, match="model_params\\['depth'\\]"):
        cfg.replace(model_params={'depth': 3})
