"""Field states, round 52: where the right answer is restraint or one specific, non-obvious dial on vLLM V1 — a
preemption storm on a GB200 whose pool holds ~85 of the 128 requests admitted (admit fewer, not more GPUs), a
16,000-token-prompt benchmark on one A100 whose queue waits for prefill compute beside a pool at 28 % (no pool turn,
no more sequences, no larger chunk), a p99 inter-token tail on 4 × GB200 that the chunk size measurably does not
bound, and a data-parallel server one of whose engines is wedged forever by a prompt that fits ``max_model_len`` but
not the usable pool (the context cap, to the pool less its null block) — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine` (V1's ``PrometheusStatLogger`` families: the 0.11
label set for the 2025 releases 0.9–0.10 — as earlier rounds render them — and the 0.33 label set, with
``num_requests_waiting_by_reason`` and ``kv_cache_size_tokens``, for the 2026 releases), several DP engines on one
page through :func:`tests.states.test_field_pools.vllm_dp_text`. The assertions come from the reports' numbers, the
verdict each thread establishes and engine facts, never from the advisor's output:

* ``vllm-2026-gb200-qwen25-7b-pool-299k-128-admitted-1065-preemptions`` — vllm#44594: Qwen2.5-7B-Instruct on one
  GB200, "KV cache: 16 GiB → 299,584 tokens (near-critical: ~1.5× mean demand)", ``--max-num-seqs 256``,
  ``--max-concurrency 128``, input ~1000 / output ~5000: "preempt 1065"; a 2–5 % admission watermark cut it to
  400/187 and raised output 11,582 → 12,167 tokens/s. Must propose admitting fewer (or a no-GPU pool turn), first
  a turn that adds no GPU; never more sequences, replicas, a utilization turn (inert under
  ``--kv-cache-memory-bytes``) or a restart.
* ``vllm-0.9.1-a100-qwen3-14b-awq-16k-prompts-queue-waits-for-prefill-pool-28pct`` — vllm#20469: one A100 80 GB,
  Qwen3-14B-AWQ, ``--max-model-len 16384 --max-num-seq 30``, 16,000-token prompts: TTFT ~3,345 ms at concurrency 1,
  "over 34 seconds at concurrency=25"; "vLLM reports a supported max concurrency of 26". Prefill compute (~4,800
  tokens/s) is the ceiling: never a pool turn, more sequences, a larger chunk, speculation, replicas or a restart.
* ``vllm-0.28-gb200-tp4-p99-itl-337ms-chunk-size-does-not-bound-it`` — vllm#56975: "p99 ITL is 199 / 337 / 342 ms at
  c = 32 / 64 / 128"; "decode-only steps are 14.1 ms flat"; "**Chunk size does not bound it.**"; the fix is
  ``--max-cudagraph-capture-size`` (no advisor dial); SGLang on the same four GPUs holds 13–20 ms. Never a smaller
  chunk, fewer sequences, more TP, a pool turn, replicas or a restart.
* ``vllm-0.22-dp4-engine-wedged-prompt-above-usable-pool-98304-below-max-model-len-106496`` — RBLN-SW/vllm-rbln#957:
  "The usable KV cache pool is ``(num_blocks - 1) * block_size`` tokens"; ``--num-gpu-blocks-override 13
  --block-size 8192 --max-model-len 106496 --max-num-seqs 2``: a prompt in "(98,304, 106,496)" is "never scheduled";
  "``vllm:num_requests_waiting`` at 1 for reason ``capacity`` and ``vllm:kv_cache_usage_perc`` at ``0.0``". Must
  propose the context cap at 90,000–98,304 tokens; never a pool turn (the override fixes the block count), more
  sequences, a load-balancer turn, replicas.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from tests.states import VLLMEngine
from tests.states.field import Advice, FieldState, brief, matching, round_tests
from tests.states.test_field_pools import vllm_dp_text
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, first_turn_adds_no_gpu, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all, _suggests

Check = Callable[[dict[str, Any]], None]


def _proposes_any(*advice: Advice) -> Check:
    """At least one of ``advice`` is proposed (a recommendation or one of its alternatives)."""

    def check(result: dict[str, Any]) -> None:
        recs = result.get("recommendations") or []
        assert any(matching(recs, a) for a in advice), f"none of {advice} proposed; got {brief(recs)}"

    return check


# --- 1. vLLM (June 2026) on one GB200: a 299,584-token pool, 128 admitted, 1,065 preemptions ----------------------


def vllm_gb200_preemption_storm_admit_fewer() -> FieldState:
    """vllm-project/vllm#44594 ("[Core] Add kvcache watermark to reduce preemptions", merged, 2026-06-05):
    "Configurable percentage of total kvcache blocks to reserve as buffer when allocating new request blocks";
    "**Model / HW:** Qwen/Qwen2.5-7B-Instruct, TP=1, 1× NVIDIA GB200 — **KV cache:** 16 GiB → 299,584 tokens
    (near-critical: ~1.5× mean demand), prefix caching off — **Engine:** ``--max-model-len 8192``, ``--max-num-seqs
    256``, chunked prefill on — **Workload:** random dataset, input ~1000 / output ~5000 (``--random-range-ratio
    0.2``), ``--ignore-eos``, 450 prompts, ``--max-concurrency 128`` (saturated). Long output ⇒ preempted requests
    re-prefill ~3500 tokens on resume." Results: "watermark off | preempt 1065 | out tok/s 11582 | req/s 2.306 | TTFT
    p50 6.56 | TTFT p99 25.51 | ITL p99 40.62 | E2EL p50 51.6"; "0.02 | 400 | 12134 | … ITL p99 18.80"; "0.05 | 187 |
    12167 | … 17.70".

    Engine facts (vLLM V1 ``scheduler.py``): the scheduler admits a waiting request whenever its prompt's blocks fit
    now and ``max_num_seqs`` allows; the running requests' future decode blocks are not reserved, so when the pool
    runs out the newest running request is preempted (recompute: its KV is freed and re-prefilled on resume).
    ``--kv-cache-memory-bytes`` sizes the pool directly and makes ``gpu_memory_utilization`` inert for it.
    Arithmetic: 28 layers × 2 × 4 KV heads × 128 × 2 B = 56 KiB a token; 16 GiB ÷ 56 KiB = 299,593 → 18,724 blocks of
    16 = 299,584 tokens (the PR's figure). A request holds ~1,000 + 2,500 = ~3,500 tokens at mid-answer: 128 in
    flight want ~448,000 (1.5× the pool, the PR's "~1.5× mean demand"); ~85 fit, ~43 wait or were preempted; 1,065
    preemptions over 450 ÷ 2.306 = 195 s is ~5.5 a second, each re-prefilling ~3,500 tokens. The thread's verdict:
    holding back admission (a 2–5 % reserve) cut preemptions 1,065 → 400/187, raised output 11,582 → 12,134/12,167
    tokens/s and cut ITL p99 40.6 → 18.8/17.7 ms. So must propose admitting fewer than the 128 (``max_num_seqs``
    decrease — suggesting 40–120: below the 128 in flight, not below the ~40 that would leave half the pool idle —
    or an admission policy), or a pool that costs no GPU (``kv_cache_memory_bytes`` increase, fp8 KV: the pin is 16
    GiB of a 186 GB card); the first turn adds no GPU; must never: more sequences (the 256 cap does not bind: 128 are
    in flight), a ``gpu_memory_utilization`` increase (inert while ``--kv-cache-memory-bytes`` sizes the pool),
    replicas (one second; and one GPU's admission, not its count, preempts), a restart (11,582 tokens/s flow); no
    stall claimed.

    Chosen where the report is silent: the moment is 120 s into the run — 160 answered, 85 running (mean ~3,500
    tokens: 99 % of the pool), 43 waiting, 655 preemptions so far; the window: 11,582 tokens decode in 85-wide
    steps, 2 finish, 2 are admitted (1,000-token prompts), 6 are preempted and their ~3,500 tokens re-prefilled —
    V1 counts a request's prompt tokens once, at its first token (``IterationStats.update_from_output``), so the
    re-prefill of resumed requests is not in ``prompt_tokens_total``, and with prefix caching off no prefix-cache
    query is counted. vLLM main of June 2026 (0.23) rendered with the 0.33 label set. SLO: TTFT 10 s, TPOT 0.05 s.
    """
    model = "Qwen/Qwen2.5-7B-Instruct"
    blocks = 18_724
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=8_192,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 600.0,
    )
    eng.cache_labels.update(enable_prefix_caching="False", kv_cache_memory_bytes=str(16 * 2**30))
    itl = 85 / 11_582.0
    eng.counters["vllm:prompt_tokens"] += 245 * 1_000
    eng.first_tokens([6.5] * 190 + [12.0] * 40 + [25.0] * 15)
    eng.finish(160, prompt=1_000, output=5_000, ttft=6.56, tpot=0.0085, queue=6.0, reason="length", max_tokens=5_000)
    eng.decode(160 * 4_999 + 85 * 2_500, itl, steps=(160 * 4_999 + 85 * 2_500) / 85, batch=85)
    eng.preempt(655)
    eng.running, eng.waiting, eng.kv_usage = 85.0, 43.0, 0.99
    first = eng.render()
    eng.decode(11_582, itl, steps=11_582 / 85, batch=85)
    eng.finish(2, prompt=1_000, output=5_000, ttft=6.56, tpot=0.0085, queue=6.0, reason="length", max_tokens=5_000)
    eng.counters["vllm:prompt_tokens"] += 2 * 1_000
    eng.first_tokens([6.6, 6.8])
    eng.preempt(6)
    second = eng.render()
    return FieldState(
        id="vllm-2026-gb200-qwen25-7b-pool-299k-128-admitted-1065-preemptions",
        source="https://github.com/vllm-project/vllm/pull/44594",
        engine_version="vLLM main of June 2026 (0.23; V1, 0.33 label set)",
        deployment={
            "name": "qwen25-7b-gb200-kv16g",
            "engine": "vllm",
            "engine_version": "0.23.0",
            "model": model,
            "gpu": "gb200",
            "tensor_parallel_size": 1,
            "kv_cache_memory_bytes": 16 * 2**30,
            "enable_prefix_caching": False,
            "max_model_len": 8_192,
            "max_num_seqs": 256,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 85, "requests_waiting": 43, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            ("max_num_seqs", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(
            first_turn_adds_no_gpu,
            _proposes_any(
                ("max_num_seqs", "decrease"),
                ("admission_policy", None),
                ("kv_cache_memory_bytes", "increase"),
                ("kv_cache_dtype", None),
            ),
            _suggests("max_num_seqs", "decrease", at_least=40, at_most=120),
            no_stall_claimed,
        ),
    )


# --- 2. vLLM 0.9.1 on one A100 80 GB: Qwen3-14B-AWQ, 16,000-token prompts, the queue waits for prefill ------------

QWEN3_14B_AWQ_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 5120,
    "initializer_range": 0.02,
    "intermediate_size": 17408,
    "max_position_embeddings": 40960,
    "max_window_layers": 40,
    "model_type": "qwen3",
    "num_attention_heads": 40,
    "num_hidden_layers": 40,
    "num_key_value_heads": 8,
    "quantization_config": {"bits": 4, "group_size": 128, "quant_method": "awq", "version": "gemm", "zero_point": True},
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "float16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
"""Qwen/Qwen3-14B-AWQ's ``config.json`` as published (40 layers, 8 KV heads of 128: 160 KiB of KV a token; 4-bit AWQ
weights, group 128); the advisor's tables hold no Qwen3-14B, so it is given as a config path."""


def vllm_a100_qwen3_14b_awq_16k_prompts_prefill_bound() -> FieldState:
    """vllm-project/vllm#20469 ("[Performance]: Severe performance drop on 1x A100 80GB with Qwen3-14B-AWQ at >1
    concurrency (v0.9.1)", closed as stale, July 2025): "We observed a significant drop in output tokens per second
    when serving Qwen/Qwen3-14B-AWQ on a single A100 80GB GPU using vLLM v0.9.1 with --max-model-len 16384. At
    concurrency=1, the model achieves ~52 output tokens per second. However, this drops sharply to ~12 at
    concurrency=5 and ~3 at concurrency=25 … Time-To-First-Token (TTFT) is already high at concurrency=1 (~3345 ms)
    and increases substantially with concurrency, reaching over 34 seconds at concurrency=25. In contrast, the 2x
    A100 setup maintains TTFT around ~100 ms across all levels. vLLM reports a supported max concurrency of 26 for
    this configuration, so we expected it to handle at least 5 concurrent requests without such severe degradation";
    ``vllm serve Qwen/Qwen3-14B-AWQ --gpu-memory-utilization 0.95 --max-model-len 16384 --tensor-parallel-size 1
    --enforce-eager --guided-decoding-backend guidance --max-num-seq 30``; ``benchmark_serving.py … --num-prompts 30
    --request-rate 1 --random-input-len 16000 --random-output-len 200``; at concurrency 1: "Mean TTFT (ms): 3345.37",
    "Mean TPOT (ms): 20.63".

    Engine facts (vLLM V1, 0.9): chunked prefill is always on; ``EngineArgs`` gives an A100 (device-name check,
    whatever its memory) the small API-server budget, 2,048 batched tokens a step, where other ≥ 70 GiB GPUs get
    8,192; the scheduler puts the running requests' decode tokens in each step first and fills the rest of the budget
    with the oldest waiting prompt's next chunk, so a prompt waits in the queue until the one ahead has been
    prefilled, and while any prompt is prefilling every decode step is a ~2,048-token step. Arithmetic: at
    concurrency 1, 16,000 tokens in 3.345 s is ~4,780 prefill tokens/s — ~8 chunks of ~0.42 s; one A100 prefills
    one such request every ~3.4 s (~0.3 a second) whatever the batch, while the benchmark offers 1 a second (30
    prompts at ``--request-rate 1``): the n-th waits ~2.4 n s more, and the 25th's TTFT is in the report's "over 34
    seconds"; the streams decode at one token a ~0.42-s chunk step (~2.4 tokens/s: the report's "~3"). The pool is
    not the limit: 26 requests of 16,384 tokens fit (the startup line), ~427,000 tokens (0.95 × 80 GB less ~9.5 GiB
    of 4-bit weights, at 160 KiB a token); 25 s into the run 7 answers decode and 1 prompt prefills — 28 % of it —
    while 17 wait for the prefill. The 2 × A100 figure (TTFT ~100 ms for a 16,000-token prompt) is not a prefill
    rate (two A100s cannot prefill 160,000 tokens/s; cached prompts can) and is not used. So must never: a pool turn
    (28 % used; the weights are already 4-bit), more sequences (30 allowed, 25 in flight: the cap does not bind), a
    larger batched-token budget (a 2,048-token step is already compute-bound; a larger one lengthens every decode
    step by as much, and vLLM keeps the A100 at 2,048 on purpose), speculative decoding (decode is not what is
    slow: every step is a prefill step), replicas (one second), a restart (it prefills); no stall claimed; no context
    cap below the 16,200 tokens a request needs.

    Not asserted: a smaller budget (it trades TTFT for TPOT: the thread measures neither), CUDA graphs
    (``--enforce-eager`` costs decode, not prefill, time), more GPUs (the real ceiling, but a count needs more than a
    second).

    Chosen where the report is silent: the pool 26,700 blocks of 16 (427,200 tokens: 26.07 × 16,384); history: the
    concurrency-1 run (30 answered, TTFT 3.345 s, TPOT 20.6 ms), then 25 s into the concurrency-25 run — 25 arrived,
    7 prefilled (TTFTs 3.4 … 17.8 s), the 8th prefilling. The window: the 8th's prefill ends (TTFT 20.2 s), the 9th
    starts, 7 streams decode ~2.4 tokens each (V1 counts a prompt's tokens at its first token, its prefix-cache
    query when it is first scheduled). vLLM 0.9.1 rendered with the 0.11 label set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model_dir = "Qwen3-14B-AWQ"
    served = "Qwen/Qwen3-14B-AWQ"
    blocks, step = 26_700, 0.42
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        max_model_len=16_384,
        gpu_memory_utilization=0.95,
        version="0.11",
        started=time.time() - 900.0,
    )
    eng.cache_labels.update(enable_prefix_caching="True")
    # the concurrency-1 run: 30 answered
    eng.prefill(30 * 16_000)
    eng.first_tokens([3.345] * 30)
    eng.finish(30, prompt=16_000, output=200, ttft=3.345, tpot=0.0206, queue=0.01, reason="length", max_tokens=200)
    eng.decode(30 * 199, 0.0206, steps=30 * 199, batch=1)
    # the concurrency-25 run, 25 s in: 7 prefilled and decoding, the 8th half-way through its prefill
    eng.prefill(7 * 16_000)
    eng.counters["vllm:prefix_cache_queries"] += 16_000  # the 8th, scheduled: queried, not yet counted as prompt
    eng.first_tokens([3.4, 5.8, 8.2, 10.6, 13.0, 15.4, 17.8])
    eng.decode(7 * 20, step, steps=60, batch=2_048)
    eng.running, eng.waiting, eng.kv_usage = 8.0, 17.0, (7 * 16_016 + 8_000) / (blocks * 16)
    first = eng.render()
    eng.counters["vllm:prompt_tokens"] += 16_000  # the 8th's first token
    eng.counters["vllm:prefix_cache_queries"] += 16_000  # the 9th is scheduled
    eng.first_tokens([20.2])
    eng.decode(7 * 2.4, step, steps=2.4, batch=2_048)
    eng.running, eng.waiting, eng.kv_usage = 9.0, 16.0, (8 * 16_016 + 1_900) / (blocks * 16)
    second = eng.render()
    return FieldState(
        id="vllm-0.9.1-a100-qwen3-14b-awq-16k-prompts-queue-waits-for-prefill-pool-28pct",
        source="https://github.com/vllm-project/vllm/issues/20469",
        engine_version="vLLM 0.9.1 (V1; 0.11 label set)",
        deployment={
            "name": "qwen3-14b-awq-a100",
            "engine": "vllm",
            "engine_version": "0.9.1",
            "model": f"{model_dir}/config.json",
            "served_model": served,
            "quantization": "awq",
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.95,
            "enforce_eager": True,
            "max_model_len": 16_384,
            "max_num_seqs": 30,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        files={f"{model_dir}/config.json": json.dumps(QWEN3_14B_AWQ_CONFIG, indent=2)},
        scrapes=[(first, second)],
        snapshot={"requests_running": 9, "requests_waiting": 16, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            *POOL_TURNS,
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "increase"),
            ("max_num_batched_tokens", "increase"),
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(16_200)),
    )


# --- 3. vLLM 0.28 nightly on 4 × GB200 (TP 4): p99 ITL 337 ms at c=64, and the chunk size does not bound it -------


def vllm_gb200_tp4_itl_tail_not_bounded_by_chunk() -> FieldState:
    """vllm-project/vllm#56975 ("[Performance] GLM-5.3-Flash on 4x GB200 TP4: p99 ITL 15-20x SGLang's at c>=32;
    prefill-containing steps run outside CUDA graphs; raising --max-cudagraph-capture-size to the chunk size cuts the
    tail …", open, 2026-09-15): "vLLM nightly ``0.28.1rc1.dev681+ge7edf17ce`` … 1 tray of GB200 NVL72 (4× GB200,
    SM100), ``zai-org/GLM-5.3-Flash`` FP8 … ``--tensor-parallel-size 4 --kv-cache-dtype fp8 --max-model-len 16384
    --no-enable-prefix-caching``; Load: … random 8192-token prompts / 1024-token outputs, streaming, concurrency 32 /
    64 / 128, 8·c requests per point"; "Decode is smooth (p50 ITL 12–17 ms) but **p99 ITL is 199 / 337 / 342 ms at
    c = 32 / 64 / 128** (another run on another tray: 196 / 334 / 340) … SGLang on the same tray … has 13 / 16 / 20
    ms, at the price of 1.2–4.5× higher TTFT because it does not put prefill and decode in the same batch. Every slow
    vLLM step is a step that also carries prefill tokens; decode-only steps are 14.1 ms flat (p99 14.7 ms). **Chunk
    size does not bound it.** Same tray, one job, fresh server per column: | max-num-batched-tokens | …".

    Engine facts (vLLM V1): decode-only steps replay captured CUDA graphs; a step that carries prefill tokens has
    more tokens than the largest captured size and runs eagerly (the issue's title) — its cost is the eager step's
    overhead, not the chunk's length, which is why the measured table shows no chunk size bounding it; the fix the
    report measures is ``--max-cudagraph-capture-size`` raised to the chunk size, a dial the advisor does not have.
    Arithmetic (c = 64, chunk 8,192 — the API-server default of a ≥ 70 GiB non-A100 GPU): a request brings 8,192
    prefill tokens per 1,024 decoded, so one step in 16 carries a chunk: 1.96 mixed steps (~0.337 s) and 29.4
    decode steps (14.1 ms) fill a second — 6 % of inter-token gaps are ~0.34 s: the p99 is that step, the p50 a
    decode step; a request's mean TPOT ~32 ms against SGLang's 13–20 ms p99 on the same tray (a 25 ms target is
    attainable there). Fewer concurrent requests do not remove it (c = 32: 199 ms). The same four GPUs hold the
    tail at 13–20 ms under SGLang, so the GPUs are not what is short, and an eager step's launch overhead does not
    shrink with more ranks (each adds its collectives to every layer). So must never: a smaller batched-token budget
    (measured not to bound it), fewer sequences (c = 32 still 199 ms), more tensor parallelism (twice the GPUs for a
    tail the same four hold at 13–20 ms under another scheduler), a pool turn (64 × ~8,700 tokens is ~12 % of the
    pool), replicas (one second), a restart (it streams); no stall claimed; no context cap below the 9,216 tokens a
    request needs.

    Not asserted: the capture-size fix (no advisor dial), speculation (not measured), disaggregated prefill (SGLang's
    shape, 1.2–4.5× the TTFT: a trade the thread leaves open).

    Chosen where the report is silent, and the stand-ins: GLM-5.3-Flash is not in the advisor's tables;
    Qwen3-235B-A22B-Instruct-2507-FP8 (an FP8 MoE served at TP 4) stands in, with fp8 KV at 1 KV head a rank (23.5
    KiB a token a GPU): the pool 287,000 blocks of 16 (~4.6 M tokens; 0.9 × 184.6 GiB less ~55 GiB of weights);
    the default 1,024 sequences. The moment: c = 64, 300 of 512 answered (TTFT ~0.6 s, mean TPOT ~32 ms), 64
    running, none waiting; the window: 2 mixed steps (0.337 s) and 29 decode steps (14.1 ms) — 1,984 tokens, 2
    answers end, 2 prompts of 8,192 start. vLLM 0.28.1 nightly rendered with the 0.33 label set. SLO: TTFT 10 s,
    TPOT 25 ms.
    """
    model = "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8"
    blocks, fast, slow = 287_000, 0.0141, 0.337
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=16_384,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 1_800.0,
    )
    eng.cache_labels.update(cache_dtype="fp8", enable_prefix_caching="False")

    def steps(mixed: int, decode: int) -> None:
        """``mixed`` steps carrying a prefill chunk and ``decode`` decode-only steps, 64 streams each."""
        eng.counters["vllm:generation_tokens"] += 64 * (mixed + decode)
        for name in ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"):
            if name in eng.hists:
                eng.hists[name].observe(slow, 64 * mixed)
                eng.hists[name].observe(fast, 64 * decode)
        eng.hists["vllm:iteration_tokens_total"].observe(8_192 + 64, mixed)
        eng.hists["vllm:iteration_tokens_total"].observe(64, decode)

    answered = 300
    eng.counters["vllm:prompt_tokens"] += (answered + 64) * 8_192
    eng.first_tokens([0.6] * (answered + 64))
    eng.finish(answered, prompt=8_192, output=1_024, ttft=0.6, tpot=0.032, queue=0.3, reason="length", max_tokens=1_024)
    steps(mixed=answered + 64, decode=15 * (answered + 64))
    eng.running, eng.waiting, eng.kv_usage = 64.0, 0.0, 64 * 8_700 / (blocks * 16)
    first = eng.render()
    steps(mixed=2, decode=29)
    eng.finish(2, prompt=8_192, output=1_024, ttft=0.6, tpot=0.032, queue=0.3, reason="length", max_tokens=1_024)
    eng.counters["vllm:prompt_tokens"] += 2 * 8_192
    eng.first_tokens([0.55, 0.65])
    second = eng.render()
    return FieldState(
        id="vllm-0.28-gb200-tp4-p99-itl-337ms-chunk-size-does-not-bound-it",
        source="https://github.com/vllm-project/vllm/issues/56975",
        engine_version="vLLM 0.28.1rc1 nightly (V1; 0.33 label set), TP 4 on one GB200 NVL72 tray",
        deployment={
            "name": "moe-fp8-gb200-tp4",
            "engine": "vllm",
            "engine_version": "0.28.1",
            "model": model,
            "gpu": "gb200",
            "tensor_parallel_size": 4,
            "kv_cache_dtype": "fp8",
            "enable_prefix_caching": False,
            "max_model_len": 16_384,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.025, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 64, "requests_waiting": 0, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            ("max_num_batched_tokens", "decrease"),
            ("max_num_seqs", "decrease"),
            ("tensor_parallel_size", "increase"),
            *POOL_TURNS,
            ("kv_cache_memory_bytes", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(9_216)),
    )


# --- 4. vLLM 0.22 (vllm-rbln), DP 4: one engine wedged by a prompt above the usable pool, below max_model_len -----

POOL_BLOCKS, BLOCK, CONTEXT = 13, 8_192, 106_496
USABLE = (POOL_BLOCKS - 1) * BLOCK
"""98,304 tokens: ``BlockPool`` keeps one of the 13 blocks as its null block."""


def _dp_engine(*, running: float, waiting: float, used_blocks: int, answered: int) -> VLLMEngine:
    """One DP engine of the override pool (13 blocks of 8,192), ``answered`` agent turns in its history."""
    eng = VLLMEngine(
        model_name="MiniMax-M2.5",
        num_gpu_blocks=POOL_BLOCKS,
        block_size=BLOCK,
        max_model_len=CONTEXT,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 3 * 3_600.0,
    )
    eng.cache_labels.update(num_gpu_blocks_override=str(POOL_BLOCKS))
    eng.prefill(answered * 60_000, cached=answered * 52_000)
    eng.first_tokens([6.0] * answered)
    eng.finish(answered, prompt=60_000, output=900, ttft=6.0, tpot=0.03, queue=0.2, max_tokens=16_384)
    eng.decode(answered * 899, 0.03, steps=answered * 899, batch=1)
    eng.running, eng.waiting = running, waiting
    eng.kv_usage = used_blocks / (POOL_BLOCKS - 1)
    return eng


def vllm_dp4_engine_wedged_by_prompt_above_usable_pool() -> FieldState:
    """RBLN-SW/vllm-rbln#957 ("Prompts above the usable KV block pool are admitted and then hang the engine", open,
    2026-08-20): "The usable KV cache pool is ``(num_blocks - 1) * block_size`` tokens: ``BlockPool`` permanently
    reserves one block as its null block, so a request can never be given more than the rest. A prompt longer than
    that but shorter than ``max_model_len`` is accepted by admission and then **never scheduled**: the scheduler
    retries its allocation on every step, forever, with no error and no timeout. FCFS means every request queued
    behind it stops as well, so a single such request freezes the engine process serving it. The failure is silent
    … ``/metrics`` keeps answering, with ``vllm:num_requests_waiting`` at 1 for reason ``capacity`` and
    ``vllm:kv_cache_usage_perc`` at ``0.0`` because nothing was ever allocated. Verified on … vllm 0.22.0 + vllm-rbln
    0.11.1a5 … Field incident: MiniMax-M2.5 served with data parallel size 4 and expert parallelism,
    ``--num-gpu-blocks-override 13 --block-size 8192 --max-model-len 106496 --max-num-seqs 2``. Multi-turn
    coding-agent sessions grow past 90k prompt tokens, and the round whose prompt lands in ``(98,304, 106,496)``
    stalls the engine."

    Engine facts (vLLM V1 ``kv_cache_manager.py``, ``block_pool.py``): ``--num-gpu-blocks-override`` fixes the block
    count whatever the memory — no memory fraction, KV dtype or weight format changes it; one block is the null
    block; admission checks only ``max_model_len``; with DP each engine has its own pool, so no engine can ever
    hold the wedged prompt. Arithmetic: 13 × 8,192 = 106,496 = ``max_model_len``, but (13 − 1) × 8,192 = 98,304
    tokens is all a request can hold: every prompt of 98,305–106,496 tokens waits forever and freezes its engine.
    The dial that ends it: ``max_model_len`` at most 98,304, so such a turn is refused with an error instead of
    admitted (or the pool one block larger, which no advisor dial turns under an override) — and not below the
    ~90,000 tokens the sessions reach, which the pool does serve. So must propose a ``max_model_len`` decrease, every
    one within 90,000–98,304; must never: a pool turn (the override pins 13 blocks: inert), more sequences (the
    wedged engine runs none: the cap is not what blocks), a load-balancer turn (the head-of-line prompt fits no
    engine: all four pools are 12 usable blocks), replicas (one second; each replica has the same 13 blocks).

    Not asserted: a restart (it clears the wedge until the session's next turn, which lands in the same window — not
    a fix, but the operator's first move); the stall claim (engine 0 does no work with requests waiting: true).

    Chosen where the report is silent, and the stand-ins: MiniMax-M2.5 and the RBLN NPU are not in the advisor's
    tables; Qwen3-235B-A22B-Instruct-2507-FP8 (a large MoE with expert parallelism) on H200 at TP 2 × DP 4 stands in
    (the page keeps ``model_name="MiniMax-M2.5"``, set as ``served_model``); the override and the 8,192-token block
    stay on the page (``cache_config_info``), not in the deployment (the advisor's ``block_size`` stops at 1,024).
    The moment: engine 0 has held a 101,000-token turn for ten minutes (running 0, waiting 3: two turns queued behind
    it, usage 0.0, its counters frozen); engines 1–3 serve — one 88,000-token session (11 blocks), two of 40,000 and
    33,000 (10 blocks), one of 70,000 (9 blocks) — at 30 ms a token. vLLM 0.22 rendered with the 0.33 label set.
    SLO: TTFT 30 s, TPOT 0.1 s.
    """
    wedged = _dp_engine(running=0.0, waiting=3.0, used_blocks=0, answered=40)
    serving = [
        _dp_engine(running=1.0, waiting=0.0, used_blocks=11, answered=44),
        _dp_engine(running=2.0, waiting=0.0, used_blocks=10, answered=51),
        _dp_engine(running=1.0, waiting=0.0, used_blocks=9, answered=47),
    ]
    engines: Sequence[VLLMEngine] = [wedged, *serving]
    first = vllm_dp_text(engines)
    for eng in serving:
        eng.decode(33 * eng.running, 0.03, steps=33, batch=eng.running)
    second = vllm_dp_text(engines)
    return FieldState(
        id="vllm-0.22-dp4-engine-wedged-prompt-above-usable-pool-98304-below-max-model-len-106496",
        source="https://github.com/RBLN-SW/vllm-rbln/issues/957",
        engine_version="vLLM 0.22.0 + vllm-rbln 0.11.1a5, --data-parallel-size 4 (V1; 0.33 label set)",
        deployment={
            "name": "agent-moe-dp4-override-13-blocks",
            "engine": "vllm",
            "engine_version": "0.22.0",
            "model": "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
            "served_model": "MiniMax-M2.5",
            "gpu": "h200",
            "tensor_parallel_size": 2,
            "data_parallel_size": 4,
            "enable_expert_parallel": True,
            "max_model_len": CONTEXT,
            "max_num_seqs": 2,
            "slo": {"ttft_seconds": 30.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 4, "requests_waiting": 3},
        must_propose=[("max_model_len", "decrease")],
        must_never=[
            *POOL_TURNS,
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "increase"),
            ("load_balancer", None),
            ("replicas", "increase"),
        ],
        extra_check=_suggests("max_model_len", "decrease", at_least=90_000, at_most=USABLE),
    )


STATES = [
    vllm_gb200_preemption_storm_admit_fewer(),
    vllm_a100_qwen3_14b_awq_16k_prompts_prefill_bound(),
    vllm_gb200_tp4_itl_tail_not_bounded_by_chunk(),
    vllm_dp4_engine_wedged_by_prompt_above_usable_pool(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
