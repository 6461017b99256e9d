"""Field states, round 31: vLLM V1 pages whose gauges say "full", "stuck" or "slow" for a reason no capacity dial
touches — KV blocks pinned by prefill/decode handoffs whose clients are gone, an admission livelock on an empty pool,
a drafter that accepts almost nothing, weights streamed over PCIe every step by a stale flag — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine` (V1; the 0.11 label set for 2025 releases, the 0.33
set for 2026 ones). The assertions come from the reports' numbers, the verdict each thread establishes and engine
facts, never from the advisor's output:

* ``vllm-0.11-pd-prefill-pod-pool-pinned-by-aborted-handoffs`` — a prefill pod of a P/D deployment (NixlConnector):
  prefills the proxy cancels at its 20 s timeout in their final step finish as ``length`` and their blocks stay
  pinned for the decode side that never comes, "un-freeable … for 5 minutes"; retries land on the next pod and do the
  same. The pool is 99 % held by 39 finished requests, 14 wait, nothing runs. Not demand: never a pool turn, a TP
  raise, a concurrency or context cap, replicas.
* ``vllm-metal-qwen36-27b-livelock-six-waiting-on-an-empty-pool`` — an agent's six turns wait "for capacity" for an
  hour on a pool that is 0 % used and holds one 90,000-token request (prompts of 19–25K, ``max_tokens`` 8,192): the
  scheduler does not admit into an empty pool. Never a context cap, a pool turn, more sequences, replicas.
* ``vllm-0.20-gemma4-31b-mtp-acceptance-0.7pct-three-streams`` — a quantized target with an unquantized MTP
  drafter: mean acceptance length 1.03, 25 of 3,652 draft tokens accepted in 10 s, three streams. Speculation is
  pure cost: turning it off comes first; never a shorter draft, never "enable", never a pool turn.
* ``vllm-0.29-dsv4-flash-8xh20-stale-cpu-offload-35-tpot-19x`` — ``--cpu-offload-gb 35`` left over from a 4-card
  setup on 8 × H20 where all the weights fit: 120 tokens/s at 64 concurrent instead of 2,434. The step is the PCIe
  transfer of the offloaded weights: never more TP, quantized weights, fewer sequences, a pool turn, replicas, a
  restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, _spec_decode_lines, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round14 import QWEN35_27B_CONFIG, _hybrid_pool

# --- 1. vLLM 0.11, P/D prefill pod: the pool pinned by handoffs whose requests the proxy cancelled ------------------


def vllm_pd_prefill_pod_pool_pinned() -> FieldState:
    """vllm-project/vllm#29906 ("[Bugfix] Free requests to avoid a KV Cache exhaustion during
    VLLM_NIXL_ABORT_REQUEST_TIMEOUT", December 2025): "We encountered a "bug" with P/D disaggregation in our pre-prod
    env … Some requests were canceled on Prefill by our router/proxy because of a Timeout (let's say 20s here). …
    if you have a lot of requests that will take 20s to prefill … The requests finish the Prefill in 20s [and] The
    request timeout after 20s! And you trigger an abort. But (on main) the request is unfree-able because the NIXL
    KVConnector considers that requests with FINISHED_LENGTH_CAPPED should be delayed … => this request is now in an
    un-freeable state for 5 minutes (ie. the default VLLM_NIXL_ABORT_REQUEST_TIMEOUT). The requests will be retried
    on another instance, and create the same issues. If you are unlucky with a lot of requests similar, you exhaust
    the available KV Cache". The fix that landed (vllm-project/vllm#29987, "Eagerly abort cancelled final-step
    requests"): "when requests are cancelled while executing their final step, "completion" of those requests is
    subsequently handled based on normal stop processing (e.g. length …) … Since the top-level request was cancelled,
    it will never be sent to the decode side and so the kv cache blocks remain pinned unnecessarily until the
    fall-back timeout expires. The problem is exacerbated when a large number of requests are cancelled and/or there
    are large prefills".

    Engine facts: a prefill pod runs each request with ``max_tokens`` 1 (``do_remote_decode``), so every request
    finishes ``length`` after one token; the NixlConnector's ``request_finished`` then delays freeing its blocks
    (``delay_free_blocks``) until the decode side has read them or the abort timeout expires. The pinned blocks belong
    to no running or waiting request: ``kv_cache_usage_perc`` counts them used while ``num_requests_running`` is 0.
    The V1 scheduler admits a waiting request only when its first chunk (``max_num_batched_tokens``) gets blocks, so
    with fewer free blocks than one chunk nothing is admitted and nothing moves. Arithmetic: a 16,300-token prompt
    holds 1,019 blocks of 16; 39 pinned handoffs hold 39,741 of the 39,980 blocks (99.4 %); the 238 left (3,808
    tokens) are short of one 8,192-token chunk, so the 14 retried and new prefills wait; in ≤ 5 minutes the pins
    expire. So must never: a pool turn (fp8 KV, a larger budget, quantized weights) or a TP raise — a pool twice the
    size holds twice the stranded handoffs of the next wave of cancelled retries; a concurrency or context cap (no
    running sequence holds the pool, and 16,300-token prompts are half the context); replicas (one second; and the
    report's retries strand blocks on "another instance" the same way).

    Not asserted: a restart (it frees the pins now but drops the queued prefills; the pins expire on their own) and
    the engine fix itself (an upgrade is not among the advisor's dials).

    Chosen where the report is silent: the model and hardware (Llama-3.1-70B-Instruct in fp8 at TP 4 on H100 SXM,
    ``max_model_len`` 32,768, ``max_num_batched_tokens`` 8,192; the pool is the capacity pass's, 39,980 blocks of 16),
    the burst (16,300-token RAG prompts) and the history: 2,000 prefills handed over normally (TTFT ~1.8 s), then the
    burst's 39 whose prefill ended as the proxy's timeout fired (TTFT ~20 s, counted as finished ``length``). The
    connector's own families (``vllm:nixl_*``) are not rendered. vLLM 0.11.2 with the 0.11 label set. SLO: TTFT 20 s
    (the proxy's timeout), TPOT 0.1 s.
    """
    model = "meta-llama/Llama-3.1-70B-Instruct"
    blocks, prompt = 39_980, 16_300
    eng = VLLMEngine(model_name=model, num_gpu_blocks=blocks, max_model_len=32_768, gpu_memory_utilization=0.9)
    # 2,000 handoffs read by the decode side, then 39 whose final prefill step met the proxy's 20 s abort
    eng.finish(2_000, prompt=prompt, output=1, ttft=1.8, tpot=0.0, queue=0.3, reason="length", max_tokens=1)
    eng.finish(39, prompt=prompt, output=1, ttft=20.0, tpot=0.0, queue=14.0, reason="length", max_tokens=1)
    eng.first_tokens([1.8] * 2_000 + [20.0] * 39)
    eng.prefill(2_039 * prompt, cached=2_039 * 1_200)
    eng.counters["vllm:generation_tokens"] += 2_039
    eng.hists["vllm:iteration_tokens_total"].observe(8_192, 2_039 * prompt / 8_192)
    pinned = 39 * 1_019
    eng.running, eng.waiting, eng.kv_usage = 0.0, 14.0, pinned / (blocks - 1)
    page = eng.render()
    # the window: no chunk gets blocks, so nothing is admitted, prefilled or finished; the pins hold
    return FieldState(
        id="vllm-0.11-pd-prefill-pod-pool-pinned-by-aborted-handoffs",
        source="https://github.com/vllm-project/vllm/pull/29906",
        engine_version="vLLM 0.11.2, P/D prefill pod with NixlConnector (0.11 label set)",
        deployment={
            "name": "llama70b-pd-prefill",
            "engine": "vllm",
            "engine_version": "0.11.2",
            "model": model,
            "gpu": "h100-sxm",
            "quantization": "fp8",
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_batched_tokens": 8_192,
            "slo": {"ttft_seconds": 20.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(page, page)],
        snapshot={"requests_running": 0, "requests_waiting": 14, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("max_num_seqs", "decrease"),
            ("max_model_len", "decrease"),
            ("replicas", "increase"),
        ],
    )


# --- 2. vllm-metal: six turns wait "for capacity" for an hour on a pool that is 0 % used -----------------------------


def vllm_metal_livelock_empty_pool() -> FieldState:
    """vllm-project/vllm-metal#479 ("EngineCore livelocks with requests permanently stuck "waiting for capacity" on a KV
    cache reporting 0% usage — admission control never re-admits after a stall", closed): the page the reporter
    scraped: ``vllm:num_requests_running{…,model_name="mlx-community/Qwen3.6-27B-5bit"} 0.0``,
    ``vllm:num_requests_waiting … 6.0``, ``…_by_reason{…,reason="capacity"} 6.0``, ``…{reason="deferred"} 0.0``,
    ``vllm:kv_cache_usage_perc … 0.0``, ``vllm:cache_config_info{…,kv_cache_max_concurrency="1.0",
    num_gpu_blocks="118",kv_cache_size_tokens="90000",…} 1.0``; "Six requests queued over roughly an hour (each a
    separate turn sent by the client after the previous one appeared to hang …), every one blocked with reason
    ``capacity``, none with reason ``deferred`` — ruling out the KV-transfer/LoRA-budget explanations …
    ``num_requests_running=0`` and ``kv_cache_usage_perc=0.0`` at the same instant: there is nothing to wait for, but
    the scheduler will not admit a new request into the (entirely free) single available slot" (py-spy dumps of the
    stuck EngineCore on two occurrences). The reporter's answers: "Our client (Hermes) sends ``max_tokens: 8192`` on
    every request"; "Prompt size on the first stuck turn: consistently in the ~19,000-25,000 token range across every
    occurrence — well under the 90,000 ceiling".

    Engine facts: ``kv_cache_max_concurrency`` is the pool ÷ ``max_model_len`` (one full-length request fits, as the
    engine checks at boot); ``kv_cache_size_tokens`` is the group-aware pool of a hybrid (Qwen3.6-27B keeps the
    Qwen3.5 Gated-DeltaNet layout; its attention block is 784 tokens). Arithmetic: a stuck turn needs at most 25,000
    + 8,192 = 33,192 tokens, 37 % of the 90,000-token pool, and the pool is empty: every waiting request fits, so
    neither the context nor the pool is what holds them. So must never: a context cap (it frees nothing on an empty
    pool and would refuse nothing the client sends), a pool turn (0 % used), more sequences (nothing runs), replicas
    (one second; the hour-long queue is this engine's, not load).

    Not asserted: a restart (the only recovery the report's title implies, but ``once``'s one second cannot tell a
    livelock from a queue about to move — the advisor's own ``stalled`` needs several still intervals).

    Chosen where the report is silent, and the stand-ins: the Apple-silicon Mac is not in the advisor's GPU table; an
    RTX 5090 at a budget of 0.8 stands in (the capacity pass gives it 119 blocks of 784, ~93,700 tokens — the engine's
    118 blocks and 90,000 tokens); the MLX 5-bit checkpoint is rendered as the published Qwen3.5-27B ``config.json``
    (the same architecture) quantized 4-bit (``gptq``, the nearest width the tables hold), text only. History: 40 turns
    answered before the stall (~21,000-token prompts, 80 % from the prefix cache, ~700 tokens out at 60 ms, TTFT ~25
    s). The window: nothing moves. vLLM of July 2026 under vllm-metal, rendered with the 0.33 label set. SLO: TTFT 60 s,
    TPOT 0.1 s (an agent session; the report states none).
    """
    served = "mlx-community/Qwen3.6-27B-5bit"
    pool = max_len = 90_000
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=118,
        block_size=784,
        max_model_len=max_len,
        gpu_memory_utilization=0.8,
        version="0.33",
        started=time.time() - 6 * 3_600.0,
    )
    _hybrid_pool(eng, pool, max_len, "auto")
    eng.finish(40, prompt=21_000, output=700, ttft=25.0, tpot=0.06, queue=0.5, max_tokens=8_192)
    eng.first_tokens([25.0] * 40)
    eng.prefill(40 * 21_000, cached=40 * 16_800)
    eng.decode(40 * 699, 0.06, steps=40 * 699, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 0.0, 6.0, 0.0
    page = eng.render()
    return FieldState(
        id="vllm-metal-qwen36-27b-livelock-six-waiting-on-an-empty-pool",
        source="https://github.com/vllm-project/vllm-metal/issues/479",
        engine_version="vLLM of July 2026 under vllm-metal (0.33 label set)",
        deployment={
            "name": "qwen36-27b-metal-agent",
            "engine": "vllm",
            "model": QWEN35_27B_CONFIG,
            "served_model": served,
            "gpu": "rtx5090",
            "quantization": "gptq",
            "language_model_only": True,
            "gpu_memory_utilization": 0.8,
            "max_model_len": max_len,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(page, page)],
        snapshot={"requests_running": 0, "requests_waiting": 6, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("max_model_len", "decrease"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
        ],
    )


# --- 3. vLLM 0.20: Gemma 4 31B with an MTP drafter that accepts 0.7 % of its drafts ----------------------------------


def vllm_gemma4_mtp_acceptance_collapse() -> FieldState:
    """vllm-project/vllm#41789 ("[Bug]: gemma4 31B MTP Avg Draft acceptance rate: 0.2%", open), the reporter's engine
    (``v0.20.2rc1.dev49``, ``speculative_config=SpeculativeConfig(method='mtp',
    model='google/gemma-4-31B-it-assistant', num_spec_tokens=4)``, ``max_seq_len=65536``, ``tensor_parallel_size=1``,
    ``quantization=compressed-tensors``, ``kv_cache_dtype=fp8``) logs, per 10 s: "Avg prompt throughput: 1436.3
    tokens/s, Avg generation throughput: 93.9 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 36.1%,
    Prefix cache hit rate: 27.4%" and "SpecDecoding metrics: Mean acceptance length: 1.03, Accepted throughput: 2.50
    tokens/s, Drafted throughput: 365.14 tokens/s, Accepted: 25 tokens, Drafted: 3652 tokens, Per-position acceptance
    rate: 0.027, 0.000, 0.000, 0.000, Avg Draft acceptance rate: 0.7%" (the next 10 s: 15 of 1,724). The thread's
    reading: "I believe the MTP has to be at same quant as model … if you match a quantized model with unquantized
    MTP model it'll by definition missmatch"; the drafter PR (vllm-project/vllm#41745) found the target's
    ``quant_config`` "propagated from target to draft Linears".

    Engine facts: V1 counts drafts (one per sequence a round), draft tokens, accepted tokens and accepted tokens per
    position (``vllm/v1/spec_decode/metrics.py``); a round yields 1 + its accepted tokens, and
    ``inter_token_latency_seconds`` observes one gap per round. Arithmetic: 3,652 ÷ 4 = 913 drafts in 10 s, 91 a
    second over three streams (~30 rounds a second each, 33 ms a round); 1 + 25 ÷ 913 = 1.027 tokens a round, so 91 ×
    1.027 ≈ 94 tokens/s, the log's 93.9. Each round pays a draft pass and a five-token verification for 1.03 tokens;
    at one draft token the first position's 2.7 % still returns 1.027 a round for a draft pass each. So: turning
    speculation off comes first; never a shorter draft (no length pays at 2.7 % on the first position), never "enable"
    (it runs), never a pool turn (36 % used, nothing waits), never replicas (one second), never a restart.

    Chosen where the report is silent, and the stand-ins: Gemma 4 31B is not in the advisor's tables; Gemma 3 27B
    (``google/gemma-3-27b-it``, text only, the same family's sliding-window layout) stands in, in fp8 with fp8 KV on
    one H100 SXM, its drafter a 4-layer head of ~0.5B parameters (the assistant checkpoint's order); the pool is the
    capacity pass's for that deployment (9,330 blocks of 16). History: 150 requests answered (~15,000-token prompts,
    27 % from the prefix cache, ~800 tokens out at 32 ms, TTFT 2 s) at the report's acceptance. The window: 91 rounds
    over the three streams (364 draft tokens, 2 accepted at the first position), one request finishes and the next
    is prefilled (1,436 prompt tokens, 400 cached) and gets its first token. vLLM 0.20.2 rendered with the 0.33 label
    set. SLO: TTFT 5 s, TPOT 0.03 s (interactive; the report states none).
    """
    served = "/model"
    blocks = 9_330
    eng = VLLMEngine(
        model_name=served, num_gpu_blocks=blocks, max_model_len=65_536, gpu_memory_utilization=0.9, version="0.33"
    )
    eng.cache_labels["cache_dtype"] = "fp8"
    rate0, rnd = 0.027, 0.033

    def rounds(n: int) -> int:
        """``n`` rounds over the three streams: generation tokens, ITL gaps and step sizes (5 verified a stream)."""
        acc = round(n * rate0)
        eng.counters["vllm:generation_tokens"] += n + acc
        eng.hists["vllm:inter_token_latency_seconds"].observe(rnd, n)
        eng.hists["vllm:iteration_tokens_total"].observe(15, n / 3)
        return acc

    eng.finish(150, prompt=15_000, output=800, ttft=2.0, tpot=0.032, queue=0.05)
    eng.first_tokens([2.0] * 153)
    eng.prefill(153 * 15_000, cached=round(153 * 15_000 * 0.274))
    drafts = 150 * 779 + 3 * 300
    accepted = rounds(drafts)
    eng.running, eng.waiting, eng.kv_usage = 3.0, 0.0, 0.361
    first = eng.render() + _spec_decode_lines(eng, drafts, 4 * drafts, [accepted, 0, 0, 0])
    # the window: 91 rounds over the three streams, 2 of 364 draft tokens accepted; one request finishes and the next
    # is prefilled and answers its first token
    window = rounds(91)
    eng.finish(1, prompt=15_000, output=800, ttft=2.0, tpot=0.032, queue=0.05)
    eng.first_tokens([0.6])
    eng.prefill(1_436, cached=400)
    eng.kv_usage = 0.365
    second = eng.render() + _spec_decode_lines(eng, drafts + 91, 4 * (drafts + 91), [accepted + window, 0, 0, 0])
    return FieldState(
        id="vllm-0.20-gemma4-31b-mtp-acceptance-0.7pct-three-streams",
        source="https://github.com/vllm-project/vllm/issues/41789",
        engine_version="vLLM 0.20.2rc1 (rendered with the 0.33 label set)",
        deployment={
            "name": "gemma4-31b-mtp",
            "engine": "vllm",
            "engine_version": "0.20.2",
            "model": "google/gemma-3-27b-it",
            "served_model": served,
            "gpu": "h100-sxm",
            "quantization": "fp8",
            "kv_cache_dtype": "fp8",
            "language_model_only": True,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 65_536,
            "speculative_decoding": True,
            "speculative_config": {
                "method": "mtp",
                "num_speculative_tokens": 4,
                "draft_layers": 4,
                "draft_parameters": 500_000_000,
            },
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.03, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 3, "requests_waiting": 0, "kv_cache_capacity_tokens": blocks * 16},
        must_first=("speculative_decoding", "disable"),
        must_never=[
            ("speculative_decoding", "decrease"),
            ("speculative_decoding", "enable"),
            *POOL_TURNS,
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 4. vLLM 0.29: --cpu-offload-gb 35 left on 8 × H20 where the weights fit: 120 tokens/s instead of 2,434 ---------


def vllm_stale_cpu_offload_pcie_bound() -> FieldState:
    """vllm-project/vllm#57771 ("Docs: warn that --cpu-offload-gb is purely negative when weights fit in VRAM (~19x
    slowdown observed)", closed): "In that case it adds a per-decode-step PCIe round trip and collapses throughput
    with no benefit. We hit this on DeepSeek-V4.1-Flash on 8×H20: a stale default of ``--cpu-offload-gb 35`` (left
    over from a 4-card setup where weights did NOT fit) dropped throughput from **2434 to 120 tok/s (~19x)** at conc64
    once the same model was migrated to 8 cards where all 510 GB fit in VRAM … a user migrating a config to a
    bigger-GPU box keeps the flag and silently loses 95% of throughput." "Repro: 8×H20 (141 GB each), TP8, vLLM main
    (0.29.1rc1.dev), MXFP4 weights; conc64/mt=256 benchmark, unique markers, 0 errors."

    Engine facts: ``--cpu-offload-gb`` is per GPU; vLLM keeps that much of each rank's weights in pinned host memory
    and streams it to the GPU in every forward pass (``vllm/model_executor/offloader/uva.py``), so every decode step
    carries ~35 GiB per GPU over PCIe whatever the batch. Arithmetic: 120 tokens/s over 64 streams is 1.9 tokens/s a
    stream, a step of ~0.53 s (the PCIe transfer), against 2,434 ÷ 64 = 38 tokens/s (26 ms) without the flag. A
    higher TP keeps 35 GiB a GPU to stream (the flag is per GPU); quantized weights do not shrink what the flag
    offloads (it takes 35 GiB whatever the width); fewer sequences make each 0.53 s step carry fewer tokens; the pool
    is ~6 % used with nothing waiting. So must never: more TP, quantized weights, fewer sequences, a pool turn,
    replicas (one second), a restart (it serves; a restart with the same flags changes nothing).

    Not asserted: any advice on the flag itself (``cpu_offload_gb`` is not among the advisor's dials).

    Chosen where the report is silent, and the stand-ins: DeepSeek-V4.1-Flash is not in the advisor's tables;
    DeepSeek-V3 in fp8 (634 GiB, also all on 8 × 141 GB) stands in, at TP 8 on H20s of 141 GB (the table's H20 with
    ``gpu_memory_gib`` 139.81), ``max_model_len`` 8,192, ``cpu_offload_gb`` 35; the pool is the capacity pass's for
    that deployment (18,805 blocks of 64). The benchmark's prompts: ~1,000 tokens, 256 out (``mt=256``, finishing
    ``length``). History: 320 requests answered at TPOT 0.53 s (TTFT 0.6 s); 64 running. The window: 120 tokens over
    ~two steps, one request finishes and the next is prefilled and answers its first token. vLLM 0.29.1 rendered with
    the 0.33 label set. SLO: TTFT 5 s, TPOT 0.05 s (a benchmark; the report states none).
    """
    served = "deepseek-ai/DeepSeek-V4.1-Flash"
    blocks, block = 18_805, 64
    pool = blocks * block
    step = 64 / 120
    eng = VLLMEngine(
        model_name=served,
        num_gpu_blocks=blocks,
        block_size=block,
        max_model_len=8_192,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.finish(320, prompt=1_000, output=256, ttft=0.6, tpot=step, queue=0.0, reason="length", max_tokens=256)
    eng.first_tokens([0.6] * 384)
    eng.prefill(384 * 1_000)
    eng.decode(320 * 255 + 64 * 128, step, steps=(320 * 255 + 64 * 128) / 64, batch=64)
    eng.running, eng.waiting, eng.kv_usage = 64.0, 0.0, 64 * 1_128 / pool
    first = eng.render()
    # the window: ~two steps of 64 streams (120 tokens); one request reaches 256 and the next is admitted
    eng.decode(120, step, steps=2, batch=64)
    eng.finish(1, prompt=1_000, output=256, ttft=0.6, tpot=step, queue=0.0, reason="length", max_tokens=256)
    eng.first_tokens([0.6])
    eng.prefill(1_000)
    eng.kv_usage = (64 * 1_128 + 120) / pool
    return FieldState(
        id="vllm-0.29-dsv4-flash-8xh20-stale-cpu-offload-35-tpot-19x",
        source="https://github.com/vllm-project/vllm/issues/57771",
        engine_version="vLLM 0.29.1rc1 (main), rendered with the 0.33 label set",
        deployment={
            "name": "dsv41-flash-8xh20",
            "engine": "vllm",
            "engine_version": "0.29.1",
            "model": "deepseek-ai/DeepSeek-V3",
            "served_model": served,
            "gpu": "h20",
            "gpu_memory_gib": 139.81,
            "quantization": "fp8",
            "tensor_parallel_size": 8,
            "cpu_offload_gb": 35,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 64, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("tensor_parallel_size", "increase"),
            ("max_num_seqs", "decrease"),
            *POOL_TURNS,
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_pd_prefill_pod_pool_pinned(),
    vllm_metal_livelock_empty_pool(),
    vllm_gemma4_mtp_acceptance_collapse(),
    vllm_stale_cpu_offload_pcie_bound(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
