"The reproduction protocol: claims judged on per-seed tables built to hold, fail, sit in noise, or rest on runs that did not learn or diverged."
import math
import numpy as np, pandas as pd, pytest
from scipy import stats
from fedrepro.core import PAPERS
from fedrepro.repro import (SEED_COLUMNS, Band, Claim, Compare, Elsewhere, Interior, Never, NotAbove, Same, judge, learned_level,
                            loss_health, one_sided, paper_numbers, run_health)

inf = math.inf


def cells(values: dict, metric='ACC', setting='S', health=None, rounds=30):
    health = health or {}
    return pd.DataFrame([dict(setting=setting, method=m, seed=s, metric=metric, value=v, rounds=rounds, health=health.get((m, s), 'ok'))
                         for m, vs in values.items() for s, v in enumerate(vs)], columns=SEED_COLUMNS)


def outcome(check, table):
    return judge([Claim('c', '', (check,))], table).iloc[0]


def test_a_consistent_difference_is_reproduced_and_its_reverse_is_not():
    t = cells({'A': [0.80, 0.82, 0.81], 'B': [0.70, 0.73, 0.71]})
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), t)
    assert v['outcome'] == 'reproduced' and 'paired t' in v['evidence'] and '[0.800, 0.820, 0.810]' in v['evidence']
    assert outcome(Compare('S', 'ACC', 'B', 'A', 'higher'), t)['outcome'] == 'not reproduced'
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'lower'), t)['outcome'] == 'not reproduced'


def test_a_mean_difference_inside_seed_noise_is_inconclusive():
    # the mean favours A by 0.1, but one seed says the opposite by as much: comparing means alone would call it reproduced
    t = cells({'A': [0.9, 0.9, 0.6], 'B': [0.6, 0.6, 0.8]})
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), t)['outcome'] == 'inconclusive'


def test_unlearned_and_diverged_runs_are_left_out_and_named():
    bad = {('B', s): 'not learned: best accuracy 0.110 < 0.200' for s in range(3)}
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), cells({'A': [0.8, 0.82, 0.81], 'B': [0.11, 0.10, 0.12]}, health=bad))
    assert v['outcome'] == 'not testable here' and 'B seed 2: not learned' in v['preconditions'] and '0 healthy seeds' in v['preconditions']
    t = cells({'A': [0.8, 0.82, 0.81, 0.8], 'B': [0.7, 0.71, 0.7, 0.7]}, health={('A', 1): 'diverged: test loss not finite from round 9'})
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), t)
    assert v['outcome'] == 'reproduced' and 'seeds 0, 2, 3' in v['evidence'] and 'A seed 1: diverged' in v['preconditions']
    # two seeds are not evidence
    t = cells({'A': [0.8, 0.82, 0.81], 'B': [0.7, 0.71, 0.7]}, health={('A', 1): 'diverged: x'})
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), t)['outcome'] == 'not testable here'


def test_round_counts_never_reached_are_censored_not_dropped():
    t = cells({'A': [2, 3, 2], 'C': [inf, inf, inf], 'D': [5, inf, 9]}, 'R0.5')
    assert outcome(Compare('S', 'R0.5', 'A', 'C'), t)['outcome'] == 'reproduced'
    assert outcome(Compare('S', 'R0.5', 'C', 'C'), t)['outcome'] == 'inconclusive'
    assert outcome(Never('S', 'C', 'R0.5'), t)['outcome'] == 'reproduced'
    assert outcome(Never('S', 'D', 'R0.5'), t)['outcome'] == 'inconclusive'
    assert outcome(Never('S', 'A', 'R0.5'), t)['outcome'] == 'not reproduced'


def test_bands_margins_equalities_and_sweeps():
    r = cells({'A': [3.1, 2.9, 3.4], 'B': [1.2, 1.6, 1.1], 'K': [2.0, 2.0, 2.0], 'F': [3.0, 3.0, 3.0]}, 'ratio')
    assert outcome(Band('S', 'A', 'ratio', lo=2), r)['outcome'] == 'reproduced'
    assert outcome(Band('S', 'B', 'ratio', lo=2), r)['outcome'] == 'not reproduced'
    assert outcome(Band('S', 'K', 'ratio', 1.9, 2.1), r)['outcome'] == 'reproduced'        # a deterministic ratio
    assert outcome(Band('S', 'F', 'ratio', 2.4, 2.6), r)['outcome'] == 'not reproduced'
    close = cells({'A': [0.801, 0.795, 0.80], 'B': [0.80, 0.80, 0.798]})
    assert outcome(NotAbove('S', 'ACC', 'A', 'B', 0.02), close)['outcome'] == 'reproduced'
    assert outcome(NotAbove('S', 'ACC', 'A', 'B', 0.02), cells({'A': [0.8, 0.7, 0.76], 'B': [0.74, 0.76, 0.75]}))['outcome'] == 'inconclusive'
    up = cells({'A': [10, 10, 10], 'B': [10, 10, 10], 'C': [20, 20, 20]}, 'up')
    assert outcome(Same('S', 'up', 'A', 'B'), up)['outcome'] == 'reproduced' and outcome(Same('S', 'up', 'A', 'C'), up)['outcome'] == 'not reproduced'
    u = cells({'lo': [20, 22, inf], 'mid': [8, 9, 10], 'hi': [15, 18, 16]}, 'R0.5')
    assert outcome(Interior('S', 'R0.5', ('lo', 'mid', 'hi')), u)['outcome'] == 'reproduced'
    mono = cells({'lo': [5, 6, 5], 'mid': [8, 9, 10], 'hi': [15, 18, 16]}, 'R0.5')
    assert outcome(Interior('S', 'R0.5', ('lo', 'mid', 'hi')), mono)['outcome'] == 'not reproduced'
    assert outcome(Elsewhere('the privacy chapter'), up)['outcome'] == 'not testable here'


def test_a_claim_is_decided_by_its_weakest_comparison():
    t = pd.concat([cells({'A': [0.8, 0.82, 0.81], 'B': [0.7, 0.73, 0.71]}), cells({'A': [0.9, 0.9, 0.6], 'B': [0.6, 0.6, 0.8]}, setting='T')])
    both = Claim('c', '', (Compare('S', 'ACC', 'A', 'B', 'higher'), Compare('T', 'ACC', 'A', 'B', 'higher')))
    assert judge([both], t)['outcome'].iloc[0] == 'inconclusive'
    against = Claim('c', '', (Compare('S', 'ACC', 'B', 'A', 'higher'), Compare('U', 'ACC', 'A', 'B')))
    assert judge([against], t)['outcome'].iloc[0] == 'not reproduced'       # a contradiction outweighs a setting not run
    assert judge([Claim('c', '', (Compare('U', 'ACC', 'A', 'B'),))], t, partial=True).empty


def test_t_statistic_edge_cases():
    assert one_sided([1, 1, 1], 'greater') == (inf, 0.0) and one_sided([1, 1, 1], 'less')[1] == 1.0
    assert one_sided([0, 0, 0], 'less') == (0.0, 1.0)
    ref = stats.ttest_1samp([0.1, 0.2, 0.15], 0, alternative='greater')
    assert one_sided([0.1, 0.2, 0.15], 'greater') == pytest.approx((ref.statistic, ref.pvalue))
    assert one_sided([0.1, 0.2, 0.15], 'less')[1] == pytest.approx(1 - ref.pvalue)


def test_run_health():
    c = lambda acc, loss=None: pd.DataFrame(dict(round=range(len(acc)), test_acc=acc, test_loss=loss or [2.3] * len(acc)))
    assert learned_level(0.1) == pytest.approx(0.2) and learned_level(0.5) == pytest.approx(0.625)
    assert run_health(c([0.1, 0.4, 0.7]), 0.1) == 'ok'
    assert run_health(c([0.1, 0.15, 0.19]), 0.1).startswith('not learned')
    assert run_health(c([0.1, 0.5, 0.6], [2.3, 1e14, 1.0]), 0.1).startswith('diverged: test loss 1e+14')
    assert run_health(c([0.1, 0.6, 0.1, 0.1, 0.1]), 0.1).startswith('diverged: accuracy pinned')
    assert loss_health([1.0, 2.0], 0.1) == 'ok' and loss_health([1.0, float('nan')], 0.1).startswith('diverged')


def test_papers_are_registered_and_their_numbers_ship():
    assert 'fedreg' in PAPERS
    for key in ('fedreg', 'fedgc', 'fedimp', 'fedgg', 'fedssd'):
        p = paper_numbers(key)
        assert len(p) > 40 and set(p['paper']) == {key}
    with pytest.raises(ValueError, match="paper='nope'"): paper_numbers('nope')
