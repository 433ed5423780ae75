"""Every partition scheme: disjoint clients, nothing lost or invented unless by design, the requested structure,
seeding, clear errors."""

import numpy as np
import pytest
from fedrepro.core import PARTITIONS
from fedrepro.partitions import Partition, split, summarize, class_counts, scheme_params

Y = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 400))  # 4,000 labels, 400 per class, shuffled

HW = {
    'MNIST': [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949],
    'USPS': [1194, 1005, 731, 658, 652, 556, 664, 645, 542, 644],
    'SVHN': [4948, 13861, 10585, 8497, 7458, 6882, 5727, 5595, 5045, 4659],
}
# MNIST-M (59,001 train images) depends on the release: MNIST's counts less 999 images, spread proportionally
HW['MNIST-M'] = [c - d for c, d in zip(HW['MNIST'], [99, 112, 99, 102, 97, 90, 99, 104, 97, 100])]
HW_NAMES = ['MNIST', 'MNIST-M', 'USPS', 'SVHN']


@pytest.fixture(scope='module')
def hw():
    """Labels and domains of HWDigits' pooled standard training splits (domains numbered MNIST 0, MNIST-M 1, USPS 2,
    SVHN 3)."""
    y = np.concatenate([np.repeat(np.arange(10), HW[d]) for d in HW_NAMES])
    dom = np.concatenate([np.full(sum(HW[d]), i) for i, d in enumerate(HW_NAMES)])
    order = np.random.default_rng(1).permutation(len(y))  # the loader need not keep them grouped
    return y[order], dom[order]


def all_indices(p: Partition) -> np.ndarray:
    return np.concatenate([q for ps in p.parts().values() for q in ps])


def check_disjoint(p: Partition, n: int, num_clients: int, dropped: int = 0, labels=None):
    flat = all_indices(p)
    assert p.num_clients == num_clients and all(len(ps) == num_clients for ps in p.parts().values())
    assert len(np.unique(flat)) == len(flat), 'a sample is in two clients or two splits'
    assert flat.min() >= 0 and flat.max() < n
    assert len(flat) == n - dropped
    assert all(q.dtype == np.int64 and (np.diff(q) > 0).all() for ps in p.parts().values() for q in ps)  # sorted
    if labels is not None:
        assert summarize(labels, p).attrs['dropped'] == dropped


CASES = {  # scheme, num_clients, params, samples dropped by design
    'iid': ('iid', 7, {}, 0),
    'iid-sizes': ('iid', 3, dict(sizes=[100, 200, 300]), 4000 - 600),
    'powerlaw': ('powerlaw', 500, dict(min_per_class=1, total=3700), 300),
    'powerlaw-all': ('powerlaw', 40, dict(classes_per_client=1), 0),
    'fixed-1class': ('fixed', 200, dict(samples_per_client=20, classes_per_client=1), 0),
    'fixed-random': ('fixed', 300, dict(samples_per_client=5, classes_per_client=None), 2500),
    'classes': ('classes', 10, dict(classes_per_client=2), 0),
    'classes-unowned': ('classes', 3, dict(classes_per_client=1), 4000 - 1200),
    'dirichlet': ('dirichlet', 20, dict(alpha=0.1), 0),
    'one_class': ('one_class', 10, {}, 0),
    'shards': ('shards', 100, {}, 0),
    'shards-remainder': ('shards', 30, {}, 4000 - 3960),
    'shards-profile-c': ('shards', 100, dict(local_split=(0.8, 0.1, 0.1)), 0),
}


@pytest.mark.parametrize('case', CASES)
def test_disjoint_and_complete(case):
    scheme, k, kw, dropped = CASES[case]
    check_disjoint(split(Y, scheme, k, seed=0, **kw), len(Y), k, dropped, Y)


@pytest.mark.parametrize('case', CASES)
def test_seeded(case):
    scheme, k, kw, _ = CASES[case]
    a, b, c = (split(Y, scheme, k, seed=s, **kw) for s in (0, 0, 1))
    key = lambda p: [q.tolist() for ps in p.parts().values() for q in ps]
    assert key(a) == key(b)
    if case not in ('one_class', 'classes-unowned'):
        assert key(a) != key(c)
    else:
        assert key(a) == key(c)  # deterministic by design


def test_every_scheme_is_covered():
    assert {c[0] for c in CASES.values()} | {'domain', 'domain_class', 'group'} >= set(PARTITIONS)


def test_group_one_client_per_group_and_unassigned_spread_by_size():
    """Natural groups (COVID-CT sources, Landmarks users): each client is one group plus its share of the samples marked
    -1."""
    g = np.repeat([0, 1, 2, -1], [100, 300, 600, 500])
    y = np.arange(len(g)) % 10
    a, b = (split(y, 'group', 3, seed=s, groups={'user': g}) for s in (0, 1))
    check_disjoint(a, len(g), 3)
    for u, n in enumerate([100, 300, 600]):
        idx = a.train[u]
        assert (g[idx] == u).sum() == n and set(g[idx]) <= {u, -1}  # the whole group, nothing of another group
        assert (g[idx] == -1).sum() == n // 2  # 500 unassigned in proportion 1:3:6
    assert [q.tolist() for q in a.train] != [q.tolist() for q in b.train]  # which unassigned samples go where is seeded
    with pytest.raises(ValueError, match=r'num_clients=4 is not allowed: the 3 distinct values'):
        split(y, 'group', 4, seed=0, groups={'user': g})
    with pytest.raises(ValueError, match=r"key='source' is not allowed"):
        split(y, 'group', 3, seed=0, groups={'user': g}, key='source')


def test_a_partition_class_defined_twice_is_accepted(monkeypatch):
    """nbdev_test runs several notebooks in one process: re-running 02e registers schemes that return the notebook's own
    Partition class."""
    from dataclasses import dataclass

    @dataclass
    class Partition2:  # another copy of the class, as the notebook's cells define it
        train: list
        test: list | None = None
        valid: list | None = None

    library_iid = PARTITIONS['iid']

    def iid_from_notebook(labels, num_clients, rng, groups=None):
        return Partition2(list(library_iid(labels, num_clients, rng)))

    monkeypatch.setitem(PARTITIONS._items, 'iid', iid_from_notebook)
    part = split(Y, 'iid', 5, seed=0)
    assert isinstance(part, Partition) and part.num_clients == 5
    check_disjoint(part, len(Y), 5)


def test_iid_sizes():
    s = split(Y, 'iid', 7, seed=0).sizes()
    assert s.max() - s.min() == 1 and s.sum() == 4000
    assert split(Y, 'iid', 3, seed=0, sizes=[100, 200, 300]).sizes().tolist() == [100, 200, 300]


def test_powerlaw_structure():
    p = split(Y, 'powerlaw', 500, seed=0, min_per_class=1, total=3700)
    assert p.valid is not None and p.test is not None
    for u in range(500):
        held = set(Y[np.concatenate([p.train[u], p.valid[u], p.test[u]])].tolist())
        assert held == {u % 10, (u + 1) % 10}  # both classes, at least min_per_class=1 each
    total = np.array([len(p.train[u]) + len(p.valid[u]) + len(p.test[u]) for u in range(500)])
    assert total.sum() == 3700 and total.min() >= 2 and total.max() > 20 * np.median(total)  # heavy tail
    fr = np.array([sum(map(len, v)) for v in (p.train, p.valid, p.test)]) / 3700
    assert np.allclose(fr, [0.75, 0.083, 0.167], atol=0.03)
    assert (p.sizes() >= 1).all()
    one = summarize(Y, split(Y, 'powerlaw', 10, seed=0, classes_per_client=1, fractions=(1.0, 0.0, 0.0)))
    assert one.classes.tolist() == [[c] for c in range(10)] and one['size'].tolist() == [400] * 10 and 'test' not in one


def test_fixed_structure():
    s = summarize(Y, split(Y, 'fixed', 200, seed=0, samples_per_client=20, classes_per_client=1))
    assert set(s['size']) == {20} and s.classes.tolist() == [[u % 10] for u in range(200)]
    s = summarize(Y, split(Y, 'fixed', 300, seed=0, samples_per_client=5, classes_per_client=None))
    assert set(s['size']) == {5} and s.num_classes.mean() > 3
    s = summarize(Y, split(Y, 'fixed', 30, seed=0, samples_per_client=7, classes_per_client=2))
    assert set(s['size']) == {7} and s.classes.tolist() == [sorted({u % 10, (u + 1) % 10}) for u in range(30)]


def test_classes_structure():
    s = summarize(Y, split(Y, 'classes', 20, seed=0, classes_per_client=5))
    assert set(s.num_classes) == {5} and all(u % 10 in c for u, c in enumerate(s.classes))
    counts = class_counts(Y, split(Y, 'classes', 20, seed=0, classes_per_client=5), 10)
    for c in range(10):  # a label's holders share it equally
        held = counts[:, c][counts[:, c] > 0]
        assert held.max() - held.min() <= 1


def test_dirichlet_structure():
    for a in (0.1, 0.5, 10):
        s = summarize(Y, split(Y, 'dirichlet', 10, seed=0, alpha=a))
        assert s['size'].min() >= 10
    skew = lambda a: summarize(Y, split(Y, 'dirichlet', 10, seed=0, alpha=a)).num_classes.mean()
    assert skew(0.1) < skew(0.5) < skew(10)


def test_one_class_structure():
    s = summarize(Y, split(Y, 'one_class', 10, seed=0))
    assert s.classes.tolist() == [[c] for c in range(10)] and s['size'].tolist() == [400] * 10


def test_shards_structure():
    p = split(Y, 'shards', 100, seed=0)
    assert set(p.sizes().tolist()) == {40}
    rank = np.empty(len(Y), dtype=int)
    rank[np.argsort(Y, kind='stable')] = np.arange(len(Y))
    used = []
    for q in p.train:  # 2 whole shards of 20, consecutive in label order
        r = np.sort(rank[q]).reshape(2, 20)
        assert (r[:, 0] % 20 == 0).all() and (np.diff(r, axis=1) == 1).all()
        used += (r[:, 0] // 20).tolist()
    assert sorted(used) == list(range(200))
    assert summarize(Y, p).num_classes.max() <= 4
    c = split(Y, 'shards', 100, seed=0, local_split=(0.8, 0.1, 0.1))
    assert set(c.sizes().tolist()) == {32} and {len(v) for v in c.valid} == {4} and {len(v) for v in c.test} == {4}
    for u in range(100):  # same shards, unshuffled 80/10/10 cut
        assert set(np.concatenate([c.train[u], c.valid[u], c.test[u]]).tolist()) == set(p.train[u].tolist())
        ordered = np.sort(rank[p.train[u]])  # shard order = label order here
        assert set(rank[c.train[u]].tolist()) == set(ordered[:32].tolist())


def test_hwdigits_4(hw):
    y, dom = hw
    p = split(y, 'domain', 4, seed=0, groups={'domain': dom})
    check_disjoint(p, len(y), 4)
    assert p.sizes().tolist() == [60000, 59001, 7291, 73257]
    s = summarize(y, p, groups={'domain': dom})
    assert s['domain'].tolist() == [0, 1, 2, 3] and set(s.num_classes) == {10}


def test_hwdigits_40_known_counts(hw):
    y, dom = hw
    p = split(y, 'domain_class', 40, seed=0, groups={'domain': dom})
    check_disjoint(p, len(y), 40)
    s = summarize(y, p, groups={'domain': dom})
    assert s['size'].tolist() == [n for d in HW_NAMES for n in HW[d]]
    assert (s['size'].min(), s['size'].max()) == (542, 13861)
    assert s.loc[s['size'].idxmin(), 'domain'] == 2 and s.loc[s['size'].idxmin(), 'classes'] == [8]  # USPS digit 8
    assert s.loc[s['size'].idxmax(), 'domain'] == 3 and s.loc[s['size'].idxmax(), 'classes'] == [1]  # SVHN digit 1
    assert s['domain'].tolist() == [d for d in range(4) for _ in range(10)] and s.classes.tolist() == [
        [c] for _ in range(4) for c in range(10)
    ]


@pytest.mark.parametrize(
    'labels, scheme, k, kw, message',
    [
        (
            Y,
            'classes',
            10,
            dict(classes_per_client=11),
            'classes_per_client=11 is not allowed: an integer from 1 to the 10 classes',
        ),
        (Y[:39], 'dirichlet', 3, dict(alpha=0.001, min_size=13, max_tries=5), 'alpha=0.001 is not allowed'),
        (Y[:40], 'dirichlet', 3, dict(min_size=14), 'num_clients=3 is not allowed'),
        (Y[:5], 'iid', 6, {}, 'num_clients=6 is not allowed: an integer from 1 to the 5 samples'),
        (Y, 'iid', 0, {}, 'num_clients=0'),
        (Y, 'iid', 3, dict(sizes=[1, 2]), 'sizes=[1, 2] is not allowed'),
        (Y, 'iid', 2, dict(sizes=[4000, 1]), 'sizes=[4000, 1] is not allowed'),
        (Y, 'iid', 3, dict(alpha=0.5), "partition_params['alpha']=0.5 is not allowed: a parameter of partition 'iid'"),
        (Y, 'stripes', 3, {}, "partition='stripes' is not allowed"),
        (Y, 'powerlaw', 500, dict(min_per_class=5), 'min_per_class=5 is not allowed: at most 4'),
        (Y, 'powerlaw', 500, dict(min_per_class=1, total=999), 'total=999 is not allowed: an integer from 1000'),
        (Y, 'powerlaw', 10, dict(fractions=(0.5, 0.1, 0.1)), 'fractions=(0.5, 0.1, 0.1) is not allowed'),
        (
            Y,
            'fixed',
            200,
            dict(samples_per_client=21),
            'samples_per_client=21 is not allowed: a number the data can supply',
        ),
        (
            Y,
            'fixed',
            300,
            dict(samples_per_client=14, classes_per_client=None),
            'samples_per_client=14 is not allowed: at most 13',
        ),
        (Y, 'fixed', 10, dict(samples_per_client=2, classes_per_client=3), 'classes_per_client=3 is not allowed'),
        (Y, 'one_class', 9, {}, 'num_clients=9 is not allowed: exactly the 10 classes'),
        (Y, 'shards', 100, dict(shards_per_client=41), 'shards_per_client=41 is not allowed'),
        (Y, 'domain', 4, {}, "a per-sample 'domain' array"),
    ],
)
def test_impossible_requests_raise(labels, scheme, k, kw, message):
    with pytest.raises(ValueError) as e:
        split(labels, scheme, k, seed=0, **kw)
    assert message in str(e.value)


def test_domain_errors(hw):
    y, dom = hw
    with pytest.raises(ValueError, match=r'num_clients=40 is not allowed: the 4 domains'):
        split(y, 'domain', 40, seed=0, groups={'domain': dom})
    with pytest.raises(ValueError, match=r'4 domains × 10 classes = 40'):
        split(y, 'domain_class', 4, seed=0, groups={'domain': dom})
    with pytest.raises(ValueError, match=r"groups\['domain'\]"):
        split(y, 'domain', 4, seed=0, groups={'domain': dom[:10]})
    keep = ~((dom == 2) & (y == 8))  # drop USPS digit 8: a pair with no data
    with pytest.raises(ValueError, match=r'\(2, 8\) has none'):
        split(y[keep], 'domain_class', 40, seed=0, groups={'domain': dom[keep]})


def test_scheme_params():
    assert scheme_params('dirichlet') == dict(alpha=0.5, min_size=10, max_tries=1000)
    assert scheme_params('one_class') == {'fraction': 1.0} and scheme_params('iid') == {'sizes': None}
    assert set(scheme_params('powerlaw')) == {'classes_per_client', 'min_per_class', 'sigma', 'total', 'fractions'}
    for name in PARTITIONS:
        scheme_params(name)
