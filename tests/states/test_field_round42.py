"""Field states, round 42: TGI, TensorRT-LLM (Triton) and llama.cpp server where the obvious dial is not the one —
a llama.cpp server with a quarter of its layers on the CPU and the lightest cache type already set, a Triton engine
draining a 1,024-request benchmark burst, a TGI router whose queue is held by structured-generation requests while
its token budget stands nearly empty, and a llama.cpp launcher whose four unified slots each promise the whole
131,072-cell cache — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine printed them then: llama.cpp through
:func:`tests.states.test_field_round3_others._llamacpp` (the 2025 rows with the KV gauges before PR #13660; the 2026
rows without them, with ``n_tokens_max``), TGI through :class:`tests.states.test_field_round3_others.TGIRouter` (the
router's ``metrics-exporter-prometheus`` names, ``tgi_batch_max_total_tokens`` since v2.3.1), the Triton
``tensorrtllm`` backend of TensorRT-LLM 0.9 through
:func:`tests.states.test_field_round4_others._triton_trtllm` (the ``nv_trt_llm_*_metrics`` families after the
December 2023 rename, before ``request_type="waiting"`` and ``kv_cache_block_type="fraction"`` of 2025). The
assertions come from the reports' numbers, the verdict each thread establishes and engine facts, never from the
advisor's output:

* ``llamacpp-3060-mistral-small-24b-ngl30-q4-kv-971-token-prompt-8.7s`` — Mistral Small 3 (24B) ``Q4_K_M`` on a
  12 GB RTX 3060 with ``-ngl 30`` (30 of 40 layers on the GPU), ``-c 2048 -ctk q4_0 -ctv q4_0``: a 971-token
  prompt at 111 tokens/s (8.7 s), 19 tokens at 56.6 ms each, one request at a time, all CPU cores busy. The ten
  layers the 13.3 GiB of weights leave off the 12 GiB card are the cost; the cache is the lightest type llama.cpp
  has and holds ~990 of 2,048 cells. Never a cache-type turn, more slots, replicas, a restart, or a cap under the
  request.
* ``triton-trtllm-0.9-llama3-8b-8x4090-1024-request-burst-ttft-379s`` — Llama-3-8B on eight RTX 4090 behind Triton:
  16 concurrent 1,024 + 1,024-token requests have TTFT 0.403 s; 1,024 sent at once have 379 s. A finite benchmark
  burst draining at the engine's batch size with 90 % of the KV blocks free: never replicas, a pool turn, fewer
  sequences, a restart or a stall claim, nor a context cap under the requests' 2,048 tokens.
* ``tgi-3.1.1-llama33-70b-grammar-requests-queue-161s-budget-empty`` — TGI 3.1.1, Llama-3.3-70B bf16, requests with a
  JSON-schema ``grammar``: "validation_time=5.669107ms queue_time=161.454300714s". The queue is held by the grammar
  work, not by the token budget (a few percent reserved) or a batch cap: never replicas, more sequences, a pool
  turn, more GPUs, speculation or a restart.
* ``llamacpp-b10469-four-unified-slots-131072-cells-context-exceeded`` — lemonade's ``llama-server`` with ``--parallel``
  left to llama.cpp's auto value: "n_slots = 4, n_ctx_slot = 131072, kv_unified = 'true'"; four concurrent requests
  fail "Context size has been exceeded" (50 of them, 190 KV-pressure warnings). Must propose fewer slots (the PR's
  remedy, ``--parallel 1``, ends the over-promise); never more slots, replicas, a cache-type turn (cells are
  ``--ctx-size``, not bytes), or a cap under the requests the server served.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import TGIRouter, _cap_at_least, _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_others import _triton_trtllm
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
"""Chosen: none of the reports states an SLO. TPOT 0.1 s is met by every decode the reports show (56.6 ms on the
3060, ~46 ms a token in the Triton burst, TGI's 70B at ~30 ms); TTFT 5 s is what the reports complain about missing
(8.7 s, 379 s, 161 s)."""


def _longest(tokens: float) -> tuple[str, str, str, float]:
    """llama.cpp's ``n_tokens_max`` row (2026 ``to_metrics()``, typed a counter though a running maximum)."""
    return ("n_tokens_max", "counter", "Largest observed sequence length (prompt + generation)", tokens)


# --- 1. llama.cpp: ten of forty layers on the CPU, the lightest cache type already set ------------------------------


def llamacpp_partial_offload_q4_kv() -> FieldState:
    """ggml-org/llama.cpp#12237 ("Prompt eval is 5x slower than in Ollama and maxes out the CPU", March 2025): "I am
    running the same Q4_K_M model (Mistral Small 3) in ``llama.cpp`` and ``ollama`` … on an NVIDIA RTX 3060 12 GB VRAM
    and an AMD Ryzen 9 7900"; ``llama-server -m … --port 8080 -ngl 30 -fa --temp 0.15 -c 2048 -ctk q4_0 -ctv q4_0 -t
    12``::

        prompt eval time =    8734.21 ms /   971 tokens (    9.00 ms per token,   111.17 tokens per second)
               eval time =    1075.76 ms /    19 tokens (   56.62 ms per token,    17.66 tokens per second)
              total time =    9809.97 ms /   990 tokens

    against Ollama's "prompt eval rate: 512.13 tokens/s … eval rate: 10.63 tokens/s"; "llama-server seems to be using
    all my CPU cores during prompt evaluation, no matter what value I use for the ``-t`` flag".

    Engine facts: ``-ngl 30`` puts 30 of Mistral-Small-24B's 40 repeating layers on the GPU and leaves ten, with their
    share of the KV cache, on the CPU (``-ngl`` is no dial of the advisor's); ``-c 2048`` with the default single slot
    (``--parallel`` 1 in builds of early 2025) gives one request all 2,048 cells; ``-ctk/-ctv q4_0`` is the lightest
    K/V type llama.cpp offers (18 bytes per 32 elements). Arithmetic: the ``Q4_K_M`` file is ~13.3 GiB — more than
    the 3060's 12 GiB, which is why ten layers stay on the CPU. The cache is 2 × 40 layers × 8 KV heads × 128 × 18/32
    B ≈ 46 KB a cell, ~94 MB for 2,048 cells: not what keeps layers off the GPU, and not what is short (the request
    holds 990 cells). What the prompt's 8.7 s go to is the ten layers the GPU cannot hold — computed on the
    saturated CPU, or their weights carried over PCIe for each large batch; the thread does not settle which — and
    no dial of the advisor's moves a layer; the decode (56.6 ms a token) meets a 0.1 s TPOT. One request runs, none
    is deferred. So: never a cache-type turn
    (there is no lighter type, and its bytes are not what binds), never more slots or replicas (one client; and one
    second of history), never a restart or a stall claim (the server is busy in a prompt), never a context cap under
    the 990 tokens the request holds.

    Not asserted: lighter weights or a larger GPU (either would put all forty layers on the GPU — the real remedy,
    which the thread does not settle), fewer slots (one already).

    Chosen where the report is silent: the build (March 2025: the KV gauges present); Mistral-Small-24B-Instruct-2501
    as the model (the report's "Mistral Small 3"); the moment: the request's prompt is in flight (its 971 tokens are
    written to the cache in ubatches of 512: one ``llama_decode`` in the window), the previous 40 requests served
    alike; the cache holds 990 cells of the last exchange plus the prompt's first ubatch.
    """
    prompt, output, prompt_tps, tpot = 971.0, 19.0, 111.17, 0.05662
    served = 40.0
    c1 = {
        "prompt": served * prompt,
        "prompt_s": served * prompt / prompt_tps,
        "gen": served * output,
        "gen_s": served * output * tpot,
        "decodes": served * (2 + output),
        "busy_avg": 1.0,
        "prompt_tps": prompt_tps,
        "gen_tps": 1 / tpot,
    }
    c2 = dict(c1, decodes=c1["decodes"] + 1)
    cells = 2048.0
    return FieldState(
        id="llamacpp-3060-mistral-small-24b-ngl30-q4-kv-971-token-prompt-8.7s",
        source="https://github.com/ggml-org/llama.cpp/issues/12237",
        engine_version="llama.cpp of March 2025 (the 2025 rows, KV gauges present)",
        deployment={
            "name": "mistral-small-24b-q4km-3060-ngl30",
            "engine": "llamacpp",
            "model": "mistralai/Mistral-Small-24B-Instruct-2501",
            "gguf_file_type": "Q4_K_M",
            "gpu": "rtx3060",
            "kv_cache_dtype": "q4_0",
            "max_model_len": 2_048,
            "ctx_size": 2_048,
            "parallel": 1,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=1, deferred=0, kv=(990 / cells, 990.0))),
                _llamacpp(_llamacpp_rows(c2, busy=1, deferred=0, kv=(990 / cells, 990.0))),
            )
        ],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": 2_048},
        must_never=[
            ("kv_cache_dtype", None),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("gpu_memory_utilization", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(990)),
    )


# --- 2. Triton TensorRT-LLM 0.9: a 1,024-request benchmark burst drains at the engine's batch ------------------------


def triton_trtllm_burst_1024() -> FieldState:
    """triton-inference-server/server#7316 ("When the request is large, the Triton server has a very high TTFT.", June
    2024, open): "I run benchmark of Meta-Llama-3-8B-Instruct in RTX 8*4090, when request is 16, input sequence length
    is 1024, output sequence length is 1024, The TTFT(time to first token) is 0.403s, which is acceptable。 However,
    when request is 1024 … The TTFT is 379.089s. Is this normal?" — "TensorRT-LLM：v0.9.0 tensorrtllm_backend: v0.9.0",
    ``launch_triton_server.py --world_size=8``, the client vLLM's ``benchmark_serving.py``.

    Engine facts (tensorrtllm backend 0.9, inflight batcher): the batch manager holds at most the engine's
    ``max_batch_size`` requests (``request_type="active"``/``"max"``); the rest wait in the backend's queue, which no
    metric of this release shows (``request_type="waiting"`` is of 2025), so the advisor cannot read the backlog;
    ``benchmark_serving.py`` sends its prompts at ``--request-rate inf`` by default: all 1,024 at once, and nothing
    after. Arithmetic: each request needs 1,024 + 1,024 tokens (32 blocks of 64); with the engine's batch of 64,
    1,024 requests are 16 waves; a TTFT of 379 s (the benchmark's mean) is about half the run, so the run is ~760 s
    and a wave ~47 s, ~46 ms a token at a batch of 64 — a TPOT the 0.1 s target holds. The pool: Llama-3-8B over TP
    8 is ~2 GB of weights and 16 KiB of KV a token per GPU; 0.9 of the ~20 GiB left on each 4090 holds ~18,000
    blocks (1.15 M tokens), of which 64 running requests write ~1,540 (9 %). So the TTFT is the burst's own queue at
    a batch the GPUs decode at 46 ms a token, and it ends when the burst does. Must never: replicas (one second of a
    finite burst: no arrival rate; and a second replica would only split a backlog that ends by itself), a pool turn
    (91 % of the blocks are free), fewer sequences (the 64 meet the TPOT target; fewer only lengthen the drain), a
    restart or a stall claim (the engine iterates), a context cap under the requests' 2,048 tokens.

    Not asserted: a larger batch (a rebuild with a larger ``--max_batch_size`` would run more of the burst at once and
    the pool would hold it; whether the advisor may ask for it from a full batch is its seq-cap rule's business).

    Chosen where the report is silent (its configuration is in screenshots): the engine built with ``max_batch_size``
    64, ``max_input_len`` 1,024 and ``max_output_len`` 1,024 (``max_seq_len`` 2,048: trtllm-build 0.9's defaults for
    the two lengths), ``kv_cache_free_gpu_mem_fraction`` 0.9 (the template's default), tokens per block 64; the
    moment: mid-burst, 64 active and 64 scheduled (all in generation), ~1,540 blocks written; 300 requests served
    before the first scrape, ~1.4 a second (64 each ~47 s), one finishing in the window and the next taking its place.
    """
    blocks1 = {"tokens_per": 64.0, "used": 1_540.0, "free": 16_460.0, "max": 18_000.0}
    blocks2 = {"tokens_per": 64.0, "used": 1_541.0, "free": 16_459.0, "max": 18_000.0}
    first = _triton_trtllm(active=64, scheduled=64, context=0, max_batch=64, blocks=blocks1, success=300)
    second = _triton_trtllm(active=64, scheduled=64, context=1, max_batch=64, blocks=blocks2, success=301)
    return FieldState(
        id="triton-trtllm-0.9-llama3-8b-8x4090-1024-request-burst-ttft-379s",
        source="https://github.com/triton-inference-server/server/issues/7316",
        engine_version="Triton tensorrtllm backend 0.9.0 (nv_trt_llm_*_metrics, no waiting gauge)",
        deployment={
            "name": "llama3-8b-triton-8x4090",
            "engine": "triton-trtllm",
            "model": "meta-llama/Meta-Llama-3-8B",
            "gpu": "rtx4090",
            "tensor_parallel_size": 8,
            "max_model_len": 2_048,
            "max_num_seqs": 64,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        # the backlog sits in the backend's own queue, which 0.9 does not expose: waiting is unknown, not 0
        snapshot={"requests_running": 64, "requests_waiting": None, "kv_cache_capacity_tokens": 18_000 * 64},
        must_never=[
            ("replicas", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "decrease"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(2_048)),
    )


# --- 3. TGI 3.1.1: grammar requests queue 161 s in front of an almost empty token budget -----------------------------


def tgi_grammar_queue_161s() -> FieldState:
    """huggingface/text-generation-inference#3173 ("Extended queuing time when using guidance (structured generation)
    and grammar", April 2025, open): "Running TGI on a kubernetes pod … image:
    ghcr.io/huggingface/text-generation-inference:3.1.1 args: ["--model-id", "/models/llama3_3_70b_instruct",
    "--dtype", "bfloat16"]"; requests through ``AsyncClient`` ``generate`` with "Grammar parameters {"type": "json",
    "value": Generation.schema()}" (nested Pydantic models: paragraphs of sentences, citations with a UUID and a URL);
    "Key issues: validation_time="5.669107ms" queue_time="161.454300714s"", and "Expected queue time to be similar to
    normal inference or slightly longer", against "Behaviour using same container without guidance or structured
    generation … validation_time="5.188854ms"" (that run's queue time is cut off in the copy read for this row: the
    title's "extended queuing" is the difference).

    Engine facts (TGI 3.1): the router validates the request (the JSON schema checked and turned into a regex: the 5.7
    ms), queues it, and takes requests into a batch while their input + ``max_new_tokens`` fit the token budget
    (``tgi_batch_max_total_tokens``, set at warm-up); the shards build each grammar's finite-state machine (outlines)
    before the request's first token, on the Python process that runs the batch. Arithmetic: a 70B model at bf16 is
    141 GB of weights — 35 GB per GPU on four shards — and 80 layers × 2 × 8 KV heads × 128 × 2 B = 320 KiB of KV a
    token, 80 KiB per GPU; the ~40 GB left on each 80 GB card hold ~450,000 tokens, the budget. A few requests of
    ~1,500 + 1,024 tokens reserve ~8,000 of them (2 %): the 161 s in the queue are not the budget, not a batch cap
    (TGI batches until the budget binds) and not the GPUs' arithmetic (the same requests without a grammar do not
    wait). Nothing the advisor turns changes the grammar work. Must never: replicas (one second; each replica would
    compile the same schemas), more sequences, a pool turn (98 % of the budget free), more GPUs (the wait is not in
    the model's arithmetic), speculative decoding, a restart (it would drop the queue and compile again), a context
    cap under the requests.

    Not asserted: which advice, if any (the thread states no remedy; later TGI moved grammar compilation to the
    router, #3303).

    Chosen where the report is silent: four H100 SXM (``--num-shard`` defaults to every visible GPU; the pod's are not
    given), ``--max-input-tokens`` 16,383 and ``--max-total-tokens`` 16,384 (v3's defaults depend on memory); the
    load: 40 requests served before the first scrape, 12 with a grammar that queued ~161 s and 28 without that
    queued ~50 ms; prompts of ~1,500 tokens, ``max_new_tokens`` 1,024, ~600 generated at ~30 ms a token; the moment:
    3 in the batch (8,000 budget tokens reserved), 6 queued; in the window two arrive and none finishes (TGI counts
    its token histograms only when a request ends).
    """
    tgi = TGIRouter(max_input=16_383, max_total=16_384, budget=450_000)
    tgi.arrive(49, prompt=1_500, max_new=1_024)
    tgi.finish(28, generated=600, tpot=0.03, queue=0.05)
    tgi.finish(12, generated=600, tpot=0.03, queue=161.0)
    tgi.queue, tgi.batch, tgi.reserved = 6.0, 3.0, 7_572.0
    first = tgi.render()
    tgi.arrive(2, prompt=1_500, max_new=1_024)
    tgi.queue = 8.0
    second = tgi.render()
    return FieldState(
        id="tgi-3.1.1-llama33-70b-grammar-requests-queue-161s-budget-empty",
        source="https://github.com/huggingface/text-generation-inference/issues/3173",
        engine_version="TGI 3.1.1",
        deployment={
            "name": "llama33-70b-tgi-grammar",
            "engine": "tgi",
            "engine_version": "3.1.1",
            "model": "meta-llama/Llama-3.3-70B-Instruct",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 4,
            "max_model_len": 16_384,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 3, "requests_waiting": 8, "kv_cache_capacity_tokens": 450_000},
        must_never=[
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("speculative_decoding", "enable"),
            RESTART,
        ],
        extra_check=_cap_at_least(2_524),
    )


# --- 4. llama.cpp b10469: four unified slots each promised all 131,072 cells ---------------------------------------


def llamacpp_four_unified_slots_context_exceeded() -> FieldState:
    """lemonade-sdk/lemonade#3276 ("llama.cpp: --ctx-size is applied per slot, so concurrent requests exhaust the KV
    cache", August 2026, closed by PR #3277): Lemonade 11.7.0 on "2x AMD gfx1201 (ROCm0 / ROCm1)"; "Lemonade never
    passes ``--parallel`` to ``llama-server``, so the slot count falls to llama.cpp's auto heuristic. On this host that
    resolves to 4: ``srv load_model: initializing, n_slots = 4, n_ctx_slot = 131072, kv_unified = 'true'``";
    reproduced with ``lemonade run <model> --ctx-size 131072 --llamacpp-device ROCm0`` and "4 concurrent
    ``/v1/chat/completions``": "Concurrent requests then oversubscribe the cache and fail as HTTP 500 ``Context size
    has been exceeded`` (with ``truncated = 0``, i.e. rejected rather than trimmed), plus ``failed to find free space
    in the KV cache`` warnings … My log had 0 curl timeouts, 50 context-exceeded 500s, and 190 KV-pressure
    warnings." The fix (PR #3277, verified "against a live ``llama-server`` (b10469)"): "Pinning ``--parallel 1``
    makes ``ctx_size`` the context a request actually gets."

    Engine facts: with ``--kv-unified`` the slots share one cache of ``--ctx-size`` cells and each slot may grow to
    all of them (``n_ctx_seq = n_ctx``); a request that finds no free cells fails. Arithmetic: four slots × 131,072
    promised from 131,072 cells — four concurrent requests fit only if together they stay under 131,072, ~32,768
    each; agentic chats of 40,000-60,000 tokens overflow as soon as three overlap. More replicas do not help (each
    has the same four slots over its own cells, and one second gives no arrival rate); more slots promise more; a
    cache type (q8_0) halves the cells' bytes, not their number (``--ctx-size`` counts cells). The issue's remedy is
    fewer slots (``--parallel 1``: one request gets all 131,072); a per-request cap at the slots' share (32,768) would
    also end the over-promise, but it refuses the 60,000-token sequences this server serves. Must propose fewer slots.
    Must never: more slots, replicas, a cache-type turn, a memory budget (llama.cpp has none), or a cap under the
    60,000-token sequence the server has served.

    Chosen where the report is silent: the model (not named): Llama-3.1-8B-Instruct ``Q8_0`` (its 131,072 positions
    match the ``--ctx-size``); the device: one gfx1201 with 32 GB (the Radeon AI PRO R9700; the 16 GB RX 9070 XT
    could not hold 8 GB of weights and 16 GiB of cells), its memory given as ``gpu_memory_gib``; the moment: four
    slots busy, nothing deferred, the longest sequence since start (``n_tokens_max``) 60,000; 120 requests served
    before (prompts of ~40,000 tokens, ~500 generated at ~40 ms a token, prompt processing ~2,500 tokens/s), one
    finishing in the window; b10469's exposition: no KV gauges (removed by PR #13660).
    """
    prompt, output, tpot, prompt_tps = 40_000.0, 500.0, 0.04, 2_500.0
    served = 120.0
    c1 = {
        "prompt": served * prompt,
        "prompt_s": served * prompt / prompt_tps,
        "gen": served * output,
        "gen_s": served * output * tpot,
        "decodes": served * (output / 3.0 + prompt / 2_048),
        "busy_avg": 3.0,
        "prompt_tps": prompt_tps,
        "gen_tps": 1 / tpot,
    }
    c2 = dict(
        c1,
        prompt=c1["prompt"] + prompt,
        prompt_s=c1["prompt_s"] + prompt / prompt_tps,
        gen=c1["gen"] + output,
        gen_s=c1["gen_s"] + output * tpot,
        decodes=c1["decodes"] + 25.0,
    )
    return FieldState(
        id="llamacpp-b10469-four-unified-slots-131072-cells-context-exceeded",
        source="https://github.com/lemonade-sdk/lemonade/issues/3276",
        engine_version="llama.cpp b10469 (no KV gauges)",
        deployment={
            "name": "lemonade-llama31-8b-q8-gfx1201",
            "engine": "llamacpp",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gguf_file_type": "Q8_0",
            "gpu_memory_gib": 32.0,
            "max_model_len": 131_072,
            "ctx_size": 131_072,
            "parallel": 4,
            "kv_unified": True,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp([*_llamacpp_rows(c1, busy=4, deferred=0, kv=None), _longest(60_000.0)]),
                _llamacpp([*_llamacpp_rows(c2, busy=4, deferred=0, kv=None), _longest(60_000.0)]),
            )
        ],
        snapshot={"requests_running": 4, "requests_waiting": 0},
        must_propose=[("max_num_seqs", "decrease")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("kv_cache_dtype", None),
            ("gpu_memory_utilization", "increase"),
        ],
        extra_check=_cap_at_least(60_000),
    )


STATES = [
    llamacpp_partial_offload_q4_kv(),
    triton_trtllm_burst_1024(),
    tgi_grammar_queue_161s(),
    llamacpp_four_unified_slots_context_exceeded(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
