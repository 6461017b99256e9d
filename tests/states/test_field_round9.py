"""Field states, round 9: vLLM V1, llama.cpp server, TGI and TensorRT-LLM, from four public reports.

Each row is built from one operator's public report (``source``): the deployment as the report states it (where it
does not, or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and
two scrapes one second apart rendered by :class:`tests.states.VLLMEngine` (the V1 families of
``vllm/v1/metrics/loggers.py``), the ``llama-server --metrics`` rows of :mod:`tests.states.test_field_round3_others`,
:class:`tests.states.test_field_round3_others.TGIRouter` (the router's ``metrics-exporter-prometheus`` names) and
:class:`tests.states.test_field_round4_others.TRTLLMServe` (``trtllm-serve``'s ``collector.py`` names). The pools are
the capacity pass's (``capacity-advisor plan``) for each stand-in.

This round looks for states where a wrong turn is tempting and the advisor must stay quiet, or turn one dial and not
its neighbour. The assertions are written from the reports' numbers, the fix the thread establishes and engine facts,
never from the advisor's output:

* ``vllm-0.24-turing-fp8-kv-refused-pool-full`` — vLLM 0.24 refuses an fp8 KV cache on compute capability 7.5
  ("native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype float16"); the operator runs fp16 KV and the
  pool fills. Whatever else is proposed, never the KV dtype (the engine would not start), never replicas on one
  second, never a restart.
* ``llamacpp-rtx5090-32-slots-host-sampling-bound`` — 32 slots at ~706 tokens/s aggregate, TPOT 41 ms, the GPU idle
  while the host copies logits and samples; ``-bs`` (backend sampling) lifts it to 1,046 tokens/s. The SLO is met
  and nothing waits: no advice (no more slots, no GPU, no pool turn).
* ``tgi-reserves-max-new-tokens-queue-while-generating-few`` — TGI admits by ``input + max_new_tokens`` while the
  requests stop far earlier; the queue is the reservation, by design. Never replicas on one second, a restart, a
  larger batch cap (the token budget admits, not the count), a memory budget TGI does not have, or a context cap
  below what the requests ask for.
* ``trtllm-a10-qwq-32b-one-big-max-tokens-blocks-the-rest`` — one request with a very large ``max_tokens`` reserves
  nearly the whole 8,096-token pool under ``GUARANTEED_NO_EVICT``; the others wait until it ends. Never more batch
  slots (1 of 16 used), a larger memory fraction, more TP, replicas on one second, a restart.

A fifth report was looked for where the right advice is a replica count from sustained load
(llm-d/llm-d-autoscaling#1249: one Qwen3-32B replica knees at 2 RPS, peaks at 3 RPS, fails from 4; "20 RPS requires
~7-10 replicas"). Its evidence is a 300-s-per-stage sweep, and a replica count needs ≥ 30 s and ≥ 4 scrapes of
history (``rules.replicas.min_history``), which ``once`` does not have; the report also gives neither the engine's
gauges nor the request shape, so it is not replayed here.

``once`` sees about one second of history, so no replica count may be proposed where a queue exists (it needs
≥ 30 s of history to measure an arrival rate); every such row says so with ``("replicas", "increase")`` in
``must_never``.
"""

from __future__ import annotations

from tests.states import VLLMEngine
from tests.states.field import (
    FieldState,
    round_tests,
)
from tests.states.test_field_round3_others import (
    KV_GROWING_TURNS,
    TGIRouter,
    _cap_at_least,
    _llamacpp,
    _llamacpp_rows,
)
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round4_others import TRTLLMServe
from tests.states.test_field_round5 import _all

# --- 1. vLLM 0.24 on Turing: fp8 KV is refused, the fp16 pool fills -------------------------------------------------


def vllm_turing_fp8_kv_refused() -> FieldState:
    """vllm-project/vllm#47549 ("REGRESSION: FP8 KV cache FlashInfer no longer available as attention backend on SM75
    (Turing) in v0.24.0", open): NVIDIA Quadro RTX 8000 (SM 7.5, 48 GB), ``cyankiwi/MiniMax-M2.7-AWQ-4bit``
    (compressed-tensors WNA16). v0.23.0: "Using FLASHINFER attention backend … Using fp8 data type to store kv cache.
    GPU KV cache size: 287,744 tokens"; v0.24.0: "Using TRITON_ATTN attention backend out of potential backends:
    ['TRITON_ATTN']" then "ValueError: FP8 KV cache is not supported by the Triton attention backend on Quadro RTX
    8000 (compute capability 7.5); native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype float16". The
    fix proposed for it (vllm-project/vllm#47949, closed) was withdrawn: "the SM80 floor in
    ``FlashInferBackend.supports_compute_capability`` is an intentional guard, not a regression … the FP8 paged-prefill
    kernel still crashes … on SM75" (FlashInfer is broken on SM75 upstream, flashinfer-ai/flashinfer#3620).

    Arithmetic: on 0.24 the operator can only run the error's own instruction, ``--kv-cache-dtype float16``: the same
    memory holds half the tokens (287,744 → ~143,872 for the report's model). A load that filled the fp8 pool fills
    this one at half the concurrency, so it runs full, preempts and queues. The tempting turn — fp8 KV "halves the
    bytes per token" — is exactly the configuration this engine refuses to start on this GPU. Never
    ``kv_cache_dtype`` (any action); never replicas on one second of history; never a restart (the engine serves:
    counters move). Nothing is required: the report establishes no other dial.

    Chosen: MiniMax-M2.7 and the Quadro RTX 8000 are not in the advisor's tables; Qwen2.5-7B-Instruct in AWQ (fp16
    activations: Turing has no bf16) on one T4 — the same compute capability 7.5 — stands in, ``max_model_len``
    8,192, ``gpu_memory_utilization`` 0.9: the capacity pass gives 7,783 blocks of 16 = 124,528 tokens at fp16 (and
    249,056 at fp8, the turn the engine refuses). Contexts of ~3,000 tokens (2,600 prompt, ~400 generated at 60 ms):
    40 run (~120,000 tokens, 97 % of the pool), 12 wait; before: 900 requests served, 30 preemptions. The window:
    one finishes, one is admitted, one more preemption; KV 97 → 98 %. vLLM 0.24 rendered with the 0.33 label set
    (``cache_dtype`` auto). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2.5-7B-Instruct-AWQ",
        num_gpu_blocks=7_783,
        max_model_len=8_192,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.finish(900, prompt=2_600, output=400, ttft=3.0, tpot=0.06, queue=2.4)
    eng.first_tokens([0.6] * 500 + [4.0] * 250 + [8.0] * 150)
    eng.prefill(940 * 2_600 + 30 * 2_800)
    eng.decode(900 * 400 + 40 * 200, 0.06)
    eng.preempt(30)
    eng.running, eng.waiting, eng.kv_usage = 40.0, 12.0, 0.97
    first = eng.render()
    eng.finish(1, prompt=2_600, output=400, ttft=8.0, tpot=0.06, queue=7.4)
    eng.first_tokens([8.0])
    eng.prefill(2_600 + 2_800)
    eng.decode(40 * 16, 0.06, steps=16, batch=40)
    eng.preempt(1)
    eng.kv_usage = 0.98
    return FieldState(
        id="vllm-0.24-turing-fp8-kv-refused-pool-full",
        source="https://github.com/vllm-project/vllm/issues/47549",
        engine_version="vLLM 0.24.0 (rendered with the 0.33 label set)",
        deployment={
            "name": "qwen7b-awq-t4",
            "engine": "vllm",
            "engine_version": "0.24.0",
            "model": "Qwen/Qwen2.5-7B-Instruct",
            "served_model": "Qwen/Qwen2.5-7B-Instruct-AWQ",
            "gpu": "t4",
            "quantization": "awq",
            "dtype": "float16",
            "kv_cache_dtype": "auto",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 40, "requests_waiting": 12, "kv_cache_capacity_tokens": 124_528},
        must_never=[("kv_cache_dtype", None), ("replicas", "increase"), RESTART],
        extra_check=no_stall_claimed,
    )


# --- 2. llama.cpp server: 32 slots on one RTX 5090, bound by host-side sampling ----------------------------------


def llamacpp_32_slots_host_sampling_bound() -> FieldState:
    """ggml-org/llama.cpp#27050 ("Server: backend sampling (-bs) gives +48% throughput at 32 slots (706 -> 1046
    tok/s)"): "While benchmarking ``llama-server`` at high concurrency on a single RTX 5090, I found that generation
    throughput saturates around **700 tok/s** with 32 slots, and that Nsight Systems attributes this to the server
    copying the **entire logits matrix device-to-host on every decode step** (16.2 MB per step at batch 32)"; "45% of
    the application's on-CPU samples are in ``common_sampler_sample()``"; "``-bs`` / ``--backend-sampling`` … raises
    throughput to **~1046 tok/s (+48%)**, with TPOT dropping from 41.2 ms to 25.4 ms … Single-slot performance is
    unchanged".

    Arithmetic: 32 busy slots × 1 token per 41.2 ms = 777 tokens/s of decode, ~706 measured: the loop is the host's
    (logits copy and CPU sampling between GPU steps), not the GPU's, not the cache's. The SLO (TPOT 100 ms) is met
    2.4 times over and nobody waits (a closed-loop benchmark of 32 clients on 32 slots). So nothing the advisor turns
    is right: more slots add to a host-bound loop that has saturated; replicas, TP or a bigger pool add GPUs or memory
    to a step the GPU is idle in; the fix (``-bs``) is a server flag outside its dials. No advice.

    Chosen: the report does not name its model in the quoted text; Llama-3.1-8B-Instruct (Q4 GGUF) stands in on the
    report's RTX 5090, ``-c 65536 -np 32`` (2,048 cells a slot); prompts of ~128 tokens, ~256 generated (10.5 s a
    request at 41.2 ms). llama.cpp of August 2026 exposes no KV gauges (removed by PR #13660). Generation counters
    advance when a slot is released: ~3 releases a second, 768 tokens and 31.7 slot-seconds of generation; 24
    decode calls a second at 32 busy slots each. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    c1 = {"prompt": 384_000.0, "prompt_s": 150.0, "gen": 768_000.0, "gen_s": 31_640.0, "decodes": 72_000.0}
    c1 |= {"busy_avg": 32.0, "prompt_tps": 2_560.0, "gen_tps": 24.3}
    c2 = dict(c1, prompt=384_384.0, prompt_s=150.15, gen=768_768.0, gen_s=31_671.7, decodes=72_024.0)
    return FieldState(
        id="llamacpp-rtx5090-32-slots-host-sampling-bound",
        source="https://github.com/ggml-org/llama.cpp/issues/27050",
        engine_version="llama.cpp server of August 2026 (no KV gauges; CPU sampling, -bs off)",
        deployment={
            "name": "llama8b-5090-np32",
            "engine": "llamacpp",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "rtx5090",
            "max_model_len": 2_048,
            "ctx_size": 65_536,
            "parallel": 32,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=32, deferred=0, kv=None)),
                _llamacpp(_llamacpp_rows(c2, busy=32, deferred=0, kv=None)),
            )
        ],
        snapshot={"requests_running": 32, "requests_waiting": 0},
        no_advice=True,
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("tensor_parallel_size", "increase"),
            *KV_GROWING_TURNS,
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. TGI: admission reserves input + max_new_tokens, requests stop far earlier, the rest queue ------------------


def tgi_reserves_max_new_tokens() -> FieldState:
    """huggingface/text-generation-inference#1435 ("Is it possible to allocate blocks on demand during the decoding
    phase?", closed): "during the ``prefill`` stage, TGI preallocates blocks based on ``input_length`` and
    ``max_new_tokens`` … in our scenario, the actual number of generated tokens may be much smaller than
    ``max_new_tokens``. This results in a higher number of preallocated blocks compared to the actual number of
    blocks used, leading to reduced participation of requests in batch grouping. When the concurrent number of
    requests exceeds the batch size, some requests have to wait in the queue." The maintainer: "This would have other
    consequences which makes it very impratical. If you allow more users in the batch, and those requests *do* reach
    max_new_tokens..." — the reservation is the design (no eviction); the request's ``max_new_tokens`` is what sizes it.

    Arithmetic: each request reserves 500 + 1,500 = 2,000 tokens of the ~60,000-token batch budget, so 30 run; they
    stop after ~150 generated, so ~650 tokens each are written (32 % of what is reserved). The queue (40) is that
    reservation, not a lack of GPUs or of memory. So: never replicas (one second of history; a closed-loop client
    count is not an arrival rate); never a restart (the engine serves ~4 requests a second); never a larger batch cap
    (``--max-batch-size``; admission stops at the token budget, not at a count); never a larger memory budget (TGI's
    ``--cuda-memory-fraction`` is already 1.0, its maximum); never a context cap below 2,000 (TGI's validation would
    then refuse these very requests: ``input + max_new_tokens`` must fit ``--max-total-tokens``). The fix — clients
    asking for the ``max_new_tokens`` they use — is not a dial the advisor turns, so nothing is required.

    Chosen where the report is silent: TGI 1.3.4 (January 2024); Llama-2-13B on one A100-SXM-80GB (budget ~60,000
    tokens, as warm-up infers it: 80 GB − 26 GB of weights − activations, at 800 KiB a token), ``--max-input-length``
    2,048, ``--max-total-tokens`` 4,096; prompts of ~500 tokens with ``max_new_tokens`` 1,500, ~150 generated at
    45 ms. Before: 1,200 served; the window: 4 finish (queued ~10 s), 4 arrive, queue 40 → 40. TGI 1.3 exposes no
    ``tgi_batch_max_total_tokens`` (v2.3.1+). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    tgi = TGIRouter(max_input=2_048, max_total=4_096, budget=None)
    tgi.arrive(1_270, prompt=500, max_new=1_500)
    tgi.finish(1_200, generated=150, tpot=0.045, queue=9.0)
    tgi.queue, tgi.batch, tgi.reserved = 40.0, 30.0, 60_000.0
    first = tgi.render()
    tgi.arrive(4, prompt=500, max_new=1_500)
    tgi.finish(4, generated=150, tpot=0.045, queue=10.0)
    return FieldState(
        id="tgi-reserves-max-new-tokens-queue-while-generating-few",
        source="https://github.com/huggingface/text-generation-inference/issues/1435",
        engine_version="TGI 1.3.4 (January 2024)",
        deployment={
            "name": "llama13b-tgi-reserve",
            "engine": "tgi",
            "model": "meta-llama/Llama-2-13b-hf",
            "gpu": "a100-80gb",
            "max_model_len": 4_096,
            "slo": SLO,
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": 30, "requests_waiting": 40},
        must_never=[
            ("replicas", "increase"),
            RESTART,
            ("max_num_seqs", "increase"),
            ("gpu_memory_utilization", "increase"),
        ],
        extra_check=_all(_cap_at_least(2_000), no_stall_claimed),
    )


# --- 4. TensorRT-LLM: one request's very large max_tokens reserves the whole pool, the others wait ------------------


def trtllm_one_big_max_tokens_blocks() -> FieldState:
    """NVIDIA/TensorRT-LLM#2866 ("Parallel requests will be blocked if one request set very big max_tokens.",
    closed): "GPU: A10(24G mem) LLM: QwQ-32B-AWQ tensorrt-llm: 0.16.0"; ``trtllm-build … --max_batch_size 16
    --paged_kv_cache enable --use_paged_context_fmha enable --max_input_len 11776 --max_seq_len 12288
    --max_num_tokens 11776``; "when one request set very big max_tokens, other requests will be blocked [until] the
    request end". The engine fact (the capacity scheduler's default ``GUARANTEED_NO_EVICT``, as ai-dynamo/dynamo#10093
    describes it): a request "reserves the worst case: ``max_output_tokens`` KV blocks even if the actual OSL ends up
    shorter".

    Arithmetic: AWQ weights of a 32B model take ~18 GiB of the A10's 22 GiB; at ``free_gpu_memory_fraction`` 0.9 the
    pool is ~2 GiB = 253 blocks of 32 = 8,096 tokens (256 KiB a token), below ``max_seq_len`` 12,288. A request of
    ~1,000 prompt tokens with ``max_tokens`` 7,000 reserves ~8,000 tokens, 99 % of the pool: nothing else fits until
    it ends, while the blocks actually written are a few hundred and 15 of 16 batch slots are empty. So: never more
    batch slots (1 of 16 used); never a larger memory fraction (0.9 → 0.95 adds ~110 MiB, ~450 tokens: still one
    reservation); never more TP (doubling the A10s to admit a second reservation where one request's ``max_tokens``
    is the cause); never replicas on one second of history; never a restart (working as designed: the reply cites
    the scheduler's token limits). What the thread establishes is the request's ``max_tokens``, not an engine dial,
    so nothing is required.

    Chosen: QwQ-32B is not in the advisor's tables; Qwen2.5-32B-Instruct (its base architecture: 64 layers, 8 KV
    heads) in AWQ stands in, and the capacity pass's pool (253 blocks) is rendered. The report's 0.16 engine was run
    through the C++ executor; the rows are ``trtllm-serve``'s (``collector.py`` names of main 2026). The moment: the
    big request has run ~40 s (written ~1,000 + 600 tokens = 50 blocks, reserved 250); 5 short requests (~600
    prompt, ``max_tokens`` 512) wait; before: 20 short requests served (TTFT up to ~40 s, nearly all queued). The
    window: 15 tokens decoded, nothing finishes. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen2.5-32B-Instruct"
    srv = TRTLLMServe("QwQ-32B-AWQ")
    srv.finish(20, prompt=600, output=300, ttft=20.0, tpot=0.065, queue=19.5)
    srv.gauges(running=1.0, waiting=5.0, paused=0.0, max_blocks=253.0, used=50.0, max_batch=16.0)
    first = srv.render()
    srv.c["generation_tokens"] += 15.0
    srv.gauges(running=1.0, waiting=5.0, paused=0.0, max_blocks=253.0, used=51.0, max_batch=16.0)
    return FieldState(
        id="trtllm-a10-qwq-32b-one-big-max-tokens-blocks-the-rest",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/2866",
        engine_version="TensorRT-LLM 0.16.0 (C++ executor; replayed with the trtllm-serve collector.py names)",
        deployment={
            "name": "qwq32b-awq-a10-trtllm",
            "engine": "trtllm",
            "model": model,
            "served_model": "QwQ-32B-AWQ",
            "gpu": "a10",
            "quantization": "awq",
            "max_model_len": 12_288,
            "max_num_seqs": 16,
            "slo": SLO,
        },
        scrapes=[(first, srv.render())],
        snapshot={"requests_running": 1, "requests_waiting": 5, "kv_cache_capacity_tokens": 8_096},
        must_never=[
            ("max_num_seqs", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_turing_fp8_kv_refused(),
    llamacpp_32_slots_host_sampling_bound(),
    tgi_reserves_max_new_tokens(),
    trtllm_one_big_max_tokens_blocks(),
]


XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
