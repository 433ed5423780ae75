"Run records, resume after interruption, determinism."

import json
import pandas as pd
import pytest
from fedrepro.runner import run

COLS = ['round', 'test_acc', 'test_loss', 'up_params', 'down_params']


class Stop(Exception):
    pass


def stop_after(k):
    def cb(row):
        if row['round'] == k:
            raise Stop

    return cb


def test_run_writes_its_records(tmp_path, cpu_cfg):
    cfg = cpu_cfg(rounds=2)
    run(cfg, tmp_path)
    d = tmp_path / cfg.run_name
    assert {'config.json', 'metrics.csv', 'summary.json', 'env.json', 'checkpoint.pt'} <= {p.name for p in d.iterdir()}
    m = pd.read_csv(d / 'metrics.csv')
    assert m['round'].tolist() == [0, 1, 2]
    assert set(m.columns) >= {'test_acc', 'test_loss', 'train_seconds', 'eval_seconds', 'up_params', 'down_params'}
    assert json.loads((d / 'config.json').read_text())['hash'] == cfg.hash
    env = json.loads((d / 'env.json').read_text())
    [seg] = env['segments']
    assert (
        env['seed'] == cfg.seed and seg['device'] == 'cpu' and 'torch' in seg and seg['from_round'] == 1 and seg['code']
    )
    s = json.loads((d / 'summary.json').read_text())
    assert s['best_acc'] == pytest.approx(m['test_acc'].max()) and s['final_acc'] == pytest.approx(
        m['test_acc'].iloc[-1]
    )


@pytest.mark.parametrize('k, every', [(1, 1), (3, 1), (3, 2)])
def test_interrupted_run_resumes_to_identical_metrics(tmp_path, cpu_cfg, k, every):
    cfg = cpu_cfg(rounds=4, checkpoint_every=every, partition='dirichlet', partition_params={'alpha': 0.3})
    full = run(cfg, tmp_path / 'a')
    with pytest.raises(Stop):
        run(cfg, tmp_path / 'b', callbacks=[stop_after(k)])
    resumed = run(cfg, tmp_path / 'b')
    pd.testing.assert_frame_equal(resumed.metrics[COLS], full.metrics[COLS])
    pd.testing.assert_frame_equal(
        pd.read_csv(tmp_path / 'b' / cfg.run_name / 'metrics.csv')[COLS],
        pd.read_csv(tmp_path / 'a' / cfg.run_name / 'metrics.csv')[COLS],
    )


def _run_in(out, cfg):
    return run(cfg, out).metrics


def test_two_processes_given_one_run_train_it_once(tmp_path, cpu_cfg):
    """The second waits on the run directory's lock, then returns the first's records: equal seconds mean one training.
    (spawn: a fork after torch started its threads can hang.)"""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    cfg = cpu_cfg(rounds=3)
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context('spawn')) as pool:
        a, b = [f.result() for f in [pool.submit(_run_in, tmp_path, cfg) for _ in range(2)]]
    pd.testing.assert_frame_equal(a, b)


def test_same_seed_same_metrics_other_seed_other_metrics(tmp_path, cpu_cfg):
    cfg = cpu_cfg(rounds=2)
    a, b = run(cfg, tmp_path / 'a'), run(cfg, tmp_path / 'b')
    pd.testing.assert_frame_equal(a.metrics[COLS], b.metrics[COLS])
    c = run(cfg.replace(seed=1), tmp_path / 'a')
    assert a.metrics['test_acc'].tolist() != c.metrics['test_acc'].tolist()


def test_a_checkpoint_of_another_config_is_refused(tmp_path, cpu_cfg):
    cfg = cpu_cfg(rounds=1)
    run(cfg, tmp_path)
    other = cpu_cfg(rounds=2)
    (tmp_path / other.run_name).mkdir()
    (tmp_path / other.run_name / 'checkpoint.pt').write_bytes((tmp_path / cfg.run_name / 'checkpoint.pt').read_bytes())
    with pytest.raises(ValueError, match='belongs to config'):
        run(other, tmp_path)


def test_the_run_directory_store_is_the_one_used(tmp_path, cpu_cfg):
    from fedrepro.engine import ClientStore, Federation

    store = ClientStore(tmp_path / 'states', max_in_memory=1)
    assert Federation(cpu_cfg(), store=store).store is store  # an empty store must not be replaced
