"""Field states, round 3, vLLM V1 (0.9 – 0.2x): five new public reports, replayed as vLLM exposes them.

Each row is built from one operator's public report (``source``): the deployment as the report states it (where it
does not, the docstring says what was chosen and why, usually from the report's own KV arithmetic), and two scrapes
one second apart rendered by :class:`tests.states.VLLMEngine` (the V1 families of ``vllm/v1/metrics/loggers.py``:
``num_requests_running``/``waiting``, ``kv_cache_usage_perc``, ``num_preemptions_total``, the token counters, the
TTFT/ITL/e2e histograms and ``cache_config_info``). The pool each engine reports (``num_gpu_blocks``) is the
report's figure where it states one, else the capacity pass's for that deployment (the two agree within a few per
cent in every row), so model-vs-engine drift does not open an incident of its own.

The assertions are written from the reports' numbers and engine facts, never from the advisor's output:

* ``vllm-ngram-spec-610-running`` — speculation running at a batch of 610 with TPOT far over target: disable it;
  the pool (18 %) is not the limit, so no pool turn.
* ``vllm-235b-long-prompts-benchmark-ramp`` — a 100-request benchmark of 40k-token prompts being admitted at the
  prefill rate, pool at 54 %, nothing finished yet: a backlog that drains by itself; no replicas, no pool turn.
* ``vllm-qwen3-30b-thinking-runaway-one-request`` — one request reasoning until its token cap at 180 tokens/s: not a
  hang and not a load; no advice at all.
* ``vllm-qwen25-7b-a10g-batch-job-full-pool`` — a batch runner holding 256 requests against a pool that holds ~72:
  a no-GPU pool turn first, the concurrency cap lowered, never more sequences.
* ``vllm-qwen25-7b-gb200-pool-pinned-by-kv-cache-memory-bytes`` — the pool pinned at 16 GiB by
  ``--kv-cache-memory-bytes`` on a 186 GB GPU: the turn is that setting; ``gpu_memory_utilization`` is inert.

``once`` sees about one second of history, so no replica count may be proposed in any row (it needs ≥ 30 s of
history to measure an arrival rate); every row that has a queue says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.states import VLLMEngine, go_float
from tests.states.field import FieldState, FieldStateRuns, brief, check_field_state, run_field_states

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
RESTART = ("engine_process", "restart")
GPU_TURNS = ("replicas", "tensor_parallel_size")


def _turns(rec: dict[str, Any]) -> list[dict[str, Any]]:
    return [rec, *(rec.get("alternatives") or [])]


def all_of(*checks: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def check(result: dict[str, Any]) -> None:
        for c in checks:
            c(result)

    return check


def first_turn_adds_no_gpu(result: dict[str, Any]) -> None:
    """The first recommendation exists and turns a dial that adds no GPU (not replicas, not a higher TP)."""
    recs = result.get("recommendations") or []
    assert recs, f"no advice; rules: {[(r.get('rule'), r.get('state'), r.get('reason')) for r in result['rules']]}"
    first = recs[0]
    assert first.get("dial") not in GPU_TURNS, f"GPU-adding turn first: {brief(recs)}"


def no_stall_claimed(result: dict[str, Any]) -> None:
    """The ``stalled`` rule does not hold (the counters move)."""
    st = next((r for r in result.get("rules") or [] if r.get("rule") == "stalled"), {})
    assert st.get("state") != "firing", f"stalled firing: {st.get('reason')}"


# --- 1. speculation at a batch of 610 ----------------------------------------------------------------------------


def _spec_decode_lines(eng: VLLMEngine, drafts: float, draft_tokens: float, accepted: list[float]) -> str:
    """vLLM V1's speculative-decoding counters (``vllm/v1/spec_decode/metrics.py``, 0.9): drafts, draft tokens,
    accepted tokens, accepted tokens per draft position; labels ``engine``, ``model_name`` (+ ``position``)."""
    ml = f'engine="0",model_name="{eng.model_name}"'
    out = []
    for name, value, text in (
        ("vllm:spec_decode_num_drafts", drafts, "Number of spec decoding drafts."),
        ("vllm:spec_decode_num_draft_tokens", draft_tokens, "Number of draft tokens."),
        ("vllm:spec_decode_num_accepted_tokens", sum(accepted), "Number of accepted tokens."),
    ):
        out += [
            f"# HELP {name}_total {text}",
            f"# TYPE {name}_total counter",
            f"{name}_total{{{ml}}} {go_float(value)}",
        ]
    out += [
        "# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
        "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
    ]
    for pos, value in enumerate(accepted):
        out.append(f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{ml},position="{pos}"}} {go_float(value)}')
    return "\n".join(out) + "\n"


def vllm_ngram_spec_decode_big_batch() -> FieldState:
    """vllm-project/vllm#19254 ("N-gram speculative decoding performs slower than Qwen3-32B-FP8 with vLLM 0.9.0.1"):
    with ngram speculation (three draft positions in the log) the server logs "Avg generation throughput: 3399.1
    tokens/s, Running: 610 reqs, Waiting: 0 reqs, GPU KV cache usage: 17.6%", "Draft acceptance rate: 61.0%, Mean
    acceptance length: 2.83, Accepted: 5306 tokens, Drafted: 8703 tokens" (per 10 s), after a burst that had 633
    waiting; the reporter finds it slower than without speculation.

    Arithmetic: 3,399 tokens/s over 610 running sequences is 5.6 tokens/s each, a TPOT of ≈ 0.18 s, above a 0.1 s
    target for every request. Speculation pays when decode is bound by reading the weights at a small batch; at
    610 sequences per replica the batch already keeps the GPU busy and every rejected draft token (8,703 − 5,306 =
    3,397 per 10 s) is verification work taken from the batch: the turn is to disable speculation. KV usage 17.6 %
    with nothing waiting and no preemption: the pool is not what limits, so no KV turn (fp8 KV, a larger budget,
    weight quantization) and never more sequences. ``once``'s ~1 s of history sizes no replicas.

    Chosen: the report names no GPU or TP. 610 requests of ≈ 430 prompt + ~150 generated tokens at 17.6 % put the
    pool at ≈ 610 × 580 ÷ 0.176 ≈ 2.0M tokens; Qwen3-32B in fp8 at TP 8 on H100-SXM gives 1,999,584 (the capacity
    pass), so 8 × H100 at TP 8. ``max_num_seqs`` 1024: 629 sequences ran at once, above the 256 default of smaller
    GPUs (1024 is V1's default on H100-class GPUs). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-32B-FP8",
        num_gpu_blocks=124_974,
        max_model_len=40_960,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    # the burst before: 2,000 requests done at this pace, 633 of them queued
    eng.finish(2_000, prompt=430, output=300, ttft=6.0, tpot=0.17, queue=5.5)
    eng.first_tokens([6.0] * 2_610)
    eng.prefill(2_610 * 430)
    eng.decode(2_000 * 300 + 610 * 150, 0.17)
    eng.running, eng.waiting, eng.kv_usage = 610.0, 0.0, 0.176
    spec_first = _spec_decode_lines(eng, 30_000, 90_000, [30_000, 19_000, 14_000])
    first = eng.render() + spec_first
    # one second: 3,399 tokens decoded over 610 sequences, 11 finish and 11 are admitted
    eng.decode(3_399, 0.18, steps=1.0, batch=610)
    eng.finish(11, prompt=430, output=300, ttft=8.0, tpot=0.18, queue=7.0)
    eng.first_tokens([7.5] * 11)
    eng.prefill(11 * 430)
    eng.running, eng.waiting, eng.kv_usage = 610.0, 0.0, 0.176
    # the log's 10 s: 8,703 draft tokens, 5,306 accepted, position 0 at 0.730 → per second 290 drafts of 3 tokens
    spec_second = _spec_decode_lines(eng, 30_290, 90_870, [30_000 + 212, 19_000 + 175, 14_000 + 143])
    second = eng.render() + spec_second
    return FieldState(
        id="vllm-ngram-spec-610-running",
        source="https://github.com/vllm-project/vllm/issues/19254",
        engine_version="vLLM 0.9.0.1 (V1; rendered with the 0.11 label set)",
        deployment={
            "name": "qwen3-32b-fp8",
            "engine": "vllm",
            "model": "Qwen/Qwen3-32B",
            "served_model": "Qwen/Qwen3-32B-FP8",
            "quantization": "fp8",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 40_960,
            "max_num_seqs": 1024,
            "speculative_decoding": True,
            "speculative_config": {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 610, "requests_waiting": 0, "kv_cache_usage_ratio": 0.176},
        must_propose=[("speculative_decoding", "disable")],
        must_never=[
            ("speculative_decoding", "enable"),
            ("kv_cache_dtype", None),
            ("gpu_memory_utilization", "increase"),
            ("weight_quantization", None),  # already fp8, and the pool is not the limit
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "decrease"),  # 610 sequences missing TPOT is no light load
            ("replicas", "increase"),  # ~1 s of history sizes no replicas
            ("replicas", "decrease"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. a benchmark's backlog of 40k-token prompts, admitted at the prefill rate ----------------------------------


def vllm_235b_long_prompt_benchmark_ramp() -> FieldState:
    """vllm-project/vllm PR #37307 ("[Core] add option to schedule requests based on full ISL"), its test plan:
    ``vllm serve Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 --max-model-len 41001 --tensor-parallel-size 8
    --enable-expert-parallel --no-enable-prefix-caching --enable-chunked-prefill`` under a 100-prompt benchmark, the
    log every 10 s: "Avg prompt throughput: 23999.8 tokens/s … Running: 22 reqs, Waiting: 78 reqs, GPU KV cache usage:
    42.5%", then 28 / 72 / 54.2 %, 34 / 66 / 65.4 %; generation 52.6 → 83.7 tokens/s.

    Arithmetic: six requests are admitted every 10 s while 24,000 prompt tokens/s are prefilled — ≈ 40,000 tokens a
    prompt — and KV usage rises 11.2 points per 10 s (240,000 tokens ÷ 0.112 ≈ 2.1M tokens of pool; 28 × 40,000 =
    1.12M = 54 %). All 100 requests arrived at the start: running + waiting stays 100 and nothing finishes, so the
    arrival rate is λ = 0 + (100 − 100) = 0: the queue drains at the prefill rate by itself. The window (15:38:40 +
    1 s): running 28 → 29, waiting 72 → 71, usage 0.542 → 0.553, no preemption yet, 70 tokens generated.

    Never more replicas (λ = 0, and ``once`` sees ~1 s), never a pool turn (fp8 KV, a larger budget, a higher TP —
    the pool is at 54 % with no preemption; what admits the queue is prefill compute), never more sequences (29
    running against a cap of 1024), never a restart (the counters move), never a lower TP (the pool is over half
    full).

    Chosen: the PR names no GPU. The pool the log implies (≈ 2.1M tokens) is what 8 × H200 at TP 8 give this fp8
    checkpoint (2,050,800 tokens, the capacity pass); 8 × H100 would give ≈ 0.8M. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        num_gpu_blocks=128_175,
        max_model_len=41_001,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.cache_labels["enable_prefix_caching"] = "False"
    # the 40 seconds before: 27 prompts prefilled and given their first token after 2 … 38 s of queue (vLLM counts a
    # prompt's tokens once, when its first token comes out); the 28th is part-way through its chunked prefill
    eng.prefill(27 * 40_000)
    eng.first_tokens([2.0 + 1.4 * i for i in range(27)])
    eng.decode(1_600, 0.35)
    eng.running, eng.waiting, eng.kv_usage = 28.0, 72.0, 0.542
    first = eng.render()
    eng.prefill(40_000)  # the 28th prompt's first token: its 40,000 tokens are counted now
    eng.first_tokens([40.0])
    eng.decode(70, 0.35, steps=1.0, batch=28)
    eng.running, eng.waiting, eng.kv_usage = 29.0, 71.0, 0.553
    return FieldState(
        id="vllm-235b-long-prompts-benchmark-ramp",
        source="https://github.com/vllm-project/vllm/pull/37307",
        engine_version="vLLM 0.1x (V1; rendered with the 0.11 label set)",
        deployment={
            "name": "qwen235b-fp8",
            "engine": "vllm",
            "model": "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "enable_expert_parallel": True,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 41_001,
            "max_num_seqs": 1024,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 29, "requests_waiting": 71, "kv_cache_usage_ratio": 0.553},
        must_never=[
            ("replicas", "increase"),
            ("kv_cache_dtype", None),
            ("gpu_memory_utilization", "increase"),
            ("tensor_parallel_size", None),
            ("max_num_seqs", "increase"),
            ("max_model_len", "decrease"),  # every prompt is ≈ 40,000 of the 41,001 tokens: a cap rejects them
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. one request reasoning to its cap ---------------------------------------------------------------------------


def vllm_thinking_runaway_one_request() -> FieldState:
    """vllm-project/vllm#30599 ("Qwen3-30B-A3B on vLLM-OpenAI v0.12.0 'hangs' in thinking mode: keeps reasoning
    until token cap"): ``--model=Qwen/Qwen3-30B-A3B --gpu-memory-utilization=0.9 --max-model-len=40960
    --max-num-seqs=12 --max-num-batched-tokens=8192 --reasoning-parser=qwen3``; the log: "Avg generation throughput:
    181.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.6%" then 180.3 / 0.8 %, 178.2 / 1.0 %.

    Arithmetic: one sequence decoding 180 tokens/s is an ITL of 5.6 ms, far inside any TPOT target; the KV usage
    rises 0.2 points per 10 s because that one sequence grows (1,800 tokens ÷ 148,160 tokens of pool ≈ 1.2 % — the
    same order). The engine is healthy: its generation counter moves by 180 a second, so no restart (the "hang" is
    the model not closing its reasoning, a sampling/template matter). Nothing waits, nothing is preempted, and one
    agent's request is no measure of the load: no capacity turn either way — no advice at all.

    Chosen: the report names no GPU; Qwen3-30B-A3B in bf16 (61 GB) on one H100-SXM (148,160 tokens of pool, the
    capacity pass; 1.0 % ≈ 1,500 tokens, one prompt plus its reasoning so far). Twenty agent requests finished
    before. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-30B-A3B",
        num_gpu_blocks=9_260,
        max_model_len=40_960,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.finish(20, prompt=900, output=700, ttft=0.3, tpot=0.0055, queue=0.01)
    eng.first_tokens([0.3] * 21)
    eng.prefill(21 * 900)
    eng.decode(20 * 700 + 560, 0.0055)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.0098
    first = eng.render()
    eng.decode(180, 0.0055, steps=180, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.0100
    return FieldState(
        id="vllm-qwen3-30b-thinking-runaway-one-request",
        source="https://github.com/vllm-project/vllm/issues/30599",
        engine_version="vLLM 0.12.0 (V1; rendered with the 0.11 label set)",
        deployment={
            "name": "qwen3-30b-a3b",
            "engine": "vllm",
            "model": "Qwen/Qwen3-30B-A3B",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 40_960,
            "max_num_seqs": 12,
            "max_num_batched_tokens": 8192,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        no_advice=True,
        must_never=[RESTART, ("replicas", None), ("instance_type", None), ("max_num_seqs", None)],
        extra_check=no_stall_claimed,
    )


# --- 4. a batch runner's 256 requests against a pool that holds ~72 ----------------------------------------------


def vllm_a10g_batch_job_full_pool() -> FieldState:
    """Tandemn-Labs/tandemn-system#11 ("max_concurrency estimation causes excessive vLLM preemptions"): a batch
    runner fires 256 concurrent requests (its fallback ``MAX_NUM_SEQS=256``) at vLLM serving Qwen/Qwen2.5-7B-Instruct
    on one A10G: "KV cache: 77,088 tokens, 100% utilized", "Running: ~72, Waiting: ~184", "480 preemptions observed
    in a 5000-request job", "TTFT p50 = 60s"; the report's fix is to cap the concurrency at what the pool holds
    ("actual concurrency the KV cache supports is ~70-80, not 256").

    Arithmetic: 77,088 tokens ÷ 72 running ≈ 1,070 tokens each (≈ 800 prompt + half of ≈ 500 generated). The other
    184 are the runner's semaphore, not an arrival rate: running + waiting stays 256. The window: usage 0.99 → 1.0,
    72 running, 184 waiting, one preemption (480 over the job's ≈ 1,560 s is 0.3 a second), 3 requests finish after
    ≈ 60 s of queue (TTFT misses 5 s), 1,600 tokens decoded (ITL 45 ms).

    The pool is the limit with requests waiting and being preempted: the first turn must add no GPU (a 7B model on
    a 24 GB card has a pool of 4.4 GB: fp8 KV, a larger budget or quantized weights enlarge it on the same GPU), and
    the concurrency cap must come down towards what the pool holds (``max_num_seqs`` 256 → ≈ 72-80: admitting
    sequences the pool cannot grow is what preempts). Never more sequences, never fewer replicas, never speculation
    (draft tokens take KV blocks from a full pool), never a replica count from ~1 s of history.

    Chosen: vLLM V1 (the report's version is not stated), ``gpu_memory_utilization`` 0.9 (the default; the capacity
    pass gives 77,248 tokens at 0.9, the report 77,088), ``max_model_len`` 32,768 (the model's), ``max_num_seqs`` 256.
    SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-7B-Instruct",
        num_gpu_blocks=4_818,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.finish(2_000, prompt=800, output=500, ttft=58.0, tpot=0.045, queue=57.0)
    eng.first_tokens([58.0] * 2_072)
    eng.prefill(2_072 * 800)  # once per request, at its first token: a preempted request's recompute is not counted
    eng.decode(2_000 * 500 + 72 * 250, 0.045)
    eng.preempt(300)
    eng.running, eng.waiting, eng.kv_usage = 72.0, 184.0, 0.99
    first = eng.render()
    eng.finish(3, prompt=800, output=500, ttft=61.0, tpot=0.045, queue=60.0)
    eng.first_tokens([61.0, 60.0, 62.0])
    eng.prefill(3 * 800)
    eng.decode(1_600, 0.045, steps=22, batch=72)
    eng.preempt(1)
    eng.running, eng.waiting, eng.kv_usage = 72.0, 184.0, 1.0
    return FieldState(
        id="vllm-qwen25-7b-a10g-batch-job-full-pool",
        source="https://github.com/Tandemn-Labs/tandemn-system/issues/11",
        engine_version="vLLM V1 (version not stated; rendered with the 0.11 label set)",
        deployment={
            "name": "qwen7b-a10g",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu": "a10g",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 72, "requests_waiting": 184, "kv_cache_usage_ratio": 1.0},
        must_propose=[("max_num_seqs", "decrease")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "decrease"),
            ("replicas", "increase"),  # ~1 s of history sizes no replicas
            ("speculative_decoding", "enable"),
            RESTART,
        ],
        extra_check=all_of(first_turn_adds_no_gpu, _cap_towards_the_pool(lo=40, hi=128)),
    )


def _cap_towards_the_pool(lo: int, hi: int) -> Callable[[dict[str, Any]], None]:
    """Every ``max_num_seqs`` decrease proposed lands within ``[lo, hi]`` (what the pool holds, ~72, with slack)."""

    def check(result: dict[str, Any]) -> None:
        for rec in result.get("recommendations") or []:
            for t in _turns(rec):
                if t.get("dial") == "max_num_seqs" and t.get("action") == "decrease":
                    assert lo <= int(t["suggested"]) <= hi, f"max_num_seqs {t['current']} → {t['suggested']}"

    return check


# --- 5. a pool pinned by --kv-cache-memory-bytes -------------------------------------------------------------------


def vllm_gb200_pool_pinned_by_kv_bytes() -> FieldState:
    """vllm-project/vllm PR #44594 ("[Core] Add kvcache watermark to reduce preemptions"), its benchmark:
    Qwen/Qwen2.5-7B-Instruct, TP 1, one GB200, "KV cache: 16 GiB → 299,584 tokens (near-critical: ~1.5× mean
    demand), prefix caching off", ``--max-model-len 8192 --max-num-seqs 256``, input ~1,000 / output ~5,000 tokens,
    ``--max-concurrency 128``; without a watermark: 1,065 preemptions, 11,582 output tokens/s, 2.306 requests/s,
    TTFT p50 6.56 s / p99 25.51 s, ITL p99 40.62 ms, E2E p50 51.6 s.

    Arithmetic: 128 requests of 1,000 + ≈ 2,500 tokens (half-way through 5,000) want ≈ 448,000 tokens against
    299,584: ≈ 85 run, 43 wait, and growth preempts (1,065 over 450 ÷ 2.306 = 195 s ≈ 5 a second). The window: usage
    0.98 → 0.99, running 85 → 86, waiting 43 → 42, 5 preemptions, 2 requests finish (TTFT ≈ 6.6 s, over a 5 s
    target), 11,582 tokens decoded.

    The pool is 16 GiB because ``--kv-cache-memory-bytes`` says so (vLLM reports it in ``cache_config_info``): the
    weights take ≈ 15 GB of a 186 GB GPU. Raising that setting (to 24 GiB: ≈ 450,000 tokens, the whole demand) is
    the turn that adds no GPU and costs no accuracy, so the first advice must add no GPU and must name
    ``kv_cache_memory_bytes``. ``gpu_memory_utilization`` is inert while ``kv_cache_memory_bytes`` is set (vLLM's
    ``CacheConfig``: "kv_cache_memory_bytes (when not-None) ignores gpu_memory_utilization"): raising it must never be
    proposed. Never more sequences, never speculation into a full pool, never a replica count from ~1 s of history.
    Any cap on ``max_num_seqs`` must leave room for what the pool holds at the longest requests: 299,584 ÷ (1,200 +
    6,000) ≈ 41 (the benchmark's ±20 % range on 1,000 in / 5,000 out).

    Chosen: the PR's build is a 0.2x V1 (rendered with the 0.33 label set, which carries ``kv_cache_memory_bytes``);
    ``gpu_memory_utilization`` stays at its 0.9 default. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-7B-Instruct",
        num_gpu_blocks=18_724,
        max_model_len=8192,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.cache_labels.update(kv_cache_memory_bytes="17179869184", enable_prefix_caching="False")
    eng.finish(200, prompt=1_000, output=5_000, ttft=6.56, tpot=0.009, queue=6.0)
    eng.first_tokens([6.56] * 286)
    eng.prefill(286 * 1_000)  # once per request, at its first token: a preempted request's recompute is not counted
    eng.decode(200 * 5_000 + 86 * 2_500, 0.0074)
    eng.preempt(600)
    eng.running, eng.waiting, eng.kv_usage = 85.0, 43.0, 0.98
    first = eng.render()
    eng.finish(2, prompt=1_000, output=5_000, ttft=6.6, tpot=0.009, queue=6.0)
    eng.first_tokens([6.4, 6.8, 7.0])
    eng.prefill(3 * 1_000)
    eng.decode(11_582, 0.0074, steps=135, batch=86)
    eng.preempt(5)
    eng.running, eng.waiting, eng.kv_usage = 86.0, 42.0, 0.99
    return FieldState(
        id="vllm-qwen25-7b-gb200-pool-pinned-by-kv-cache-memory-bytes",
        source="https://github.com/vllm-project/vllm/pull/44594",
        engine_version="vLLM 0.2x (V1; rendered with the 0.33 label set)",
        deployment={
            "name": "qwen7b-gb200",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "gpu": "gb200",
            "gpu_memory_utilization": 0.9,
            "kv_cache_memory_bytes": 17_179_869_184,
            "max_model_len": 8192,
            "max_num_seqs": 256,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 86, "requests_waiting": 42, "kv_cache_usage_ratio": 0.99},
        must_never=[
            ("gpu_memory_utilization", "increase"),
            ("max_num_seqs", "increase"),
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),  # ~1 s of history sizes no replicas
            ("replicas", "decrease"),
            RESTART,
        ],
        extra_check=all_of(
            first_turn_adds_no_gpu,
            _cap_towards_the_pool(lo=41, hi=128),
            _first_names("kv_cache_memory_bytes", "kv-cache-memory-bytes"),
        ),
    )


def _first_names(*names: str) -> Callable[[dict[str, Any]], None]:
    """The first recommendation (its dial, flag, summary or description) names one of ``names``."""

    def check(result: dict[str, Any]) -> None:
        recs = result.get("recommendations") or []
        assert recs, "no advice"
        first = recs[0]
        text = json.dumps({k: first.get(k) for k in ("dial", "flag", "summary", "description")})
        assert any(n in text for n in names), (
            f"the first advice does not name {names}: {brief(recs[:1])}; flag {first.get('flag')!r}"
        )

    return check


STATES = [
    pytest.param(vllm_ngram_spec_decode_big_batch, id="vllm-ngram-spec-610-running"),
    pytest.param(vllm_235b_long_prompt_benchmark_ramp, id="vllm-235b-long-prompts-benchmark-ramp"),
    pytest.param(vllm_thinking_runaway_one_request, id="vllm-qwen3-30b-thinking-runaway-one-request"),
    pytest.param(vllm_a10g_batch_job_full_pool, id="vllm-qwen25-7b-a10g-batch-job-full-pool"),
    pytest.param(vllm_gb200_pool_pinned_by_kv_bytes, id="vllm-qwen25-7b-gb200-pool-pinned-by-kv-cache-memory-bytes"),
]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module, a few at a time (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, [p.values[0]() for p in STATES])


@pytest.mark.parametrize("build", STATES)
def test_field_state(build: Callable[[], FieldState], once: FieldStateRuns) -> None:
    state = build()
    check_field_state(once[state], state)
