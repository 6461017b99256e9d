"""The speculative round against plain decoding (:mod:`advisor.capacity.spec_speedup`), on step models whose
coefficients make every figure checkable by hand, and :meth:`DecodeStepModel.verify` on real presets."""

from __future__ import annotations

import pytest

from advisor.capacity.hardware import get_gpu
from advisor.capacity.inputs import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import DEFAULT_ASSUMPTIONS, DecodeStepModel, decode_step_model
from advisor.capacity.spec_speedup import best_draft_length, speculative_speedup

# step(B) = max(10 ms, 0.1 ms × B) + 1 ms: memory-bound up to B = 100, compute-bound past it
STEP = DecodeStepModel(
    memory_fixed=0.010, memory_per_seq=0.0, compute_per_seq=0.0001, comm_fixed=0.0, comm_per_seq=0.0, overhead=0.001
)


def test_verify_scores_every_query_token_but_reads_the_weights_once() -> None:
    # B = 10, q = 4: max(10 ms, 0.1 ms × 40 = 4 ms) + 1 ms = 11 ms, the plain step's
    assert STEP.verify(10, 4) == pytest.approx(0.011)
    # B = 400, q = 4: max(10 ms, 160 ms) + 1 ms = 161 ms against 41 ms plain
    assert STEP.verify(400, 4) == pytest.approx(0.161)
    assert STEP(400) == pytest.approx(0.041)


@pytest.mark.parametrize("model", ["meta-llama/Llama-3.1-8B-Instruct", "Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-32B"])
@pytest.mark.parametrize("batch", [1.0, 7.5, 256.0])
def test_verify_of_one_token_is_the_decode_step(model: str, batch: float) -> None:
    gpu = get_gpu("h100-sxm")
    inputs = CapacityInputs(model=get_preset(model), gpu_memory_bytes=gpu.memory_bytes, tensor_parallel_size=2)
    step = decode_step_model(inputs, gpu, 3000.0, DEFAULT_ASSUMPTIONS)
    assert step.verify(batch, 1) == pytest.approx(step(batch), rel=1e-12)
    assert step.verify(batch, 5) >= step(batch)


def test_memory_bound_speculation_returns_its_acceptance_length() -> None:
    assert speculative_speedup(STEP, 10, 2.3, 3) == pytest.approx(2.3)


def test_compute_bound_speculation_pays_for_every_scored_token() -> None:
    # 2 tokens a round for 161 ms against 2 plain steps of 41 ms: 2 × 41 ÷ 161 = 0.50932
    assert speculative_speedup(STEP, 400, 2.0, 3) == pytest.approx(0.509317, rel=1e-5)


def test_no_draft_length_pays_at_a_compute_bound_batch() -> None:
    choice = best_draft_length(STEP, 400, [0.6, 0.3, 0.1], 3)
    # j = 1: 1.6 × 41 ÷ 81 = 0.80988; j = 2: 1.9 × 41 ÷ 121 = 0.64380; j = 3: 2.0 × 41 ÷ 161 = 0.50932
    assert choice.speedups == pytest.approx((1.0, 0.809877, 0.643802, 0.509317), rel=1e-5)
    assert choice.best == (0, 1.0)
    assert choice.current[0] == 3


def test_a_shorter_draft_wins_where_later_positions_are_rarely_accepted() -> None:
    choice = best_draft_length(STEP, 60, [0.9, 0.8, 0.1], 3)
    # B = 60: plain 11 ms; j = 1: 1.9 × 11 ÷ 13 = 1.60769; j = 2: 2.7 × 11 ÷ 19 = 1.56316; j = 3: 2.8 × 11 ÷ 25 = 1.232
    assert choice.speedups == pytest.approx((1.0, 1.607692, 1.563158, 1.232), rel=1e-5)
    assert choice.best[0] == 1


def test_positions_the_counter_never_listed_accepted_nothing() -> None:
    short = best_draft_length(STEP, 60, [0.9], 3)
    # j = 2 keeps 1.9 tokens for 19 ms: 1.9 × 11 ÷ 19 = 1.1
    assert short.speedups[2] == pytest.approx(1.1)


@pytest.mark.parametrize(
    ("batch", "length", "k"), [(0.5, 2.0, 3), (10, 0.9, 3), (10, 2.0, -1)], ids=["batch", "length", "draft"]
)
def test_impossible_inputs_are_refused(batch: float, length: float, k: float) -> None:
    with pytest.raises(ValueError):
        speculative_speedup(STEP, batch, length, k)


def test_best_draft_length_refuses_a_share_outside_0_1_and_no_draft() -> None:
    with pytest.raises(ValueError, match="within 0"):
        best_draft_length(STEP, 10, [1.2], 1)
    with pytest.raises(ValueError, match="draft_length"):
        best_draft_length(STEP, 10, [0.5], 0)
    with pytest.raises(ValueError, match="tokens_per_seq"):
        STEP.verify(10, 0.5)


def test_only_the_drafted_share_of_sequences_pays_for_and_gains_from_drafts() -> None:
    # half the sequence-steps draft 3 tokens and accept 1 (a drafted step yields 2): 1.5 tokens a sequence-step, each
    # scoring 1 + 0.5 × 3 = 2.5 tokens; at B = 400: max(10 ms, 0.1 ms × 1,000) + 1 ms = 101 ms against 41 ms plain
    assert speculative_speedup(STEP, 400, 2.0, 3, 0.5) == pytest.approx(1.5 * 0.041 / 0.101)
    with pytest.raises(ValueError):
        speculative_speedup(STEP, 400, 2.0, 3, 0.0)
