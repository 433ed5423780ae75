"Large models (nbs/03a_large_models.ipynb): sizes, shapes, norms, trainability, ViT weights, BN buffers in FlatModel."

import os
import urllib.request
import pytest
import torch
import torch.nn.functional as F
from torch import nn

import fedrepro.large_models  # noqa: F401 (registers the large models)
from fedrepro.core import FlatModel
from fedrepro.models import build_model

slow = pytest.mark.skipif(not os.environ.get('FEDREPRO_SLOW'), reason='slow: set FEDREPRO_SLOW=1')


def n_params(m):
    return sum(p.numel() for p in m.parameters())


def loss_goes_down(model, x, y, lr, steps=2):
    "SGD steps in train mode; losses measured with the same dropout masks (seed reset before each forward)."
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)

    def loss():
        torch.manual_seed(0)
        return F.cross_entropy(model(x), y)

    first = None
    for _ in range(steps):
        l = loss()
        first = l.item() if first is None else first
        opt.zero_grad()
        l.backward()
        opt.step()
    last = loss().item()
    assert last < first, (first, last)


# ---- parameter counts -------------------------------------------------------------------------------------------


def test_resnet50_size_and_shapes():
    m = build_model('resnet50', (3, 32, 32), 100)
    # torchvision ResNet-50 = 25,557,032; -7x7 stem 64*3*49, +3x3 stem 64*3*9, -fc 2048*1000+1000, +fc 2048*100+100
    assert n_params(m) == 23_705_252
    assert isinstance(m.features.maxpool, nn.Identity) and m.features.conv1.kernel_size == (3, 3)
    assert m.features.conv1.stride == (1, 1)
    with torch.inference_mode():
        x = torch.randn(2, 3, 32, 32)
        assert m.features(x).shape == (2, 2048)
        assert m(x).shape == (2, 100)
        assert build_model('resnet50', (3, 64, 64), 200)(torch.randn(1, 3, 64, 64)).shape == (1, 200)


def test_vgg16_size_norms_and_head():
    plain, bn = build_model('vgg16', (3, 32, 32), 100), build_model('vgg16', (3, 32, 32), 100, batch_norm=True)
    assert n_params(plain) == 15_291_300  # fedgg.md §5
    assert n_params(bn) == 15_291_300 + 2 * (2 * 64 + 2 * 128 + 3 * 256 + 6 * 512)  # BN weight+bias per conv channel
    assert sum(isinstance(l, nn.BatchNorm2d) for l in plain.modules()) == 0
    assert sum(isinstance(l, nn.BatchNorm2d) for l in bn.modules()) == 13
    lin = [l for l in plain.classifier if isinstance(l, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in lin] == [(512, 512), (512, 512), (512, 100)]
    assert sum(isinstance(l, nn.Dropout) and l.p == 0.5 for l in plain.classifier) == 2
    with torch.inference_mode():
        x = torch.randn(2, 3, 32, 32)
        assert plain.features(x).shape == (2, 512)
        assert plain(x).shape == bn.eval()(x).shape == (2, 100)


def test_densenet121_gn():
    ct = build_model('densenet121_gn', (3, 224, 224), 2)
    land = build_model('densenet121_gn', (3, 64, 64), 2028)
    # torchvision DenseNet-121 features: 6,953,856 (GN has the same per-channel weight/bias as BN)
    assert n_params(ct) == 6_953_856 + 50_176 * 2 + 2  # flatten 1024*7*7 -> 2
    assert n_params(land) == 6_953_856 + 4_096 * 2028 + 2028  # flatten 1024*2*2 -> 2028
    assert not any(isinstance(l, nn.modules.batchnorm._BatchNorm) for l in ct.modules())
    gn = [l for l in ct.modules() if isinstance(l, nn.GroupNorm)]
    assert len(gn) == 121 and all(l.num_groups == 4 for l in gn)
    assert all(bool((l.weight == 1).all() and (l.bias == 0).all()) for l in gn)
    assert bool((ct.classifier.bias == 0).all())
    with torch.inference_mode():
        f = ct.features(torch.randn(1, 3, 224, 224))
        assert f.shape == (1, 50_176) and bool((f >= 0).all())  # after the ReLU, no pooling
        assert ct(torch.randn(1, 3, 224, 224)).shape == (1, 2)
        assert land.features(torch.randn(2, 3, 64, 64)).shape == (2, 4_096)
        assert land(torch.randn(2, 3, 64, 64)).shape == (2, 2028)


def test_cnn10_size_and_layout():
    with torch.device('meta'):
        m = build_model('cnn10', (3, 128, 128), 2, device='meta')  # shapes only: no memory, no arithmetic
    # conv0..conv3, five 512->512 convs, two GroupNorm(1,512), head 903,168*2+2
    assert (
        n_params(m)
        == (
            (3 * 128 * 9 + 128)
            + (128 * 256 * 9 + 256)
            + (256 * 256 * 9 + 256)
            + (256 * 512 * 9 + 512)
            + 5 * (512 * 512 * 9 + 512)
            + 2 * 2 * 512
            + 903_168 * 2
            + 2
        )
        == 15_676_418
    )
    names = list(dict(m.features.named_children()))
    assert names.index('bn5') == names.index('conv5') + 1 and names.index('relu5') == names.index('bn5') + 1
    assert names.index('pool0') == names.index('relu5') + 1
    assert [n for n in names if n.startswith('conv')] == [f'conv{i}' for i in (0, 1, 2, 3, 4, 5, 6, 8, 7)]
    gn = [l for l in m.modules() if isinstance(l, nn.GroupNorm)]
    assert [(l.num_groups, l.num_channels) for l in gn] == [(1, 512), (1, 512)]
    assert m.classifier.in_features == 512 * 42 * 42 == 903_168
    assert m(torch.empty(1, 3, 128, 128, device='meta')).shape == (1, 2)
    convs = [l for l in m.features if isinstance(l, nn.Conv2d)]
    assert (
        all(l.kernel_size == (3, 3) and l.padding == (1, 1) and l.bias is not None for l in convs) and len(convs) == 9
    )
    assert isinstance(m.features.pool0, nn.MaxPool2d) and m.features.pool0.kernel_size == 3
    small = build_model('cnn10', (3, 128, 128), 2, width=8)
    with torch.inference_mode():
        assert small.features(torch.randn(2, 3, 128, 128)).shape == (2, 32 * 42 * 42)
    with pytest.raises(ValueError, match='width=0'):
        build_model('cnn10', (3, 128, 128), 2, width=0)
    with pytest.raises(ValueError, match='width=8.0'):
        build_model('cnn10', (3, 128, 128), 2, width=8.0)


@slow
def test_cnn10_full_forward():
    m = build_model('cnn10', (3, 128, 128), 2)
    with torch.inference_mode():
        assert m.features(torch.randn(1, 3, 128, 128)).shape == (1, 903_168)


# ---- ViT ---------------------------------------------------------------------------------------------------------


@pytest.fixture
def empty_hub(tmp_path, monkeypatch):
    "An empty torch hub dir, and no way to reach the network."
    old = torch.hub.get_dir()
    monkeypatch.setenv('TORCH_HOME', str(tmp_path))
    torch.hub.set_dir(str(tmp_path / 'hub'))

    def no_net(*a, **k):
        raise AssertionError('network access attempted')

    monkeypatch.setattr(torch.hub, 'load_state_dict_from_url', no_net)
    monkeypatch.setattr(torch.hub, 'download_url_to_file', no_net)
    monkeypatch.setattr(urllib.request, 'urlopen', no_net)
    yield tmp_path / 'hub'
    torch.hub.set_dir(old)


def test_vit_head_size_and_forward():
    m = build_model('vit_b32', (3, 32, 32), 100, pretrained=False)
    # torchvision ViT-B/32: 88,224,232 with the 768->1000 head; swap for 768->100
    assert n_params(m) == 88_224_232 - (768 * 1000 + 1000) + (768 * 100 + 100) == 87_532_132
    h = m.classifier
    assert (h.in_features, h.out_features) == (768, 100)
    assert bool((h.weight == 1).all()) and bool((h.bias == 0).all())  # fedreg.md §5 / §10.17
    m.eval()
    with torch.inference_mode():
        assert m.features(torch.randn(1, 3, 224, 224)).shape == (1, 768)
        assert m(torch.randn(1, 3, 32, 32)).shape == (1, 100)  # resized to 224 inside
    other = build_model('vit_b32', (3, 224, 224), 100, pretrained=False, head_init='default')
    assert not bool((other.classifier.weight == 1).all())


def test_vit_pretrained_missing_raises_without_network(empty_hub):
    with pytest.raises(FileNotFoundError, match='vit_b_32-d86f8d99.pth') as e:
        build_model('vit_b32', (3, 224, 224), 100)
    assert str(empty_hub / 'checkpoints') in str(e.value)
    assert not (empty_hub / 'checkpoints' / 'vit_b_32-d86f8d99.pth').exists()


def test_vit_pretrained_loads_from_cache(empty_hub):
    import torchvision

    torch.manual_seed(3)
    src = torchvision.models.vit_b_32(weights=None)  # stands in for the ImageNet weights
    path = empty_hub / 'checkpoints' / 'vit_b_32-d86f8d99.pth'
    path.parent.mkdir(parents=True)
    torch.save(src.state_dict(), path)
    m = build_model('vit_b32', (3, 224, 224), 100)
    assert torch.equal(m.features[1].conv_proj.weight, src.conv_proj.weight)
    assert torch.equal(m.features[1].encoder.pos_embedding, src.encoder.pos_embedding)
    assert bool((m.classifier.weight == 1).all())  # new head, not the file's
    del m
    big = build_model('vit_b32', (3, 384, 384), 100, image_size=384)  # position embeddings interpolated
    assert big.features[1].encoder.pos_embedding.shape == (1, 145, 768)
    assert torch.equal(big.features[1].conv_proj.weight, src.conv_proj.weight)


# ---- trainability (1-2 SGD steps on tiny batches) ----------------------------------------------------------------


def _batch(shape, n, k, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, *shape, generator=g), torch.randint(k, (n,), generator=g)


@pytest.mark.parametrize(
    'name,shape,k,opts,lr',
    [
        ('resnet50', (3, 32, 32), 100, {}, 0.01),
        ('vgg16', (3, 32, 32), 100, {}, 0.01),
        ('vgg16', (3, 32, 32), 100, {'batch_norm': True}, 0.01),
        ('densenet121_gn', (3, 64, 64), 2, {}, 0.01),  # Landmarks input size; 224 is only shape-checked
        ('cnn10', (3, 128, 128), 2, {'width': 8}, 5e-4),  # real input, width 8 not 128 (cost); the paper's LR
    ],
)
def test_trains(name, shape, k, opts, lr):
    m = build_model(name, shape, k, **opts)
    loss_goes_down(m, *_batch(shape, 2, k), lr=lr)


def test_vit_trains():
    m = build_model('vit_b32', (3, 224, 224), 100, pretrained=False)
    loss_goes_down(m, *_batch((3, 224, 224), 2, 100), lr=0.01, steps=1)


@slow
def test_cnn10_full_width_trains():
    m = build_model('cnn10', (3, 128, 128), 2)
    loss_goes_down(m, *_batch((3, 128, 128), 1, 2), lr=5e-4, steps=1)


# ---- BatchNorm statistics through FlatModel ----------------------------------------------------------------------


@pytest.mark.parametrize('name,opts', [('vgg16', {'batch_norm': True}), ('resnet50', {})])
def test_bn_running_stats_average_through_flatmodel(name, opts):
    fms = [FlatModel(build_model(name, (3, 32, 32), 100, seed=0, **opts)) for _ in range(3)]
    bns = [[l for l in fm.model.modules() if isinstance(l, nn.BatchNorm2d)] for fm in fms]
    assert fms[0].num_buffers == sum(2 * l.num_features for l in bns[0])  # running mean/var; no int counter
    assert fms[0].num_params == n_params(fms[0].model)
    for i, fm in enumerate(fms[:2]):
        x, y = _batch((3, 32, 32), 2, 100, seed=i)
        fm.model.train()
        opt = torch.optim.SGD(fm.model.parameters(), lr=0.01)
        F.cross_entropy(fm.model(x * (1 + i) + i), y).backward()
        opt.step()
    for a, b in zip(bns[0], bns[1]):
        assert not torch.equal(a.running_mean, b.running_mean)
    assert not torch.equal(fms[0].params, fms[1].params)
    fms[2].load_((fms[0].state + fms[1].state) / 2)
    for a, b, c in zip(*bns):
        torch.testing.assert_close(c.running_mean, (a.running_mean + b.running_mean) / 2)
        torch.testing.assert_close(c.running_var, (a.running_var + b.running_var) / 2)
        torch.testing.assert_close(c.weight, (a.weight + b.weight) / 2)
