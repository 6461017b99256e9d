"""Field states, round 36: engines other than vLLM where a slow second is not what the engine's dials buy — a
llama.cpp server whose eight slots each wait for the others' 2,029-token prompts, two TGI routers in front of
bitsandbytes' 8-bit kernels (releases that have no speculative decoding to turn on), and a Triton
``tensorrt_llm_bls`` model that hands the engine one request at a time — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine printed them then: llama.cpp through
:func:`tests.states.test_field_round3_others._llamacpp` (the 2024 rows, KV gauges present before PR #13660), TGI
through :class:`tests.states.test_field_round3_others.TGIRouter` (the router's ``metrics-exporter`` names, checked
against ``router/src`` at the reports' images, TGI ``v0.6.0-35-g49cffad1`` and ``v0.8.0``), the Triton
``tensorrtllm`` backend of Triton 23.11 by hand (its ``nv_trt_llm_*_statistics`` names, as
``../shared/engine-metrics`` holds the 23.11 README page) beside Triton core's per-model rows. The assertions come
from the reports' numbers, the verdict each thread establishes and engine facts, never from the advisor's output:

* ``llamacpp-b3920-70b-q6k-np8-2k-prompts-10-tokens-each-waits-for-the-others-prefill`` — Llama-3.1-70B Q6_K over two
  RTX A6000s, ``-c 65536 --parallel 8``: 2,029-token prompts asking for 10 tokens. At one slot a request takes 3.58 s
  (78.7 ms a token); at eight, 33.7 s (2,658 ms a token, 0.38 tokens/s), and the eight together serve fewer requests a
  second than the one slot did (0.24 against 0.28). Every decode step waits behind another slot's 2,048-token prompt
  batch: the time is the prefills', not a short pool or a slow decode. Never more slots, replicas, a pool turn, more
  GPUs (``--split-mode layer`` runs them one after the other), a cap below the requests or a restart.
* ``tgi-0.6-bitsandbytes-int8-13b-4xa10g-110ms-a-token-vs-18ms`` — ``--quantize`` (bitsandbytes LLM.int8) on a 12B
  model over four A10G: "the time per token is around 110ms vs 18ms when running without quantization", the GPUs at
  ~50 % against 99 %; the maintainer: "Yes this is known ``bitsandbytes`` is definitely slower at inference. We're
  using gptq to get similar performance." The kernel, not the GPU or the batch: never more TP, fewer sequences (one
  runs), a pool turn, replicas, another bitsandbytes width, or speculative decoding (TGI's ``--speculate`` is v1.3.0's).
* ``tgi-0.8-falcon40b-bitsandbytes-4xt4-190ms-a-token-fits-only-quantized`` — Falcon-40B ``--quantize bitsandbytes``
  over four T4s: "``time_per_token`` during inference of around 190 ms"; the maintainer: wait for GPTQ, "GPTQ are as
  fast as not quantized versions". 83.6 GB of fp16 weights do not fit 64 GB, so the weights stay quantized; ~33 ms of
  weight reads a step explain a sixth of the 190. Never speculative decoding (absent from 0.8), the weights
  unquantized or bitsandbytes again, fewer sequences, a pool turn or replicas.
* ``triton-23.11-trtllm-bls-one-request-at-a-time-26-clients-wait-in-front`` — the ``tensorrt_llm_bls`` Python model
  (one instance, its ``execute`` looping over a request's whole generation before the next) in front of an engine
  built for 128: "The service processes each request in order, processing one request before processing the next
  one", 26 expected at once, "``ensemble`` does not have this phenomenon". The engine runs one of 128 with 1 % of its
  blocks; the 25 others wait in Triton's queue for the BLS model. Nothing in the engine to turn: no advice, and never
  more sequences, replicas, a pool turn, a restart, or the GPU-freeing turns for an engine that only looks idle.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.states import go_float
from tests.states.field import Advice, FieldState, matching, round_tests
from tests.states.test_field_round3_others import TGIRouter, _cap_at_least, _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}

KV_POOL_ONLY: list[Advice] = [
    ("kv_cache_dtype", None),
    ("gpu_memory_utilization", "increase"),
    ("kv_cache_memory_bytes", "increase"),
]
"""The pool turns other than the weights' (:data:`POOL_TURNS` without ``weight_quantization``): for a row whose
thread names a weight-format change as the remedy, the weights are judged on their own."""

IDLE_IS_NOT_SPARE: list[Advice] = [
    ("replicas", "decrease"),
    ("tensor_parallel_size", "decrease"),
    ("instance_type", None),
]
"""The GPU-freeing turns (``over_provisioned``): wrong where the engine idles because something in front of it holds
the requests, not because demand is low."""


# --- 1. llama.cpp b3920: eight slots, each decode step behind another slot's 2,029-token prompt -------------------


def llamacpp_np8_long_prompts_short_outputs() -> FieldState:
    """ggml-org/llama.cpp#10054 ("Bug: Server with multiple slots: Long input + short output -> extreme generation
    token/s slowdown", October 2024, closed): "``./llama-server -m …/Meta-Llama-3.1-8B-Instruct/ggml-model-Q6_K.gguf
    -c 65536 --n-gpu-layers 82 … --parallel 8 --metrics --flash-attn`` (change to ``--parallel 1`` -> expected tokens/s
    for 1 slot)"; the log is from "The node with the 2x A6000: version: 3920 (fbc98b74)", ``CUDA_VISIBLE_DEVICES=4,5
    llama-server -m …/Meta-Llama-3.1-70B-Instruct/ggml-model-Q6_K.gguf -c 65536 --n-gpu-layers 82 … --parallel 8
    --flash-attn`` ("model size = 53.91 GiB (6.56 BPW)"). One slot::

        prompt eval time =    2801.33 ms /  2029 tokens (    1.38 ms per token,   724.30 tokens per second)
               eval time =     786.51 ms /    10 tokens (   78.65 ms per token,    12.71 tokens per second)
              total time =    3587.84 ms /  2039 tokens

    eight slots (``n_ctx_slot = 8192``, ``n_prompt_tokens = 2029``)::

        prompt eval time =    7164.75 ms /  2029 tokens (    3.53 ms per token,   283.19 tokens per second)
               eval time =   26581.48 ms /    10 tokens ( 2658.15 ms per token,     0.38 tokens per second)
              total time =   33746.24 ms /  2039 tokens

    and, with a long output instead, "the tokens/s are as expected again".

    Engine facts (``examples/server/server.cpp`` of b3920): every ``update_slots`` pass builds one batch of up to
    ``n_batch`` (2,048) tokens — one token for each generating slot, then as much of the waiting slots' prompts as
    fits — and runs it with one ``llama_decode``; a slot's "eval time" runs from its first token to its last. The log
    shows the first slot's prompt done in one batch, the second's cut at ``n_tokens = 2048``, the other six launched
    behind it. So while prompts keep arriving, each generating slot gets one token per batch that also carries ~2,000
    prompt tokens: 2,029 ÷ 724 tokens/s = 2.8 s a batch, and ten tokens wait for about ten such batches — the 26.6 s.
    Arithmetic: one slot serves a request each 3.59 s (0.28 a second, 565 prompt tokens/s); eight serve eight each
    33.7 s (0.24 a second, 481 prompt tokens/s): the prefill's compute is the bound, and the eight slots only
    interleave their waits. The KV cache holds 8 × 2,039 of 65,536 cells (25 %), nothing is deferred. Must never:
    more slots (each adds prompt batches every decode step waits behind), replicas (one second; and nothing waits), a
    pool turn (three quarters of the cells are free), more GPUs (llama.cpp's default ``--split-mode layer`` runs the
    two A6000s one after the other for every batch: a third adds a stage, not speed), a context cap below the
    requests' 2,039 tokens, a restart or a stall claim (a request finishes every ~4 s).

    Not asserted: fewer slots (the reporter's own A/B favours ``--parallel 1`` on both latency and requests a second,
    but the thread states no remedy, and one slot would queue the other seven clients' prompts whole), a smaller
    ``--batch-size`` (no dial of the advisor's), lighter weights or speculation (neither shortens the prompt batches).

    Chosen where the report is silent: the deployment as the 70B command (Llama-3.1-70B-Instruct, ``Q6_K``, two RTX
    A6000, TP 2 standing for the two-GPU layer split); eight clients in a closed loop (each slot relaunches as its
    request returns: no deferred task); 400 requests served before the first scrape; one finishes in the window with
    the log's timings. b3920's exposition: the 2024 rows with the KV gauges. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    prompt, output, prompt_s, gen_s = 2_029.0, 10.0, 7.16475, 26.58148
    served = 400.0
    c1 = {
        "prompt": served * prompt,
        "prompt_s": served * prompt_s,
        "gen": served * output,
        "gen_s": served * gen_s,
        "decodes": 5_200.0,
        "busy_avg": 7.9,
        "prompt_tps": 283.19,
        "gen_tps": 0.38,
    }
    c2 = dict(
        c1,
        prompt=c1["prompt"] + prompt,
        prompt_s=c1["prompt_s"] + prompt_s,
        gen=c1["gen"] + output,
        gen_s=c1["gen_s"] + gen_s,
        decodes=c1["decodes"] + 1.0,
    )
    cells, held = 65_536.0, 8 * 2_035.0
    return FieldState(
        id="llamacpp-b3920-70b-q6k-np8-2k-prompts-10-tokens-each-waits-for-the-others-prefill",
        source="https://github.com/ggml-org/llama.cpp/issues/10054",
        engine_version="llama.cpp b3920 (the 2024 rows, KV gauges present)",
        deployment={
            "name": "llama31-70b-q6k-2xa6000-np8",
            "engine": "llamacpp",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "gguf_file_type": "Q6_K",
            "gpu": "rtx-a6000",
            "tensor_parallel_size": 2,
            "max_model_len": 8_192,
            "ctx_size": 65_536,
            "parallel": 8,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=8, deferred=0, kv=(held / cells, held))),
                _llamacpp(_llamacpp_rows(c2, busy=8, deferred=0, kv=((held + 1) / cells, held + 1))),
            )
        ],
        snapshot={"requests_running": 8, "requests_waiting": 0},
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(2_039)),
    )


# --- 2. TGI 0.6: bitsandbytes' LLM.int8 kernels, 110 ms a token against 18 ms unquantized -------------------------


def _no_other_bitsandbytes(result: dict[str, Any]) -> None:
    """A weight-format turn, if any, leaves bitsandbytes (the maintainer: GPTQ for "similar performance"); it never
    suggests another bitsandbytes width."""
    turns = matching(result.get("recommendations") or [], ("weight_quantization", None))
    bad = [(t.get("action"), t.get("suggested")) for t in turns if "bitsandbytes" in str(t.get("suggested")).lower()]
    assert not bad, f"bitsandbytes proposed again: {bad}"


def tgi_bitsandbytes_int8_slow_decode() -> FieldState:
    """huggingface/text-generation-inference#309 ("Slow performance in Quantization", May 2023, closed): "When running
    docker image ``sha-49cffad`` with quantization, the time per token is around 110ms vs 18ms when running without
    quantization. Model: OpenAssistant/pythia-12b-sft-v8-7k-steps Machine: AWS EC2 g5 12xlarge … ``num_shard=4`` …
    ``--model-id $model --num-shard $num_shard --disable-custom-kernels --quantize``"; "Also noticed that GPU
    utilization is around 50% with quantization compared to 99% without quantization". The maintainer (Narsil): "Yes
    this is known ``bitsandbytes`` is definitely slower at inference. We're using gptq to get similar performance
    (but conversion requires some dataset)."

    Engine facts (TGI at ``49cffad1``, ``v0.6.0-35``): ``--quantize`` loads the linear layers as bitsandbytes 0.38.1
    ``Linear8bitLt`` (LLM.int8: int8 weights, outlier columns in fp16, a dequantize and a mixed matmul per layer and
    step); the launcher's defaults ``--max-input-length`` 1,000, ``--max-total-tokens`` 1,512,
    ``--max-batch-total-tokens`` 32,000; the router exposes no budget gauge (``tgi_batch_max_total_tokens`` is v2.3.1),
    ``tgi_batch_current_max_tokens`` is the batch's reservation. A g5.12xlarge is four A10G (24 GB, ~600 GB/s each).
    Arithmetic: a 12B model's int8 weights are ~12 GB, ~3 GB a shard: reading them takes ~5 ms a step; the fp16 run's
    18 ms is what the four shards' step costs with their all-reduces, and the int8 run's 110 ms is six times it while
    the GPUs idle half the time — the kernels' overhead, not the memory traffic, as the maintainer says. One request
    at a time (the reporter's test): nothing queues, ~800 of 32,000 budget tokens reserved. So the remedy is the
    weights' format (GPTQ, or no quantization at all: 18 ms), never: more TP (a g5.12xlarge has four GPUs, and a
    kernel's fixed overhead a step does not shrink with a smaller shard), fewer sequences (one runs; there is no
    knee), a pool turn (the budget is 2.5 % reserved), replicas (one second), another bitsandbytes width, and
    speculative decoding: this image has no such feature (TGI's ``--speculate`` arrived with "Speculative (#1308)",
    commit ``9ecfa16b`` of December 2023, first in v1.3.0: the 0.6 launcher refuses the flag), and the premise of
    speculation — a step bound by reading the weights, the bandwidth idle between steps — is what the 18 ms against
    110 ms and the half-idle GPUs contradict.

    Not asserted: the weight-format turn itself (the thread's remedy, GPTQ, needs a calibrated checkpoint; whether the
    advisor may name it from a 110 ms TPOT is its evidence rule's business), another GPU.

    Chosen where the report is silent: pythia-12b is not in the advisor's tables: Llama-2-13B stands in (a dense
    model of the class: 40 layers of 5,120 against pythia's 36), ``quantization: bitsandbytes`` as TGI names the flag
    (8-bit in this image); 40 requests served before the first scrape (~300 prompt tokens, ~200 generated at 110 ms,
    ``max_new_tokens`` 512, nothing queued); in the window one finishes and the next starts. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    tgi = TGIRouter(max_input=1_000, max_total=1_512, budget=None)
    tgi.arrive(41, prompt=300, max_new=512)
    tgi.finish(40, generated=200, tpot=0.11, queue=0.01)
    tgi.batch, tgi.reserved, tgi.queue = 1.0, 812.0, 0.0
    first = tgi.render()
    tgi.finish(1, generated=200, tpot=0.11, queue=0.01)
    tgi.arrive(1, prompt=300, max_new=512)
    return FieldState(
        id="tgi-0.6-bitsandbytes-int8-13b-4xa10g-110ms-a-token-vs-18ms",
        source="https://github.com/huggingface/text-generation-inference/issues/309",
        engine_version="TGI v0.6.0-35 (image sha-49cffad; no tgi_batch_max_total_tokens)",
        deployment={
            "name": "pythia12b-bnb-tgi-g5-12xlarge",
            "engine": "tgi",
            "engine_version": "0.6.0",
            "model": "meta-llama/Llama-2-13b-hf",
            "quantization": "bitsandbytes",
            "gpu": "a10g",
            "tensor_parallel_size": 4,
            "max_model_len": 1_512,
            "slo": SLO,
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("tensor_parallel_size", "increase"),
            ("max_num_seqs", "decrease"),
            *KV_POOL_ONLY,
            ("replicas", "increase"),
            ("speculative_decoding", "enable"),
        ],
        extra_check=_all(_no_other_bitsandbytes, no_stall_claimed),
    )


# --- 3. TGI 0.8: a 40B model that fits four T4s only quantized, 190 ms a token through bitsandbytes --------------


_UNQUANTIZED = ("none", "off", "unquantized", "float16", "bfloat16", "fp16", "bf16")


def _weights_stay_quantized(result: dict[str, Any]) -> None:
    """A weight-format turn, if any, keeps the weights quantized (83 GB of fp16 weights do not fit four 16 GB T4s)
    and leaves bitsandbytes."""
    turns = matching(result.get("recommendations") or [], ("weight_quantization", None))
    bad = [
        (t.get("action"), t.get("suggested"))
        for t in turns
        if t.get("suggested") is None
        or str(t.get("suggested")).strip().lower() in _UNQUANTIZED
        or "bitsandbytes" in str(t.get("suggested")).lower()
    ]
    assert not bad, f"weights unquantized or bitsandbytes again: {bad}"


def tgi_falcon40b_bitsandbytes_4xt4() -> FieldState:
    """huggingface/text-generation-inference#452 ("Falcon 40B slow inference", June 2023, closed stale): "Currently, I
    am running Falcon quantized on 4 X Nvidia T4 GPUs, all running on the same system. I am getting ``time_per_token``
    during inference of around 190 ms. Below is my run command ``docker run --gpus all --shm-size 4g … ghcr.io/
    huggingface/text-generation-inference:0.8 --model-id tiiuae/falcon-40b-instruct --num-shard 4 --quantize
    "bitsandbytes"`` Is there any optimization I can do to improve inference speed?" The maintainer (Narsil): "Wait for
    this to land: #438 so you can use a better latency kernel (GPTQ)", "GPTQ are as fast as not quantized versions. I
    never ran bitsandbytes, so I have no clue, but I remember because multiple times slower."

    Engine facts (TGI ``v0.8.0``): ``--quantize bitsandbytes`` wraps every linear layer in bitsandbytes'
    ``Linear8bitLt`` (``server/text_generation_server/utils/layers.py``: LLM.int8, 8-bit weights); the launcher's
    defaults are ``--max-input-length`` 1,000, ``--max-total-tokens`` 1,512, ``--max-batch-total-tokens`` 32,000; the
    router's metrics are those of the 0.6 image (no budget gauge). A T4 has 16 GB at ~320 GB/s. Arithmetic: Falcon-40B
    has 41.8 B parameters: 83.6 GB in fp16 — more than the four T4s' 64 GB, so the quantization is what makes it fit —
    and ~42 GB in int8, ~10.5 GB a shard, which one T4 reads in ~33 ms: the 190 ms a token are almost six weight reads.
    The kernel is the cost, as in #309 (110 ms against 18 ms unquantized on A10G), and the thread's remedy is another
    4-/8-bit kernel (GPTQ). Must never: speculative decoding (TGI 0.8 has none: ``--speculate`` is v1.3.0's, commit
    ``9ecfa16b``), the weights unquantized (they do not fit) or bitsandbytes again, fewer sequences (one request runs:
    no knee), a pool turn (~800 of 32,000 budget tokens reserved), replicas (one second).

    Not asserted: the GPTQ turn itself (a calibrated checkpoint; the advisor's evidence rule decides), more or other
    GPUs (they would hold the fp16 weights; the report's box has four T4s).

    Chosen where the report is silent: Falcon-40B is not in the advisor's tables: Yi-34B stands in (60 layers as
    Falcon-40B has, 8 KV heads; 68 GB of fp16 weights, which do not fit four T4s either); ``quantization:
    bitsandbytes`` as TGI names the flag (8-bit in this release); one user at a time (the report's own test): 25
    requests served before the first scrape (~300 prompt tokens, ~250 generated at 190 ms, ``max_new_tokens`` 512);
    in the window one finishes and the next starts. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    tgi = TGIRouter(max_input=1_000, max_total=1_512, budget=None)
    tgi.arrive(26, prompt=300, max_new=512)
    tgi.finish(25, generated=250, tpot=0.19, queue=0.01)
    tgi.batch, tgi.reserved, tgi.queue = 1.0, 812.0, 0.0
    first = tgi.render()
    tgi.finish(1, generated=250, tpot=0.19, queue=0.01)
    tgi.arrive(1, prompt=300, max_new=512)
    return FieldState(
        id="tgi-0.8-falcon40b-bitsandbytes-4xt4-190ms-a-token-fits-only-quantized",
        source="https://github.com/huggingface/text-generation-inference/issues/452",
        engine_version="TGI 0.8.0 (no tgi_batch_max_total_tokens)",
        deployment={
            "name": "falcon40b-bnb-tgi-4xt4",
            "engine": "tgi",
            "engine_version": "0.8.0",
            "model": "01-ai/Yi-34B",
            "quantization": "bitsandbytes",
            "gpu": "t4",
            "tensor_parallel_size": 4,
            "max_model_len": 1_512,
            "slo": SLO,
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("speculative_decoding", "enable"),
            ("max_num_seqs", "decrease"),
            *KV_POOL_ONLY,
            ("replicas", "increase"),
        ],
        extra_check=_all(_weights_stay_quantized, no_stall_claimed),
    )


# --- 4. Triton 23.11: the BLS model runs one request at a time; the engine sees 1 of 128 ---------------------------


def _triton_2311(
    *,
    active: float,
    scheduled: float,
    context: float,
    blocks: Mapping[str, float],
    iteration: float,
    timestamp_s: float,
    core: Mapping[str, Mapping[str, float]],
) -> str:
    """Triton 23.11 with the ``tensorrtllm`` backend 0.6.1 (``custom_metrics_reporter.cc`` before the December 2023
    rename: ``nv_trt_llm_*_statistics``, the timestamp in seconds, as the 23.11 README page shows) and Triton core's
    rows for each model of the repository (``core[model]``: ``success`` and ``pending``). The backend's own
    ``nv_inference_*`` rows read 0 before 23.12 (the 23.11 README's note)."""
    lab = 'model="tensorrt_llm",version="1"'

    def fam(family: str, label: str, rows: Mapping[str, float], text: str) -> list[str]:
        out = [f"# HELP {family} {text}", f"# TYPE {family} gauge"]
        out += [f'{family}{{{label}="{k}",{lab}}} {go_float(v)}' for k, v in rows.items()]
        return out

    out = [
        "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes",
        "# TYPE nv_inference_request_success counter",
    ]
    out += [
        f'nv_inference_request_success{{model="{m}",version="1"}} {go_float(r["success"])}' for m, r in core.items()
    ]
    out += [
        "# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution "
        "per-model.",
        "# TYPE nv_inference_pending_request_count gauge",
    ]
    out += [
        f'nv_inference_pending_request_count{{model="{m}",version="1"}} {go_float(r["pending"])}'
        for m, r in core.items()
    ]
    requests = {"context": context, "scheduled": scheduled, "max": 128.0, "active": active}
    out += fam("nv_trt_llm_request_statistics", "request_type", requests, "TRT LLM request metrics")
    memory = {"pinned": 0.0, "gpu": 1_610_236.0, "cpu": 0.0}
    out += fam("nv_trt_llm_runtime_memory_statistics", "memory_type", memory, "TRT LLM runtime memory metrics")
    out += fam("nv_trt_llm_kv_cache_block_statistics", "kv_cache_block_type", blocks, "TRT LLM KV cache block metrics")
    batcher = {"micro_batch_id": 0.0, "generation_requests": scheduled - context, "total_context_tokens": 0.0}
    out += fam(
        "nv_trt_llm_inflight_batcher_statistics",
        "inflight_batcher_specific_metric",
        batcher,
        "TRT LLM inflight_batcher-specific metrics",
    )
    general = {"iteration_counter": iteration, "timestamp": timestamp_s}
    out += fam("nv_trt_llm_general_statistics", "general_type", general, "General TRT LLM statistics")
    return "\n".join(out) + "\n"


def triton_trtllm_bls_one_at_a_time() -> FieldState:
    """triton-inference-server/tensorrtllm_backend#257 ("[Bug]When I use tensorrt_llm_bls, the first token takes very
    long time.", December 2023, open): "GPU name NVIDIA A100 … GPU memory size 80G … TensorRT-LLM backend branch or tag
    0.6.1 … Container used nvcr.io/nvidia/tritonserver:23.11-trtllm-python-py3 … use tensorrt_llm_bls", its
    ``config.pbtxt``: ``name: "tensorrt_llm_bls" backend: "python" max_batch_size: 128 model_transaction_policy {
    decoupled: True }``; the client's ``--concurrent`` threads and ``--max-new-tokens 512``; "Expected Behavior: The
    service handles 26 requests simultaneously. Actual Behavior: The service processes each request in order,
    processing one request before processing the next one. ``ensemble`` does not have this phenomenon." Another
    operator: "I met a similar problem in with ``decoupled`` set to ``False``. In the execution body of BLS, the
    ``len(requests)`` is always" one.

    Engine facts (``all_models/inflight_batcher_llm/tensorrt_llm_bls/1/model.py``, its ``execute`` as quoted in
    tensorrtllm_backend#535): ``for request in requests: … res_gen = self.decoder.decode(req) … for res in res_gen:
    response_sender.send(…)`` — a model instance streams one request's whole generation before it takes the next, and
    the template's ``bls_instance_count`` is one instance unless raised. Triton queues the other requests for the BLS
    model (``nv_inference_pending_request_count{model="tensorrt_llm_bls"}``); the ``tensorrt_llm`` model — the engine
    the advisor reads — receives one at a time. So its gauges read one active and scheduled of ``max`` 128, a pool
    ~1 % used, while 25 clients wait in front of it and the last one's first token comes after ~25 whole generations.
    The remedy is in the Python model (more BLS instances, or the ensemble), none of the engine's dials: no advice;
    never more sequences (1 of 128 run: the batch cap does not bind), replicas (one second; and each replica's BLS would
    serialize the same), a pool turn, a restart (the engine iterates: ~80 iterations a second) or a stall claim, nor
    the GPU-freeing turns (the engine idles because the BLS model holds the load, not for lack of it).

    Not asserted: the BLS instance count or the ensemble (no dial of the advisor's).

    Chosen where the report is silent: the model (its stop token 49954 names none of the advisor's tables):
    Llama-2-7B stands in, fp16, on one A100 80 GB; the pool at the backend's default fraction 0.9 of what ~13.5 GB of
    weights leave: 1,700 blocks of 64 tokens (108,800 tokens at 512 KiB a token); the running request ~600 prompt
    tokens and ~250 generated (14 blocks), at ~12.5 ms an iteration (80 in the window, one more block); 26 clients,
    25 pending at the BLS model; 130 requests served before the first scrape (five rounds of 26), none in the window (a
    request takes ~7 s). Triton 23.11's core rows: the ``tensorrt_llm`` model's read 0 (decoupled, before 23.12); the
    BLS, pre- and post-processing models' count their requests. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    blocks1 = {"tokens_per": 64.0, "used": 14.0, "free": 1_686.0, "max": 1_700.0}
    blocks2 = {"tokens_per": 64.0, "used": 15.0, "free": 1_685.0, "max": 1_700.0}
    core = {
        "tensorrt_llm_bls": {"success": 130.0, "pending": 25.0},
        "preprocessing": {"success": 131.0, "pending": 0.0},
        "tensorrt_llm": {"success": 0.0, "pending": 0.0},
        "postprocessing": {"success": 130.0, "pending": 0.0},
    }
    first = _triton_2311(
        active=1, scheduled=1, context=0, blocks=blocks1, iteration=73_400, timestamp_s=1_703_980_000, core=core
    )
    second = _triton_2311(
        active=1, scheduled=1, context=0, blocks=blocks2, iteration=73_480, timestamp_s=1_703_980_001, core=core
    )
    return FieldState(
        id="triton-23.11-trtllm-bls-one-request-at-a-time-26-clients-wait-in-front",
        source="https://github.com/triton-inference-server/tensorrtllm_backend/issues/257",
        engine_version="Triton 23.11 tensorrtllm backend 0.6.1 (nv_trt_llm_*_statistics names)",
        deployment={
            "name": "llama2-7b-triton-bls-a100",
            "engine": "triton-trtllm",
            "model": "meta-llama/Llama-2-7b-hf",
            "served_model": "tensorrt_llm",
            "gpu": "a100-80gb",
            "max_model_len": 4_096,
            "max_num_seqs": 128,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": 1_700 * 64},
        no_advice=True,
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            *POOL_TURNS,
            RESTART,
            *IDLE_IS_NOT_SPARE,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    llamacpp_np8_long_prompts_short_outputs(),
    tgi_bitsandbytes_int8_slow_decode(),
    tgi_falcon40b_bitsandbytes_4xt4(),
    triton_trtllm_bls_one_at_a_time(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
