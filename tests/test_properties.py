"""Property-based tests (hypothesis): random valid inputs round-trip, random invalid ones raise the one-line error that
names them, never another exception, for the config, the per-seed file reader and the declarations."""

import json
import math
import pandas as pd
import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st
from fedrepro.config import ExperimentConfig
from fedrepro.repro import SEED_COLUMNS, Band, Claim, Compare, Elsewhere, write_seed_csv
from fedrepro.reporting import DamagedCSV, check_seed_csv
from fedrepro.evidence import read_seed_csv

# derandomized: the same examples on every run, so that CI cannot fail by the luck of a draw
QUICK = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# anything a user might pass where a value belongs: of every type, numbers at their edges included
ANYTHING = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


@st.composite
def configs(draw) -> ExperimentConfig:
    "A random valid config of the embedded data."
    n = draw(st.integers(1, 300))
    positive = st.floats(1e-6, 10, allow_nan=False)
    return ExperimentConfig(
        dataset=draw(st.sampled_from(['digits', 'mnist5k', 'digits-domains'])),
        partition=draw(st.sampled_from(['iid', 'dirichlet'])),
        model='mlp',
        algorithm=draw(st.sampled_from(['fedavg', 'fedprox', 'scaffold'])),
        num_clients=n,
        clients_per_round=draw(st.integers(1, n)),
        rounds=draw(st.integers(1, 10_000)),
        local_steps=draw(st.none() | st.integers(1, 1000)),
        batch_size=draw(st.integers(1, 4096)),
        lr=draw(positive),
        momentum=draw(st.floats(0, 0.99)),
        weight_decay=draw(st.floats(0, 1e-2)),
        seed=draw(st.integers(0, 2**31 - 1)),
        eval_every=draw(st.integers(1, 100)),
        device='cpu',
    )


@QUICK
@given(configs())
def test_a_valid_config_round_trips_through_json_with_its_hash(cfg):
    again = ExperimentConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg and again.hash == cfg.hash and again.run_name == cfg.run_name


FIELDS_AND_VALID = {  # a field and whether a value is one it takes
    'lr': lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0,
    'rounds': lambda v: type(v) is int and v >= 1,
    'num_clients': lambda v: type(v) is int and v >= 10,  # the default clients_per_round is 10
    'batch_size': lambda v: type(v) is int and v >= 1,
    'seed': lambda v: type(v) is int and v >= 0,
    'momentum': lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1,
    'dataset': lambda v: v in ('digits', 'mnist5k'),
    'weighting': lambda v: v in ('samples', 'uniform'),
    'params': lambda v: v == {},
}


@QUICK
@given(st.sampled_from(sorted(FIELDS_AND_VALID)), ANYTHING)
@example('params', {'': 0})  # a key the method does not have: named as params['']
def test_a_config_field_takes_its_values_and_refuses_the_rest_naming_it(field, value):
    if FIELDS_AND_VALID[field](value):
        assert getattr(ExperimentConfig(**{field: value}), field) == value
    else:
        with pytest.raises(
            ValueError, match=rf"^{field}(\[.*\])?=.* is not allowed: "
        ):  # params['lr']=... names the key
            ExperimentConfig(**{field: value})


NAMES = st.text(st.characters(codec='utf-8', exclude_categories=['Cs', 'Cc']), min_size=1, max_size=12).filter(
    lambda s: s.strip() == s
)


@st.composite
def seed_cells(draw) -> pd.DataFrame:
    "Per-seed cells as a job writes them: every seed of a setting with the same methods, one value a cell."
    settings_ = draw(st.lists(NAMES, min_size=1, max_size=2, unique=True))
    methods = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
    metrics = draw(st.lists(NAMES, min_size=1, max_size=2, unique=True))
    seeds = draw(st.lists(st.integers(0, 99), min_size=1, max_size=5, unique=True))
    number = st.floats(allow_nan=False, width=32) | st.integers(-(10**6), 10**6)
    rows = [
        dict(setting=s, method=m, seed=sd, metric=k, value=float(draw(number)), rounds=draw(st.integers(0, 500)))
        for s in settings_
        for sd in seeds
        for m in methods
        for k in metrics
    ]
    return pd.DataFrame(rows).assign(health='ok', detail='')[SEED_COLUMNS]


@QUICK
@given(seed_cells())
def test_a_per_seed_file_round_trips_and_passes_the_reports_check(tmp_path, cells):
    path = write_seed_csv(cells, tmp_path, 'toy_table1')
    check_seed_csv(path)
    back = read_seed_csv(path)
    pd.testing.assert_frame_equal(back[['setting', 'method', 'metric']], cells[['setting', 'method', 'metric']])
    assert back['seed'].tolist() == cells['seed'].tolist() and back['value'].tolist() == cells['value'].tolist()


BAD = {  # a column and a text it must not hold
    'seed': st.sampled_from(['-1', '1.5', 'x', '', 'nan']),
    'value': st.sampled_from(['nan', 'NaN', 'x', '1,5', '0x1p3']),
    'rounds': st.sampled_from(['-2', '3.0', 'many']),
    'health': st.text(max_size=6).filter(lambda h: h not in ('ok',)),
    'setting': st.just(''),
}


@QUICK
@given(seed_cells(), st.sampled_from(sorted(BAD)), st.data())
def test_a_damaged_per_seed_file_is_refused_naming_file_and_row(tmp_path, cells, column, data):
    from fedrepro.declare import Kind

    bad = data.draw(BAD[column].filter(lambda t: column != 'health' or t not in {k.value for k in Kind}))
    row = data.draw(st.integers(0, len(cells) - 1))
    path = tmp_path / 'toy_table1_seeds.csv'
    cells.astype({'seed': object, 'value': object, 'rounds': object}).assign(
        **{column: [bad if i == row else v for i, v in enumerate(cells[column])]}
    ).to_csv(path, index=False)
    with pytest.raises(DamagedCSV, match=f'^{path} is damaged at row '):
        check_seed_csv(path)


COMPARISON_FIELDS = ['setting', 'metric', 'a', 'b']


@QUICK
@given(st.lists(NAMES, min_size=4, max_size=4), st.sampled_from(['lower', 'higher']))
def test_a_comparison_of_names_is_declared_and_claimed(names, better):
    k = Compare(*names, better=better)
    assert Claim('C1', 'a claim', (k,)).checks == (k,)


@QUICK
@given(st.sampled_from(COMPARISON_FIELDS), ANYTHING.filter(lambda v: not isinstance(v, str)))
def test_a_comparison_refuses_what_is_not_a_name_naming_the_field(field, value):
    names = dict(zip(COMPARISON_FIELDS, 'sxab'))
    with pytest.raises(ValueError, match=f'^Compare.{field}=.* is not allowed: a str'):
        Compare(**{**names, field: value})


@QUICK
@given(st.floats(allow_nan=True), st.floats(allow_nan=True))
def test_a_band_takes_ordered_bounds_and_refuses_others(lo, hi):
    if lo < hi and (math.isfinite(lo) or math.isfinite(hi)):
        assert Band('s', 'm', 'k', lo, hi).hi == hi
    else:
        with pytest.raises(ValueError, match=r'^Band \(lo, hi\)='):
            Band('s', 'm', 'k', lo, hi)


@QUICK
@given(ANYTHING)
def test_a_claim_refuses_checks_that_are_not_comparisons(checks):
    with pytest.raises(ValueError, match='^claim C1 checks=.* is not allowed: a tuple of comparisons'):
        Claim('C1', 'a claim', checks if isinstance(checks, tuple) else (checks,))
    assert Claim('C1', 'a claim', (Elsewhere('why'),)).key == 'C1'
