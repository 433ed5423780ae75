"FedGC from the command line: every hyperparameter reachable with --set, every bad value refused by name, the diagnostics recorded."
import pytest
from fedrepro.cli import main

TINY = ['run', '--dataset', 'digits', '--partition', 'classes', '--classes-per-client', '1', '--num-clients', '6',
        '--clients-per-round', '3', '--model', 'hwdigits_cnn', '--algorithm', 'fedgc', '--local-steps', '2', '--batch-size', '10',
        '--rounds', '2', '--device', 'cpu', '--no-progress']
EVERY = {'C': 0.01, 'cgc': True, 'sgc': True, 'sgc_mode': 'gem_eps', 'sgc_eps': 0.002, 'cgc_solver': 'quadprog',
         'granularity': 'module', 'draws': 'passes'}


def test_every_fedgc_hyperparameter_is_set_from_the_command_line_and_the_diagnostics_recorded(cli_run_with):
    m = cli_run_with(TINY, EVERY)
    assert {'cgc_projected', 'sgc_shortcut', 'sgc_solved', 'sgc_fallback', 'sgc_active', 'min_inner', 'cgc_seconds', 'sgc_seconds'} <= set(m.columns)
    assert m['cgc_projected'].iloc[1] != m['cgc_projected'].iloc[1] and 0 <= m['cgc_projected'].iloc[2] <= 1   # none in round 1 (no g⁰)
    assert (m[['sgc_shortcut', 'sgc_solved', 'sgc_fallback']].iloc[1:].sum(axis=1) == 5).all()                  # the CNN's 5 modules


@pytest.mark.parametrize('key,value', [('C', '-0.1'), ('cgc', '1'), ('sgc', 'yes'), ('sgc_mode', 'loose'), ('sgc_eps', '0'),
                                       ('cgc_solver', 'scipy'), ('granularity', 'layer'), ('draws', 'replace'), ('margin', '0.1')])
def test_a_bad_fedgc_value_is_refused_by_name(key, value, capsys, tmp_path):
    with pytest.raises(SystemExit) as e: main([*TINY, '--set', f'{key}={value}', '--out', str(tmp_path)])
    err = capsys.readouterr().err
    assert e.value.code == 2 and (f"params['{key}']" in err or f"--set {key}=" in err) and 'is not allowed' in err and len(err.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())                                   # refused before anything is written
