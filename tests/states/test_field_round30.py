"""Field states, round 30: engines other than vLLM whose /metrics point away from the GPU — an SGLang tokenizer path
that streams tokens four times slower than the scheduler makes them, a TGI router that refuses every RAG query at
validation while the engine idles, and an SGLang scheduler that lets one long prompt hold the prefill batch with
chunked prefill already on — from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: SGLang through :class:`tests.states.SGLangEngine` (0.5.x
scheduler and tokenizer families; the scheduler gauges once per DP rank with ``dp_rank``, as DP attention serves
them), TGI through :class:`tests.states.test_field_round3_others.TGIRouter` (the router's ``metrics-exporter``
names, ``tgi_request_failure{err}`` included). The assertions come from the reports' numbers, the verdict each
thread establishes and engine facts, never from the advisor's output:

* ``sglang-dp-attention-detokenizer-bound-itl-180ms-engine-39ms`` — at a benchmark concurrency of 1,024 the ITL
  SGLang's tokenizer manager records (and ``/metrics`` serves) is 180 ms while the scheduler's own rate implies
  39 ms; ``--skip-tokenizer-init`` brings it to 39 ms. The GPU is not what is slow: never more TP, lighter weights,
  a pool turn, more sequences, replicas or a restart.
* ``tgi-gaudi-2.0.5-rag-queries-refused-at-validation-engine-idle`` — every ChatQnA query (1,887 input tokens +
  1,024 ``max_new_tokens``) is refused by the router's ``max_total_tokens`` 2,048 check before it is queued; the
  engine idles. The fix is the token limits (raised); never a cap below them, replicas, a restart or a pool turn.
* ``sglang-long-prompt-holds-the-prefill-batch-chunked-prefill-on`` — SGLang lets one request be mid-prefill at a
  time: a 458K-token prompt takes ~112 rounds of 4,096 tokens while short requests wait; "a missing mechanism, not a
  tuning gap". Chunked prefill is already on: never "enable chunked prefill", never a larger step budget, never a
  context cap that refuses the long prompts, never replicas from one second, never a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tests.states import SGLangEngine, go_float
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import TGIRouter, _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

# --- SGLang with DP attention: the scheduler gauges once per DP rank ------------------------------------------------

_SCHED_GAUGES = (
    ("num_running_reqs", "The number of running requests."),
    ("num_queue_reqs", "The number of requests in the waiting queue."),
    ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
    ("context_len", "Maximum context length."),
    ("gen_throughput", "The generation throughput (token/s)."),
    ("token_usage", "The token usage."),
    ("full_token_usage", "The token usage for full attention layers."),
    ("num_used_tokens", "The number of used tokens."),
)
"""The scheduler gauges rendered per DP rank (``SchedulerMetricsCollector``); the tokenizer families (counters,
TTFT/ITL/e2e histograms) stay the tokenizer manager's: one process, no ``dp_rank``."""


def _sglang_dp_page(eng: SGLangEngine, ranks: Sequence[Mapping[str, float]]) -> str:
    """One SGLang ``/metrics`` with DP attention: every DP rank's scheduler reports its gauges labelled ``dp_rank``
    (attention TP size 1: each rank is its group's TP rank 0), followed by ``eng``'s page without its own scheduler
    gauges (its tokenizer-manager counters and histograms, and the queue-time histogram)."""
    names = {f"sglang:{n}" for n, _ in _SCHED_GAUGES} | {f"sglang:{n}" for n in eng.g}
    out: list[str] = []
    for name, text in _SCHED_GAUGES:
        out += [f"# HELP sglang:{name} {text}", f"# TYPE sglang:{name} gauge"]
        for i, r in enumerate(ranks):
            labels = (
                f'dp_rank="{i}",engine_type="unified",model_name="{eng.model_name}",moe_ep_rank="0",pp_rank="0",'
                'tp_rank="0"'
            )
            out.append(f"sglang:{name}{{{labels}}} {go_float(r[name])}")
    for line in eng.render().splitlines():
        token = line.split(" ", 3)[2] if line.startswith("# ") else line.split("{", 1)[0].split(" ", 1)[0]
        if token in names:
            continue
        out.append(line)
    return "\n".join(out) + "\n"


# --- 1. SGLang, DP attention: the tokenizer manager streams at 180 ms a token, the scheduler makes them at 39 ms ----


def sglang_detokenizer_bound_itl() -> FieldState:
    """sgl-project/sglang#23393 ("[Bug] Client-side ITL much larger than scheduler-side ITL at large batch sizes
    (tokenizer / detokenizer bottleneck) + DP attention", open, April 2026): "At large global batch sizes (e.g.
    1024), the ITL observed on the client side (via ``/metrics`` or reported by the tokenizer manager) is several
    times larger than the ITL implied by the scheduler's ``gen throughput`` in the engine logs. The gap does **not**
    appear at small batch sizes (e.g. 128), where client ITL and engine-implied ITL agree. Passing
    ``--skip-tokenizer-init`` largely eliminates the gap (p50 ITL at bs=1024 drops from **180 ms → 39 ms**, ~4.6x),
    which strongly suggests the tokenizer / detokenizer path is the bottleneck rather than the scheduler or GPU
    execution. … Enabling multi-tokenizer mode did **not** help."

    Engine facts (``python/sglang/srt/metrics/collector.py``): the scheduler gauges (``num_running_reqs``,
    ``gen_throughput``, token usage) are each DP rank's scheduler's; the TTFT, ITL, per-request TPOT and e2e
    histograms and the prompt/generation/request counters are the tokenizer manager's, observed when it receives a
    request's output (``observe_inter_token_latency``: the interval since the request's last output ÷ the new tokens,
    once per token) and when it receives its end (``observe_one_finished_request``). A request's tokens reach the
    tokenizer manager through the detokenizer; when that path is slower than the scheduler, each stream sees its
    tokens at the path's pace, not the GPU's. Arithmetic: a closed-loop benchmark of 1,024 streams of 1,024 output
    tokens: each stream is delivered a token every 180 ms, 1,024 ÷ 0.18 = 5,689 tokens/s over the server, a request
    lives ~184 s end to end and 5,689 ÷ 1,024 = 5.56 finish a second. The scheduler makes a request's 1,024 tokens
    in 1,024 × 0.039 = 40 s, so in steady state it holds 5.56 × 40 ≈ 224 of them (28 a rank over 8 ranks, each rank
    28 ÷ 0.039 = 718 tokens/s: the log's implied 39 ms), the other ~800 finished on the GPU and waiting in the
    detokenizer path. With ``--skip-tokenizer-init`` the same GPUs stream at 39 ms. So the GPU and its pool are not
    what the 180 ms measures: must never more TP or lighter weights (remedies for a slow step; the step is 39 ms), a
    pool turn (224 requests hold ~7 % of the pool; nothing waits), more sequences (each rank runs 28, far under its
    cap, and a larger batch only adds tokens to the slow path), replicas (one second; and the report's fix is in the
    tokenizer path), a restart (tokens move).

    Not asserted: a running cap (at 128 streams the report's gap disappears, but the thread's fix is the tokenizer
    path, not fewer streams), or any turn that names the tokenizer path (no such dial).

    Chosen where the report is silent: DeepSeek-V3 on 8 × H200 with ``--tp 8 --dp 8 --enable-dp-attention`` (the
    usual DP-attention deployment; the report names none), ``--mem-fraction-static`` at SGLang's default (667,902
    tokens a rank, the capacity pass's 5,343,216 over 8 ranks: an input here), ``sglang.bench_serving`` random
    requests of 1,024 prompt and 1,024 output tokens at ``--max-concurrency 1024``, five minutes in (650 answered);
    TTFT ~2 s, queue ~10 ms; each running request holds its prompt and ~half its output (~1,536 tokens). The window:
    6 requests finish (the tokenizer manager counts their prompt and output tokens), 5,689 tokens are delivered at
    180 ms. SGLang of April 2026 with the 0.5.x exposition. SLO: TTFT 4 s, TPOT 0.1 s (a throughput benchmark;
    SGLang bucket bounds).
    """
    model = "deepseek-ai/DeepSeek-V3"
    pool, ranks, running = 667_902, 8, 28.0
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=163_840, swa_tokens=0)

    def rank(used: float) -> dict[str, float]:
        return {
            "num_running_reqs": running,
            "num_queue_reqs": 0.0,
            "max_total_num_tokens": float(pool),
            "context_len": 163_840.0,
            "gen_throughput": 718.0,
            "token_usage": round(used / pool, 2),
            "full_token_usage": used / pool,
            "num_used_tokens": used,
        }

    def serve(n: int) -> None:
        eng.finish(n, prompt=1_024, output=1_024, ttft=2.0, tpot=0.18, queue=0.01)
        eng.prompt["true"] += n * 1_024.0
        eng.generation["true"] += n * 1_024.0

    serve(650)
    eng.itl.observe(0.18, 650 * 1_023 + 1_024 * 512)
    first = _sglang_dp_page(eng, [rank(running * 1_536.0)] * ranks)
    serve(6)
    eng.itl.observe(0.18, 5_689)
    second = _sglang_dp_page(eng, [rank(running * 1_540.0)] * ranks)
    return FieldState(
        id="sglang-dp-attention-detokenizer-bound-itl-180ms-engine-39ms",
        source="https://github.com/sgl-project/sglang/issues/23393",
        engine_version="SGLang of April 2026, --enable-dp-attention --dp 8 (0.5.x exposition, gauges per DP rank)",
        deployment={
            "name": "dsv3-dp8-detok-bound",
            "engine": "sglang",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "data_parallel_size": 8,
            "max_model_len": 163_840,
            "slo": {"ttft_seconds": 4.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": ranks * running, "requests_waiting": 0, "kv_cache_capacity_tokens": ranks * pool},
        must_never=[
            ("tensor_parallel_size", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. TGI on Gaudi: every RAG query refused at validation, the engine idles --------------------------------------


def tgi_rag_queries_refused_at_validation() -> FieldState:
    """opea-project/GenAIInfra#487 ("ChatQnA queries return just Gaudi TGI error messages", October 2024): "Installing
    ``-f chatqna/gaudi-values.yaml`` git HEAD setup with Helm, and then querying ChatQnA … Just gives TGI errors as
    answers: ``data: b'{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 2048. Given:
    1887 `inputs` tokens and 1024 `max_new_tokens`","error_type":"validation"}'`` Which is indeed how GenAIInfra is
    configured: ``chatqna/gaudi-values.yaml:  MAX_INPUT_LENGTH: "1024"`` ``MAX_TOTAL_TOKENS: "2048"`` … CI did not catch
    this regression". The chart's TGI: ``ghcr.io/huggingface/tgi-gaudi`` 2.0.5, ``LLM_MODEL_ID:
    Intel/neural-chat-7b-v3-3`` (``helm-charts/common/tgi``), and its helm test sends ``{"inputs":"What is Deep
    Learning?","parameters":{"max_new_tokens":17}}``. The fix the project had shipped for the same error in its
    examples (opea-project/GenAIExamples#340): "The default TGI max_total_tokens is 2048, which is not good for long
    retrieved input context … One fix is to double the max tokens ``--max-input-length 2048 --max-total-tokens
    4096``".

    Engine facts (TGI v2.0.4 router, which tgi-gaudi 2.0.x carries): ``Validation::validate_input``
    (``router/src/validation.rs``) checks ``input_length + max_new_tokens > max_total_tokens`` first, then
    ``input_length > max_input_length``, and returns the error before ``tgi_request_input_length`` is observed;
    ``Infer::generate_stream`` (``router/src/infer.rs``) counts it as ``tgi_request_failure{err="validation"}`` and
    the request never reaches the queue; ``tgi_request_count`` counts every request (``router/src/server.rs``). The
    2.0 router exposes no ``tgi_batch_max_total_tokens`` (v2.3.1+). Arithmetic: a ChatQnA query is its question and
    the retrieved context, 1,887 tokens: over both the 2,048 total (1,887 + 1,024 = 2,911) and the 1,024 input
    limit; the helm test's ~7 + 17 tokens pass, so CI passed. So the router refuses every query, the engine has
    nothing to batch (queue 0, batch 0), the success counter stands still. What the report establishes: the token
    limits refuse the traffic, raised they serve it. So must never: a context cap (``--max-total-tokens``) lower
    than 2,048 (it refuses more), replicas (each refuses the same queries; and one second of history), a restart
    (the router answers in milliseconds: it is the limit, not a hang), a pool turn or more sequences or more TP (the
    engine idles).

    Not asserted: the raise itself (``max_total_tokens`` ≥ 2,911 and ``max_input_length`` ≥ 1,887): the advisor
    turns ``max_model_len`` only down, and reads no TGI failure counter; a row that required the raise would ask for
    a dial the advisor does not have.

    Chosen where the report is silent: Gaudi2 (96 GB) is not in the advisor's tables: the H100 SXM stands in with
    ``gpu_memory_gib`` 96; Mistral-7B-v0.1 stands in for neural-chat-7b-v3-3 (its fine-tune: the same 32 layers and
    8 KV heads of 128). The pod up an hour: the helm test answered (7 input, 17 generated tokens at ~20 ms), 240
    ChatQnA queries refused (one every ~15 s from the operator's probing and the UI); the window: one more query
    refused. SLO: TTFT 2 s, TPOT 0.05 s (a chat front end).
    """
    tgi = TGIRouter(max_input=1_024, max_total=2_048, budget=None)
    tgi.arrive(1, prompt=7, max_new=17)
    tgi.finish(1, generated=17, tpot=0.02, queue=0.001)
    tgi.count += 240
    tgi.failure["validation"] = 240.0
    first = tgi.render()
    tgi.count += 1
    tgi.failure["validation"] += 1
    return FieldState(
        id="tgi-gaudi-2.0.5-rag-queries-refused-at-validation-engine-idle",
        source="https://github.com/opea-project/GenAIInfra/issues/487",
        engine_version="tgi-gaudi 2.0.5 (TGI 2.0 router: no tgi_batch_max_total_tokens)",
        deployment={
            "name": "chatqna-tgi-gaudi",
            "engine": "tgi",
            "engine_version": "2.0.5",
            "model": "mistralai/Mistral-7B-v0.1",
            "gpu": "h100-sxm",
            "gpu_memory_gib": 96.0,
            "max_model_len": 2_048,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": 0, "requests_waiting": 0},
        must_never=[
            ("max_model_len", "decrease"),
            ("replicas", "increase"),
            RESTART,
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
        ],
        extra_check=no_stall_claimed,
    )


# --- 3. SGLang: one 458K-token prompt holds the prefill batch for ~112 rounds, chunked prefill on ---------------------


def sglang_long_prompt_holds_prefill() -> FieldState:
    """sgl-project/sglang#34623 ("[Scheduler] Concurrent chunked prefill via --long-prefill-token-threshold", open,
    August 2026): "SGLang can have at most **one** request mid-prefill at a time. A long prompt therefore monopolizes
    the prefill batch for its entire prefill, and every queued request — however small, however long it has waited —
    waits it out. **Measured in production** (Sference fleet, SGLang backends): … **DeepSeek-V4-Flash**
    (``chunked_prefill_size=4096``): 458K-token prompts ⇒ ~112 consecutive scheduler rounds in which no other request
    can prefill. Rolling TTFT p99 of 12–14 s, spiking to 27.7 s. **This is a missing mechanism, not a tuning gap.**
    Driving the stock ``PrefillAdder`` … with three 500K-token requests, KV headroom pinned so it can never bind:
    ``chunked_prefill_size=8192``, ``max_prefill_tokens=16384`` → ``[8192, 0, 0]`` … ``max_prefill_tokens=131072`` →
    ``[8192, 0, 0]`` … ``chunked_prefill_size=2048``, ``max_prefill_tokens=1000000`` → ``[2048, 0, 0]``: Requests 2
    and 3 get zero tokens in every configuration." (Kimi-K3 at 8,192: "10.35% of requests exceeded 60 s TTFT … p50 was
    unaffected — a pure tail/QoS failure".)

    Engine facts (``python/sglang/srt/managers/scheduler.py``, ``schedule_policy.py``): the scheduler keeps one
    ``chunked_req``; ``get_new_batch_prefill`` gives it the next chunk (``--chunked-prefill-size`` tokens) before any
    waiting request, and ``get_next_batch_to_run`` runs a prefill batch whenever there is one ("Run prefill first if
    possible"), so without ``--enable-mixed-chunk`` (off by default) the running streams take no decode step until the
    chunked request's last chunk; the waiting requests are ``num_queue_reqs``, the running ones ``num_running_reqs``
    (the chunked request is in neither). The tokenizer manager counts a request's tokens when it finishes and
    observes its TTFT at its first token and its queue time when it is scheduled. Arithmetic: 458,000 ÷ 4,096 = 112
    rounds; TTFTs of 12–14 s put a round at ~0.11 s (attention over a context that grows to 458K). Short requests
    arriving at ~2 a second meanwhile wait up to the whole ~12.3 s: 25 queue. In the window the last chunk lands (the
    long prompt's TTFT 12.3 s), the 25 are prefilled in ~0.4 s (1,000 tokens each: 7 rounds), then decoding resumes:
    the 40 streams frozen for ~12.4 s observe that gap as one inter-token interval, the two that finish carry it in
    their TPOT. The long prompt's 458K tokens are 35 % of the 1,293,772-token pool; the 64 running after hold ~40 %.
    So must never: "enable chunked prefill" (it is on: ``--chunked-prefill-size 4096``, the stall is its one-request
    limit), a larger step budget (the report's table: more prefill tokens give the waiting requests zero tokens all
    the same), a context cap below the 458K prompts plus their answers (it refuses the production traffic that
    exposed the gap), a pool turn (40 % used, nothing retracted: the queue waited for the prefill batch, not for
    memory), more sequences (64 run, the cap never bound), replicas (one second; and each replica stalls the same on
    its own long prompts), a restart (the engine works through the prefill and resumes).

    Not asserted: the PR's remedy (``--long-prefill-token-threshold``, concurrent partial prefills: not an SGLang flag
    before the PR), or more TP (it shortens the long prefill's compute; the report calls the stall a missing
    mechanism, so it establishes neither way).

    Chosen where the report is silent: DeepSeek-V4-Flash is not in the advisor's tables; Llama-4-Maverick-17B-128E
    (a large MoE with 17B active and a 1M-token context) on 8 × H200 at TP 8 stands in, ``--context-length``
    1,048,576, the pool the capacity pass's 1,293,772 tokens (an input here). The replica has served an hour of agent
    traffic (12,000 requests of ~1,000 prompt and ~400 output tokens at 25 ms, TTFT ~0.6 s) and six earlier long
    prompts (TTFT ~12.5 s, ~300 output tokens). At the first scrape 111 of 112 chunks are written, 40 streams decode
    (frozen), 25 wait. The window: the long prompt and the 25 get their first tokens (queued 0.2–12.2 s), 20 decode
    steps at 25 ms for the 64 streams, two of the 40 finish. SGLang of August 2026 with the 0.5.x exposition. SLO: TTFT
    10 s, TPOT 0.1 s (SGLang bucket bounds; agent traffic).
    """
    model = "meta-llama/Llama-4-Maverick-17B-128E-Instruct"
    pool, prompt_long, context = 1_293_772, 458_000, 1_048_576
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=context, swa_tokens=1)

    def gauges(running: float, queue: float, used: float, throughput: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, queue
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = round(used / pool, 2)
        eng.g["full_token_usage"] = used / pool
        eng.g["gen_throughput"] = throughput

    def answered(n: int, *, prompt: float, output: float, ttft: float, tpot: float, queue: float) -> None:
        eng.finish(n, prompt=prompt, output=output, ttft=ttft, tpot=tpot, queue=queue)
        eng.prompt["true"] += n * prompt
        eng.generation["true"] += n * output

    answered(12_000, prompt=1_000, output=400, ttft=0.6, tpot=0.025, queue=0.05)
    answered(6, prompt=prompt_long, output=300, ttft=12.5, tpot=0.03, queue=0.05)
    eng.itl.observe(0.025, 12_000 * 399 + 6 * 299 + 40 * 200)
    eng.ttft["true"].observe_many([0.6] * 40)  # the 40 running streams' first tokens, before the long prompt
    gauges(40.0, 25.0, 40 * 1_200.0 + 111 * 4_096.0, 0.0)
    first = eng.render()
    # the window: the last chunk; the long prompt's first token; the 25 queued prefilled; decoding resumes
    waited = [0.2 + 12.0 * i / 24 for i in range(25)]
    eng.ttft["true"].observe(12.3)
    eng.queue.observe(0.01)
    for w in waited:
        eng.ttft["true"].observe(w + 0.4)
        eng.queue.observe(w)
    eng.itl.observe(12.4, 40)  # each frozen stream's gap, one token
    eng.itl.observe(0.025, 64 * 20)
    # two of the 40 finish: ~400 tokens at 25 ms plus the 12.4 s gap in their TPOT and e2e
    for f in (0.95, 1.05):
        eng.requests["true"] += 1
        eng.tpot["true"].observe((400 * 0.025 + 12.4) / 400 * f)
        eng.e2e["true"].observe((0.6 + 400 * 0.025 + 12.4) * f)
    eng.prompt["true"] += 2_000.0
    eng.generation["true"] += 800.0
    gauges(64.0, 0.0, 38 * 1_220.0 + prompt_long + 26 * 1_020.0, 2_640.0)
    return FieldState(
        id="sglang-long-prompt-holds-the-prefill-batch-chunked-prefill-on",
        source="https://github.com/sgl-project/sglang/pull/34623",
        engine_version="SGLang of August 2026, --chunked-prefill-size 4096, mixed chunk off (0.5.x exposition)",
        deployment={
            "name": "maverick-tp8-long-context",
            "engine": "sglang",
            "model": model,
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "max_model_len": context,
            "max_num_batched_tokens": 4_096,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 64, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("chunked_prefill", "enable"),
            ("max_num_batched_tokens", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(prompt_long + 300)),
    )


STATES = [
    sglang_detokenizer_bound_itl(),
    tgi_rag_queries_refused_at_validation(),
    sglang_long_prompt_holds_prefill(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
