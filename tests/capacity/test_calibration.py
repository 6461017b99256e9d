"""The online calibration's estimator (:mod:`advisor.capacity.calibration`): the robust scalar Kalman update by hand
arithmetic, its outlier gate and bounds, convergence on a deployment whose engine is slower than the prior, and the
lowered confidence of a model beyond its error bound (:func:`advisor.rules.common.latency_quality`)."""

from __future__ import annotations

import dataclasses
import math

import pytest

from advisor.capacity.calibration import (
    HUBER_K,
    RATIO_MAX,
    RATIO_MIN,
    FactorEstimate,
    LatencyFit,
    LatencyModel,
    WindowObservation,
    calibrate,
    robust_split_update,
    robust_update,
)
from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import DEFAULT_ASSUMPTIONS, PerfAssumptions, decode_step_model
from advisor.rules.base import Proposal
from advisor.rules.common import LATENCY_MODEL_CONFIDENCE, latency_quality
from tests.factories import evaluation

H100 = get_gpu("H100-SXM")
INPUTS = CapacityInputs(model=get_preset("meta-llama/Llama-3.1-8B-Instruct"), gpu_memory_bytes=H100.memory_bytes)


def test_one_update_by_hand() -> None:
    # P = 0.09 + 0.0025 = 0.0925; S = 0.0925 + 0.005 = 0.0975; u = −0.375 ÷ √0.0975 = −1.2010 (inside ±1.345)
    # x = 0.0925 ÷ 0.31225 × −1.2010 = −0.35577; P = 0.0925 − 0.0925² ÷ 0.0975 = 0.0047436
    est, clipped = robust_update(FactorEstimate(0.0, 0.09), -0.375, 0.005, 0.0025)
    assert not clipped
    assert est.log_ratio == pytest.approx(-0.35577, abs=1e-5)
    assert est.variance == pytest.approx(0.0047436, rel=1e-4)
    assert est.updates == 1


def test_an_outlier_moves_the_factor_by_at_most_the_clip_and_keeps_its_variance() -> None:
    # converged: P = 0.001, R = 0.003, q² = 0.0025 → S = 0.0065; a window 2× slower (z = −0.693) is u = −8.6 σ
    est, clipped = robust_update(FactorEstimate(0.0, 0.001), math.log(0.5), 0.003, 0.0025)
    assert clipped
    p, s = 0.0035, 0.0065
    assert est.log_ratio == pytest.approx(-HUBER_K * p / math.sqrt(s), rel=1e-9)  # −0.0584: 5.7 %, not 50 %
    assert est.variance == pytest.approx(p)  # not shrunk: the window is not believed


def test_the_factor_is_bounded() -> None:
    est = FactorEstimate(0.0, 100.0)
    low, _ = robust_update(est, math.log(0.001), 0.0, 0.0)
    high, _ = robust_update(est, math.log(1000.0), 0.0, 0.0)
    assert low.ratio == pytest.approx(RATIO_MIN)
    assert high.ratio == pytest.approx(RATIO_MAX)


def _observation(tpot: float, batch: float = 32.0) -> WindowObservation:
    return WindowObservation(
        batch=batch,
        context_tokens=1150.0,
        prompt_tokens=1000.0,
        requests_per_second=0.0,
        tpot_seconds=tpot,
        tpot_count=200.0,
    )


def test_a_slower_engine_is_learned_within_three_windows() -> None:
    # hand arithmetic: Llama-3.1-8B bf16 weights 16,060,522,496 B; KV 131,072 B per token (32 layers × 8 KV heads ×
    # 128 × 2 × 2 B); at batch 32 and 1,150 tokens of context the step reads 16.0605 GB + 4.8234 GB = 20.884 GB.
    # An engine at 0.55 of 3.35 TB/s takes 20.884 ÷ 1.8425 TB/s = 11.335 ms; a prior of the plain roofline (0.80
    # bandwidth, no step overhead: pinned, so the arithmetic holds whatever the published fit says) says 7.792 ms.
    engine_tpot = 20.884e9 / (3.35e12 * 0.55)
    model = LatencyModel.prior("vllm", DEFAULT_ASSUMPTIONS)
    prior_tpot = model.predicted_tpot(INPUTS, H100, _observation(engine_tpot))
    assert prior_tpot == pytest.approx(20.884e9 / (3.35e12 * 0.80), rel=0.01)
    errors = []
    for _ in range(3):
        step = calibrate(model, INPUTS, H100, _observation(engine_tpot))
        model = step.model
        errors.append(step.tpot_error_ratio)
    assert errors[0] == pytest.approx(0.55 / 0.80 - 1, abs=0.01)  # −31 %: the prior's one-step-ahead error
    final = model.predicted_tpot(INPUTS, H100, _observation(engine_tpot))
    assert abs(final / engine_tpot - 1) < 0.02
    assert model.decode.ratio == pytest.approx(0.55 / 0.80, rel=0.02)
    assert model.effective_assumptions(H100).memory_bandwidth_efficiency == pytest.approx(0.55, rel=0.02)


def test_the_calibrated_step_divides_the_work_and_the_expert_stream_and_scales_the_overhead_by_its_own_ratio() -> None:
    # calibrated step = roofline work ÷ r_d + per-step overhead × o_d at every batch (calibrate()'s measurement
    # model, robust_split_update): with r_d = 0.5 and o_d = 3 it is exactly twice the prior's work (MoE expert
    # streaming included: Mixtral, 2 of 8 experts, the untouched share 0.75^B of the expert bytes not read) plus
    # three times its 2 ms overhead
    mixtral = CapacityInputs(
        model=get_preset("mistralai/Mixtral-8x7B-Instruct-v0.1"), gpu_memory_bytes=H100.memory_bytes,
        tensor_parallel_size=2,
    )  # fmt: skip
    prior = PerfAssumptions(step_overhead_seconds=0.002)
    half = FactorEstimate(math.log(0.5), 0.01, updates=1)
    model = LatencyModel("vllm", decode=half, prior_assumptions=prior)
    for batch in (1.0, 4.0, 64.0):
        expected = 2 * (decode_step_model(mixtral, H100, 1000.0, prior)(batch) - 0.002) + 0.002
        assert model.tpot_seconds(mixtral, H100, batch, 1000.0) == pytest.approx(expected, rel=1e-12)
    tripled = dataclasses.replace(model, decode_overhead=FactorEstimate(math.log(3.0), 0.01, updates=1))
    for batch in (1.0, 64.0):
        expected = 2 * (decode_step_model(mixtral, H100, 1000.0, prior)(batch) - 0.002) + 3 * 0.002
        assert tripled.tpot_seconds(mixtral, H100, batch, 1000.0) == pytest.approx(expected, rel=1e-12)
    assert decode_step_model(mixtral, H100, 1000.0, prior).expert_memory > 0  # the MoE term is there to keep


def test_the_calibrated_step_divides_the_serial_attention_and_scales_the_per_sequence_overhead() -> None:
    # the terms issue 17 part 2 added: attention after the GEMMs is roofline work (÷ r_d), the CPU time per sequence
    # an overhead (× o_d): with r_d = 0.5, o_d = 3, 2 ms + 25 µs/sequence of prior overhead, the step at batch B is
    # 2 × (prior step − 2 ms − 25 µs × B) + 3 × (2 ms + 25 µs × B)
    inputs = CapacityInputs(model=get_preset("llama-3.1-8b"), gpu_memory_bytes=H100.memory_bytes)
    prior = PerfAssumptions(
        step_overhead_seconds=0.002, step_overhead_per_seq_seconds=25e-6, attention_serial_fraction=1.0
    )
    model = LatencyModel(
        "vllm",
        decode=FactorEstimate(math.log(0.5), 0.01, updates=1),
        prior_assumptions=prior,
        decode_overhead=FactorEstimate(math.log(3.0), 0.01, updates=1),
    )
    assert decode_step_model(inputs, H100, 2000.0, prior).attention_memory_per_seq > 0
    for batch in (1.0, 32.0, 256.0):
        overhead = 0.002 + 25e-6 * batch
        expected = 2 * (decode_step_model(inputs, H100, 2000.0, prior)(batch) - overhead) + 3 * overhead
        assert model.tpot_seconds(inputs, H100, batch, 2000.0) == pytest.approx(expected, rel=1e-12)


def test_one_burst_window_does_not_undo_a_converged_factor() -> None:
    engine_tpot = 20.884e9 / (3.35e12 * 0.55)
    model = LatencyModel.prior("vllm")
    for _ in range(6):
        model = calibrate(model, INPUTS, H100, _observation(engine_tpot)).model
    before = model.decode.ratio
    step = calibrate(model, INPUTS, H100, _observation(engine_tpot * 3))  # a window three times slower
    assert step.decode_clipped
    assert step.model.decode.ratio / before > 0.85  # moved by the clip, not by a factor of 3


def test_prefill_is_learned_from_ttft_less_queue_time() -> None:
    # the plain roofline prior (no overheads): the whole miss is the efficiency's, r_p = 1 ÷ 1.5 (with the fitted
    # prior's 47 ms per-request overhead part of it would be the overhead's, robust_split_update)
    prior = LatencyModel.prior("vllm", PerfAssumptions())
    t_p = prior.prefill_seconds(INPUTS, H100, 2000.0)
    obs = WindowObservation(
        batch=0.0,
        context_tokens=2000.0,
        prompt_tokens=2000.0,
        requests_per_second=0.0,
        prefill_seconds=t_p * 1.5,
        ttft_count=100.0,
    )
    model = prior
    for _ in range(3):
        model = calibrate(model, INPUTS, H100, obs).model
    assert model.prefill.ratio == pytest.approx(1 / 1.5, rel=0.03)
    assert model.decode.updates == 0  # no TPOT in these windows: decode keeps its prior


def _proposal(confidence: float = 0.8) -> Proposal:
    return Proposal(
        rule="queue_growth",
        dial="replicas",
        action="increase",
        current=1,
        suggested=3,
        flag="",
        severity="warning",
        confidence=confidence,
        summary="",
        description="",
        predicted_effect={},
        evidence={"kept": 1},
        score=1.0,
    )


def test_a_model_beyond_its_bound_halves_every_proposal_and_says_why() -> None:
    ev = evaluation()
    bad = LatencyFit(LatencyModel.prior("vllm"), tpot_error_ratio=-0.31, ttft_error_ratio=0.05, windows=1)
    [p] = latency_quality(dataclasses.replace(ev, latency=bad), [_proposal()])
    assert p.confidence == pytest.approx(0.8 * LATENCY_MODEL_CONFIDENCE)
    assert "-31%" in p.evidence["latency_model_confidence"]
    assert p.evidence["kept"] == 1 and p.evidence["model_tpot_error_ratio"] == -0.31
    good = dataclasses.replace(bad, tpot_error_ratio=-0.1)
    [q] = latency_quality(dataclasses.replace(ev, latency=good), [_proposal()])
    assert q.confidence == 0.8 and "latency_model_confidence" not in q.evidence
    assert q.evidence["latency_model"] == "prior"
    # idempotent: applied twice, lowered once
    [again] = latency_quality(dataclasses.replace(ev, latency=bad), [p])
    assert again.confidence == p.confidence


def test_the_split_update_without_an_overhead_is_the_scalar_filter() -> None:
    est = FactorEstimate(0.1, 0.05, updates=2)
    over = FactorEstimate(0.0, 2.25)
    z = math.log(0.004 / 0.006)
    scalar, clipped = robust_update(est, z, 0.003, 0.0025)
    work, same, split_clipped = robust_split_update(est, over, 0.004, 0.0, 0.006, 0.003, 0.0025)
    assert work == scalar and split_clipped == clipped and same == over


def test_a_miss_goes_to_the_overhead_where_the_roofline_is_a_sliver_and_to_the_efficiency_where_it_dominates() -> None:
    # the docstring's example: prior 0.5 ms of work + 1.1 ms of overhead, observed 1.1 ms (a tiny model on a CPU)
    decode, over = FactorEstimate(0.0, 0.09), FactorEstimate(0.0, 1.5**2)
    r = 0.05**2 + 0.5**2 / 1000
    work, overhead, clipped = robust_split_update(decode, over, 0.5e-3, 1.1e-3, 1.1e-3, r, 0.05**2)
    assert not clipped
    assert 0.5e-3 / work.ratio + 1.1e-3 * overhead.ratio == pytest.approx(1.1e-3, rel=0.01)  # fits the window
    assert abs(work.log_ratio) < 0.05 and overhead.ratio < 0.6  # the overhead moved, the efficiency barely
    # the same miss where the roofline is 20 ms and the overhead 1.1 ms (an 8B decode): the efficiency moves
    work, overhead, _ = robust_split_update(decode, over, 20e-3, 1.1e-3, 21.1e-3 * 1.1 / 1.6, r, 0.05**2)
    # the posterior keeps R ÷ S ≈ 3 % of the log miss (0.37): 1.1 %
    assert 20e-3 / work.ratio + 1.1e-3 * overhead.ratio == pytest.approx(21.1e-3 * 1.1 / 1.6, rel=0.02)
    assert work.ratio > 1.3  # the efficiency carries the miss: 20 ms ÷ r_d of the 14.5 ms, r_d ≈ 1.5


def test_a_prior_five_times_off_is_taken_at_the_second_clipped_window_on_the_same_side() -> None:
    # the CPU vLLM on a slower host (CI 97): the prior says 0.74 ms a step, the engine takes 3.7 ms (z = ln 0.2).
    # P = 0.09 + 0.0025 = 0.0925, R = 0.0025, S = 0.095: u = −1.609 ÷ 0.3082 = −5.22, clipped; x = −0.4037
    first, clipped = robust_update(FactorEstimate(0.0, 0.09), math.log(0.2), 0.0025, 0.0025)
    assert clipped and not first.settled and first.last_clip == -1
    assert first.log_ratio == pytest.approx(-HUBER_K * 0.0925 / math.sqrt(0.095), rel=1e-9)
    # second window, same side: ν = −1.609 + 0.4037 = −1.2057; P raised to ν² ÷ k² − R = 0.8011, S = 0.8036:
    # x = −0.4037 + 0.8011 ÷ 0.8036 × −1.2057 = −1.6056 (ratio 0.201 against the truth's 0.2), not clipped
    second, clipped = robust_update(first, math.log(0.2), 0.0025, 0.0025)
    nu = math.log(0.2) - first.log_ratio
    p = nu * nu / HUBER_K**2 - 0.0025
    assert not clipped and second.settled and second.last_clip == 0
    assert second.log_ratio == pytest.approx(first.log_ratio + p / (p + 0.0025) * nu, rel=1e-9)
    assert second.ratio == pytest.approx(0.2, rel=0.01)
    # before: the second window moved it by the clip again (×1.47), −0.84 in all, ratio 0.43


def test_two_outliers_on_one_side_after_settling_move_by_the_clip_each() -> None:
    # settled (a window taken unclipped): two windows 2× slower in a row are still outliers, each moved by the clip
    est, clipped = robust_update(FactorEstimate(0.0, 0.001), 0.01, 0.003, 0.0025)
    assert not clipped and est.settled
    one, clipped_one = robust_update(est, math.log(0.5), 0.003, 0.0025)
    two, clipped_two = robust_update(one, math.log(0.5), 0.003, 0.0025)
    assert clipped_one and clipped_two and one.last_clip == two.last_clip == -1
    assert two.ratio > 0.85  # two clipped steps of ~6 %, not 50 %


def test_a_first_outlier_and_one_on_the_other_side_are_both_clipped() -> None:
    # unsettled, but the second clipped window is on the other side: no inflation (a noisy start, not a wrong prior)
    first, _ = robust_update(FactorEstimate(0.0, 0.001), math.log(0.5), 0.003, 0.0025)
    second, clipped = robust_update(first, math.log(2.0), 0.003, 0.0025)
    assert clipped and second.last_clip == 1 and not second.settled
    assert abs(second.log_ratio) < 0.2
