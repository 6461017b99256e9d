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
    assert (fewer.action, fewer.current, fewer.suggested, fewer.flag) == ("decrease", 4, 1, "--parallel 1 --kv-unified")


def test_unified_slots_that_fit_their_max_length_do_not_fire() -> None:
    # 8,192 cells, 2 slots of 4,096: 2 max-length requests fit the 2 slots
    assert RULE.fires(_ev(_llamacpp(8192, 2, True, 4096))).holds is False  # type: ignore[arg-type]


def test_split_slots_keep_the_one_slot_bound() -> None:
    # without --kv-unified each slot is 1,024 ÷ 4 = 256 cells; a 256-token max-model-len fits one slot
    e = _ev(_llamacpp(1024, 4, False, 256))
    assert RULE.fires(e).holds is False  # type: ignore[arg-type]
    assert all(p.dial != c.DIAL_MAX_NUM_SEQS for p in RULE.propose(e))  # type: ignore[arg-type]


def test_a_served_sequence_longer_than_the_share_withholds_the_cap_and_keeps_fewer_slots() -> None:
    # lemonade-sdk/lemonade#3276 in small: the engine has held a 600-token sequence (n_tokens_max), longer than the
    # 256-cell share a cap would leave each slot: the cap would refuse a request it served; --parallel 1 would not
    base = _ev(_llamacpp(1024, 4, True, 1024))
    by_dial = {p.dial: p for p in RULE.propose(dataclasses.replace(base, longest_sequence_tokens=600.0))}  # type: ignore[type-var]
    cap = by_dial[c.DIAL_MAX_MODEL_LEN]
    assert cap.withheld is not None and "600 tokens" in cap.withheld and "256" in cap.withheld
    assert by_dial[c.DIAL_MAX_NUM_SEQS].withheld is None
    # a longest sequence within the share (200 ≤ 256) contradicts nothing: the cap stands
    by_dial = {p.dial: p for p in RULE.propose(dataclasses.replace(base, longest_sequence_tokens=200.0))}  # type: ignore[type-var]
    assert by_dial[c.DIAL_MAX_MODEL_LEN].withheld is None


def test_with_no_length_visible_the_cap_is_withheld_and_fewer_slots_keep_the_running_requests() -> None:
    """ggml-org/llama.cpp#17527 in small: 8 unified slots share 8,192 cells with max-model-len 8,192 (the cells' share
    per slot is 1,024); 2 requests run, no KV gauge, no n_tokens_max, no request lengths. The cap at 1,024 may refuse
    what runs: withheld. Fewer slots: the cells hold 1 max-length request, but 2 run with 6 slots free, so 8 → 2 (not
    1: the second would queue behind the first's whole turn)."""
    e = ev(dep=_llamacpp(8192, 8, True, 8192), requests_running=2, requests_waiting=0, kv_capacity_tokens=8192)
    by_dial = {p.dial: p for p in RULE.propose(e)}  # type: ignore[arg-type]
    cap = by_dial[c.DIAL_MAX_MODEL_LEN]
    assert cap.suggested == 1024 and cap.withheld is not None and "no request length is visible" in cap.withheld
    fewer = by_dial[c.DIAL_MAX_NUM_SEQS]
    assert (fewer.current, fewer.suggested, fewer.withheld) == (8, 2, None)
    # a length in view (the engine held 900 tokens, under the share): the cap stands
    seen = {p.dial: p for p in RULE.propose(dataclasses.replace(e, longest_sequence_tokens=900.0))}  # type: ignore[type-var]
    assert seen[c.DIAL_MAX_MODEL_LEN].withheld is None
    # every slot busy (8 of 8): the overflow is at hand, the cells' own count (1) stands
    full = ev(dep=_llamacpp(8192, 8, True, 8192), requests_running=8, requests_waiting=0, kv_capacity_tokens=8192)
    assert {p.dial: p for p in RULE.propose(full)}[c.DIAL_MAX_NUM_SEQS].suggested == 1  # type: ignore[arg-type]


def test_fewer_slots_do_not_keep_the_running_requests_when_they_overrun_the_shared_cells() -> None:
    """anomalyco/opencode#22166 in small: 3 of 4 unified slots run on 8,192 cells, and the engine has held a 4,200-token
    sequence: 3 × 4,200 = 12,600 > 90 % of 8,192, so keeping 3 slots overruns the cells as the report's three sessions
    did (4 → 3 was proposed). The cells' own count (1 max-length request) stands; at 900 tokens the floor of 3
    holds (3 × 900 fits), and with the cells' usage at 95 % it does not."""
    dep = _llamacpp(8192, 4, True, 8192)
    e = ev(dep=dep, requests_running=3, requests_waiting=0, kv_capacity_tokens=8192)
    long_ = dataclasses.replace(e, longest_sequence_tokens=4200.0)  # type: ignore[type-var]
    fewer = {p.dial: p for p in RULE.propose(long_)}[c.DIAL_MAX_NUM_SEQS]  # type: ignore[arg-type]
    assert (fewer.current, fewer.suggested) == (4, 1), fewer.suggested
    short = dataclasses.replace(e, longest_sequence_tokens=900.0)  # type: ignore[type-var]
    assert {p.dial: p for p in RULE.propose(short)}[c.DIAL_MAX_NUM_SEQS].suggested == 3  # type: ignore[arg-type]
    full = ev(dep=dep, requests_running=3, requests_waiting=0, kv_capacity_tokens=8192, kv_cache_usage_ratio=0.95)
    assert {p.dial: p for p in RULE.propose(full)}[c.DIAL_MAX_NUM_SEQS].suggested == 1  # type: ignore[arg-type]


def test_the_fewer_slots_floor_is_one_replicas_running_requests() -> None:
    """Breaker 14: 65,536 unified cells, --parallel 8, max-model-len 32,768 (the cells hold 2), 4 requests running per
    replica, the longest 12,000 tokens (4 × 12,000 fit 90 % of the cells): one replica got --parallel 4, two
    identical replicas --parallel 2 (8 running summed read as overrunning one replica's cells)."""
    dep = dataclasses.replace(_llamacpp(65536, 8, True, 32768), replicas=2)
    for replicas in (1, 2):
        e = ev(dep=dep, requests_running=4 * replicas, replicas_up=replicas, kv_capacity_tokens=65536)
        e = dataclasses.replace(e, longest_sequence_tokens=12_000.0)  # type: ignore[type-var]
        fewer = {p.dial: p for p in RULE.propose(e)}[c.DIAL_MAX_NUM_SEQS]  # type: ignore[arg-type]
        assert fewer.suggested == 4, (replicas, fewer.suggested)
        assert "hold 2 request(s)" in fewer.summary and "the cells hold 2 of max-model-len" in fewer.description


def test_the_llamacpp_adapter_reads_n_tokens_max_under_either_name() -> None:
    from advisor.engines.llamacpp import LlamaCppAdapter
    from advisor.sources.exposition import parse_exposition

    a = LlamaCppAdapter()
    # typed a counter without _total: the text parser names the sample n_tokens_max_total
    text = "# TYPE llamacpp:n_tokens_max counter\nllamacpp:n_tokens_max 40400\nllamacpp:requests_processing 4\n"
    assert a.snapshot(parse_exposition(text, a.wants)).longest_sequence_tokens == 40_400
    # as a Prometheus store keeps it: the name as scraped (here an untyped line, which the parser does not rename)
    untyped = "llamacpp:n_tokens_max 512\nllamacpp:requests_processing 4\n"
    assert a.snapshot(parse_exposition(untyped, a.wants)).longest_sequence_tokens == 512


def test_split_slots_are_cut_only_for_requests_measured_longer_than_a_slot() -> None:
    # 8,192 cells over 4 split slots: 2,048 a slot against max-model-len 8,192 (the usual `-c 8192 -np 4`). Fewer
    # slots help only requests longer than a slot; with the longest ever held 900 tokens they would cut the
    # concurrency 4 → 1 for nothing, and nothing measured says otherwise either
    base = ev(dep=_llamacpp(8192, 4, False, 8192), requests_running=4, requests_waiting=2, kv_capacity_tokens=8192)
    for longest in (900.0, None):
        e = dataclasses.replace(base, longest_sequence_tokens=longest)  # type: ignore[type-var]
        assert all(p.dial != c.DIAL_MAX_NUM_SEQS for p in RULE.propose(e)), longest
    # a sequence that filled its slot is the evidence: n_tokens_max reads 2,047 then (llama.cpp stops or shifts a slot
    # at n_tokens + 1 ≥ its 2,048 cells): --parallel 1
    full = dataclasses.replace(base, longest_sequence_tokens=2047.0)  # type: ignore[type-var]
    fewer = [p for p in RULE.propose(full) if p.dial == c.DIAL_MAX_NUM_SEQS]
    assert [(p.current, p.suggested, p.flag) for p in fewer] == [(4, 1, "--parallel 1")]


def test_llama_servers_own_default_is_no_incident_while_the_slots_stay_far_below_their_share() -> None:
    # llama-server without --parallel: 4 slots sharing --ctx-size 131,072 cells, max-model-len 131,072
    # (tools/server/server.cpp "n_parallel is set to auto, using n_parallel = 4 and kv_unified = true").
    # Mesh-LLM/mesh-llm#1973: the longest sequence held since start ~1,200 tokens, 32 clients on 4 slots:
    # 4 × 1,200 = 4,800 cells, 3.7 % of 131,072 — within 90 %: the cells never came near running out, and the fire
    # would supersede seq_cap's "more slots" (28 deferred)
    base = ev(
        dep=_llamacpp(131_072, 4, True, 131_072), requests_running=4, requests_waiting=28, kv_capacity_tokens=131_072
    )
    short = dataclasses.replace(base, longest_sequence_tokens=1_200.0)  # type: ignore[type-var]
    cond = RULE.fires(short)
    assert cond.holds is False and "fill 3.7% of them" in cond.reason, cond.reason
    assert RULE.clears(short).holds is True
    # 0.9 × 131,072 ÷ 4 = 29,491.2: a 29,492-token sequence × 4 slots passes 90 % of the cells — the reading again
    near = dataclasses.replace(base, longest_sequence_tokens=29_492.0)  # type: ignore[type-var]
    assert RULE.fires(near).holds is True
    assert RULE.fires(dataclasses.replace(base, longest_sequence_tokens=29_491.0)).holds is False  # type: ignore[type-var]
    # nothing measured: the preventive reading stands
    assert RULE.fires(base).holds is True
