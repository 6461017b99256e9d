"""Field states, round 46: a prompt that a cache should have served and did not — a llama.cpp server re-prefilling an
identical 20,016-token prompt of a hybrid model, a Triton TensorRT-LLM engine with KV-cache block reuse on that
saves no time — and a TGI router whose one 4,000-token request runs a 34B int8 model out of a 40 GB card, from three
public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine printed them then: llama.cpp through
:func:`tests.states.test_field_round3_others._llamacpp` (the 2026 rows: no KV gauges after PR #13660, with
``n_tokens_max``), the Triton ``tensorrtllm`` backend through
:func:`tests.states.test_field_round4_others._triton_trtllm` (the ``nv_trt_llm_*_metrics`` families, before
``request_type="waiting"`` and ``kv_cache_block_type="fraction"`` of 2025-04), TGI through
:class:`tests.states.test_field_round3_others.TGIRouter` (the router's ``metrics-exporter-prometheus`` names; no
``tgi_batch_max_total_tokens`` before v2.3.1). The assertions come from the reports' numbers and engine facts, never
from the advisor's output:

* ``llamacpp-hybrid-qwen36-identical-20k-prompt-reprefilled-cache-n-0`` — ``llama-server`` (b8935, b9131) with a
  hybrid Qwen3.6-35B-A3B, ``--parallel 1 --ctx-size 262144``: the same ~20,016-token prompt sent twice reports
  ``cache_n`` 0 both times, 54.8 s of prefill each (365 tokens/s). The cache defect is the engine's (a hybrid's
  recurrent state cannot be rolled back to a prefix without a checkpoint); no slot, pool, context or replica turn
  saves the prefill. Never more slots, replicas, a pool turn, a cap under the prompt, speculation, a prefix-cache
  turn, a restart or a stall claim.
* ``triton-trtllm-qwen-7b-kv-reuse-on-no-gain-pool-481792-batch-8`` — an engine built ``--max_batch_size 8
  --max_seq_len 4096 --use_paged_context_fmha enable`` with ``enable_kv_cache_reuse`` true: "no significant
  difference in time consumption whether I enable or disable enable_kv_cache_reuse" ("not a bug"). Block reuse is
  on and saves only the prefill of full 64-token blocks a previous request left; a pool of 481,792 tokens holds 14.7×
  what 8 sequences of 4,096 can write. Never a prefix-caching turn, a pool turn, fewer sequences, replicas or a
  restart.
* ``tgi-1.3.3-codellama34b-eetq-a100-40gb-4000-token-request-oom`` — TGI 1.3.3, CodeLlama-34B ``--quantize eetq``
  on one A100 40 GB, ``--max-concurrent-requests 1 --max-total-tokens 6900 --max-batch-prefill-tokens 7000``: a
  4,000-token request fails "CUDA out of memory … 31.94 MiB is free. Process … has 39.23 GiB memory in use". ~31 GiB
  of int8 weights leave ~8 GiB of a 39.4 GiB card; TGI's ``--cuda-memory-fraction`` is already 1.0 and one request
  runs at a time. Never a larger memory budget, more sequences, replicas, or a ``--max-total-tokens`` cap under the
  4,040 tokens the failing request needs.

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
from tests.states.test_field_round14 import QWEN35_27B_CONFIG
from tests.states.test_field_round40 import _counters, _longest

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
"""Chosen: none of the reports states an SLO. TPOT 0.1 s is met by every decode the reports imply; TTFT 5 s is what a
20,016-token prefill at 365 tokens/s (54.8 s) misses by itself."""


# --- 1. llama.cpp: a hybrid model's identical 20,016-token prompt prefilled again, cache_n 0 ----------------------


def llamacpp_hybrid_identical_prompt_reprefilled() -> FieldState:
    """ggml-org/llama.cpp#23030 ("Prompt cache is not reused for repeated identical chat/completions request with
    Qwen3.6-35B-A3B", May 2026, closed stale): "llama.cpp build: ``b8935-f454bd7eb``, and still occurs on ``b9131``",
    ``llama-server`` launched by Lemonade Server 10.4.0, ``Qwen3.6-35B-A3B-UD-Q8_K_XL.gguf`` ("GGUF architecture:
    ``qwen35moe``", "Context length: ``262144``"), ``--ctx-size 262144 … -b 4096 -ub 1024 --parallel 1 --n_predict
    16384 --metrics``, ROCm/HIP on a Radeon 8060S ("Strix Halo: Ryzen AI 395+ 128GB"). "I send the same ~20k-token
    prompt twice to the same already-loaded model, with max_tokens: 1 and temperature: 0"; the timings (a later
    comment, testing a proposed fix): ``"cache_n": 0 … "prompt_ms": 54790.061, "prompt_n": 20016,
    "prompt_per_second": 365.32`` and ``"prompt_tokens_details": {"cached_tokens": 0}`` — "this PR does NOT fix the
    issue".

    Engine facts: ``llama-server`` keeps a slot's prompt (``cache_prompt`` is on by default) and, for a transformer,
    resumes a new prompt from the longest common prefix. A ``qwen35moe`` model is a hybrid: three of four layers are
    linear-attention (gated delta-net) whose recurrent state cannot be cut back to a prefix; the server can resume
    only from a saved context checkpoint, and ``--cache-reuse`` (KV shifting) is refused for such models ("cache
    reuse is not supported - ignoring n_cache_reuse"). So a reuse that fails here is the engine's, and nothing the
    advisor turns brings it back. Arithmetic: 20,016 tokens at 365 tokens/s is 54.8 s a request, every time; one
    client sends them one after another (one slot busy, none deferred); the prompt holds 20,017 of 262,144 cells
    (7.6 %). Must never: more slots or replicas (one client, nothing waits; one second of history), a pool turn (the
    cells are ``--ctx-size``, 92 % unwritten; the weights' format is not what re-prefills), a context cap under the
    20,017 tokens the requests hold, speculative decoding (``max_tokens`` 1: the time is the prompt's), a
    prefix-caching turn (the server's prompt cache is on; the defect is its restore for this architecture), a restart
    or a stall claim (the server is in a prompt).

    Not asserted: the fix (a build whose checkpoint restore works for ``qwen35moe``; no dial of the advisor's).

    Chosen where the report is silent, and the stand-ins: Qwen3.6-35B-A3B is not in the advisor's tables; Qwen3.5-27B's
    published ``config.json`` (the same 3-of-4 linear-attention hybrid layout; rounds 14, 39 and 43's stand-in), its
    weights sized as the checkpoint's bf16 (the advisor sizes no GGUF of ``qwen3_5``; 54 GB fit the device either
    way); the Strix Halo is not in the GPU catalog: its 124 GiB of GPU-addressable memory (round 43's figure for
    the same APU) stand for it. The moment: 30 identical requests (20,016 prompt tokens, 1 generated) served before,
    the next one in its prompt; in the window one ``llama_decode`` of its 4,096-token batch ends (llama.cpp adds a
    request's token counts when it ends). The build's exposition: the 2026 rows without KV gauges, with
    ``n_tokens_max`` 20,017.
    """
    c1 = _counters(30, 20_016.0, 1.0, 0.02, prompt_tps=365.32)
    c1["busy_avg"] = 1.0
    c1["decodes"] = 30 * 6.0  # five 4,096-token prompt batches + one decode a request
    c2 = dict(c1, decodes=c1["decodes"] + 1.0)
    return FieldState(
        id="llamacpp-hybrid-qwen36-identical-20k-prompt-reprefilled-cache-n-0",
        source="https://github.com/ggml-org/llama.cpp/issues/23030",
        engine_version="llama.cpp b8935 / b9131 (May 2026; no KV gauges; --parallel 1, HIP)",
        deployment={
            "name": "lemonade-qwen36-35b-a3b-strix",
            "engine": "llamacpp",
            "model": QWEN35_27B_CONFIG,
            "gpu_memory_gib": 124.0,
            "max_model_len": 262_144,
            "ctx_size": 262_144,
            "parallel": 1,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp([*_llamacpp_rows(c1, busy=1, deferred=0, kv=None), _longest(20_017.0)]),
                _llamacpp([*_llamacpp_rows(c2, busy=1, deferred=0, kv=None), _longest(20_017.0)]),
            )
        ],
        snapshot={"requests_running": 1, "requests_waiting": 0},
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            *POOL_TURNS,
            ("speculative_decoding", "enable"),
            ("prefix_caching", None),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(20_017), no_stall_claimed),
    )


# --- 2. Triton TensorRT-LLM: KV-cache block reuse on, no time saved, a pool 14.7x the batch ------------------------


def triton_trtllm_kv_reuse_no_gain() -> FieldState:
    """NVIDIA/TensorRT-LLM#2894 ("With both enable_kv_cache_reuse and use_paged_context_fmha enabled, the expected
    optimization in time consumption for the Qwen model was not observed", March 2025, closed, labelled "not a bug"):
    "there is no significant difference in time consumption whether I enable or disable enable_kv_cache_reuse";
    ``trtllm-build … --max_batch_size 8 --max_input_len 2048 --max_seq_len 4096 --kv_cache_type paged
    --tokens_per_block 64 --remove_input_padding enable --context_fmha enable --use_paged_context_fmha enable
    --gpt_attention_plugin float16 --gemm_plugin float16 --low_latency_gemm_plugin fp8 --use_fused_mlp enable``, and
    in Triton's ``tensorrt_llm/config.pbtxt`` ``enable_kv_cache_reuse`` ``"true"``. The log: "Memory usage when
    calculating max tokens in paged kv cache: total: 44.32 GiB, available: 28.59 GiB", "Number of blocks in KV cache
    primary pool: 7528", "Number of tokens per block: 64.", "Allocated 25.73 GiB for max tokens in paged KV cache
    (481792)", "TensorRT-managed allocation … GPU 14541 (MiB)".

    Engine facts (TensorRT-LLM's ``kv-cache-reuse`` guide): block reuse skips the context (prefill) phase of the full
    blocks a previous request computed — "Only full blocks can be shared" — and nothing of the generation phase;
    reuse needs a paged context FMHA engine, which this one is. Arithmetic: 25.73 GiB for 481,792 tokens is 56 KiB a
    token — 28 layers × 2 × 4 KV heads × 128 × 2 B, a Qwen2/2.5-7B (the 14.5 GB engine agrees). The engine runs at
    most 8 sequences of at most 4,096 tokens: 32,768 tokens, 6.8 % of the pool — the rest keeps reusable blocks. So
    the reuse that is on is the engine's whole prefix cache; a request of ~1,000 prompt tokens and a few hundred
    output tokens at ~20 ms a token spends seconds decoding and a few tens of milliseconds in a prefill reuse could
    skip: no measurable gain is what the engine does, not a defect ("not a bug"). Must never: a prefix-caching turn
    (reuse is on), a pool turn (the pool is 14.7× what the batch can write), fewer sequences (8 are the built batch,
    one runs), replicas (one second), a restart or a stall claim (the engine iterates), a context cap under the
    built 4,096.

    Not asserted: a smaller pool (spare blocks are where reused prefixes live; whether the advisor may propose
    shrinking them for an idle test bench is its KV-budget rule's business).

    Chosen where the report is silent, and the stand-ins: Qwen2.5-7B-Instruct for the report's "Qwen model" (the 56
    KiB a token identifies the geometry); an L40S for the 44.32 GiB card (an fp8 low-latency GEMM needs Ada or
    Hopper; the L40S's 44.7 GiB is the nearest in the catalog); the Triton template's
    ``kv_cache_free_gpu_mem_fraction`` 0.9 (28.59 GiB available × 0.9 = 25.73 GiB: the log's figure). The moment: one
    client's timing loop — one request active and scheduled (a ~1,000-token prompt sharing its first 960 tokens
    with the previous one, 15 full blocks reused, generating), 26 blocks used; 200 requests served before, one ending
    in the window and the next taking its place. Triton 25.02's backend (TensorRT-LLM 0.17): the ``_metrics``
    families, no ``waiting`` gauge, no ``fraction``.
    """
    blocks1 = {"tokens_per": 64.0, "used": 26.0, "free": 7_502.0, "max": 7_528.0}
    blocks2 = {"tokens_per": 64.0, "used": 17.0, "free": 7_511.0, "max": 7_528.0}
    first = _triton_trtllm(active=1, scheduled=1, context=0, max_batch=8, blocks=blocks1, success=200)
    second = _triton_trtllm(active=1, scheduled=1, context=1, max_batch=8, blocks=blocks2, success=201)
    return FieldState(
        id="triton-trtllm-qwen-7b-kv-reuse-on-no-gain-pool-481792-batch-8",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/2894",
        engine_version="Triton 25.02 tensorrtllm backend 0.17 (nv_trt_llm_*_metrics, no waiting gauge)",
        deployment={
            "name": "qwen-7b-triton-kv-reuse",
            "engine": "triton-trtllm",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "served_model": "tensorrt_llm",
            "gpu": "l40s",
            "max_model_len": 4_096,
            "max_num_seqs": 8,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": 481_792},
        must_never=[
            ("prefix_caching", None),
            *POOL_TURNS,
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(_cap_at_least(4_096), no_stall_claimed),
    )


# --- 3. TGI 1.3.3: CodeLlama-34B int8 on one A100 40 GB, a 4,000-token request out of memory ----------------------


CODELLAMA_34B_CONFIG = """{
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
  "num_hidden_layers": 48, "hidden_size": 8192, "num_attention_heads": 64, "num_key_value_heads": 8,
  "intermediate_size": 22016, "vocab_size": 32000, "max_position_embeddings": 16384,
  "rope_theta": 1000000, "tie_word_embeddings": false
}
"""
"""``codellama/CodeLlama-34b-Instruct-hf``'s ``config.json`` (not in the advisor's tables): 48 layers, 64 heads of
128 with 8 KV heads, 16,384 positions."""


def tgi_codellama34b_eetq_a100_40gb_oom() -> FieldState:
    """huggingface/text-generation-inference#1374 ("Unexpected OOM after warmup for request that has token less than
    max-batch-prefill-token", December 2023, closed): "text-generation-inference: 1.3.3 machine GPU: A100 40GB";
    "--model-id codellama/CodeLlama-34b-Instruct-hf --num-shard 1 --max-concurrent-requests 1 --max-input-length 6800
    --max-total-tokens 6900 --max-batch-prefill-tokens 7000 --max-stop-sequences 20 --trust-remote-code --quantize
    eetq"; "The server is ready to serve but OOM for request with token 4000 and max_token=40": "Request failed
    during generation: Server error: CUDA out of memory. Tried to allocate 42.00 MiB. GPU 0 has a total capacty of
    39.39 GiB of which 31.94 MiB is free. Process 7529 has 39.23 GiB memory in use. Of the allocated memory 37.21 GiB
    is allo[cated by PyTorch]".

    Engine facts (TGI 1.3): the launcher warms up with a ``--max-batch-prefill-tokens`` prefill and sizes the token
    budget (``max_batch_total_tokens``) from what memory is left; ``--cuda-memory-fraction`` (the memory budget)
    defaults to 1.0, its maximum; ``--max-concurrent-requests 1`` lets one request in at a time; validation refuses
    a request whose input + ``max_new_tokens`` exceeds ``--max-total-tokens``; EETQ stores the linear layers' weights
    in int8. Arithmetic: CodeLlama-34B's ~32.6 B linear weights are ~32.6 GB in int8, plus 1.05 GB of fp16 embedding
    and head: ~31.3 GiB of a 39.39 GiB card, ~8 GiB for the KV cache, the prefill's activations and the allocator.
    The failing request needs 4,000 + 40 tokens × 192 KiB (48 layers × 2 × 8 × 128 × 2 B) = 0.74 GiB of KV; the card
    is full (31.94 MiB free), the process holds 39.23 GiB. So: never a larger memory budget (there is none: 1.0; the
    memory is what ran out), never more concurrent sequences (one at a time already OOMs), never replicas (one second;
    each replica is the same card), never a pool turn that grows the KV budget (it takes more of the same full card),
    never a ``--max-total-tokens`` cap under 4,040 (it refuses the request the report needs served).

    Not asserted: a remedy — the thread gives none (more memory: a second shard or an 80 GB card; lighter weights).

    Chosen where the report is silent: the config above with ``quantization: int8`` (EETQ is int8 weight-only; the
    advisor has no ``eetq``); the moment: 5 shorter requests (~1,500 prompt tokens, 40 generated at ~45 ms a token)
    served before; in the window the 4,000-token request arrives, runs its prefill and fails (``tgi_request_failure
    {err="generation"}``), so the batch goes from 1 to 0, nothing queued. TGI 1.3.3 exposes no
    ``tgi_batch_max_total_tokens`` (v2.3.1+).
    """
    tgi = TGIRouter(max_input=6_800, max_total=6_900, budget=None)
    tgi.arrive(5, prompt=1_500, max_new=40)
    tgi.finish(5, generated=40, tpot=0.045, queue=0.01)
    first = tgi.render()
    tgi.arrive(1, prompt=4_000, max_new=40)
    tgi.failure["generation"] = 1.0
    second = tgi.render()
    return FieldState(
        id="tgi-1.3.3-codellama34b-eetq-a100-40gb-4000-token-request-oom",
        source="https://github.com/huggingface/text-generation-inference/issues/1374",
        engine_version="TGI 1.3.3",
        deployment={
            "name": "codellama34b-eetq-tgi-a100-40gb",
            "engine": "tgi",
            "engine_version": "1.3.3",
            "model": "codellama-34b.json",
            "quantization": "int8",
            "gpu": "a100-40gb",
            "tensor_parallel_size": 1,
            "max_model_len": 6_900,
            "max_num_batched_tokens": 7_000,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        files={"codellama-34b.json": CODELLAMA_34B_CONFIG},
        snapshot={"requests_running": 0, "requests_waiting": 0},
        must_never=[
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_memory_bytes", "increase"),
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
        ],
        extra_check=_cap_at_least(4_040),
    )


STATES = [
    llamacpp_hybrid_identical_prompt_reprefilled(),
    triton_trtllm_kv_reuse_no_gain(),
    tgi_codellama34b_eetq_a100_40gb_oom(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
