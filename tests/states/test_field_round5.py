"""Field states, round 5: four vLLM V1 reports and two SGLang reports, replayed as those engines expose them.

Each row is built from one operator's public report (``source``): the deployment as the report states it (where it
does not, or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and
two scrapes one second apart rendered by :class:`tests.states.VLLMEngine` (the V1 families of
``vllm/v1/metrics/loggers.py``), :class:`tests.states.SGLangEngine` or, for SGLang's data-parallel ranks,
:func:`tests.states.test_field_pools.sglang_text` (scheduler gauges per ``dp_rank``). vLLM V1 counts a prompt's
tokens (``vllm:prompt_tokens_total``) and observes its TTFT when the prefill completes and the first token comes
out (``IterationStats.update_from_output``), so a prompt still prefilling moves no counter.

The assertions are written from the reports' numbers, the fix the thread establishes and engine facts, never from
the advisor's output:

* ``vllm-0271-admission-wedged-by-deferred-requests`` — 4 running, 492 waiting of which 473 ``deferred``, KV at
  20 %, no request finishing, the one admitted prompt after ~5,000 s in the queue: the engine holds its queue with
  room to run it (the reporter blames the deferred requests filling ``max_num_seqs``); only a restart recovered it.
  Restart; no replicas, no pool turn.
* ``vllm-agent-loop-reprefills-85k-fp8-kv-disabled-prefix-cache`` — ``--kv-cache-dtype fp8`` silently turned
  prefix caching off; an agent loop re-prefills ~96k tokens every step (~10 s) with the pool at ≤ 9.5 %. The
  merged fix dropped fp8 KV to get prefix caching back. Never a stall (mid-prefill, no counter moves), never a
  restart, replicas, TP or a larger memory budget.
* ``vllm-a100-qwen3-8b-16k-prefill-bound-fp8-kv-no-gain`` — TTFT 11.8 s at 16k prompts, the pool at 34 %: the
  thread's A/B shows fp8 KV doubles the pool and makes TTFT 3.4 % worse. Never a KV-pool turn.
* ``vllm-max-num-seqs-1-serializes-second-request`` — one slot: a second request's TTFT equals the first one's whole
  generation (50 s) while the pool is 2 % used. Raise ``max_num_seqs``; no replicas, no pool turn, no restart.
* ``sglang-l40-qwen25-05b-batch-past-cuda-graph-ceiling`` — 67 running against a decode CUDA-graph ceiling of 32:
  every step eager; capping running requests (the reporter's workaround) restores graphed decode. Cap
  ``max_running_requests`` at ≤ 32; no replicas, no pool turn.
* ``sglang-dp-rank-wedged-after-near-capacity-request`` — one DP rank runs nothing, its pool empty, its queue
  growing, after a request it could never admit was cancelled; "all later requests remain queued until the server
  is restarted". Restart; no replicas; a context cap, if proposed, must sit below the 190,720-token trap.

``once`` sees about one second of history, so no replica count may be proposed where a queue exists (it needs
≥ 30 s of history to measure an arrival rate); every such row says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.states import SGLangEngine, VLLMEngine
from tests.states.field import (
    FieldState,
    matching,
    number,
    round_tests,
)
from tests.states.test_field_pools import sglang_text
from tests.states.test_field_round3_others import KV_GROWING_TURNS
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS


def _all(*checks: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        for c in checks:
            c(result)

    return check


def _suggests(dial: str, action: str, *, at_least: float | None = None, at_most: float | None = None) -> Any:
    """Every proposed ``(dial, action)`` (alternatives included) suggests a value within the bounds."""

    def check(result: dict[str, Any]) -> None:
        turns = matching(result.get("recommendations") or [], (dial, action))
        bad = [
            (t.get("current"), t.get("suggested"))
            for t in turns
            if (at_least is not None and number(t.get("suggested")) < at_least)
            or (at_most is not None and number(t.get("suggested")) > at_most)
        ]
        assert not bad, f"{dial} {action} outside [{at_least}, {at_most}]: {bad}"

    return check


# --- 1. vLLM 0.27.1: the admission gate wedged by deferred requests -------------------------------------------------


def vllm_admission_wedged_by_deferred() -> FieldState:
    """vllm-project/vllm#53130 ("Scheduler permanently stops admitting requests once running + skipped_waiting
    ("deferred") reaches max_num_seqs - engine reports healthy, KV cache mostly free, only a restart recovers"),
    vLLM 0.27.1, one GPU: "10:45 | 29 running | 92 waiting | 92 deferred | 90.0% | 53.3 tok/s", "10:57 | 3 | 227 |
    227 | 20.9% | 1.2 ← collapse", "12:10 | 4 | 487 | 468 | 20.0% | 5.5"; at 12:20 over 60 s: "prompt throughput
    1,946 tok/s, generation 0.48 tok/s, … request_success_total +0, num_preemptions_total 0",
    ``num_requests_waiting_by_reason`` "deferred 473, capacity 19"; "/health returned 200 throughout"; "The state
    never recovered on its own (observed >1.5 h); a container restart fully cleared it." The analysis: "The collapse
    point matches len(running) + blocked == max_num_seqs (256) exactly (227 deferred + 29 running)".

    Arithmetic: 4 running + 473 deferred = 477 ≥ 256 — the reporter's reading is that the admission gate counts the
    deferred requests against ``max_num_seqs`` (vLLM's admission loop counts ``len(self.running) +
    self.num_waiting_for_streaming_input``, ``vllm/v1/core/sched/scheduler.py``, so the mechanism is not
    established). What the report does establish: 19 requests wait for capacity with 80 % of the pool free and 252
    slots free, the engine runs ~1,946 prompt and 0.48 generated tokens/s where its GPU prefills tens of thousands,
    nothing finishes (``request_success`` +0), no preemption, for over 1.5 h. This is not a load (no replica, no
    pool turn, no context cap helps) but a wedged scheduler, and the thread's only recovery is a restart. The
    engine's counters still move (a prompt completes now and then), so a "no counter moved" stall detector does not
    see it; the gauges, the token rates and the one admitted request's 5,000 s wait do.

    Chosen: the issue names neither model nor GPU. Qwen3-8B on one H100-SXM at the default 0.9 stands in: its pool
    (the capacity pass, 396,192 tokens) puts the report's 29 running at 90 % at ~12,000 tokens each (RAG-length
    requests), the 4 at 20 % at ~20,000. ``max_num_seqs`` 256 (the report's), ``max_model_len`` 40,960. Before: four
    days of traffic (20,000 requests, 77 % prefix hits). The window: one 1,946-token prompt completes (one first
    token, after ~5,000 s in the queue), nothing finishes, waiting 491 → 492 (deferred 472 → 473). SLO: TTFT 5 s,
    TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-8B",
        num_gpu_blocks=24_762,
        max_model_len=40_960,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.finish(20_000, prompt=12_000, output=400, ttft=1.5, tpot=0.03, queue=0.2)
    eng.first_tokens([1.5] * 20_000)
    eng.prefill(20_004 * 12_000, cached=20_004 * 12_000 * 0.77)
    eng.decode(20_000 * 400 + 4 * 200, 0.03)
    eng.running, eng.waiting, eng.deferred, eng.kv_usage = 4.0, 491.0, 472.0, 0.20
    first = eng.render()
    eng.prefill(1_946, cached=350)
    eng.first_tokens([5_000.0])
    eng.decode(1, 0.03)
    eng.running, eng.waiting, eng.deferred, eng.kv_usage = 4.0, 492.0, 473.0, 0.20
    return FieldState(
        id="vllm-0271-admission-wedged-by-deferred-requests",
        source="https://github.com/vllm-project/vllm/issues/53130",
        engine_version="vLLM 0.27.1 (V1; rendered with the 0.33 label set, waiting split by reason as 0.20+ does)",
        deployment={
            "name": "qwen3-8b-h100",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 40_960,
            "max_num_seqs": 256,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 4, "kv_cache_usage_ratio": 0.20},
        must_propose=[RESTART],
        must_never=[
            ("replicas", "increase"),  # ~1 s of history; and a new replica wedges the same way
            *POOL_TURNS,
            ("max_model_len", "decrease"),
            ("speculative_decoding", "enable"),
        ],
    )


# --- 2. vLLM: fp8 KV silently disabled prefix caching; an agent loop re-prefills 96k tokens a step ----------------


def vllm_fp8_kv_disabled_prefix_cache() -> FieldState:
    """rwlove/home-ops#13384 ("perf(vllm-driver): drop fp8 kv-cache to restore prefix caching", merged):
    "``--kv-cache-dtype fp8`` is incompatible with prefix caching, so vLLM silently set
    ``enable_prefix_caching=False``. Every request logs: Prefix cache hit rate: 0.0%"; "The driver serves an agentic
    tool-calling loop that re-sends an ~85k-token prefix on every step"; measured: "Prompt tokens per agentic step
    +95,993", "Prefill throughput ~9.9k tok/s → ~10s pure prefill before any output", "Generation throughput 7–12
    tok/s", "GPU utilization 96%", "Prefix cache hit rate 0.0% (every sample)", "GPU KV cache usage 2.4–9.5%". The
    flag had been added "to halve the KV footprint, key to fitting two instances", but the second instance "cannot
    co-reside with the driver on the GB10" and is parked at 0 replicas: "KV usage is under 10%. The saving buys
    nothing while costing the largest available win for this workload." The fix: drop fp8 KV, prefix caching back on.

    Arithmetic: 95,993 tokens at 9,900 tokens/s is 9.7 s of prefill per step, ~85,000 of them a prefix the previous
    step already computed: with prefix caching on, a step prefills ~11,000 new tokens (~1.1 s). The pool is at most
    9.5 % used by the one request: nothing waits, nothing is preempted, the budget is not what limits. So: restore
    prefix caching (``--enable-prefix-caching``, which on this engine means the KV dtype back to ``auto``). Never a
    larger memory budget (the GPU is shared and the pool is 90 % free), never more replicas or TP (the second
    instance already cannot fit; the prefill being removed is redundant, not short of compute), never more
    sequences (one agent loop), never fp8 KV (it is the cause).

    The window is taken mid-step: the one request is ~78,000 tokens into its 96,000-token prefill. A prompt counts
    in vLLM V1 only when its prefill completes, so in this second no counter moves — only
    ``kv_cache_usage_perc`` (0.083 → 0.095, +9,900 tokens): a long prefill, not a stall, and never a restart.

    Chosen: the driver's model (Qwen3.6-35B-A3B, FP8, hybrid linear + full attention) and the GB10 are not in the
    advisor's tables. Qwen3-Next-80B-A3B-Instruct in fp8 (the hybrid A3B family Qwen3.5/3.6 descend from) on one
    RTX PRO 6000 Blackwell at 0.95 stands in: its pool (the capacity pass: 764 blocks of 1,072, 819,720 tokens)
    puts 78,000 tokens at 9.5 %, the report's figure. ``max_model_len`` 131,072. Before: 300 agent steps of ~90,000
    prompt tokens, 250 output tokens at 11 tok/s, TTFT 9.7 s. vLLM V1 of July 2026 rendered with the 0.33 label set
    (``cache_dtype="fp8"``, ``enable_prefix_caching="False"``, the group-aware ``kv_cache_size_tokens``). SLO: TTFT
    5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-Next-80B-A3B-Instruct",
        num_gpu_blocks=764,
        block_size=1072,
        max_model_len=131_072,
        gpu_memory_utilization=0.95,
        version="0.33",
    )
    eng.cache_labels.update(
        cache_dtype="fp8",
        enable_prefix_caching="False",
        mamba_page_size_padded="1097728",
        kv_cache_size_tokens="819720",
        kv_cache_max_concurrency=str(819_720 / 131_072),
    )
    eng.finish(300, prompt=90_000, output=250, ttft=9.7, tpot=0.09, queue=0.01)
    eng.first_tokens([9.7] * 300)
    # prefix caching off: the KV cache manager records no prefix-cache query; prompt tokens count all the same
    eng.counters["vllm:prompt_tokens"] += 300 * 90_000
    eng.decode(300 * 250, 0.09)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.083
    first = eng.render()
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.095

    def restores_prefix_caching(result: dict[str, Any]) -> None:
        recs = result.get("recommendations") or []
        enable = matching(recs, ("prefix_caching", "enable"))
        dtype_back = [t for t in matching(recs, ("kv_cache_dtype", None)) if "fp8" not in str(t.get("suggested"))]
        assert enable or dtype_back, "prefix caching not restored (neither enabled nor the fp8 KV dtype dropped)"
        fp8 = [t for t in matching(recs, ("kv_cache_dtype", None)) if "fp8" in str(t.get("suggested"))]
        assert not fp8, f"fp8 KV proposed: it is the cause: {fp8}"

    return FieldState(
        id="vllm-agent-loop-reprefills-85k-fp8-kv-disabled-prefix-cache",
        source="https://github.com/rwlove/home-ops/pull/13384",
        engine_version="vLLM V1 of July 2026 (0.2x; rendered with the 0.33 label set)",
        deployment={
            "name": "agent-driver",
            "engine": "vllm",
            "model": "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "gpu": "rtx-pro-6000-blackwell",
            "quantization": "fp8",
            "kv_cache_dtype": "fp8",
            "gpu_memory_utilization": 0.95,
            "max_model_len": 131_072,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_usage_ratio": 0.095},
        must_never=[
            RESTART,
            ("replicas", None),
            ("tensor_parallel_size", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "increase"),
        ],
        extra_check=_all(restores_prefix_caching, no_stall_claimed),
    )


# --- 3. vLLM 0.26: 16k prompts at concurrency 8, TTFT 11.8 s, the pool at 34 % — fp8 KV measured to buy nothing ----


def vllm_fp8_kv_no_gain_prefill_bound() -> FieldState:
    """vllm-project/vllm#42058 ("Quantized KV Cache Throughput/TTFT/TPOT slower?"), the A/B in the thread:
    "A100-80GB, vLLM 0.26.0, Qwen3-8B bf16, concurrency 8, 256 decode tokens, greedy, enforce_eager"; "Capacity: fp8
    KV doubled the pool exactly — 389,872 → 779,760 tokens"; "End-to-end: essentially flat — 1.020x / 1.032x /
    1.023x / 0.997x at 1k/4k/8k/16k prefill"; the 16k row: "TTFT auto 11.790 s | TTFT fp8 12.206 s | −3.4% |
    Decode auto 219.2 tok/s | Decode fp8 231.3 tok/s | +5.5%"; "fp8 KV costs 2.5–5% on prefill at every length, and
    gains only 0.4–5.5% on decode".

    Arithmetic: 8 requests × (16,384 + ~130 generated) ≈ 132,000 tokens of a 389,872-token pool: 34 % used, nothing
    waits, nothing is preempted. The TTFT (11.8 s for 8 concurrent 16k prompts, ~11,000 prefill tokens a second)
    is prefill compute, not pool room: the measured A/B on this very setup says fp8 KV (twice the pool) makes it
    3.4 % worse. So no KV-pool turn at all: not fp8 KV, not a larger memory budget or KV byte budget. More
    sequences admit nobody (8 run, none wait); ``once`` sees ~1 s, so no replica count. (What would cut the 11.8 s —
    more compute per replica — the thread does not establish, so nothing is asserted about it.) 219 tok/s is read
    as the 8 streams' aggregate (27 tok/s, ~36 ms a token each): a single stream at 219 tok/s would be faster than
    an A100 can stream Qwen3-8B's 16 GB of weights.

    Chosen: the pool is the report's (24,367 blocks × 16 = 389,872; the capacity pass gives 396,192), the 0.26
    exposition rendered with the 0.33 label set, ``max_model_len`` 40,960 (the model's), ``enforce_eager`` as run.
    Before: 40 requests of the 16k row. The window: one request finishes (TTFT 11.8 s, 256 tokens at 36.5 ms), one
    prefill completes (16,384 prompt tokens, random: no prefix hit), 110 tokens decoded. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-8B",
        num_gpu_blocks=24_367,
        max_model_len=40_960,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.finish(40, prompt=16_384, output=256, ttft=11.79, tpot=0.0365, queue=0.05, reason="length")
    eng.first_tokens([11.79] * 47)
    eng.prefill(47 * 16_384)
    eng.decode(40 * 256 + 7 * 120, 0.0365)
    eng.running, eng.waiting, eng.kv_usage = 8.0, 0.0, 0.34
    first = eng.render()
    eng.finish(1, prompt=16_384, output=256, ttft=11.79, tpot=0.0365, queue=0.05, reason="length")
    eng.first_tokens([11.8])
    eng.prefill(16_384)
    eng.decode(110, 0.0365, steps=27, batch=4)
    eng.running, eng.waiting, eng.kv_usage = 8.0, 0.0, 0.34
    return FieldState(
        id="vllm-a100-qwen3-8b-16k-prefill-bound-fp8-kv-no-gain",
        source="https://github.com/vllm-project/vllm/issues/42058",
        engine_version="vLLM 0.26.0 (V1; rendered with the 0.33 label set)",
        deployment={
            "name": "qwen3-8b-a100",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "gpu": "a100-80gb",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 40_960,
            "enforce_eager": True,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={
            "requests_running": 8,
            "requests_waiting": 0,
            "kv_cache_usage_ratio": 0.34,
            "kv_cache_capacity_tokens": 389_872,
        },
        must_never=[
            ("kv_cache_dtype", None),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
        ],
    )


# --- 4. vLLM: one sequence slot serializes every request -------------------------------------------------------------


def vllm_one_slot_serializes() -> FieldState:
    """MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#7 ("MAX_NUM_SEQS=1 default: second concurrent request TTFT = full
    duration of the first (measured A/B, seqs=4 costs ~3% KV pool)"): vLLM on one DGX Spark (GB10), "util 0.94";
    "two simultaneous streaming requests, R2 sent 0.3 s after R1: direct :8888 | R1 total 49.9 s | R2 TTFT 50.46 s
    (first token exactly at R1 finish)"; "vllm:num_requests_waiting = 1–2 while running=1 → strict serialization, no
    batching"; "single-stream decode is ~8–11 tok/s, so one reasoning request can hold the only slot for minutes";
    "Lifetime TTFT histogram after ~2 days of real use: 54/1250 requests >20 s, 38 >40 s, 8 >160 s"; the recipe
    "already pre-sizes CUDA graphs for 4 slots … I'd like to suggest defaulting to 2–4".

    Arithmetic: one request holds ~8,500 tokens of a ~350,000-token pool (2.4 %); the second waits not for blocks
    but for the only sequence slot, and its TTFT is the first one's whole generation (50 s). Four slots cost ~3 % of
    the pool (the report's A/B). So: raise ``max_num_seqs`` (to 2–4). Not a pool matter (no fp8 KV, no budget, no
    context cap), not a replica count (one second of history; the GPU holds one replica and its pool is 97 % free),
    not a hang (tokens move at ~10 a second: no restart).

    Chosen: DeepSeek-V4-Flash and the GB10 are not in the advisor's tables. Qwen3-30B-A3B (bf16, a 3B-active MoE) on
    one RTX PRO 6000 Blackwell at 0.94 stands in (the capacity pass: 21,914 blocks, 350,624 tokens);
    ``max_model_len`` 40,960 (the model's). The lifetime histogram is the report's: 1,196 requests at ~1.2 s, 16 in
    20–40 s, 30 in 40–160 s, 8 above 160 s. The window: R1 (8,000 prompt tokens, ~450 generated) decodes 10 tokens at
    95 ms; waiting 1 → 2 (a third request arrives); nothing finishes. vLLM nightly of August 2026, rendered with the
    0.33 label set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-30B-A3B",
        num_gpu_blocks=21_914,
        max_model_len=40_960,
        gpu_memory_utilization=0.94,
        version="0.33",
    )
    for n, ttft, queue in ((1_196, 1.2, 0.01), (16, 30.0, 28.8), (30, 80.0, 78.8), (8, 200.0, 198.8)):
        eng.finish(n, prompt=8_000, output=500, ttft=ttft, tpot=0.095, queue=queue)
        eng.first_tokens([ttft] * n)
    eng.first_tokens([1.2])  # R1's first token
    eng.prefill(1_251 * 8_000, cached=1_251 * 8_000 * 0.3)
    eng.decode(1_250 * 500 + 450, 0.095)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 1.0, 0.0241
    first = eng.render()
    eng.decode(10, 0.095, steps=10, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 2.0, 0.0244
    return FieldState(
        id="vllm-max-num-seqs-1-serializes-second-request",
        source="https://github.com/MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark/issues/7",
        engine_version="vLLM V1 nightly (August 2026 pinned image; rendered with the 0.33 label set)",
        deployment={
            "name": "one-slot-spark",
            "engine": "vllm",
            "model": "Qwen/Qwen3-30B-A3B",
            "gpu": "rtx-pro-6000-blackwell",
            "gpu_memory_utilization": 0.94,
            "max_model_len": 40_960,
            "max_num_seqs": 1,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 2},
        must_propose=[("max_num_seqs", "increase")],
        must_never=[
            ("replicas", "increase"),  # ~1 s of history sizes no replicas
            RESTART,
            *POOL_TURNS,
            ("max_model_len", "decrease"),
        ],
        extra_check=_all(_suggests("max_num_seqs", "increase", at_least=2), no_stall_claimed),
    )


# --- 5. SGLang: the running batch past the decode CUDA-graph ceiling -------------------------------------------------


def sglang_batch_past_cuda_graph_ceiling() -> FieldState:
    """sgl-project/sglang#33483 ("``max_running_requests`` (4096) and ``cuda_graph_max_bs`` (32) defaults are derived
    independently; crossing the graph ceiling is an absorbing state"): ``Qwen/Qwen2.5-0.5B-Instruct`` on one L40,
    ``--mem-fraction-static 0.80``, the log "bs=[1, 2, 4, 8, 12, 16, 24, 32] … max_total_num_tokens=2980168,
    chunked_prefill_size=4096, max_prefill_tokens=16384, max_running_requests=4096, context_len=32768"; ShareGPT via
    ``sglang.benchmark.serving`` at rate 32: "#running-req … --cuda-graph-max-bs 32: median 67, p95 96, max 103",
    "--cuda-graph-max-bs 128: median 23, p95 45, max 51"; "Under the default the running batch sits at 67, more
    than double the largest captured shape, so essentially every decode iteration runs eager … The degraded batch is
    not what the load calls for; it is a consequence of eager decode slowing service and lengthening residency";
    "--max-running-requests is an effective workaround once you know to reach for it".

    Arithmetic (Little's law at 32 requests a second): 67 running is 2.1 s in residence per request, 23 is 0.72 s —
    with ~190 output tokens a request (ShareGPT as bench_serving samples it; the report gives no lengths) about
    11 ms a token eager against 3.8 ms graphed. The same load fits inside the 32 captured shapes (median 23): a cap
    of ``--max-running-requests`` at the ceiling (≤ 32) keeps every decode step graphed and costs nothing, which is
    the reporter's workaround. 67 × ~320 tokens is 0.7 % of a 2.98M-token pool: no pool turn; nothing waits and one
    replica serves the rate: no replicas; more running requests deepen the eager state.

    Chosen: the model table holds ``Qwen/Qwen2.5-0.5B`` (same architecture as the Instruct checkpoint served); SGLang
    of August 2026 with the 0.5.x exposition (:class:`tests.states.SGLangEngine`); 225 prompt tokens a request;
    before: 3,000 requests of the same shape; the window: 32 finish (TTFT 60 ms, 11 ms a token), 6,080 tokens
    decoded, 67 → 70 running. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen2.5-0.5B-Instruct"
    pool = 2_980_168
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=32_768, swa_tokens=0)

    def gauges(running: float) -> None:
        used = round(running * 320)
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = float(used)
        eng.g["kv_available_tokens"] = float(pool - used)
        eng.g["token_usage"] = eng.g["full_token_usage"] = used / pool
        eng.g["gen_throughput"] = 6_080.0

    eng.finish(3_000, prompt=225, output=190, ttft=0.06, tpot=0.011, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 3_067 * 225.0, 3_000 * 190.0 + 67 * 95
    eng.itl.observe(0.011, 3_000 * 189)
    gauges(67.0)
    first = eng.render()
    eng.finish(32, prompt=225, output=190, ttft=0.06, tpot=0.011, queue=0.0)
    eng.prompt["true"] += 35 * 225.0
    eng.generation["true"] += 6_080.0
    eng.itl.observe(0.011, 6_080)
    gauges(70.0)
    return FieldState(
        id="sglang-l40-qwen25-05b-batch-past-cuda-graph-ceiling",
        source="https://github.com/sgl-project/sglang/issues/33483",
        engine_version="SGLang 0.5.x (August 2026; the 0.5.x exposition)",
        deployment={
            "name": "qwen05b-sglang-l40",
            "engine": "sglang",
            "model": "Qwen/Qwen2.5-0.5B",
            "served_model": model,
            "gpu": "l40",
            "mem_fraction_static": 0.8,
            "max_model_len": 32_768,
            "max_num_seqs": 4096,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 70, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_propose=[("max_num_seqs", "decrease")],
        must_never=[
            ("replicas", "increase"),
            *KV_GROWING_TURNS,
            ("max_num_seqs", "increase"),
            ("max_model_len", "decrease"),
        ],
        extra_check=_suggests("max_num_seqs", "decrease", at_most=32),
    )


# --- 6. SGLang DP attention: one rank wedged after a request it could never admit ------------------------------------


def sglang_dp_rank_wedged() -> FieldState:
    """sgl-project/sglang#39271 ("DP scheduler rank can permanently stop processing requests after a
    near-KV-capacity request is cancelled"): the production configuration "KV capacity per DP rank: 190,784 tokens",
    "Page size: 64", "Advertised maximum input threshold: 190,778 tokens", "Stable triggering input range:
    190,720–190,777 tokens"; such a request "can pass request validation but can never be admitted by
    ``PrefillAdder``" (it needs ``input_length + max_new_tokens + page_size < available_kv_tokens``); it sets the
    persistent ``batch_is_full`` flag, and (the fix, sgl-project/sglang#39272) "Even after the original request is
    cancelled and the running batch and KV usage become empty, the DP rank can continue returning early
    indefinitely. All later requests remain queued until the server is restarted."

    Arithmetic: 190,720 + 64 ≥ 190,784 — a prompt in the trap range never fits its rank's pool. After it is
    cancelled the rank runs nothing, its pool is empty (token usage 0) and every request routed to it queues; the
    other seven ranks serve normally, so the deployment's counters keep moving. No dial reopens that rank — its pool
    is already empty and a sequence cap is not what holds it; a replica would inherit the same trap — and the
    report's recovery is a restart. Keeping the next such prompt out is another matter: a context cap does it, but
    only one below 190,720 (a cap at the pool, 190,784, or at the advertised 190,778 leaves the trap open), so any
    ``max_model_len`` decrease must suggest at most 190,719; a rank pool grown past the 262,144-token context (fp8
    KV would about double it) closes the trap as well, so pool turns are not excluded.

    Chosen: the report names neither model nor GPUs. Qwen3-235B-A22B-Instruct-2507-FP8 with DP attention over 8 ×
    H200 (TP 8, 8 DP ranks) stands in — a model whose 262,144-token context admits prompts of the trap's length;
    each rank's pool is the report's 190,784 at page 64. Rank 5 is the wedged one: 0 running, queue 9 → 11, usage
    0; ranks 0–4 and 6–7 run 6 requests each at 35 %, nothing queued. The window: 8 requests finish elsewhere,
    2,600 tokens decoded. SGLang of September 2026 with the 0.5.x exposition per ``dp_rank``. SLO: TTFT 5 s, TPOT
    0.1 s.
    """
    model = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    common = {"max_total_num_tokens": 190_784.0, "context_len": 262_144.0, "page_size": 64.0}

    def ranks(wedged_queue: float, usage: float) -> list[dict[str, float]]:
        out = []
        for i in range(8):
            if i == 5:
                out.append({"num_running_reqs": 0.0, "num_queue_reqs": wedged_queue, "token_usage": 0.0} | common)
            else:
                out.append({"num_running_reqs": 6.0, "num_queue_reqs": 0.0, "token_usage": usage} | common)
        return out

    return FieldState(
        id="sglang-dp-rank-wedged-after-near-capacity-request",
        source="https://github.com/sgl-project/sglang/issues/39271",
        engine_version="SGLang 0.5.x (September 2026, DP attention; the 0.5.x exposition per dp_rank)",
        deployment={
            "name": "qwen3-235b-dp8",
            "engine": "sglang",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "max_model_len": 262_144,
            "slo": SLO,
        },
        scrapes=[
            (
                sglang_text(model, ranks(9.0, 0.35), prompt=4.0e8, generation=6.0e7, requests=90_000),
                sglang_text(model, ranks(11.0, 0.351), prompt=4.0003e8, generation=6.00026e7, requests=90_008),
            )
        ],
        must_propose=[RESTART],
        must_never=[("replicas", "increase"), ("max_num_seqs", "increase")],
        extra_check=_suggests("max_model_len", "decrease", at_most=190_719),
    )


STATES = [
    vllm_admission_wedged_by_deferred(),
    vllm_fp8_kv_disabled_prefix_cache(),
    vllm_fp8_kv_no_gain_prefill_bound(),
    vllm_one_slot_serializes(),
    sglang_batch_past_cuda_graph_ceiling(),
    sglang_dp_rank_wedged(),
]


XFAIL: dict[str, str] = {
    "sglang-l40-qwen25-05b-batch-past-cuda-graph-ceiling": (
        "proposes a smaller GPU (over_provisioned: instance_type L40 -> T4, reading 70 running as 1.7 % of the 4,096 "
        "max-running ceiling) and never the cap the reporter measured (max_running_requests <= 32, the captured "
        "CUDA-graph shapes): the advisor does not know cuda_graph_max_bs, so a batch inflated by eager decode reads "
        "as spare capacity: wrong dial (misdiagnosis)"
    ),
}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
