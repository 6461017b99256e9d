"""Field states, round 20: data-parallel ranks loaded by request count while the work is in tokens, a batch job sent
all at once, and gauges frozen at 99 % after every request was cancelled, from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as the engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1, the 0.11 or
0.33 label set; several DP engines merged by :func:`tests.states.test_field_pools.vllm_dp_text`). The assertions come
from the reports' numbers, the fix each thread establishes and engine facts, never from the advisor's output:

* ``vllm-dp4-h200-55k-prompts-request-count-lb-queues-two-ranks`` — ``-tp 1 -dp 4`` on 4 × H200 with prompts of
  11,000–99,000 tokens at 0.4 requests/s: the API server's balancer scores ranks by ``waiting × 4 + running``, so
  ranks with equal counts and 9× different prefill work look equal; two ranks queue behind long prefills while the
  others run a short prompt or nothing. The fix the PR brings is in the balancer (``--data-parallel-token-lb``):
  never replicas, more TP, a pool turn (the pools are < 40 % used), a sequence-cap turn, an instance change or a
  restart.
* ``vllm-1000-requests-at-once-batch-job-queue-drains`` — a client that sends 1,000 requests at once to one replica;
  the maintainer: "simply provide all of your requests at once and the scheduler in vLLM will do it's best job to
  batch". ~700 wait behind 256 running and drain in about two minutes: never replicas from one second, more TP, an
  instance change, a restart, nor a page (``critical``).
* ``vllm-all-requests-cancelled-gauges-frozen-kv-99pct`` — a benchmark cut off abruptly: every request is aborted,
  vLLM does not refresh its gauges until an engine step runs again, and the pod reports 256 running and 99 % KV
  with nothing inside. The data is stale; never a capacity turn of any kind read off it.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from typing import Any

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_pools import vllm_dp_text
from tests.states.test_field_round3_vllm import RESTART, SLO, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all


def _never_pages(result: dict[str, Any]) -> None:
    """No recommendation (alternatives included) is ``critical``: nothing here may page an operator."""
    for rec in result.get("recommendations") or []:
        for cand in [rec, *(rec.get("alternatives") or [])]:
            assert cand.get("severity") != "critical", (
                f"pages: {cand.get('rule')}:{cand.get('dial')} {cand.get('action')} ({cand.get('severity')})"
            )


def _queue_not_growing(result: dict[str, Any]) -> None:
    """The ``queue_growth`` rule does not hold (the queue shrinks: what the job sent is admitted, nothing arrives)."""
    qg: dict[str, Any] = next((r for r in result.get("rules") or [] if r.get("rule") == "queue_growth"), {})
    assert qg.get("state") != "firing", f"queue_growth firing: {qg.get('reason')}"


# --- 1. vLLM DP 4: request-count balancing of 11K–99K-token prompts queues two ranks -------------------------------


def vllm_dp4_request_count_lb_long_prompts() -> FieldState:
    """vllm-project/vllm#40795 ("[Core] Token-level DP load balancing for prefill-heavy workloads"): "The existing
    internal DP load balancing uses **request-level** scoring (``waiting * 4 + running``). This causes imbalance when
    prefill work is proportional to token count rather than request count. For example, with 2 DP ranks: Rank 0: 1
    request with 10,000 prompt tokens; Rank 1: 2 requests with 1,000 prompt tokens each. Request-level LB sends the
    next request to Rank 0 (score 4 < 8), even though Rank 0 has 5× the prefill work. This PR adds an optional
    ``--data-parallel-token-lb`` flag … favoring the DP rank with the fewest total tokens." The test: "4 * H200",
    ``vllm serve MiniMaxAI/MiniMax-M2.7 -tp 1 -dp 4``, ``vllm bench serve … --random-input-len 55000
    --random-output-len 1 --random-range-ratio '{"input": 0.8, "output": 0.0}' --request-rate <RPS>``, "three
    queuing regimes: no queuing (RPS 0.2), mild queuing (RPS 0.3), and heavy queuing (RPS 0.4)".

    Engine facts: each DP engine has its own KV pool and its own waiting queue; the API server picks the engine with
    the lowest ``waiting × 4 + running`` and a request never moves once dispatched; a prompt is prefilled in chunks
    of ``max_num_batched_tokens`` and a request with one output token finishes at its first token. ``vllm bench``'s
    range ratio draws input lengths uniformly from 55,000 × (1 ± 0.8) = 11,000–99,000 tokens: two requests of equal
    count can differ 9× in prefill work. Arithmetic (the moment below): rank 0 prefills a ~95,000-token prompt with
    two ~55,000-token prompts queued behind it (~205,000 tokens of work), rank 1 a ~70,000-token prompt with one
    queued (~125,000); rank 2 a ~15,000-token prompt, rank 3 nothing: the queue is the dispatch, not the engines'
    capacity — ranks 2 and 3 hold ~5 % of the deployment's pending work. Each rank's pool holds ~330,000 tokens and
    the fullest is 29 % used: nothing waits for blocks, and one running request per rank is far below any sequence
    cap. So never: replicas (one second of history; half the ranks are idle or nearly so), more TP (a rank's long
    prefill is the dispatch's doing), a pool turn, a sequence-cap turn either way, an instance change (a fleet is not
    sized from two queued ranks), a restart (prefills progress: 8,192 prompt tokens a second on each busy rank); nor
    fewer replicas (two ranks hold a queue: the deployment is not idle, its load is misdealt).

    Not asserted: a prefill-chunk turn (``max_num_batched_tokens``): the PR does not measure one.

    Chosen where the report is silent: MiniMax-M2.7 (230B-A10B, FP8) is not in the advisor's tables;
    Qwen3-235B-A22B-Instruct-2507-FP8 (an FP8 MoE of the same size, whose experts vLLM shards across the four GPUs
    of the DP group as it does MiniMax's) stands in. The pool per rank: 0.9 × 141 GB − ~59 GB of FP8 weights a GPU −
    activations ≈ 63 GB at ~192 KiB a token (94 layers × 4 KV heads of 128 × 2 × 2 bytes) ≈ 330,000 tokens (20,625
    blocks of 16); ``max_model_len`` 131,072 (≥ 99,000). The PR's command sets no ``--enable-expert-parallel``: vLLM
    then shards the expert layers tensor-parallel over the DP × TP = 4 GPUs; the config says
    ``enable_expert_parallel`` (experts spread over the same 4 GPUs, the same weight bytes a GPU), the only way it
    states expert weights split across DP ranks. Before: 40 requests served (one output token each; TTFT
    ~12 s on the short-queued ranks, ~40 s on the long-queued). The window: each busy rank prefills one 8,192-token
    chunk; rank 2's 15,000-token prompt completes and the request finishes; no new arrival (one every 2.5 s). vLLM
    of April 2026 (the PR's base) with the 0.33 label set. SLO: TTFT 60 s (prompts of up to 99,000 tokens), TPOT 0.1
    s.
    """
    served = "MiniMaxAI/MiniMax-M2.7"
    blocks = 20_625
    pool = blocks * 16
    # (running, waiting, tokens of KV held at scrape 1, prefill done this window, finished this window)
    shape = [
        (1.0, 2.0, 86_000, 8_192, 0),
        (1.0, 1.0, 40_000, 8_192, 0),
        (1.0, 0.0, 8_000, 7_000, 1),
        (0.0, 0.0, 0, 0, 0),
    ]
    engines: list[VLLMEngine] = []
    for running, waiting, held, _p, _f in shape:
        eng = VLLMEngine(
            model_name=served,
            num_gpu_blocks=blocks,
            max_model_len=131_072,
            gpu_memory_utilization=0.9,
            version="0.33",
        )
        eng.finish(10, prompt=55_000, output=1, ttft=25.0, tpot=0.0, queue=15.0, max_tokens=1)
        eng.first_tokens([25.0] * 10)
        eng.prefill(10 * 55_000 + held)
        eng.counters["vllm:generation_tokens"] += 10  # one output token each: no inter-token interval
        eng.running, eng.waiting, eng.kv_usage = running, waiting, held / pool
        engines.append(eng)
    first = vllm_dp_text(engines)
    for eng, (running, _waiting, held, chunk, done) in zip(engines, shape, strict=True):
        if not running:
            continue
        eng.prefill(chunk)
        if done:
            eng.finish(1, prompt=15_000, output=1, ttft=3.5, tpot=0.0, queue=0.1, max_tokens=1)
            eng.first_tokens([3.5])
            eng.counters["vllm:generation_tokens"] += 1
            eng.running, eng.kv_usage = 0.0, 0.0
        else:
            eng.kv_usage = (held + chunk) / pool
    return FieldState(
        id="vllm-dp4-h200-55k-prompts-request-count-lb-queues-two-ranks",
        source="https://github.com/vllm-project/vllm/pull/40795",
        engine_version="vLLM of April 2026 (V1, -tp 1 -dp 4; rendered with the 0.33 label set)",
        deployment={
            "name": "minimax-m27-dp4-h200",
            "engine": "vllm",
            "model": "Qwen/Qwen3-235B-A22B-Instruct-2507-FP8",
            "served_model": served,
            "gpu": "h200",
            "tensor_parallel_size": 1,
            "data_parallel_size": 4,
            "enable_expert_parallel": True,
            "max_model_len": 131_072,
            "slo": {"ttft_seconds": 60.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, vllm_dp_text(engines))],
        snapshot={"requests_running": 2, "requests_waiting": 3, "kv_cache_capacity_tokens": 4 * pool},
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", None),
            ("tensor_parallel_size", "increase"),
            ("replicas", None),
            ("instance_type", None),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. vLLM: a batch job sends 1,000 requests at once to one replica ----------------------------------------------


def vllm_thousand_requests_at_once() -> FieldState:
    """vllm-project/vllm#10269 ("[Usage]: Adaptive Batching and number of concurrent requests", closed): "Lets say I am
    setting max num batched tokens to 50k. It tells me I can run 15 concurrent requests. … So can I send 1000 requests
    at once and it would continuously process around 15 requests at a time by refilling the batch? Or should I only
    send 15 requests at a time and wait until they are processed to send the next 15?" The maintainer (mgoin): "In
    most cases, you should simply provide all of your requests at once and the scheduler in vLLM will do it's best job
    to batch the largest number of requests together based on the kv cache available. The ``Maximum concurrency for
    32k tokens per request: 15.1x`` message is for the worst case where each request is using the full context length
    of the model."

    Engine facts: vLLM queues what it cannot admit and admits as sequences finish (continuous batching), up to
    ``max_num_seqs`` (256) and the blocks free; "15.1x" is the pool ÷ ``max_model_len`` (15.1 × 32,768 ≈ 494,800
    tokens), not a seat count. Arithmetic: requests of ~1,000 prompt and ~300 generated tokens hold ~1,300 tokens
    each, so 256 run with ~67 % of the pool; the 1,000 sent at once leave ~700 waiting. At ~20 requests a second
    (256 streams at ~40 ms a token, ~300 tokens each, plus their prefill) the queue drains in ~35 s and the whole
    job in ~50 s: the burst is the client's, once, and clears by itself. So never: replicas either way (one second
    of history; a one-off batch that the replica finishes in under a minute, on a replica running at its 256
    seats), more TP or an instance change (the same), a restart (tokens move), and no page: nothing here is
    ``critical`` — the maintainer calls it the intended use. The queue shrinks (20 admitted a second, none
    arrives): ``queue_growth`` must not hold.

    Not asserted: a sequence-cap turn (the pool has room for more than 256 such requests, but the thread does not
    measure one); TTFT misses on the queued requests (a batch job sent at once waits by design).

    Chosen where the report is silent: the model and GPU — Llama-3.1-8B-Instruct on one A100 80GB stands in (at
    ``gpu_memory_utilization`` 0.95 its pool is ~15× a 32,768-token context, the log's "15.1x"); the pool as the
    report's message gives it, 30,925 blocks of 16 = 494,800 tokens; ``max_model_len`` 32,768,
    ``max_num_batched_tokens`` 50,000. The moment: ~15 s into the job, 60 finished, 256 running, 684 waiting
    (TTFT of the first ones ~2 s, the queued ~10–30 s). The window: 20 finish, 20 are admitted and prefilled,
    256 streams decode 25 steps. vLLM 0.6.x of November 2024 replayed with the 0.11 label set. SLO: TTFT 5 s, TPOT
    0.1 s.
    """
    blocks = 30_925
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.95,
        version="0.11",
    )
    eng.finish(60, prompt=1_000, output=300, ttft=2.0, tpot=0.04, queue=0.5, max_tokens=512)
    eng.first_tokens([2.0] * 60 + [8.0] * 256)
    eng.prefill(316 * 1_000)
    eng.decode(60 * 300 + 256 * 150, 0.04)
    eng.running, eng.waiting, eng.kv_usage = 256.0, 684.0, 0.67
    first = eng.render()
    eng.finish(20, prompt=1_000, output=300, ttft=9.0, tpot=0.04, queue=7.0, max_tokens=512)
    eng.first_tokens([15.0] * 20)
    eng.prefill(20 * 1_000)
    eng.decode(256 * 25, 0.04, steps=25, batch=256)
    eng.running, eng.waiting, eng.kv_usage = 256.0, 664.0, 0.67
    return FieldState(
        id="vllm-1000-requests-at-once-batch-job-queue-drains",
        source="https://github.com/vllm-project/vllm/issues/10269",
        engine_version="vLLM 0.6.x of November 2024 (replayed with the V1 0.11 label set)",
        deployment={
            "name": "batch-job-one-replica",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "a100-80gb",
            "gpu_memory_utilization": 0.95,
            "max_model_len": 32_768,
            "max_num_batched_tokens": 50_000,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 256, "requests_waiting": 664, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            ("replicas", None),
            ("tensor_parallel_size", "increase"),
            ("instance_type", None),
            RESTART,
        ],
        extra_check=_all(_never_pages, _queue_not_growing, no_stall_claimed),
    )


# --- 3. vLLM V1: every request cancelled at once — the gauges keep the last step's 256 running and 99 % KV -----------


def vllm_all_cancelled_gauges_frozen() -> FieldState:
    """vllm-project/vllm#29928 ("[Bug]: Request Metrics Stale After Updating After Sudden Cancellation of All Running
    Reqs", closed; reported by a vLLM maintainer): "if all requests are simultaneously canceled, vllm does not refresh
    its prometheus stats until an engine core step runs again … its common in cases like benchmarking to abruptly cut
    off requests; systems like llm-d rely on these prom metrics for scheduling decisions; pods with high load prior to
    the requests aborts can get "stuck" reporting 99% KV utilization, which will stop future scheduling to this pod;
    since requests never get sent to these pods, the metrics never reset … we should actually ensure we flush the
    current scheduler state and avoid reporting these stale metrics".

    Engine facts: vLLM V1 publishes its scheduler gauges (running, waiting, KV usage) from the stats an engine-core
    step returns; with no request left the engine does not step, so the gauges keep the last loaded step's values
    while no token, prompt or request counter moves. Arithmetic: the last step had 256 running, 30 waiting and 99 % of
    a ~400,000-token pool (~1,550 tokens a request); after the abort the engine holds nothing. The numbers are a
    picture of a load that is gone: the fix the thread names is in vLLM (flush the scheduler's state on abort), and
    the operator's remedy is to ignore the frozen figures. So the data is stale (frozen with requests "running"), and
    never a capacity turn read off it: no pool turn (KV 99 % is a ghost), no sequence-cap turn, no more TP, no
    replica turn either way (one second of frozen figures says nothing of the load), no instance change, no
    speculation.

    Not asserted: a restart (it would clear the gauges of an idle engine and drop nothing; the thread's fix is not
    that, but it is not wrong either); whether a stall is claimed (the advisor needs more than one interval to say).

    Chosen where the report is silent: the model and GPU — Llama-3.1-8B-Instruct on one H100 SXM stands in; the pool
    25,000 blocks of 16 (~400,000 tokens at 0.9 of the card); ``max_model_len`` 32,768. Before the abort: 2,000
    requests served by the benchmark (1,000-token prompts, 1,000 generated at ~35 ms, TTFT ~1 s). Both scrapes are
    taken after the abort and before any new request: the same numbers. vLLM of December 2025 (V1) with the 0.11
    label set. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    blocks = 25_000
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.finish(2_000, prompt=1_000, output=1_000, ttft=1.0, tpot=0.035, queue=0.3, max_tokens=1_000)
    eng.first_tokens([1.0] * 2_256)
    eng.prefill(2_286 * 1_000, cached=0.0)
    eng.decode(2_000 * 1_000 + 256 * 550, 0.035)
    eng.running, eng.waiting, eng.kv_usage = 256.0, 30.0, 0.99
    frozen = eng.render()
    return FieldState(
        id="vllm-all-requests-cancelled-gauges-frozen-kv-99pct",
        source="https://github.com/vllm-project/vllm/issues/29928",
        engine_version="vLLM V1 of December 2025 (rendered with the 0.11 label set)",
        deployment={
            "name": "llmd-pod-after-benchmark-abort",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "max_model_len": 32_768,
            "slo": SLO,
        },
        scrapes=[(frozen, frozen)],
        state="stale",
        must_never=[
            *POOL_TURNS,
            ("max_num_seqs", None),
            ("tensor_parallel_size", "increase"),
            ("replicas", None),
            ("instance_type", None),
            ("speculative_decoding", "enable"),
        ],
    )


STATES = [
    vllm_dp4_request_count_lb_long_prompts(),
    vllm_thousand_requests_at_once(),
    vllm_all_cancelled_gauges_frozen(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
