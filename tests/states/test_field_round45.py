"""Field states, round 45: vLLM V1 and SGLang as operators ran them in 2026 where the KV cache lives partly off the
GPU or the queue partly outside the engine — a one-card agent box whose evicted 196K-token sessions come back from a
44 GB CPU KV tier (no advice), an SGLang decode instance of a DSA model whose device-resident KV pins it at 6
running with 48 behind (no cap, TP or restart turn: the host-backed pool is the measured fix), and a single vLLM
replica serving interactive and batch traffic with no batch gateway in front (no more sequences, no speculation) —
from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine` (V1, the 0.33 label set for 2026 releases, with
the KV connector's ``vllm:external_prefix_cache_queries_total`` / ``_hits_total`` written here) or
:class:`tests.states.SGLangEngine` (the 0.5.x scheduler families, ``engine_type="decode"`` and the decode server's
prealloc/transfer queue gauges of round 41). The assertions come from the reports' numbers, the verdict each thread
establishes and engine facts, never from the advisor's output:

* ``vllm-0.28-rtx5090-qwen38-27b-196k-cpu-kv-tier-44gb-sessions-resume-no-advice`` — "The 44 GB CPU offload is my
  host-KV-cache. ~1.1M tokens of KV in RAM ≈ 5–6 full 196k sessions cached … Re-prefilling an evicted 130k session
  costs ~50 s; the offload is the difference between a session resuming instantly and stalling for a minute.
  Measured: 92.8% GPU prefix hits + 6.8% external (CPU) hits." No advice: never prefix caching off, a context cap
  below the sessions, more sequences, a pool turn, replicas or a restart.
* ``sglang-2026-dsa-8x-rtx-pro-6000-decode-hisparse-off-pool-pins-6-of-54`` — "Without HiSparse the full KV stays
  resident on device, so the decode instance saturates its KV pool at only running-req = 6 (≈87% GPU-token usage).
  Raising the target batch past 8 just lengthens the queue — actual concurrency stays pinned at 6, so baseline
  throughput flatlines at ~215 tok/s"; with HiSparse 54 run at 643.6 tok/s. The cap is not what binds: never more
  running requests, more TP, replicas, a restart or a context cap below the 32K prompts.
* ``vllm-0.23-gpt-oss-120b-a100-interactive-beside-batch-no-gateway-itl-24-to-53ms`` — one A100 replica, interactive
  only: TTFT p50/p95 72/92 ms, ITL 24 ms; with the batch jobs sent straight to vLLM ("S1 — no batch gateway"): TTFT
  278/597 ms, ITL p50/p95 53/66 ms. The batch's sequences in every step are what slow the interactive stream:
  never more sequences, never speculation, never a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import SGLangEngine, VLLMEngine, _labels, go_float
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all
from tests.states.test_field_round14 import QWEN35_27B_CONFIG, _hybrid_pool
from tests.states.test_field_round41 import _decode_queues


def _external_prefix_lines(eng: VLLMEngine, queries: float, hits: float) -> str:
    """The KV connector's prefix-cache counters (vLLM V1 ``PrometheusStatLogger``: tokens queried from and found in
    the external tier — here the native CPU offload), labels ``engine`` + ``model_name``, with their ``_created``."""
    ml = {"engine": "0", "model_name": eng.model_name}
    out: list[str] = []
    for base, text, value in (
        ("vllm:external_prefix_cache_queries", "External prefix cache queries from KV connector, in tokens.", queries),
        ("vllm:external_prefix_cache_hits", "External prefix cache hits from KV connector, in tokens.", hits),
    ):
        out += [f"# HELP {base} {text}", f"# TYPE {base} counter"]
        out.append(f"{base}_total{_labels(ml)} {go_float(value)}")
        out += [f"# HELP {base}_created {text}", f"# TYPE {base}_created gauge"]
        out.append(f"{base}_created{_labels(ml)} {go_float(eng.started + 55.0)}")
    return "\n".join(out) + "\n"


# --- 1. vLLM on one RTX 5090: 196K-token agent sessions, a 44 GB CPU KV tier brings evicted ones back -------------


def vllm_rtx5090_cpu_kv_tier_sessions_resume() -> FieldState:
    """MirkoCovizzi/ninfer-rtx5090-mobile#3 ("TODO: Explore KV cache CPU offload", open, 2026-08-22), the operator
    quoting their own measured set-up ("5090 vllm qwen3.8-27b nvfp4 196k ctx 143 t/s"): "The 44 GB CPU offload is my
    host-KV-cache. ~1.1M tokens of KV in RAM ≈ 5–6 full 196k sessions cached with ARC eviction. Re-prefilling an
    evicted 130k session costs ~50 s; the offload is the difference between a session resuming instantly and
    stalling for a minute. Measured: 92.8% GPU prefix hits + 6.8% external (CPU) hits."

    Engine facts (vLLM V1): with a KV connector (the native CPU offload, ``kv_offloading_size`` in
    ``cache_config_info``) a request's prefix is looked up first in the GPU prefix cache
    (``prefix_cache_queries``/``hits``, tokens), then the rest in the external tier
    (``external_prefix_cache_queries``/``hits``); the external hits are loaded, not recomputed. Arithmetic: 130,000 ÷
    50 s ≈ 2,600 prefill tokens/s; a 130,000-token turn with 92.8 % + 6.8 % of it cached computes ~0.4 % (~520
    tokens) and loads ~8,800 from RAM: its first token in ~1 s, not ~50 s. 143 tokens/s is ~7 ms a token. One session
    of ~130,000 tokens holds ~59 % of a ~219,500-token GPU pool; the tier holds the other sessions. Nothing waits,
    nothing is preempted, TTFT and TPOT are far inside any interactive target. So no advice: never prefix caching
    toggled (it and the tier are what make the sessions resume), a context cap below the 196K sessions, more
    sequences (the pool holds about one session), a pool turn (59 % used), replicas (one second), a restart (a
    restart empties both tiers: every session then costs its ~50 s again); no stall claimed.

    Chosen where the report is silent, and the stand-ins: Qwen3.8-27B is not in the advisor's tables; Qwen3.5-27B's
    published ``config.json`` (its GDN architecture, round 14's stand-in), ``nvfp4`` weights, fp8 KV, one RTX 5090 at
    0.9, ``max_model_len`` 196,608, ``max_num_seqs`` 2; 140 blocks of 1,568 (219,520 tokens, an input). vLLM 0.28.0
    (August 2026; the issue prints no release) with the 0.33 label set, ``kv_offloading_backend="native"``,
    ``kv_offloading_size="44"``. History: 60 agent turns of ~130,000 prompt tokens at the quoted split, ~800
    generated at 7 ms, TTFT ~1 s. The window: the running turn decodes 143 tokens. SLO: TTFT 10 s, TPOT 0.1 s.
    """
    served = "qwen3.8-27b-nvfp4"
    blocks, block, max_len = 140, 1_568, 196_608
    pool = blocks * block
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        block_size=block,
        max_model_len=max_len,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 6 * 3_600.0,
    )
    _hybrid_pool(eng, pool, max_len, "fp8_e4m3")
    eng.cache_labels.update(kv_offloading_backend="native", kv_offloading_size="44")
    turns, prompt = 61, 130_000
    gpu_hit, ext_hit = 0.928, 0.068
    eng.finish(60, prompt=prompt, output=800, ttft=1.0, tpot=0.007, queue=0.02)
    eng.first_tokens([1.0] * turns)
    eng.prefill(turns * prompt, cached=round(turns * prompt * gpu_hit))
    ext_queries = turns * prompt * (1 - gpu_hit)
    ext_hits = turns * prompt * ext_hit
    eng.decode(60 * 799 + 400, 0.007, steps=60 * 799 + 400, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 83 / blocks
    first = eng.render() + _external_prefix_lines(eng, ext_queries, ext_hits)
    eng.decode(143, 0.007, steps=143, batch=1)  # the window: the running turn decodes at 143 tokens/s
    second = eng.render() + _external_prefix_lines(eng, ext_queries, ext_hits)
    return FieldState(
        id="vllm-0.28-rtx5090-qwen38-27b-196k-cpu-kv-tier-44gb-sessions-resume-no-advice",
        source="https://github.com/MirkoCovizzi/ninfer-rtx5090-mobile/issues/3",
        engine_version="vLLM 0.28.0 (0.33 label set), hybrid GDN, native CPU KV offload 44 GB",
        deployment={
            "name": "qwen38-27b-rtx5090-196k",
            "engine": "vllm",
            "engine_version": "0.28.0",
            "model": QWEN35_27B_CONFIG,
            "served_model": served,
            "gpu": "rtx5090",
            "quantization": "nvfp4",
            "kv_cache_dtype": "fp8_e4m3",
            "language_model_only": True,
            "gpu_memory_utilization": 0.9,
            "max_model_len": max_len,
            "max_num_seqs": 2,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        no_advice=True,
        must_never=[
            ("prefix_caching", None),
            ("max_model_len", "decrease"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. SGLang decode instance of a DSA model on 8× RTX PRO 6000: device-resident KV pins it at 6 of 54 -----------


def sglang_dsa_decode_hisparse_off_pool_pins_6() -> FieldState:
    """sgl-project/sglang#33075 ("[Fix] Allow flashinfer_sparse_mla DSA backend for HiSparse on SM120 FP8 KV",
    merged); the author's measurement (2026-08-02) answering whether HiSparse still pays on SM120: "Same SM120
    hardware (8×RTX PRO 6000, TP=8), same flashinfer_sparse_mla kernel, same 32k-input / 2k-output workload; the only
    difference is --enable-hisparse (top_k=2048, device_buffer_size=4096, host_to_device_ratio=10). D-side steady
    decode throughput: … 8 | 213.3 (rr=6) | 252.9 (rr=8) … 32 | 215.9 (rr=6) | 523.6 (rr=32) … 54 | 214.7 (rr=6) |
    643.6 (rr=54) | 3.00×"; "HiSparse's benefit isn't kernel speed — it's breaking the KV memory wall. Without
    HiSparse the full KV stays resident on device, so the decode instance saturates its KV pool at only
    running-req = 6 (≈87% GPU-token usage). Raising the target batch past 8 just lengthens the queue — actual
    concurrency stays pinned at 6, so baseline throughput flatlines at ~215 tok/s from BS=8 onward."

    Engine facts (SGLang disaggregated decode, ``python/sglang/srt/disaggregation/decode.py``): a decode server
    preallocates each incoming request's KV in its own pool before the prefill side sends it; a request that finds
    no room waits in the prealloc queue, however far below ``--max-running-requests`` the running batch is. An MLA
    latent cache is replicated on every TP rank, so TP does not enlarge it. Arithmetic: 6 × (32,768 + ~1,000 generated
    so far) ≈ 202,600 tokens = 87 % → a pool of ~233,000; at target 54, 48 wait for KV memory; 214.7 ÷ 6 ≈ 36
    tokens/s a stream (~28 ms a step). So the binding limit is the device pool, and the measured fix is moving the KV
    to host (HiSparse, not one of the advisor's dials). Never: more running requests (6 run; the cap is not reached),
    more TP (8 GPUs, the latent cache replicated on each), replicas (one second), a restart (215 tokens/s flow), a
    context cap below the 32K prompts (34,816 with the output); no stall claimed.

    Not asserted: a larger memory fraction (a few per cent more pool would admit at most one more request; the
    thread neither measures nor rejects it).

    Chosen where the report is silent, and the stand-ins: the model is a DSA (sparse-MLA) DeepSeek, not in the
    advisor's tables; DeepSeek-V3 (the same 61-layer MLA, fp8 checkpoint) stands in, fp8 KV, TP 8 on RTX PRO 6000
    Blackwell at ``mem_fraction_static`` 0.94, context 163,840, page size 64 (the HiSparse config's); the pool 233,024
    tokens (an input, 3,641 pages). SGLang 0.5.10 (summer 2026) with the 0.5.x exposition. History: 60 requests
    answered (TTFT ~400 s: the queue, then prefill and transfer), 2,048 tokens at 28 ms. The window: ~215 tokens
    decoded, one answer ends, the head of the prealloc queue takes its slots. SLO: TTFT 60 s, TPOT 0.1 s (a
    benchmark; the thread states none).
    """
    model = "deepseek-ai/DeepSeek-V3"
    pool = 233_024
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=163_840, swa_tokens=0)
    eng.g["page_size"], eng.g["num_pages"] = 64.0, pool / 64

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 6.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 214.7

    eng.finish(60, prompt=32_768, output=2_048, ttft=400.0, tpot=0.028, queue=390.0)
    eng.prompt["true"], eng.generation["true"] = 60 * 32_768.0, 60 * 2_048.0
    eng.itl.observe(0.028, 60 * 2_047 + 6 * 1_000)
    held = 6 * (32_768 + 1_000)
    gauges(held)

    def page(prealloc: float) -> str:
        return eng.render().replace('engine_type="unified"', 'engine_type="decode"') + _decode_queues(
            model, prealloc, 0.0
        )

    first = page(48.0)
    # the window: ~215 tokens decoded; one answer ends (its counters advance at its end); the head of the prealloc
    # queue takes the freed slots (its KV is then transferred in)
    eng.finish(1, prompt=32_768, output=2_048, ttft=400.0, tpot=0.028, queue=390.0)
    eng.prompt["true"] += 32_768.0
    eng.generation["true"] += 2_048.0
    eng.itl.observe(0.028, 215)
    gauges(held + 215 - (32_768 + 2_048) + 32_768)
    second = page(47.0)
    return FieldState(
        id="sglang-2026-dsa-8x-rtx-pro-6000-decode-hisparse-off-pool-pins-6-of-54",
        source="https://github.com/sgl-project/sglang/pull/33075",
        engine_version="SGLang 0.5.10 (summer 2026) PD decode, flashinfer_sparse_mla, HiSparse off (0.5.x exposition)",
        deployment={
            "name": "dsa-decode-8x-rtx-pro-6000",
            "engine": "sglang",
            "engine_version": "0.5.10",
            "model": model,
            "gpu": "rtx-pro-6000-blackwell",
            "tensor_parallel_size": 8,
            "kv_cache_dtype": "fp8_e4m3",
            "mem_fraction_static": 0.94,
            "max_model_len": 163_840,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 6, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(34_816)),
    )


# --- 3. vLLM 0.23, gpt-oss-120b on one A100: interactive traffic beside batch jobs with no batch gateway ---------


def vllm_gpt_oss_120b_interactive_beside_batch_no_gateway() -> FieldState:
    """llm-d/llm-d-batch-gateway#491 ("feat: benchmark for batch-gateway", open), the results posted 2026-09-08:
    "GPU | NVIDIA A100 80GB (CoreWeave)", "GPUs per replica | 1 (TP=1)", "Model | ``openai/gpt-oss-120b``",
    "Quantization | MXFP4", "vLLM version | v0.23.0", "Interactive ISL | 512 tokens (fixed)", "Interactive OSL | 128
    tokens", "Interactive rate | 15 req/s burst, 1 req/s idle", "Batch jobs | 3 jobs × 1000 requests", "Batch ISL |
    512 tokens (fixed)", "Batch OSL | lognormal(mean=500, stdev=400), max 2048", "vLLM max-num-seqs | 1024"; Table 1
    (one replica): "S0 — interactive only (baseline) | 72 ms | 92 ms | 24 ms | 24 ms" and "S1 — no batch gateway |
    278 ms | 597 ms | 53 ms | 66 ms" (TTFT p50, p95, ITL p50, p95). The thread's earlier run (2026-07-08): "vLLM
    queues excess requests internally rather than rejecting them"; the gateway's purpose is "to protect interactive
    traffic by having flow control queue batch requests when the model is saturated".

    Engine facts (vLLM V1): every running sequence joins every decode step; a step's time grows with the batch, so
    the interactive stream's ITL is the step time of a batch that mostly carries batch jobs. The batch gateway holds
    the jobs outside the engine, where no vLLM gauge counts them. Arithmetic: ITL 24 → 53 ms (×2.2) with the batch
    in the step; a step of ~400 sequences at 53 ms is ~7,500 tokens/s. So: never more sequences (more batch jobs per
    step lengthen every interactive token further), never speculative decoding (drafted tokens at a batch of
    hundreds cost more than they save), never replicas (one second), never a restart (7,500 tokens/s flow); no stall
    claimed.

    Not asserted: fewer sequences or a pool turn (the report measures neither; its fix is the gateway).

    Chosen where the report is silent: the pool, 22,000 blocks of 16 (352,000 tokens, an input, not asserted);
    ``gpu_memory_utilization`` 0.9; ``max_model_len`` 8,192. The page, mid-job: ~400 running (the pool holds ~400 of
    the ~1,000-token batch requests), ~600 waiting, the pool at 0.93. History: 2,400 batch requests and 1,200
    interactive answered. The window: ~7,500 tokens decoded, 15 requests end and as many are admitted. vLLM 0.23.0
    with the 0.33 label set. SLO: TTFT 0.5 s, TPOT 0.05 s (the baseline's ITL with a 2× margin).
    """
    model = "openai/gpt-oss-120b"
    blocks = 22_000
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=8_192,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 1_800.0,
    )
    eng.finish(2_400, prompt=512, output=500, ttft=2.0, tpot=0.053, queue=1.7, max_tokens=2_048)
    eng.finish(1_200, prompt=512, output=128, ttft=0.278, tpot=0.053, queue=0.1, max_tokens=128)
    eng.first_tokens([0.278] * 1_200 + [2.0] * 2_800)
    eng.prefill(4_000 * 512)
    generated = 2_400 * 500 + 1_200 * 128 + 400 * 250
    eng.decode(generated, 0.053, steps=generated / 400, batch=400)
    eng.running, eng.waiting, eng.kv_usage = 400.0, 600.0, 0.93
    first = eng.render()
    eng.decode(7_500, 0.053, steps=19, batch=400)
    eng.finish(10, prompt=512, output=500, ttft=2.0, tpot=0.053, queue=1.7, max_tokens=2_048)
    eng.finish(5, prompt=512, output=128, ttft=0.3, tpot=0.053, queue=0.1, max_tokens=128)
    eng.first_tokens([0.3] * 5 + [2.0] * 10)
    eng.prefill(15 * 512)
    return FieldState(
        id="vllm-0.23-gpt-oss-120b-a100-interactive-beside-batch-no-gateway-itl-24-to-53ms",
        source="https://github.com/llm-d/llm-d-batch-gateway/issues/491",
        engine_version="vLLM 0.23.0 (0.33 label set), gpt-oss-120b MXFP4, one A100, no batch gateway",
        deployment={
            "name": "gpt-oss-120b-a100-mixed",
            "engine": "vllm",
            "engine_version": "0.23.0",
            "model": model,
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "max_num_seqs": 1_024,
            "slo": {"ttft_seconds": 0.5, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 400, "requests_waiting": 600},
        must_never=[
            ("max_num_seqs", "increase"),
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_rtx5090_cpu_kv_tier_sessions_resume(),
    sglang_dsa_decode_hisparse_off_pool_pins_6(),
    vllm_gpt_oss_120b_interactive_beside_batch_no_gateway(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
