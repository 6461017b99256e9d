"""Field states, round 41: vLLM V1 and SGLang pages whose numbers invite a GPU or fleet turn for what no dial decides —
a backend just restarted whose prefix cache is cold beside a sibling at 96.1 % hits, a constrained-decoding grammar
that takes SGLang from over 60 tokens a second a request to 1–3 at 80 concurrent, the same collapse on vLLM V1's
structured outputs (2,000 → ~200 tokens/s with the GPU almost idle), and a disaggregated decode server whose second
hundred requests wait five minutes for their KV to arrive — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.VLLMEngine` (V1; the 0.11 label set for 2025 releases, the
0.33 set for 2026 ones) or :class:`tests.states.SGLangEngine` (the 0.5.x scheduler and tokenizer families; SGLang
0.4.5 replayed with that exposition, as rounds 16, 32 and 34 replay 0.4.x), the prefill/decode queue gauges of
SGLang's scheduler metrics collector (``num_decode_prealloc_queue_reqs`` / ``num_decode_transfer_queue_reqs``, label
``engine_type="decode"``) written here. The assertions come from the reports' numbers, the verdict each thread
establishes and engine facts, never from the advisor's output:

* ``vllm-0.26-proxy-cold-restarted-backend-0pct-hits-beside-96pct-sibling-no-advice`` — two vLLM backends behind a
  cache-affinity proxy: one restarted minutes ago reports ``prefix_cache_queries_total: 57``,
  ``prefix_cache_hits_total: 0``; its sibling serves at 96.1 % prefix hits and 50 tokens/s. A cold cache warms on
  each session's first turn; no advice — never a restart (the restart is what emptied the cache), prefix caching
  toggled, replicas either way, a pool turn, more sequences or a context cap below the agents' prompts.
* ``sglang-0.4.5-xgrammar-ebnf-80-concurrent-60-to-2-tps-no-gpu-dial`` — an EBNF grammar through xgrammar at 80
  concurrent: "from over 60 tokens per second down to just 1–3 tokens per second"; the xgrammar maintainer: "complex
  grammars may incur large latency". The grammar's per-token mask is CPU work in the scheduler; never more TP, a pool
  turn, more sequences, speculation, replicas or a restart.
* ``vllm-v1-qwen3-30b-a3b-structured-outputs-2000-to-200-tps-gpu-idle`` — vLLM V1 (May 2025) serving Qwen3-30B-A3B:
  "when multiple structured outputs requests are received. The GPU utilization drops to almost 0 and the throughput
  drops from 2000 token/s to ~200 token/second". The same ceiling on the engine core's CPU; never more TP, a pool
  turn, more sequences, speculation, replicas or a restart.
* ``sglang-0.4.5-pd-decode-second-100-kv-transfers-5-min-no-capacity-turn`` — 200 prompts (4k in, 2k out) sent at
  once to a prefill/decode pair over Mooncake: "the first 100 reqs's KV were transferred in 30s. But the second 100
  reqs's KV transfer took 5min"; "The token usage on the prefill is 0.4, on decode is up to 0.8"; the maintainers
  reproduce it and point at the transfer (``--page-size 32``). The decode server names its transfer queue; never
  replicas, a pool turn, more TP, a context cap or a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import SGLangEngine, VLLMEngine, _labels, go_float
from tests.states.field import Advice, FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all
from tests.states.test_field_round14 import _hybrid_pool

REPLICAS_EITHER_WAY: list[Advice] = [("replicas", "increase"), ("replicas", "decrease")]

NO_GPU_DIAL: list[Advice] = [
    ("tensor_parallel_size", "increase"),
    *POOL_TURNS,
    ("max_num_seqs", "increase"),
    ("speculative_decoding", "enable"),
    ("replicas", "increase"),
    ("instance_type", None),
    RESTART,
]
"""The turns a constrained-decoding ceiling makes wrong: the time goes into the grammar's per-token mask on the
scheduler's CPU, which neither a faster or larger GPU step, a larger pool, more sequences a step, drafted tokens
(each needs its own mask), more replicas from one second, nor a restart (the engine serves) shortens."""


# --- 1. vLLM 0.26 behind a cache-affinity proxy: a backend restarted minutes ago, its prefix cache cold -------------


def vllm_proxy_cold_restarted_backend() -> FieldState:
    """azrtydxb/Fastllm-proxy#22 ("cacheAffinity has no feedback from actual backend prefix-cache state — zero-hit
    routing is invisible to operators", closed, September 2026): "``cacheAffinity`` routes by a hash of the first
    ``prefix_bytes`` (2048) of the prompt and assumes the chosen backend still **holds** that prefix in its KV cache …
    When a backend restarts, crashes, or evicts its prefix cache, the affinity table keeps sending the session's
    traffic there and every turn re-prefills from zero"; "After a vLLM restart on ``192.168.10.246:8000``
    (2026-09-16), the backend reported ``vllm:prefix_cache_queries_total: 57, vllm:prefix_cache_hits_total: 0`` — 0%
    hits while multi-agent coding traffic (sessions with stable 50k+ token prefixes) was flowing"; "Contrast on the
    sibling backend that had NOT restarted: 96.1% prefix cache hit rate at 50 tok/s generation"; "(The 0% window was
    shortly after a cold restart, so prompt-structure factors may also contribute …)".

    Engine facts (vLLM V1, ``vllm/v1/core/kv_cache_manager.py``, ``vllm/v1/metrics/loggers.py``): a restart starts
    with an empty prefix cache; ``prefix_cache_queries`` and ``prefix_cache_hits`` count *tokens*, recorded when a
    request is first scheduled; ``prompt_tokens`` counts a prompt when its prefill completes. So 57 queried tokens is
    one short probe, not the agents' traffic: the cold backend had just begun. A session's first turn there computes
    its whole prefix (and caches it); its later turns hit. Arithmetic: the warm backend's two agent streams hold
    ~112,000 tokens (10 % of its pool) and decode 25 tokens/s each (50 tokens/s); the cold backend admits one
    52,000-token turn in the window (0 of it cached: 52,057 tokens queried, 0 hit) and prefills its first chunks
    (1.5 % of its pool). Nothing waits on either backend. So: no advice at all — never a restart (the restart is what
    emptied the cache; another would empty one more), prefix caching toggled (it is on, and working at 96.1 % where
    warm), replicas either way (one second; a new replica starts as cold as this one), a pool turn (10 % and 1.5 %
    used), more sequences, a context cap below the agents' 52,000-token prompts; no stall claimed.

    Not asserted: the proxy's own fix (reading the backends' hit counters into its affinity table) — the report's
    remedy, not an engine dial.

    Chosen where the report is silent, and the stand-ins: the backends' model and hardware are those of the same
    project's companion report (azrtydxb/Fastllm-proxy#19: "Qwen3.6-35B on GB10, eugr nightly 0.26.1rc1"), with the
    stand-in round 35 uses for them — Qwen3-Next-80B-A3B in fp8 on the GB10's ~121 GiB, 549 blocks of 2,048 tokens a
    backend (an input), ``max_model_len`` 262,144, prefix caching on (Mamba ``align`` mode). The warm backend: up a
    day, 400 agent turns answered (~55,000-token prompts, 96.1 % of prompt tokens from the cache, ~900 generated at
    40 ms, TTFT ~3 s). The cold backend: up three minutes, one 57-token probe answered. vLLM 0.26.1rc1 rendered with
    the 0.33 label set. SLO: TTFT 80 s, TPOT 0.1 s (round 35's for this fleet).
    """
    served = "qwen3.6-35b-a3b"
    block, blocks, max_len = 2_048, 549, 262_144
    pool = block * blocks
    now = time.time()

    def backend(started: float) -> VLLMEngine:
        eng = VLLMEngine(
            model_name=served,
            num_gpu_blocks=blocks,
            block_size=block,
            max_model_len=max_len,
            gpu_memory_utilization=0.85,
            version="0.33",
            started=started,
        )
        _hybrid_pool(eng, pool, max_len, "auto")
        return eng

    warm = backend(now - 86_400.0)
    warm.finish(400, prompt=55_000, output=900, ttft=3.0, tpot=0.04, queue=0.05)
    warm.first_tokens([3.0] * 402)
    warm.prefill(402 * 55_000, cached=round(402 * 55_000 * 0.961))
    warm.decode(400 * 899 + 2 * 400, 0.04, steps=(400 * 899 + 2 * 400) / 2, batch=2)
    warm.running, warm.waiting, warm.kv_usage = 2.0, 0.0, 55 / blocks
    warm_first = warm.render()
    warm.decode(50, 0.04, steps=25, batch=2)  # the window: two streams at 25 tokens/s each
    warm.kv_usage = 56 / blocks
    warm_second = warm.render()

    cold = backend(now - 180.0)
    cold.finish(1, prompt=57, output=16, ttft=0.08, tpot=0.02, queue=0.001)
    cold.first_tokens([0.08])
    cold.prefill(57)
    cold.decode(15, 0.02, steps=15, batch=1)
    cold.running, cold.waiting, cold.kv_usage = 0.0, 0.0, 0.0
    cold_first = cold.render()
    # the window: one session's 52,000-token turn is scheduled; nothing of it is cached here; its prefill has begun
    cold.counters["vllm:prefix_cache_queries"] += 52_000
    cold.running, cold.kv_usage = 1.0, 8 / blocks
    cold_second = cold.render()
    return FieldState(
        id="vllm-0.26-proxy-cold-restarted-backend-0pct-hits-beside-96pct-sibling-no-advice",
        source="https://github.com/azrtydxb/Fastllm-proxy/issues/22",
        engine_version="vLLM 0.26.1rc1 (eugr nightly) on DGX Spark, two backends behind a proxy (0.33 label set)",
        deployment={
            "name": "qwen36-35b-spark-affinity-pool",
            "engine": "vllm",
            "engine_version": "0.26.1",
            "model": "Qwen/Qwen3-Next-80B-A3B-Instruct",
            "served_model": served,
            "gpu_memory_gib": 121.0,
            "quantization": "fp8",
            "gpu_memory_utilization": 0.85,
            "max_model_len": max_len,
            "slo": {"ttft_seconds": 80.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(warm_first, warm_second), (cold_first, cold_second)],
        snapshot={"requests_running": 3, "requests_waiting": 0, "kv_cache_capacity_tokens": 2 * pool},
        no_advice=True,
        must_never=[
            RESTART,
            ("prefix_caching", None),
            *REPLICAS_EITHER_WAY,
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("max_model_len", "decrease"),
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(52_000)),
    )


# --- 2. SGLang 0.4.5: an EBNF grammar through xgrammar takes 80 streams from >60 to 1–3 tokens/s each -------------


def sglang_xgrammar_ebnf_80_concurrent() -> FieldState:
    """sgl-project/sglang#5636 ("[Bug] xgrammar very slow than expectation", closed, April 2025): "Why does the
    throughput drop by 60 times when I use the xgrammar syntax compared to when it's not enabled? It goes from over 60
    tokens per second down to just 1–3 tokens per second. This performance seems far below expectations." The client:
    ``"concurrency": 80``, an EBNF grammar (``root ::= _ "[" _ elements? _ "]" _`` …) sent with each request. The
    xgrammar maintainer's answer: "currently the grammar generation is an experiment feature, so complex grammars may
    incur large latency. It's on our timeline to optimize the efficiency for general grammars".

    Engine facts (SGLang 0.4.5, ``python/sglang/srt/constrained/xgrammar_backend.py``, ``managers/scheduler.py``):
    each constrained request's next-token bitmask is filled by its grammar matcher on the scheduler's CPU
    (``fill_vocab_mask``), request after request, before the batch's logits are sampled; the compiled grammar is
    cached, so once the first request compiled it nothing waits in the grammar queue. The GPU's step does not change:
    a step that takes ~15 ms at 80 streams (over 60 tokens a second a stream without the grammar) now waits ~500 ms
    for 80 masks. Arithmetic: 80 streams at ~2 tokens/s each is ~160 tokens/s (the scheduler's ``gen_throughput``),
    TPOT ~0.5 s; 80 requests of ~700 prompt and ~300 generated tokens hold ~64,000 tokens, 7 % of the pool; nothing
    queues (the client's concurrency is the batch). So a TPOT far past any target is the grammar's, and no GPU dial
    shortens it: never more TP or a faster GPU (the GPU is idle most of the step), a pool turn (7 % used), more
    sequences (80 more masks a step), speculation (each drafted token needs its own mask), replicas (one second), a
    restart (it serves 160 tokens/s); no stall claimed.

    Not asserted: fewer sequences a step (it would shorten each running stream's TPOT by the masks it drops, at the
    cost of the client's queue: the report establishes neither way).

    Chosen where the report is silent: the model and GPU (Qwen2.5-7B-Instruct on one H100 SXM; the report names
    neither), SGLang's default memory fraction with its pool of 900,000 tokens (an input: the report prints none),
    ~700-token prompts and ~300-token JSON-array answers; ten minutes at this rate before the first scrape (300
    requests answered at TPOT ~0.5 s, TTFT ~0.6 s); the window: 160 tokens decoded, one answer ends (at ~0.5 s a
    token a 300-token answer lasts ~150 s: 80 streams end about one every two seconds) and the next is admitted.
    SGLang 0.4.5 replayed with the 0.5.x exposition. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen2.5-7B-Instruct"
    pool = 900_000
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=32_768, swa_tokens=0)

    def gauges(used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"], eng.g["num_grammar_queue_reqs"] = 80.0, 0.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 160.0

    eng.finish(300, prompt=700, output=300, ttft=0.6, tpot=0.5, queue=0.01)
    eng.prompt["true"], eng.generation["true"] = 300 * 700.0, 300 * 300.0
    eng.itl.observe(0.5, 300 * 299 + 80 * 149)
    gauges(80 * (700 + 150))
    first = eng.render()
    # the window: 160 tokens decoded; one answer ends (its counters advance at its end) and the client's next request
    # is admitted (its prompt is counted when it ends)
    eng.finish(1, prompt=700, output=300, ttft=0.6, tpot=0.5, queue=0.01)
    eng.prompt["true"] += 700.0
    eng.generation["true"] += 300.0
    eng.itl.observe(0.5, 160)
    gauges(80 * (700 + 150) + 160 - 1_000 + 700)
    return FieldState(
        id="sglang-0.4.5-xgrammar-ebnf-80-concurrent-60-to-2-tps-no-gpu-dial",
        source="https://github.com/sgl-project/sglang/issues/5636",
        engine_version="SGLang 0.4.5 with --grammar-backend xgrammar (replayed with the 0.5.x exposition)",
        deployment={
            "name": "qwen25-7b-h100-ebnf",
            "engine": "sglang",
            "engine_version": "0.4.5",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 80, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=NO_GPU_DIAL,
        extra_check=no_stall_claimed,
    )


# --- 3. vLLM V1 (May 2025): structured outputs on Qwen3-30B-A3B, 2,000 → ~200 tokens/s with the GPU almost idle -----


def vllm_v1_structured_outputs_gpu_idle() -> FieldState:
    """vllm-project/vllm#10081 ("[Bug]: Structured outputs inference often took a very long time, and eventually
    causing a timeout and vLLM engine crushing."), the V1-era report in it (bi1101, 2025-05-16): "The issue was present
    for me on vllm latest commit with Qwen 3 30B A3B when multiple structured outputs requests are received. The GPU
    utilization drops to almost 0 and the throughput drops from 2000 token/s to ~200 token/ second". Earlier in the
    thread the maintainers' advice is a faster grammar backend (xgrammar) and newer releases, not a GPU setting.

    Engine facts (vLLM V1 of May 2025, ``vllm/v1/structured_output/__init__.py``, ``v1/core/sched/scheduler.py``):
    the engine core's scheduler fills each structured request's grammar bitmask on the CPU
    (``grammar_bitmask``) before the step's logits are sampled, in the same process that schedules the step; while it
    does, the GPU waits. A request whose grammar is still compiling waits as ``WAITING_FOR_FSM`` (counted in
    ``num_requests_waiting``); a cached grammar does not. Arithmetic: the same 64 streams that made 2,000 tokens/s
    (a 32 ms step) make ~200 (320 ms a token): ~90 % of each step is the masks, the GPU's "almost 0". 64 requests of
    ~1,000 prompt and ~500 generated tokens hold ~80,000 tokens, ~10 % of the pool; nothing waits. So: never more TP
    or a faster GPU, a pool turn, more sequences (64 more masks a step), speculation, replicas (one second), a restart
    (it serves 200 tokens/s); no stall claimed.

    Chosen where the report is silent: the GPU and layout (two H100 SXM at TP 2: Qwen3-30B-A3B's 61 GB of bf16 weights
    leave one H100 at 0.9 ~10 GB of KV, which would not hold the batch), 52,000 blocks of 16 (832,000 tokens, an
    input), ``max_model_len`` 32,768, 64 concurrent JSON-schema requests (~1,000-token prompts, ~500-token answers);
    ten minutes at ~200 tokens/s before the first scrape (240 answered, TTFT ~1.5 s); the window: ~200 tokens decoded
    in ~3 steps, one answer ends (a 500-token answer lasts ~160 s: 64 streams end about one every 2.5 s) and the next
    request is admitted. vLLM 0.9.0 (V1) rendered with the 0.11 label set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen3-30B-A3B"
    blocks = 52_000
    pool = blocks * 16
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        started=time.time() - 3_600.0,
    )
    eng.finish(240, prompt=1_000, output=500, ttft=1.5, tpot=0.32, queue=0.05, max_tokens=1_024)
    eng.first_tokens([1.5] * 304)
    eng.prefill(304 * 1_000)
    generated = 240 * 500 + 64 * 250
    eng.decode(generated, 0.32, steps=generated / 64, batch=64)
    eng.running, eng.waiting, eng.kv_usage = 64.0, 0.0, 64 * 1_250 / pool
    first = eng.render()
    # the window: ~200 tokens in ~3 steps; one answer ends, the next request is admitted and prefilled
    eng.decode(200, 0.32, steps=200 / 64, batch=64)
    eng.finish(1, prompt=1_000, output=500, ttft=1.5, tpot=0.32, queue=0.05, max_tokens=1_024)
    eng.first_tokens([1.4])
    eng.prefill(1_000)
    eng.kv_usage = (64 * 1_250 + 200 - 1_500 + 1_000) / pool
    return FieldState(
        id="vllm-v1-qwen3-30b-a3b-structured-outputs-2000-to-200-tps-gpu-idle",
        source="https://github.com/vllm-project/vllm/issues/10081",
        engine_version="vLLM 0.9.0 (V1, May 2025 main), xgrammar structured outputs (0.11 label set)",
        deployment={
            "name": "qwen3-30b-a3b-json",
            "engine": "vllm",
            "engine_version": "0.9.0",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 64, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=NO_GPU_DIAL,
        extra_check=no_stall_claimed,
    )


# --- 4. SGLang 0.4.5 P/D over Mooncake: the decode server's second hundred requests wait 5 min for their KV ---------


def _decode_queues(model: str, prealloc: float, transfer: float) -> str:
    """The decode server's disaggregation queue gauges (SGLang's scheduler metrics collector: requests waiting for
    decode-side KV memory, and requests whose KV is arriving), TP rank 0 reporting."""
    labels = {"engine_type": "decode", "model_name": model, "moe_ep_rank": "0", "pp_rank": "0", "tp_rank": "0"}
    out: list[str] = []
    for name, text, value in (
        ("num_decode_prealloc_queue_reqs", "The number of requests in the decode prealloc queue.", prealloc),
        ("num_decode_transfer_queue_reqs", "The number of requests in the decode transfer queue.", transfer),
    ):
        out += [f"# HELP sglang:{name} {text}", f"# TYPE sglang:{name} gauge"]
        out.append(f"sglang:{name}{_labels(labels)} {go_float(value)}")
    return "\n".join(out) + "\n"


def sglang_pd_decode_transfer_queue() -> FieldState:
    """sgl-project/sglang#5450 ("[Bug] PD disaggregation, KV transfer slow down under high concurrency", closed): "When
    running bench_serving, we send 200 prompts(isl=4k, osl=2k) in one shot, the first 100 reqs's KV were transferred
    in 30s. But the second 100 reqs's KV transfer took 5min. I've print out the prealloc queue and transfer queue size
    in decode node. We can see the transfer-queue size was decreasing very slowly"; Node 1 ``--disaggregation-mode
    prefill`` with ``MOONCAKE_CONFIG_PATH``; "The token usage on the prefill is 0.4, on decode is up to 0.8". The
    maintainers: "We have reproduced the issue and are exploring possible solutions", then "Try setting page_size to a
    value greater than 32 … Try appending this ``--page-size 32``" (with page size 1 each token's KV is its own
    transfer; pages batch them).

    Engine facts (SGLang 0.4.5, ``python/sglang/srt/disaggregation/decode.py``): the decode server preallocates a
    request's KV in its own pool before the prefill side sends it (the prealloc queue holds requests waiting for that
    memory), then the request sits in the transfer queue until its KV has arrived, then it joins the running batch.
    So requests in the transfer queue already hold their KV slots: the pool is not what delays them (the prealloc
    queue is empty), the link is. Arithmetic, ~40 s after the shot: the first hundred run (4,096 prompt and ~1,000
    generated tokens each, ~510,000 tokens) and the second hundred wait in the transfer queue with 4,096 tokens each
    preallocated (~410,000 more): ~920,000 of a 1,125,000-token pool, the report's 0.8; the 100 streams decode at
    ~20 ms a step (~5,000 tokens/s). So the decode server names its transfer queue, and must never: replicas (one
    second; another decode server would pull over the same slow transfers), a pool turn or a context cap (the waiting
    requests' KV already has its slots; 0.8 used), more TP (the 100 running decode at 20 ms), a restart (tokens flow);
    no stall claimed.

    Not asserted: the page size (not one of the advisor's dials) and ``--max-running-requests`` (a maintainer asked
    the reporter to raise it to 200; the thread never reports the result).

    Chosen where the report is silent: the model and hardware (``my_model_path``: Llama-3.1-70B-Instruct in fp8 at TP
    8 on H100 SXM stands in, its pool 1,125,000 tokens, an input); the window ~40 s after the 200 prompts were sent:
    no request has ended before it (2,048 tokens at ~20 ms take ~41 s), 100 in the transfer queue; in the window the
    first answer ends (TTFT ~10 s: its prefill and transfer) and one transfer completes, its request joining the batch.
    SGLang 0.4.5 replayed with the 0.5.x exposition. SLO: TTFT 60 s, TPOT 0.1 s (a batch benchmark).
    """
    model = "meta-llama/Llama-3.1-70B-Instruct"
    pool = 1_125_000
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=131_072, swa_tokens=0)

    def gauges(running: float, used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
        eng.g["gen_throughput"] = 5_000.0

    eng.itl.observe(0.02, 100 * 1_000)
    held = 100 * (4_096 + 1_000) + 100 * 4_096
    gauges(100.0, held)

    def page(transfer: float) -> str:
        return eng.render().replace('engine_type="unified"', 'engine_type="decode"') + _decode_queues(
            model, 0.0, transfer
        )

    first = page(100.0)
    # the window: ~5,000 tokens decoded; the first answer ends (its counters advance at its end); one KV transfer
    # completes and its request joins the batch (its slots were preallocated)
    eng.finish(1, prompt=4_096, output=2_048, ttft=10.0, tpot=0.02, queue=0.5)
    eng.prompt["true"] += 4_096.0
    eng.generation["true"] += 2_048.0
    eng.itl.observe(0.02, 5_000)
    gauges(100.0, held + 5_000 - (4_096 + 2_048))
    second = page(99.0)
    return FieldState(
        id="sglang-0.4.5-pd-decode-second-100-kv-transfers-5-min-no-capacity-turn",
        source="https://github.com/sgl-project/sglang/issues/5450",
        engine_version="SGLang 0.4.5 (PD over Mooncake, decode server; replayed with the 0.5.x exposition)",
        deployment={
            "name": "llama70b-pd-decode",
            "engine": "sglang",
            "engine_version": "0.4.5",
            "model": model,
            "gpu": "h100-sxm",
            "quantization": "fp8",
            "tensor_parallel_size": 8,
            "max_model_len": 131_072,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 100, "disaggregation_queues": {"decode_transfer": 99}},
        named=["decode_transfer"],
        must_never=[
            ("replicas", "increase"),
            *POOL_TURNS,
            ("max_model_len", "decrease"),
            ("tensor_parallel_size", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_proxy_cold_restarted_backend(),
    sglang_xgrammar_ebnf_80_concurrent(),
    vllm_v1_structured_outputs_gpu_idle(),
    sglang_pd_decode_transfer_queue(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
