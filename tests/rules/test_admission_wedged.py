"""Rule ``admission_wedged``: a vLLM engine that admits nothing while it has room and barely works
(vllm-project/vllm#53130: "engine reports healthy, KV cache mostly free, only a restart recovers"; field state
``vllm-0271-admission-wedged-by-deferred-requests``).

Figures by hand: the report's engine runs 4 with 19 waiting for capacity (at every scrape) and 473 deferred, the pool
20 % used and still, 1,946 prompt and 0.48 generated tokens/s, and its one admitted request waited ~5,000 s. The
helpers' model (Llama-3.1-8B bf16) on one H100 prefills 2,048 tokens in ~50–60 ms: ~35,000–40,000 tokens/s, so an idle
engine runs under a tenth of that (~3,500–4,000). The healthy cases are the breaker's of 2026-12-05 (each failed on
the rule's first form, which read running + deferred ≥ max_num_seqs as the scheduler's gate: vLLM's admission loop
counts ``len(self.running) + self.num_waiting_for_streaming_input``, ``vllm/v1/core/sched/scheduler.py``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor import conventions as c
from advisor.config import RulesConfig
from advisor.rules.admission_wedged import AdmissionWedgedRule
from advisor.rules.lifecycle import Lifecycle
from advisor.rules.registry import builtin_rules
from advisor.rules.stalled import StalledRule
from advisor.telemetry import WindowStats, combine_targets
from tests.rules.helpers import T0, ctx, ev, hist

CAP = 256


def _ev(
    running: float = 4,
    capacity: float = 19,
    capacity_min: float | None = None,
    deferred: float = 473,
    usage: float | None = 0.2,
    usage_min: float | None = None,
    prompt: float | None = 1_946.0,
    generated: float | None = 0.48,
    ttft_mean: float | None = 5_000.0,
    first_tokens: float = 1.0,
    finished: float | None = 0.0,
    window: float = 60.0,
    engine: str = "vllm",
    by_reason: bool = True,
    cap: int = CAP,
    resets: int = 0,
    **kw: Any,
) -> Any:
    ttft = hist((ttft_mean * 2, first_tokens), total_sum=ttft_mean * first_tokens) if ttft_mean is not None else None
    e = ev(
        dep=ctx(gpu="h100-sxm", max_num_seqs=cap, engine=engine, **kw),
        requests_running=running,
        requests_waiting=capacity + deferred,
        kv_cache_usage_ratio=usage,
        kv_cache_usage_ratio_max=usage,
        kv_cache_usage_ratio_min=usage if usage_min is None else usage_min,
        prompt_tokens_per_second=prompt,
        generation_tokens_per_second=generated,
        ttft=ttft,
        window_seconds=window,
        counter_resets=resets,
    )
    queues = {"waiting_capacity": capacity, "waiting_deferred": deferred} if by_reason else {}
    deltas = {"requests_finished": finished} if finished is not None else {}
    held = (capacity if capacity_min is None else capacity_min) if by_reason else None
    return dataclasses.replace(e, queues=queues, counter_deltas=deltas, waiting_capacity_min=held)


def test_the_reported_wedge_fires_and_proposes_a_restart_only() -> None:
    e = _ev()
    assert AdmissionWedgedRule().fires(e).holds is True
    (p,) = AdmissionWedgedRule().propose(e)
    assert (p.dial, p.action) == (c.DIAL_ENGINE_PROCESS, c.ACTION_RESTART)
    assert p.evidence["ttft_mean_seconds"] == 5_000.0
    assert p.evidence["requests_waiting_capacity_min"] == 19
    # the helpers' 8B on one H100: 2,048 tokens in tens of ms, tens of thousands of tokens/s; 1,946.5 is under a tenth
    assert 20_000 < p.evidence["modelled_prefill_tokens_per_second"] < 60_000
    assert p.evidence["tokens_per_second"] == pytest.approx(1_946.48)
    assert "53130" in p.description


@pytest.mark.parametrize(
    ("kw", "holds"),
    [
        # a multi-LoRA engine at a prefill-bound peak: 100 run, 40 wait for the token budget, 360 finish in 300 s; its
        # requests wait ~90 s, but it works at 30,000 prompt tokens/s: a queue, not a wedge (breaker F1)
        (
            {
                "running": 100,
                "capacity": 40,
                "deferred": 200,
                "usage": 0.35,
                "prompt": 30_000.0,
                "generated": 3_000.0,
                "ttft_mean": 90.0,
                "first_tokens": 380.0,
                "finished": 360.0,
                "window": 300.0,
            },
            False,
        ),
        # paused streaming sessions hold slots (deferred, counted against the cap by vLLM): 56 decode ~30 tokens/s each;
        # the cap binds by design, a restart would kill 256 live sessions (breaker F4)
        (
            {
                "running": 56,
                "capacity": 10,
                "deferred": 200,
                "usage": 0.3,
                "prompt": 500.0,
                "generated": 1_680.0,
                "ttft_mean": 90.0,
                "first_tokens": 30.0,
                "finished": 30.0,
            },
            False,
        ),
        # one 120k-token prompt whose TTFT of 75 s is its own chunked prefill, seen in once's 1 s window: its blocks
        # fill (usage 0.33 → 0.35), the engine works (breaker F5)
        (
            {
                "running": 4,
                "capacity": 2,
                "deferred": 12,
                "cap": 16,
                "usage": 0.35,
                "usage_min": 0.33,
                "prompt": 0.0,
                "generated": 4.0,
                "ttft_mean": 75.0,
                "window": 1.0,
            },
            False,
        ),
        # two 120k-token prompts prefilling over 120 s: no TTFT, nothing counted, but the blocks fill (breaker F5b)
        (
            {
                "running": 2,
                "capacity": 2,
                "deferred": 14,
                "cap": 16,
                "usage": 0.3,
                "usage_min": 0.1,
                "prompt": 0.0,
                "generated": 0.0,
                "ttft_mean": None,
                "window": 120.0,
            },
            False,
        ),
        # once's typical second of the wedge: nothing admitted, nothing finished — cannot tell (breaker F7)
        ({"ttft_mean": None, "window": 1.0}, None),
        # the engine restarted in the window: the old process's 5,000 s is not the new one's (breaker F8)
        ({"resets": 1}, None),
        ({"capacity_min": 0}, False),  # capacity waiters came and went: admitted within the window
        ({"running": CAP}, False),  # every slot runs: the cap binds (seq_cap's)
        ({"usage": 0.7}, False),  # the pool binds
        ({"usage": None}, None),  # cannot tell whether blocks are free
        ({"ttft_mean": 0.4, "first_tokens": 40.0}, False),  # requests are admitted promptly
        ({"engine": "sglang"}, False),  # reads vLLM's queue split
        ({"by_reason": False}, None),  # a vLLM before 0.20: the capacity queue is not exported
        ({"prompt": None}, None),  # the work cannot be measured
        ({"ttft_mean": None, "window": 120.0}, True),  # nothing admitted or finished in two minutes
        ({"ttft_mean": None, "finished": 3.0, "window": 120.0}, False),  # requests finish
        ({"ttft_mean": None, "finished": None}, None),
    ],
)
def test_it_holds_only_on_a_held_queue_with_room_inside_and_an_idle_engine(
    kw: dict[str, Any], holds: bool | None
) -> None:
    assert AdmissionWedgedRule().fires(_ev(**kw)).holds is holds


def test_two_busy_replicas_are_not_summed_into_a_wedge() -> None:
    # breaker F2: one replica at its cap, the other on cold adapters; together they work at 7,000 generated tokens/s
    e = dataclasses.replace(
        _ev(running=276, capacity=60, deferred=300, usage=0.45, generated=7_000.0, ttft_mean=100.0, finished=40.0),
        replicas_up=2,
    )
    assert AdmissionWedgedRule().fires(e).holds is False


def test_a_wedge_does_not_resolve_when_one_request_finishes_inside_it() -> None:
    # breaker F10: a minute later one of the 4 running finishes, no waiting request is admitted: the same wedge
    rule = AdmissionWedgedRule(for_seconds=60.0)
    lc = Lifecycle([rule])
    wedge = _ev()
    assert lc.evaluate(dataclasses.replace(wedge, now=T0)) == []
    assert [t.kind for t in lc.evaluate(dataclasses.replace(wedge, now=T0 + 60))] == ["opened"]
    quiet = _ev(ttft_mean=None, finished=1.0)
    assert rule.clears(quiet).holds is False
    assert "resolved" not in [t.kind for t in lc.evaluate(dataclasses.replace(quiet, now=T0 + 120))]
    # it resolves when the engine works again
    working = _ev(ttft_mean=0.5, first_tokens=300.0, prompt=25_000.0, generated=2_000.0, finished=250.0)
    assert rule.clears(working).holds is True


def test_a_hang_supersedes_it_and_it_supersedes_the_load_readings() -> None:
    assert c.RULE_ADMISSION_WEDGED in StalledRule.supersedes
    for rule in (c.RULE_QUEUE_GROWTH, c.RULE_GOODPUT_BELOW_TARGET, c.RULE_SEQ_CAP, c.RULE_OVER_PROVISIONED):
        assert rule in AdmissionWedgedRule.supersedes
    ids = [r.id for r in builtin_rules(RulesConfig())]
    assert ids.index(c.RULE_STALLED) < ids.index(c.RULE_ADMISSION_WEDGED) < ids.index(c.RULE_QUEUE_GROWTH)


def test_config_sets_its_thresholds() -> None:
    cfg = RulesConfig.model_validate({"admission_wedged": {"max_usage": 0.3, "min_wait": "2m", "for": "30s"}})
    (rule,) = [r for r in builtin_rules(cfg) if r.id == c.RULE_ADMISSION_WEDGED]
    assert isinstance(rule, AdmissionWedgedRule)
    assert (rule.max_usage, rule.min_wait_seconds, rule.for_seconds()) == (0.3, 120.0, 30.0)
    # a mean wait of 100 s is below 2 minutes, above the default minute
    assert rule.fires(_ev(ttft_mean=100.0)).holds is False
    assert AdmissionWedgedRule().fires(_ev(ttft_mean=100.0)).holds is True


def test_nothing_running_is_not_read_as_a_wedge() -> None:
    # second breaker, 2026-12-05: every slot held by 256 paused streaming sessions (deferred; vLLM counts them against
    # max_num_seqs), 6 newcomers waiting, nothing moving for 120 s — and a sleeping engine (PAUSED_ALL: token budget
    # 0) with 12 waiting for 300 s. Neither has a stuck request inside; a restart kills the sessions or the sleep
    idle: dict[str, Any] = {"running": 0, "prompt": 0.0, "generated": 0.0, "ttft_mean": None}
    paused = _ev(capacity=6, deferred=256, usage=0.3, window=120.0, **idle)
    asleep = _ev(capacity=12, deferred=0, usage=0.0, window=300.0, **idle)
    assert AdmissionWedgedRule().fires(paused).holds is None
    assert AdmissionWedgedRule().fires(asleep).holds is None


def test_two_wedged_replicas_with_still_pools_are_not_read_as_moving_usage() -> None:
    # second breaker: two replicas each in the report's shape, their pools still at 15 % and 25 %; the summed window's
    # min and max (15 % → 25 %) are two replicas, not movement in time
    def one(u: float) -> WindowStats:
        return WindowStats(
            window_seconds=120.0,
            requests_running=4,
            requests_waiting=492,
            kv_cache_usage_ratio=u,
            kv_cache_usage_ratio_min=u,
            kv_cache_usage_ratio_max=u,
            prompt_tokens_per_second=0.0,
            generation_tokens_per_second=0.2,
        )

    base = _ev(ttft_mean=None, window=120.0, capacity=38)
    e = dataclasses.replace(base, stats=combine_targets([one(0.15), one(0.25)]), replicas_up=2, kv_usage_moved=False)
    assert AdmissionWedgedRule().fires(e).holds is True
    # one of them moving is a working engine
    assert AdmissionWedgedRule().fires(dataclasses.replace(e, kv_usage_moved=True)).holds is False
