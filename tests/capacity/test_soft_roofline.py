"""The soft roofline (issue 17, fourth pass): a kernel's memory and compute times joined by a fitted p-norm
instead of their max, in the advisor's step model, its prefill, its mixed step and the simulator's step."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.capacity.hardware import get_gpu
from advisor.capacity.perf import (
    DecodeStepModel,
    PerfAssumptions,
    decode_step_seconds,
    mixed_step_seconds,
    prefill_batch_roofline,
    roofline,
)
from advisor.sim.engine import StepCost
from tests.sim.conftest import llama_inputs

TIMES = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)


def test_exponent_zero_is_the_roofline_s_max_one_the_sum_two_the_hypotenuse() -> None:
    assert roofline(3e-3, 4e-3, 0.0) == 4e-3
    assert roofline(3e-3, 4e-3, 1.0) == pytest.approx(7e-3, rel=1e-12)
    assert roofline(3e-3, 4e-3, 2.0) == pytest.approx(5e-3, rel=1e-12)
    assert roofline(0.0, 0.0, 2.0) == 0.0
    assert roofline(0.0, 2e-3, 1.0) == pytest.approx(2e-3, rel=1e-12)
    assert roofline(3e-3, 4e-3, math.nan) == 4e-3 and roofline(3e-3, 4e-3, -1.0) == 4e-3
    assert roofline(3e-3, 4e-3, math.inf) == 4e-3


@given(TIMES, TIMES, st.floats(min_value=1.0, max_value=64.0))
def test_the_soft_roofline_lies_between_the_max_and_the_sum(memory: float, compute: float, p: float) -> None:
    got = roofline(memory, compute, p)
    assert max(memory, compute) * (1 - 1e-12) <= got <= (memory + compute) * (1 + 1e-12)
    assert got == pytest.approx(roofline(compute, memory, p), rel=1e-12)


@given(st.floats(min_value=1e-6, max_value=1.0), st.floats(min_value=1e-6, max_value=1.0))
def test_a_sharper_exponent_never_costs_more(memory: float, compute: float) -> None:
    times = [roofline(memory, compute, p) for p in (1.0, 1.5, 2.0, 4.0, 16.0)]
    assert all(a >= b * (1 - 1e-12) for a, b in itertools.pairwise(times))
    assert times[-1] >= max(memory, compute)


def test_far_from_the_ridge_the_soft_roofline_is_the_binding_term() -> None:
    # batch-1 decode: compute a thousandth of the weights' stream; at p = 2 the step is the stream + 5e-7 of it
    assert roofline(6e-3, 6e-6, 2.0) == pytest.approx(6e-3 * math.sqrt(1 + 1e-6), rel=1e-12)


def test_the_decode_step_joins_its_memory_and_compute_by_the_exponent() -> None:
    # hand coefficients: weights 6 ms, 0.05 ms KV per sequence, 0.02 ms of FLOPs per sequence; batch 100:
    # memory 6 + 5 = 11 ms, compute 2 ms; p = 1 → 13 ms, p = 2 → sqrt(121 + 4) = 11.180 ms; + 0.3 ms all-reduce
    def step(exponent: float) -> DecodeStepModel:
        return DecodeStepModel(
            memory_fixed=6e-3,
            memory_per_seq=5e-5,
            compute_per_seq=2e-5,
            comm_fixed=3e-4,
            comm_per_seq=0.0,
            roofline_exponent=exponent,
        )

    assert step(0.0)(100) == pytest.approx(11e-3 + 3e-4, rel=1e-12)
    assert step(1.0)(100) == pytest.approx(13e-3 + 3e-4, rel=1e-12)
    assert step(2.0)(100) == pytest.approx(math.sqrt(125) * 1e-3 + 3e-4, rel=1e-12)
    assert step(2.0).verify(100, 1.0) == pytest.approx(step(2.0)(100), rel=1e-12)
    # verification of 4 tokens a sequence: compute 8 ms against memory 11 ms
    assert step(1.0).verify(100, 4.0) == pytest.approx(19e-3 + 3e-4, rel=1e-12)


def test_the_exponent_reaches_every_step_the_advisor_prices() -> None:
    h100 = get_gpu("h100-sxm")
    inputs = llama_inputs()
    hard = PerfAssumptions()
    soft = PerfAssumptions(roofline_exponent=1.0)
    # decode at batch 256 (near the 8B's ridge): the sum exceeds the max by the smaller term
    assert decode_step_seconds(inputs, h100, 256, 1000, soft) > decode_step_seconds(inputs, h100, 256, 1000, hard)
    pre = prefill_batch_roofline(inputs, h100, 2000, 1.0, soft)
    assert pre.seconds == pytest.approx(pre.memory + pre.compute + pre.comm + pre.overhead, rel=1e-12)
    # a mixed step with no prompt is the decode step, with the same exponent
    assert mixed_step_seconds(inputs, h100, 64, 1000, 0.0, 1.0, soft) == pytest.approx(
        decode_step_seconds(inputs, h100, 64, 1000, soft), rel=1e-9
    )


@pytest.mark.parametrize("exponent", [1.0, 2.0, 6.0])
def test_the_simulator_s_decode_step_is_the_advisor_s_at_any_exponent(exponent: float) -> None:
    h100 = get_gpu("h100-sxm")
    inputs = llama_inputs()
    a = PerfAssumptions(roofline_exponent=exponent, kv_bandwidth_efficiency=0.7)
    cost = StepCost.from_capacity(inputs, h100, a)
    assert cost.roofline_exponent == exponent
    assert cost.scaled(0.8, 1.2).roofline_exponent == exponent
    for contexts in ([900], [900, 1100, 2000, 4000], [2000] * 300):
        batch, total = len(contexts), sum(contexts)
        step = cost.seconds(batch, batch, total, total)
        assert step == pytest.approx(decode_step_seconds(inputs, h100, batch, total / batch, a), rel=1e-9)
