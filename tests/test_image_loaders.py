"Image-folder loaders (fedrepro.image_loaders) on tiny datasets written in each public layout."

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from PIL import Image

from fedrepro.core import DATASETS
from fedrepro import image_loaders as il


def save(path, size, colour, fmt=None):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new('RGB', size, colour).save(path, format=fmt)


def stripes(path, w, h, colours, fmt=None):
    "Vertical stripes of equal width, left to right."
    a = np.zeros((h, w, 3), np.uint8)
    for k, c in enumerate(colours):
        a[:, k * w // len(colours) : (k + 1) * w // len(colours)] = c
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(a).save(path, format=fmt)


def check_raw(r, n_train, n_test, shape):
    assert r.x_train.dtype == torch.uint8 and r.x_test.dtype == torch.uint8
    assert r.y_train.dtype == torch.int64 and r.y_test.dtype == torch.int64
    assert tuple(r.x_train.shape) == (n_train, *shape) and tuple(r.x_test.shape) == (n_test, *shape)
    assert len(r.y_train) == n_train and len(r.y_test) == n_test


def check_missing(load, root, dataset, expected_file):
    with pytest.raises(FileNotFoundError) as e:
        load(str(root), download=True)
    msg = str(e.value)
    assert dataset in msg and expected_file in msg


# ---------------------------------------------------------------- MNIST-M
@pytest.fixture
def mnistm(tmp_path):
    d = tmp_path / 'mnist_m'
    labels = {'train': [3, 1, 4, 1, 5], 'test': [9, 2]}
    for part, ys in labels.items():
        lines = []
        for i, y in enumerate(ys):
            name = f'{i:08d}.png'
            save(d / f'mnist_m_{part}' / name, (28, 28), (y * 20, 100 + i, 7))
            lines.append(f'{name} {y}')
        (d / f'mnist_m_{part}_labels.txt').write_text('\n'.join(lines) + '\n')
    save(d / 'mnist_m_test' / '00000001.png', (32, 32), (40, 101, 7))  # an odd-sized file is resized
    return tmp_path, labels


def test_mnistm(mnistm):
    root, labels = mnistm
    r = il.load_mnistm(str(root))
    check_raw(r, 5, 2, (3, 28, 28))
    assert r.y_train.tolist() == labels['train'] and r.y_test.tolist() == labels['test']
    assert r.x_train[:, :, 10, 10].tolist() == [[y * 20, 100 + i, 7] for i, y in enumerate(labels['train'])]
    assert r.x_test[1, :, 0, 0].tolist() == [40, 101, 7]
    assert r.classes == [str(i) for i in range(10)] and r.groups_train == {}
    spec = DATASETS['mnistm']
    assert (spec.num_classes, spec.input_shape, spec.augment) == (10, (3, 28, 28), None)
    assert len(spec.mean) == len(spec.std) == 3 and spec.source
    assert il.load_mnistm(str(root / 'mnist_m')).y_train.tolist() == labels['train']  # root may be the folder


def test_mnistm_missing(tmp_path):
    check_missing(il.load_mnistm, tmp_path, 'mnistm', 'mnist_m_train_labels.txt')


# ---------------------------------------------------------------- TinyImageNet
WNIDS = ['n09999999', 'n01443537', 'n02085620']  # as in the real file: not sorted


@pytest.fixture
def tiny(tmp_path):
    d = tmp_path / 'tiny-imagenet-200'
    d.mkdir()
    (d / 'wnids.txt').write_text('\n'.join(WNIDS) + '\n')
    (d / 'words.txt').write_text('n01443537\tgoldfish\n')
    colours = {'n01443537': (250, 0, 0), 'n02085620': (0, 250, 0), 'n09999999': (0, 0, 250)}
    for w in WNIDS:
        for k in range(3):
            save(d / 'train' / w / 'images' / f'{w}_{k}.JPEG', (64, 64), colours[w], 'JPEG')
        (d / 'train' / w / f'{w}_boxes.txt').write_text('')
    ann = [
        ('val_0.JPEG', 'n02085620'),
        ('val_1.JPEG', 'n09999999'),
        ('val_2.JPEG', 'n01443537'),
        ('val_3.JPEG', 'n02085620'),
    ]
    for f, w in ann:
        save(d / 'val' / 'images' / f, (64, 64), colours[w], 'JPEG')
    (d / 'val' / 'val_annotations.txt').write_text(''.join(f'{f}\t{w}\t0\t1\t20\t30\n' for f, w in ann))
    save(d / 'test' / 'images' / 'test_0.JPEG', (64, 64), (1, 2, 3), 'JPEG')  # unlabelled: never read
    return tmp_path, colours


def test_tinyimagenet(tiny):
    root, colours = tiny
    r = il.load_tinyimagenet(str(root))
    check_raw(r, 9, 4, (3, 64, 64))
    assert r.classes == sorted(WNIDS)  # class i = i-th wnid in sorted order
    assert r.y_train.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert r.y_test.tolist() == [1, 2, 0, 1]  # val is the test set, labelled by val_annotations.txt
    for x, y in ((r.x_train, r.y_train), (r.x_test, r.y_test)):  # each image has its class's colour (JPEG: roughly)
        got = x.float().mean((2, 3))
        want = torch.tensor([colours[r.classes[c]] for c in y.tolist()], dtype=torch.float32)
        assert (got - want).abs().max() < 6
    spec = DATASETS['tinyimagenet']
    assert (spec.num_classes, spec.input_shape) == (200, (3, 64, 64))


def test_tinyimagenet_missing(tmp_path, tiny):
    check_missing(il.load_tinyimagenet, tmp_path / 'elsewhere', 'tinyimagenet', 'wnids.txt')
    root, _ = tiny
    (root / 'tiny-imagenet-200' / 'val' / 'val_annotations.txt').unlink()
    check_missing(il.load_tinyimagenet, root, 'tinyimagenet', 'val_annotations.txt')


# ---------------------------------------------------------------- COVID-CT
RED, GREEN, BLUE, WHITE = (255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 255)
SPLITS = {
    ('COVID', 'train'): ['2020.01.24.919183-p27-132.png', 'b%1.png', 'a2.jpg', 'c.png'],
    ('COVID', 'val'): ['v1.png'],
    ('COVID', 'test'): ['t1.png', 't2.png'],
    ('NonCOVID', 'train'): ['0.jpg', '1.png'],
    ('NonCOVID', 'val'): ['2.png'],
    ('NonCOVID', 'test'): ['3.png'],
}
SOURCES = {
    '2020.01.24.919183-p27-132.png': 'medRxiv 2020.01.24.919183',
    'b%1.png': 'Radiology X',
    'a2.jpg': 'medRxiv 2020.01.24.919183',
    'c.png': 'Lancet Y',
    'v1.png': 'Zeta',
    't1.png': 'Zeta',
    't2.png': 'Alpha',
}

TEST_SHADE = {'v1.png': 10, '2.png': 20, 't1.png': 30, 't2.png': 40, '3.png': 50}


@pytest.fixture
def covid(tmp_path):
    d = tmp_path / 'COVID-CT'
    for (k, s), names in SPLITS.items():
        folder = d / 'Images-processed' / f'CT_{k}'
        for n in names:
            if s != 'train':  # val/test: a solid shade per image, to check the test order
                save(folder / n, (300, 260), (TEST_SHADE[n], 0, 0))
            elif n.endswith('.png'):  # wide: stripes red | green | blue | white, so the centre crop is green | blue
                stripes(folder / n, 448, 224, [RED, GREEN, BLUE, WHITE])
            else:
                save(folder / n, (500, 300), (90, 90, 90), 'JPEG')
        (d / 'Data-split' / k).mkdir(parents=True, exist_ok=True)
        (d / 'Data-split' / k / f'{s}CT_{k}.txt').write_text('\n'.join(names) + '\n\n')
    save(d / 'Images-processed' / 'CT_COVID' / 'unused.png', (50, 50), RED)  # not in any split list
    pd.DataFrame(
        {'File name': list(SOURCES), 'Patient ID': range(len(SOURCES)), 'Source': list(SOURCES.values())}
    ).to_csv(d / 'COVID-CT-MetaInfo.csv', index=False)
    return tmp_path


def test_covidct(covid):
    r = il.load_covidct(str(covid))
    check_raw(r, 6, 5, (3, 224, 224))
    assert r.classes == ['NonCOVID', 'COVID']
    assert r.y_train.tolist() == [1, 1, 1, 1, 0, 0]  # He's train split: COVID list, then NonCOVID
    assert r.y_test.tolist() == [1, 0, 1, 1, 0]  # He's val (COVID, NonCOVID) then He's test
    assert r.groups_test['split'].tolist() == [0, 0, 1, 1, 1]
    assert r.x_test[:, 0, 100, 100].tolist() == [10, 20, 30, 40, 50]  # images in the same order as the labels
    src = r.groups_train['source']
    assert isinstance(src, np.ndarray) and src.dtype == np.int64
    # sources sorted by name: 'Lancet Y' 0, 'Radiology X' 1, 'medRxiv ...' 2; NonCOVID -1
    assert src.tolist() == [2, 1, 2, 0, -1, -1]
    img = r.x_train[0]  # 448×224 -> centre 224×224: green | blue
    assert img[:, 100, 20].tolist() == list(GREEN) and img[:, 100, 200].tolist() == list(BLUE)
    assert (r.x_train[2].float() - 90).abs().max() < 6  # a 500×300 JPEG, resized and cropped
    spec = DATASETS['covidct']
    assert (spec.num_classes, spec.input_shape) == (2, (3, 224, 224))
    assert spec.mean == (0.485, 0.456, 0.406) and spec.std == (0.229, 0.224, 0.225)


def test_covidct_at_128_for_the_10_layer_cnn(covid):
    r, r128 = il.load_covidct(str(covid)), il.load_covidct(str(covid), size=128)
    check_raw(r128, 6, 5, (3, 128, 128))
    assert r128.y_train.tolist() == r.y_train.tolist() and r128.y_test.tolist() == r.y_test.tolist()
    assert r128.groups_train['source'].tolist() == r.groups_train['source'].tolist()
    assert r128.x_test[:, 0, 60, 60].tolist() == [10, 20, 30, 40, 50]  # the same order, read at 128
    img = r128.x_train[0]  # 448×224 -> short side 128, centre 128×128: green | blue
    assert img[:, 60, 10].tolist() == list(GREEN) and img[:, 60, 120].tolist() == list(BLUE)
    spec = DATASETS['covidct128']
    assert (spec.num_classes, spec.input_shape, spec.mean, spec.std, spec.augment) == (
        2,
        (3, 128, 128),
        DATASETS['covidct'].mean,
        DATASETS['covidct'].std,
        'crop_flip',
    )
    assert torch.equal(spec.load(str(covid)).x_train, r128.x_train)
    assert il.covidct_train_files(str(covid)) == SPLITS[('COVID', 'train')] + SPLITS[('NonCOVID', 'train')]
    with pytest.raises(ValueError, match='size=64'):
        il.load_covidct(str(covid), size=64)
    check_missing(spec.load, covid / 'empty', 'covidct', 'trainCT_COVID.txt')


def test_covidct_errors(covid):
    check_missing(il.load_covidct, covid / 'empty', 'covidct', 'trainCT_COVID.txt')
    d = covid / 'COVID-CT'
    (d / 'Images-processed' / 'CT_NonCOVID' / '3.png').unlink()  # named in a split list, file gone
    check_missing(il.load_covidct, covid, 'covidct', '3.png')
    save(d / 'Images-processed' / 'CT_NonCOVID' / '3.png', (10, 10), WHITE)
    pd.DataFrame({'File name': ['c.png'], 'Source': ['Lancet Y']}).to_csv(d / 'COVID-CT-MetaInfo.csv', index=False)
    with pytest.raises(ValueError, match='no row'):  # training COVID images without a source
        il.load_covidct(str(covid))
    (d / 'COVID-CT-MetaInfo.csv').unlink()
    check_missing(il.load_covidct, covid, 'covidct', 'COVID-CT-MetaInfo.csv')


# ---------------------------------------------------------------- Landmarks
@pytest.fixture
def landmarks(tmp_path):
    d = tmp_path / 'landmarks'
    d.mkdir()
    train = pd.DataFrame(
        {
            'user_id': [104, 7, 104, 55, 7],
            'image_id': ['aa01', 'bb02', 'cc03', 'dd04', 'ee05'],
            'url': 'http://example.invalid',
            'class': [2027, 3, 3, 40, 2027],
        }
    )
    test = pd.DataFrame({'image_id': ['ff06', 'gg07'], 'url': 'x', 'class': [40, 5]})
    train.to_csv(d / 'train.csv', index=False)
    test.to_csv(d / 'test.csv', index=False)
    for i in list(train.image_id) + list(test.image_id):
        save(d / 'images' / f'{i}.jpg', (96, 128), (30, 160, 220), 'JPEG')
    stripes(
        d / 'images' / 'aa01.jpg', 192, 64, [RED, GREEN, BLUE], 'PNG'
    )  # written as PNG bytes under .jpg: PIL reads either
    return tmp_path


def test_landmarks(landmarks):
    r = il.load_landmarks(str(landmarks))
    check_raw(r, 5, 2, (3, 64, 64))
    assert r.classes == ['3', '5', '40', '2027']  # sorted numerically over train and test
    assert r.y_train.tolist() == [3, 0, 0, 2, 3] and r.y_test.tolist() == [2, 1]
    users = r.groups_train['user']
    assert users.tolist() == [2, 0, 2, 1, 0]  # 7 -> 0, 55 -> 1, 104 -> 2
    assert r.x_train[0, :, 32, 32].tolist() == list(GREEN)  # 192×64 centre crop is the middle stripe
    assert (r.x_train[1:].float().mean((0, 2, 3)) - torch.tensor([30.0, 160, 220])).abs().max() < 6
    spec = DATASETS['landmarks']
    assert (spec.num_classes, spec.input_shape, spec.augment) == (2028, (3, 64, 64), 'crop_flip')


def test_landmarks_missing(landmarks):
    check_missing(il.load_landmarks, landmarks / 'nope', 'landmarks', 'train.csv')
    (landmarks / 'landmarks' / 'images' / 'gg07.jpg').unlink()
    check_missing(il.load_landmarks, landmarks, 'landmarks', 'gg07.jpg')


# ---------------------------------------------------------------- shared reader
def test_read_images(tmp_path):
    stripes(tmp_path / 'tall.png', 50, 100, [RED, BLUE])
    a = il.read_image(tmp_path / 'tall.png', 20, 'center')
    assert (
        a.shape == (20, 20, 3)
        and a.dtype == np.uint8
        and a[10, 2].tolist() == list(RED)
        and a[10, 17].tolist() == list(BLUE)
    )
    b = il.read_image(tmp_path / 'tall.png', 20)  # 'resize' squashes the whole image
    assert b.shape == (20, 20, 3) and b[0, 2].tolist() == list(RED)
    Image.new('L', (8, 8), 77).save(tmp_path / 'grey.png')
    x = il.read_images([tmp_path / 'grey.png'] * 3, 8)
    assert x.shape == (3, 3, 8, 8) and x.dtype == torch.uint8 and (x == 77).all()
    assert torch.equal(il.read_images([tmp_path / 'grey.png'] * 3, 8, workers=2), x)


# ---------------------------------------------------------------- HWDigits-4 from the four real formats


def test_hwdigits_from_the_four_real_formats_to_domain_clients(mnistm):
    import numpy as np
    from scipy.io import savemat
    from test_loaders import images, labels, write_mnist_like, write_usps, MNIST_NAMES
    from fedrepro.data import load_federated
    from fedrepro.image_loaders import load_hwdigits

    root, _ = mnistm
    write_mnist_like(
        root,
        'MNIST',
        MNIST_NAMES,
        images(20, 1, 28, 28, 0)[:, 0],
        labels(20),
        images(10, 1, 28, 28, 1)[:, 0],
        labels(10),
    )
    write_usps(root / 'usps.bz2', images(12, 1, 16, 16, 2), labels(12) + 1)
    write_usps(root / 'usps.t.bz2', images(6, 1, 16, 16, 3), labels(6) + 1)
    for split, n in (('train', 15), ('test', 8)):
        x, d = images(n, 3, 32, 32, 4 + n), labels(n)
        savemat(
            root / f'{split}_32x32.mat',
            {'X': np.ascontiguousarray(x.transpose(2, 3, 1, 0)), 'y': np.where(d == 0, 10, d).reshape(-1, 1)},
        )
    raw = load_hwdigits(str(root))
    assert raw.x_train.shape == (20 + 12 + 5 + 15, 3, 32, 32) and raw.x_test.shape == (10 + 6 + 2 + 8, 3, 32, 32)
    assert np.bincount(raw.groups_train['domain']).tolist() == [20, 12, 5, 15]
    fd = load_federated('hwdigits', 'domain', 4, seed=0, data_root=str(root))
    assert sorted(fd.client_sizes().tolist()) == [5, 12, 15, 20]
    assert fd.mean == (0.5, 0.5, 0.5) and fd.augment is None
