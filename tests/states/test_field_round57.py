"""Field states, round 57: Hugging Face TGI and NVIDIA TensorRT-LLM servers whose ``/metrics`` show load that no
capacity dial of theirs would serve better — a TGI 2.3 router on eight MI300X serving Llama-3.1-405B while clients
drop requests, a TGI-Gaudi 2.0 router whose 78,592-token budget holds exactly its 128 clients, and two Triton
``tensorrtllm`` engines that run one of their active requests at a time with the pool nearly empty — from four public
reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine printed them then: TGI through
:class:`tests.states.test_field_round3_others.TGIRouter` (the router's ``metrics-exporter-prometheus`` names;
``tgi_batch_max_total_tokens`` since v2.3.1), the Triton ``tensorrtllm`` backend through
:func:`tests.states.test_field_round36._triton_2311` (23.11: ``nv_trt_llm_*_statistics``) and
:func:`tests.states.test_field_round4_others._triton_trtllm` (2024: ``nv_trt_llm_*_metrics``, no ``waiting`` gauge).
The assertions come from the reports' numbers, the verdict each thread establishes and engine facts, never from the
advisor's output:

* ``tgi-2.3-rocm-llama31-405b-8xmi300x-5rps-requests-dropped`` — huggingface/text-generation-inference#2635: TGI
  ``sha-11d7af7-rocm``, Llama-3.1-405B-Instruct on 8 × MI300X, ``--num-shard 8 --max-concurrent-requests 8192
  --max-total-tokens 130000 --max-input-tokens 125000``; 150 sonnet prompts of ~1,000 tokens at 5 requests/s; "TGI
  drops requests". Never a larger memory budget (TGI's is 1.0 already), replicas, a restart (answers finish), a stall
  claim, or a ``--max-total-tokens`` cap under the 1,150 tokens a request reserves.
* ``tgi-gaudi-2.0-starcoderbase-3b-budget-78592-holds-128-clients`` — huggingface/tgi-gaudi#166: ``--max-input-tokens
  568 --max-batch-prefill-tokens 618 --max-total-tokens 614 --max-batch-total-tokens 78592``, ``BATCH_BUCKET_SIZE=128``,
  128 concurrent clients, 46 output tokens: "low throughput". 78,592 = 128 × 614: every client runs, none queue.
  Never a bigger budget or memory, more sequences, replicas, a restart, or a cap under 614.
* ``triton-23.11-trtllm-0.6.0-llama2-7b-16-active-one-scheduled`` — triton-inference-server/tensorrtllm_backend#189:
  backend v0.6.0, Llama-2-7B, one ~1,000-token request 2–3 s, 16 at once 30 s, "no inflight batching at all" (fixed
  by a later backend release: an engine defect the page cannot show). Never more sequences, replicas, a pool turn, a
  restart or a stall claim; no cap under the ~1,100 tokens a request holds.
* ``triton-trtllm-0.8-llama3-8b-rtx4000-ada-second-client-waits-for-first`` —
  triton-inference-server/tensorrtllm_backend#442: TensorRT-LLM and backend 0.8 on an RTX 4000 Ada,
  ``kv_cache_free_gpu_mem_fraction=0.95``, two clients: the first finishes in ~30 s, the second after ~60 s. Same
  must-nevers.

Findings (strict xfails): both Triton rows get ``kv_saturation``'s ``kv_cache_dtype`` → fp8 at 1.1 % and 3.4 % of
the blocks written — the active requests the batcher has not scheduled are read as a capacity queue although the
free blocks hold 26 (row 3) and 9 (row 4) max-length reservations.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import TGIRouter, _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_others import _triton_trtllm
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all
from tests.states.test_field_round36 import _triton_2311

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
"""Chosen: none of the reports states an SLO."""


# --- 1. TGI 2.3 (ROCm) on 8 x MI300X: Llama-3.1-405B at 5 requests a second, clients drop requests ------------------


def tgi_405b_mi300x_requests_dropped() -> FieldState:
    """huggingface/text-generation-inference#2635 ("TGI drops requests when 150 requests are sent continuously at the
    rate of 5 Request Per Second in AMD 8 X MI300x with Llama 3.1 405B", October 2024, open): "TGI Docker Image:
    ``ghcr.io/huggingface/text-generation-inference:sha-11d7af7-rocm`` MODEL: meta-llama/Llama-3.1-405B-Instruct",
    "AMD MI300X GPU OAM 192GB 750W GPUs [x8]"; "text-generation-launcher --port 8000 --num-shard 8 --sharded true
    --max-concurrent-requests 8192 --max-total-tokens 130000 --max-input-tokens 125000"; "python benchmark_serving.py
    --backend tgi --model meta-llama/Llama-3.1-405B-Instruct --dataset-name sonnet --sonnet-input-len 1000 --endpoint
    /generate_stream … --num-prompt=150 --request-rate=5".

    Engine facts (TGI router, ``backends/v3/src/queue.rs``, ``infer/mod.rs``): a request reserves its input plus
    ``max_new_tokens`` of the warm-up's token budget; TGI counts ``tgi_request_failure{err="dropped"}`` when it finds a
    client's stream closed; ``--cuda-memory-fraction`` defaults to 1.0 (its maximum); validation refuses input +
    ``max_new_tokens`` above ``--max-total-tokens``. Arithmetic: 405.8 B × 2 B = 812 GB of weights, 101.5 GB a shard of
    a 192 GB card; a token of KV is 126 layers × 2 × 8 × 128 × 2 B = 504 KiB, 63 KiB a shard: the ~75 GB left hold
    ~1.2 M tokens. Each benchmark request reserves ~1,000 + 150 (the benchmark's default sonnet output) = 1,150, so the
    budget holds ~1,040 of them: 5 a second at ~10 s each (~50 running) is 5 % of it. Must never: a memory-budget
    increase (there is none), replicas (one second of history), a restart or a stall claim (answers finish every
    second), a ``--max-total-tokens`` cap under 1,150 (it refuses every request of the benchmark).

    Not asserted: why the clients drop (the thread has no maintainer verdict), any remedy.

    Chosen where the report is silent: the budget 1,200,000 (``tgi_batch_max_total_tokens``: the image is after
    v2.3.1); ~60 ms a token for 405B at TP 8; the moment 40 s into the run: 200 validated, 150 answered, 25 dropped,
    50 running, nothing queued; in the window 5 arrive, 5 finish, 1 more is dropped.
    """
    tgi = TGIRouter(max_input=125_000, max_total=130_000, budget=1_200_000)
    tgi.arrive(225, prompt=1_000, max_new=150)
    tgi.finish(150, generated=150, tpot=0.06, queue=0.05)
    tgi.failure["dropped"] = 25.0
    tgi.queue, tgi.batch, tgi.reserved = 0.0, 50.0, 50 * 1_150.0
    first = tgi.render()
    tgi.arrive(5, prompt=1_000, max_new=150)
    tgi.finish(5, generated=150, tpot=0.06, queue=0.05)
    tgi.failure["dropped"] += 1.0
    tgi.batch, tgi.reserved = 49.0, 49 * 1_150.0
    second = tgi.render()
    return FieldState(
        id="tgi-2.3-rocm-llama31-405b-8xmi300x-5rps-requests-dropped",
        source="https://github.com/huggingface/text-generation-inference/issues/2635",
        engine_version="TGI sha-11d7af7-rocm (after v2.3.1: tgi_batch_max_total_tokens present)",
        deployment={
            "name": "llama31-405b-tgi-8xmi300x",
            "engine": "tgi",
            "model": "meta-llama/Llama-3.1-405B-Instruct",
            "gpu": "mi300x",
            "tensor_parallel_size": 8,
            "max_model_len": 130_000,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_waiting": 0, "kv_cache_capacity_tokens": 1_200_000},
        must_never=[("gpu_memory_utilization", "increase"), ("replicas", "increase"), RESTART],
        extra_check=_all(no_stall_claimed, _cap_at_least(1_150)),
    )


# --- 2. TGI-Gaudi 2.0: a 78,592-token budget that is exactly 128 clients of 614 tokens -------------------------------


STARCODERBASE_3B_CONFIG = """{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
  "num_hidden_layers": 36, "hidden_size": 2816, "num_attention_heads": 22, "num_key_value_heads": 1,
  "intermediate_size": 11264, "vocab_size": 49152, "max_position_embeddings": 8192, "tie_word_embeddings": true
}
"""
"""``bigcode/starcoderbase-3b``'s geometry (GPTBigCode: 36 layers, 22 heads of 128, multi-query attention, 8,192
positions; not in the advisor's tables) in Llama keys."""


def tgi_gaudi_budget_holds_128() -> FieldState:
    """huggingface/tgi-gaudi#166 ("low throughput while using TGI-Gaudi on bigcode/starcoderbase-3b on Gaudi2", June
    2024): the container "built from master branch (4fe871ff…)", "Gaudi2", "Model : bigcode/starcoderbase-3b";
    ``-e BATCH_BUCKET_SIZE=128 -e PREFILL_BATCH_BUCKET_SIZE=4 -e PAD_SEQUENCE_TO_MULTIPLE_OF=128 … --max-input-tokens
    568 --max-batch-prefill-tokens 618 --max-total-tokens 614 --max-batch-total-tokens 78592``; the client
    ``run_generation.py … --max_input_length 568 --max_output_length 46 --total_sample_count 1280
    --max_concurrent_requests 128``.

    Engine facts (TGI 2.0 router, which TGI-Gaudi ships unchanged): a request reserves input + ``max_new_tokens`` of
    ``--max-batch-total-tokens``; the queue admits while the reservation fits. Arithmetic: 78,592 = 128 × 614, so the
    budget holds all 128 clients at their longest (568 + 46): every client's request runs, none waits in the router.
    Whatever makes the box slow, the budget and the batch are not short: never a larger budget or memory
    (``kv_cache_memory_bytes`` / ``gpu_memory_utilization`` increase), never more sequences (128 clients, 128 run),
    never replicas (one second), never a restart or a stall claim (answers finish), never a ``--max-total-tokens`` cap
    under 614 (the client asks for 568 + 46).

    Not asserted: the Gaudi bucket sizes (no dial of the advisor's), any throughput remedy (the excerpt gives none).

    Chosen where the report is silent: prompts of ~500 tokens; ~40 ms a decode step at 128, so a request runs ~2 s
    with its prefill queued behind buckets of 4 (~0.5 s); 640 answered before the first scrape, ~60 in the window;
    TGI-Gaudi 2.0 (no ``tgi_batch_max_total_tokens``). Gaudi2 is not in the advisor's GPU table: ``gpu_memory_gib`` 96
    (its HBM) stands in; the model's geometry is given as a ``config.json`` (below).
    """
    tgi = TGIRouter(max_input=568, max_total=614, budget=None)
    tgi.arrive(768, prompt=500, max_new=46)
    tgi.finish(640, generated=46, tpot=0.04, queue=0.5)
    tgi.queue, tgi.batch, tgi.reserved = 0.0, 128.0, 128 * 546.0
    first = tgi.render()
    tgi.arrive(60, prompt=500, max_new=46)
    tgi.finish(60, generated=46, tpot=0.04, queue=0.5)
    second = tgi.render()
    return FieldState(
        id="tgi-gaudi-2.0-starcoderbase-3b-budget-78592-holds-128-clients",
        source="https://github.com/huggingface/tgi-gaudi/issues/166",
        engine_version="TGI-Gaudi 2.0 (TGI 2.0 router names; no tgi_batch_max_total_tokens)",
        deployment={
            "name": "starcoderbase-3b-tgi-gaudi2",
            "engine": "tgi",
            "model": "starcoderbase-3b.json",
            "gpu_memory_gib": 96.0,
            "max_model_len": 614,
            "max_num_batched_tokens": 618,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        files={"starcoderbase-3b.json": STARCODERBASE_3B_CONFIG},
        snapshot={"requests_running": 128, "requests_waiting": 0},
        must_never=[
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(614)),
    )


# --- 3. Triton 23.11, backend 0.6.0: 16 active, one scheduled, the pool nearly empty ---------------------------------


def triton_0_6_0_sixteen_active_one_scheduled() -> FieldState:
    """triton-inference-server/tensorrtllm_backend#189 ("Concurrent request very slow", December 2023, closed): "I am
    testing trtllm backend v0.6.0 for llama2-7b … If I set one request with length being about 1000, it took about 2-3
    seconds to finish. And if I send 16 requests at the same time, it took about 30 seconds, so it feels like there is
    no inflight batching at all"; tensorrtllm_backend#442 later cites it: "the user reported that his issue was fixed
    after 0.6.1".

    Engine facts: the backend's inflight batcher keeps every request it accepted in its active list and schedules
    what the capacity scheduler admits; 16 × 2–3 s ≈ 30 s is one request at a time. The fix was a backend release —
    an engine defect the page cannot show, so nothing is asserted about it. What the page shows: 16 active, 1
    scheduled, ~1 % of the blocks used. So no capacity dial is short: never more sequences (16 are active already),
    replicas (one second; each would serialize the same), a pool turn (the pool is nearly empty), a restart (tokens
    flow, one request finishes every ~2 s) or a stall claim; no context cap under ~1,100 tokens.

    Chosen where the report is silent: one A100 80 GB; the pool at the default fraction 0.85 of what ~13.5 GB of fp16
    weights leave: 1,700 blocks of 64 tokens; the running request ~1,000 prompt tokens and ~100 generated (18 blocks);
    ~40 iterations a second; 64 requests served before, none in the window. Triton 23.11 (backend 0.6.x: the
    ``_statistics`` names; Triton core's rows for this backend read 0 before 23.12).
    """
    blocks1 = {"tokens_per": 64.0, "used": 18.0, "free": 1_682.0, "max": 1_700.0}
    blocks2 = {"tokens_per": 64.0, "used": 18.0, "free": 1_682.0, "max": 1_700.0}
    core = {"tensorrt_llm": {"success": 0.0, "pending": 0.0}, "ensemble": {"success": 64.0, "pending": 0.0}}
    first = _triton_2311(
        active=16, scheduled=1, context=0, blocks=blocks1, iteration=20_000, timestamp_s=1_701_800_000, core=core
    )
    second = _triton_2311(
        active=16, scheduled=1, context=0, blocks=blocks2, iteration=20_040, timestamp_s=1_701_800_001, core=core
    )
    return FieldState(
        id="triton-23.11-trtllm-0.6.0-llama2-7b-16-active-one-scheduled",
        source="https://github.com/triton-inference-server/tensorrtllm_backend/issues/189",
        engine_version="Triton 23.11 tensorrtllm backend 0.6.0 (nv_trt_llm_*_statistics names)",
        deployment={
            "name": "llama2-7b-triton-0-6-0",
            "engine": "triton-trtllm",
            "model": "meta-llama/Llama-2-7b-hf",
            "served_model": "tensorrt_llm",
            "gpu": "a100-80gb",
            "max_model_len": 4_096,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.85},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"kv_cache_capacity_tokens": 1_700 * 64},
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase"), *POOL_TURNS, RESTART],
        extra_check=_all(no_stall_claimed, _cap_at_least(1_100)),
    )


# --- 4. Triton, TensorRT-LLM 0.8 on an RTX 4000 Ada: the second client waits for the first ---------------------------


def triton_0_8_rtx4000_ada_second_client_waits() -> FieldState:
    """triton-inference-server/tensorrtllm_backend#442 ("InFlightBatching seems not working", May 2024, open): "GPU:
    nvidia rtx4000 ada … TensorRT-LLM version: 0.8 tensorrtllm_backend version: 0.8"; "Followed exactly steps of
    [NVIDIA's Llama 3 + Triton blog]. The only change is setting ``kv_cache_free_gpu_mem_fraction=0.95``"; "I run 2
    copies of … end_to_end_grpc_client.py in the same time. The first script will finish within 30 seconds. I expect
    the second one will finish around the same time … The second will only finish after 60 seconds."

    Engine facts as in row 3: the batcher holds both requests active and schedules one; the thread establishes no
    cause (a maintainer asks how the client was run), so nothing is asserted about a remedy. What the page shows: 2
    active, 1 scheduled, a pool a few percent used. Must never: more sequences, replicas (one second), a pool turn, a
    restart or a stall claim (the running request streams tokens), a context cap under the ~1,100 tokens a request
    holds.

    Chosen where the report is silent: Meta-Llama-3-8B-Instruct in bf16 (~16 GB of the card's 20 GB); the pool at 0.95
    of what is left: 290 blocks of 64 tokens (18,560 tokens at 128 KiB a token); the running request ~100 prompt
    tokens and ~500 generated (10 blocks), ~30 ms a token; 20 requests served before, none in the window. Triton
    24.03 (``_metrics`` names, no ``waiting`` gauge).
    """
    blocks1 = {"tokens_per": 64.0, "used": 10.0, "free": 280.0, "max": 290.0}
    blocks2 = {"tokens_per": 64.0, "used": 10.0, "free": 280.0, "max": 290.0}
    first = _triton_trtllm(active=2, scheduled=1, context=0, max_batch=64, blocks=blocks1, success=20)
    second = _triton_trtllm(active=2, scheduled=1, context=0, max_batch=64, blocks=blocks2, success=20)
    return FieldState(
        id="triton-trtllm-0.8-llama3-8b-rtx4000-ada-second-client-waits-for-first",
        source="https://github.com/triton-inference-server/tensorrtllm_backend/issues/442",
        engine_version="Triton 24.03 tensorrtllm backend 0.8 (nv_trt_llm_*_metrics, no waiting gauge)",
        deployment={
            "name": "llama3-8b-triton-rtx4000-ada",
            "engine": "triton-trtllm",
            "model": "meta-llama/Meta-Llama-3-8B",
            "served_model": "tensorrt_llm",
            "gpu": "rtx4000-ada",
            "max_model_len": 2_048,
            "max_num_seqs": 64,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.95},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"kv_cache_capacity_tokens": 290 * 64},
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase"), *POOL_TURNS, RESTART],
        extra_check=_all(no_stall_claimed, _cap_at_least(1_100)),
    )


STATES = [
    tgi_405b_mi300x_requests_dropped(),
    tgi_gaudi_budget_holds_128(),
    triton_0_6_0_sixteen_active_one_scheduled(),
    triton_0_8_rtx4000_ada_second_client_waits(),
]

_KV_SATURATION_AT_1_PCT = (
    "wrong capacity reading: kv_saturation fires at ~1-3 % KV usage and proposes kv_cache_dtype fp8, reading the "
    "active-but-unscheduled requests as a capacity queue though the free blocks hold many max-length reservations"
)

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
