"""The vLLM adapter's indexed pass (``vllm._IndexedScope``) reads what the per-series reference (``vllm._VLLMScope``)
reads: every reading of every series in ``NAME_TABLE``, and the whole snapshot, on pages hypothesis draws; also when
the page takes over the layout (``vllm._Layout``) of an earlier page of the same label objects, with other values.

The pages mix what makes the index take another road: one rank or several (``engine``, Ray's ``ReplicaId``, Triton's
``version``, an empty ``engine``), each rank's samples together or interleaved, several models (the chosen one or
another), priority series, repeated bounds and bad ``le`` values, missing ``_count``/``_sum`` parts, NaN and ±Inf.
An exception is an outcome too and must be the same.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.domain import Sample
from advisor.engines import vllm
from advisor.engines.common import first_samples
from advisor.sources.selective_parser import FrozenLabels

NAMES = (
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:request_success_total",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:time_to_first_token_seconds_count",
    "vllm:time_to_first_token_seconds_sum",
    "vllm:cache_config_info",
    "process_start_time_seconds",
    "vllm:num_requests_waiting_by_reason",
)
VALUES = st.sampled_from([0.0, -0.0, 1.0, 2.5, 7.0, -1.0, math.nan, math.inf, -math.inf])
LABELS = st.fixed_dictionaries(
    {},
    optional={
        "model_name": st.sampled_from(["a", "b"]),
        "engine": st.sampled_from(["0", "1", "2", ""]),
        "ReplicaId": st.sampled_from(["", "r1"]),
        "version": st.sampled_from(["1"]),
        "priority": st.sampled_from(["", "1"]),
        "le": st.sampled_from(["0.1", "1", "1.0", "-0", "0", "+Inf", "NaN", "x"]),
        "reason": st.sampled_from(["capacity", "deferred"]),
        "num_gpu_blocks": st.sampled_from(["100", "None"]),
        "block_size": st.sampled_from(["16"]),
        "pid": st.sampled_from(["1", "2"]),
    },
)
LES = ("0.1", "1", "+Inf")


def _outcome(read: Callable[[], object]) -> str:
    try:
        return repr(read())
    except ValueError as exc:
        return f"raises {exc!r}"


@st.composite
def pages(draw: st.DrawFn) -> dict[str, list[Sample]]:
    """Random samples, plus (often) a regular DP histogram written rank by rank or interleaved."""
    out: dict[str, list[Sample]] = {}
    for name, labels, value in draw(st.lists(st.tuples(st.sampled_from(NAMES), LABELS, VALUES), max_size=30)):
        out.setdefault(name, []).append(Sample(name, labels, value))
    n_ranks = draw(st.integers(0, 3))
    if n_ranks:
        model = draw(st.sampled_from(["a", "b"]))
        ranks = [str(r) for r in range(n_ranks)]
        pairs = [(r, le) for r in ranks for le in LES]
        if draw(st.booleans()):  # interleaved: every rank's bucket of one bound, then the next bound
            pairs = [(r, le) for le in LES for r in ranks]
        base = "vllm:time_to_first_token_seconds"
        for r, le in pairs:
            labels = {"engine": r, "le": le, "model_name": model}
            out.setdefault(f"{base}_bucket", []).append(Sample(f"{base}_bucket", labels, draw(VALUES)))
        for part in ("_count", "_sum"):
            for r in ranks[: draw(st.integers(0, n_ranks))]:
                labels = {"engine": r, "model_name": model}
                out.setdefault(base + part, []).append(Sample(base + part, labels, draw(VALUES)))
        for r in ranks:
            name = "vllm:num_requests_running"
            out.setdefault(name, []).append(Sample(name, {"engine": r, "model_name": model}, draw(VALUES)))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages(), st.sampled_from([None, "a", "b"]))
def test_the_indexed_readings_equal_the_reference_readings(page: dict[str, list[Sample]], model: str | None) -> None:
    expo, _ = first_samples(page)
    ref = vllm._VLLMScope(expo, model)
    idx = vllm._IndexedScope(expo, model)
    assert idx.all_models == ref.all_models and idx.model == ref.model
    assert idx.vllm_ranks() == ref.vllm_ranks()
    for aliases in vllm.NAME_TABLE.values():
        for series in aliases:
            assert idx.ranked(series) == ref.ranked(series), series.name
            for name in series.sample_names():
                suffix = name[len(series.name) :]
                assert idx.samples(series, suffix) == ref.samples(series, suffix), name
                assert idx.ranked_samples(series, suffix) == ref.ranked_samples(series, suffix), name
            if series.kind == "histogram":
                got = _outcome(lambda s=series: sorted(idx.histogram(s).items()))
                assert got == _outcome(lambda s=series: sorted(ref.histogram(s).items())), series.name
            elif series.kind == "counter":
                assert _outcome(lambda s=series: idx.counter(s)) == _outcome(lambda s=series: ref.counter(s))
            elif series.kind == "gauge":
                assert idx.gauge(series) == ref.gauge(series), series.name


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pages(), st.sampled_from([None, "a", "b"]))
def test_the_indexed_snapshot_equals_the_reference_snapshot(page: dict[str, list[Sample]], model: str | None) -> None:
    expo, notes = first_samples(page)
    got = _outcome(lambda: vllm.read_snapshot(vllm._IndexedScope(expo, model), notes))
    assert got == _outcome(lambda: vllm.read_snapshot(vllm._VLLMScope(expo, model), notes))


def test_a_page_of_one_rank_is_read_without_a_rank_per_sample() -> None:
    """The index takes its one-rank road on the usual page (else the test above compares the reference with itself
    there): the family knows its rank and keeps no per-sample list."""
    base = "vllm:time_to_first_token_seconds_bucket"
    samples = [Sample(base, {"engine": "0", "le": le, "model_name": "m"}, 1.0) for le in LES]
    fam = vllm._IndexedScope({base: samples}, None)._index()[base]
    assert (fam.rank, fam.ranks, fam.named) == ("0", None, True)


# --- pages of the same label objects: a layout taken over ---------------------------------------------------------


@st.composite
def page_pairs(draw: st.DrawFn) -> tuple[dict[str, list[Sample]], dict[str, list[Sample]]]:
    """Two pages of the same names and label *objects* (read-only ``FrozenLabels``, as the parser's series cache hands
    them out at every scrape), each with its own values: a page drawn as :func:`pages` draws it, then its samples
    again with new values. A label set may be the same object twice in a family (a repeated series)."""
    first = draw(pages())
    frozen: dict[int, FrozenLabels] = {}
    shared: list[FrozenLabels] = []
    out1: dict[str, list[Sample]] = {}
    for name, samples in first.items():
        for s in samples:
            if shared and draw(st.integers(0, 9)) == 0:  # the same object as an earlier series of the family
                labels = draw(st.sampled_from(shared))
            else:
                labels = frozen.setdefault(id(s.labels), FrozenLabels(s.labels))
                shared.append(labels)
            out1.setdefault(name, []).append(Sample(name, labels, s.value))
        shared.clear()
    out2 = {name: [Sample(name, s.labels, draw(VALUES)) for s in samples] for name, samples in out1.items()}
    return out1, out2


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(page_pairs(), st.sampled_from([None, "a", "b"]), st.sampled_from(["models", "snapshot", "readings"]))
def test_a_page_of_the_same_label_objects_reads_its_own_values_through_the_layout_of_the_first(
    pair: tuple[dict[str, list[Sample]], dict[str, list[Sample]]], model: str | None, first_read: str
) -> None:
    """The second page takes over the first page's layout (the first having filled none, all or some of it) and
    reads what the reference reads of the second page, values and all."""
    page1, page2 = pair
    expo1, notes1 = first_samples(page1)
    scope1 = vllm.indexed_scope(expo1, model)
    if first_read == "snapshot":
        _outcome(lambda: vllm.read_snapshot(scope1, notes1))
    elif first_read == "readings":
        for series in vllm.NAME_TABLE["ttft"] + vllm.NAME_TABLE["requests_running"]:
            _outcome(lambda s=series: scope1.histogram(s) if s.kind == "histogram" else scope1.gauge(s))
    expo2, notes2 = first_samples(page2)
    assert notes2 == notes1
    scope2 = vllm.indexed_scope(expo2, model)
    if any(expo2.values()):  # taken over, not rebuilt (else this compares nothing new); an empty page is not kept
        assert scope2.layout is scope1.layout
    got = _outcome(lambda: vllm.read_snapshot(scope2, notes2))
    assert got == _outcome(lambda: vllm.read_snapshot(vllm._VLLMScope(expo2, model), notes2))
    ref = vllm._VLLMScope(expo2, model)
    for aliases in vllm.NAME_TABLE.values():
        for series in aliases:
            for name in series.sample_names():
                suffix = name[len(series.name) :]
                assert scope2.ranked_samples(series, suffix) == ref.ranked_samples(series, suffix), name


def test_a_layout_is_taken_over_only_by_the_same_label_objects() -> None:
    """Equal labels in other objects, or in plain dicts (which a caller may edit), make a layout of their own."""
    name = "vllm:num_requests_running"

    def page(labels: dict[str, str]) -> dict[str, list[Sample]]:
        return first_samples({name: [Sample(name, labels, 1.0)]})[0]

    labels = FrozenLabels({"engine": "0", "model_name": "m"})
    first = vllm.indexed_scope(page(labels), None).layout
    assert vllm.indexed_scope(page(labels), None).layout is first
    assert vllm.indexed_scope(page(labels), "m").layout is not first  # another model asked for
    assert vllm.indexed_scope(page(FrozenLabels(labels)), None).layout is not first
    plain = {"engine": "0", "model_name": "m"}
    assert vllm.indexed_scope(page(plain), None).layout is not vllm.indexed_scope(page(plain), None).layout
    one, two = FrozenLabels({"engine": "1", "model_name": "m"}), FrozenLabels({"engine": "2", "model_name": "m"})
    run, wait = name, "vllm:num_requests_waiting"
    cut = {run: [Sample(run, labels, 1.0)], wait: [Sample(wait, one, 1.0), Sample(wait, two, 1.0)]}
    recut = {run: [Sample(run, labels, 1.0), Sample(run, one, 1.0)], wait: [Sample(wait, two, 1.0)]}
    assert vllm.indexed_scope(cut, None).layout is not vllm.indexed_scope(recut, None).layout  # other families
