"DP-SGD from the command line: dp_clip and dp_noise reachable with --set for any method, the privacy spent recorded, bad values refused by name in one line, an interrupted DP run resumed exactly."
import json, math
import pytest
from fedrepro.cli import main

TINY = ['run', '--dataset', 'mnist5k', '--partition', 'dirichlet', '--alpha', '0.5', '--num-clients', '4', '--clients-per-round', '2',
        '--model', 'mlp', '--set', 'hidden=[16]', '--batch-size', '32', '--lr', '0.05', '--rounds', '2', '--test-size', '200',
        '--device', 'cpu', '--no-progress']
DP = ['--set', 'dp_clip=1.0', '--set', 'dp_noise=0.8', '--set', 'dp_delta=1e-6']


@pytest.mark.parametrize('algorithm,params', [('fedavg', {}), ('fedprox', {'mu': 0.01})])
def test_dp_sgd_is_set_from_the_command_line_and_its_epsilon_recorded(algorithm, params, cli_run_with, tmp_path):
    m = cli_run_with([*TINY, '--algorithm', algorithm, *DP], params).set_index('round')
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    cfg = json.loads((run_dir / 'config.json').read_text())['config']
    assert (cfg['dp_clip'], cfg['dp_noise'], cfg['dp_delta']) == (1.0, 0.8, 1e-6)
    eps = m['dp_epsilon']
    assert 0 < eps[1] < eps[2] < math.inf                       # the busiest client's budget grows with its steps
    summary = json.loads((run_dir / 'summary.json').read_text())
    assert summary['dp_epsilon'] == eps[2] and summary['dp_delta'] == 1e-6


def test_a_run_without_dp_records_no_epsilon(cli_run_with, tmp_path):
    m = cli_run_with([*TINY, '--algorithm', 'fedavg'], {})
    (run_dir,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    assert 'dp_epsilon' not in m and 'dp_epsilon' not in json.loads((run_dir / 'summary.json').read_text())


@pytest.mark.parametrize('sets,field', [(['dp_clip=0'], 'dp_clip=0.0'), (['dp_clip=-1'], 'dp_clip=-1.0'), (['dp_clip=1', 'dp_noise=-0.1'], 'dp_noise=-0.1'),
                                        (['dp_noise=0.5'], 'dp_noise=0.5'), (['dp_clip=1', 'dp_delta=2'], 'dp_delta=2.0'),
                                        (['dp_clip=inf', 'dp_noise=1'], 'dp_noise=1.0')])
def test_a_bad_dp_value_is_refused_by_name(sets, field, capsys, tmp_path):
    with pytest.raises(SystemExit) as e: main([*TINY, '--algorithm', 'fedavg', *[a for s in sets for a in ('--set', s)], '--out', str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and f'{field} is not allowed' in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())                                   # refused before anything is written


def test_dp_sgd_is_refused_for_a_method_whose_loss_it_would_not_cover(capsys, tmp_path):
    with pytest.raises(SystemExit) as e: main([*TINY, '--algorithm', 'moon', '--set', 'dp_clip=1', '--out', str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and 'dp_clip=1.0 is not allowed: None for moon' in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())


def test_an_interrupted_dp_run_resumes_to_identical_metrics(resumes_identically):
    "Each client's DP steps (the accountant's history) and the noise stream survive a restart."
    from fedrepro.config import ExperimentConfig
    cfg = ExperimentConfig(dataset='mnist5k', partition='dirichlet', partition_params={'alpha': 0.5}, num_clients=4, clients_per_round=2,
                           model='mlp', model_params={'hidden': [16]}, algorithm='fedgc', local_steps=3, rounds=4, batch_size=32, lr=0.05,
                           test_size=200, device='cpu', dp_clip=1.0, dp_noise=0.5)
    resumes_identically(cfg, ['round', 'test_acc', 'test_loss', 'dp_epsilon'])
