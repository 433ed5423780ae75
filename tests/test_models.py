"The models of `fedrepro.models`: sizes from the papers, Fixup's zero start, training, seeding, MOON's head."

import pytest
import torch
from torch import nn
from fedrepro.core import MODELS
from fedrepro.models import build_model, with_projection, n_params, FeatureClassifier


@pytest.mark.parametrize(
    'name, shape, classes, options, expected',
    [
        ('resnet9', (3, 32, 32), 10, {}, 6_568_673),  # fedgc.md §5.2
        ('resnet9', (3, 32, 32), 100, {}, 6_614_843),
        ('fedavg_cnn', (1, 28, 28), 10, {}, 1_663_370),  # fedimp.md §5, §2.7
        ('fedavg_cnn', (3, 32, 32), 10, {}, 2_156_490),
        ('cnn5', (1, 28, 28), 10, {}, 228_010),  # fedreg.md §5
        ('mlp', (1, 28, 28), 10, {}, 159_010),  # fedimp.md §2.7 profile P
        ('mlp', (1, 28, 28), 10, {'hidden': (200, 200)}, 199_210),  # profile C
        ('mlp', (3, 32, 32), 10, {'hidden': (512,)}, 1_578_506),  # fedgg.md §5 SVHN
        ('lenet', (3, 32, 32), 10, {}, 62_006),  # fedgg.md §5, fedssd.md §6, fedimp.md §2.7
        ('hwdigits_cnn', (3, 32, 32), 10, {}, 2_203_670),  # fedgc.md §5.1
        ('hwdigits_cnn', (3, 32, 32), 10, {'padding': 0}, 925_718),
        ('hwdigits_cnn', (3, 32, 32), 10, {'hidden': (512,)}, 2_156_490),
        ('hwdigits_cnn', (3, 32, 32), 10, {'channels': (8, 16)}, 580_934),  # a quarter width, for small scales
    ],
)
def test_parameter_counts(name, shape, classes, options, expected):
    assert n_params(build_model(name, shape, classes, **options)) == expected


def test_every_model_is_a_feature_classifier():
    x = torch.randn(2, 3, 32, 32)
    for name in ('resnet9', 'hwdigits_cnn', 'fedavg_cnn', 'lenet', 'mlp', 'cnn5'):
        m = build_model(name, (3, 32, 32), 10)
        assert isinstance(m, FeatureClassifier)
        torch.testing.assert_close(m(x), m.classifier(m.features(x)))


def _resnet9_sgd_step(model, x, y, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    opt.zero_grad()
    nn.functional.cross_entropy(model(x), y).backward()
    opt.step()


def test_fixup_starts_at_zero_and_learns():
    torch.manual_seed(0)
    m = build_model('resnet9', (3, 32, 32), 10, seed=1)
    for blk in (m.features[1].blocks[0], m.features[3].blocks[0]):
        assert torch.all(blk.conv2.weight == 0) and torch.any(blk.conv1.weight != 0)
    assert torch.all(m.classifier.linear.weight == 0) and torch.all(m.classifier.linear.bias == 0)
    x, y = torch.randn(3, 3, 32, 32), torch.tensor([0, 1, 2])
    out = m(x).detach()
    torch.testing.assert_close(out, out[:1].expand_as(out))  # same output for every input
    _resnet9_sgd_step(m, x, y)
    out = m(x).detach()
    assert not torch.allclose(out[0], out[1]) and not torch.allclose(out[1], out[2])


@pytest.mark.parametrize(
    'name, shape, options',
    [
        ('resnet9', (3, 32, 32), {}),
        ('hwdigits_cnn', (3, 32, 32), {}),
        ('fedavg_cnn', (1, 28, 28), {}),
        ('lenet', (3, 32, 32), {}),
        ('lenet', (3, 32, 32), {'projection_dim': 256}),
        ('mlp', (1, 28, 28), {'hidden': (200, 200)}),
        ('mlp', (3, 32, 32), {'hidden': (512,)}),
        ('cnn5', (1, 28, 28), {}),
    ],
)
def test_a_few_sgd_steps_reduce_the_loss(name, shape, options):
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(4, *shape, generator=g), torch.tensor([0, 1, 2, 3])  # image-like inputs in [0, 1]
    m = build_model(name, shape, 10, seed=0, **options)
    opt = torch.optim.SGD(m.parameters(), lr=0.02)
    loss = lambda: nn.functional.cross_entropy(m(x), y)
    with torch.no_grad():
        before = loss().item()
    for _ in range(5):
        opt.zero_grad()
        loss().backward()
        opt.step()
    with torch.no_grad():
        after = loss().item()
    assert after < before - 1e-3, (before, after)


@pytest.mark.parametrize(
    'name, shape, layer',
    [
        ('resnet9', (3, 32, 32), 'features.0.conv.weight'),  # a non-zero Fixup layer (conv2/classifier are zeros)
        ('hwdigits_cnn', (3, 32, 32), 'features.0.weight'),
        ('fedavg_cnn', (1, 28, 28), 'features.0.weight'),
        ('lenet', (3, 32, 32), 'classifier.weight'),
        ('mlp', (1, 28, 28), 'features.1.weight'),
    ],
)
def test_seeding(name, shape, layer):
    a, b, c = (build_model(name, shape, 10, seed=s).state_dict() for s in (7, 7, 8))
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert not torch.equal(a[layer], c[layer])
    if name == 'resnet9':  # the Fixup zeros coincide across seeds
        assert torch.equal(a['classifier.linear.weight'], c['classifier.linear.weight'])


def test_projection_head():
    x = torch.randn(2, 3, 32, 32)
    for name, classes, d in (('lenet', 10, 84), ('resnet9', 100, 512)):
        m = build_model(name, (3, 32, 32), classes, seed=0, projection_dim=256)
        assert m.features(x).shape == (2, 256) and m(x).shape == (2, classes)
        assert m.features[1][0].in_features == d and m.classifier.in_features == 256
    a, b, c = (build_model('lenet', (3, 32, 32), 10, seed=s, projection_dim=256).state_dict() for s in (3, 3, 4))
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert not torch.equal(a['features.1.0.weight'], c['features.1.0.weight'])
    plain = build_model('lenet', (3, 32, 32), 10, seed=3).features.state_dict()
    for k, v in plain.items():
        assert torch.equal(a['features.0.' + k], v), k  # same backbone
    assert with_projection(build_model('mlp', (1, 28, 28), 10), out_dim=64).features(
        torch.zeros(1, 1, 28, 28)
    ).shape == (1, 64)


def test_options_and_errors():
    with pytest.raises(ValueError, match='hidden'):
        build_model('mlp', (1, 28, 28), 10, hidden=())
    with pytest.raises(ValueError, match='input_shape'):
        build_model('lenet', (3, 8, 8), 10)
    assert {'resnet9', 'hwdigits_cnn', 'fedavg_cnn', 'lenet', 'mlp', 'cnn5'} <= set(MODELS)
