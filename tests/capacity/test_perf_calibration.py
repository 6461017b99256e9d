"""The published-measurement calibration (issue 17 part 2): the predictor's physics by hand arithmetic, the fitted
factors' bounds, ``assumptions_for``'s group/fallback choice, and the held-out error from the committed data."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from advisor.capacity import perf
from advisor.capacity.data import read_data
from advisor.capacity.hardware import get_gpu, gpu_generation
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import DEFAULT_ASSUMPTIONS, PerfAssumptions, assumptions_for, untouched_expert_fraction
from advisor.capacity.perfdata import Measurement, measurements
from advisor.capacity.perfpredict import RowSetup, predict, row_setup

CALIBRATION = json.loads(read_data("perf_calibration.json"))


def _row(**overrides: object) -> Measurement:
    base: dict[str, object] = dict(
        id="t",
        source="https://example.invalid/t",
        quote="q",
        engine="vllm",
        engine_version="0.10.1",
        setting="serving",
        model="meta-llama/Llama-3.1-8B-Instruct",
        gpu="h100-sxm",
        gpu_count=1,
        tp=1,
        weight_precision="bf16",
        kv_cache_dtype="auto",
        concurrency=1,
        input_tokens=1000,
        output_tokens=2,
        metric="tpot_seconds",
        value=1.0,
        notes="",
    )
    base.update(overrides)
    return Measurement(**base)  # type: ignore[arg-type]


def _setup(row: Measurement) -> RowSetup:
    s = row_setup(row)
    assert not isinstance(s, str), s
    return s


def test_batch_one_serving_tpot_is_weights_over_bandwidth_plus_the_step_overhead() -> None:
    # Llama-3.1-8B bf16 on one H100-SXM, concurrency 1, 1,000 + 2 tokens: mean context 1,001 tokens.
    # (8,030,261,248 params × 2 B + rotary 131,072 × 128 × 2 B + 1,001 × 131,072 B KV) ÷ (3.35 TB/s × 0.8)
    # = 16,225,280,000 B ÷ 2.68 TB/s = 6.0542 ms, + 2 ms step overhead. No other request: no prefill interference.
    a = PerfAssumptions(memory_bandwidth_efficiency=0.8, step_overhead_seconds=0.002)
    expected = (8_030_261_248 * 2 + 131072 * 128 * 2 + 1001 * 131072) / (3.35e12 * 0.8) + 0.002
    assert predict(_setup(_row()), a) == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(0.0080542, rel=1e-4)


def test_static_batch_one_ttft_is_prefill_flops_over_peak_with_the_static_overhead() -> None:
    # gptSession-style static run, batch 1, 2,000-token prompt, one output token: TTFT = the prefill pass.
    # body 8,030,261,248 − 65 norms × 4096 − 2 × 128,256 × 4096 (embeddings + LM head) = 6,979,321,856 params;
    # 2 × 2000 × body + 2 × LM head + causal attention 2 × 32 × 32 × 128 × 2000² = 28.97 TFLOP
    # ÷ (989.5 TFLOP/s × 0.5) + step overhead 4 ms × static fraction 0.25 = 1 ms. No per-request overhead.
    row = _row(setting="static", metric="ttft_seconds", input_tokens=2000, output_tokens=1, notes="gptSessionBenchmark")
    a = PerfAssumptions(compute_efficiency=0.5, step_overhead_seconds=0.004, prefill_overhead_seconds=0.05)
    body = 8_030_261_248 - 65 * 4096 - 2 * 128256 * 4096
    flops = 2 * 2000 * body + 2 * 128256 * 4096 + 2 * 32 * 32 * 128 * 2000**2
    assert predict(_setup(row), a, static_overhead_fraction=0.25) == pytest.approx(
        flops / (989.5e12 * 0.5) + 0.001, rel=1e-6
    )


def test_fp8_weights_compute_at_the_fp8_peak_times_its_own_efficiency() -> None:
    row = _row(setting="static", metric="ttft_seconds", input_tokens=4000, output_tokens=1, weight_precision="fp8")
    body = 8_030_261_248 - 65 * 4096 - 2 * 128256 * 4096
    flops = 2 * 4000 * body + 2 * 128256 * 4096 + 2 * 32 * 32 * 128 * 4000**2
    a = PerfAssumptions(fp8_compute_efficiency=0.4)
    assert predict(_setup(row), a) == pytest.approx(flops / (1979e12 * 0.4), rel=1e-6)


def test_moe_decode_reads_only_the_experts_its_tokens_select() -> None:
    # Mixtral: 2 of 8 experts per token → an expert escapes one token with p = 0.75, eight tokens with 0.75⁸.
    mixtral = CapacityInputs(model=get_preset("mistralai/Mixtral-8x7B-Instruct-v0.1"), gpu_memory_bytes=80 * 2**30)
    assert untouched_expert_fraction(mixtral, 1) == pytest.approx(0.75)
    assert untouched_expert_fraction(mixtral, 8) == pytest.approx(0.75**8)
    h100 = get_gpu("h100-sxm")
    step = perf.decode_step_model(mixtral, h100, 0.0)
    # batch 1 streams the weights less 3/4 of the routed experts: 32 layers × 8 experts × 3 × 4096 × 14336 params
    experts = 32 * 8 * 3 * 4096 * 14336 * 2 / (3.35e12 * 0.8)
    assert step(1) == pytest.approx(step.memory_fixed - 0.75 * experts, rel=1e-6)


def test_dense_defaults_are_the_plain_roofline() -> None:
    # the added terms default off: no overhead, no expert term for a dense model
    inputs = CapacityInputs(model=get_preset("llama-3.1-8b"), gpu_memory_bytes=80 * 2**30)
    step = perf.decode_step_model(inputs, get_gpu("h100-sxm"), 1000.0)
    assert (step.overhead, step.expert_memory) == (0.0, 0.0)
    assert (step.attention_memory_per_seq, step.attention_compute_per_seq, step.overhead_per_seq) == (0.0, 0.0, 0.0)
    assert DEFAULT_ASSUMPTIONS.fp4_compute_efficiency is None
    assert DEFAULT_ASSUMPTIONS.allreduce_hop_latency_seconds == 0.0


def test_serial_attention_adds_the_kv_read_to_the_compute_bound_gemms() -> None:
    # Llama-3.1-8B bf16, one H100-SXM, batch 512 at 1,000 tokens of context, efficiencies 0.8 (HBM) and 0.6 (BF16).
    # weights (8,030,261,248 × 2 + rotary 131,072 × 128 × 2 B) ÷ 2.68 TB/s = 6.005 ms; GEMMs 512 × 2 × (body
    # 6,979,321,856 + LM head 525,336,576) FLOPs ÷ (989.5 TFLOP/s × 0.6) = 12.95 ms (compute-bound); KV 512 × 1,000 ×
    # 131,072 B ÷ 2.68 TB/s = 25.04 ms; attention FLOPs 512 × 4 × 32 × 32 × 128 × 1,000 ÷ 593.7 TFLOP/s = 0.45 ms.
    # One roofline over the step: max(6.005 + 25.04, 12.95 + 0.45) = 31.05 ms; attention as its own kernel after the
    # GEMMs: max(6.005, 12.95) + max(25.04, 0.45) = 37.99 ms.
    inputs = CapacityInputs(model=get_preset("llama-3.1-8b"), gpu_memory_bytes=80 * 2**30)
    h100 = get_gpu("h100-sxm")
    weights = (8_030_261_248 * 2 + 131072 * 128 * 2) / (3.35e12 * 0.8)
    gemm = 512 * 2 * (6_979_321_856 + 128256 * 4096) / (989.5e12 * 0.6)
    kv = 512 * 1000 * 131072 / (3.35e12 * 0.8)
    attention = 512 * 4 * 32 * 32 * 128 * 1000 / (989.5e12 * 0.6)
    plain = perf.decode_step_model(inputs, h100, 1000.0)
    serial = perf.decode_step_model(inputs, h100, 1000.0, PerfAssumptions(attention_serial_fraction=1.0))
    assert plain(512) == pytest.approx(max(weights + kv, gemm + attention), rel=1e-6)
    assert serial(512) == pytest.approx(max(weights, gemm) + kv, rel=1e-6)
    assert serial(512) == pytest.approx(0.03799, rel=1e-3)
    # half serial: half the KV read and attention stay under the roofline, the other half runs after it
    half = perf.decode_step_model(inputs, h100, 1000.0, PerfAssumptions(attention_serial_fraction=0.5))
    assert half(512) == pytest.approx(max(weights + kv / 2, gemm + attention / 2) + kv / 2, rel=1e-6)


def test_the_per_sequence_overhead_adds_per_running_and_admitted_sequence() -> None:
    # 20 µs per sequence per step: a decode step of 8 sequences adds 160 µs; a mixed step of 8 decodes admitting 0.5
    # prompts adds 8.5 × 20 µs; a static run's is scaled by the static fraction like the fixed step overhead.
    inputs = CapacityInputs(model=get_preset("llama-3.1-8b"), gpu_memory_bytes=80 * 2**30)
    h100 = get_gpu("h100-sxm")
    a = PerfAssumptions(step_overhead_per_seq_seconds=20e-6)
    base = perf.decode_step_model(inputs, h100, 1000.0)
    assert perf.decode_step_model(inputs, h100, 1000.0, a)(8) == pytest.approx(base(8) + 160e-6, rel=1e-9)
    mixed = perf.mixed_step_seconds(inputs, h100, 8, 1000.0, 0.5, 500, a)
    assert mixed == pytest.approx(perf.mixed_step_seconds(inputs, h100, 8, 1000.0, 0.5, 500) + 8.5 * 20e-6, rel=1e-9)
    row = _row(setting="static", metric="tpot_seconds", concurrency=8, notes="benchmark_latency")
    got = predict(_setup(row), a, static_overhead_fraction=0.25)
    assert got == pytest.approx(perf.decode_step_model(inputs, h100, 1001.0)(8) + 0.25 * 160e-6, rel=1e-6)


def test_ring_allreduce_latency_grows_with_its_two_tp_minus_one_steps() -> None:
    # Llama-3.1-70B at TP 4: 80 layers × 2 all-reduces, each 10 µs + 2 × (4 − 1) × 2 µs = 22 µs → 3.52 ms per step at
    # batch 0 (no bytes); TP 8: 10 + 14 × 2 = 38 µs → 6.08 ms. Without the hop term: 1.6 ms at either TP.
    h100 = get_gpu("h100-sxm")
    a = PerfAssumptions(allreduce_latency_seconds=10e-6, allreduce_hop_latency_seconds=2e-6)
    for tp, expected in ((4, 3.52e-3), (8, 6.08e-3)):
        inputs = CapacityInputs(model=get_preset("llama-3.1-70b"), gpu_memory_bytes=80 * 2**30, tensor_parallel_size=tp)
        assert perf.decode_step_model(inputs, h100, 0.0, a).comm_fixed == pytest.approx(expected, rel=1e-9)
        assert perf.decode_step_model(inputs, h100, 0.0).comm_fixed == pytest.approx(1.6e-3, rel=1e-9)


def test_gpu_generations_follow_vendor_and_compute_capability() -> None:
    got = {
        k: gpu_generation(get_gpu(k)) for k in ("v100-16gb", "t4", "a100-80gb", "l40s", "h100-sxm", "b200", "mi300x")
    }
    assert got == {
        "v100-16gb": "volta",
        "t4": "turing",
        "a100-80gb": "ampere",
        "l40s": "ada",
        "h100-sxm": "hopper",
        "b200": "blackwell",
        "mi300x": "cdna3",
    }


PHYSICAL = {
    "memory_bandwidth_efficiency": (0.5, 0.95),
    "kv_bandwidth_efficiency": (0.3, 0.95),
    "expert_bandwidth_efficiency": (0.15, 0.95),
    "compute_efficiency": (0.25, 0.85),
    "fp8_compute_efficiency": (0.2, 0.85),
    "fp4_compute_efficiency": (0.1, 0.85),
    "step_overhead_seconds": (0.0, 0.02),
    "prefill_overhead_seconds": (0.0, 0.1),
    "interconnect_efficiency": (0.3, 0.9),
    "allreduce_latency_seconds": (3e-6, 30e-6),
    "attention_serial_fraction": (0.0, 1.0),
    "step_overhead_per_seq_seconds": (0.0, 50e-6),
    "allreduce_hop_latency_seconds": (0.0, 5e-6),
    "roofline_exponent": (1.0, 32.0),
}
"""The plausible ranges (bench/fit_perf.py BOUNDS, written again here so the test can fail)."""


def test_every_fitted_factor_is_within_its_physical_range() -> None:
    blocks = [CALIBRATION["global"], *CALIBRATION["groups"].values()]
    for block in blocks:
        assert set(block["factors"]) == set(PHYSICAL)
        for name, value in block["factors"].items():
            lo, hi = PHYSICAL[name]
            assert lo <= value <= hi, (name, value)
    assert 0.0 <= CALIBRATION["static_overhead_fraction"] <= 1.0


def test_assumptions_for_picks_the_group_then_the_global_fit() -> None:
    h100 = get_gpu("h100-sxm")
    group = CALIBRATION["groups"]["trtllm/hopper"]["factors"]
    got = assumptions_for("trtllm", h100)
    assert got.memory_bandwidth_efficiency == group["memory_bandwidth_efficiency"]
    assert got.step_overhead_seconds == group["step_overhead_seconds"]
    assert assumptions_for("nim", h100) == got  # NIM 1.x is TensorRT-LLM
    fitted = CALIBRATION["global"]["factors"]
    for engine, gpu in (("tgi", h100), ("vllm", get_gpu("v100-16gb"))):  # no group fitted
        a = assumptions_for(engine, gpu)
        assert a.memory_bandwidth_efficiency == fitted["memory_bandwidth_efficiency"]
        assert a.compute_efficiency == fitted["compute_efficiency"]


def test_assumptions_for_falls_back_to_the_defaults_without_a_calibration(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> str:
        raise OSError(name)

    perf._calibration.cache_clear()
    monkeypatch.setattr(perf, "read_data", missing)
    try:
        assert assumptions_for("vllm", get_gpu("h100-sxm")) == DEFAULT_ASSUMPTIONS
    finally:
        monkeypatch.undo()
        perf._calibration.cache_clear()


DECODE = {"output_tokens_per_second", "output_tokens_per_second_per_user", "tpot_seconds", "total_tokens_per_second"}


def _held_out_errors() -> dict[str, list[float]]:
    fraction = CALIBRATION["static_overhead_fraction"]
    out: dict[str, list[float]] = {"decode_stated": [], "ttft": [], "decode_saturation": []}
    for row in measurements():
        if not row.held_out:
            continue
        s = row_setup(row)
        if isinstance(s, str):
            continue
        err = abs(predict(s, assumptions_for(row.engine, s.gpu), fraction) / row.value - 1.0)
        if row.metric in DECODE:
            out["decode_stated" if s.batch_rule == "stated" else "decode_saturation"].append(err)
        elif row.metric == "ttft_seconds":
            out["ttft"].append(err)
    return out


def _p90(errs: list[float]) -> float:
    errs = sorted(errs)
    return errs[math.ceil(0.9 * len(errs)) - 1]


HELD = _held_out_errors()


def test_the_held_out_set_is_the_committed_third() -> None:
    # 16 / 16 / 5 rows from the first table; 2026-12-05 added 3 stated-batch and 16 saturation rows (18 new pages);
    # 2026-12-07 round 75 (113 rows from 7 pages no fit has seen) 8 stated-batch and 4 TTFT rows (the B200 page).
    assert len(HELD["decode_stated"]) == 27 and len(HELD["decode_saturation"]) == 32 and len(HELD["ttft"]) == 9


@pytest.mark.xfail(
    strict=True,
    reason="measured median |pred/obs − 1| = 0.257 on 27 held-out rows since round 75 (2026-12-07: a B200 page "
    "whose gpt-oss-20b decodes at the H200's 220 tokens/s a stream, predicted 2.7-3.7x faster); 0.229 on 19 with "
    "the fifth pass of 2026-12-06 (0.236 with "
    "the soft roofline alone, 0.113 with the max before it): the NIM Llama-3.3-70B TP2 rows at concurrency 25-50 are "
    "17-23 % slow where the max had them within 3 %, the 0.5B on an L4 13-41 % fast; both passes were chosen on the "
    "in-sample rows (Huber loss 2.24 -> 1.88 -> 1.79; held-out loss 1.29 -> 1.23 -> 1.23): see docs/capacity.md",
)
def test_held_out_decode_at_a_stated_batch_is_within_15_percent_at_the_median() -> None:
    assert statistics.median(HELD["decode_stated"]) <= 0.15


@pytest.mark.xfail(
    strict=True,
    reason="measured p90 |pred/obs − 1| = 2.07 on 27 held-out rows since round 75 (the B200 gpt-oss-20b page, "
    "2.7-3.7x fast); before it 1.24 on 19 (SGLang DeepSeek-V3 at TP 16 over two nodes "
    "over-predicted 2.2-2.4x with the cross-node all-reduce priced, TP 8 on H20 1.36x; the 0.5B on an L4 at "
    "concurrency 32 1.40x): see docs/capacity.md",
)
def test_held_out_decode_at_a_stated_batch_is_within_35_percent_at_p90() -> None:
    assert _p90(HELD["decode_stated"]) <= 0.35


@pytest.mark.xfail(
    strict=True,
    reason="measured median |pred/obs − 1| = 0.536 on 9 held-out rows since round 75 (2026-12-07): the B200 page's "
    "four gpt-oss-20b TTFT rows; 0.194 on the 5 before it (met). See docs/capacity.md, 'A fresh table'",
)
def test_held_out_ttft_is_within_25_percent_at_the_median() -> None:
    assert statistics.median(HELD["ttft"]) <= 0.25
