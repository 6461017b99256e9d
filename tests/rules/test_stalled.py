"""stalled (issue 13, problem 4): requests inside an engine, no token moving, nothing finishing, for N intervals.

The scrape histories below are written by hand (15 s interval): the stall span, the data state and the rule's
reading are worked out from them here, not from the code under test. On 8db4a05 a queue with nothing running and
frozen counters was ``fresh`` and no rule fired.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
import yaml

from advisor import conventions as c
from advisor.config import Config, parse_config
from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.errors import ConfigError
from advisor.evaluate import Quality, TargetView, evaluate_deployment, stall_span
from advisor.rules.lifecycle import Lifecycle
from advisor.rules.queue_growth import QueueGrowthRule
from advisor.rules.registry import builtin_rules
from advisor.rules.stalled import StalledRule
from tests.factories import context

URL = "http://10.0.0.5:8000/metrics"
Q = Quality(interval_seconds=15.0, stale_after_intervals=3, frozen_after_seconds=60.0)


def snap(
    running: float, waiting: float, gen: float, prompt: float, done: float, start: float = 1.0e9
) -> EngineSnapshot:
    return EngineSnapshot(
        engine="vllm",
        requests_running=running,
        requests_waiting=waiting,
        generation_tokens_total=gen,
        prompt_tokens_total=prompt,
        requests_finished_total=done,
        kv_cache_usage_ratio=0.0,
        kv_cache_capacity_tokens=432_000,
        process_start_time_seconds=start,
    )


def history(*snaps: EngineSnapshot, t0: float = 1000.0, step: float = 15.0) -> tuple[TimedSnapshot, ...]:
    return tuple(TimedSnapshot(URL, t0 + i * step, s) for i, s in enumerate(snaps))


HUNG_EMPTY_BATCH = history(  # moving, then 0 running and a queue of 7 → 9 that never drains, counters frozen
    snap(4, 0, 50_000, 90_000, 300),
    snap(0, 7, 50_400, 91_000, 305),
    snap(0, 7, 50_400, 91_000, 305),
    snap(0, 8, 50_400, 91_000, 305),
    snap(0, 9, 50_400, 91_000, 305),
)
"""Samples at 1000, 1015, 1030, 1045, 1060 s: still from 1015 to 1060 → 45 s, three intervals."""


def _evaluate(hist: tuple[TimedSnapshot, ...], now: float | None = None) -> Any:
    now = hist[-1].timestamp if now is None else now
    ev, snapshot = evaluate_deployment(context(), [TargetView(URL, True, None, None, hist)], now, 300.0, Q)
    return ev, snapshot


def test_stall_span_counts_the_trailing_still_run() -> None:
    assert stall_span(HUNG_EMPTY_BATCH) == 45.0
    # the generation counter moved between the last two samples: no stall
    moved = (*HUNG_EMPTY_BATCH[:-1], TimedSnapshot(URL, 1060.0, snap(0, 9, 50_401, 91_000, 305)))
    assert stall_span(moved) == 0.0
    # the engine emptied: nothing inside it, no stall whatever the counters
    empty = (*HUNG_EMPTY_BATCH[:-1], TimedSnapshot(URL, 1060.0, snap(0, 0, 50_400, 91_000, 305)))
    assert stall_span(empty) == 0.0
    # a restart between samples (start time moved) is not a stall even with equal counters
    restarted = (*HUNG_EMPTY_BATCH[:-1], TimedSnapshot(URL, 1060.0, snap(0, 9, 50_400, 91_000, 305, start=1.0e9 + 50)))
    assert stall_span(restarted) == 0.0


def test_a_queue_with_nothing_running_and_frozen_counters_reaches_the_stalled_rule() -> None:
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)
    # frozen for 45 s < frozen_after 60 s: still fresh, but the stall is measured
    assert ev.state == c.STATE_FRESH
    assert ev.stalled_seconds == 45.0
    assert ev.stalled_intervals == 3
    assert dict(ev.stalled_targets) == {URL: 3}
    assert ev.stalled_requests_running == 0 and ev.stalled_requests_waiting == 9
    # over the 60 s window: +400 generated, +1,000 prompt, +5 finished (all before the stall)
    assert ev.counter_deltas == {"generation_tokens": 400.0, "prompt_tokens": 1000.0, "requests_finished": 5.0}


def test_a_longer_freeze_with_nothing_running_stays_fresh_and_is_measured() -> None:
    longer = (*HUNG_EMPTY_BATCH, TimedSnapshot(URL, 1075.0, snap(0, 9, 50_400, 91_000, 305)))
    ev, snapshot = _evaluate(longer)
    # nothing running: the gauges are true (not frozen data); the stall is 1015 → 1075 = 60 s, four intervals
    assert ev.state == c.STATE_FRESH, snapshot["state_reason"]
    assert ev.stalled_intervals == 4 and ev.stalled_seconds == 60.0


def test_a_freeze_with_requests_running_is_stale_and_still_measured() -> None:
    hung = history(*(snap(12, 5, 50_400, 91_000, 305) for _ in range(6)))  # 0 … 75 s, nothing moves
    ev, snapshot = _evaluate(hung)
    assert ev.state == c.STATE_STALE and "frozen" in snapshot["state_reason"]
    assert ev.stalled_intervals == 5 and ev.stalled_requests_running == 12 and ev.stalled_requests_waiting == 5


def test_an_old_sample_is_no_stall() -> None:
    # the newest sample is 60 s old (> 3 × 15 s): the data is stale by age, and it says nothing about now
    ev, _ = _evaluate(HUNG_EMPTY_BATCH, now=1120.0)
    assert ev.stalled_intervals == 0 and ev.stalled_seconds == 0.0


@pytest.mark.parametrize(
    ("intervals", "fires"),
    [(0, False), (2, False), (3, True), (5, True)],
)
def test_fire_threshold(intervals: int, fires: bool) -> None:
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)
    ev = dataclasses.replace(ev, stalled_intervals=intervals, stalled_seconds=15.0 * intervals)
    assert StalledRule(min_intervals=3).fires(ev).holds is fires


def test_through_the_lifecycle_it_opens_a_restart_and_never_a_capacity_turn() -> None:
    rules = [StalledRule(min_intervals=3, for_seconds=0.0), QueueGrowthRule(0.01, 0.8, 0.0)]
    lc = Lifecycle(rules)
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)
    opened = [t.recommendation for t in lc.evaluate(ev) if t.kind == "opened"]
    assert [(r.rule, r.dial, r.action) for r in opened] == [("stalled", "engine_process", "restart")]
    rec = opened[0]
    # confidence 0.5 + 0.15 × 3/3 = 0.65, three counters known → × 1.0; < 0.75 → warning
    assert rec.confidence == pytest.approx(0.65)
    assert rec.severity == "warning"
    assert URL in rec.flag and "restart" in rec.flag
    # the queue grew 7 → 9 in 45 s (0.044/s > 0.01/s): queue_growth reads it, but a hung engine supersedes it
    assert lc.statuses[("chat-8b", c.RULE_QUEUE_GROWTH)].state == "superseded"


def test_on_frozen_stale_data_it_still_opens_and_goes_critical() -> None:
    # 12 running and 5 waiting, nothing moving for 6 intervals (90 s ≥ frozen_after 60 s): stale
    hung = history(*(snap(12, 5, 50_400, 91_000, 305) for _ in range(7)))
    ev, _ = _evaluate(hung)
    assert ev.state == c.STATE_STALE and ev.stalled_intervals == 6
    lc = Lifecycle(builtin_rules(load_config_text(_CONFIG).rules))
    opened = [t.recommendation for t in lc.evaluate(ev, ignore_for=True) if t.kind == "opened"]
    assert [(r.rule, r.dial) for r in opened] == [("stalled", "engine_process")]
    # 0.5 + 0.15 × 6/3 = 0.8 ≥ 0.75 with 5 waiting → critical
    assert opened[0].confidence == pytest.approx(0.8) and opened[0].severity == "critical"
    assert all(r.dial != c.DIAL_REPLICAS for r in lc.open_recommendations())


def test_a_queue_held_by_a_request_larger_than_the_pool_is_not_a_hang() -> None:
    # max-model-len 8,192 with an engine pool of 6,000 tokens: nothing runs, 9 wait — a request that cannot fit
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)
    ev = dataclasses.replace(ev, kv_capacity_tokens=6_000.0)
    cond = StalledRule(min_intervals=3).fires(ev)
    assert cond.holds is False and "smaller than one 8,192-token request" in cond.reason
    assert StalledRule(min_intervals=3).propose(ev) == []
    # with requests running the same pool does not explain a stall: it fires
    running = dataclasses.replace(ev, stalled_requests_running=3.0)
    assert StalledRule(min_intervals=3).fires(running).holds is True


def test_resolves_when_tokens_move_and_not_while_data_is_stale_by_age() -> None:
    rule = StalledRule(min_intervals=3, for_seconds=0.0)
    lc = Lifecycle([rule])
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)
    assert any(t.kind == "opened" for t in lc.evaluate(ev))
    # no new sample for 60 s: stale by age; the stall cannot be judged and stays open
    old, _ = _evaluate(HUNG_EMPTY_BATCH, now=1120.0)
    assert old.state == c.STATE_STALE
    assert lc.evaluate(old) == [] and lc.open_recommendations()
    moved = (*HUNG_EMPTY_BATCH, TimedSnapshot(URL, 1075.0, snap(3, 6, 50_460, 93_000, 305)))
    ev2, _ = _evaluate(moved)
    assert [t.kind for t in lc.evaluate(ev2)] == ["resolved"]


def load_config_text(text: str) -> Config:
    return parse_config(yaml.safe_load(text))


_CONFIG = """
deployments:
  - name: chat-8b
    engine: vllm
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    max_model_len: 8192
    targets: ["http://127.0.0.1:9/metrics"]
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.9}
rules:
  stalled: {min_intervals: 3, for: 1s}
"""


def test_config_declares_its_thresholds() -> None:
    cfg = load_config_text(_CONFIG)
    assert cfg.rules.stalled.min_intervals == 3 and cfg.rules.stalled.for_ == 1.0
    assert load_config_text(_CONFIG.replace("for: 1s", "for: 2m")).rules.stalled.for_ == 120.0
    with pytest.raises(ConfigError, match="min_intervals"):
        load_config_text(_CONFIG.replace("min_intervals: 3", "min_intervals: 0"))
    assert builtin_rules(cfg.rules)[0].id == c.RULE_STALLED


# --- false-positive kinds (counters that move only on a finish, queues on another stage, once) ------------------

HUNG_BATCH = history(*(snap(4, 6, 50_400, 91_000, 305) for _ in range(4)))
"""4 running and 6 waiting at 1000, 1015, 1030, 1045 s, every counter still: 45 s, three intervals."""


def _sglang(ev: Any) -> Any:
    return dataclasses.replace(ev, ctx=dataclasses.replace(ev.ctx, engine="sglang"))


def test_counters_that_move_only_on_a_finish_need_a_stall_longer_than_a_request_lives() -> None:
    ev, _ = _evaluate(HUNG_BATCH)
    assert ev.stalled_intervals == 3 and ev.stalled_seconds == 45.0 and ev.stalled_requests_running == 4
    rule = StalledRule(min_intervals=3, for_seconds=0.0, finish_only_for_seconds=600.0)
    # vLLM counts tokens every scheduler step: 45 s of still counters with 4 running is a hang
    assert rule.fires(ev).holds is True
    # SGLang counts them when a request finishes: 4 long generations hold every counter still — not yet a stall
    sg = _sglang(ev)
    cond = rule.fires(sg)
    assert cond.holds is False
    assert "only when a request finishes" in cond.reason and "45s of 600s" in cond.reason
    assert cond.evidence["counters_advance_during_decode"] is False
    # 615 s still (41 intervals): longer than any request may live — fires, but never critical:
    # 0.5 + 0.15 × 41/3 = 2.55 → 0.95, three counters known (× 1.0), capped at 0.45
    long = dataclasses.replace(sg, stalled_seconds=615.0, stalled_intervals=41)
    assert rule.fires(long).holds is True
    (p,) = rule.propose(long)
    assert p.confidence == pytest.approx(0.45) and p.severity == "warning"
    assert "never critical" in p.description


def test_the_request_lifetime_bound_follows_max_model_len_times_the_observed_tpot() -> None:
    ev, _ = _evaluate(HUNG_BATCH)
    assert ev.stats is not None
    # 20 requests at a mean TPOT of 0.1 s: a 8,192-token generation lives 819.2 s > finish_only_for 600 s
    tpot = Histogram(buckets=((0.1, 20.0), (math.inf, 20.0)), count=20.0, sum=2.0)
    sg = _sglang(dataclasses.replace(ev, stats=dataclasses.replace(ev.stats, tpot=tpot)))
    rule = StalledRule(min_intervals=3, finish_only_for_seconds=600.0)
    assert rule.fires(dataclasses.replace(sg, stalled_seconds=810.0, stalled_intervals=54)).holds is False
    assert rule.fires(dataclasses.replace(sg, stalled_seconds=825.0, stalled_intervals=55)).holds is True
    assert rule.fires(sg).evidence["request_lifetime_bound_seconds"] == pytest.approx(819.2)


@pytest.mark.parametrize("engine", ["tgi", "llamacpp", "trtllm", "triton-trtllm", "auto"])
def test_every_finish_only_or_unknown_engine_waits_for_the_bound(engine: str) -> None:
    ev, _ = _evaluate(HUNG_BATCH)
    ev = dataclasses.replace(ev, ctx=dataclasses.replace(ev.ctx, engine=engine))
    assert StalledRule(min_intervals=3).fires(ev).holds is False


def test_a_finish_only_engine_with_nothing_running_is_read_as_before() -> None:
    # nothing runs, so nothing decodes: still counters with a queue are a stall whatever the engine counts on
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)
    sg = _sglang(ev)
    rule = StalledRule(min_intervals=3, for_seconds=0.0)
    assert rule.fires(sg).holds is True
    # 0.5 + 0.15 × 3/3 = 0.65, three counters known
    assert rule.confidence(sg) == pytest.approx(0.65)


@pytest.mark.parametrize(
    ("queues", "named"),
    [
        ({"waiting_deferred": 9.0}, "waiting_deferred 9"),  # vLLM: LoRA adapter slots / remote KV
        ({"decode_transfer": 3.0, "decode_prealloc": 5.0}, "decode_prealloc 5"),  # SGLang PD decode server
        ({"prefill_inflight": 2.0}, "prefill_inflight 2"),  # SGLang PD prefill server: KV being sent
    ],
)
def test_a_queue_waiting_on_another_stage_is_not_a_hung_engine(queues: dict[str, float], named: str) -> None:
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)  # 0 running, 9 waiting, three still intervals
    held = dataclasses.replace(ev, queues=queues)
    rule = StalledRule(min_intervals=3, for_seconds=0.0)
    cond = rule.fires(held)
    assert cond.holds is False and "not a hung engine" in cond.reason and named in cond.reason
    assert rule.propose(held) == []
    # the same queue with requests running: those should move the counters (vLLM) — a hang
    assert rule.fires(dataclasses.replace(held, stalled_requests_running=2.0)).holds is True
    # a queue waiting for KV capacity is the engine's own: nothing explains it
    assert rule.fires(dataclasses.replace(ev, queues={"waiting_capacity": 9.0})).holds is True


def test_once_cannot_prove_a_stall_and_says_so() -> None:
    ev, _ = _evaluate(HUNG_EMPTY_BATCH)
    cond = StalledRule(min_intervals=3, observable_intervals=1).fires(ev)
    assert cond.holds is None and "needs 3" in cond.reason and "sees 1" in cond.reason
    lc = Lifecycle([StalledRule(min_intervals=3, for_seconds=0.0, observable_intervals=1)])
    assert lc.evaluate(ev, ignore_for=True) == []
    status = lc.statuses[("chat-8b", c.RULE_STALLED)]
    assert status.state == "unknown" and "needs 3" in status.reason
    # with min_intervals 1 one interval is enough to judge
    assert StalledRule(min_intervals=1, observable_intervals=1).fires(ev).holds is True


def test_config_carries_the_finish_only_bound_and_the_observable_intervals() -> None:
    text = _CONFIG.replace("for: 1s}", "for: 1s, finish_only_counters_for: 15m, observable_intervals: 1}")
    cfg = load_config_text(text)
    assert cfg.rules.stalled.finish_only_counters_for == 900.0 and cfg.rules.stalled.observable_intervals == 1
    rule = builtin_rules(cfg.rules)[0]
    assert isinstance(rule, StalledRule)
    assert rule.finish_only_for_seconds == 900.0 and rule.observable_intervals == 1
    assert load_config_text(_CONFIG).rules.stalled.finish_only_counters_for == 600.0
    with pytest.raises(ConfigError, match="observable_intervals"):
        load_config_text(_CONFIG.replace("for: 1s}", "for: 1s, observable_intervals: 0}"))


def test_every_engine_declares_whether_its_counters_move_during_decode() -> None:
    # from the engines' own files: vLLM counts per scheduler step (v1/metrics/loggers.py), the Dynamo frontend per
    # streamed chunk (http/service/metrics.rs); SGLang (observe_one_finished_request), TGI (router histograms
    # observed at the end), TensorRT-LLM (per-request metrics), Triton (per-request histograms) and llama.cpp
    # (on_prediction at a slot's completion) only when a request finishes
    from advisor.engines import entries

    assert {e.engine: e.counters_advance_during_decode for e in entries()} == {
        "vllm": True,
        "dynamo": True,
        "sglang": False,
        "tgi": False,
        "triton-trtllm": False,
        "trtllm": False,
        "llamacpp": False,
    }


def test_the_restart_turn_names_the_state_not_its_age_so_an_open_incident_is_not_re_rendered_every_cycle() -> None:
    """Breaker 27: the turn's current value was "stalled 42s", then 44s, 46s, … so every cycle updated the incident
    ("UPDATED … stalled 44s → restarted", over 60 lines in two minutes). The current value is the state; the age is
    in the summary and the evidence."""
    ev, _ = _evaluate(HUNG_BATCH)
    rule = StalledRule(min_intervals=3, for_seconds=0.0)
    (early,) = rule.propose(ev)
    (later,) = rule.propose(dataclasses.replace(ev, stalled_seconds=90.0, stalled_intervals=6))
    assert early.current == later.current == "stalled"
    assert "45s" in early.summary and "90s" in later.summary
