"""DP-SGD from the command line: dp_clip and dp_noise reachable with --set for any method, the privacy spent recorded,
bad values refused by name in one line, an interrupted DP run resumed exactly."""

import json
import math
import pytest
from fedrepro.cli import main

TINY = [
    'run',
    '--dataset',
    'mnist5k',
    '--partition',
    'dirichlet',
    '--alpha',
    '0.5',
    '--num-clients',
    '4',
    '--clients-per-round',
    '2',
    '--model',
    'mlp',
    '--set',
    'hidden=[16]',
    '--batch-size',
    '32',
    '--lr',
    '0.05',
    '--rounds',
    '2',
    '--test-size',
    '200',
    '--device',
    'cpu',
    '--no-progress',
]
DP = ['--set', 'dp_clip=1.0', '--set', 'dp_noise=0.8', '--set', 'dp_delta=1e-6']


@pytest.mark.parametrize('algorithm,params', [('fedavg', {}), ('fedprox', {'mu': 0.01})])
def test_dp_sgd_is_set_from_the_command_line_and_its_epsilon_recorded(algorithm, params, cli_run_with, tmp_path):
    m = cli_run_with([*TINY, '--algorithm', algorithm, *DP], params).set_index('round')
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    cfg = json.loads((run_dir / 'config.json').read_text())['config']
    assert (cfg['dp_clip'], cfg['dp_noise'], cfg['dp_delta']) == (1.0, 0.8, 1e-6)
    eps = m['dp_epsilon']
    assert 0 < eps[1] < eps[2] < math.inf  # the busiest client's budget grows with its steps
    summary = json.loads((run_dir / 'summary.json').read_text())
    assert summary['dp_epsilon'] == eps[2] and summary['dp_delta'] == 1e-6


def test_a_run_without_dp_records_no_epsilon(cli_run_with, tmp_path):
    m = cli_run_with([*TINY, '--algorithm', 'fedavg'], {})
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert 'dp_epsilon' not in m and 'dp_epsilon' not in json.loads((run_dir / 'summary.json').read_text())


@pytest.mark.parametrize(
    'sets,field',
    [
        (['dp_clip=0'], 'dp_clip=0.0'),
        (['dp_clip=-1'], 'dp_clip=-1.0'),
        (['dp_clip=1', 'dp_noise=-0.1'], 'dp_noise=-0.1'),
        (['dp_noise=0.5'], 'dp_noise=0.5'),
        (['dp_clip=1', 'dp_delta=2'], 'dp_delta=2.0'),
        (['dp_clip=inf', 'dp_noise=1'], 'dp_noise=1.0'),
    ],
)
def test_a_bad_dp_value_is_refused_by_name(sets, field, capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main([*TINY, '--algorithm', 'fedavg', *[a for s in sets for a in ('--set', s)], '--out', str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f'{field} is not allowed' in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # refused before anything is written


def test_dp_sgd_is_refused_for_a_method_whose_loss_it_would_not_cover(capsys, tmp_path):
    with pytest.raises(SystemExit) as e:
        main([*TINY, '--algorithm', 'moon', '--set', 'dp_clip=1', '--out', str(tmp_path)])
    err = capsys.readouterr().err
    assert (
        e.value.code == 2 and 'dp_clip=1.0 is not allowed: None for moon' in err and len(err.strip().splitlines()) == 1
    )
    assert not any(tmp_path.iterdir())


def test_an_interrupted_dp_run_resumes_to_identical_metrics(resumes_identically):
    "Each client's DP steps (the accountant's history) and the noise stream survive a restart."
    from fedrepro.config import ExperimentConfig

    cfg = ExperimentConfig(
        dataset='mnist5k',
        partition='dirichlet',
        partition_params={'alpha': 0.5},
        num_clients=4,
        clients_per_round=2,
        model='mlp',
        model_params={'hidden': [16]},
        algorithm='fedgc',
        local_steps=3,
        rounds=4,
        batch_size=32,
        lr=0.05,
        test_size=200,
        device='cpu',
        dp_clip=1.0,
        dp_noise=0.5,
    )
    resumes_identically(cfg, ['round', 'test_acc', 'test_loss', 'dp_epsilon'])


def _mg_client(mg=True):
    """A FedReg-with-MG client on a small MLP over embedded MNIST: its algorithm object, flat model and data, at the
    initial model."""
    from fedrepro.config import ExperimentConfig
    from fedrepro.data import load_federated
    from fedrepro.engine import Federation
    import fedrepro.fedreg  # noqa: F401 (registers FedReg)

    data = load_federated('mnist5k', 'iid', 4, 0)
    cfg = ExperimentConfig(
        model='mlp',
        model_params={'hidden': [32]},
        algorithm='fedreg',
        params={'mg': mg, 'eta_s': 0.05, 'gamma': 0.5},
        num_clients=4,
        clients_per_round=2,
        batch_size=1,
        local_steps=1,
        lr=0.1,
        device='cpu',
        test_size=200,
    )
    fed = Federation(cfg, data=data)
    return fed.algo, fed.fm, data, cfg.lr


def _uploads_and_map(images=6):
    """What the client code uploads for `images` one-image clients, and a function giving `fedreg_upload` of the same
    images under options."""
    import torch
    from fedrepro.privacy import observe_upload, observed_gradient, fedreg_upload
    from fedrepro.transforms import to_float

    algo, fm, data, lr = _mg_client()
    theta = fm.snapshot()
    seen = torch.stack(
        [
            observed_gradient(observe_upload(algo, fm, data, i, lr, {'x': theta}), theta[: fm.num_params], lr)
            for i in range(images)
        ]
    )
    fm.load_(theta)
    x, y, hp = to_float(data.x_train[:images]), data.y_train[:images], algo.hp
    up = lambda **kw: fedreg_upload(fm.model, x, y, lr, hp['eta_s'], algo.eta_p, hp['iters'], data.mean, data.std, **kw)
    rel = lambda a: float(((a - seen).norm(dim=1) / seen.norm(dim=1)).max().detach())
    return up, rel


def test_the_differentiable_mg_upload_is_what_the_client_uploads():
    import torch

    up, rel = _uploads_and_map()
    assert rel(up()) < 1e-4
    from fedrepro.privacy import fedreg_upload

    images = torch.rand(2, 1, 28, 28, dtype=torch.float64, requires_grad=True)  # and it is differentiable in the images
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10)).double()
    fedreg_upload(model, images, torch.tensor([3, 5]), 0.1, 0.05).pow(2).sum().backward()
    assert images.grad is not None and images.grad.abs().sum() > 0


@pytest.mark.parametrize('wrong', [{'project': False}, {'mg': False}])
def test_a_wrong_mg_upload_is_not_what_the_client_uploads(wrong):
    up, rel = _uploads_and_map()
    assert rel(up(**wrong)) > 1e-2


# ---- Figure C.4's attack on CT scans: the paper-scale path, on a few small files in COVID-CT's layout


def _tiny_covidct(root, n_covid=4, n_non=2):
    "A COVID-CT folder of a few solid-shade PNGs (two sources), in the public repository's layout."
    import numpy as np
    import pandas as pd
    from PIL import Image

    d = root / 'COVID-CT'
    names = {
        ('COVID', 'train'): [f'c{i}.png' for i in range(n_covid)],
        ('NonCOVID', 'train'): [f'n{i}.png' for i in range(n_non)],
        ('COVID', 'val'): ['cv.png'],
        ('NonCOVID', 'val'): ['nv.png'],
        ('COVID', 'test'): ['ct.png'],
        ('NonCOVID', 'test'): ['nt.png'],
    }
    rng = np.random.default_rng(0)
    for (k, s), files in names.items():
        (d / 'Images-processed' / f'CT_{k}').mkdir(parents=True, exist_ok=True)
        (d / 'Data-split' / k).mkdir(parents=True, exist_ok=True)
        for f in files:
            Image.fromarray(rng.integers(0, 256, (150, 140, 3), dtype=np.uint8)).save(
                d / 'Images-processed' / f'CT_{k}' / f
            )
        (d / 'Data-split' / k / f'{s}CT_{k}.txt').write_text('\n'.join(files) + '\n')
    covid = names[('COVID', 'train')] + ['cv.png', 'ct.png']
    pd.DataFrame({'File name': covid, 'Source': ['A' if i % 2 else 'B' for i in range(len(covid))]}).to_csv(
        d / 'COVID-CT-MetaInfo.csv', index=False
    )
    return root


def test_the_ct_attack_runs_the_paper_path_on_small_files(tmp_path):
    from fedrepro.privacy import fedreg_attack, INVERSION
    from fedrepro.fedreg import CT_CNN

    root = _tiny_covidct(tmp_path)
    small = dict(
        model_params={'width': 2}, num_clients=2, clients_per_round=2
    )  # the paper's network at width 2, the files' two sources
    scores, rec, true = fedreg_attack(
        CT_CNN, 'paper', 0, images=0, at_round=1, iters=2, data_root=str(root), indices=[4, 1, 2], chunk=2, **small
    )
    assert INVERSION[CT_CNN] == ('l2', 1e-8)
    assert (
        true.shape == (3, 3, 128, 128)
        and rec['FedAvg', math.nan].shape == true.shape
        and rec['FedReg with MG', math.nan].shape == true.shape
    )
    assert scores['image'].tolist() == [4, 1, 2] * 2 and list(dict.fromkeys(scores['method'])) == [
        'FedAvg',
        'FedReg with MG',
    ]
    assert scores[['psnr', 'ssim']].notna().all().all()
    with pytest.raises(ValueError, match=r'indices=\[9\] is not allowed: distinct training-image indices in 0\.\.5'):
        fedreg_attack(CT_CNN, 'paper', 0, at_round=1, iters=1, data_root=str(root), indices=[9], **small)
    with pytest.raises(ValueError, match='chunk=0 is not allowed'):
        fedreg_attack(CT_CNN, 'paper', 0, data_root=str(root), chunk=0, **small)
    with pytest.raises(FileNotFoundError, match='covidct'):  # no data: where to put it
        fedreg_attack(CT_CNN, 'paper', 0, data_root=str(tmp_path / 'nowhere'), **small)


# ---- every tensor an attack creates follows its model's device: on a CPU, every factory call in fedrepro names its
# device

_FACTORIES = (
    'zeros',
    'ones',
    'empty',
    'full',
    'rand',
    'randn',
    'randint',
    'randperm',
    'arange',
    'linspace',
    'eye',
    'tensor',
    'as_tensor',
    'scalar_tensor',
)


def _device_free_factories(under, skip=()):
    """A torch function mode recording each factory call made from a file under `under` (but not named in `skip`) that
    names no `device`, inherits none from a tensor argument and draws from no `generator` (a CPU stream, moved by its
    caller: the same numbers on every device)."""
    import sys
    import torch
    from pathlib import Path
    from torch.overrides import TorchFunctionMode

    factories = {getattr(torch, f) for f in _FACTORIES}

    class Record(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.calls = []

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in factories and not (
                {'device', 'generator'} & set(kwargs) or any(torch.is_tensor(a) for a in args)
            ):
                f = sys._getframe(1)
                name = f.f_code.co_filename
                if name.startswith(str(under)) and Path(name).name not in skip:
                    self.calls.append(f'{func.__name__} at {f.f_code.co_filename}:{f.f_lineno}')
            return func(*args, **kwargs)

    return Record()


def test_the_recorder_catches_a_factory_call_without_a_device():
    import torch

    with _device_free_factories(__file__) as rec:
        torch.randn(3)
        torch.zeros(2, dtype=torch.long)
        torch.tensor([0.5])  # each lands on the CPU whatever the model's device
        torch.randn(3, device='cpu')
        torch.zeros_like(torch.ones(2))
        torch.as_tensor(torch.ones(2))
        torch.randn(3, generator=torch.Generator())
    assert [c.split(' ')[0] for c in rec.calls] == ['randn', 'zeros', 'tensor', 'ones', 'ones']


def test_the_attacks_create_every_tensor_on_their_inputs_device():
    """Figure C.3's and Figure 5's attacks (DLG, IG with the plain, clipped and FedReg-with-MG uploads, iDLG, FedGC's
    view): a `torch.randn(shape)` without `device=` anywhere in fedrepro on their path would put a tensor on the CPU
    beside a cuda model."""
    from pathlib import Path
    import fedrepro
    from fedrepro.privacy import fedreg_attack, fedgc_attack
    from fedrepro.fedgc import FEDGC

    loading = (
        'data.py',
        'embedded.py',
        'loaders.py',
        'image_loaders.py',
        'partitions.py',
    )  # datasets built on the CPU, moved whole by Federation
    with _device_free_factories(Path(fedrepro.__file__).parent, loading) as rec:
        scores, recovered, true = fedreg_attack('EMNIST', 'smoke', 0, sigmas=(0.03,), images=2, iters=2)
        gc_scores, gc_rec, gc_true = fedgc_attack(
            FEDGC.config('CIFAR10-10', 'FedGC', 'smoke', seed=0), images=1, at_round=2, dlg_iters=1, ig_iters=2
        )
    assert rec.calls == []
    assert len(recovered) == 3 and len(gc_rec) == 8 and set(gc_scores['attack']) == {'DLG', 'IG'}
    assert all(
        t.device.type == 'cpu' for t in [true, gc_true, *recovered.values(), *gc_rec.values()]
    )  # handed back from GPU workers too


def test_idlg_reads_the_labels_off_the_classifiers_last_bias():
    """iDLG's labels by default from the classifier's last bias, whatever its name: a Linear head's 'classifier.bias',
    ResNet-9's 'classifier.linear.bias' (FedGC's CIFAR10-10, Figure 5 at paper scale)."""
    import torch
    from fedrepro.core import FlatModel
    from fedrepro.models import build_model
    from fedrepro.privacy import classifier_bias, dummy_gradients, idlg_labels, linear_model

    y = torch.tensor([3, 7])
    for model, shape, name in [
        (linear_model(), (1, 28, 28), 'classifier.bias'),
        (build_model('resnet9', (3, 32, 32), 10, channels=(4, 8, 8, 8)), (3, 32, 32), 'classifier.linear.bias'),
    ]:
        fm = FlatModel(model)
        targets = dummy_gradients(model, torch.rand(2, *shape), y, (0.5,) * shape[0], (0.5,) * shape[0]).detach()
        assert classifier_bias(fm) == name and idlg_labels(fm, targets).tolist() == [3, 7]
