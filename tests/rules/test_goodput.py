"""goodput_below_target: fires below ``slo.target_ratio`` with at least ``min_requests`` observed; the diagnosis
picks the dial. Roofline figures are hand-computed from :mod:`advisor.capacity.perf`'s documented formulas with the
plain roofline's factors, which those tests pin as the deployment's latency prior (``ctx(perf=ROOFLINE)``)
(H100-SXM: 3.35 TB/s × 0.8 = 2.68 TB/s; 989.5 TFLOP/s × 0.6 = 593.7 TFLOP/s; NVLink 900 GB/s ÷ 2 × 0.7 =
315 GB/s per direction; Llama-3.1-8B matmul body 6,979,321,856 params, LM head 525,336,576)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from advisor.rules.base import SLOTargets
from advisor.rules.goodput import SMALL_BATCH_TP_WITHHELD, GoodputRule
from tests.rules.helpers import ROOFLINE, ctx, ev, good, hist, opens_after, requests

RULE = GoodputRule(for_seconds=120, min_requests=20, target_utilization=0.8)


@pytest.mark.parametrize(
    ("rule", "ttft_ok", "observed", "fires"),
    [
        (RULE, 0.8999, 20, True),  # just under 0.9 with exactly min_requests
        (RULE, 0.9, 20, False),  # at target
        (RULE, 0.5, 19, None),  # one request short of min_requests: cannot judge
        (GoodputRule(min_requests=50), 0.5, 50, True),
        (GoodputRule(min_requests=50), 0.5, 49, None),
    ],
    ids=[
        "just under the target with min_requests fires",
        "at the target does not fire",
        "one request short of min_requests cannot tell",
        "a larger min_requests at it fires",
        "a larger min_requests one short cannot tell",
    ],
)
def test_fire_table(rule: GoodputRule, ttft_ok: float, observed: float, fires: bool | None) -> None:
    e = ev(goodput=good(ttft_ok, 1.0), **requests(observed))
    assert rule.fires(e).holds is fires
    assert rule.clears(e).holds is (None if fires is None else not fires)


def test_cannot_tell_without_observations() -> None:
    e = ev(goodput=good(None, None), **requests(100))
    assert RULE.fires(e).holds is None
    assert RULE.propose(e) == []


def test_one_side_unmeasured_judges_a_certain_breach_and_never_the_target_met() -> None:
    # breaker 13: the TTFT histogram stopped rendering while TTFT was 6 s against 2.5 s; TPOT alone read goodput 100 %
    # and closed the incident. Unknown now (neither fires nor clears); a TPOT side below the target is a certain breach
    from advisor.telemetry import goodput_ratio

    e = ev(goodput=goodput_ratio(None, 1.0), **requests(100))
    fired, cleared = RULE.fires(e), RULE.clears(e)
    assert fired.holds is None and cleared.holds is None, (fired.reason, cleared.reason)
    assert "TTFT not measured" in fired.reason
    low = ev(goodput=goodput_ratio(None, 0.6), **requests(100))
    assert RULE.fires(low).holds is True and RULE.clears(low).holds is False
    assert "at most 60.0%" in RULE.fires(low).reason


def test_ttft_lost_to_queueing_needs_replicas_from_the_queueing_model() -> None:
    # requests wait: 20 → 80 over 60 s (+1/s) beside 54 running in a full pool, 2 completions/s.
    # λ = completions + in-flight growth = 2 + 1 = 3/s (issue 13: never completions alone); the saturated replica
    # completes μ = 2/s. M/M/c at ≤ 80 %: ⌈3 ÷ 1.6⌉ = 2; at 2 replicas a = 1.5, Erlang B = 1.125 ÷ 3.625,
    # C = 9/14, Wq = C ÷ (4 − 3) = 0.6429 s ≤ TTFT 2.5 s. Utilization 3 ÷ 2 = 1.5 → 3 ÷ 4 = 0.75.
    e = ev(
        goodput=good(0.5, 1.0),
        kv_cache_usage_ratio=0.97,
        requests_finished_per_second=2.0,
        requests_running=54,
        requests_running_first=54,
        requests_waiting=80,
        requests_waiting_first=20,
        queue_time=hist((2.0, 100), total_sum=150.0),
        **requests(100),
    )
    (p,) = RULE.propose(e)
    assert (p.dial, p.current, p.suggested) == ("replicas", 1, 2)
    assert p.evidence["arrival_rate_per_second"] == pytest.approx(3.0)
    assert p.evidence["service_rate_per_replica"] == pytest.approx(2.0)
    assert p.predicted_effect["utilization"] == {"before": 1.5, "after": 0.75}
    assert p.predicted_effect["queue_wait_seconds"] == {"before": None, "after": pytest.approx(9 / 14, abs=1e-4)}
    assert "~3.00/s" in p.description
    assert p.severity == "critical"  # 0.5 < 0.8 × 0.9


def test_a_queue_that_drained_within_the_window_is_no_reason_for_replicas() -> None:
    """Breaker 22: after a burst (a restart's 1,500 reconnecting clients) the queue emptied, but the window's TTFT
    and queue times still held it, and the page updated to "replicas 1 → 2", held for minutes. With requests waiting
    at the window's start and none now, the count is withheld, naming the drained queue; with a queue now it stands
    (the test above)."""
    base = dict(
        goodput=good(0.5, 1.0),
        kv_cache_usage_ratio=0.97,
        requests_finished_per_second=2.0,
        requests_running=54,
        requests_running_first=54,
        queue_time=hist((2.0, 100), total_sum=150.0),
        **requests(100),
    )  # the test above's saturated replica: λ = 2 completions/s + the in-flight growth

    def replicas(**kw: Any) -> list[Any]:
        return [p for p in RULE.propose(ev(**{**base, **kw})) if p.dial == "replicas"]

    # the 60 waiting moved into the running batch (54 → 114): in flight is flat, λ = 2/s, still two replicas' worth
    (drained,) = replicas(requests_running=114, requests_waiting=0, requests_waiting_first=60)
    assert drained.withheld is not None, drained
    assert "the queue has drained (60 waiting at the window's start, none now)" in drained.withheld
    (queued,) = replicas(requests_waiting=80, requests_waiting_first=20)
    assert queued.withheld is None
    (steady,) = replicas(requests_waiting=0, requests_waiting_first=0)  # queue time without a queue at the start
    assert steady.withheld is None


def test_a_queue_drained_within_the_window_is_not_read_as_long_prefills() -> None:
    """Breaker 27: a 20 s spike (150 waiting a replica) drained, and 24 s later a page read the window's TTFT misses
    "without a queue" as long prefills — "tensor parallel 1 → 2", a 0.32 → 0.30 s prefill against a 2.5 s target.
    With requests waiting at the window's start the misses are the queue's: no prefill turn (and the replica count
    is withheld as the queue drained); the same window with no queue at either end still reads long prefills."""
    base = dict(
        dep=ctx(perf=ROOFLINE),
        goodput=good(0.5, 1.0),
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=2_000.0,
        requests_running=2,
        requests_running_first=2,
        requests_waiting=0,
        ttft=hist((1.0, 100), total_sum=10.0),
    )
    drained = RULE.propose(ev(**base, requests_waiting_first=150))
    assert not [p for p in drained if p.dial in ("tensor_parallel_size", "chunked_prefill")], drained
    assert all(p.dial == "replicas" and p.withheld for p in drained), drained
    never_queued = RULE.propose(ev(**base, requests_waiting_first=0))
    assert [p.dial for p in never_queued] == ["tensor_parallel_size", "chunked_prefill"]


def test_misses_made_by_requests_that_queued_are_not_read_as_long_prefills() -> None:
    """Breaker 29 (breaker 27's page again): a 2 s burst queued 30 of 100 requests for ~2 s between two scrapes; no
    queue at either end of the window and the mean queue time (0.6 s) under half the mean TTFT (1.9 s), so the 30 %
    of TTFT misses read as long prefills and paged "tensor parallel 1 → 2". The queue-time histogram says who missed:
    25 % (interpolated in vLLM's 1.0-2.5 s bucket) waited over half the 2.5 s target, at least half the misses. No
    prefill turn; the same misses with nobody queued still read long prefills."""
    base = dict(
        dep=ctx(perf=ROOFLINE),
        goodput=good(0.7, 1.0),
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=2_000.0,
        requests_running=2,
        requests_running_first=2,
        requests_waiting=0,
        requests_waiting_first=0,
        ttft=hist((1.0, 70), (5.0, 100), total_sum=190.0),
    )
    burst = RULE.propose(ev(**base, queue_time=hist((0.3, 70), (1.0, 70), (2.5, 100), total_sum=60.0)))
    assert not [p for p in burst if p.dial in ("tensor_parallel_size", "chunked_prefill")], burst
    calm = RULE.propose(ev(**base, queue_time=hist((0.01, 100), total_sum=0.5)))
    assert [p.dial for p in calm] == ["tensor_parallel_size", "chunked_prefill"], calm


def test_queueing_at_low_utilization_does_not_add_replicas() -> None:
    # queue time is half of TTFT, but 10 run of a ceiling min(256, 54.921875) and λ = 2/s: Little's law gives
    # μ = 2 × 54.921875 ÷ 10 = 10.98/s per replica, λ ÷ μ = 0.18 — one replica carries it (⌈2 ÷ 8.79⌉ = 1), so more
    # replicas are not the answer (before issue 13 the rule proposed "at least one more" regardless)
    e = ev(
        goodput=good(0.5, 1.0),
        requests_finished_per_second=2.0,
        requests_running=10,
        requests_running_first=10,
        requests_waiting=0,
        requests_waiting_first=0,
        queue_time=hist((2.0, 100), total_sum=150.0),
        **requests(100),
    )
    assert [p for p in RULE.propose(e) if p.dial == "replicas"] == []


def test_long_prefills_without_a_queue_need_tp_and_chunked_prefill() -> None:
    # 2,000-token prompts (2,000 prompt tokens/s at 1 request/s), queue time tiny.
    # prefill TP1: (2 × 2,000 × 6,979,321,856 + 2 × 525,336,576 + 2 × 32 × 32 × 128 × 2,000²) ÷ 593.7 T = 48.79 ms
    # TP2: half the FLOPs, 24.395 ms + 64 all-reduces × (10 µs + 16,384,000 B ÷ 315 GB/s = 52.0 µs) = 28.364 ms
    e = ev(
        dep=ctx(perf=ROOFLINE),
        goodput=good(0.5, 1.0),
        requests_finished_per_second=1.0,
        prompt_tokens_per_second=2_000.0,
        requests_running=2,
        requests_waiting=0,
        queue_time=hist((0.01, 100), total_sum=0.1),
        # mean TTFT 0.1 s: the 48.79 ms prefill is 49 % of it, a material share (issue 13), so the turns stand
        ttft=hist((1.0, 100), total_sum=10.0),
    )
    tp, chunked = RULE.propose(e)
    assert tp.withheld is None
    assert (tp.dial, tp.current, tp.suggested, tp.flag) == (
        "tensor_parallel_size",
        1,
        2,
        "--tensor-parallel-size 2",
    )
    assert tp.predicted_effect["prefill_seconds"] == {"before": 0.0488, "after": 0.0284}
    assert chunked.dial == "chunked_prefill" and chunked.flag == "--enable-chunked-prefill"
    # vLLM V1 chunks long prompts already (field-state round 33): the turn would set what is set
    assert chunked.withheld is not None and "already chunks" in chunked.withheld
    # with --no-enable-chunked-prefill, honoured from 0.11.1, the turn stands
    off = dataclasses.replace(e, ctx=ctx(perf=ROOFLINE, enable_chunked_prefill=False, engine_version="0.11.1"))
    _, chunked_off = RULE.propose(off)
    assert chunked_off.dial == "chunked_prefill" and chunked_off.withheld is None


TIGHT = ctx(slo=SLOTargets(2.5, 0.02, 0.9), perf=ROOFLINE)  # TPOT target 20 ms


def test_tpot_past_the_knee_caps_max_num_seqs() -> None:
    # 200 running, pool full: 432,000 ÷ 200 = 2,160 tokens each; KV per sequence 2,160 × 131,072 = 283,115,520 B.
    # TPOT(B) = (16,094,076,928 + B × 283,115,520) ÷ 2.68 TB/s (memory-bound; compute 5.4 ms at B = 200)
    # B = 200 → 27.13 ms; ≤ 20 ms needs B ≤ (53.6 G − 16.094 G) ÷ 283.1 M = 132.48 → knee 132 → 19.95 ms
    e = ev(dep=TIGHT, goodput=good(1.0, 0.3), requests_running=200, kv_cache_usage_ratio=1.0, **requests(100))
    (p,) = RULE.propose(e)
    assert (p.dial, p.action, p.current, p.suggested) == ("max_num_seqs", "decrease", 256, 132)
    assert p.predicted_effect["tpot_seconds"] == {"before": 0.0271, "after": 0.0199}


def test_no_knee_cap_where_the_models_tpot_at_todays_batch_meets_the_target() -> None:
    """Breaker 25 (prompt-heavy traffic, TPOT missed from prefill chunks between decode steps): at a mean batch of
    49.5 the knee search stopped at int(49.5) = 49 and "cap max_num_seqs at the knee, 49" was proposed with TPOT
    0.0278 → 0.0276 s against a 0.25 s target, later "→ 1". A cap is the fix only where the batch is the cause: the
    model's TPOT at today's batch misses the target. Here (the test above's pool, 2,160 tokens a sequence) 132.4 a
    replica model at 19.99 ms against 20 ms: no cap; 132.6 at 20.03 ms: the cap to 132 (19.95 ms)."""
    for running, capped in ((264.8, False), (265.2, True)):
        usage = running / 2 * 2_160 / 432_000
        e = ev(
            dep=TIGHT,
            goodput=good(1.0, 0.3),
            requests_running=running,
            replicas_up=2,
            kv_cache_usage_ratio=usage,
            **requests(100),
        )
        caps = [p for p in RULE.propose(e) if p.dial == "max_num_seqs"]
        assert bool(caps) is capped, (running, caps)
        if capped:
            assert caps[0].suggested == 132 and caps[0].score > 1.0  # TPOT(132.6) ÷ TPOT(132)


def test_the_knee_cap_closes_the_gap_alone_only_if_it_still_serves_the_load() -> None:
    # the knee of the test above: 200 → 132 at 27.13 → 19.95 ms; a replica then completes 132/200 × 27.13/19.95
    # = 0.8975 of today's requests/s. Nothing waiting: the TPOT gap is the gap, the cap closes it
    base = dict(dep=TIGHT, goodput=good(1.0, 0.3), requests_running=200, kv_cache_usage_ratio=1.0, **requests(100))
    (idle,) = RULE.propose(ev(**base, requests_waiting=0))
    assert idle.sufficient is True
    # 300 waiting (field-state round 45, llm-d/llm-d-batch-gateway#491: 400 running, 600 waiting, a cap of 39 ranked
    # first as "closes the gap"): completing ~90 % of today with a queue lets it grow — not alone
    (queued,) = RULE.propose(ev(**base, requests_waiting=300))
    assert queued.sufficient is False
    assert "~90% of today's requests/s with 300 waiting" in queued.description, queued.description
    # no queue, 1 request/s completing, no arrival rate measured (breaker 12: once's one second): today's
    # completions are what arrives in a steady state, and ~90 % of them lets a queue build
    (steady,) = RULE.propose(ev(**base, requests_waiting=0, requests_finished_per_second=1.0))
    assert steady.sufficient is False and "a queue builds" in steady.description, steady.description


def test_a_small_batch_turn_closes_the_gap_on_the_observed_tpot_not_the_rooflines() -> None:
    # the small-batch test below: fp8 takes the modelled 6.2165 ms to 3.6129 ms (×0.581) against a 5 ms target.
    # Observed at 6.2 ms, ×0.581 = 3.6 ms: closes it. Observed at 12.4 ms (twice the model), ×0.581 = 7.2 ms: not
    dep = ctx(slo=SLOTargets(2.5, 0.005, 0.9), perf=ROOFLINE)
    base = dict(dep=dep, goodput=good(1.0, 0.2), requests_running=2, kv_cache_usage_ratio=0.01, **requests(100))
    (quant, _) = RULE.propose(ev(**base, tpot=hist((1.0, 100), total_sum=0.62)))
    assert quant.sufficient is True
    (slow, _) = RULE.propose(ev(**base, tpot=hist((1.0, 100), total_sum=1.24)))
    assert slow.sufficient is False


def test_tpot_knee_effect_starts_from_the_configured_max_num_seqs() -> None:
    e = ev(dep=TIGHT, goodput=good(1.0, 0.3), requests_running=200, kv_cache_usage_ratio=1.0, **requests(100))
    (p,) = RULE.propose(e)
    assert p.predicted_effect["max_num_seqs"] == {"before": p.current, "after": p.suggested}


def test_tpot_at_a_small_batch_quantizes_weights_or_raises_tp() -> None:
    # 2 running, KV 1 % full: 0.01 × 432,000 ÷ 2 = 2,160 tokens each; batch KV = 2 × 2,160 × 131,072 B.
    # bf16: (16,094,076,928 + 566,231,040) ÷ 2.68 T = 6.2165 ms
    # fp8: 6,979,321,856 linear × 1.000244 + 1,050,939,392 other × 2 + rotary 33,554,432 = 9,116,459,008 B
    #      → (9,116,459,008 + 566,231,040) ÷ 2.68 T = 3.6129 ms
    # TP2: 8,064,081,920 B + half the KV → 3.1146 ms, + 64 × 10 µs all-reduce latency + 2 × 64 × 26 ns = 3.758 ms
    dep = ctx(slo=SLOTargets(2.5, 0.005, 0.9), perf=ROOFLINE)
    e = ev(dep=dep, goodput=good(1.0, 0.2), requests_running=2, kv_cache_usage_ratio=0.01, **requests(100))
    quant, tp = RULE.propose(e)
    assert (quant.dial, quant.suggested, quant.flag) == ("weight_quantization", "fp8", "--quantization fp8")
    assert quant.predicted_effect["tpot_seconds"] == {"before": 0.0062, "after": 0.0036}
    assert quant.sufficient  # 3.6 ms ≤ 5 ms
    assert "measured on your own evals" in quant.description
    assert (tp.dial, tp.suggested) == ("tensor_parallel_size", 2)
    assert tp.predicted_effect["tpot_seconds"] == {"before": 0.0062, "after": 0.0038}


def test_at_a_full_batch_the_weight_turns_are_withheld_as_the_weights_are_not_the_step() -> None:
    """Breaker 27: at 256 running (the cap) with a queue the incident's turn became "fp8 weights … though just 256
    sequences run per replica: each step is bound by reading the weights". By hand (ROOFLINE, the pool above): 256
    sequences at 90 % of 432,000 tokens hold 1,518.75 tokens each, 256 × 1,518.75 × 131,072 B = 50.96 GB of KV a step
    against the 16.09 GB of weights (the test above's bf16 16,094,076,928 B): 16.09 ÷ 67.05 = 24 % of the step, under
    half, so fp8 (and TP) are withheld; at 2 sequences (the test above) the weights are nearly all of it."""
    dep = ctx(slo=SLOTargets(2.5, 0.05, 0.9), perf=ROOFLINE)
    e = ev(
        dep=dep,
        goodput=good(1.0, 0.2),
        requests_running=256,
        kv_cache_usage_ratio=0.9,
        tpot=hist((1.0, 100), total_sum=4.5),  # 45 ms observed: within twice the step, not outside the GPU
        **requests(100),
    )
    turns = [p for p in RULE.propose(e) if p.dial in ("weight_quantization", "tensor_parallel_size")]
    assert turns and all(p.withheld and "not bound by reading the weights" in p.withheld for p in turns), turns
    assert "~24% of the modelled step" in turns[0].withheld, turns[0].withheld


def test_awq_on_a_gpu_without_fp8() -> None:
    dep = ctx(slo=SLOTargets(2.5, 0.005, 0.9), gpu="A100-80GB")
    e = ev(dep=dep, goodput=good(1.0, 0.2), requests_running=2, kv_cache_usage_ratio=0.01, **requests(100))
    assert RULE.propose(e)[0].suggested == "awq"


def test_an_already_quantized_checkpoint_is_not_quantized_again_and_never_raises() -> None:
    """Field-state round 67 (vllm#22331): gpt-oss-120b (an mxfp4 checkpoint) on an A100 without fp8, TPOT missed at
    one stream: the rule built ``awq`` weights for it, which the capacity inputs refuse (CapacityError), and the
    exception dropped the deployment's evaluation. A checkpoint quantized by its own ``quantization_config`` gets no
    weight-quantization turn, and a turn the inputs refuse is skipped, never raised."""
    from advisor.capacity.models import get_preset

    dep = ctx(slo=SLOTargets(2.5, 0.005, 0.9), gpu="A100-80GB", model=get_preset("openai/gpt-oss-120b"))
    assert dep.inputs.effective_quantization is not None
    e = ev(dep=dep, goodput=good(1.0, 0.2), requests_running=1, kv_cache_usage_ratio=0.01, **requests(100))
    assert "weight_quantization" not in {p.dial for p in RULE.propose(e)}


def test_never_raises_max_num_seqs() -> None:
    cases: list[dict[str, Any]] = [
        {"dep": TIGHT, "goodput": good(1.0, 0.3), "requests_running": 200, "kv_cache_usage_ratio": 1.0},
        {"dep": TIGHT, "goodput": good(0.3, 0.3), "requests_running": 2, "kv_cache_usage_ratio": 0.01},
    ]
    for kw in cases:
        assert not any(
            p.dial == "max_num_seqs" and p.action != "decrease" for p in RULE.propose(ev(**kw, **requests(100)))
        )


@pytest.mark.parametrize(("held", "opens"), [(119.5, False), (120.0, True)], ids=["just short of 120 s", "at 120 s"])
def test_for_duration(held: float, opens: bool) -> None:
    def make(now: float) -> Any:
        return ev(now=now, dep=TIGHT, goodput=good(1.0, 0.3), requests_running=200, kv_cache_usage_ratio=1.0,
                  **requests(100))  # fmt: skip

    assert opens_after(RULE, make, held) is opens


def test_tpot_far_above_a_step_that_meets_the_target_withholds_the_gpu_turns() -> None:
    # sgl-project/sglang#23393 (field state round 30): requests saw 180 ms a token while the scheduler made one every
    # 39 ms; the detokenizer held the rest. Here the modeled step is 6.2 ms (the test above) against a 10 ms target
    # while requests see 40 ms: the step is 16 % of it, so neither fp8 weights nor TP 2 can close the miss.
    dep = ctx(slo=SLOTargets(2.5, 0.010, 0.9), perf=ROOFLINE)
    slow = {"tpot": hist((0.05, 100), total_sum=100 * 0.040)}
    e = ev(dep=dep, goodput=good(1.0, 0.2), requests_running=2, kv_cache_usage_ratio=0.01, **requests(100), **slow)
    quant, tp = RULE.propose(e)
    for p in (quant, tp):
        assert p.withheld is not None and "outside the GPU's step" in p.withheld and "40 ms" in p.withheld
    # the same miss where requests see what the step gives (12 ms against 10): the turns stand
    near = {"tpot": hist((0.05, 100), total_sum=100 * 0.012)}
    e = ev(dep=dep, goodput=good(1.0, 0.2), requests_running=2, kv_cache_usage_ratio=0.01, **requests(100), **near)
    quant, tp = RULE.propose(e)
    assert quant.withheld is None
    assert tp.withheld == SMALL_BATCH_TP_WITHHELD  # measured no gain at a small batch in every report collected


def test_a_batch_the_sequence_cap_holds_with_a_queue_gets_no_small_batch_turn() -> None:
    # vllm-project/vllm#17788 (field-state round 73): 32 running of --max-num-seqs 32 with a queue, TPOT missed;
    # the FP8 checkpoint measured "almost the same": the queue in front of the cap held the time, not the step
    dep = ctx(slo=SLOTargets(2.5, 0.005, 0.9), perf=ROOFLINE, max_num_seqs=4)
    at_cap = ev(
        dep=dep,
        goodput=good(1.0, 0.2),
        requests_running=4,
        requests_waiting=12,
        kv_cache_usage_ratio=0.05,
        **requests(100),
    )
    turns = RULE.propose(at_cap)
    assert turns and all(p.withheld is not None and "max_num_seqs 4 holds it there" in p.withheld for p in turns)
    # the same batch with nothing waiting is small on its own: the weight turn stands
    alone = ev(
        dep=dep,
        goodput=good(1.0, 0.2),
        requests_running=4,
        requests_waiting=0,
        kv_cache_usage_ratio=0.05,
        **requests(100),
    )
    quant = [p for p in RULE.propose(alone) if p.dial == "weight_quantization"]
    assert quant and quant[0].withheld is None, quant


# --- breaker 32 -------------------------------------------------------------------------------------------------


def test_a_window_without_new_first_tokens_is_judged_on_the_requests_its_tpot_saw() -> None:
    """A saturated engine admits nobody (0 new TTFT observations) while 100 running requests finish at 0.5 s a token
    against a 0.1 s target: goodput is 0 on both bounds, a certain breach — it read "only 0 requests finished"."""
    from advisor.telemetry import goodput_from_histograms

    ttft, tpot = hist((2.5, 0.0)), hist((0.1, 0.0), (1.0, 100.0), total_sum=50.0)
    g = goodput_from_histograms(None, tpot, 2.5, 0.1)
    assert (g.ratio, g.upper) == (None, 0.0)
    e = ev(goodput=g, ttft=ttft, tpot=tpot)
    fired = RULE.fires(e)
    assert fired.holds is True, fired.reason


def test_a_target_above_the_last_finite_bound_pages_only_a_certain_breach() -> None:
    """vLLM's TTFT layout before 0.8.5 ends at 10 s; with a 15 s target and every request at 12 s the share within
    it is unknown (the lower edge, 0, was read as the share and paged: breaker 32), at least (100 × 15 − 1200) ÷
    (15 − 10) = 60 of 100 by the sum, at most all: nothing certain, no page."""
    from advisor.telemetry import goodput_from_histograms

    ttft = hist((10.0, 0.0), total_sum=1200.0)
    ttft = type(ttft)((*ttft.buckets[:-1], (float("inf"), 100.0)), 100.0, 1200.0)
    g = goodput_from_histograms(ttft, hist((0.1, 100.0), total_sum=5.0), 15.0, 0.1)
    assert g.ratio is None and g.lower == 0.0 and g.upper == 1.0
    assert g.ttft_ratio is None
    fired = RULE.fires(ev(goodput=g, ttft=ttft))
    assert fired.holds is None, fired.reason


def test_an_impossible_ttft_sum_does_not_let_a_prefill_turn_through() -> None:
    """100 requests bucketed in (1, 2.5] with a negative ``_sum``: the mean is unknown (was −1.5 s, which skipped the
    prefill-share check and proposed "tensor parallel 1 → 2"); the buckets hold it to ≥ 1.0 s, where the modeled
    prefill of a short prompt is a sliver, so the GPU-adding turns stay withheld."""
    from advisor.telemetry import histogram_mean, histogram_mean_floor, summarize

    bad = hist((1.0, 0.0), (2.5, 100.0), total_sum=-150.0)
    assert histogram_mean(bad) is None and summarize(bad) is not None and summarize(bad).mean is None  # type: ignore[union-attr]
    assert histogram_mean_floor(bad) == 1.0
    over = hist((1.0, 0.0), (2.5, 100.0), total_sum=240.0)
    over = type(over)(over.buckets, 4500.0, 240.0)  # _count 4,500 beside 100 bucketed
    assert histogram_mean(over) is None
    assert histogram_mean(hist((1.0, 0.0), (2.5, 100.0), total_sum=240.0)) == 2.4
