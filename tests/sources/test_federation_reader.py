"""``FederationReader`` (the cached reading of ``/federate`` answers) against the reference reading,
``groups_from_federation``: for generated answers read one after another by one reader — escaped label values,
missing families, several engines per instance, target labels from ``up``, series that appear and vanish, NaN and
±Inf, malformed lines — both give the same groups, or raise the same error."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.engines import get_adapter
from advisor.errors import ParseError
from advisor.observe import observe
from advisor.sources.prometheus import FederationReader, FirstSamples, MatrixHistories, groups_from_federation

FAMILIES = (
    "vllm:num_requests_running",
    "vllm:kv_cache_usage_perc",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:prompt_tokens_total",
)
VALUES = ("0", "1", "3.5", "1e+06", "NaN", "+Inf", "-Inf", "1.7962129528812132e+09")
LABEL_VALUES = ("m", "meta-llama/Llama-3.1-8B-Instruct", 'a\\"q', "b\\\\", "c\\nd", "x y", "")


def _shape(outcome: MatrixHistories) -> Any:
    """Everything a group holds, in order, with values as ``repr`` (NaN equals NaN)."""
    return (
        [
            (
                g.target,
                list(g.labels.items()),
                [
                    (t, [(n, [(s.name, list(s.labels.items()), repr(s.value)) for s in ss]) for n, ss in e.items()])
                    for t, e in g.points
                ],
                [(t, repr(v)) for t, v in g.up],
                sorted(g.dropped_labels),
                g.error,
                g.down_jobs,
            )
            for g in outcome.groups
        ],
        outcome.warnings,
    )


def _outcome(read: Any, text: str) -> Any:
    try:
        return _shape(read(text))
    except ParseError as exc:
        return ("ParseError", str(exc))


@st.composite
def _series_pool(draw: st.DrawFn) -> list[tuple[str, str, str]]:
    """(instance, name, label text without the instance) for a small fleet."""
    instances = draw(st.lists(st.sampled_from(["e-0", "e-1", "10.0.0.5:8000", 'q\\"x', "e 2"]), min_size=1, max_size=4))
    pool: list[tuple[str, str, str]] = []
    for k, inst in enumerate(dict.fromkeys(instances)):
        engines = draw(st.lists(st.sampled_from(["0", "1", "2"]), min_size=1, max_size=2, unique=True))
        job = draw(st.sampled_from(["fleet", "other"]))
        # a target label of its own on every series and on up (pod=…): targets told apart by target labels only
        pod = [f'pod="p-{k}"'] if draw(st.booleans()) else []
        for name in draw(st.lists(st.sampled_from(FAMILIES), min_size=0, max_size=4, unique=True)):
            for engine in engines:
                model = draw(st.sampled_from(LABEL_VALUES))
                extra = [f'engine="{engine}"', f'job="{job}"', f'model_name="{model}"', *pod]
                if name.endswith("_bucket"):
                    extra.append(f'le="{draw(st.sampled_from(["0.1", "1", "+Inf"]))}"')
                if draw(st.booleans()):
                    extra.append('exported_job="e"')
                pool.append((inst, name, ",".join(extra)))
                if draw(st.integers(0, 7)) == 0:  # the same series to first_samples: an empty value is no label
                    # (with a pod label of its own: the series without it, one series once target labels go)
                    same = [x for x in extra if x not in pod] if pod else [*extra, 'pod=""']
                    pool.append((inst, name, ",".join(same)))
                if draw(st.integers(0, 11)) == 0:  # a second scrape job on this target: one series twice
                    other = "other" if job == "fleet" else "fleet"
                    pool.append((inst, name, ",".join(x if x != f'job="{job}"' else f'job="{other}"' for x in extra)))
        if draw(st.booleans()):
            up = [f'job="{job}"', *(['namespace="p"'] if draw(st.booleans()) else []), *pod]
            pool.append((inst, "up", ",".join(up)))
    return pool


def _line(draw: st.DrawFn, inst: str, name: str, rest: str, ts: int) -> str:
    where = draw(st.sampled_from(["first", "last", "middle"]))
    labels = rest.split(",") if rest else []
    at = {"first": 0, "last": len(labels), "middle": len(labels) // 2}[where]
    labels.insert(at, f'instance="{inst}"')
    value = draw(st.sampled_from(VALUES))
    return f"{name}{{{','.join(labels)}}} {value} {ts}"


_ODD = (
    'vllm:num_requests_running{instance="e-0"} 1',  # no timestamp
    'vllm:num_requests_running{instance="e-0"}\t1 1700000000000',  # a tab
    'vllm:num_requests_running{instance="e-0",bad} 1 1700000000000',  # malformed labels
    'vllm:num_requests_running{instance="e-0"} one 1700000000000',  # not a number
    'vllm:num_requests_running{job="x"} 1 1700000000000',  # no instance label
    'vllm:num_requests_running{instance="e-0"} 1 17e5',  # a timestamp not an integer
    'vllm:num_requests_running{instance="e-0"}  1 1700000000000 ',  # extra spaces
    '# HELP vllm:num_requests_running a comment naming instance="e-0" x y',
    "",
)


@st.composite
def _answers(draw: st.DrawFn) -> list[str]:
    pool = draw(_series_pool())
    answers = []
    for cycle in range(draw(st.integers(1, 4))):
        kept = [s for s in pool if draw(st.integers(0, 9)) > 0]  # a series vanishes now and then
        lines: list[str] = []
        base = 1_700_000_000_000 + 15_000 * cycle
        stamps = {inst: base + draw(st.sampled_from([0, 123, -5000])) for inst, _, _ in pool}
        last = None
        for inst, name, rest in sorted(kept, key=lambda s: (s[1], s[0])):
            if name != last:
                lines.append(f"# TYPE {name} untyped")
                last = name
            ts = stamps[inst] + (draw(st.sampled_from([0, 0, 0, 1000])) if name != "up" else 0)
            lines.append(_line(draw, inst, name, rest, ts))
            if draw(st.integers(0, 30)) == 0:  # a series line repeated (never from Prometheus; read as the reference)
                lines.append(lines[-1])
        if draw(st.integers(0, 5)) == 0:
            lines.insert(draw(st.integers(0, len(lines))), draw(st.sampled_from(_ODD)))
        answers.append("\n".join(lines) + ("\n" if draw(st.booleans()) else ""))
    return answers


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=_answers(), lifetime=st.sampled_from([1, 2, 64]), shapes=st.sampled_from([3, 500_000]))
def test_the_cached_reader_gives_the_reference_groups_read_after_read(
    answers: list[str], lifetime: int, shapes: int
) -> None:
    reader = FederationReader(max_shapes=shapes, lifetime_reads=lifetime)
    for text in answers:
        assert _outcome(reader.read, text) == _outcome(groups_from_federation, text)


def _observed(outcome: MatrixHistories) -> list[str]:
    adapter = get_adapter("vllm")

    def one(expo: Any) -> str:
        try:
            o = observe(expo, adapter, None, configured_model="m", strict=True)
        except ValueError as exc:  # the adapter's own failure (engines at +Inf and -Inf summed): the same on both
            return repr(exc)
        return repr((o.snapshot, o.error_reason, o.error_message, o.duplicate_series, o.models))

    return [repr((g.target, t, one(expo))) for g in outcome.groups for t, expo in g.points]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(answers=_answers())
def test_what_the_adapter_reads_of_each_point_is_the_same(answers: list[str]) -> None:
    """The cached reader hands families over as ``FirstSamples`` (first_samples then skips its repeated-series
    check) only when no series repeats: the observations, duplicate counts and notes included, are the same."""
    reader = FederationReader()
    for text in answers:
        try:
            reference = groups_from_federation(text)
        except ParseError:
            continue
        assert _observed(reader.read(text)) == _observed(reference)


def test_families_repeating_no_series_are_handed_over_as_first_samples() -> None:
    text = (
        'vllm:num_requests_running{engine="0",instance="a"} 1 1700000000000\n'
        'vllm:num_requests_running{engine="1",instance="a"} 1 1700000000000\n'
        'vllm:num_requests_waiting{engine="0",instance="a"} 1 1700000000000\n'
        'vllm:num_requests_waiting{engine="0",instance="a",pod=""} 1 1700000000000\n'
    )
    ((_, expo),) = FederationReader().read(text).groups[0].points
    assert type(expo["vllm:num_requests_running"]) is FirstSamples
    assert type(expo["vllm:num_requests_waiting"]) is list  # one series twice: first_samples keeps the first


def test_a_repeated_answer_parses_each_shape_once_and_the_next_cycle_none() -> None:
    text = "".join(
        f'vllm:num_requests_running{{engine="{e}",instance="e-{i}",job="fleet"}} {i} 1700000000000\n'
        for i in range(50)
        for e in "01"
    )
    reader = FederationReader()
    assert _outcome(reader.read, text) == _outcome(groups_from_federation, text)
    assert reader.misses == 2 and reader.fallbacks == 0  # two shapes, shared by the 50 instances
    again = text.replace(" 1700000000000", " 1700000015000")
    assert _outcome(reader.read, again) == _outcome(groups_from_federation, again)
    assert reader.misses == 2 and reader.fallbacks == 0
    (point,) = next(g for g in reader.read(again).groups if g.target == "e-3").points
    assert point[0] == 1700000015.0 and point[1]["vllm:num_requests_running"][1].value == 3.0


def test_two_series_equal_once_target_labels_are_dropped_take_the_reference_path_with_its_warning() -> None:
    text = (
        'up{instance="a:1",job="vllm"} 1 1700000000000\n'
        'vllm:num_requests_running{instance="a:1",job="vllm"} 3 1700000000000\n'
        'vllm:num_requests_running{instance="a:1",job="other"} 3 1700000000000\n'
    )
    reader = FederationReader()
    shaped = reader.read(text)
    assert reader.fallbacks == 1 and shaped.warnings and "repeated" in shaped.warnings[0]
    assert _shape(shaped) == _shape(groups_from_federation(text))


def _pods(stamp_ms: int, twice: str | None = None) -> str:
    """Three targets whose every series (and up) carries a pod label of its own; ``twice``: that target also holds
    its running series from a second scrape job."""
    lines = [f'up{{instance="e-{i}",job="vllm",pod="vllm-{i}-x"}} 1 {stamp_ms}' for i in range(3)]
    for name, engines in (("vllm:num_requests_running", "01"), ("vllm:kv_cache_usage_perc", "0")):
        for i in range(3):
            for e in engines:
                labels = f'engine="{e}",instance="e-{i}",job="vllm",model_name="m",pod="vllm-{i}-x"'
                lines.append(f"{name}{{{labels}}} {i + 0.5} {stamp_ms}")
                if twice == f"e-{i}" and name == "vllm:num_requests_running":
                    second = labels.replace('vllm",model', 'other",model')
                    lines.append(f"{name}{{{second}}} 9 {stamp_ms}")
    return "\n".join(lines) + "\n"


def test_targets_told_apart_only_by_a_pod_label_take_the_cached_path_with_the_reference_groups() -> None:
    """The pod label is a target label (it is on up), so every target's series are equal once it is dropped: the
    reference's one-pass reading gives way to its line-by-line one (which checks each target for repeats), and the
    cached reader, which checks each target too, reads them itself: same groups, families handed over as
    ``FirstSamples``, each shape parsed once."""
    reader = FederationReader()
    for k in range(3):
        text = _pods(1_700_000_000_000 + 15_000 * k)
        assert _outcome(reader.read, text) == _outcome(groups_from_federation, text)
        assert _observed(reader.read(text)) == _observed(groups_from_federation(text))
    assert reader.fallbacks == 0 and reader.misses == 3 * 4  # 3 targets × (3 series + up), on the first read only
    group = reader.read(_pods(1_700_000_045_000)).groups[1]
    assert group.target == "e-1" and group.dropped_labels >= {"pod", "job", "instance"}
    ((_, expo),) = group.points
    assert [s.labels for s in expo["vllm:num_requests_running"]] == [
        {"engine": "0", "model_name": "m"},
        {"engine": "1", "model_name": "m"},
    ]
    assert type(expo["vllm:num_requests_running"]) is FirstSamples


def test_a_pod_target_holding_a_series_twice_still_takes_the_reference_path_with_its_warning() -> None:
    """Caught at the end of a read whose shapes were all cached by earlier reads (e-2's series moved from one job to
    the other, then both), and on first sight of the second shape in a fresh cache."""
    reader = FederationReader()
    moved = "".join(
        line.replace('job="vllm",model', 'job="other",model')
        if "running" in line and 'instance="e-2"' in line
        else line
        for line in _pods(1_700_000_015_000).splitlines(keepends=True)
    )
    for text in (_pods(1_700_000_000_000), moved):  # a series whose job changed is not a repeat
        assert _outcome(reader.read, text) == _outcome(groups_from_federation, text)
    assert reader.fallbacks == 0
    for k in (2, 3):
        text = _pods(1_700_000_000_000 + 15_000 * k, twice="e-2")
        shaped = reader.read(text)
        assert _shape(shaped) == _shape(groups_from_federation(text))
        assert shaped.warnings and "e-2" in shaped.warnings[0] and "repeated" in shaped.warnings[0]
    assert reader.fallbacks == 2


def test_a_cache_overflowed_by_shapes_of_their_own_waits_one_lifetime_on_the_reference_path() -> None:
    reader = FederationReader(max_shapes=5, lifetime_reads=4)
    fallbacks = []
    for k in range(7):
        text = _pods(1_700_000_000_000 + 15_000 * k)  # 12 shapes, more than the cache holds
        assert _outcome(reader.read, text) == _outcome(groups_from_federation, text)
        fallbacks.append(reader.fallbacks)
    # read 1 fills the cache past its bound; reads 2-5 take the reference path; read 6 caches again; 7 waits again
    assert fallbacks == [0, 1, 2, 3, 4, 4, 5]


def test_the_cache_starts_afresh_after_its_lifetime_so_vanished_series_are_forgotten() -> None:
    reader = FederationReader(lifetime_reads=2)
    one = 'vllm:num_requests_running{instance="a",job="j"} 1 1700000000000\n'
    two = 'vllm:num_requests_running{instance="a",job="k"} 1 1700000000000\n'
    reader.read(one)
    reader.read(two)  # the second read starts a new generation: only the new shape is held
    assert reader.misses == 2
    reader.read(two)
    assert reader.misses == 2


@pytest.mark.parametrize(("shapes", "reads"), [(0, 1), (1, 0)])
def test_bounds_must_be_positive(shapes: int, reads: int) -> None:
    with pytest.raises(ValueError, match="positive"):
        FederationReader(max_shapes=shapes, lifetime_reads=reads)


def test_nan_values_survive_the_cache() -> None:
    text = 'vllm:kv_cache_usage_perc{instance="a"} NaN 1700000000000\n'
    (group,) = FederationReader().read(text).groups
    assert math.isnan(group.points[0][1]["vllm:kv_cache_usage_perc"][0].value)
