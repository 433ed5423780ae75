"""The reproduction protocol (v3): claims judged on per-seed tables built to hold, fail, sit in noise, or rest on runs
that failed."""

import itertools
import math
from pathlib import Path
import numpy as np
import pandas as pd
import pytest
from fedrepro.core import PAPERS
from fedrepro.repro import (
    SEED_COLUMNS,
    OK,
    Band,
    Claim,
    Compare,
    Elsewhere,
    Health,
    Interior,
    Judged,
    Kind,
    LOG_KINDS,
    Never,
    NotAbove,
    Outcome,
    Same,
    holm,
    judge,
    learned_level,
    loss_health,
    paper_numbers,
    plateau,
    run_health,
    sign_flip,
)

inf = math.inf


def cells(values: dict, metric='ACC', setting='S', health=None, rounds=30):
    health = health or {}
    return pd.DataFrame(
        [
            dict(
                setting=setting,
                method=m,
                seed=s,
                metric=metric,
                value=v,
                rounds=rounds,
                health=health.get((m, s), OK).kind.value,
                detail=health.get((m, s), OK).detail,
            )
            for m, vs in values.items()
            for s, v in enumerate(vs)
        ],
        columns=SEED_COLUMNS,
    )


def outcome(check, table, **kw):
    return judge([Claim('c', '', (check,), **kw)], table).iloc[0]


def test_papers_are_registered_and_their_numbers_ship():
    assert 'fedreg' in PAPERS
    for key in ('fedreg', 'fedgc', 'fedimp', 'fedgg', 'fedssd'):
        p = paper_numbers(key)
        assert len(p) > 40 and set(p['paper']) == {key}
    with pytest.raises(ValueError, match="paper='nope'"):
        paper_numbers('nope')


def test_sign_flip_is_the_exact_permutation_p():
    "Against a brute-force enumeration of the 2^n sign patterns, on random differences with ties and zeros."
    rng = np.random.default_rng(0)
    for n in (1, 3, 5, 7):
        for _ in range(20):
            d = np.round(rng.normal(0.1, 0.2, n), 2)
            sums = [sum(s * abs(x) for s, x in zip(signs, d)) for signs in itertools.product((1, -1), repeat=n)]
            assert sign_flip(d, 'greater') == pytest.approx(np.mean([s >= d.sum() - 1e-9 for s in sums]))
            assert sign_flip(d, 'less') == pytest.approx(np.mean([s <= d.sum() + 1e-9 for s in sums]))
    assert (
        sign_flip([0.2] * 5, 'greater') == 1 / 32
        and sign_flip([0.2] * 5, 'less') == 1.0
        and sign_flip([0] * 5, 'greater') == 1.0
    )


def test_run_health_is_typed_and_sees_a_collapse():
    c = lambda acc, loss=None: pd.DataFrame(
        dict(round=range(len(acc)), test_acc=acc, test_loss=loss or [2.3] * len(acc))
    )
    assert learned_level(0.1) == pytest.approx(0.2) and learned_level(0.5) == pytest.approx(0.625)
    assert run_health(c([0.1, 0.4, 0.7]), 0.1) is OK
    assert run_health(c([0.1, 0.15, 0.19]), 0.1).kind is Kind.NOT_LEARNED
    assert run_health(c([0.1, 0.5, 0.6], [2.3, 1e14, 1.0]), 0.1) == Health(
        Kind.DIVERGED, 'test loss 1e+14 at round 1, over 10× the initial 2.3'
    )
    assert run_health(c([0.1, 0.6, 0.1, 0.1, 0.1]), 0.1).detail.startswith('accuracy pinned')
    collapsed = run_health(
        c([0.1, 0.6, 0.7, 0.65, 0.15]), 0.1
    )  # the old rule: healthy, its best accuracy 0.7 taken at face value
    assert collapsed.kind is Kind.COLLAPSED and collapsed.failed
    assert loss_health([1.0, 2.0], 0.1) is OK and loss_health([1.0, float('nan')], 0.1).kind is Kind.DIVERGED
    assert plateau(c([0.1] + [0.5] * 9)) is OK and plateau(c([0.05 * r for r in range(10)])).kind is Kind.UNCONVERGED


def test_a_consistent_difference_is_reproduced_with_its_effect_and_its_reverse_is_not():
    t = cells({'A': [0.80, 0.82, 0.81, 0.83, 0.79], 'B': [0.70, 0.73, 0.71, 0.70, 0.72]})
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), t)
    assert v['outcome'] == 'reproduced' and v['basis'] == 'empirical' and v['comparisons'] == '1 reproduced of 1'
    assert (
        'sign-flip p 0.0312' in v['evidence']
        and '[0.800, 0.820, 0.810, 0.830, 0.790]' in v['evidence']
        and 'mean +0.098 [95% CI +0.0' in v['evidence']
    )
    assert outcome(Compare('S', 'ACC', 'B', 'A', 'higher'), t)['outcome'] == 'not reproduced'
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'lower'), t)['outcome'] == 'not reproduced'


def test_fewer_than_five_seeds_decide_nothing():
    "Three seeds decide nothing, however well they agree: a verdict rests on five at least."
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), cells({'A': [0.8, 0.8, 0.8], 'B': [0.7, 0.7, 0.7]}))
    assert v['outcome'] == 'not testable here' and '3 seeds to compare, at least 5 needed' in v['preconditions']


def test_a_mean_difference_inside_seed_noise_is_inconclusive():
    # the mean favours A by 0.06, but one seed says the opposite by as much: comparing means alone would call it
    # reproduced
    t = cells({'A': [0.9, 0.9, 0.6, 0.9, 0.9], 'B': [0.8, 0.8, 0.8, 0.8, 0.8]})
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), t)['outcome'] == 'inconclusive'


def test_failures_are_evidence_and_preconditions_are_not():
    bad = {('B', s): Health(Kind.NOT_LEARNED, 'best accuracy 0.110 < 0.200') for s in range(3)}
    t = cells({'A': [0.8, 0.82, 0.81, 0.8, 0.8], 'B': [0.11, 0.10, 0.12, 0.7, 0.7]}, health=bad)
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), t)  # the old rule dropped B's three seeds: "not testable"
    assert v['outcome'] == 'reproduced' and 'failures kept as evidence: B seed 0 not learned' in v['evidence']
    assert outcome(Compare('S', 'ACC', 'B', 'A', 'higher'), t)['outcome'] == 'not reproduced'
    unconverged = {('B', s): Health(Kind.UNCONVERGED, 'SGD: still rising') for s in range(5)}
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), cells({'A': [0.8] * 5, 'B': [0.7] * 5}, health=unconverged))
    assert (
        v['outcome'] == 'not testable here'
        and 'B seed 4: reference not converged: SGD: still rising' in v['preconditions']
    )


def test_round_counts_never_reached_are_censored_not_dropped():
    t = cells({'A': [2, 3, 2, 4, 3], 'C': [inf] * 5, 'D': [5, inf, 9, 8, 7]}, 'R0.5')
    assert outcome(Compare('S', 'R0.5', 'A', 'C'), t)['outcome'] == 'reproduced'
    assert outcome(Never('S', 'C', 'R0.5'), t)['outcome'] == 'reproduced'
    assert outcome(Never('S', 'D', 'R0.5'), t)['outcome'] == 'inconclusive'
    assert outcome(Never('S', 'A', 'R0.5'), t)['outcome'] == 'not reproduced'
    # neither reached it: no order on that seed (the old rule counted a tie at the budget)
    v = outcome(Compare('S', 'R0.5', 'D', 'C'), t)
    assert (
        v['outcome'] == 'not testable here'
        and 'D, C seed 1: never reached the threshold (in 30 rounds)' in (v['preconditions'])
    )


def test_a_longer_reference_orders_only_what_the_budgets_order():
    "SGD, FedReg's reference, runs 300 rounds where the others run 30: a never in 30 is not slower than SGD's 40."
    short = cells({'A': [2, 3, 2, 4, 3], 'B': [inf, inf, inf, 20, inf]}, 'R0.5')
    t = pd.concat([short, cells({'R': [40, 45, 38, 50, 42]}, 'R0.5', rounds=300)])
    v = outcome(Compare('S', 'R0.5', 'A', 'R'), t)
    assert v['outcome'] == 'reproduced' and '[2, 3, 2, 4, 3] vs R [40, 45, 38, 50, 42]' in v['evidence']
    v = outcome(Compare('S', 'R0.5', 'B', 'R'), t)
    assert v['outcome'] == 'not testable here'
    assert 'B seed 0: not reached in its 30 rounds, R took 40: their order is unknown' in v['preconditions']
    assert outcome(Compare('S', 'R0.5', 'A', 'B'), t)['outcome'] == 'reproduced'  # both ran 30: B censored at 30
    # a run that diverged at round 12 never reaches it: slower than one that took 20, not of unknown order
    diverged = {('F', s): Health(Kind.DIVERGED, 'test loss not finite from round 12') for s in range(5)}
    failed = pd.concat(
        [cells({'G': [20, 25, 18, 22, 21]}, 'R0.5'), cells({'F': [inf] * 5}, 'R0.5', health=diverged, rounds=12)]
    )
    assert outcome(Compare('S', 'R0.5', 'G', 'F'), failed)['outcome'] == 'reproduced'
    # a never counts only where the reference reached the threshold within the run's own rounds, or the run failed
    assert outcome(Never('S', 'F', 'R0.5', within='G'), failed)['outcome'] == 'reproduced'
    assert outcome(Never('S', 'B', 'R0.5', within='A'), t)['outcome'] == 'inconclusive'
    v = outcome(Never('S', 'B', 'R0.5', within='R'), t)
    assert (
        v['outcome'] == 'not testable here'
        and 'B seed 2: not reached in its 30 rounds, where R took 38' in (v['preconditions'])
    )


def test_bands_margins_equalities_and_sweeps():
    r = cells({'A': [3.1, 2.9, 3.4, 3.0, 3.2], 'B': [1.2, 1.6, 1.1, 1.3, 1.2], 'K': [2.0] * 5, 'F': [3.0] * 5}, 'ratio')
    assert outcome(Band('S', 'A', 'ratio', lo=2), r)['outcome'] == 'reproduced'
    assert outcome(Band('S', 'B', 'ratio', lo=2), r)['outcome'] == 'not reproduced'
    assert outcome(Band('S', 'K', 'ratio', 1.9, 2.1), r)['outcome'] == 'reproduced'  # a deterministic ratio
    assert outcome(Band('S', 'F', 'ratio', 2.4, 2.6), r)['outcome'] == 'not reproduced'
    # a difference above 0 but below the margin: the old NotAbove refuted it (p(above 0) < 0.05)
    near = cells({'A': [0.815, 0.83, 0.81, 0.82, 0.812], 'B': [0.8] * 5})
    assert outcome(NotAbove('S', 'ACC', 'A', 'B', 0.02), near)['outcome'] == 'inconclusive'
    assert outcome(NotAbove('S', 'ACC', 'A', 'B', 0.05), near)['outcome'] == 'reproduced'
    up = cells({'A': [10] * 5, 'B': [10] * 5, 'C': [20] * 5}, 'up')
    assert (
        outcome(Same('S', 'up', 'A', 'B'), up)['outcome'] == 'reproduced'
        and outcome(Same('S', 'up', 'A', 'C'), up)['outcome'] == 'not reproduced'
    )
    u = cells({'lo': [20, 22, inf, 21, 23], 'mid': [8, 9, 10, 9, 8], 'hi': [15, 18, 16, 17, 15]}, 'R0.5')
    assert outcome(Interior('S', 'R0.5', ('lo', 'mid', 'hi')), u)['outcome'] == 'reproduced'
    mono = cells({'lo': [5, 6, 5, 4, 5, 6], 'mid': [8, 9, 10, 9, 8, 9], 'hi': [15, 18, 16, 17, 15, 16]}, 'R0.5')
    assert outcome(Interior('S', 'R0.5', ('lo', 'mid', 'hi')), mono)['outcome'] == 'not reproduced'
    assert outcome(Elsewhere('the privacy chapter'), up)['outcome'] == 'not testable here'


def test_holm_and_the_count_of_comparisons():
    worse = cells({'A': [0.70, 0.71, 0.72, 0.70, 0.71], 'B': [0.80, 0.82, 0.81, 0.79, 0.83]})
    good = cells({'A': [0.80, 0.82, 0.81, 0.83, 0.79], 'B': [0.70, 0.73, 0.71, 0.70, 0.72]})
    t = pd.concat([worse, good.assign(setting='T'), good.assign(setting='U')])
    three = tuple(Compare(s, 'ACC', 'A', 'B', 'higher') for s in 'STU')
    v = judge([Claim('c', '', three)], t).iloc[0]  # protocol v2: inconclusive (sign-flip p 1/32 > 0.05/3)
    assert v['outcome'] == 'partly reproduced' and v['comparisons'] == '2 reproduced, 1 not reproduced of 3'
    assert judge([Claim('c', '', three[:1])], t)['outcome'].iloc[0] == 'not reproduced'
    # one setting not run no longer hides the judged ones
    v = judge(
        [Claim('c', '', (Compare('T', 'ACC', 'A', 'B', 'higher'), Compare('Z', 'ACC', 'A', 'B', 'higher')))], t
    ).iloc[0]
    assert v['outcome'] == 'inconclusive' and v['comparisons'] == '1 reproduced, 1 not testable here of 2'
    assert v['why'] == 'precondition'
    assert judge([Claim('c', '', (Compare('Z', 'ACC', 'A', 'B'),))], t, partial=True).empty
    assert isinstance(v['outcome'], Outcome) and v['outcome'] == 'inconclusive'


def test_holm_is_statsmodels_holm(monkeypatch):
    """Our step-down against statsmodels' on random p-values, families of one to twelve, some not primary
    (statsmodels' `multipletests` runs the garbage collector on every call: a third of a second in a test process)."""
    import gc
    from statsmodels.stats.multitest import multipletests

    monkeypatch.setattr(gc, 'collect', lambda *a: 0)
    rng = np.random.default_rng(0)
    for _ in range(300):
        k = int(rng.integers(1, 13))
        ps = rng.uniform(0, 0.08, k) ** rng.uniform(0.5, 2)
        judged = {i: Judged(Outcome.NOT_REPRODUCED, '', '', 1.0, float(p)) for i, p in enumerate(ps)}
        primary = [i for i in range(k) if rng.uniform() < 0.8] or [0]
        want = dict(zip(primary, multipletests(ps[primary], 0.05, 'holm')[0]))
        got = holm(judged, primary)
        assert all((got[i] is Outcome.NOT_REPRODUCED) == bool(want.get(i, False)) for i in range(k))


def test_a_decision_needs_four_fifths_of_the_seeds_either_way():
    carried = cells({'A': [0.95, 0.95, 0.95, 0.69, 0.69], 'B': [0.70] * 5})  # t p 0.038, three seeds of five
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), carried)
    assert v['outcome'] == 'inconclusive' and v['why'] == 'mixed'
    mirror = cells({'A': [0.45, 0.45, 0.45, 0.71, 0.71], 'B': [0.70] * 5})
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), mirror)['outcome'] == 'inconclusive'
    four = cells({'A': [0.45, 0.45, 0.45, 0.46, 0.71], 'B': [0.70] * 5})
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), four)['outcome'] == 'not reproduced'


def test_ratios_and_rounds_are_compared_on_the_log_scale():
    "A factor of 2 on every seed, whatever the size: equal on the log scale, so it decides at any level."
    t = cells({'A': [10, 100, 1000, 20, 200], 'B': [20, 200, 2000, 40, 400]}, 'R0.5')
    assert outcome(Compare('S', 'R0.5', 'A', 'B', log=True), t)['outcome'] == 'reproduced'
    assert 'ratio ×0.5 [95% CI ×0.5, ×0.5]' in outcome(Compare('S', 'R0.5', 'A', 'B', log=True), t)['evidence']
    assert outcome(Compare('S', 'R0.5', 'A', 'B'), t)['outcome'] == 'inconclusive'  # linear: one seed's spread
    for k in PAPERS:  # a paper sets the scale from its metrics
        for claim in PAPERS[k].claims:
            for c in claim.checks:
                if type(c) is Compare:
                    assert c.log == (PAPERS[k].metrics[c.metric].kind in LOG_KINDS), (k, claim.key)


def test_across_settings_the_test_is_welch_and_unpaired():
    a = cells({'A': [0.80, 0.82, 0.81, 0.83, 0.79]})
    b = cells({'A': [0.70, 0.72, 0.71, 0.69, 0.73, 0.7, 0.71]}).assign(setting='T')  # seven runs: no pairing
    v = outcome(Compare('S', 'ACC', 'A', 'A', 'higher', setting_b='T'), pd.concat([a, b]))
    assert (
        v['outcome'] == 'reproduced' and "Welch's t p" in v['evidence'] and '35 of 35 seed pairs for' in v['evidence']
    )


def test_robustness_names_the_seed_that_carries_a_claim():
    steady = cells({'A': [0.80, 0.82, 0.81, 0.83, 0.79], 'B': [0.70, 0.73, 0.71, 0.70, 0.72]})
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), steady)['robust'] == 'yes'
    one_off = cells({'A': [0.80, 0.81, 0.79, 0.80, 0.70], 'B': [0.70, 0.70, 0.70, 0.70, 0.71]})
    v = outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), one_off)
    assert v['outcome'] == 'reproduced' and v['robust'] == 'no: without seed 0, inconclusive'
    assert outcome(Compare('S', 'ACC', 'A', 'B', 'higher'), cells({'A': [0.8, 0.7] * 2 + [0.8]}))['robust'] == ''


def test_every_paper_declares_the_metrics_its_claims_name():
    for k in PAPERS:
        p = PAPERS[k]
        named = {c.metric for claim in p.claims for c in claim.checks if hasattr(c, 'metric')}
        assert named <= set(p.metrics), (k, named - set(p.metrics))
        assert all(m.accuracy in ('best', 'final', 'fixed') for m in p.metrics.values() if m.kind == 'accuracy'), k
        assert (
            set(p.feeds) <= set(p.artefacts)
            and (Path(__file__).resolve().parents[1] / 'nbs' / f'{p.chapter}.ipynb').is_file()
        ), k


def test_an_accuracy_at_a_round_the_paper_names_is_not_under_the_convergence_rule():
    """FedImp's ACC@10 (Table 3's ten-round column) is compared at the paper's own budget, so its comparisons do not
    `settle`; its final ACC, read where mini's rounds end, does."""
    unwrap = lambda k: unwrap(k.comparison) if getattr(k, 'comparison', None) is not None else k
    checks = [unwrap(k) for c in PAPERS['fedimp'].claims for k in c.checks]
    settles = {(k.metric, k.settles) for k in checks if isinstance(k, Compare)}
    assert ('ACC@10', False) in settles and ('ACC', True) in settles
    assert not {('ACC@10', True), ('ACC', False)} & settles


def test_a_paper_sets_its_scale_fields_and_no_other():
    "A Paper sets `log`, `settles` and `paper_effect` on its comparisons; a `Never(..., reached=True)` keeps its own."
    checks = [k for c in PAPERS['fedreg'].claims for k in c.checks]
    assert sum(isinstance(k, Never) and k.reached for k in checks) == 2  # claims 5b and 9: FedReg reaches R1.0
    assert any(isinstance(k, Compare) and k.settles for k in checks) and any(getattr(k, 'log', False) for k in checks)
