"""The Flower adapters (#18): a method run as Flower apps in Flower's simulation ends with the engine's global model.
FedProx and FedReg, two rounds, four clients of the embedded digits with two a round. FedAvg is FedReg's path less its
synthesis and gets no simulation of its own (each costs a local Ray's start); SCAFFOLD, whose control variate must
survive in `context.state` as client 0 trains in both rounds, runs so in the Flower chapter, where a store that forgets
it is told apart. The engine runs at one torch thread, as each client does in the simulation, and the two then agree
bit for bit. At two threads the engine differs from itself at one by 1.5e-8 to 4.5e-8 on this config, and FedReg with
a full local epoch by 1.3e-4 (its FGSM steps take signs of gradients, which rounding can flip). The simulation tests
skip when Flower is not installed."""

import importlib.util
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
import pandas as pd
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


def check_against_engine(algorithm, **simulate_kw):
    """`algorithm` in Flower's simulation against the engine at one thread: the same schedule, the same model, the same
    messages; a wrong schedule told apart."""
    from fedrepro.flower import simulate

    cfg = ExperimentConfig(**BASE, algorithm=algorithm, params=PARAMS[algorithm])
    flower = simulate(cfg, **simulate_kw)
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
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine, 'sample_clients', lambda n, k, seed, t: sample_clients(n, k, seed + 1, t))
        wrong, _, wrong_rows = engine_run(cfg)
    assert [r['clients'].tolist() for r in wrong_rows] != schedule
    assert not torch.allclose(flower['x'], wrong.algo.x, atol=ATOL, rtol=0)


@needs_flwr
# fedprox: on a running cluster, below; scaffold: in the Flower chapter, where a forgetful store is told apart
def test_flower_simulation_ends_with_the_engines_model():
    "No Ray running: `simulate` starts a local one of 2 CPUs, and Flower shuts it down."
    import ray

    check_against_engine('fedreg')
    assert not ray.is_initialized()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def wait_gone(pattern: str, seconds: float = 20) -> list:
    "The ids of processes whose command line matches `pattern`, after waiting up to `seconds` for there to be none."
    t0 = time.monotonic()
    while (left := subprocess.run(['pgrep', '-f', pattern], capture_output=True, text=True).stdout.split()) and (
        time.monotonic() - t0 < seconds
    ):
        time.sleep(0.5)
    return left


def started_in(home: Path, seconds: float = 20) -> list:
    """The ids of processes run with `home` as their HOME (a SuperLink and what it started), after waiting up to
    `seconds` for there to be none."""
    import psutil

    def left():
        found = []
        for p in psutil.process_iter():
            with contextlib.suppress(psutil.Error, OSError):
                found += [p.pid] if p.environ().get('HOME') == str(home) else []
        return found

    t0 = time.monotonic()
    while (pids := left()) and time.monotonic() - t0 < seconds:
        time.sleep(0.5)
    return pids


@pytest.fixture
def ray_cluster():
    """A Ray cluster of 2 CPUs, started as the scale-out chapter starts one (`ray start --head`, here with `--block`
    and a temp dir of its own), its address yielded; stopped after by ending that process group, nobody else's."""
    temp = tempfile.mkdtemp(prefix='rh', dir='/tmp')  # short: Ray's socket paths must fit 107 characters
    port, log = free_port(), Path(temp + '.log')
    cmd = [str(Path(sys.executable).parent / 'ray'), 'start', '--head', '--block', f'--temp-dir={temp}']
    cmd += [f'--port={port}', '--num-cpus=2', '--num-gpus=0', '--include-dashboard=false', '--disable-usage-stats']
    with open(log, 'w') as f:
        head = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        t0 = time.monotonic()
        while 'Ray runtime started' not in log.read_text() and head.poll() is None and time.monotonic() - t0 < 120:
            time.sleep(0.5)
        assert 'Ray runtime started' in log.read_text(), log.read_text()[-3000:]
        yield f'127.0.0.1:{port}'
    finally:
        head.terminate()
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(head.pid, signal.SIGKILL)  # what --block left of its own group
        except ProcessLookupError:
            pass
        assert not wait_gone(temp), f'Ray processes of {temp} left running'
        shutil.rmtree(temp, ignore_errors=True)
        log.unlink(missing_ok=True)


@needs_flwr
def test_simulate_joins_a_running_ray_cluster_and_fails_fast(ray_cluster, monkeypatch):
    """With a cluster running (RAY_ADDRESS, as the scale-out chapter has it), `simulate` joins it without asking for
    resources and gives the engine's model; the cluster outlives it. When Flower's runtime crashes (no client actor fits
    99 CPUs), `simulate` raises one line naming the cause within seconds, its server thread ended."""
    import ray
    from fedrepro.flower import ray_for_flower, simulate

    monkeypatch.setenv('RAY_ADDRESS', ray_cluster)
    assert ray_for_flower() == 'cluster' and ray.cluster_resources()['CPU'] == 2
    ray.shutdown()
    check_against_engine('fedprox')
    assert not ray.is_initialized()
    assert ray_for_flower() == 'cluster'  # still running
    ray.shutdown()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError) as e:
        simulate(ExperimentConfig(**BASE), cpus_per_client=99)
    took = time.monotonic() - t0
    print(f'{took:.1f} s: {e.value}')
    assert took < 60 and '\n' not in str(e.value) and 'ActorPool is empty' in str(e.value)
    assert str(e.value).startswith('the Flower simulation of digits-iid-mlp-fedavg-s1-')
    assert not any('server_th' in t.name for t in threading.enumerate()), 'the server thread is left waiting'
    assert not ray.is_initialized()


def chapter_recipe() -> tuple[str, str, str, str]:
    "The Flower chapter's deployment recipe as written: the app module, its pyproject.toml, the run and stop commands."
    nb = json.loads((Path(__file__).parents[1] / 'nbs' / '17a_flower.ipynb').read_text())
    cells = [''.join(c['source']) for c in nb['cells']]
    (module,) = [s.removeprefix('#| eval: false\n') for s in cells if 'server = server_app(cfg)' in s]
    text = '\n'.join(cells)
    (toml,) = re.findall(r'```toml\n(.*?)```', text, re.S)
    bash = [b.strip() for b in re.findall(r'```bash\n(.*?)```', text, re.S)]
    (run,), (stop,) = [b for b in bash if b.startswith('flwr run')], [b for b in bash if b.startswith('pkill')]
    return module, toml, run, stop


@needs_flwr
def test_the_chapters_flwr_run_recipe_works_as_written(tmp_path):
    """The chapter's app folder and commands, offline, in a home and on ports of their own: `flwr run` starts 4
    SuperNodes, runs 20 rounds of SCAFFOLD and writes the engine's model and the metrics; the stop command ends the
    SuperLink it started."""
    module, toml, run_cmd, stop_cmd = chapter_recipe()
    app, home = tmp_path / 'fedrepro-app', tmp_path / 'home'
    app.mkdir()
    home.mkdir()
    (app / 'fedrepro_app.py').write_text(module)
    (app / 'pyproject.toml').write_text(toml)
    port, env = free_port(), {k: v for k, v in os.environ.items() if k not in ('FLWR_HOME', 'RAY_ADDRESS')}
    env.update(
        HOME=str(home),  # Flower's configuration and SuperLink state (~/.flwr), and the results (~/fedrepro_flower)
        PATH=f'{Path(sys.executable).parent}{os.pathsep}{env["PATH"]}',
        FLWR_LOCAL_SUPERLINK_HTTP_API_PORT=str(port),
        FLWR_LOCAL_CONTROL_API_PORT=str(free_port()),
        FLWR_TELEMETRY_ENABLED='0',
        FLWR_DISABLE_UPDATE_CHECK='1',
        RAY_ADDRESS='local',  # the simulation's own Ray, not a cluster someone started on this machine
    )
    superlink = f'flower-superlink.*--port {port}'
    try:
        p = subprocess.run(shlex.split(run_cmd), cwd=app, env=env, capture_output=True, text=True, timeout=500)
        log = p.stdout + p.stderr
        assert p.returncode == 0, log[-4000:]
        assert wait_gone(superlink, 0), 'the local SuperLink keeps running after the run'
    finally:
        subprocess.run(shlex.split(stop_cmd.replace('39091', str(port))), env=env)
        assert not wait_gone(superlink), 'the stop command left the SuperLink running'
        assert not started_in(home), 'the stop command left processes the SuperLink started'
    assert '(4 simulated SuperNodes)' in log and 'fedrepro: round 20/20, test_acc' in log, log[-4000:]
    assert 'default simulated SuperNodes changed from 10 to 2' in log, (
        "Flower no longer logs its node-count notice: drop the chapter's sentence on it"
    )
    (where,) = re.findall(r'fedrepro: final model and metrics in (\S+)', log)
    namespace = {}
    exec(module, namespace)
    cfg = namespace['cfg']
    assert Path(where) == home / 'fedrepro_flower' / cfg.run_name
    saved = torch.load(Path(where) / 'model.pt')
    metrics = pd.read_csv(Path(where) / 'metrics.csv')
    fed, _, _ = engine_run(cfg, cfg.rounds)
    assert torch.allclose(saved['x'], fed.algo.x, atol=ATOL, rtol=0), (saved['x'] - fed.algo.x).abs().max()
    assert list(metrics['round']) == list(range(1, 21)) and metrics['test_acc'].iloc[-1] == fed.evaluate()['test_acc']
    assert json.loads((Path(where) / 'config.json').read_text())['hash'] == cfg.hash


def test_flower_is_imported_only_when_used():
    code = (
        "import sys; sys.modules['flwr'] = None\n"  # as if Flower were not installed
        "from fedrepro.core import load_modules; load_modules()\n"
        "import fedrepro.flower as f\n"
        "from fedrepro.config import ExperimentConfig\n"
        "try: f.simulate(ExperimentConfig())\n"
        "except ImportError as e: print(e)"
    )
    p = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert (
        p.stdout.strip()
        == "fedrepro.flower needs Flower: pip install -e '.[flower]' (or pip install 'flwr[simulation]')"
    )


def test_a_second_flower_run_of_a_config_keeps_the_firsts_files(tmp_path):
    from fedrepro.flower import save_result

    cfg = ExperimentConfig(**BASE)
    res = lambda v: {'x': torch.full((3,), v), 'model': {}, 'history': [{'round': 1, 'clients': [0, 1]}]}
    folders = [save_result(res(v), cfg, tmp_path) for v in (1.0, 2.0, 3.0)]
    assert [f.name for f in folders] == [cfg.run_name, f'{cfg.run_name}-2', f'{cfg.run_name}-3']
    assert [float(torch.load(f / 'model.pt')['x'][0]) for f in folders] == [1.0, 2.0, 3.0]


@needs_flwr
def test_too_few_supernodes_are_said_while_waiting_then_refused_in_one_line():
    "The server says how many SuperNodes are online while it waits (no silent wait), then gives up naming the fix."
    import logging
    from fedrepro.flower import node_ids

    class TwoNodes:  # a grid where 2 SuperNodes came up for a config of 4 clients (Flower's default)
        def get_node_ids(self):
            return [11, 12]

    lines = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    logging.getLogger('flwr').addHandler(handler)
    try:
        with pytest.raises(
            ValueError, match=r'^nodes online=2 is not allowed: num_clients=4: one SuperNode per client'
        ):
            node_ids(TwoNodes(), 4, wait=0.5)
    finally:
        logging.getLogger('flwr').removeHandler(handler)
    assert any(line.startswith('fedrepro: 2 of 4 SuperNodes online, waiting up to') for line in lines), lines


def test_flower_refuses_local_model_evaluation_by_name():
    from fedrepro.flower import run_server

    with pytest.raises(ValueError, match="eval_local=True is not allowed: False under Flower"):
        run_server(None, ExperimentConfig(model='mlp', device='cpu', eval_local=True))
