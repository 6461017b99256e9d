"""Field states, round 4, vLLM V1 (0.10 – 0.2x): five new public reports, replayed as vLLM exposes them.

Each row is built from one operator's public report (``source``): the deployment as the report states it (where it
does not, the docstring names the stand-in and why), and two scrapes one second apart rendered by
:class:`tests.states.VLLMEngine` (the V1 families of ``vllm/v1/metrics/loggers.py``). The pool each engine reports
(``num_gpu_blocks``) is the capacity pass's for that deployment where the report states none, and agrees with the
report's own arithmetic (running requests × their length ÷ the KV usage it logs) in every row.

The assertions are written from the reports' numbers and engine facts, never from the advisor's output:

* ``vllm-qwen3-8b-h100-prefill-bound-queue-pool-at-32pct`` — a prefill-only load (6,000-token prompts, 2 output
  tokens, 8 requests/s) whose queue grows while the pool sits at 32 %: the ceiling is prefill compute, not KV; no
  pool turn, no more sequences, no replica count from ~1 s.
* ``vllm-0102-full-pool-queue-behind-prefix-hits`` — 33-34 running at 97-99 % of the pool with 18 → 47 waiting
  and a 43 % prefix-cache hit rate, tokens still flowing at ~740/s: never more sequences, never prefix caching
  off, no stall claimed, no replica count from ~1 s.
* ``vllm-l4-qwen25-05b-compute-bound-kv-one-percent`` — 31 running on one L4, KV 1.1 %, nothing waiting, TTFT
  135 ms and ITL 7 ms: SLO met; no advice at all.
* ``vllm-chunked-prefill-64k-prompt-starves-one-decode`` — one 65,535-token prompt prefilling beside one decoding
  stream (272 → 6.6 tokens/s) with a pool of 1.38M tokens almost empty: not a KV or replica matter.
* ``vllm-llama32-1b-l40-one-long-generation`` — one request generating for ten minutes on an L40, KV 3.8 %:
  not a hang, not a load; no advice at all.

``once`` sees about one second of history, so no replica count may be proposed in any row (it needs ≥ 30 s of
history to measure an arrival rate); every row with a queue says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.states import VLLMEngine
from tests.states.field import FieldState, FieldStateRuns, check_field_state, run_field_states
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed

POOL_TURNS: list[tuple[str, str | None]] = [
    ("kv_cache_dtype", None),
    ("gpu_memory_utilization", "increase"),
    ("kv_cache_memory_bytes", "increase"),
    ("weight_quantization", None),
]
"""The turns that enlarge the KV pool: wrong wherever the pool is not what limits."""


# --- 1. a prefill-only load, queue growing beside a pool at 32 % ---------------------------------------------------


def vllm_prefill_bound_queue_pool_at_32pct() -> FieldState:
    """llm-d/llm-d-autoscaling#662 ("Better understanding of the kv_cache_usage_perc and num_requests_running
    metrics…"): a prefill-only experiment on vLLM 0.14 — "GPU H100", "Input tokens per request: 6000", "Output
    tokens: 2", "Requests per second: 8", "max-num-batched-tokens: 65000"; "num_requests_waiting is constantly
    growing, the num_requests_running stabilized on ~20, and the kv_cache_usage_perc stabilized on just ~0.32".

    Arithmetic: 20 running × 6,000 tokens = 120,000 tokens at 32 % puts the pool at ≈ 375,000 tokens. Eight
    requests a second arrive (48,000 prompt tokens/s); the queue grows, so the engine completes fewer: ≈ 6 a
    second (36,000 prefill tokens/s), the queue growing by 2 a second. The pool is two-thirds free and 20 running
    is far below any ``max_num_seqs``: what bounds admission is prefill compute (65,000 batched tokens a step), not
    KV blocks and not sequence slots. So no pool turn (fp8 KV, a larger budget, quantized weights for room), never
    more sequences, never a shorter ``max_model_len`` (every prompt is 6,000 tokens and fits), never a restart (the
    counters move); ``once`` sees ~1 s, so no replica count either.

    Chosen: the issue names no model. Qwen3-8B in bf16 on one H100-SXM at ``gpu_memory_utilization`` 0.9 gives a
    pool of the report's size (the capacity pass); ``max_model_len`` 16,384; ``max_num_seqs`` 256 (the default).
    The window: 150 → 152 waiting, 20 running, usage 0.32, 6 requests finish after ≈ 20 s in the queue. SLO: TTFT
    5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-8B",
        num_gpu_blocks=23_437,
        max_model_len=16_384,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.cache_labels["enable_prefix_caching"] = "False"
    eng.finish(1_200, prompt=6_000, output=2, ttft=18.0, tpot=0.03, queue=17.5)
    eng.first_tokens([18.0] * 1_200)
    eng.prefill(1_200 * 6_000)
    eng.decode(1_200, 0.03, steps=120, batch=65_000)
    eng.running, eng.waiting, eng.kv_usage = 20.0, 150.0, 0.32
    first = eng.render()
    eng.finish(6, prompt=6_000, output=2, ttft=20.5, tpot=0.03, queue=20.0)
    eng.first_tokens([20.5] * 6)
    eng.prefill(6 * 6_000)
    eng.decode(6, 0.03, steps=0.6, batch=60_000)
    eng.running, eng.waiting, eng.kv_usage = 20.0, 152.0, 0.32
    return FieldState(
        id="vllm-qwen3-8b-h100-prefill-bound-queue-pool-at-32pct",
        source="https://github.com/llm-d/llm-d-autoscaling/issues/662",
        engine_version="vLLM 0.14 (V1; rendered with the 0.11 label set)",
        deployment={
            "name": "qwen3-8b-h100",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 16_384,
            "max_num_seqs": 256,
            "max_num_batched_tokens": 65_000,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 20, "requests_waiting": 152, "kv_cache_usage_ratio": 0.32},
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("max_model_len", "decrease"),
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),  # ~1 s of history sizes no replicas
            ("replicas", "decrease"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. a full pool, a queue, and a prefix cache that hits 43 % ----------------------------------------------------


def vllm_full_pool_queue_prefix_hits() -> FieldState:
    """vllm-project/vllm#27073 ("GPU KV cache usage keeps rising to near 100 % after a few over-long requests"),
    ``vllm/vllm-openai:v0.10.2``: the log every 10 s — "Avg generation throughput: 843.6 tokens/s, Running: 38 reqs,
    Waiting: 0 reqs, GPU KV cache usage: 88.5%, Prefix cache hit rate: 42.4%", then 39 / 0 / 93.2 %, then "756.7
    tokens/s, Running: 34 reqs, Waiting: 18 reqs, GPU KV cache usage: 99.2%, Prefix cache hit rate: 43.2%",
    "736.1 tokens/s, Running: 33 reqs, Waiting: 40 reqs, 97.5%, 43.5%", "719.3 tokens/s, Running: 33, Waiting: 47";
    the operator restarted after six hours.

    Arithmetic: 736 tokens/s over 33 sequences is 22 tokens/s each (ITL ≈ 45 ms, inside a 0.1 s target). The
    engine works — its generation counter moves by ~740 a second and requests finish — so nothing here is a hang
    the counters can show (``stalled`` must not hold). The pool is full and the queue grows: with a full pool more
    sequences only preempt more (never raise ``max_num_seqs``). 43 % of the prompt tokens come from the prefix
    cache: turning prefix caching off would recompute them and hold the same blocks for the same running requests,
    so never that. No speculation into a full pool; ``once`` sees ~1 s, so no replica count.

    Chosen: the report names neither model nor GPU. Qwen2.5-32B-Instruct in bf16 at TP 2 on H100-SXM stands in:
    its pool (the capacity pass, ≈ 286,000 tokens) over 33 running is ≈ 8,600 tokens a request, "large token"
    requests as the title says. ``max_model_len`` 32,768, ``max_num_seqs`` 256. The window: waiting 40 → 47,
    running 33, usage 0.975 → 0.99, 2 requests finish, 736 tokens decoded, 1,386 prompt tokens scheduled (600 of
    them prefix hits). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-32B-Instruct",
        num_gpu_blocks=17_900,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.finish(3_000, prompt=6_000, output=600, ttft=1.5, tpot=0.04, queue=0.5)
    eng.first_tokens([1.5] * 3_033)
    eng.prefill(3_033 * 6_000, cached=3_033 * 6_000 * 0.43)
    eng.decode(3_000 * 600 + 33 * 300, 0.04)
    eng.running, eng.waiting, eng.kv_usage = 33.0, 40.0, 0.975
    first = eng.render()
    eng.finish(2, prompt=6_000, output=600, ttft=9.0, tpot=0.045, queue=8.0)
    eng.first_tokens([9.0, 9.5])
    eng.prefill(1_386, cached=600)
    eng.decode(736, 0.045, steps=22, batch=33)
    eng.running, eng.waiting, eng.kv_usage = 33.0, 47.0, 0.99
    return FieldState(
        id="vllm-0102-full-pool-queue-behind-prefix-hits",
        source="https://github.com/vllm-project/vllm/issues/27073",
        engine_version="vLLM 0.10.2 (V1; rendered with the 0.11 label set)",
        deployment={
            "name": "qwen32b-tp2",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-32B-Instruct",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 33, "requests_waiting": 47, "kv_cache_usage_ratio": 0.99},
        must_never=[
            ("max_num_seqs", "increase"),
            ("prefix_caching", "disable"),
            ("speculative_decoding", "enable"),
            ("replicas", "increase"),  # ~1 s of history sizes no replicas
            ("replicas", "decrease"),
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. a small model on one L4: compute-bound, the pool at 1 % ----------------------------------------------------


def vllm_l4_compute_bound_kv_one_percent() -> FieldState:
    """ai.wmx.dev "serving/raw-vllm" benchmark: one NVIDIA L4, ``Qwen/Qwen2.5-0.5B-Instruct`` (BF16), vLLM v0.23.0
    (V1), ``--gpu-memory-utilization 0.6 --max-model-len 8192``, 256-token input / 128-token output, closed loop:
    at concurrency 32 "29.5 req/s, 3773 out tok/s, TTFT p50 135.3 ms, p95 191.8, ITL p50 7.1, p95 12.0"; peak
    "KV-cache usage 1.1 %", "Requests running / waiting 31 / 0", GPU utilisation 100 %; "Compute-bound, not
    memory-bound … Scaling pods/replicas wouldn't help on a single GPU".

    Arithmetic: 31 running × ≈ 320 tokens (256 in + half of 128) = 9,900 tokens at 1.1 % puts the pool near
    900,000 tokens (the capacity pass gives ≈ 905,000 at 0.6). TTFT 0.14 s and ITL 7 ms are far inside a 5 s /
    0.1 s SLO: every request meets it, nothing waits, nothing is preempted. Nothing limits: no pool turn (the pool
    is 99 % free), no more sequences, no more replicas, no restart.

    Not asserted: ``over_provisioned`` proposes a smaller GPU (a T4) for 31 of 256 sequences. "Compute-bound" in the
    report is nvidia-smi's 100 % (a kernel always running), and the roofline puts the observed 7 ms step on the
    weight stream and the step overhead, where a T4 (320 GB/s) is no slower than the L4 (300 GB/s); prefill would
    take about twice as long (65 against 121 dense TFLOPS), still far inside a 5 s TTFT. The report does not say a
    smaller GPU would fail, so neither way is asserted. (Judging it from ``once``'s second of data is the rule's
    documented behaviour, which tests/test_operator_states.py's over-provisioned row relies on.)

    Chosen: the model table holds ``Qwen/Qwen2.5-0.5B`` (the same architecture as the Instruct checkpoint served);
    ``max_num_seqs`` 256 (the default). The window: 29 requests finish and 29 are admitted, 3,773 tokens decoded.
    SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-0.5B-Instruct",
        num_gpu_blocks=56_560,
        max_model_len=8_192,
        gpu_memory_utilization=0.6,
        version="0.33",
    )
    eng.finish(3_000, prompt=256, output=128, ttft=0.135, tpot=0.0071, queue=0.01)
    eng.first_tokens([0.135] * 3_031)
    eng.prefill(3_031 * 256)
    eng.decode(3_000 * 128 + 31 * 64, 0.0071)
    eng.running, eng.waiting, eng.kv_usage = 31.0, 0.0, 0.011
    first = eng.render()
    eng.finish(29, prompt=256, output=128, ttft=0.135, tpot=0.0071, queue=0.01)
    eng.first_tokens([0.135] * 29)
    eng.prefill(29 * 256)
    eng.decode(3_773, 0.0071, steps=122, batch=31)
    eng.running, eng.waiting, eng.kv_usage = 31.0, 0.0, 0.011
    return FieldState(
        id="vllm-l4-qwen25-05b-compute-bound-kv-one-percent",
        source="https://ai.wmx.dev/benchmarks",
        engine_version="vLLM 0.23.0 (V1; rendered with the 0.33 label set)",
        deployment={
            "name": "qwen05b-l4",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-0.5B",
            "served_model": "Qwen/Qwen2.5-0.5B-Instruct",
            "gpu": "l4",
            "gpu_memory_utilization": 0.6,
            "max_model_len": 8_192,
            "max_num_seqs": 256,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 31, "requests_waiting": 0, "kv_cache_usage_ratio": 0.011},
        must_never=[
            ("replicas", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 4. one 64k prompt's chunked prefill starving one decoding stream ---------------------------------------------


def vllm_chunked_prefill_starves_decode() -> FieldState:
    """local-inference-lab/vllm#541 ("GLM-5.3 large chunked prefill starves concurrent decode (~270 → 6.6 tok/s)"),
    a vLLM V1 build: request A (4,094 input tokens, 8,192 output) decoding; request B (65,535 input tokens, 1
    output) submitted: "A standalone/recovered decode: ~272.6 tok/s", "A while B is prefilling: 6.62 tok/s", "B
    TTFT: 16.474 s", "B mixed-load prefill: 3,978 tok/s"; "The machine has ~1.376M KV tokens available, so this
    does not appear to be KV-cache pressure"; the reporter had tried ``max_num_batched_tokens`` 1024/4096/8192 and
    other ``max_num_seqs`` values.

    Arithmetic: during B's 16.5 s prefill, A gets a token every 0.15 s (6.62/s: an ITL over a 0.1 s target), while
    the pool holds 4,094 + A's output + B's prompt so far ≈ 40,000 of 1.376M tokens (≈ 3 %). Two requests run,
    none waits, none is preempted: neither the pool, nor the sequence slots, nor the replica count is what slows A
    — every step is a prefill chunk of B plus A's one decode token. So no pool turn, no ``max_num_seqs`` turn (two
    run), no replicas, no restart (A's tokens move), and never a larger ``max_num_batched_tokens`` (larger chunks
    make each of A's steps longer still).

    Chosen: GLM-5.3 is not in the model table. Qwen3-235B-A22B-Instruct-2507-FP8 at TP 8 on H200 stands in — a
    large MoE on eight GPUs with a pool of the same order (2,050,800 tokens, the capacity pass). ``max_model_len``
    131,072 (the 65,535-token prompt fits), ``max_num_seqs`` 8, ``max_num_batched_tokens`` 8,192 (one of the
    values tried). The window (one second of B's prefill): A decodes 7 tokens at 0.15 s, nothing finishes, B has
    no first token yet; usage 0.019 → 0.021. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
        num_gpu_blocks=128_175,
        max_model_len=131_072,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    # before: a few standalone requests at ~272 tokens/s, then A's prompt and its first 2,000 tokens
    eng.finish(10, prompt=4_094, output=2_000, ttft=0.6, tpot=0.0037, queue=0.01)
    eng.first_tokens([0.6] * 11)
    eng.prefill(11 * 4_094)
    eng.decode(10 * 2_000 + 2_000, 0.0037)
    eng.running, eng.waiting, eng.kv_usage = 2.0, 0.0, 0.019
    first = eng.render()
    eng.decode(7, 0.15, steps=7, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 2.0, 0.0, 0.021
    return FieldState(
        id="vllm-chunked-prefill-64k-prompt-starves-one-decode",
        source="https://github.com/local-inference-lab/vllm/issues/541",
        engine_version="vLLM V1 (a fork's build; rendered with the 0.11 label set)",
        deployment={
            "name": "moe-tp8",
            "engine": "vllm",
            "model": "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131_072,
            "max_num_seqs": 8,
            "max_num_batched_tokens": 8_192,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 2, "requests_waiting": 0},
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", None),
            ("max_num_batched_tokens", "increase"),
            ("max_model_len", "decrease"),  # the 65,535-token prompt is the traffic
            ("replicas", None),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 5. one request generating for ten minutes ---------------------------------------------------------------------


def vllm_one_long_generation_l40() -> FieldState:
    """vllm-project/vllm#31353 ("KV Cache grows continuously with just one chat completion request using
    meta-llama/Llama-3.2-1B on L40 GPU with Flash Attention and finally completed after 10 minutes"): the log every
    10 s — "Avg generation throughput: 213.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.3%,
    Prefix cache hit rate: 18.8%", …, "149.8 tokens/s … 3.3%", "148.5 … 3.4%", "146.7 … 3.6%", "145.0 … 3.7%",
    "143.2 … 3.8%".

    Arithmetic: one sequence decoding ≈ 145 tokens/s is an ITL of 7 ms, far inside any TPOT target; usage rises
    0.1-0.2 points per 10 s because that one sequence grows by ~1,450 tokens per 10 s (0.12 % of a ≈ 1.2M-token
    pool). The engine is healthy (its generation counter moves), nothing waits, nothing is preempted, the pool is
    96 % free: the long generation is the request's own (a base model without a stop), not a capacity matter — no
    advice at all, and certainly no restart, no replicas, no smaller GPU from one second.

    Chosen: the model table holds ``meta-llama/Llama-3.2-1B-Instruct`` (the same architecture as the base model
    served); bf16 on one L40 at ``gpu_memory_utilization`` 0.9 (the default), ``max_model_len`` 131,072 (the
    model's), the pool the capacity pass gives. Ten requests finished before. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.2-1B",
        num_gpu_blocks=73_500,
        max_model_len=131_072,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.finish(10, prompt=40, output=300, ttft=0.05, tpot=0.005, queue=0.01)
    eng.first_tokens([0.05] * 11)
    eng.prefill(11 * 40, cached=11 * 40 * 0.188)
    eng.decode(10 * 300 + 44_000, 0.0068)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.037
    first = eng.render()
    eng.decode(145, 0.0069, steps=145, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.038
    return FieldState(
        id="vllm-llama32-1b-l40-one-long-generation",
        source="https://github.com/vllm-project/vllm/issues/31353",
        engine_version="vLLM V1 (0.1x; rendered with the 0.11 label set)",
        deployment={
            "name": "llama1b-l40",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.2-1B-Instruct",
            "served_model": "meta-llama/Llama-3.2-1B",
            "gpu": "l40",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 131_072,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        no_advice=True,
        must_never=[RESTART, ("replicas", None), ("instance_type", None), ("max_num_seqs", None)],
        extra_check=no_stall_claimed,
    )


STATES = [
    pytest.param(vllm_prefill_bound_queue_pool_at_32pct, id="vllm-qwen3-8b-h100-prefill-bound-queue-pool-at-32pct"),
    pytest.param(vllm_full_pool_queue_prefix_hits, id="vllm-0102-full-pool-queue-behind-prefix-hits"),
    pytest.param(vllm_l4_compute_bound_kv_one_percent, id="vllm-l4-qwen25-05b-compute-bound-kv-one-percent"),
    pytest.param(vllm_chunked_prefill_starves_decode, id="vllm-chunked-prefill-64k-prompt-starves-one-decode"),
    pytest.param(vllm_one_long_generation_l40, id="vllm-llama32-1b-l40-one-long-generation"),
]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module, a few at a time (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, [p.values[0]() for p in STATES])


@pytest.mark.parametrize("build", STATES)
def test_field_state(build: Callable[[], FieldState], once: FieldStateRuns) -> None:
    state = build()
    check_field_state(once[state], state)
