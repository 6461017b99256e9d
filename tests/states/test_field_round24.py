"""Field states, round 24: an fp8 KV cache that vLLM 0.11 cannot start on an RTX 3090, two long agent sessions that
fill a 2 × RTX 3090 SGLang pool by design, and an 8B model split over eight pipeline stages for a large batch, from
three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as the engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1, the 0.11
label set), SGLang through :class:`tests.states.SGLangEngine` (0.5.x scheduler and tokenizer families). The
assertions come from the reports' numbers, the fix each thread establishes and engine facts, never from the
advisor's output:

* ``vllm-0.11-rtx3090-fp8-kv-triton-refused-pool-full`` — vLLM 0.11 on 2 × RTX 3090 (compute capability 8.6):
  ``--kv-cache-dtype fp8`` selects the Triton attention backend, whose cache-write kernel does not compile on this
  GPU ("type fp8e4nv not supported in this architecture"); the operator serves with the 16-bit cache and its pool
  fills. Whatever else comes, never the KV dtype (the engine would not start), replicas from one second or a
  restart.
* ``sglang-dual-3090-two-sessions-fill-pool-by-design-no-advice`` — SGLang on 2 × RTX 3090 sized for two long agent
  sessions (``--mem-fraction-static 0.95``, ``--max-running-requests 2``: each session half the pool, 86 % of the
  context), gated clean with 949 MB of VRAM left. Both sessions running deep, nothing waiting, decode on target:
  no advice at all — no third session, no larger memory fraction, no context cap below what the sessions hold.
* ``vllm-pp8-llama31-8b-large-batch-586-vs-565-tps`` — Llama-3.1-8B over ``-pp 8`` decodes 586.03 tokens/s on a
  large batch against 564.79 on one GPU: eight stages in flight, nothing gained. Never more parallelism (PP or TP),
  a pool turn (the pool is ~1 % used), replicas from one second or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states import SGLangEngine, VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _all, _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS

# --- 1. vLLM 0.11 on RTX 3090: fp8 KV picks Triton attention, which cannot compile fp8e4nv on SM 8.6 ---------------


def vllm_3090_fp8_kv_triton_refused() -> FieldState:
    """vllm-project/vllm#26431 ("[Bug]: KV Cache Quantization not working on v1 (rtx3090) "type fp8e4nv not supported
    in this architecture"", open): two GeForce RTX 3090 (TP 2), PyTorch 2.8.0+cu128 (the vLLM 0.11 stack, October
    2025); with ``--kv-cache-dtype fp8`` the workers die at start-up in ``reshape_and_cache_kernel_flash``:
    "triton.compiler.errors.CompilationError … ValueError("type fp8e4nv not supported in this architecture …")". Later
    comments: "Same here with MiniMax-M2.7 on A100" (compute capability 8.0), and the same trace from a PP + TP run
    (``Worker_PP2_TP1_EP1``). vllm-project/vllm#43914 (merged May 2026) turned the crash into an early refusal on the
    Triton backend: "``kv_cache_dtype.startswith("fp8")`` requires SM89"; vllm-project/vllm#45829 and #49077 (software
    fp8 conversion for SM75–SM88) are still open.

    Engine facts (vLLM 0.11 ``vllm/platforms/cuda.py`` ``get_attn_backend_cls``, V1 default selection): "FlashAttention
    is the default for SM 8.0+ GPUs … ``if (has_sink or use_fp8_kv_cache) and not cls.is_device_capability(90)``:
    Using Triton backend" — an fp8 cache on any 8.x GPU other than Hopper goes to ``TRITON_ATTN``, whose cache write
    casts to ``tl.float8e4nv``, a type Triton lowers only from SM 8.9 (``CudaPlatform.supports_fp8`` is
    ``has_device_capability(89)``). So on an RTX 3090 (8.6) vLLM 0.11 does not start with an fp8 cache; the operator
    serves with ``auto`` (bf16) and the pool is half what fp8 would give. Arithmetic: Qwen3-8B at TP 2 holds 72 KiB a
    token a GPU in bf16; 12.5 GiB a GPU left after weights at 0.9 is 11,376 blocks of 16 = 182,016 tokens (364,032
    at fp8, the turn the engine refuses). Contexts of ~4,200 tokens: 42 run (~176,000 tokens, 97 %), 15 wait,
    preemptions climb. The tempting turn — fp8 KV "halves the bytes per token" — is the configuration this engine
    cannot start here. So must never: ``kv_cache_dtype`` (any action); replicas (one second of history); a restart
    (tokens move).

    Not asserted: any other dial (a larger memory fraction, fewer sequences, a context cap): the thread establishes
    none of them.

    Chosen where the report is silent: the model (the reporter's is not in the excerpt) — Qwen3-8B, bf16, which fits
    2 × 24 GB at TP 2 with a pool; ``max_model_len`` 32,768; ``gpu_memory_utilization`` 0.9; chat traffic of ~3,600
    prompt and ~600 output tokens at 35 ms a token. Before: 1,200 answered, 60 preemptions; the window: 40 decode
    steps, one finishes, one is admitted, one more preemption; KV 97 → 98 %. vLLM 0.11.0 rendered with the 0.11 label
    set (``cache_dtype`` auto). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen3-8B"
    eng = VLLMEngine(model_name=model, num_gpu_blocks=11_376, max_model_len=32_768, gpu_memory_utilization=0.9)
    eng.finish(1_200, prompt=3_600, output=600, ttft=2.5, tpot=0.035, queue=1.9)
    eng.first_tokens([0.6] * 700 + [3.0] * 300 + [7.0] * 242)
    eng.prefill(1_242 * 3_600 + 60 * 3_900)
    eng.decode(1_200 * 600 + 42 * 300, 0.035, steps=(1_200 * 600 + 42 * 300) / 40, batch=40)
    eng.preempt(60)
    eng.running, eng.waiting, eng.kv_usage = 42.0, 15.0, 0.97
    first = eng.render()
    eng.finish(1, prompt=3_600, output=600, ttft=7.0, tpot=0.035, queue=6.4)
    eng.first_tokens([7.0])
    eng.prefill(3_600 + 3_900)
    eng.decode(42 * 28, 0.035, steps=28, batch=42)
    eng.preempt(1)
    eng.kv_usage = 0.98
    return FieldState(
        id="vllm-0.11-rtx3090-fp8-kv-triton-refused-pool-full",
        source="https://github.com/vllm-project/vllm/issues/26431",
        engine_version="vLLM 0.11.0 (rendered with the 0.11 label set)",
        deployment={
            "name": "qwen3-8b-dual-3090",
            "engine": "vllm",
            "engine_version": "0.11.0",
            "model": model,
            "gpu": "rtx3090",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 42, "requests_waiting": 15, "kv_cache_capacity_tokens": 182_016},
        must_never=[("kv_cache_dtype", None), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang on 2 × RTX 3090: two long sessions fill the pool by design; gated clean --------------------------


def sglang_two_sessions_fill_pool_by_design() -> FieldState:
    """noonghunna/club-3090#1329 ("dual-fast: 2-session default (mem-fraction 0.95, max-running-requests 2)",
    merged): "Gated 2026-09-15 — all blocking gates run. verify-full 10/10 · verify-stress ceiling ladder 6/6 to
    240,660 tok (91%) · bench 74.00/101.58 decode TPS · soak-continuous PASS (0/200 MiB growth) … One amber flag (VRAM
    margin 949 MB vs a 1,024 MB threshold)". Changes ``sgl/qwen38-27b-dual-fast`` "from one deep session to two":
    ``MEM_FRACTION 0.90 -> 0.95``, ``MAX_RUNNING_REQUESTS 1 -> 2``; "max_total_num_tokens 451,633 (was 409,552);
    sessions × context 2 × 225,817 — 86% of the 262,144 ceiling … errors / OOM 0 / 0".

    Engine facts (SGLang ``scheduler.py`` / ``schedule_policy.py``): ``--max-running-requests`` caps the running batch;
    a request is admitted only when the pool holds its prompt plus its reserved output, so with two sessions each
    allowed half the pool, a third is either refused a slot or retracts one; ``--mem-fraction-static`` is the share
    of GPU memory for weights and the pool, the rest is activations and CUDA graphs — at 0.95 the gate measured
    949 MB of headroom, under its own 1,024 MB threshold. Arithmetic: 451,633 ÷ 2 = 225,817 tokens a session =
    86 % of 262,144. The design point is two deep sessions with the pool nearly full: both running, nothing waiting,
    no retraction, decode at 74 tokens/s (13.5 ms a token). So no advice at all: a third session (``max_num_seqs``
    up) does not fit three deep contexts (3 × 200,000 > the pool); a larger memory fraction has no VRAM left (the
    amber flag); a context cap below what the sessions hold refuses their own turns; more TP or replicas add GPUs
    the two sessions do not need; a restart drops two live sessions.

    Chosen where the report is silent, and the stand-in: Qwen3.8-27B (a hybrid with 16 full-attention layers of 64)
    is not in the advisor's tables; Llama-3.1-8B-Instruct (131,072-token context, full attention) on the same
    2 × RTX 3090 at TP 2 stands in, sized the same way: ``mem_fraction_static`` 0.95, ``max_running_requests`` 2;
    the capacity pass gives a pool of 232,140 tokens — 116,070 a session, 89 % of the 131,072 context (the report's
    86 %). The moment: two agent sessions at ~101,000 and ~99,000 tokens (200,000 held, 86 %), both decoding at
    13.5 ms a token, nothing queued. Before: 300 agent turns answered (~600 tokens each, TTFT ~1.5 s on cached
    prefixes, 13.5 ms a token); the window: 74 tokens each, nothing finishes. SGLang of September 2026 replayed with
    the 0.5.x exposition. SLO: TTFT 10 s, TPOT 50 ms.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    pool = 232_140
    ctx = 131_072
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=ctx, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 2.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 2 / 0.0135
        eng.g["cache_hit_rate"] = 0.95

    eng.finish(300, prompt=60_000, output=600, ttft=1.5, tpot=0.0135, queue=0.0)
    eng.prompt["true"] = 300 * 60_000.0
    eng.generation["true"] = 300 * 600.0 + 2 * 300.0
    eng.itl.observe(0.0135, 300 * 599 + 2 * 300)
    gauges(200_000.0)
    first = eng.render()
    eng.generation["true"] += 2 * 74.0
    eng.itl.observe(0.0135, 2 * 74)
    gauges(200_148.0)
    return FieldState(
        id="sglang-dual-3090-two-sessions-fill-pool-by-design-no-advice",
        source="https://github.com/noonghunna/club-3090/pull/1329",
        engine_version="SGLang of September 2026 (replayed with the 0.5.x exposition)",
        deployment={
            "name": "dual-3090-two-sessions",
            "engine": "sglang",
            "model": model,
            "gpu": "rtx3090",
            "tensor_parallel_size": 2,
            "mem_fraction_static": 0.95,
            "max_model_len": ctx,
            "max_num_seqs": 2,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 2, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        no_advice=True,
        must_never=[
            ("max_num_seqs", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(101_000)),
    )


# --- 3. vLLM: Llama-3.1-8B over eight pipeline stages, a large batch, no faster than one GPU ------------------------


def vllm_pp8_llama8b_large_batch() -> FieldState:
    """vllm-project/vllm#11500 ("[Performance]: The speedup for Pipeline Parallel", open): "When I run
    llama-3.1-8B-Instruct with -pp 8 or not, there is nearly no speedup, even with large batch of data … When running
    with pipeline parallel 8, the gpu utilization of the 8 cards are from 20% to 50%." The table: pp_1 — 113,632
    prompt tokens, 17,004 decode tokens, 30.11 s, 564.79 decode tokens/s; pp_8 — 114,532 prompt, 17,517 decode,
    29.89 s, 586.03 decode tokens/s.

    Engine facts: pipeline parallelism splits the 32 layers into 8 stages of 4; a token passes all eight in turn, so
    it is no faster than on one GPU (each stage reads an eighth of the weights, one after another, plus seven
    hand-offs); with a large batch vLLM keeps several micro-batches in flight (one per virtual engine) so stages can
    overlap, which at best matches — never multiplies — one GPU's throughput for a model that already fits one GPU
    (16 GB of bf16 weights). Arithmetic: 586.03 ÷ 564.79 = 1.04× the decode rate for 8× the GPUs; 114,532 prompt
    tokens in 29.89 s is ~3,830 a second on eight GPUs, 3,774 on one; the pool at PP 8 is ~4.4M tokens and the batch
    (≤ 200 requests of ~270 tokens) uses ~1 % of it. So must never: more PP (more stages, same throughput), more TP
    (more GPUs for a model that needs one), a pool turn (the pool is ~1 % used), replicas (one second of history; the
    GPUs are already idle), a restart (tokens move).

    Not asserted: fewer GPUs (one stage, the report's own pp_1 row gives 96 % of the throughput on one GPU) — right,
    but measured over a 30 s offline run, not one second of a server.

    Chosen where the report is silent: the GPU — an A100-80GB (``a100-80gb``); the batch — 500 requests of ~229
    prompt and ~35 output tokens (the report's 114,532 and 17,517 totals), replayed as a server with the whole batch
    submitted at once: 15 s in, 250 answered, 200 running and 50 waiting; decode at 586 tokens/s over 200 running
    (0.34 s a token each); TTFT up to 15 s (the queue of the batch). The window: 586 tokens decode, 8 finish and 8 are
    admitted. vLLM 0.6.4 (December 2024, V0) replayed with the V1 0.11 label set. SLO: an offline batch — TTFT 60 s,
    TPOT 0.5 s.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 4_409_104 // 16
    eng = VLLMEngine(model_name=model, num_gpu_blocks=blocks, max_model_len=8_192, gpu_memory_utilization=0.9)
    eng.finish(250, prompt=229, output=35, ttft=7.0, tpot=0.34, queue=6.0)
    eng.first_tokens([7.0] * 450)
    eng.prefill(450 * 229)
    eng.decode(250 * 35 + 200 * 17, 0.34, steps=(250 * 35 + 200 * 17) / 200, batch=200)
    eng.running, eng.waiting, eng.kv_usage = 200.0, 50.0, 200 * 250 / (blocks * 16)
    first = eng.render()
    eng.finish(8, prompt=229, output=35, ttft=7.5, tpot=0.34, queue=6.5)
    eng.first_tokens([15.0] * 8)
    eng.prefill(8 * 229)
    eng.decode(586, 0.34, steps=3, batch=195)
    eng.waiting = 42.0
    return FieldState(
        id="vllm-pp8-llama31-8b-large-batch-586-vs-565-tps",
        source="https://github.com/vllm-project/vllm/issues/11500",
        engine_version="vLLM 0.6.4 of December 2024 (replayed with the V1 0.11 label set)",
        deployment={
            "name": "llama31-8b-pp8",
            "engine": "vllm",
            "model": model,
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "pipeline_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.5, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 200, "requests_waiting": 42},
        must_never=[
            ("pipeline_parallel_size", "increase"),
            ("tensor_parallel_size", "increase"),
            *POOL_TURNS,
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_3090_fp8_kv_triton_refused(),
    sglang_two_sessions_fill_pool_by_design(),
    vllm_pp8_llama8b_large_batch(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
