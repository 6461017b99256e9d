"""Field states, round 56: vLLM V1 of 2025–2026 with long contexts and the pool — a preemption storm on one A10G whose
77,088-token pool holds ~72 of the 256 requests a runner admits (admit fewer), a Qwen3-4B fast lane on one RTX 4090
whose TTFT climbs to 11.8 s at 16 streams while the measured scheduler ablation moves nothing (no scheduler or pool
turn), a deep-context DGX Spark server pinned to ``MAX_NUM_SEQS=1`` whose second request waits out the whole first one
(2 to 4 sequences, not more hardware), and a pool at 94.9 % with ten streams, nothing waiting and nothing preempted
(no advice at all: a high gauge alone is not a fault) — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine`: the 0.11 label set for the 2025 releases 0.9–0.10
(as earlier rounds render them), the 0.33 label set for the 2026 releases, without ``num_requests_waiting_by_reason``
for those before 0.20 (the catalog: that family appears in 0.20). The assertions come from the reports' numbers, the
verdict each thread establishes and engine facts, never from the advisor's output:

* ``vllm-2026-a10g-qwen25-7b-pool-77k-72-running-184-waiting-480-preemptions`` — Tandemn-Labs/tandemn-system#11:
  Qwen2.5-7B-Instruct on one A10G, "KV cache: 77,088 tokens, 100% utilized", "Running: ~72, Waiting: ~184", "480
  preemptions observed in a 5000-request job", "TTFT p50 = 60s"; "actual concurrency the KV cache supports is ~70-80,
  not 256". Must propose admitting fewer (``max_num_seqs`` down to 32–100, or an admission turn), first a turn that
  adds no GPU; never more sequences, a larger step budget, replicas or a restart.
* ``vllm-0.19.1-rtx4090-qwen3-4b-fp8-p16-ttft-11.8s-compute-bound-scheduler-knobs-inert`` — noonghunna/club-3090#697:
  vLLM 0.19.1, ``--quantization fp8 --kv-cache-dtype fp8 --max-model-len 196608 --max-num-seqs 4
  --max-num-batched-tokens 8192``; "tok/s pinned at ~520 while TTFT climbs 0.03s → 3.9s (p8) → 11.8s (p16)"; "a knob
  ablation that rules out the scheduler as the lever", "``max_num_seqs`` / ``max_num_batched_tokens`` did nothing".
  Never any step-budget turn, a pool or KV-dtype turn, replicas, TP or a restart (more sequences is not asserted: the
  ablation that ruled it out is not on the page).
* ``vllm-2026-dgx-spark-max-num-seqs-1-second-request-ttft-50s-equals-first-duration`` —
  MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#7: "``MAX_NUM_SEQS=1``", "a second request's **TTFT equals the entire
  remaining generation time of the first request**" (R1 49.9 s, R2 TTFT 50.46 s), "``vllm:num_requests_waiting`` = 1–2
  while ``running=1``", "seqs=4 costs ~3% KV pool"; "I'd like to suggest defaulting to 2–4". Must propose
  ``max_num_seqs`` up, to 2–4; never fewer sequences, a pool turn, a shorter context, replicas, TP or a restart.
* ``vllm-0.9-l40s-ten-streams-kv-94.9pct-no-waiting-no-preemption-nothing-to-change`` — discuss.vllm.ai "V1 GPU not
  free gpu memory": "Running: 10 reqs, Waiting: 0 reqs, GPU KV cache usage: 94.9%, Prefix cache hit rate: 92.5%";
  the thread's answer: "This is expected behavior: the cache fills up to accommodate active requests". No advice at
  all; never a pool turn, fewer sequences, a shorter context, replicas or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import json
import time
from typing import Any

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, first_turn_adds_no_gpu, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all, _suggests
from tests.states.test_field_round52 import _proposes_any


def _before_020(text: str) -> str:
    """A 0.33-label-set page as a 2026 release before 0.20 serves it: no ``num_requests_waiting_by_reason``."""
    return "".join(line for line in text.splitlines(keepends=True) if "num_requests_waiting_by_reason" not in line)


# --- 1. vLLM (March 2026) on one A10G: a 77,088-token pool, 256 admitted by the runner, 480 preemptions ---------------


def vllm_a10g_preemption_storm_admit_fewer() -> FieldState:
    """Tandemn-Labs/tandemn-system#11 ("max_concurrency estimation causes excessive vLLM preemptions", open,
    2026-03-18): "The runner's ``_estimate_max_concurrency_from_metrics()`` falls back to ``MAX_NUM_SEQS=256`` when the
    Prometheus-based estimate fails"; "On A10G with 77k KV blocks and real workloads (~1000+ token inputs), actual
    concurrency the KV cache supports is ~70-80, not 256"; "With ``max_concurrency=256``, the runner fires 256
    concurrent requests … vLLM accepts them but: Only ~70-80 fit in KV cache at once — 180+ sit in the waiting queue —
    vLLM preempts aggressively to make room for new prefills — **480 preemptions** observed in a 5000-request job on
    A10G — TTFT p50 = 60s (requests stuck waiting) — Throughput degrades due to preemption overhead"; "Model:
    Qwen/Qwen2.5-7B-Instruct — GPU: A10G (g5.xlarge) — KV cache: 77,088 tokens, 100% utilized — Running: ~72, Waiting:
    ~184".

    Engine facts (vLLM V1 ``v1/core/sched/scheduler.py``): the scheduler admits a waiting request when its first chunk's
    blocks are free and fewer than ``max_num_seqs`` run; when a running request cannot get a block for its next token,
    the newest running request is preempted, its blocks freed and its tokens recomputed on resume. Arithmetic: 77,088
    tokens (4,818 blocks of 16) hold 72 requests of ~1,070 tokens (a ~1,000-token prompt and part of its answer): the
    pool, not ``max_num_seqs`` 256, caps the batch; every admission beyond what the pool holds is paid back by a
    preemption and a recompute (480 in 5,000 requests, ~1 in 10). With at most ~70–80 admitted, each request's blocks
    stay its own until it finishes: no preemption, no recompute. So must propose admitting fewer — ``max_num_seqs``
    between 32 and 100 (the thread's 70–80; no fewer than a third of what the pool holds) or an admission-policy turn
    — first a turn that adds no GPU. Must never: more sequences (the pool is full at 72 of 256), a larger step budget
    (more tokens in flight), replicas (one second of history), a restart (tokens flow); no stall claimed.

    Not asserted: a pool turn (fp8 KV or a higher utilization would hold more of the 256, a trade the thread does not
    make); the runner's own concurrency (a client setting, not the engine's).

    Chosen where the report is silent: vLLM of March 2026 (0.17) rendered with the 0.33 label set less
    ``num_requests_waiting_by_reason`` (0.20+); vLLM's defaults (``gpu_memory_utilization`` 0.9, ``max_model_len``
    32,768, ``max_num_seqs`` 256); prompts of 1,000 tokens, answers of 300; the job 2,000 requests in: 2,000 answered
    (TTFT ~60 s, 40 ms a token with 72 streams, ~58 s queued) and 190 preemptions so far. The window: 3 finish, 3 are
    admitted from the queue (3,000 prompt tokens) and one preempted request is re-prefilled (1,150 tokens), one more is
    preempted; 72 streams decode 25 tokens each; 72 running and 184 waiting throughout, the pool 99.5 % → 99.8 %. SLO:
    TTFT 10 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen2.5-7B-Instruct"
    blocks = 4_818
    pool = blocks * 16
    running, waiting = 72.0, 184.0
    ttft, tpot = 60.0, 0.040
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 1_800.0,
    )
    eng.cache_labels.update(enable_prefix_caching="False")
    eng.prefill((2_000 + running) * 1_000 + 190 * 1_150)
    eng.first_tokens([ttft] * int(2_000 + running))
    eng.finish(2_000, prompt=1_000, output=300, ttft=ttft, tpot=tpot, queue=58.0, max_tokens=300)
    generated = 2_000 * 299 + running * 150
    eng.decode(generated, tpot, steps=generated / running, batch=running)
    eng.preempt(190)
    eng.running, eng.waiting, eng.kv_usage = running, waiting, 0.995
    first = _before_020(eng.render())
    eng.finish(3, prompt=1_000, output=300, ttft=ttft, tpot=tpot, queue=58.0, max_tokens=300)
    eng.prefill(3 * 1_000 + 1_150)
    eng.first_tokens([ttft] * 3)
    eng.decode(running * 25, tpot, steps=25, batch=running)
    eng.preempt(1)
    eng.kv_usage = 0.998
    second = _before_020(eng.render())
    return FieldState(
        id="vllm-2026-a10g-qwen25-7b-pool-77k-72-running-184-waiting-480-preemptions",
        source="https://github.com/Tandemn-Labs/tandemn-system/issues/11",
        engine_version="vLLM of March 2026 (0.17; V1, 0.33 label set less waiting_by_reason)",
        deployment={
            "name": "qwen25-7b-a10g-batch-runner",
            "engine": "vllm",
            "engine_version": "0.17.0",
            "model": model,
            "gpu": "a10g",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "enable_prefix_caching": False,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 72, "requests_waiting": 184, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("max_num_seqs", "increase"),
            ("max_num_batched_tokens", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(
            first_turn_adds_no_gpu,
            _proposes_any(("max_num_seqs", "decrease"), ("admission_policy", None)),
            _suggests("max_num_seqs", "decrease", at_least=32, at_most=100),
            no_stall_claimed,
        ),
    )


# --- 2. vLLM 0.19.1 on one RTX 4090: Qwen3-4B fp8 at 16 streams, 520 tokens/s flat, TTFT 11.8 s ----------------------

QWEN3_4B_INSTRUCT_2507_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2560,
    "initializer_range": 0.02,
    "intermediate_size": 9728,
    "max_position_embeddings": 262144,
    "max_window_layers": 36,
    "model_type": "qwen3",
    "num_attention_heads": 32,
    "num_hidden_layers": 36,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 5000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
"""Qwen/Qwen3-4B-Instruct-2507's ``config.json`` as published (36 layers, 8 KV heads of 128: 144 KiB of KV a token in
bf16, 72 KiB in fp8; 262,144 positions); the advisor's tables hold no Qwen3-4B, so it is given as a config path."""


def vllm_rtx4090_qwen3_4b_compute_bound_knobs_inert() -> FieldState:
    """noonghunna/club-3090#697 ("[bench] RTX 4090 AIO / Qwen3-4B-Instruct-2507 fp8 / vLLM fast lane", closed,
    2026-07-13): "GPU: NVIDIA GeForce RTX 4090, 24 GiB"; "Engine: vLLM Docker image ``vllm/vllm-openai:v0.19.1``";
    "Model: ``Qwen/Qwen3-4B-Instruct-2507``"; "Quantization: ``--quantization fp8``, ``--kv-cache-dtype fp8``";
    "Context: ``--max-model-len 196608``"; "Runtime flags: ``--tensor-parallel-size 1``, ``--gpu-memory-utilization
    0.92``, ``--max-num-seqs 4``, ``--max-num-batched-tokens 8192``, prefix caching + chunked prefill enabled". The
    maintainer's reading of the sweep: "a clean p1→p16 curve *and* a knob ablation that rules out the scheduler as the
    lever"; "Why p1→p4 scales almost linearly (137 → 520)"; "Why it plateaus flat at ~520 from p4 on: you crossed from
    bandwidth-bound into **compute-bound** … tok/s pinned at ~520 while TTFT climbs 0.03s → 3.9s (p8) → 11.8s (p16). The
    extra requests are waiting, not computing"; "**Which is why ``max_num_seqs`` / ``max_num_batched_tokens`` did
    nothing** — those are *admission* knobs … Past the saturation point they change how the fixed ~520 tok/s is divided
    among more streams (lower per-stream rate, higher TTFT), not the total. And ``32768`` going slightly *worse*".

    Engine facts and arithmetic: four streams already take the 4090's ~520 tokens/s (130 a stream, 7.7 ms a token); at
    p16 twelve requests wait for one of the four sequences. The mean TTFT of a closed loop of 16 over 4 slots is 1.5
    answers' time: 11.8 s is 1.5 × ~7.8 s, answers of ~1,000 tokens at 130 tokens/s — and p8's 0.5 × 7.8 = 3.9 s, the
    thread's number. Admitting all 16 divides the same ~520 tokens/s by 16: 32.5 tokens/s a stream, 31 ms a token
    against a 20 ms objective (what a "fast lane" is for); a larger step budget adds only prefill tokens to steps that
    are compute-bound already (measured slightly worse at 32,768). The pool is not the limit: ~204,000 tokens of fp8 KV
    hold four ~1,100-token streams in 2 %. So, by the thread, never: more sequences, any step-budget turn, a pool or
    KV-dtype turn (2 % used; the cache is fp8 already), more TP or replicas (one GPU; one second of history), a restart
    (tokens flow); no stall claimed.

    Not asserted: more sequences. The thread's ablation is not on the page: the window shows four streams at 7.7 ms a
    token (within the roofline's reach for 4 GB of fp8 weights on a 4090) with twelve waiting and the pool 2 % used,
    which is what a binding cap looks like; nothing the engine serves says the throughput is flat beyond four (the
    SLO's 20 ms is this state's choice, not the report's). Nor the lever that would move the ceiling (more GPUs: a
    count needs more than one second), speculation.

    Chosen where the report is silent: the pool 12,750 blocks of 16 (204,000 tokens: 0.92 × ~23.5 GiB less ~5 GiB of
    weights and ~2 GiB of activations, at 72 KiB a token); the sweep's prompts ~100 tokens, answers ~1,000; history:
    the p1 … p8 cells and the p16 cell's first answers (64 answered; TTFTs 0.03 s at p1–p4, 0–7.8 s at p8, 0–23 s at
    p16). The moment: the p16 cell in steady state, 4 running, 12 waiting; the window: one answer finishes, one waiting
    request is admitted (TTFT 23.4 s: it waited three answers), the client sends the next; 4 streams decode 130 tokens
    each. vLLM 0.19.1 rendered with the 0.33 label set less ``num_requests_waiting_by_reason`` (0.20+). SLO: TTFT 5 s,
    TPOT 20 ms.
    """
    model_dir = "Qwen3-4B-Instruct-2507"
    served = "fast"
    blocks, itl = 12_750, 1 / 130
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        max_model_len=196_608,
        gpu_memory_utilization=0.92,
        version="0.33",
        started=time.time() - 1_200.0,
    )
    eng.cache_labels.update(cache_dtype="fp8")
    # p1..p8 cells and the p16 cell's first answers: 64 answered
    ttfts = [0.03] * 28 + [0.0, 0.0, 0.0, 0.0, 3.9, 3.9, 3.9, 3.9, 7.8, 7.8] * 2 + [0.1] * 4 + [7.8] * 4 + [15.6] * 4
    ttfts += [23.4] * 4
    eng.prefill((64 + 4) * 100, cached=(64 + 4) * 60)
    eng.first_tokens(ttfts + [23.4] * 4)
    eng.finish(64, prompt=100, output=1_000, ttft=8.0, tpot=itl, queue=7.9, max_tokens=1_000)
    generated = 64 * 999 + 4 * 500
    eng.decode(generated, itl, steps=generated / 4, batch=4)
    eng.running, eng.waiting, eng.kv_usage = 4.0, 12.0, 4 * 600 / (blocks * 16)
    first = _before_020(eng.render())
    eng.finish(1, prompt=100, output=1_000, ttft=23.4, tpot=itl, queue=23.3, max_tokens=1_000)
    eng.prefill(100, cached=60)
    eng.first_tokens([23.4])
    eng.decode(4 * 130, itl, steps=130, batch=4)
    eng.kv_usage = (3 * 730 + 101) / (blocks * 16)
    second = _before_020(eng.render())
    return FieldState(
        id="vllm-0.19.1-rtx4090-qwen3-4b-fp8-p16-ttft-11.8s-compute-bound-scheduler-knobs-inert",
        source="https://github.com/noonghunna/club-3090/issues/697",
        engine_version="vLLM 0.19.1 (V1; 0.33 label set less waiting_by_reason), --max-num-seqs 4",
        deployment={
            "name": "qwen3-4b-fp8-rtx4090-fast-lane",
            "engine": "vllm",
            "engine_version": "0.19.1",
            "model": f"{model_dir}/config.json",
            "served_model": served,
            "quantization": "fp8",
            "kv_cache_dtype": "fp8",
            "gpu": "rtx4090",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.92,
            "max_model_len": 196_608,
            "max_num_seqs": 4,
            "max_num_batched_tokens": 8_192,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.02, "target_ratio": 0.9},
        },
        files={f"{model_dir}/config.json": json.dumps(QWEN3_4B_INSTRUCT_2507_CONFIG, indent=2)},
        scrapes=[(first, second)],
        snapshot={"requests_running": 4, "requests_waiting": 12, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            ("max_num_batched_tokens", None),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. vLLM (August 2026) on one DGX Spark: MAX_NUM_SEQS=1, the second request's TTFT is the first's whole answer ----


def vllm_dgx_spark_one_seq_serializes() -> FieldState:
    """MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark#7 ("MAX_NUM_SEQS=1 default: second concurrent request TTFT = full
    duration of the first (measured A/B, seqs=4 costs ~3% KV pool)", open, 2026-08-23): "The stock ``start.sh`` launches
    vLLM with ``MAX_NUM_SEQS=1`` ("single-request deep-context server"). Under any concurrent load this serializes
    completely: a second request's **TTFT equals the entire remaining generation time of the first request** —
    minutes, given the server-side defaults ``thinking=true`` / ``reasoning_effort=max`` (single-stream decode is ~8–11
    tok/s …)"; "Since the recipe already pre-sizes CUDA graphs for 4 slots … I'd like to suggest defaulting to 2–4";
    "Measured on a stock box (DGX Spark GB10, pinned image, ``KV_RECORD=stock432``, util 0.94)": "direct ``:8888`` |
    49.9 s | **50.46 s** (first token exactly at R1 finish)"; "``vllm:num_requests_waiting`` = 1–2 while ``running=1``
    → strict serialization, no batching"; "Lifetime TTFT histogram after ~2 days of real use: **54/1250 requests >20
    s, 38 >40 s, 8 >160 s**".

    Engine facts and arithmetic: with ``max_num_seqs`` 1 the scheduler runs one request and admits the next only when
    it finishes, whatever the pool holds; one stream decodes at ~10 tokens/s bound by reading the weights, and a second
    stream shares each weight read (a batch of 2–4 costs little more per step), so 2–4 sequences give each of 2–4
    users a stream where one had none; each more slot costs ~3 % of the pool (the thread's measurement, and the CUDA
    graphs are sized for 4 slots already). So must propose ``max_num_seqs`` up, to between 2 and 4 (the thread's
    range: beyond 4 the decode graphs are not captured). Must never: fewer sequences (1 is the floor), a pool turn or a
    shorter context (the pool is mostly free: one deep-context request holds it), more TP or replicas (one box; one
    second of history), a restart (tokens flow); no stall claimed.

    Chosen where the report is silent, and the stand-ins: DeepSeek-V4-Flash is not in the advisor's tables, nor is the
    GB10: ``openai/gpt-oss-120b`` (a MoE the tables hold, native MXFP4, ~61 GiB of weights: it fits one GB10's ~119 GiB
    of unified memory as the report's model does) stands in, with ``gpu_memory_gib`` 119; ``max_model_len`` 131,072
    (the stand-in's context); the pool 25,000 blocks of 16 (400,000 tokens: an input), one running request at ~30,000
    tokens of context (7.5 %); answers ~600 tokens at ~10 tokens/s (decode 100 ms a token). History: 1,250 answered
    over two days, TTFTs as the thread's histogram (1,196 at ~1 s, 16 at 30 s, 30 at 60 s, 8 at 200 s). The window:
    R1 decodes 10 tokens; R2 and R3 wait. vLLM of August 2026 (0.27) rendered with the 0.33 label set. SLO: TTFT 5 s,
    TPOT 0.2 s.
    """
    model = "openai/gpt-oss-120b"
    blocks, tpot = 25_000, 0.1
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=131_072,
        gpu_memory_utilization=0.94,
        version="0.33",
        started=time.time() - 2 * 86_400.0,
    )
    eng.prefill(1_251 * 8_000, cached=1_251 * 5_000)
    eng.first_tokens([1.0] * 1_196 + [30.0] * 16 + [60.0] * 30 + [200.0] * 8 + [1.2])
    eng.finish(1_250, prompt=8_000, output=600, ttft=4.0, tpot=tpot, queue=3.0, max_tokens=32_768)
    generated = 1_250 * 599 + 300
    eng.decode(generated, tpot, steps=generated, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 2.0, 30_000 / (blocks * 16)
    first = eng.render()
    eng.decode(10, tpot, steps=10, batch=1)
    eng.kv_usage = 30_010 / (blocks * 16)
    second = eng.render()
    return FieldState(
        id="vllm-2026-dgx-spark-max-num-seqs-1-second-request-ttft-50s-equals-first-duration",
        source="https://github.com/MiaAI-Lab/DeepSeek-v4-Flash-One-DGX-Spark/issues/7",
        engine_version="vLLM of August 2026 (0.27; V1, 0.33 label set), MAX_NUM_SEQS=1",
        deployment={
            "name": "deep-context-dgx-spark",
            "engine": "vllm",
            "engine_version": "0.27.0",
            "model": model,
            "gpu_memory_gib": 119.0,
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.94,
            "max_model_len": 131_072,
            "max_num_seqs": 1,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.2, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 2, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            ("max_num_seqs", "decrease"),
            *POOL_TURNS,
            ("max_model_len", "decrease"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(
            _proposes_any(("max_num_seqs", "increase")),
            _suggests("max_num_seqs", "increase", at_least=2, at_most=4),
            no_stall_claimed,
        ),
    )


# --- 4. vLLM V1 (2025) on one L40S: ten streams, the pool at 94.9 %, nothing waiting, nothing preempted ---------------


def vllm_l40s_high_gauge_healthy() -> FieldState:
    """discuss.vllm.ai "V1 GPU not free gpu memory" (2025): "On V1, a request was sent to the GPU, but its memory usage
    did not decrease and it kept increasing rapidly", with the engine's log: "Avg prompt throughput: 1699.8 tokens/s,
    Avg generation throughput: 404.1 tokens/s, Running: 9 reqs, Waiting: 0 reqs, GPU KV cache usage: 70.0%, Prefix
    cache hit rate: 90.2%"; "Avg prompt throughput: 2297.1 tokens/s, Avg generation throughput: 422.2 tokens/s,
    Running: 10 reqs, Waiting: 0 reqs, GPU KV cache usage: 94.9%, Prefix cache hit rate: 92.5%". The answer: "vLLM V1
    allocates most available GPU memory for the KV cache, and GPU KV cache usage increases as more requests are
    processed or as context length grows. This is expected behavior: the cache fills up to accommodate active
    requests, and memory usage will not decrease until requests complete and cache blocks are freed."

    Engine facts (vLLM V1 ``v1/core/block_pool.py``): ``kv_cache_usage_perc`` is 1 − free blocks / all blocks; blocks
    of finished requests go back to the free queue (cached ones stay reusable and count as free), so 94.9 % is what the
    ten running conversations hold. Arithmetic: ten streams share 422 tokens/s (42 a stream, 24 ms a token); nothing
    waits (every arrival is admitted), nothing is preempted, 92.5 % of prompt tokens are served from the prefix cache.
    A full gauge with an empty queue and no preemption is a pool in use, not a fault: the thread's verdict is that
    nothing is wrong. So no advice at all; never a pool turn, fewer sequences, a shorter context, replicas (one second)
    or a restart (tokens flow); no stall claimed.

    Chosen where the report is silent: the model and GPU are not named; Llama-3.1-8B-Instruct (in the advisor's tables,
    128 KiB of KV a token) on one L40S at vLLM's defaults (``gpu_memory_utilization`` 0.9: ~23.5 GiB of KV, 12,000
    blocks of 16, 192,000 tokens), ``max_model_len`` 32,768, ``max_num_seqs`` 256; the conversations ~18,200 tokens
    each (10 of them: 94.9 %), a turn's prompt 92.5 % cached, answers ~3,000 tokens (long replies: 2,297 prompt
    tokens/s over ten streams is one turn in ~8 s). History: 400 turns answered (TTFT 0.4 s, TPOT 24 ms). The window:
    one turn finishes and its conversation's next turn is admitted (18,200 prompt tokens, 16,835 cached), ten streams
    decode 42 tokens each. vLLM 0.9 (V1, ``Engine 000`` log lines) rendered with the 0.11 label set. SLO: TTFT 5 s,
    TPOT 0.1 s (both met).
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks, tpot = 12_000, 0.024
    pool = blocks * 16
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.11",
        started=time.time() - 7_200.0,
    )
    eng.prefill(410 * 18_200, cached=410 * 16_835)
    eng.first_tokens([0.4] * 410)
    eng.finish(400, prompt=15_000, output=3_000, ttft=0.4, tpot=tpot, queue=0.01, max_tokens=8_192)
    generated = 400 * 2_999 + 10 * 1_500
    eng.decode(generated, tpot, steps=generated / 10, batch=10)
    eng.running, eng.waiting, eng.kv_usage = 10.0, 0.0, 0.949
    first = eng.render()
    eng.finish(1, prompt=18_200, output=3_000, ttft=0.4, tpot=tpot, queue=0.01, max_tokens=8_192)
    eng.prefill(18_200, cached=16_835)
    eng.first_tokens([0.4])
    eng.decode(10 * 42, tpot, steps=42, batch=10)
    eng.kv_usage = 0.947
    second = eng.render()
    return FieldState(
        id="vllm-0.9-l40s-ten-streams-kv-94.9pct-no-waiting-no-preemption-nothing-to-change",
        source="https://discuss.vllm.ai/t/v1-gpu-not-free-gpu-memory/1863",
        engine_version="vLLM 0.9 (V1; 0.11 label set)",
        deployment={
            "name": "llama31-8b-l40s-chat",
            "engine": "vllm",
            "engine_version": "0.9.2",
            "model": model,
            "gpu": "l40s",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "enable_prefix_caching": True,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 10, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        no_advice=True,
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", "decrease"),
            ("max_model_len", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(32_768)),
    )


STATES = [
    vllm_a10g_preemption_storm_admit_fewer(),
    vllm_rtx4090_qwen3_4b_compute_bound_knobs_inert(),
    vllm_dgx_spark_one_seq_serializes(),
    vllm_l40s_high_gauge_healthy(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
