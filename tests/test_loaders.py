"Round trips through the real-dataset readers: small files written here in each dataset's published on-disk format."

import bz2
import gzip
import pickle
import struct

import numpy as np
import pytest
import torch
from scipy.io import savemat

from fedrepro.core import DATASETS
from fedrepro.loaders import load_cifar10, load_cifar100, load_emnist, load_mnist, load_svhn, load_usps

N_TRAIN, N_TEST = 20, 10


def images(n, c, h, w, seed):
    "Random uint8 images N×C×H×W (asymmetric, so any transpose or axis mix-up changes them)."
    return np.random.default_rng(seed).integers(0, 256, (n, c, h, w), dtype=np.uint8)


def labels(n, k=10, seed=0):
    return np.random.default_rng(seed + 1000).permutation(np.arange(n) % k)


# ---------------------------------------------------------------- writers, one per real format


def write_idx(path, arr, gz=False):
    "IDX file as on LeCun's page: magic 2051 (images) / 2049 (labels), big-endian sizes, then the bytes."
    arr = np.asarray(arr, dtype=np.uint8)
    magic = {3: 2051, 1: 2049}[arr.ndim]
    data = struct.pack('>I', magic) + b''.join(struct.pack('>I', s) for s in arr.shape) + arr.tobytes()
    if gz:
        path = path.with_name(path.name + '.gz')
    with (gzip.open if gz else open)(path, 'wb') as f:
        f.write(data)


def write_mnist_like(root, sub, names, x_tr, y_tr, x_te, y_te, gz=False):
    raw = root / sub / 'raw'
    raw.mkdir(parents=True)
    for (img, lab), (x, y) in zip(names, ((x_tr, y_tr), (x_te, y_te))):
        write_idx(raw / img, x, gz)
        write_idx(raw / lab, y, gz)


MNIST_NAMES = [
    ('train-images-idx3-ubyte', 'train-labels-idx1-ubyte'),
    ('t10k-images-idx3-ubyte', 't10k-labels-idx1-ubyte'),
]
EMNIST_NAMES = [
    ('emnist-digits-train-images-idx3-ubyte', 'emnist-digits-train-labels-idx1-ubyte'),
    ('emnist-digits-test-images-idx3-ubyte', 'emnist-digits-test-labels-idx1-ubyte'),
]


def write_pickle(path, d):
    with open(path, 'wb') as f:
        pickle.dump(d, f, protocol=2)


def cifar_dict(x, y, label_key, bytes_keys, extra=None):
    "A CIFAR python batch: `data` N×3072 (R plane, G plane, B plane, each row-major) and the labels list."
    d = {
        'data': x.reshape(len(x), 3072),
        label_key: [int(v) for v in y],
        'batch_label': 'testing batch 1 of 1',
        **(extra or {}),
    }
    return {k.encode(): v for k, v in d.items()} if bytes_keys else d


def write_usps(path, x, y):
    "libsvm lines as in usps.bz2: label 1..10, then 1:v ... 256:v with v = pixel/255*2-1 in [-1, 1]."
    v = x.reshape(len(x), 256).astype(np.float64) / 255 * 2 - 1
    lines = [f"{int(lab)} " + ' '.join(f'{j + 1}:{val:.6f}' for j, val in enumerate(row)) for lab, row in zip(y, v)]
    with bz2.open(path, 'wt') as f:
        f.write('\n'.join(lines) + '\n')


# ---------------------------------------------------------------- MNIST / EMNIST


@pytest.mark.parametrize('gz', [False, True])
def test_mnist_round_trip(tmp_path, gz):
    x_tr, x_te = images(N_TRAIN, 1, 28, 28, 1)[:, 0], images(N_TEST, 1, 28, 28, 2)[:, 0]
    x_tr[0] = 0
    x_tr[0, 2, 5] = 255  # one bright pixel at row 2, column 5
    y_tr, y_te = labels(N_TRAIN), labels(N_TEST, seed=1)
    write_mnist_like(tmp_path, 'MNIST', MNIST_NAMES, x_tr, y_tr, x_te, y_te, gz)
    raw = load_mnist(tmp_path)
    assert raw.x_train.shape == (N_TRAIN, 1, 28, 28) and raw.x_test.shape == (N_TEST, 1, 28, 28)
    assert raw.x_train.dtype == torch.uint8 and raw.y_train.dtype == torch.int64 and raw.y_test.dtype == torch.int64
    assert raw.x_train[0, 0, 2, 5] == 255 and raw.x_train[0].sum() == 255
    np.testing.assert_array_equal(raw.x_train[:, 0].numpy(), x_tr)
    np.testing.assert_array_equal(raw.x_test[:, 0].numpy(), x_te)
    assert raw.y_train.tolist() == y_tr.tolist() and raw.y_test.tolist() == y_te.tolist()
    assert len(raw.classes) == 10


def test_emnist_is_transposed_upright(tmp_path):
    up_tr, up_te = images(N_TRAIN, 1, 28, 28, 3)[:, 0], images(N_TEST, 1, 28, 28, 4)[:, 0]
    up_tr[0] = 0
    up_tr[0, 2, 5] = 255  # upright: row 2, column 5
    y_tr, y_te = labels(N_TRAIN), labels(N_TEST, seed=2)
    # EMNIST files store every image transposed
    write_mnist_like(
        tmp_path, 'EMNIST', EMNIST_NAMES, up_tr.transpose(0, 2, 1), y_tr, up_te.transpose(0, 2, 1), y_te, gz=True
    )
    raw = load_emnist(tmp_path)
    assert raw.x_train.shape == (N_TRAIN, 1, 28, 28) and raw.x_train.dtype == torch.uint8
    assert raw.x_train[0, 0, 2, 5] == 255 and raw.x_train[0, 0, 5, 2] == 0
    np.testing.assert_array_equal(raw.x_train[:, 0].numpy(), up_tr)
    np.testing.assert_array_equal(raw.x_test[:, 0].numpy(), up_te)
    assert raw.y_test.tolist() == y_te.tolist() and len(raw.classes) == 10


def test_idx_truncated_or_wrong_magic_fails(tmp_path):
    x, y = images(4, 1, 28, 28, 5)[:, 0], np.arange(4)
    write_mnist_like(tmp_path, 'MNIST', MNIST_NAMES, x, y, x, y)
    f = tmp_path / 'MNIST' / 'raw' / 'train-images-idx3-ubyte'
    f.write_bytes(f.read_bytes()[:-100])
    with pytest.raises(ValueError, match='truncated'):
        load_mnist(tmp_path)
    f.write_bytes(b'\x12\x34' + bytes(200))
    with pytest.raises(ValueError, match='not an IDX'):
        load_mnist(tmp_path)


def test_labels_out_of_range_fail(tmp_path):
    x, y = images(4, 1, 28, 28, 6)[:, 0], np.array([0, 1, 2, 10])
    write_mnist_like(tmp_path, 'MNIST', MNIST_NAMES, x, y, x, y)
    with pytest.raises(ValueError, match='labels'):
        load_mnist(tmp_path)


# ---------------------------------------------------------------- CIFAR


@pytest.mark.parametrize('bytes_keys', [False, True])
def test_cifar10_round_trip(tmp_path, bytes_keys):
    folder = tmp_path / 'cifar-10-batches-py'
    folder.mkdir()
    x_tr, x_te = images(N_TRAIN, 3, 32, 32, 7), images(N_TEST, 3, 32, 32, 8)
    y_tr, y_te = labels(N_TRAIN), labels(N_TEST, seed=3)
    for i in range(5):
        sl = slice(4 * i, 4 * i + 4)
        write_pickle(folder / f'data_batch_{i + 1}', cifar_dict(x_tr[sl], y_tr[sl], 'labels', bytes_keys))
    write_pickle(folder / 'test_batch', cifar_dict(x_te, y_te, 'labels', bytes_keys))
    names = [f'class{i}'.encode() for i in range(10)]
    write_pickle(folder / 'batches.meta', {b'label_names': names} if bytes_keys else {'label_names': names})
    raw = load_cifar10(tmp_path)
    assert raw.x_train.shape == (N_TRAIN, 3, 32, 32) and raw.x_test.shape == (N_TEST, 3, 32, 32)
    assert raw.x_train.dtype == torch.uint8 and raw.y_train.dtype == torch.int64
    flat = x_te.reshape(N_TEST, 3072)
    for i, c, h, w in [(0, 0, 0, 0), (3, 1, 4, 9), (9, 2, 31, 30)]:  # row layout: 1024*c + 32*h + w
        assert raw.x_test[i, c, h, w] == flat[i, 1024 * c + 32 * h + w]
    np.testing.assert_array_equal(raw.x_train.numpy(), x_tr)
    assert raw.y_train.tolist() == y_tr.tolist() and raw.y_test.tolist() == y_te.tolist()
    assert raw.classes == [f'class{i}' for i in range(10)]


def test_cifar100_fine_labels(tmp_path):
    folder = tmp_path / 'cifar-100-python'
    folder.mkdir()
    x_tr, x_te = images(N_TRAIN, 3, 32, 32, 9), images(N_TEST, 3, 32, 32, 10)
    y_tr, y_te = (np.arange(N_TRAIN) * 5) % 100, np.array([99, 0, 50, 1, 2, 3, 4, 5, 6, 7])
    coarse = lambda y: {'coarse_labels': [int(v) // 5 for v in y]}
    write_pickle(folder / 'train', cifar_dict(x_tr, y_tr, 'fine_labels', True, coarse(y_tr)))
    write_pickle(folder / 'test', cifar_dict(x_te, y_te, 'fine_labels', True, coarse(y_te)))
    raw = load_cifar100(tmp_path)
    assert raw.x_train.shape == (N_TRAIN, 3, 32, 32) and raw.x_train.dtype == torch.uint8
    np.testing.assert_array_equal(raw.x_test.numpy(), x_te)
    assert raw.y_train.tolist() == y_tr.tolist() and raw.y_test.tolist() == y_te.tolist()
    assert raw.y_test.dtype == torch.int64
    assert len(raw.classes) == 100 and raw.classes[0] == 'apple' and raw.classes[99] == 'worm'


# ---------------------------------------------------------------- SVHN


def test_svhn_axes_and_label_10(tmp_path):
    x_tr, x_te = images(N_TRAIN, 3, 32, 32, 11), images(N_TEST, 3, 32, 32, 12)
    d_tr, d_te = labels(N_TRAIN), labels(N_TEST, seed=4)
    for split, x, d in (('train', x_tr, d_tr), ('test', x_te, d_te)):
        X = np.ascontiguousarray(x.transpose(2, 3, 1, 0))  # the .mat layout: H×W×C×N
        y = np.where(d == 0, 10, d).astype(np.uint8).reshape(-1, 1)  # digit 0 is stored as 10
        savemat(tmp_path / f'{split}_32x32.mat', {'X': X, 'y': y})
    raw = load_svhn(tmp_path)
    assert raw.x_train.shape == (N_TRAIN, 3, 32, 32) and raw.x_test.shape == (N_TEST, 3, 32, 32)
    assert raw.x_train.dtype == torch.uint8 and raw.y_train.dtype == torch.int64
    X = np.ascontiguousarray(x_te.transpose(2, 3, 1, 0))
    assert raw.x_test[3, 2, 5, 7] == X[5, 7, 2, 3] and raw.x_test[0, 0, 31, 0] == X[31, 0, 0, 0]
    np.testing.assert_array_equal(raw.x_train.numpy(), x_tr)
    assert raw.y_train.tolist() == d_tr.tolist() and raw.y_test.tolist() == d_te.tolist()
    assert 0 in raw.y_train.tolist() and raw.y_train.max() == 9 and len(raw.classes) == 10


# ---------------------------------------------------------------- USPS


def test_usps_round_trip(tmp_path):
    x_tr, x_te = images(N_TRAIN, 1, 16, 16, 13), images(N_TEST, 1, 16, 16, 14)
    d_tr, d_te = labels(N_TRAIN), labels(N_TEST, seed=5)
    write_usps(tmp_path / 'usps.bz2', x_tr, d_tr + 1)  # labels 1..10 in the file
    write_usps(tmp_path / 'usps.t.bz2', x_te, d_te + 1)
    raw = load_usps(tmp_path)
    assert raw.x_train.shape == (N_TRAIN, 1, 16, 16) and raw.x_test.shape == (N_TEST, 1, 16, 16)
    assert raw.x_train.dtype == torch.uint8 and raw.y_train.dtype == torch.int64
    np.testing.assert_array_equal(raw.x_train.numpy(), x_tr)
    np.testing.assert_array_equal(raw.x_test.numpy(), x_te)
    assert raw.y_train.tolist() == d_tr.tolist() and raw.y_test.tolist() == d_te.tolist()
    assert raw.y_train.min() == 0 and raw.y_train.max() == 9


def test_usps_value_mapping(tmp_path):
    "-1 → 0, 1 → 255, 0 → 128 (rounded from 127.5), row-major 16×16, an index left out is 0."
    with bz2.open(tmp_path / 'usps.bz2', 'wt') as f:
        f.write('10 1:-1 16:1 17:0.5 256:1\n')
    with bz2.open(tmp_path / 'usps.t.bz2', 'wt') as f:
        f.write('1 ' + ' '.join(f'{j}:-1' for j in range(1, 257)) + '\n')
    raw = load_usps(tmp_path)
    img = raw.x_train[0, 0]
    assert (img[0, 0], img[0, 15], img[1, 0], img[15, 15], img[7, 7]) == (0, 255, 191, 255, 128)
    assert raw.y_train.tolist() == [9] and raw.y_test.tolist() == [0] and raw.x_test.max() == 0


# ---------------------------------------------------------------- missing files and the registry

MISSING = [
    (load_mnist, 'MNIST', 'train-images-idx3-ubyte'),
    (load_emnist, 'EMNIST', 'emnist-digits-train-images-idx3-ubyte'),
    (load_cifar10, 'CIFAR-10', 'data_batch_1'),
    (load_cifar100, 'CIFAR-100', 'cifar-100-python'),
    (load_svhn, 'SVHN', 'train_32x32.mat'),
    (load_usps, 'USPS', 'usps.t.bz2'),
]


@pytest.mark.parametrize('load,dataset,fname', MISSING)
def test_missing_files_raise(tmp_path, load, dataset, fname):
    with pytest.raises(FileNotFoundError) as e:
        load(tmp_path / 'empty')
    msg = str(e.value)
    assert dataset in msg and fname in msg and 'download=True' in msg


def test_partly_missing_names_the_folder(tmp_path):
    folder = tmp_path / 'cifar-10-batches-py'
    folder.mkdir()
    write_pickle(folder / 'data_batch_1', cifar_dict(images(2, 3, 32, 32, 0), [0, 1], 'labels', False))
    with pytest.raises(FileNotFoundError, match='test_batch') as e:
        load_cifar10(tmp_path)
    assert 'cifar-10-batches-py' in str(e.value)


SPECS = {
    'mnist': (10, (1, 28, 28), None, load_mnist),
    'emnist': (10, (1, 28, 28), None, load_emnist),
    'cifar10': (10, (3, 32, 32), 'crop_flip', load_cifar10),
    'cifar100': (100, (3, 32, 32), 'crop_flip', load_cifar100),
    'svhn': (10, (3, 32, 32), None, load_svhn),
    'usps': (10, (1, 16, 16), None, load_usps),
}


@pytest.mark.parametrize('name', list(SPECS))
def test_registered_specs(name):
    spec = DATASETS[name]
    k, shape, augment, load = SPECS[name]
    assert (spec.name, spec.num_classes, tuple(spec.input_shape), spec.augment, spec.load) == (
        name,
        k,
        shape,
        augment,
        load,
    )
    assert len(spec.mean) == len(spec.std) == shape[0]
    assert all(0 < m < 1 for m in spec.mean) and all(0 < s < 1 for s in spec.std)
    assert spec.source and not spec.embedded


def test_standard_statistics():
    assert DATASETS['mnist'].mean == (0.1307,) and DATASETS['mnist'].std == (0.3081,)
    assert DATASETS['cifar10'].mean == (0.4914, 0.4822, 0.4465) and DATASETS['cifar10'].std == (0.2470, 0.2435, 0.2616)
    assert DATASETS['svhn'].std == (0.1980, 0.2010, 0.1970)
