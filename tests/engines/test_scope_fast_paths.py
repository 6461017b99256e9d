"""The fast paths of :mod:`advisor.engines.common` and the vLLM scope agree with the straightforward code they replaced.

Each ``_reference_*`` function below is the code of commit c860c77 (per sample, per field: rank() called on every
sample, a frozenset built per sample with a generator, the histogram's ``_count``/``_sum`` read through
``Scope.counter``). Hypothesis draws small expositions whose labels collide on purpose: repeated series, empty
values, several models (also differing only in case), DP ranks, Ray replicas, priority series, bad ``le`` values,
NaN and ±Inf values. An exception is an outcome too. One change from c860c77: a rank's ``+Inf`` with ``-Inf`` is
unknown (``None``), where ``math.fsum`` made c860c77 raise ``ValueError`` (``_reference_counter``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.domain import Exposition, Histogram, Sample
from advisor.engines import vllm
from advisor.engines.common import Scope, Series, first_samples, wanted_names

NAMES = ("x_bucket", "x_count", "x_sum", "g", "c")
HIST = Series("x", "histogram", "", "")
GAUGE = Series("g", "gauge", "", "", scale=0.01)
COUNTER = Series("c", "counter", "", "", scale=1e-6)
TABLE = {"h": (HIST,), "g": (GAUGE,), "c": (COUNTER,)}
VALUES = st.sampled_from([0.0, -0.0, 1.0, 2.5, 7.0, -1.0, math.nan, math.inf, -math.inf, 1e300])
LABELS = st.fixed_dictionaries(
    {},
    optional={
        "model_name": st.sampled_from(["a", "A", "b", ""]),
        "model": st.sampled_from(["a", "t"]),
        "engine": st.sampled_from(["0", "1", "2", "10", "01", ""]),
        "dp_rank": st.sampled_from(["0", "1"]),
        "tp_rank": st.sampled_from(["0", "1"]),
        "priority": st.sampled_from(["", "1"]),
        "ReplicaId": st.sampled_from(["", "r1", "r2"]),
        "le": st.sampled_from(["0.1", "1", "1.0", "-0", "0", "+Inf", "NaN", "x"]),
        "pid": st.sampled_from(["1", "2"]),
    },
)


def expositions(names: tuple[str, ...]) -> st.SearchStrategy[dict[str, list[Sample]]]:
    sample = st.tuples(st.sampled_from(names), LABELS, VALUES)
    return st.lists(sample, max_size=40).map(_group)


def _group(drawn: list[tuple[str, dict[str, str], float]]) -> dict[str, list[Sample]]:
    out: dict[str, list[Sample]] = {}
    for name, labels, value in drawn:
        out.setdefault(name, []).append(Sample(name, labels, value))
    return out


def _sorted_histogram(scope: Scope, series: Series) -> dict[str, Histogram | None]:
    return dict(sorted(scope.histogram(series).items()))


def _outcome(read: Callable[[], object]) -> str:
    try:
        return repr(read())
    except ValueError as exc:
        return f"raises {exc!r}"


# --- the reference code (commit c860c77) ----------------------------------------------------------------------------


def _reference_first_samples(exposition: Exposition) -> tuple[dict[str, list[Sample]], list[str]]:
    out: dict[str, list[Sample]] = {}
    notes: list[str] = []
    for name, samples in exposition.items():
        seen: set[frozenset[tuple[str, str]]] = set()
        kept: list[Sample] = []
        for s in samples:
            key = frozenset((k, v) for k, v in s.labels.items() if v)
            if key not in seen:
                seen.add(key)
                kept.append(s)
        if len(kept) != len(samples):
            notes.append(f"{name}: {len(samples) - len(kept)} duplicate series ignored (the first sample kept)")
        out[name] = kept
    return out, notes


def _reference_models(scope: Scope, labels: tuple[str, ...], fold: bool) -> list[str]:
    seen: dict[str, str] = {}
    for name, samples in scope.exposition.items():
        if name not in WANTED:
            continue
        for s in samples:
            m = next((s.labels[x] for x in labels if s.labels.get(x) is not None), None)
            if m is None:
                continue
            key = m.casefold() if fold else m
            prev = seen.get(key)
            if prev is None or (prev != m and prev == prev.lower() and m != m.lower()):
                seen[key] = m
    return list(seen.values())


def _reference_gauge(scope: Scope, series: Series) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for s in scope.samples(series):
        r = scope.rank(s)
        prev = out.get(r)
        if math.isnan(s.value):
            out.setdefault(r, None)
        else:
            v = s.value * series.scale
            out[r] = v if prev is None else max(prev, v)
    return out


def _reference_counter(scope: Scope, series: Series, suffix: str = "") -> dict[str, float | None]:
    values: dict[str, list[float]] = {}
    for s in scope.samples(series, suffix):
        values.setdefault(scope.rank(s), []).append(s.value)
    # +Inf with -Inf: c860c77 raised ValueError (math.fsum); unknown since, as the window code reads such a sum
    return {
        r: None if any(math.isnan(v) for v in vs) or {math.inf, -math.inf} <= set(vs) else math.fsum(vs) * series.scale
        for r, vs in values.items()
    }


def _reference_histogram(scope: Scope, series: Series) -> dict[str, Histogram | None]:
    buckets: dict[str, dict[float, float]] = {}
    bad: set[str] = set()
    for s in scope.samples(series, "_bucket"):
        r = scope.rank(s)
        try:
            le = float(s.labels["le"])
        except (KeyError, ValueError):
            bad.add(r)
            continue
        if math.isnan(le) or math.isnan(s.value):
            bad.add(r)
            continue
        per_le = buckets.setdefault(r, {})
        per_le[le] = per_le.get(le, 0.0) + s.value
    counts = _reference_counter(scope, Series(series.name, "counter", "", "", series.match), "_count")
    sums = _reference_counter(scope, Series(series.name, "counter", "", "", series.match), "_sum")
    out: dict[str, Histogram | None] = {}
    for r in sorted(set(buckets) | bad | set(counts) | set(sums)):
        per_le = buckets.get(r, {})
        total = sums.get(r)
        if r in bad or math.inf not in per_le or total is None or (r in counts and counts[r] is None):
            out[r] = None
            continue
        count = counts.get(r)
        scaled = tuple((le * series.scale if math.isfinite(le) else le, c) for le, c in sorted(per_le.items()))
        out[r] = Histogram(
            buckets=scaled, count=count if count is not None else per_le[math.inf], sum=total * series.scale
        )
    return out


def _reference_ranks(scope: Scope) -> tuple[str, ...]:
    found: set[str] = set()
    for aliases in TABLE.values():
        for series in aliases:
            for suffix in ("_bucket", "_count", "_sum") if series.kind == "histogram" else ("",):
                found.update(scope.rank(s) for s in scope.samples(series, suffix))
    return tuple(sorted(found, key=lambda v: (0, int(v), "") if v.isascii() and v.isdigit() else (1, 0, v)))


def _reference_vllm_ranks(scope: vllm._VLLMScope) -> tuple[str, ...]:
    found = {
        scope.rank(s)
        for field, aliases in vllm.NAME_TABLE.items()
        if field != "process_start_time_seconds"
        for series in aliases
        for suffix in series.sample_names()
        for s in scope.samples(series, suffix[len(series.name) :])
        if not (series.name == "vllm:cache_config_info" and not vllm._names_rank(s))
    }
    return tuple(sorted(found, key=vllm._rank_order))


WANTED = wanted_names(TABLE)


# --- properties -----------------------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(expositions(NAMES))
def test_first_samples_keeps_what_the_per_sample_frozenset_kept(expo: dict[str, list[Sample]]) -> None:
    got, notes = first_samples(expo)
    want, want_notes = _reference_first_samples(expo)
    assert {k: [id(s) for s in v] for k, v in got.items()} == {k: [id(s) for s in v] for k, v in want.items()}
    assert notes == want_notes
    again, none = first_samples(got)  # a second pass returns the kept lists as they are
    assert none == [] and all(again[k] is got[k] for k in got)


@settings(max_examples=400, deadline=None)
@given(expositions(NAMES), st.sampled_from([None, "a", "b", "A"]), st.booleans(), st.booleans())
def test_scope_readings_equal_the_per_sample_code(
    expo: dict[str, list[Sample]], model: str | None, sglang_roles: bool, fold: bool
) -> None:
    labels = ("model_name", "model")
    roles: dict[str, object] = {"rank_label": "dp_rank", "replica_labels": ("tp_rank",)} if sglang_roles else {}
    scope = Scope(expo, wanted=WANTED, model_labels=labels, model=model, casefold_model=fold, **roles)  # type: ignore[arg-type]
    assert scope.all_models == _reference_models(scope, labels, fold)
    assert scope.ranks(TABLE) == _reference_ranks(scope)
    for series in (HIST, GAUGE, COUNTER):
        assert scope.ranked(series) == any(
            scope._rank_label is not None and scope._rank_label in s.labels
            for x in (("_bucket", "_count", "_sum") if series.kind == "histogram" else ("",))
            for s in scope.samples(series, x)
        )
    assert scope.gauge(GAUGE) == _reference_gauge(scope, GAUGE)
    assert _outcome(lambda: scope.counter(COUNTER)) == _outcome(lambda: _reference_counter(scope, COUNTER))
    for series in (HIST, Series("x", "histogram", "", "", scale=1e-3)):
        got = _outcome(partial(_sorted_histogram, scope, series))
        assert got == _outcome(partial(_reference_histogram, scope, series))


VLLM_NAMES = (
    "vllm:num_requests_running",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_to_first_token_seconds_count",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:cache_config_info",
    "process_start_time_seconds",
)


@settings(max_examples=400, deadline=None)
@given(expositions(VLLM_NAMES), st.sampled_from([None, "a", "b"]))
def test_vllm_ranks_and_readings_equal_the_per_sample_code(expo: dict[str, list[Sample]], model: str | None) -> None:
    scope = vllm._VLLMScope(expo, model)
    assert scope.vllm_ranks() == _reference_vllm_ranks(scope)
    for aliases in vllm.NAME_TABLE.values():
        for series in aliases:
            suffixes = ("_bucket", "_count", "_sum") if series.kind == "histogram" else ("",)
            want = any(vllm._names_rank(s) for x in suffixes for s in scope.samples(series, x))
            assert scope.ranked(series) == want
            if series.kind == "histogram":
                got = _outcome(partial(_sorted_histogram, scope, series))
                assert got == _outcome(partial(_reference_histogram, scope, series))
            elif series.kind == "gauge":
                assert scope.gauge(series) == _reference_gauge(scope, series)
