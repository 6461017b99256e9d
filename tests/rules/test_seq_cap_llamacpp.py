"""seq_cap on llama.cpp: every ``--parallel`` slot busy with requests deferred (mozilla-ai/llamafile#183: "The second
request waits until the first one finishes processing"; the fix the thread gives is ``-np N``; field state
``llamafile-np1-second-request-waits``). llama.cpp splits ``--ctx-size`` over the slots, so more slots come with a
larger ``--ctx-size`` that keeps each slot's cells.

Hand arithmetic: Qwen2.5-1.5B (28 layers, 2 KV heads of 128, f16 cache) holds 28 × 2 × 2 × 128 × 2 B = 28,672 B a
cell; one 4,096-cell slot is 117,440,512 B (112 MiB). On an RTX 4090 (23.58 GiB, 25,318,832,210 B) at 90 % beside
3,095,817,216 B of bf16 weights, ⌊(22,786,948,989 − 3,095,817,216) ÷ 117,440,512⌋ = 167 slots fit: far over the 3
asked for.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from advisor import conventions as c
from advisor.capacity.hardware import get_gpu
from advisor.capacity.inputs import EngineSettings
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import get_preset
from advisor.rules.base import DeploymentContext
from advisor.rules.seq_cap import SeqCapRule
from advisor.telemetry import EngineTime
from tests.rules.helpers import ctx, ev

SLOT = 4096


def _dep(parallel: int = 1, unified: bool = False, gpu: str = "rtx4090") -> DeploymentContext:
    spec = get_gpu(gpu)
    inputs = CapacityInputs(
        model=get_preset("Qwen/Qwen2.5-1.5B-Instruct"),
        gpu_memory_bytes=spec.memory_bytes,
        max_model_len=SLOT,
        max_num_seqs=parallel,
        engine="llamacpp",
        engine_settings=EngineSettings(ctx_size=SLOT * parallel, parallel=parallel, kv_unified=unified),
    )
    return dataclasses.replace(ctx(engine="llamacpp"), inputs=inputs, capacity=capacity_pass(inputs), gpu=spec)


def _ev(dep: DeploymentContext, running: float = 1, waiting: float = 2, **kw: Any) -> Any:
    e = ev(
        dep=dep,
        requests_running=running,
        requests_waiting=waiting,
        kv_capacity_tokens=dep.capacity.kv_cache_tokens,
        generation_tokens_per_second=30.0,
        **kw,
    )
    return dataclasses.replace(e, counter_deltas={"generation_tokens": 30.0})


def test_one_busy_slot_with_two_deferred_gets_three_slots_each_keeping_its_cells() -> None:
    dep = _dep()
    e = _ev(dep)
    assert SeqCapRule().fires(e).holds is True
    (p,) = SeqCapRule().propose(e)
    assert (p.dial, p.action, p.current, p.suggested) == (c.DIAL_MAX_NUM_SEQS, "increase", 1, 3)
    assert p.flag == f"--parallel 3 --ctx-size {3 * SLOT}"
    per_cell = dep.capacity.kv_cache_bytes_per_token_per_gpu
    assert per_cell == 28 * 2 * 2 * 128 * 2
    fit = int((0.9 * dep.inputs.gpu_memory_bytes - dep.capacity.weights_bytes_per_gpu) // (SLOT * per_cell))
    assert p.evidence["slots_that_fit"] == fit == 167


def test_the_gpu_bounds_the_slots() -> None:
    # on a 16 GB part with the same weights, the slots that fit bound a demand of 1 + 200 deferred
    dep = _dep(gpu="t4")
    e = _ev(dep, running=1, waiting=200)
    (p,) = SeqCapRule().propose(e)
    per_cell = dep.capacity.kv_cache_bytes_per_token_per_gpu
    fit = int((0.9 * dep.inputs.gpu_memory_bytes - dep.capacity.weights_bytes_per_gpu) // (SLOT * per_cell))
    assert p.suggested == min(fit, p.evidence.get("tpot_knee") or fit)
    assert p.suggested < 201


def test_it_holds_only_with_every_slot_busy_and_requests_deferred() -> None:
    assert SeqCapRule().fires(_ev(_dep(parallel=2), running=1, waiting=0)).holds is False  # a slot free, no queue
    assert SeqCapRule().fires(_ev(_dep(), waiting=0)).holds is False  # nothing deferred
    # unified slots take cells only as requests write them: deferred requests beside an idle one wait for the cells
    assert SeqCapRule().fires(_ev(_dep(parallel=2, unified=True), running=1, waiting=2)).holds is False
    assert SeqCapRule().fires(_ev(_dep(), running=3)).holds is None  # more busy than --parallel: a stale config


# the breaker's faults of 2026-12-05 (each failed on 77b2b02)


def test_never_more_slots_than_llama_cpp_starts_with() -> None:
    # LLAMA_MAX_SEQ 256 (src/llama-cparams.h): "n_seq_max must be <= 256", the server does not come up
    (p,) = SeqCapRule().propose(_ev(_dep(gpu="H100-SXM"), running=1, waiting=1000))
    assert p.suggested <= 256, p.flag
    assert p.evidence.get("slots_limit") == 256 or p.evidence.get("tpot_knee", 257) <= 256


def test_measured_tpot_over_target_adds_no_slots() -> None:
    # llama.cpp has no histograms: its mean TPOT is the time counters' (120 s over 400 tokens = 0.3 s, target 0.1 s)
    e = dataclasses.replace(
        _ev(_dep(parallel=4), running=4, waiting=6), engine_time=EngineTime(120.0, 400.0, 1.0, 60.0)
    )
    assert e.engine_time.tpot_seconds == 0.3
    assert SeqCapRule().fires(e).holds is False


def test_the_proposal_warns_about_a_unified_auto_server() -> None:
    # llama-server without -np runs 4 slots and kv_unified; an explicit --parallel splits the cache
    (p,) = SeqCapRule().propose(_ev(_dep(parallel=4), running=4, waiting=6))
    assert "kv_unified" in p.description and "--ctx-size ÷ 10" in p.description


def test_no_gpu_to_price_tpot_is_said() -> None:
    (p,) = SeqCapRule().propose(_ev(dataclasses.replace(_dep(), gpu=None), running=1, waiting=50))
    assert p.evidence["tpot_unpriced"] is True
    assert "watch TPOT" in p.description


def test_a_slot_decoding_a_long_request_is_not_a_hang() -> None:
    # llama.cpp counts generated tokens when a slot finishes: a still counter over the window is a long generation
    e = _ev(_dep(), running=1, waiting=2)
    e = dataclasses.replace(
        e,
        counter_deltas={"generation_tokens": 0.0},
        stats=dataclasses.replace(e.stats, generation_tokens_per_second=0.0),
    )
    assert SeqCapRule().fires(e).holds is True
    assert SeqCapRule().clears(e).holds is False


def test_deferred_with_a_free_configured_slot_means_the_config_is_stale() -> None:
    # llama.cpp defers a task only when no slot is idle: the server runs fewer slots than the config states
    assert SeqCapRule().fires(_ev(_dep(parallel=4), running=1, waiting=2)).holds is None


# --kv-unified (Mesh-LLM/mesh-llm#1973: 4 unified slots, 32 clients, TTFT p50 80 s on a cache ~1.5 % used; 32 slots
# gave 823 ms): the slots bind, the cells do not grow with them


def test_unified_slots_all_busy_get_more_slots_on_the_same_cells() -> None:
    # 4 slots sharing 16,384 cells, 4 running + 28 deferred; the longest sequence held since start is 600 tokens:
    # 0.9 × 16,384 ÷ 600 = 24.6 → 24 such requests fit the cells, under the 32 asked for
    dep = _dep(parallel=4, unified=True)
    assert dep.capacity.kv_cache_tokens == 4 * SLOT
    e = dataclasses.replace(_ev(dep, running=4, waiting=28), longest_sequence_tokens=600.0)
    assert SeqCapRule().fires(e).holds is True
    (p,) = SeqCapRule().propose(e)
    assert (p.dial, p.action, p.current) == (c.DIAL_MAX_NUM_SEQS, "increase", 4)
    assert p.evidence["slots_the_cells_hold"] == 24
    assert p.suggested == min(24, p.evidence.get("tpot_knee") or 24) > 4
    # an explicit --parallel splits the cells unless --kv-unified is kept; --ctx-size stays
    assert p.flag == f"--parallel {p.suggested} --kv-unified"
    assert "--ctx-size" not in p.flag


def test_unified_slots_without_a_measured_length_get_no_raise() -> None:
    # how long the requests grow is unknown: more unified slots could run the cells out (llama.cpp then aborts them)
    e = _ev(_dep(parallel=4, unified=True), running=4, waiting=28)
    assert SeqCapRule().fires(e).holds is True
    assert SeqCapRule().propose(e) == []


def test_split_slots_share_their_cells_where_that_holds_as_many_slots() -> None:
    # Hal0ai/hal0#1067: --parallel 1 pinned, agents serialize; "without --kv-unified, --ctx-size C silently splits to
    # C/N per slot". One slot of 4,096 cells, 1 running + 2 deferred. Longest sequence 600 tokens: shared, the cells
    # hold 0.9 × 4,096 ÷ 600 = 6.1 → 6 such requests, over the 3 asked for, so 3 slots on the same 4,096 cells — no
    # memory added, where growing --ctx-size with the slots would take 3 × 4,096
    e = dataclasses.replace(_ev(_dep()), longest_sequence_tokens=600.0)
    (p,) = SeqCapRule().propose(e)
    assert p.evidence["slots_the_cells_hold"] == 6
    assert p.suggested == min(3, p.evidence.get("tpot_knee") or 3)
    assert p.flag == f"--parallel {p.suggested} --kv-unified"
    # a 3,000-token sequence: shared, 0.9 × 4,096 ÷ 3,000 = 1.2 → 1 request, no more than today: each new slot
    # brings its own cells instead
    long = dataclasses.replace(_ev(_dep()), longest_sequence_tokens=3_000.0)
    (q,) = SeqCapRule().propose(long)
    assert q.flag == f"--parallel {q.suggested} --ctx-size {q.suggested * SLOT}"


def test_the_unified_raise_never_makes_pool_context_fire_on_it() -> None:
    # breaker 11: '--parallel 61 --kv-unified' on 131,072 cells, then pool_context 'cap each request at 2,048' at 61.
    # One split slot of 4,096 cells, 1 running + 5 deferred, longest 600: 0.9 × 4,096 ÷ 600 = 6.1 → at most 6 slots;
    # 6 × 600 = 3,600 ≤ 3,686 (90 % of the cells), so with the raise applied pool_context reads no oversubscription
    from advisor.rules.pool_context import PoolContextRule

    e = dataclasses.replace(_ev(_dep(), running=1, waiting=5), longest_sequence_tokens=600.0)
    (p,) = SeqCapRule().propose(e)
    assert p.evidence["slots_the_cells_hold"] == 6
    assert 1 < p.suggested <= 6 and p.flag.endswith("--kv-unified"), p.flag
    spec = get_gpu("rtx4090")
    inputs = CapacityInputs(
        model=get_preset("Qwen/Qwen2.5-1.5B-Instruct"),
        gpu_memory_bytes=spec.memory_bytes,
        max_model_len=SLOT,
        max_num_seqs=p.suggested,
        engine="llamacpp",
        engine_settings=EngineSettings(ctx_size=SLOT, parallel=p.suggested, kv_unified=True),
    )
    after = dataclasses.replace(ctx(engine="llamacpp"), inputs=inputs, capacity=capacity_pass(inputs), gpu=spec)
    applied = dataclasses.replace(
        _ev(after, running=p.suggested, waiting=0), longest_sequence_tokens=600.0, kv_capacity_tokens=SLOT
    )
    assert PoolContextRule().fires(applied).holds is False


def test_a_burst_of_deferred_requests_sizes_the_slots_to_what_the_window_held_not_to_the_burst() -> None:
    """The kind of breaker 23's "4 → 19, 22, … 210" on llama.cpp, which exposes no request counter (so no arrival
    rate): one slot busy, the deferred queue 2 at the window's start and 40 at its end is a burst that arrived in
    the window, not a load that keeps 41 slots busy. The window held at least 1 + 2 = 3 in flight at both ends,
    so 3 slots (each with its 4,096 cells), not 41; a queue that stood at 2 keeps the 3 it asks for."""
    burst = _ev(_dep(), running=1, waiting=40, requests_waiting_first=2, requests_running_first=1)
    (p,) = SeqCapRule().propose(burst)
    assert p.evidence["in_flight_held_per_replica"] == 3
    assert p.suggested == 3
    assert p.flag == f"--parallel 3 --ctx-size {3 * SLOT}"
    # draining: 40 deferred at the start, 2 at the end — the 3 now in flight, not the 41 of the burst's peak
    draining = _ev(_dep(), running=1, waiting=2, requests_waiting_first=40, requests_running_first=1)
    (q,) = SeqCapRule().propose(draining)
    assert q.suggested == 3
    standing = _ev(_dep(), running=1, waiting=2, requests_waiting_first=2, requests_running_first=1)
    (r,) = SeqCapRule().propose(standing)
    assert "in_flight_held_per_replica" not in r.evidence and r.suggested == 3
