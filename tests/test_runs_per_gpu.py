"""Many runs per GPU: each worker bound to its GPU, the count refused in one line however it is given, the same numbers
as one run at a time."""

import queue
import pytest
import torch
from fedrepro import results
from fedrepro.results import run_many, local_pool, runs_per_gpu_requested, RUNS_PER_GPU_ENV, RUNS_PER_GPU_DEFAULT


def test_a_worker_binds_to_the_next_gpu_of_its_queue(monkeypatch):
    bound, slots = [], queue.Queue()
    for g in (1, 0):
        slots.put(g)
    monkeypatch.setattr(torch.cuda, 'set_device', bound.append)
    results._worker_init(slots)
    results._worker_init(slots)
    results._worker_init()
    assert bound == [1, 0]


def test_every_gpu_gets_runs_per_gpu_workers():
    workers, gpus = local_pool(100, None, True, 3, 2, 16)
    assert workers == 6 and sorted(gpus) == [0, 0, 1, 1, 2, 2] and gpus[:3] == [0, 1, 2]


@pytest.mark.parametrize('bad', [0, -3, 2.0, '2', True])
def test_bad_runs_per_gpu_is_refused_in_one_line(bad, cpu_cfg):
    with pytest.raises(ValueError, match=r"^runs_per_gpu=.* is not allowed: an integer >= 1[^\n]*$"):
        run_many([cpu_cfg(rounds=1)], runs_per_gpu=bad)


def test_unset_it_is_four_runs_a_gpu_and_the_cpu_pool_is_unchanged(monkeypatch):
    """The measured default (bench/results/gpu_throughput.csv): 4 a GPU on cuda; on the CPU one worker per core, as
    before."""
    monkeypatch.delenv(RUNS_PER_GPU_ENV, raising=False)
    assert runs_per_gpu_requested() == RUNS_PER_GPU_DEFAULT == 4
    assert local_pool(100, None, True, 2, runs_per_gpu_requested(), 16) == (8, [0, 1] * 4)
    assert local_pool(100, None, False, 0, runs_per_gpu_requested(), 16) == (16, None)


def test_the_environment_sets_the_default(monkeypatch, cpu_cfg):
    monkeypatch.setenv(RUNS_PER_GPU_ENV, '4')
    assert runs_per_gpu_requested() == 4 and runs_per_gpu_requested(2) == 2
    monkeypatch.setenv(RUNS_PER_GPU_ENV, '-1')
    with pytest.raises(ValueError, match="FEDREPRO_RUNS_PER_GPU='-1' is not allowed"):
        run_many([cpu_cfg(rounds=1)])


def test_several_workers_compute_what_one_process_does(tmp_path, cpu_cfg):
    """Two single-thread workers against the runs one after another in this process at one thread, deterministic on in
    the workers."""
    cfgs = [cpu_cfg(rounds=2, seed=s) for s in (0, 1, 2)]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        pooled = run_many(cfgs, tmp_path / 'pool', workers=2, runs_per_gpu=3, deterministic=True)
        serial = run_many(cfgs, tmp_path / 'serial', workers=1)
    finally:
        torch.set_num_threads(threads)
    cols = ['round', 'test_acc', 'test_loss']
    for a, b in zip(pooled, serial):
        assert a.run_dir.name == b.run_dir.name and a.metrics[cols].equals(b.metrics[cols])
