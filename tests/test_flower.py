"""The Flower adapters (#18): a method run as Flower apps in Flower's simulation ends with the engine's global model.
Four methods, two rounds, four clients of the embedded digits with two a round (client 0 trains in both rounds, so
SCAFFOLD's control variate must survive in `context.state`). The engine runs at one torch thread, as each client
does in the simulation, and the two then agree bit for bit. At two threads the engine differs from itself at one by
1.5e-8 to 4.5e-8 on this config, and FedReg with a full local epoch by 1.3e-4 (its FGSM steps take signs of gradients,
which rounding can flip). The simulation tests skip when Flower is not installed."""

import importlib.util
import subprocess
import sys
import pytest
import torch
from fedrepro import engine
from fedrepro.config import ExperimentConfig
from fedrepro.engine import Federation, sample_clients

needs_flwr = pytest.mark.skipif(
    importlib.util.find_spec('flwr') is None, reason="Flower is not installed: pip install -e '.[flower]'"
)

BASE = dict(
    dataset='digits',
    model='mlp',
    num_clients=4,
    clients_per_round=2,
    rounds=2,
    batch_size=20,
    local_steps=8,
    lr=0.05,
    seed=1,
    device='cpu',
)
PARAMS = {'fedavg': {}, 'fedprox': {'mu': 0.1}, 'scaffold': {}, 'fedreg': {}}
ATOL = 1e-6


def engine_run(cfg, rounds=2):
    """The engine's rounds at one torch thread, as each Flower client trains (one CPU per Ray actor): other thread
    counts round differently."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fed = Federation(cfg)
        x0 = fed.algo.x.clone()
        return fed, x0, [fed.round(t) for t in range(1, rounds + 1)]
    finally:
        torch.set_num_threads(threads)


@needs_flwr
@pytest.mark.parametrize('algorithm', list(PARAMS))
def test_flower_simulation_ends_with_the_engines_model(algorithm, monkeypatch):
    from fedrepro.flower import simulate

    cfg = ExperimentConfig(**BASE, algorithm=algorithm, params=PARAMS[algorithm])
    flower = simulate(cfg)
    fed, x0, rows = engine_run(cfg)
    schedule = [r['clients'].tolist() for r in rows]
    assert [h['clients'] for h in flower['history']] == schedule and set(schedule[0]) & set(schedule[1])
    diff = (flower['x'] - fed.algo.x).abs().max().item()
    print(f'{algorithm}: largest |Flower - engine| = {diff:.3e}')
    assert torch.allclose(flower['x'], fed.algo.x, atol=ATOL, rtol=0), diff
    assert (flower['x'] - x0).abs().max() > 1e-3  # it trained
    assert flower['history'][-1]['test_acc'] == fed.evaluate()['test_acc']
    # what travelled is what the method declares: its uploads, and its broadcast once the server state exists
    assert [h['up_params'] for h in flower['history']] == [r['up_params'] for r in rows]
    assert all(h['down_params'] <= r['down_params'] for h, r in zip(flower['history'], rows))
    assert flower['history'][1]['down_params'] == rows[1]['down_params']
    # a wrong schedule (the clients of seed 2, the same initial model and batches) is told apart at this tolerance
    monkeypatch.setattr(engine, 'sample_clients', lambda n, k, seed, t: sample_clients(n, k, seed + 1, t))
    wrong, _, wrong_rows = engine_run(cfg)
    assert [r['clients'].tolist() for r in wrong_rows] != schedule
    assert not torch.allclose(flower['x'], wrong.algo.x, atol=ATOL, rtol=0)


def test_flower_is_imported_only_when_used():
    code = (
        "import sys; sys.modules['flwr'] = None\n"  # as if Flower were not installed
        "from fedrepro.core import load_modules; load_modules()\n"
        "import fedrepro.flower as f\n"
        "try: f.simulate(None)\n"
        "except ImportError as e: print(e)"
    )
    p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (
        p.stdout.strip()
        == "fedrepro.flower needs Flower: pip install -e '.[flower]' (or pip install 'flwr[simulation]')"
    )


def test_flower_refuses_local_model_evaluation_by_name():
    from fedrepro.flower import run_server

    with pytest.raises(ValueError, match="eval_local=True is not allowed: False under Flower"):
        run_server(None, ExperimentConfig(model='mlp', device='cpu', eval_local=True))
