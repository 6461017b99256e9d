"""The compact pickle of a scrape result (issue 15: the parent of ``run --workers N`` unpickles one per target per
cycle): :meth:`Histogram.__reduce__` sends the interned bounds and the packed counts, and :class:`EngineSnapshot`,
:class:`~advisor.collect.Collected` and :class:`~advisor.collect.CollectJob` one tuple of field values
(:func:`advisor.domain.reduce_frozen`).

The reference is what the pickle was before: a histogram rebuilt from its ``(bound, count)`` pairs
(``Histogram(h.buckets, h.count, h.sum)``), a dataclass rebuilt from its fields' values by its own ``__init__``.
Both must give the same values of the same types, NaN, ``-0.0`` and infinities included, and the same interned
bounds object."""

from __future__ import annotations

import dataclasses
import math
import pickle
from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.collect import Collected, CollectJob
from advisor.domain import EngineSnapshot, Histogram, PoolReading, RankValues, rebuild_frozen, reduce_frozen

ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
MAYBE_FLOAT = st.none() | ANY_FLOAT
LAYOUTS = [
    (0.001, 0.01, 0.1, 1.0, math.inf),
    (0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf),
    (math.inf,),
    (1.0, math.nan, math.inf),  # NaN bounds are never interned
]


@st.composite
def histograms(draw: st.DrawFn) -> Histogram:
    bounds = draw(st.sampled_from(LAYOUTS))
    counts = draw(st.lists(ANY_FLOAT, min_size=len(bounds), max_size=len(bounds)))
    return Histogram(zip(bounds, counts, strict=True), draw(ANY_FLOAT), draw(ANY_FLOAT))


TEXT = st.text(max_size=8)
MAYBE_HIST = st.none() | histograms()
RANKS = st.builds(
    RankValues, TEXT, MAYBE_FLOAT, MAYBE_FLOAT, MAYBE_FLOAT, MAYBE_FLOAT, MAYBE_FLOAT, MAYBE_FLOAT, MAYBE_FLOAT
)
POOLS = st.builds(PoolReading, pool=TEXT, usage_ratio=MAYBE_FLOAT, used=MAYBE_FLOAT, capacity=MAYBE_FLOAT)
SNAPSHOTS = st.builds(
    EngineSnapshot,
    engine=TEXT,
    model=st.none() | TEXT,
    kv_cache_usage_ratio=MAYBE_FLOAT,
    kv_cache_capacity_tokens=MAYBE_FLOAT,
    requests_running=MAYBE_FLOAT,
    requests_waiting=MAYBE_FLOAT,
    preemptions_total=MAYBE_FLOAT,
    prompt_tokens_total=MAYBE_FLOAT,
    generation_tokens_total=MAYBE_FLOAT,
    requests_finished_total=MAYBE_FLOAT,
    ttft=MAYBE_HIST,
    ttft_source=st.none() | TEXT,
    tpot=MAYBE_HIST,
    tpot_source=st.none() | TEXT,
    tpot_is_itl=st.booleans(),
    e2e=MAYBE_HIST,
    queue_time=MAYBE_HIST,
    process_start_time_seconds=MAYBE_FLOAT,
    engine_config=st.dictionaries(TEXT, TEXT, max_size=4),
    ranks=st.lists(RANKS, max_size=2).map(tuple),
    pools=st.lists(POOLS, max_size=2).map(tuple),
    requests_waiting_by_reason=st.dictionaries(TEXT, ANY_FLOAT, max_size=3),
    disaggregation_queues=st.dictionaries(TEXT, ANY_FLOAT, max_size=3),
    kv_cache_hybrid=st.none() | st.booleans(),
    ranks_excluded=st.lists(TEXT, max_size=2).map(tuple),
    replicas=st.lists(TEXT, max_size=2).map(tuple),
    missing=st.lists(TEXT, max_size=3).map(tuple),
)
COLLECTED = st.builds(
    Collected,
    ok=st.booleans(),
    snapshot=st.none() | SNAPSHOTS,
    engine=st.none() | TEXT,
    error_reason=st.none() | TEXT,
    error_message=st.none() | TEXT,
    duplicate_series=st.integers(min_value=0, max_value=10**6),
    duration_seconds=ANY_FLOAT,
    status_code=st.none() | st.integers(min_value=100, max_value=599),
)


def assert_identical(a: Any, b: Any, where: str = "") -> None:
    """``a`` and ``b`` hold the same values of the same types, recursively (NaN equals NaN; ``-0.0`` is not
    ``0.0``): stricter than ``==``, which a NaN anywhere fails and which takes ``-0.0`` for ``0.0``."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, float):
        assert (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b)), where
    elif isinstance(a, Histogram):
        assert_identical(a.bounds(), b.bounds(), f"{where}.bounds")
        assert_identical(a.counts(), b.counts(), f"{where}.counts")
        assert_identical(a.count, b.count, f"{where}.count")
        assert_identical(a.sum, b.sum, f"{where}.sum")
    elif isinstance(a, array):
        assert a.typecode == b.typecode and a.tobytes() == b.tobytes(), where
    elif isinstance(a, tuple | list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_identical(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), where
        for k in a:
            assert_identical(a[k], b[k], f"{where}[{k!r}]")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_identical(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    else:
        assert a == b, where


def old_histogram(h: Histogram) -> Histogram:
    """The histogram as the former pickle rebuilt it: from its ``(bound, count)`` pairs."""
    return Histogram(h.buckets, h.count, h.sum)


def old_frozen(obj: Any) -> Any:
    """A dataclass as the former pickle rebuilt it, its histograms rebuilt the old way too."""
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    for name, v in values.items():
        if isinstance(v, Histogram):
            values[name] = old_histogram(v)
        elif isinstance(v, EngineSnapshot):
            values[name] = old_frozen(v)
        elif isinstance(v, dict):
            values[name] = dict(v)
    return type(obj)(**values)


@settings(max_examples=300, deadline=None)
@given(histograms())
def test_a_histogram_crosses_a_pipe_as_the_old_pickle_rebuilt_it(h: Histogram) -> None:
    back = pickle.loads(pickle.dumps(h, protocol=pickle.HIGHEST_PROTOCOL))
    assert_identical(back, old_histogram(h))
    if all(b == b for b in h.bounds()):  # a NaN bound is never interned
        assert back.bounds() is old_histogram(h).bounds()  # the same interned tuple
    assert back.counts() is not h.counts()  # its own array


@settings(max_examples=100, deadline=None)
@given(COLLECTED)
def test_a_scrape_result_crosses_a_pipe_as_the_old_pickle_rebuilt_it(res: Collected) -> None:
    for protocol in (2, pickle.DEFAULT_PROTOCOL, pickle.HIGHEST_PROTOCOL):
        back = pickle.loads(pickle.dumps(res, protocol=protocol))
        assert_identical(back, old_frozen(res))
        if res.snapshot is not None:
            assert back.snapshot is not None
            assert_identical(back.snapshot, old_frozen(res.snapshot))


@settings(max_examples=100, deadline=None)
@given(
    st.builds(
        CollectJob,
        TEXT,
        TEXT,
        TEXT,
        st.none() | TEXT,
        st.none() | TEXT,
        ANY_FLOAT,
        ANY_FLOAT,
        st.integers(min_value=0),
        st.integers(min_value=0),
        st.integers(min_value=0),
    )
)
def test_a_job_crosses_a_pipe_as_the_old_pickle_rebuilt_it(job: CollectJob) -> None:
    assert_identical(pickle.loads(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)), old_frozen(job))


def test_a_batch_pickles_each_bounds_tuple_once() -> None:
    """Results sent together share the interned bounds: one copy per message, not one per histogram."""
    h = Histogram(zip(LAYOUTS[1], range(len(LAYOUTS[1])), strict=False), 11.0, 3.0)
    one = len(pickle.dumps([h], protocol=pickle.HIGHEST_PROTOCOL))
    ten = len(pickle.dumps([Histogram(h.buckets, h.count, float(i)) for i in range(10)], pickle.HIGHEST_PROTOCOL))
    assert ten < 10 * one - 9 * 8 * len(LAYOUTS[1])


def test_rebuilding_another_version_of_a_class_is_refused() -> None:
    cls, values = reduce_frozen(EngineSnapshot("vllm"))[1]
    assert rebuild_frozen(cls, values) == EngineSnapshot("vllm")
    n = len(dataclasses.fields(EngineSnapshot))  # the class's own count: a new field must not break the check
    with pytest.raises(ValueError, match=f"EngineSnapshot: {n - 1} values for {n} fields"):
        rebuild_frozen(cls, values[:-1])
