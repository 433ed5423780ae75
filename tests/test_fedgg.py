"FedGG from the command line: every hyperparameter reachable with --set, every bad value refused by name in one line, its diagnostics recorded."
import pytest
from fedrepro.cli import main

TINY = ['run', '--dataset', 'mnist5k', '--partition', 'dirichlet', '--alpha', '0.5', '--num-clients', '5', '--clients-per-round', '5',
        '--model', 'mlp', '--algorithm', 'fedgg', '--batch-size', '64', '--momentum', '0.9', '--lr', '0.01', '--rounds', '3',
        '--device', 'cpu', '--no-progress']


def test_every_fedgg_hyperparameter_is_set_from_the_command_line_and_recorded(cli_run_with):
    m = cli_run_with(TINY, {'mu': 0.1, 'weight': 'fixed', 'lam': 0.001, 'grad': 'printed', 'cos_start_step': 3}).set_index('round')
    assert m.loc[1, 'corrected_steps'] == 0 and (m.loc[2:, 'corrected_steps'] > 0).all()      # no global direction in round 1
    assert (m.loc[2:, 'lam'] - 0.001).abs().max() < 1e-12 and m.loc[2:, 'cos'].between(-1, 1).all()
    assert m.loc[3, 'update_cos'] == m.loc[3, 'update_cos'] and m.loc[1, 'up_params'] == m.loc[1, 'down_params']   # a number; FedAvg's traffic


@pytest.mark.parametrize('key,value', [('mu', '-0.01'), ('weight', 'adaptve'), ('grad', 'autograd'), ('cos_start_step', '1'),
                                       ('lam', 'nan'), ('gamma', '0.9')])
def test_a_bad_fedgg_value_is_refused_by_name(key, value, capsys, tmp_path):
    with pytest.raises(SystemExit) as e: main([*TINY, '--set', f'{key}={value}', '--out', str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and (f"params['{key}']" in err or f"--set {key}=" in err) and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())                                   # refused before anything is written


def test_an_interrupted_fedgg_run_resumes_to_identical_metrics(resumes_identically):
    "The server's last update (for update_cos) and each client's last received model (its direction's origin) survive a restart."
    from fedrepro.config import ExperimentConfig
    cfg = ExperimentConfig(dataset='mnist5k', partition='dirichlet', partition_params={'alpha': 0.5}, num_clients=6, clients_per_round=3,
                           model='mlp', model_params={'hidden': [16]}, algorithm='fedgg', params={'mu': 0.1}, rounds=4, batch_size=64,
                           lr=0.01, momentum=0.9, device='cpu')
    resumes_identically(cfg, ['round', 'test_acc', 'test_loss', 'lam', 'cos', 'g_norm', 'update_cos', 'corrected_steps'])
