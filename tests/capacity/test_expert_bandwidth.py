"""The MoE experts' own streaming efficiency (issue 17, fifth pass): a routed expert's weights read at
``expert_bandwidth_efficiency`` of peak instead of the dense weights' ``memory_bandwidth_efficiency``, in the decode
step, the prefill, the mixed step and the simulator's step."""

from __future__ import annotations

import pytest

from advisor.capacity import perf
from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.capacity.perf import PerfAssumptions
from advisor.sim.engine import StepCost
from tests.sim.conftest import llama_inputs

H100_BYTES_PER_SECOND = 3.35e12
MIXTRAL_EXPERT_BYTES = 32 * 8 * 3 * 4096 * 14336 * 2  # 32 layers × 8 experts × gate/up/down 4096 × 14336, bf16


def _mixtral() -> CapacityInputs:
    return CapacityInputs(model=get_preset("mistralai/Mixtral-8x7B-Instruct-v0.1"), gpu_memory_bytes=80 * 2**30)


def test_unset_or_equal_it_is_the_dense_stream() -> None:
    h100 = get_gpu("h100-sxm")
    base = PerfAssumptions(memory_bandwidth_efficiency=0.8)
    same = PerfAssumptions(memory_bandwidth_efficiency=0.8, expert_bandwidth_efficiency=0.8)
    for batch in (1, 8, 64):
        assert perf.decode_step_seconds(_mixtral(), h100, batch, 2000, same) == pytest.approx(
            perf.decode_step_seconds(_mixtral(), h100, batch, 2000, base), rel=1e-12
        )


def test_a_slower_expert_stream_adds_its_time_on_the_touched_experts_only() -> None:
    # batch 1: 2 of 8 experts read (1/4 of the expert bytes); at half the dense efficiency each read takes twice as
    # long: + 1/4 × bytes ÷ (3.35 TB/s × 0.4) − 1/4 × bytes ÷ (3.35 TB/s × 0.8)
    h100 = get_gpu("h100-sxm")
    dense = PerfAssumptions(memory_bandwidth_efficiency=0.8)
    slow = PerfAssumptions(memory_bandwidth_efficiency=0.8, expert_bandwidth_efficiency=0.4)
    quarter = MIXTRAL_EXPERT_BYTES / 4
    extra = quarter / (H100_BYTES_PER_SECOND * 0.4) - quarter / (H100_BYTES_PER_SECOND * 0.8)
    got = perf.decode_step_seconds(_mixtral(), h100, 1, 0.0, slow) - perf.decode_step_seconds(
        _mixtral(), h100, 1, 0.0, dense
    )
    assert got == pytest.approx(extra, rel=1e-6)
    # a prompt of 4,096 tokens touches every expert (0.75^4096 escapes): all of them at the slower rate
    pre_dense = perf.prefill_batch_roofline(_mixtral(), h100, 4096, 1.0, dense)
    pre_slow = perf.prefill_batch_roofline(_mixtral(), h100, 4096, 1.0, slow)
    whole = MIXTRAL_EXPERT_BYTES / (H100_BYTES_PER_SECOND * 0.4) - MIXTRAL_EXPERT_BYTES / (H100_BYTES_PER_SECOND * 0.8)
    assert pre_slow.memory - pre_dense.memory == pytest.approx(whole, rel=1e-6)


def test_a_dense_model_does_not_see_it() -> None:
    h100 = get_gpu("h100-sxm")
    a = PerfAssumptions(memory_bandwidth_efficiency=0.8)
    b = PerfAssumptions(memory_bandwidth_efficiency=0.8, expert_bandwidth_efficiency=0.2)
    assert perf.decode_step_seconds(llama_inputs(), h100, 16, 1000, a) == perf.decode_step_seconds(
        llama_inputs(), h100, 16, 1000, b
    )


def test_the_mixed_step_and_the_simulator_price_it_as_the_decode_step() -> None:
    h100 = get_gpu("h100-sxm")
    a = PerfAssumptions(memory_bandwidth_efficiency=0.8, expert_bandwidth_efficiency=0.35, roofline_exponent=1.0)
    assert perf.mixed_step_seconds(_mixtral(), h100, 8, 1000, 0.0, 1.0, a) == pytest.approx(
        perf.decode_step_seconds(_mixtral(), h100, 8, 1000, a), rel=1e-9
    )
    cost = StepCost.from_capacity(_mixtral(), h100, a)
    assert cost.seconds(8, 8, 8000, 8000) == pytest.approx(
        perf.decode_step_seconds(_mixtral(), h100, 8, 1000, a), rel=1e-9
    )
