"""The evaluation step's fast paths agree with their references (issue 15, fleet scale).

* :func:`advisor.evaluate.target_state` remembers its answer on the (immutable) :class:`TargetView` per
  ``(now, quality)``; the reference is ``_target_state``, which computes it. A cycle asks twice per target.
* :func:`advisor.evaluate._still` stops at the first counter that moved; the reference is the list-building form
  it replaced (kept below).
* :class:`advisor.deployment_view.DeploymentView` builds its JSON when first read, and answers its own fields'
  keys from the fields.
* :class:`advisor.rules.over_provisioned.OverProvisionedRule` reads an evaluation once for its fire side, clear
  side and proposals (the lifecycle asks all three of one evaluation); a new evaluation is read anew.
* :func:`advisor.evaluate.running_context` answers again what it answered for the same context and engine configs
  (compared by value); the reference is ``_running_context``, which computes it.
"""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from advisor.domain import EngineSnapshot, TimedSnapshot
from advisor.evaluate import (
    STALL_COUNTERS,
    Quality,
    TargetView,
    _running_context,
    _still,
    _target_state,
    evaluate_deployment,
    redact_target_url,
    running_context,
    target_state,
)
from advisor.redact import redact_url
from advisor.rules.base import Evaluation
from advisor.rules.over_provisioned import OverProvisionedRule
from advisor.telemetry import START_TIME_TOLERANCE_SECONDS
from tests.factories import context, evaluation

URL = "http://e:8000/metrics"

_counter = st.one_of(st.none(), st.just(math.nan), st.sampled_from([0.0, 10.0, 11.0]))
_gauge = st.one_of(st.none(), st.sampled_from([0.0, 1.0, 4.0]))


@st.composite
def _snapshots(draw: st.DrawFn) -> EngineSnapshot:
    return EngineSnapshot(
        engine=draw(st.sampled_from(["vllm", "sglang"])),
        requests_running=draw(_gauge),
        requests_waiting=draw(_gauge),
        generation_tokens_total=draw(_counter),
        prompt_tokens_total=draw(_counter),
        requests_finished_total=draw(_counter),
        process_start_time_seconds=draw(st.sampled_from([None, 100.0, 100.0 + 2 * START_TIME_TOLERANCE_SECONDS])),
    )


@st.composite
def _views(draw: st.DrawFn) -> TargetView:
    times = sorted(draw(st.lists(st.sampled_from([0.0, 15.0, 30.0, 45.0, 60.0, 75.0, 90.0]), max_size=7)))
    snap = draw(_snapshots())
    # runs of one snapshot (a frozen engine repeats its page) with an occasional other one
    history = tuple(TimedSnapshot(URL, 1000.0 + t, draw(_snapshots()) if draw(st.booleans()) else snap) for t in times)
    up = draw(st.booleans())
    return TargetView(URL, up, None if up else "timeout", None, history)


_qualities = st.builds(
    Quality,
    interval_seconds=st.sampled_from([5.0, 15.0]),
    stale_after_intervals=st.sampled_from([1, 3]),
    frozen_after_seconds=st.sampled_from([30.0, 60.0]),
)
_nows = st.sampled_from([1000.0, 1060.0, 1090.0, 1200.0])


@given(_views(), st.lists(st.tuples(_nows, _qualities), min_size=1, max_size=6))
def test_the_remembered_target_state_is_what_the_reference_computes(
    view: TargetView, asks: list[tuple[float, Quality]]
) -> None:
    for now, q in asks:  # repeated and interleaved (now, quality) pairs: each answer is the one for its inputs
        assert target_state(view, now, q) == _target_state(view, now, q)


def test_the_remembered_state_follows_now_and_the_view() -> None:
    snap = EngineSnapshot(engine="vllm", requests_running=4, generation_tokens_total=1.0, prompt_tokens_total=2.0)
    history = tuple(TimedSnapshot(URL, 1000.0 + 15 * i, snap) for i in range(7))  # counters still for 90 s
    q = Quality(15.0, 3, 60.0)
    view = TargetView(URL, True, None, None, history)
    assert target_state(view, 1090.0, q)[0] == "stale"  # frozen
    assert target_state(view, 1090.0, Quality(15.0, 3, 600.0)) == ("fresh", "ok")  # another quality: recomputed
    assert target_state(view, 1200.0, q) == ("stale", "no new sample for 110s")  # another now: recomputed
    moved = EngineSnapshot(engine="vllm", requests_running=4, generation_tokens_total=9.0, prompt_tokens_total=2.0)
    moving = (*history[:-1], TimedSnapshot(URL, 1090.0, moved))
    assert target_state(TargetView(URL, True, None, None, moving), 1090.0, q) == ("fresh", "ok")  # a new view
    assert target_state(TargetView(URL, False, "timeout", None, history), 1090.0, q)[0] == "unavailable"


def _still_reference(a: EngineSnapshot, b: EngineSnapshot) -> bool:
    """``_still`` as it was before issue 15 (lists of pairs, then ``all``)."""

    def outstanding(s: EngineSnapshot) -> float:
        return (s.requests_running or 0.0) + (s.requests_waiting or 0.0)

    if outstanding(a) <= 0 or outstanding(b) <= 0:
        return False
    sa, sb = a.process_start_time_seconds, b.process_start_time_seconds
    if sa is not None and sb is not None and abs(sa - sb) > START_TIME_TOLERANCE_SECONDS:
        return False
    pairs = [(getattr(a, n), getattr(b, n)) for n in STALL_COUNTERS]
    known = [(x, y) for x, y in pairs if x is not None and y is not None and not math.isnan(x) and not math.isnan(y)]
    return bool(known) and all(x == y for x, y in known)


@given(_snapshots(), _snapshots())
def test_still_agrees_with_its_reference(a: EngineSnapshot, b: EngineSnapshot) -> None:
    assert _still(a, b) == _still_reference(a, b)


@given(_views(), _nows)
def test_the_view_answers_every_key_as_its_json_does(view: TargetView, now: float) -> None:
    _, dview = evaluate_deployment(context(), [view], now, 60.0, Quality(15.0))
    own = {k: dview[k] for k in ("capacity_model_error_ratio", "goodput_ratio", "max_model_len")}  # before the JSON
    js = dview.as_json()
    assert list(dview) == list(js) and len(dview) == len(js)
    for k, v in js.items():
        assert dview[k] == v or (v != v and dview[k] != dview[k])  # NaN is itself
    for k, v in own.items():
        assert v is js[k] or v == js[k]


_over = st.builds(
    evaluation,
    now=st.sampled_from([1000.0, 1015.0]),
    goodput=st.sampled_from([(None, None), (0.99, 0.99), (0.5, 0.5)]),
    replicas_up=st.sampled_from([1, 2]),
    requests_running=st.sampled_from([None, 0.0, 3.0, 200.0]),
    requests_waiting=st.sampled_from([None, 0.0, 5.0]),
    kv_cache_usage_ratio=st.sampled_from([None, 0.05, 0.95]),
    generation_tokens_per_second=st.sampled_from([None, 100.0]),
    prompt_tokens_per_second=st.sampled_from([None, 400.0]),
    requests_finished_per_second=st.sampled_from([None, 0.0, 2.0]),
    ctx=st.sampled_from([context(replicas=2), context(replicas=2, tensor_parallel_size=2)]),
)


@given(st.lists(_over, min_size=1, max_size=4))
def test_the_over_provisioned_reading_is_remembered_per_evaluation_only(evs: list[Evaluation]) -> None:
    rule = OverProvisionedRule()
    fresh = OverProvisionedRule()  # never remembers: each call on a new instance computes
    for ev in [*evs, *evs]:  # a new evaluation replaces the remembered one; an old one is read again
        first = rule.fires(ev)
        proposals = rule.propose(ev)  # adds tp_* evidence to its own copy
        assert rule.fires(ev) == first == OverProvisionedRule().fires(ev)
        assert rule.clears(ev) == OverProvisionedRule().clears(ev)
        assert proposals == fresh.propose(ev)
        fresh = OverProvisionedRule()


@given(st.sampled_from(["http://u:p@h:9/metrics?token=x", "admin:pw@127.0.0.1:9/metrics?t=1", "http://[::1]:80/m#f"]))
def test_the_remembered_redaction_is_redact_url(url: str) -> None:
    assert redact_target_url(url) == redact_url(url)
    assert redact_target_url(url) == redact_url(url)  # the remembered answer


_CONFIG_VALUES = {
    "gpu_memory_utilization": ["0.9", "0.5", "0.95"],
    "cache_dtype": ["auto", "fp8", "bfloat16"],
    "num_gpu_blocks_override": ["None", "4000"],
    "block_size": ["16"],
}
_configs = st.dictionaries(st.sampled_from(sorted(_CONFIG_VALUES)), st.just(""), max_size=4).flatmap(
    lambda keys: st.fixed_dictionaries({k: st.sampled_from(_CONFIG_VALUES[k]) for k in keys})
)


@given(
    st.lists(st.lists(_configs, max_size=3), min_size=1, max_size=5),
    st.lists(st.tuples(st.integers(0, 2), _configs), max_size=3),
)
def test_the_remembered_running_context_is_what_the_reference_computes(
    rounds: list[list[dict[str, str]]], edits: list[tuple[int, dict[str, str]]]
) -> None:
    """Per call, ``running_context`` answers what ``_running_context`` computes: over repeated and changed config
    lists for one context and for another context, and for a config dict edited in place between two calls (the
    memo compares with copies, never with the objects it was given)."""
    ctxs = (context(), context(gpu_memory_utilization=0.5))
    for i, configs in enumerate([*rounds, *rounds]):
        ctx = ctxs[i % 2]
        assert running_context(ctx, configs) == _running_context(ctx, configs)
        assert running_context(ctx, configs) == _running_context(ctx, configs)  # asked again: the memo's answer
        for at, change in edits:
            if at < len(configs):
                configs[at].clear()
                configs[at].update(change)  # the same dict object, other settings
                assert running_context(ctx, configs) == _running_context(ctx, configs)
