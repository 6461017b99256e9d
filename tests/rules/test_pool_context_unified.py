"""pool_context on llama.cpp's unified cache (``--kv-unified``): the slots share the cells and are admitted without
reserving any, so the cells must hold ``--parallel`` max-length requests — else llama.cpp aborts the running
generations ("Context size has been exceeded"), ggml-org/llama.cpp#23652 (4 slots × 1,024 on 1,024 cells).

Hand arithmetic: 1,024 cells ÷ 4 slots = 256 per slot (the cap, a multiple of 128); 1,024 ÷ 1,024 = 1 max-length
request fits (``--parallel 1``).
"""

from __future__ import annotations

import dataclasses

from advisor import conventions as c
from advisor.capacity.hardware import get_gpu
from advisor.capacity.inputs import EngineSettings
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import get_preset
from advisor.rules.base import DeploymentContext
from advisor.rules.pool_context import PoolContextRule
from tests.rules.helpers import ctx, ev

RULE = PoolContextRule()


def _llamacpp(ctx_size: int, parallel: int, unified: bool, max_model_len: int) -> DeploymentContext:
    gpu = get_gpu("rtx4090")
    inputs = CapacityInputs(
        model=get_preset("Qwen/Qwen2.5-1.5B-Instruct"),
        gpu_memory_bytes=gpu.memory_bytes,
        max_model_len=max_model_len,
        max_num_seqs=parallel,
        engine="llamacpp",
        engine_settings=EngineSettings(ctx_size=ctx_size, parallel=parallel, kv_unified=unified),
    )
    return dataclasses.replace(ctx(engine="llamacpp"), inputs=inputs, capacity=capacity_pass(inputs), gpu=gpu)


def _ev(dep: DeploymentContext) -> object:
    return ev(dep=dep, requests_running=4, requests_waiting=0, kv_capacity_tokens=dep.capacity.kv_cache_tokens)


def test_four_unified_slots_of_1024_on_1024_cells_fire_and_propose_both_ends() -> None:
    e = _ev(_llamacpp(1024, 4, True, 1024))
    cond = RULE.fires(e)  # type: ignore[arg-type]
    assert cond.holds is True, cond.reason
    assert "4 wanted" in cond.reason
    by_dial = {p.dial: p for p in RULE.propose(e)}  # type: ignore[arg-type]
    cap = by_dial[c.DIAL_MAX_MODEL_LEN]
    assert (cap.current, cap.suggested) == (1024, 256)
    assert cap.flag.startswith("remove --kv-unified")  # --ctx-size = 256 × --parallel would change nothing unified
    fewer = by_dial[c.DIAL_MAX_NUM_SEQS]
    assert (fewer.action, fewer.current, fewer.suggested, fewer.flag) == ("decrease", 4, 1, "--parallel 1")


def test_unified_slots_that_fit_their_max_length_do_not_fire() -> None:
    # 8,192 cells, 2 slots of 4,096: 2 max-length requests fit the 2 slots
    assert RULE.fires(_ev(_llamacpp(8192, 2, True, 4096))).holds is False  # type: ignore[arg-type]


def test_split_slots_keep_the_one_slot_bound() -> None:
    # without --kv-unified each slot is 1,024 ÷ 4 = 256 cells; a 256-token max-model-len fits one slot
    e = _ev(_llamacpp(1024, 4, False, 256))
    assert RULE.fires(e).holds is False  # type: ignore[arg-type]
    assert all(p.dial != c.DIAL_MAX_NUM_SEQS for p in RULE.propose(e))  # type: ignore[arg-type]
