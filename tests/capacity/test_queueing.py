"""Erlang C and replica sizing against textbook values and an independent closed form."""

from __future__ import annotations

import math

import pytest

from advisor.capacity.queueing import (
    erlang_c,
    mean_queue_length,
    mean_queue_wait_seconds,
    replicas_needed,
)
from advisor.errors import CapacityError


def _erlang_c_closed_form(c: int, a: float) -> float:
    """C(c, a) = [a^c/c! · c/(c−a)] / [Σ_{k<c} a^k/k! + a^c/c! · c/(c−a)] (Kleinrock 1975)."""
    top = a**c / math.factorial(c) * c / (c - a)
    return top / (sum(a**k / math.factorial(k) for k in range(c)) + top)


def test_two_servers_at_one_erlang_wait_one_third_of_the_time() -> None:
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3)


def test_one_server_reduces_to_m_m_1() -> None:
    assert erlang_c(1, 0.5) == pytest.approx(0.5)
    # M/M/1: Wq = ρ / (μ − λ) = 0.5 / (1 − 0.5) = 1 s; Lq = ρ² / (1 − ρ) = 0.5
    assert mean_queue_wait_seconds(1, 0.5, 1.0) == pytest.approx(1.0)
    assert mean_queue_length(1, 0.5, 1.0) == pytest.approx(0.5)


@pytest.mark.parametrize(("c", "a"), [(3, 2.0), (5, 4.5), (10, 8.0), (20, 15.3), (50, 45.0)])
def test_erlang_c_matches_the_closed_form(c: int, a: float) -> None:
    assert erlang_c(c, a) == pytest.approx(_erlang_c_closed_form(c, a), rel=1e-9)


def test_overload_means_everyone_waits_forever() -> None:
    assert erlang_c(2, 2.0) == 1.0
    assert erlang_c(2, 3.5) == 1.0
    assert math.isinf(mean_queue_wait_seconds(2, 2.0, 1.0))


def test_replicas_needed_meets_the_utilization_target() -> None:
    # 10 req/s, 3 req/s per replica: 4 replicas run at 0.83 > 0.8, 5 at 0.67.
    assert replicas_needed(10, 3, target_utilization=0.8) == 5
    assert replicas_needed(0, 3) == 1
    assert replicas_needed(2.9, 3, target_utilization=1.0) == 1
    assert replicas_needed(3.0, 3, target_utilization=1.0) == 2  # ρ = 1 is unstable


def test_a_wait_target_can_only_add_replicas() -> None:
    loose = replicas_needed(10, 3, target_utilization=1.0)
    tight = replicas_needed(10, 3, target_utilization=1.0, max_wait_seconds=0.01)
    assert loose == 4
    assert tight >= loose
    assert mean_queue_wait_seconds(tight, 10, 3) <= 0.01
    assert mean_queue_wait_seconds(tight - 1, 10, 3) > 0.01


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(CapacityError):
        erlang_c(0, 1.0)
    with pytest.raises(CapacityError):
        replicas_needed(1, 0)
    with pytest.raises(CapacityError):
        replicas_needed(1, 1, target_utilization=1.5)
    with pytest.raises(CapacityError):
        replicas_needed(1, 1, max_wait_seconds=0)


# --- the LLM service model ----------------------------------------------------------------------------------

from advisor.capacity.queueing import SLO, ReplicaService, Workload, predict_service, replicas_for_slo  # noqa: E402

LOOSE = SLO(ttft_seconds=1.0, tpot_seconds=0.05, target_ratio=0.5)


def _constant_step(seconds: float) -> ReplicaService:
    return ReplicaService(batch_cap=2, prefill_seconds=0.0, decode_step=lambda _b: seconds)


def test_without_prefill_and_with_exponential_outputs_the_slots_are_m_m_c() -> None:
    # 100 output tokens × 10 ms = 1 s of service (μ = 1/s), c = 2 slots, λ = 1/s: a = 1 Erlang, C = 1/3,
    # Wq = C / (cμ − λ) = 1/3 s (Allen–Cunneen factor (1 + c_s²)/2 = 1 for c_s = output_cv = 1).
    w = Workload(arrival_rate=1.0, prompt_tokens=10, output_tokens=100, output_cv=1.0)
    p = predict_service(w, _constant_step(0.01), replicas=1, slo=LOOSE)
    assert p.stable
    assert p.wait_probability == pytest.approx(1 / 3)
    assert p.mean_queue_wait_seconds == pytest.approx(1 / 3)
    assert p.mean_batch == pytest.approx(1.0, rel=1e-4)  # Little: L = λ·S = 1
    # M/M/c wait: P(W > t) = C·e^(−(cμ−λ)t): p90 solves (1/3)e^(−t) = 0.1 → t = ln(10/3) = 1.204 s.
    assert p.ttft_p90_seconds == pytest.approx(math.log(10 / 3), rel=1e-4)
    assert p.ttft_p50_seconds == pytest.approx(0.0, abs=1e-6)  # two thirds never wait
    # P(TTFT ≤ 1 s) = 1 − (1/3)e^(−1) = 0.87737; TPOT 10 ms always meets 50 ms.
    assert p.ttft_attainment == pytest.approx(1 - math.exp(-1) / 3, rel=1e-6)
    assert p.tpot_attainment == pytest.approx(1.0)
    assert p.goodput_ratio == pytest.approx(1 - math.exp(-1) / 3, rel=1e-6)
    assert p.goodput_tokens_per_second == pytest.approx(1.0 * p.goodput_ratio * 100)


def test_deterministic_outputs_halve_the_m_m_c_wait() -> None:
    # Lee–Longton / Allen–Cunneen: Wq(M/D/c) ≈ Wq(M/M/c) × (1 + 0)/2.
    w = Workload(arrival_rate=1.0, prompt_tokens=10, output_tokens=100, output_cv=0.0)
    p = predict_service(w, _constant_step(0.01), replicas=1, slo=LOOSE)
    assert p.mean_queue_wait_seconds == pytest.approx(1 / 6)


def test_prefill_queues_as_m_d_1_and_slows_decode_by_its_share() -> None:
    # λ = 2/s, prefill 0.1 s: ρ = 0.2; M/D/1 (prompt_cv = 0) Pollaczek–Khinchine wait ρ·D / (2(1 − ρ)) =
    # 0.0125 s, so mean TTFT 0.1125 s, DistServe's D + λD²/(2(1 − λD)). Decode gets 80 % of the GPU:
    # TPOT = 10 ms / 0.8 = 12.5 ms.
    w = Workload(arrival_rate=2.0, prompt_tokens=1000, output_tokens=10, prompt_cv=0.0)
    svc = ReplicaService(batch_cap=256, prefill_seconds=0.1, decode_step=lambda _b: 0.01)
    p = predict_service(w, svc, replicas=1, slo=LOOSE)
    assert p.prefill_utilization == pytest.approx(0.2)
    assert p.mean_prefill_wait_seconds == pytest.approx(0.0125)
    assert p.tpot_mean_seconds == pytest.approx(0.0125)
    assert p.wait_probability < 1e-12  # 256 slots at < 1 Erlang


def test_a_request_sees_the_size_biased_batch() -> None:
    # M/M/2 at a = 1: p0 = p1 = P(both busy) = 1/3. A request finds itself in a batch of 1 with probability
    # 1·(1/3) / a = 1/3 and of 2 with 2·(1/3) / a = 2/3. With TPOT 10 ms alone and 15 ms in pairs, a 12 ms
    # target is met by 1/3 of requests. (Stable: with both slots busy 2 requests per 1.5 s leave, > λ = 1/s.)
    w = Workload(arrival_rate=1.0, prompt_tokens=10, output_tokens=100)
    svc = ReplicaService(batch_cap=2, prefill_seconds=0.0, decode_step=lambda b: 0.01 if b <= 1.5 else 0.015)
    p = predict_service(w, svc, 1, SLO(ttft_seconds=10, tpot_seconds=0.012, target_ratio=0.5))
    assert p.tpot_attainment == pytest.approx(1 / 3, rel=1e-6)
    assert p.tpot_p50_seconds == pytest.approx(0.015)
    assert p.tpot_p90_seconds == pytest.approx(0.015)


def test_the_queue_drains_only_if_full_slots_outpace_arrivals() -> None:
    # Service time grows with the batch: 2 slots × 1/(100 × 20 ms) = 1 request/s when full = λ → unstable,
    # even though a lightly loaded replica would keep up.
    w = Workload(arrival_rate=1.0, prompt_tokens=10, output_tokens=100)
    svc = ReplicaService(batch_cap=2, prefill_seconds=0.0, decode_step=lambda b: 0.01 if b <= 1.5 else 0.02)
    assert not predict_service(w, svc, 1, LOOSE).stable


def test_saturation_is_reported_not_hidden() -> None:
    w = Workload(arrival_rate=3.0, prompt_tokens=10, output_tokens=100)
    p = predict_service(w, _constant_step(0.01), 1, LOOSE)  # λ·S = 3 > 2 slots
    assert not p.stable and p.goodput_ratio == 0 and "slots" in p.reason
    assert math.isinf(p.ttft_p90_seconds)
    svc = ReplicaService(batch_cap=64, prefill_seconds=0.5, decode_step=lambda _b: 0.01)
    p = predict_service(w, svc, 1, LOOSE)  # prefill ρ = 1.5
    assert not p.stable and "prefill" in p.reason
    assert predict_service(w, svc, 2, LOOSE).stable  # ρ = 0.75 per replica


def test_replicas_for_slo_is_the_fewest_that_meet_the_target() -> None:
    # 1 s of service per request, 2 slots per replica: 10 req/s need > 5 replicas for stability alone.
    w = Workload(arrival_rate=10.0, prompt_tokens=10, output_tokens=100)
    slo = SLO(ttft_seconds=0.5, tpot_seconds=0.05, target_ratio=0.9)
    best = replicas_for_slo(w, _constant_step(0.01), slo)
    assert best is not None and best.meets(slo)
    assert best.replicas > 5
    assert not predict_service(w, _constant_step(0.01), best.replicas - 1, slo).meets(slo)


def test_replicas_cannot_fix_a_slow_token() -> None:
    w = Workload(arrival_rate=1.0, prompt_tokens=10, output_tokens=100)
    assert replicas_for_slo(w, _constant_step(0.06), SLO(1.0, 0.05, 0.9)) is None


def test_workload_and_slo_refuse_nonsense() -> None:
    with pytest.raises(CapacityError, match="max_context_tokens"):
        Workload(arrival_rate=1, prompt_tokens=2000, output_tokens=500, max_context_tokens=1000)
    with pytest.raises(CapacityError, match="arrival_rate"):
        Workload(arrival_rate=-1, prompt_tokens=1, output_tokens=1)
    with pytest.raises(CapacityError, match="target_ratio"):
        SLO(1, 1, 1.0)
    with pytest.raises(CapacityError, match="replicas"):
        predict_service(Workload(1, 1, 1), _constant_step(0.01), 0, LOOSE)
