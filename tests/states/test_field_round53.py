"""Field states, round 53: SGLang, TGI and llama.cpp servers whose ``/metrics`` invite a capacity turn where the
report shows something else — an SGLang server on one H200 with 28 streams and 2 % of its pool in use (nothing is
short), a TGI router whose queue is full while it works through it (a liveness probe restarts it), and two llama.cpp
servers behind Lemonade whose auto-chosen slots each were promised the whole unified cache (concurrent requests
overrun it) — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: SGLang through :class:`tests.states.SGLangEngine` (the 0.5.x
exposition, as rounds 16 and 32 replay 0.4.x), TGI through :class:`tests.states.test_field_round3_others.TGIRouter`
(the router's ``metrics-exporter`` names, ``tgi_batch_max_total_tokens`` since v2.3.1, ``tgi_request_failure{err}``),
llama.cpp through :func:`tests.states.test_field_round32._llamacpp_2026` (``to_metrics()`` of 2026: no labels, no KV
gauges). The assertions come from the reports' numbers, the verdict each thread establishes and engine facts, never
from the advisor's output:

* ``sglang-0.4.1-h200-llama31-8b-28-running-usage-0.02-nothing-short`` — sgl-project/sglang#3186: Llama-3.1-8B on
  one H200 at SGLang's defaults, "#running-req: 28, #queue-req: 0", "token usage: 0.02"; "the throughput is around
  140 t/s … in the benchmark its like 5000"; the maintainer: "You are not wrong." Nothing waits and 98 % of the pool
  is free: never a pool turn, more running requests, more TP, replicas or a restart; no cap below the 2,500 tokens a
  request takes.
* ``tgi-3.3-g6.12xlarge-queue-full-but-serving-liveness-is-not-readiness`` — huggingface/text-generation-inference
  #3241: "TGI's ``/health`` endpoint seems to report an unhealthy status when the request queue is full … orchestrators
  like Kubernetes interpret this as TGI having crashed, prompting a restart. This occurs even when TGI is functioning
  perfectly well and merely processing its queue (as I've seen on our EC2 g6.12xlarge instances)". Requests finish
  every second: never a restart, no stall, never replicas from one second, never a memory budget above TGI's 1.0.
* ``llamacpp-lemonade-4-auto-slots-each-131072-of-one-unified-131072-cache`` — lemonade-sdk/lemonade#3276: "Lemonade
  never passes ``--parallel`` … ``n_slots = 4, n_ctx_slot = 131072, kv_unified = 'true'`` … Concurrent requests then
  oversubscribe the cache and fail as HTTP 500 ``Context size has been exceeded``"; "50 context-exceeded 500s, and 190
  KV-pressure warnings". Must end the oversubscription (fewer slots, or a per-request cap at most the 32,768-token slot
  share); never more slots, replicas or a memory turn; no cap below the 28,000-token prompts.
* ``llamacpp-lemonade-three-agent-sessions-49k-87k-133k-overrun-262144-unified-cells`` — anomalyco/opencode#22166:
  "I am using lemonade and qwen3.5 122b on a strix halo with 128G. When I am running multiple sessions from opencode
  server, I start getting context size exceeded as the sum of the context approaches the max context for the model";
  slots at 49,395, 86,655 and 127,985 (``progress = 0.964600``) tokens, then "failed to prepare attention ubatches".
  A slot-share cap (65,536) would refuse two of the three sessions: must propose fewer slots (at most 2, which hold
  the two largest sessions); never a cap below the 132,680-token session, more slots, replicas, a memory turn or a
  restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.states import SGLangEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import TGIRouter, _cap_at_least, _ends_oversubscription
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all, _suggests
from tests.states.test_field_round32 import _llamacpp_2026
from tests.states.test_field_round52 import _proposes_any

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}

Row = tuple[str, str, str, float]


# --- 1. SGLang 0.4.1 on one H200: 28 streams, 2 % of the pool, nothing queued ---------------------------------------


def sglang_h200_llama8b_nothing_short() -> FieldState:
    """sgl-project/sglang#3186 ("[Bug] Slow throughput/s on H200 (llama 3.1 8b)", January 2025, closed): "Hi, I run
    llama 3.1 with this line: ``python3 -m sglang.launch_server --model-path unsloth/Meta-Llama-3.1-8B-Instruct --host
    0.0.0.0 --port 8000``"; the scheduler's log: "Prefill batch. #new-seq: 2, #new-token: 791, #cached-token: 180,
    cache hit rate: 11.56%, token usage: 0.02, #running-req: 28, #queue-req: 0"; "but the throughput is around 140
    t/s, isn't that slow? in the benchmark its like 5000 btw, the length of input and output is around 2500 tokens
    what I'm doing wrong?"; "Environment: vasat ai h200". The maintainer (zhaochenyang20): "You are not wrong."

    Engine facts (SGLang 0.4.1, ``scheduler.py``, ``server_args.py``): ``token usage`` is the share of the KV pool held
    by running requests (the radix cache's evictable tokens excluded); ``#queue-req`` the requests waiting for
    admission; at TP 1 the default ``--mem-fraction-static`` is 0.88, so one H200 (140.4 GiB) less 15 GiB of bf16
    weights and the 12 % reserve leaves ~107 GiB of pool at 128 KiB a token (32 layers × 8 KV heads × 128 × 2 × 2
    B): ~876,000 tokens. Arithmetic from the log: (791 + 180) ÷ 2 = 486 prompt tokens a new request; 0.02 × 876,000
    = ~17,500 tokens held by 28 requests (~625 each: prompts of ~486 and the first ~140 tokens of their answers — the
    run has just started); 28 streams at the report's ~140 tokens/s each is ~3,900 tokens/s, the order of the
    "benchmark … 5000" (an 8B model's decode step at batch 28 on an H200 is ~7 ms). So the server is not short of
    anything: nothing waits (``#queue-req: 0``), 98 % of the pool is free, every request is admitted at once; the
    aggregate rises with the concurrency the client offers, which is the client's to raise. Must never: a pool turn
    (fp8 KV, a larger memory fraction, lighter weights: 2 % used), more running requests (none wait), more TP or
    replicas (one GPU already idles 98 % of its pool; and one second), a restart (it streams); no stall claimed; no
    context cap below the 2,500 tokens the report says a request takes.

    Not asserted: speculative decoding (it could raise each stream's ~140 tokens/s at batch 28; the thread does not
    establish it); a scale-down or a cheaper GPU (the load is a benchmark's start, not the deployment's demand).

    Chosen where the report is silent: "140 t/s" read as each stream's rate as the client measures it (at batch 28 an
    aggregate of 140 would be 200 ms a token, ~25× an H200's step for an 8B model); the moment a few seconds into a
    run whose answers are ~2,000 tokens (486 + ~2,000: the report's "around 2500"); 60 answers of an earlier run in
    the counters. The window: 26 streams decode 140 tokens each, the log's two requests are admitted (971 prompt
    tokens, 180 of them cached). SGLang 0.4.1.post7 replayed with the 0.5.x exposition. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    served = "unsloth/Meta-Llama-3.1-8B-Instruct"
    pool, context, itl = 876_000, 131_072, 1 / 140.0
    eng = SGLangEngine(model_name=served, max_total_num_tokens=pool, context_len=context, swa_tokens=0)

    def gauges(running: float, used: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = round(used / pool, 2)
        eng.g["full_token_usage"] = used / pool
        eng.g["gen_throughput"] = running * 140.0
        eng.g["cache_hit_rate"] = 0.1156

    eng.finish(60, prompt=486, output=2_000, ttft=0.12, tpot=itl, queue=0.01)
    eng.prompt["true"] += 60 * 486.0 + 26 * 486.0
    eng.generation["true"] += 60 * 2_000.0 + 26 * 120.0
    eng.ttft["true"].observe_many([0.12] * 26)
    eng.itl.observe(itl, 60 * 1_999 + 26 * 120)
    gauges(26.0, 26 * 606.0)
    first = eng.render()
    eng.generation["true"] += 26 * 140.0
    eng.itl.observe(itl, 26 * 140)
    eng.prompt["true"] += 971.0
    eng.ttft["true"].observe_many([0.11, 0.13])
    gauges(28.0, 17_500.0)
    return FieldState(
        id="sglang-0.4.1-h200-llama31-8b-28-running-usage-0.02-nothing-short",
        source="https://github.com/sgl-project/sglang/issues/3186",
        engine_version="SGLang 0.4.1.post7 (replayed with the 0.5.x exposition)",
        deployment={
            "name": "llama31-8b-h200-sglang-defaults",
            "engine": "sglang",
            "engine_version": "0.4.1.post7",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "served_model": served,
            "gpu": "h200",
            "tensor_parallel_size": 1,
            "max_model_len": context,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 28, "requests_waiting": 0},
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(2_500)),
    )


# --- 2. TGI 3.3 on a g6.12xlarge: the queue is full and the router works through it ----------------------------------


def tgi_queue_full_but_serving() -> FieldState:
    """huggingface/text-generation-inference#3241 ("Separate Health and Ready Endpoints", May 2025, open): "Currently,
    TGI's ``/health`` endpoint seems to report an unhealthy status when the request queue is full. This is a bit
    problematic because orchestrators like Kubernetes interpret this as TGI having crashed, prompting a restart. This
    occurs even when TGI is functioning perfectly well and merely processing its queue (as I've seen on our EC2
    g6.12xlarge instances)"; "A Liveness Check … If this check fails, then it's clear something is genuinely wrong,
    and a restart would be appropriate"; "A Readiness Check … If the queue is full, TGI would signal it's not ready,
    and the load balancer would temporarily cease sending new requests, crucially *without* restarting the instance";
    "I am assuming that the ``/health`` endpoint reports as unhealthy due to queue backpressure, a behaviour discussed
    in issues like #1733".

    Engine facts (TGI 3.x router, ``router/src/server.rs``, ``validation.rs``, ``backends/v3/src/queue.rs``): a request
    takes one of ``--max-concurrent-requests`` (128) permits or is refused 429 "Model is overloaded"
    (``tgi_request_failure{err="overloaded"}``); validation fills an unset ``max_new_tokens`` with
    ``max_total_tokens`` − input; the queue admits a request into the batch only when its prompt plus
    ``max_new_tokens`` fit the free budget, and never preempts; ``tgi_request_success`` and the per-request histograms
    move when a request finishes. A full queue is backpressure by design (TGI#439's maintainer: "working as intended,
    this mechanism is called preventing backpressure"): the router is serving, which the counters show. So the
    restart the probe triggers is the wrong turn — it drops ~58 running answers and the queue to come back to the
    same queue. Must never: a restart (answers finish
    every second), a stall claim, replicas (one second of history: a rate needs ≥ 30 s), a larger memory budget
    (``--cuda-memory-fraction`` is 1.0 by default, TGI's maximum); no context cap below the ~2,000 tokens a request
    takes (TGI's validation would refuse them).

    Not asserted: a lower ``--max-total-tokens`` (a smaller reservation admits more per batch; the thread does not
    discuss it), more replicas later (the thread is about the probe, not the demand).

    Chosen where the report is silent: the g6.12xlarge's four L4s (22.35 GiB each) run Llama-3.1-8B-Instruct sharded
    four ways (TGI shards over every visible GPU by default), ``--max-input-tokens 8191 --max-total-tokens 8192``; the
    warm-up's budget 480,000 tokens (~15 GiB a shard at 32 KiB a token a shard after 3.7 GiB of weights); clients
    send no ``max_new_tokens``, so each request reserves 8,192 and ⌊480,000 ÷ 8,192⌋ = 58 run, the other 70 of the
    128 permits wait: the queue is full; prompts ~1,500, answers ~500 at ~30 ms a token (a request runs ~15 s, ~4
    finish a second), ~17 s queued at the moment (70 ÷ 4). Before: 19,000 answered with ~0.2 s in the queue, 1,000 at
    the full queue's ~17 s, 600 refused overloaded. The window: 4 finish, 4 are admitted, 4 join the queue, 3 are
    refused. TGI 3.3 (May 2025). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    budget, per_request = 480_000, 8_192
    running = budget // per_request
    tgi = TGIRouter(max_input=8_191, max_total=per_request, budget=budget)
    tgi.arrive(20_000 + running + 70, prompt=1_500, max_new=per_request - 1_500)
    tgi.finish(19_000, generated=500, tpot=0.03, queue=0.2)
    tgi.finish(1_000, generated=500, tpot=0.03, queue=17.0)
    tgi.count += 600
    tgi.failure["overloaded"] = 600.0
    tgi.queue, tgi.batch, tgi.reserved = 70.0, float(running), float(running * per_request)
    first = tgi.render()
    tgi.finish(4, generated=500, tpot=0.03, queue=17.0)
    tgi.arrive(4, prompt=1_500, max_new=per_request - 1_500)
    tgi.count += 3
    tgi.failure["overloaded"] += 3
    return FieldState(
        id="tgi-3.3-g6.12xlarge-queue-full-but-serving-liveness-is-not-readiness",
        source="https://github.com/huggingface/text-generation-inference/issues/3241",
        engine_version="TGI 3.3 (backend v3; tgi_batch_max_total_tokens present)",
        deployment={
            "name": "llama31-8b-tgi-g6-12xlarge",
            "engine": "tgi",
            "engine_version": "3.3.0",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "l4",
            "tensor_parallel_size": 4,
            "instance_type": "g6.12xlarge",
            "max_model_len": per_request,
            "slo": SLO,
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": running, "requests_waiting": 70, "kv_cache_capacity_tokens": budget},
        must_never=[RESTART, ("replicas", "increase"), ("gpu_memory_utilization", "increase")],
        extra_check=_all(no_stall_claimed, _cap_at_least(2_000)),
    )


# --- llama.cpp of 2026 -----------------------------------------------------------------------------------------------


def _llamacpp_rows(
    *,
    prompt: float,
    cached: float,
    prompt_s: float,
    gen: float,
    gen_s: float,
    decodes: float,
    longest: float,
    busy: float,
    deferred: float,
    per_decode: float,
) -> list[Row]:
    """The families of ``to_metrics()`` (``tools/server/server-task.cpp``, 2026): no labels, no KV gauges."""
    return [
        ("prompt_tokens_total", "counter", "Number of prompt tokens processed.", prompt),
        ("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from cache.", cached),
        ("prompt_seconds_total", "counter", "Prompt process time", prompt_s),
        ("tokens_predicted_total", "counter", "Number of generation tokens processed.", gen),
        ("tokens_predicted_seconds_total", "counter", "Predict process time", gen_s),
        ("n_decode_total", "counter", "Total number of llama_decode() calls", decodes),
        ("n_tokens_max", "counter", "Largest observed n_tokens.", longest),
        ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", prompt / max(prompt_s, 1e-9)),
        ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", gen / max(gen_s, 1e-9)),
        ("requests_processing", "gauge", "Number of requests processing.", busy),
        ("requests_deferred", "gauge", "Number of requests deferred.", deferred),
        ("n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call", per_decode),
    ]


def _page(rows: Sequence[Row]) -> str:
    return _llamacpp_2026(rows)


# --- 3. llama.cpp behind Lemonade 11.7: four auto slots, each promised the whole 131,072-cell unified cache ---------


def llamacpp_lemonade_four_auto_slots_unified_131072() -> FieldState:
    """lemonade-sdk/lemonade#3276 ("llama.cpp: --ctx-size is applied per slot, so concurrent requests exhaust the KV
    cache", August 2026, closed): "Lemonade Version 11.7.0 … GPU / APU Model 2x AMD gfx1201 (ROCm0 / ROCm1) …
    Lemonade never passes ``--parallel`` to ``llama-server``, so the slot count falls to llama.cpp's auto heuristic. On
    this host that resolves to 4: ``srv load_model: initializing, n_slots = 4, n_ctx_slot = 131072, kv_unified =
    'true'``. ``--ctx-size`` is applied **per slot**, so the ``ctx_size`` recipe option is advertised to every slot
    while a single shared KV buffer backs all of them. Concurrent requests then oversubscribe the cache and fail as
    HTTP 500 ``Context size has been exceeded`` (with ``truncated = 0``, i.e. rejected rather than trimmed), plus
    ``failed to find free space in the KV cache`` warnings and a batch-size death spiral (2048 -> 1024 -> ... -> 32).
    … My log had 0 curl timeouts, 50 context-exceeded 500s, and 190 KV-pressure warnings"; "Steps to Reproduce 1. Load
    a model with a large explicit context: ``lemonade run <model> --ctx-size 131072 --llamacpp-device ROCm0`` 2.
    Confirm the backend log shows ``n_slots = 4``. 3. Send 4 concurrent ``/v1/chat/completions`` re[quests]".

    Engine facts (``tools/server``, ``src/llama-context.cpp``): with ``--kv-unified`` the slots share one cache of
    ``--ctx-size`` cells and each may grow to ``n_ctx_slot`` (here all 131,072); a decode that finds no free cells
    fails the request. Arithmetic: 4 slots × 131,072 promised against 131,072 cells — four concurrent requests fit
    only while they average under 131,072 ÷ 4 = 32,768 tokens. The turns that end it: fewer slots (``--parallel``,
    what the report says Lemonade never passes; each slot's share grows) or each request capped at the 32,768-token
    slot share (``-np 4`` without the unified promise: every request keeps its share and no other fails). Must
    propose one of them (a cap, if that is the turn, at most 32,768). Must never: more slots (more promises on the
    same cells), replicas (one second; and each replica makes the same promise), a memory-budget turn (llama.cpp has
    none: its cache is ``--ctx-size``); no cap below the 28,000-token prompts.

    Not asserted: a larger ``--ctx-size`` (the 32 GB card has room for ~70,000 more cells; the advisor has no such
    dial), the speed of the batch-size spiral.

    Chosen where the report is silent: the model — Llama-3.1-8B-Instruct (131,072 context: the report's
    ``--ctx-size``) as a Q4_K_M GGUF (~4.9 GB) — and the card: gfx1201 is the Radeon AI PRO R9700 (32 GB) or the RX
    9070 XT (16 GB); the 131,072 cells at 128 KiB are 16 GiB, so the 32 GB part (``gpu_memory_gib`` 31.9, one card:
    ``--llamacpp-device ROCm0``); four agent requests of ~28,000-token prompts started together, now 34,572, 33,000,
    32,500 and 31,000 tokens long — 131,072: the cache is full and the next decode fails (50 failed before, ~1,100
    earlier requests answered). The window: the four decode 12 tokens together, at 11 a second each. Lemonade 11.7's
    llama.cpp (August 2026) exposition. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    common = {"cached": 9_000_000.0, "longest": 34_572.0, "busy": 4.0, "deferred": 0.0, "per_decode": 2.6}
    first = _page(
        _llamacpp_rows(prompt=4_200_000.0, prompt_s=2_100.0, gen=560_000.0, gen_s=11_000.0, decodes=400_000.0, **common)
    )
    second = _page(
        _llamacpp_rows(prompt=4_200_000.0, prompt_s=2_100.0, gen=560_048.0, gen_s=11_004.0, decodes=400_012.0, **common)
    )
    return FieldState(
        id="llamacpp-lemonade-4-auto-slots-each-131072-of-one-unified-131072-cache",
        source="https://github.com/lemonade-sdk/lemonade/issues/3276",
        engine_version="llama.cpp of Lemonade 11.7.0 (August 2026; no KV gauges)",
        deployment={
            "name": "lemonade-llamacpp-r9700-ctx131072",
            "engine": "llamacpp",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gguf_file_type": "Q4_K_M",
            "gpu_memory_gib": 31.9,
            "max_model_len": 131_072,
            "ctx_size": 131_072,
            "parallel": 4,
            "kv_unified": True,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 4, "requests_waiting": 0},
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase"), ("gpu_memory_utilization", "increase")],
        extra_check=_all(_ends_oversubscription(32_768), _cap_at_least(28_000)),
    )


# --- 4. llama.cpp behind Lemonade: three agent sessions of 49k, 87k and 133k overrun 262,144 unified cells ----------


QWEN3_30B_A3B_2507_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "decoder_sparse_step": 1,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 2048,
    "initializer_range": 0.02,
    "intermediate_size": 6144,
    "max_position_embeddings": 262144,
    "max_window_layers": 48,
    "mlp_only_layers": [],
    "model_type": "qwen3_moe",
    "moe_intermediate_size": 768,
    "norm_topk_prob": True,
    "num_attention_heads": 32,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "num_hidden_layers": 48,
    "num_key_value_heads": 4,
    "output_router_logits": False,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 10000000,
    "router_aux_loss_coef": 0.001,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
"""Qwen/Qwen3-30B-A3B-Instruct-2507's ``config.json`` as published (48 layers, 4 KV heads of 128: 96 KiB of KV a
token; 128 experts, 8 active; a 262,144-token context)."""


def llamacpp_lemonade_three_sessions_overrun_262144() -> FieldState:
    """anomalyco/opencode#22166 ("Context management when running multiple queries with local ai.", April 2026,
    closed): "I am using lemonade and qwen3.5 122b on a strix halo with 128G. When I am running multiple sessions from
    opencode server, I start getting context size exceeded as the sum of the context approaches the max context for
    the model."; the server's log: "slot update_slots: id  1 | task 30266 | prompt processing done, n_tokens = 49395",
    "slot update_slots: id  0 | task 30228 | prompt processing done, n_tokens = 86655", "slot update_slots: id  2 |
    task 30211 | prompt processing progress, n_tokens = 127985, batch.n_tokens = 2048, progress = 0.964600",
    "init_batch: failed to prepare attention ubatches".

    Engine facts (``tools/server``, ``src/llama-context.cpp``): Lemonade passes no ``--parallel`` (lemonade#3276), so
    llama.cpp's auto choice — 4 slots over one unified cache of ``--ctx-size`` cells, each slot allowed the model's
    whole context — serves the sessions; a batch that finds no free cells fails ("failed to prepare attention
    ubatches"). Arithmetic from the log: slot 2's prompt is 127,985 ÷ 0.9646 = 132,680 tokens; the three sessions
    want 49,395 + 86,655 + 132,680 = 268,730 cells of the 262,144 the cache holds (the model's context, "the max
    context for the model"): they cannot all be resident. A cap at the slot share (262,144 ÷ 4 = 65,536) would refuse
    two of the three sessions outright; two slots hold the two largest (86,655 + 132,680 = 219,335 ≤ 262,144) and the
    third session waits its turn instead of failing. So must propose fewer slots (``--parallel`` at most 2). Must
    never: a context cap below the 132,680-token session (it would refuse the agent's own conversation), more slots,
    replicas (one second; each replica would promise the same cells), a memory-budget turn (llama.cpp has none), a
    restart (it serves two sessions while the third fails).

    Not asserted: a larger ``--ctx-size`` (the reported hybrid model's cells are small and 128 GB has room; the
    advisor has no such dial), the client-side compaction opencode could do.

    Chosen where the report is silent: Qwen3.5-122B is not in the advisor's tables, nor is a MoE of its class with a
    262,144-token context that the advisor sizes as a GGUF (Qwen3-Next's ``qwen3_next`` is not one it sizes);
    Qwen3-30B-A3B-Instruct-2507 (a Qwen MoE with the same 262,144 context; 96 KiB of KV a cell) stands in as a Q4_K_M
    GGUF, given as its published ``config.json``; Strix Halo's 128 GB of unified memory, ~120 GiB of it to the GPU
    (``gpu_memory_gib`` 120); ``--ctx-size 262144`` (the model's context: the report's "max context"), 4 slots,
    unified. The moment: slots 0 and 1 decode their sessions' answers, slot 2 prefills its 132,680-token prompt in
    2,048-token batches; earlier that day ~600 agent turns (45 M prompt tokens, 38 M of them from the slots' cache).
    The window: one 2,048-token batch of slot 2 and 18 tokens of the two answers. Lemonade's llama.cpp of April 2026
    exposition. SLO: TTFT 60 s, TPOT 0.1 s (agent turns of 100k-token prompts take tens of seconds to prefill).
    """
    common = {"cached": 38_000_000.0, "longest": 132_680.0, "busy": 3.0, "deferred": 0.0, "per_decode": 2.2}
    first = _page(
        _llamacpp_rows(
            prompt=7_000_000.0, prompt_s=21_000.0, gen=900_000.0, gen_s=36_000.0, decodes=1_200_000.0, **common
        )
    )
    second = _page(
        _llamacpp_rows(
            prompt=7_002_048.0, prompt_s=21_000.8, gen=900_018.0, gen_s=36_000.9, decodes=1_200_010.0, **common
        )
    )
    return FieldState(
        id="llamacpp-lemonade-three-agent-sessions-49k-87k-133k-overrun-262144-unified-cells",
        source="https://github.com/anomalyco/opencode/issues/22166",
        engine_version="llama.cpp of Lemonade (April 2026; no KV gauges)",
        deployment={
            "name": "lemonade-strix-halo-agent-sessions",
            "engine": "llamacpp",
            "model": "qwen3-30b-a3b-instruct-2507/config.json",
            "served_model": "qwen3.5-122b",
            "gguf_file_type": "Q4_K_M",
            "gpu_memory_gib": 120.0,
            "max_model_len": 262_144,
            "ctx_size": 262_144,
            "parallel": 4,
            "kv_unified": True,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        files={"qwen3-30b-a3b-instruct-2507/config.json": json.dumps(QWEN3_30B_A3B_2507_CONFIG, indent=2)},
        snapshot={"requests_running": 3, "requests_waiting": 0},
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("gpu_memory_utilization", "increase"),
            RESTART,
        ],
        extra_check=_all(
            _proposes_any(("max_num_seqs", "decrease")),
            _suggests("max_num_seqs", "decrease", at_most=2),
            _cap_at_least(132_680),
        ),
    )


STATES = [
    sglang_h200_llama8b_nothing_short(),
    tgi_queue_full_but_serving(),
    llamacpp_lemonade_four_auto_slots_unified_131072(),
    llamacpp_lemonade_three_sessions_overrun_262144(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
