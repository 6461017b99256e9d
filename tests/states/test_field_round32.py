"""Field states, round 32: engines other than vLLM whose ``/metrics`` invite a capacity reading of a problem that is
not capacity — two runaway generations that fill an SGLang pool, a TGI router that reports "overloaded" over idle
GPUs, a TGI queue that grows behind a hung engine, an idle llama.cpp slot behind a hung client request, and a load
tester's closed loop read as a Triton TensorRT-LLM ceiling — from five public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: SGLang through :class:`tests.states.SGLangEngine` (the 0.5.x
exposition, as round 16 replays 0.4.x), TGI through :class:`tests.states.test_field_round3_others.TGIRouter` (the
router's ``metrics-exporter`` names, ``tgi_request_failure{err}`` included), llama.cpp by hand (``to_metrics()`` of
2026: no labels, no KV gauges, ``prompt_tokens_cached_total``), the Triton ``tensorrtllm`` backend through
:func:`tests.states.test_field_round4_others._triton_trtllm` plus its ``nv_trt_llm_general_metrics`` rows. The
assertions come from the reports' numbers, the verdict each thread establishes and engine facts, never from the
advisor's output:

* ``sglang-0.4.1-dsv3-two-runaway-outputs-fill-the-pool`` — DeepSeek-V3 at TP 16 under vLLM's
  ``benchmark_serving.py``: two requests hold 307,481 tokens (token usage 1.00) at 10.92 tokens/s, nothing queued,
  then "Decode out of memory happened. #retracted_reqs: 1". ShareGPT prompts are ≤ 1,024 tokens, so each holds
  ~150K generated tokens: runaway outputs, the report's "Long output". Never grow the pool or the TP for them, never
  replicas, more sequences, speculation or a restart; a context cap, if any, not below the benchmark's 2,048.
* ``tgi-2.0-overloaded-refusals-gpus-idle-permit-leak`` — Llama-3-70B on H100s: "gpu are idle … no 'model is
  overloaded' when gpu are idle and no batch is processed", "available permit leak". ``err="overloaded"`` counts a
  semaphore that leaked, not load: never replicas up or down, a TP turn, a pool turn, more sequences or a cap.
* ``tgi-2.0.4-queue-grows-behind-hung-engine-cuda-graphs`` — Mixtral-8x7B AWQ on one L40S: "``tgi_queue_size``
  increases steadily but does not ever go down"; the maintainer points at the CUDA-graph hang (#2099) and
  ``--cuda-graphs 0`` cures it. A hung engine's queue is not demand: never replicas, a pool turn, more sequences or
  more TP.
* ``llamacpp-single-slot-idle-request-hung-before-the-scheduler`` — a local llama-server at ``--parallel 1``:
  ``is_processing=false``, ``/health`` ok, the client's request never became a task; killing the client recovers
  and the next run is served. Nothing in the engine to turn: no advice, never a restart, more slots or replicas.
* ``triton-trtllm-locust-closed-loop-228-requests-not-a-cap`` — Qwen2.5-1.5B on an A100 behind Triton with
  ``TRITON_MAX_BATCH_SIZE=1024``: 100 locust users "not able to hit more than 228 request" in 60 s at p50 26 s —
  100 × 60 ÷ 26 ≈ 231: the load tester's closed loop. Never more sequences, replicas or a pool turn.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.states import SGLangEngine, go_float
from tests.states.field import Advice, FieldState, round_tests
from tests.states.test_field_round3_others import TGIRouter, _cap_at_least
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_others import _triton_trtllm
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}

IDLE_IS_NOT_SPARE: list[Advice] = [
    ("replicas", "decrease"),
    ("tensor_parallel_size", "decrease"),
    ("instance_type", None),
]
"""The GPU-freeing turns (``over_provisioned``): wrong where the engine idles because something in front of it refuses
or holds the requests, not because demand is low."""


# --- 1. SGLang 0.4.1: two runaway generations fill a 308K-token pool --------------------------------------------


def sglang_two_runaway_outputs_fill_pool() -> FieldState:
    """sgl-project/sglang#2746 ("[Bug] Long output and issues when running benchmark_serving.py on DeepSeek-V3",
    January 2025): "I am testing ``sglang`` running DeepSeek-V3 with on 2 x H100 … w/ the latest pip package
    (sglang-0.4.1.post4) … I am running a basic concurrency sweep with vLLM's ``benchmark_serving.py``: ``for c in 64
    128 256 512; do … --backend openai-chat … --endpoint='/v1/chat/completions' --model "deepseek-ai/DeepSeek-V3"``";
    the scheduler log::

        Decode batch. #running-req: 2, #token: 307481, token usage: 1.00, gen throughput (token/s): 10.92, #queue-req: 0
        Decode batch. #running-req: 2, #token: 307561, token usage: 1.00, gen throughput (token/s): 10.92, #queue-req: 0
        Decode batch. #running-req: 2, #token: 307641, token usage: 1.00, gen throughput (token/s): 10.92, #queue-req: 0
        Decode batch. #running-req: 2, #token: 307721, token usage: 1.00, gen throughput (token/s): 10.94, #queue-req: 0
        Decode batch. #running-req: 2, #token: 307801, token usage: 1.00, gen throughput (token/s): 10.93, #queue-req: 0
        Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.0980 -> 0.9446

    Engine facts (SGLang 0.4.1, ``scheduler.py``): ``token usage`` is the pool's tokens held by requests (radix-cache
    evictable tokens excluded); a decode step that cannot allocate retracts a running request back to the queue (its
    KV freed; it is prefilled again later) and raises ``new_token_ratio``; the tokenizer manager counts a request's
    prompt and generated tokens when it finishes. vLLM's ``benchmark_serving.py`` samples ShareGPT conversations whose
    prompt is at most 1,024 tokens and prompt + output at most 2,048 (``sample_sharegpt_requests`` prunes the rest).
    Arithmetic from the log: 80 tokens every ~7.3 s is the log's 10.9 tokens/s, ~5.5 a second per request (~183 ms a
    token); two requests hold 307,481 tokens, ~153,700 each, of DeepSeek-V3's 163,840-token context: prompts of at
    most 1,024 tokens, so ~152,700 generated each, ~75× the 2,048 the benchmark asked of any request — the report's
    "Long output": generations that did not stop where the client meant them to. The pool is 307,481 ÷ 1.00 (usage
    rounds to 1.00 from 0.995): 307,481 – 309,000 tokens. So what fills the pool is two runaway outputs, not load:
    nothing queues (``#queue-req: 0``), the retraction frees one of them only to prefill it again. Must never: a pool
    turn (fp8 KV, a larger ``--mem-fraction-static``, lighter weights) or more TP (a larger pool holds the runaways'
    next 10,000 tokens; the benchmark's own requests need 2,048 each), replicas (one second; and two requests), more
    sequences (two run), speculation (it would only speed the runaways), a restart (it decodes: 10.9 tokens/s). A
    context cap, if proposed, must be at least 2,048 (the benchmark's requests; a cap is what would bound a runaway).

    Not asserted: the client-side fix (an output cap the server honours) — no dial of the advisor's; a cap itself (it
    would bound the runaways, the thread does not establish it as the remedy).

    Chosen where the report is silent: "2 x H100" read as two nodes of eight (DeepSeek-V3's 671 GB of FP8 weights
    need sixteen 80 GB GPUs; the log's TP0–TP7 lines are the first node's ranks), ``--tp 16``; the pool 308,000 tokens
    (inside the log's bounds; round 16's check-config figure for this deployment is 310,958); the sweep's first
    concurrency (64): 998 of its requests answered before the two remain (~230 prompt and ~600 generated tokens at
    ~70 ms, TTFT ~2 s), the two runaways streamed ~152,700 tokens each at ~120 ms on average. The scrapes fall on the
    log's fourth and fifth lines' second (the window: 11 tokens, no request finishes); the retraction is after it.
    SGLang 0.4.1.post4 replayed with the 0.5.x exposition (as round 16 replays 0.4.3). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    model = "deepseek-ai/DeepSeek-V3"
    pool, context = 308_000, 163_840
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=context, swa_tokens=0)

    def gauges(used: float, throughput: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 2.0, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
        eng.g["kv_available_tokens"] = pool - used
        eng.g["token_usage"] = round(used / pool, 2)
        eng.g["full_token_usage"] = used / pool
        eng.g["gen_throughput"] = throughput

    eng.finish(998, prompt=230, output=600, ttft=2.0, tpot=0.07, queue=0.3)
    eng.prompt["true"] += 998 * 230.0
    eng.generation["true"] += 998 * 600.0
    eng.ttft["true"].observe_many([2.0, 2.1])  # the two runaways' first tokens
    eng.itl.observe(0.07, 998 * 599)
    eng.itl.observe(0.12, 2 * 152_700)
    gauges(307_721.0, 10.94)
    first = eng.render()
    eng.itl.observe(0.183, 11)  # the window: 11 tokens of the two, nothing finishes
    gauges(307_732.0, 10.93)
    return FieldState(
        id="sglang-0.4.1-dsv3-two-runaway-outputs-fill-the-pool",
        source="https://github.com/sgl-project/sglang/issues/2746",
        engine_version="SGLang 0.4.1.post4 (replayed with the 0.5.x exposition)",
        deployment={
            "name": "dsv3-tp16-two-nodes-bench",
            "engine": "sglang",
            "engine_version": "0.4.1.post4",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 16,
            "max_model_len": context,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 2, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        must_never=[
            *POOL_TURNS,
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
            ("speculative_decoding", "enable"),
            RESTART,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(2_048)),
    )


# --- 2. TGI 2.0: "model is overloaded" over idle GPUs, the router's permits leaked ------------------------------


def tgi_overloaded_permit_leak() -> FieldState:
    """huggingface/text-generation-inference#1877 ("concurrent requests permit limit is broken", May 2024):
    "meta-llama/Meta-Llama-3-70B-Instruct on h100 with latest tgi … gpu are idle, and text-generation-server processes
    are looping over schedule_yield() calls, 100% cpu usage no gpu usage … Expected behavior: available permit leak[;]
    no "model is overloaded" when gpu are idle and no batch is processed".

    Engine facts (TGI 2.0 router, ``router/src/infer.rs``, ``server.rs``): every request is counted
    (``tgi_request_count``) and must take one of ``--max-concurrent-requests`` (128) semaphore permits before it is
    validated or queued; when none is free the router answers 429 "Model is overloaded" and counts
    ``tgi_request_failure{err="overloaded"}``; the request never reaches the queue, the input-length histogram or the
    batch. A permit is returned when its request's stream ends. So "overloaded" is the semaphore's state, not the
    engine's: with the permits leaked, every request is refused while the queue and the batch are empty and the GPUs
    idle — the report's "no batch is processed". Must never: replicas (the refusals are a leak, not demand; and one
    second of history) — nor fewer replicas or a lower TP or another GPU (idle because the router refuses, not for
    lack of traffic), a pool turn or more sequences (nothing is admitted, nothing is short), more TP, a context cap.

    Not asserted: a restart (a leaked semaphore lives in the router process, so restarting it would free the
    permits; the thread establishes no remedy) or any stall claim.

    Chosen where the report is silent: four H100 SXM (``--num-shard 4``: 141 GB of bf16 weights); Llama-3.1-70B-Instruct
    stands in for Llama-3-70B-Instruct (the same 80 layers and 8 KV heads); TGI 2.0.2 (the "latest" of May 2024: no
    ``tgi_batch_max_total_tokens``); ``--max-total-tokens`` 8,192. Before the leak 41,200 requests were answered
    (~900 prompt and ~350 generated tokens at ~40 ms, ~0.5 s queued); for ten minutes since, ~3 a second refused
    (1,800). The window: three more refused. SLO: TTFT 5 s, TPOT 0.1 s.
    """
    tgi = TGIRouter(max_input=8_191, max_total=8_192, budget=None)
    tgi.arrive(41_200, prompt=900, max_new=1_024)
    tgi.finish(41_200, generated=350, tpot=0.04, queue=0.5)
    tgi.count += 1_800
    tgi.failure["overloaded"] = 1_800.0
    first = tgi.render()
    tgi.count += 3
    tgi.failure["overloaded"] += 3
    return FieldState(
        id="tgi-2.0-overloaded-refusals-gpus-idle-permit-leak",
        source="https://github.com/huggingface/text-generation-inference/issues/1877",
        engine_version="TGI 2.0.2 router (no tgi_batch_max_total_tokens)",
        deployment={
            "name": "llama3-70b-tgi-4xh100",
            "engine": "tgi",
            "engine_version": "2.0.2",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 4,
            "max_model_len": 8_192,
            "slo": SLO,
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": 0, "requests_waiting": 0},
        must_never=[
            ("replicas", "increase"),
            *IDLE_IS_NOT_SPARE,
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
            ("max_model_len", "decrease"),
        ],
    )


# --- 3. TGI 2.0.4: the queue grows for ever behind an engine hung in a CUDA graph -------------------------------


def tgi_queue_grows_behind_hung_engine() -> FieldState:
    """huggingface/text-generation-inference#2192 ("Queue size increases indefinitely", July 2024): "Model being used:
    TheBloke/Nous-Hermes-2-Mixtral-8x7B-DPO-AWQ … 1xL40S … 2.0.4 … Launch TGI using ``max_total_tokens`` =
    ``max_batch_prefill_tokens`` = 16384; ``max_input_length`` = 16383; ``quantize`` = awq. After making a few hundred
    requests, the pod returns empty packets … Monitoring reveals that ``tgi_queue_size`` increases steadily but does
    not ever go down." The maintainer: "I suspect it may be related to #2099. Can you try to run TGI with
    ``--cuda-graphs 0`` see if you still see the hang?"; another operator: "I had the same problem, and was able to
    solve it by trying ``--cuda-graphs 0`` … major performance problems, but … better than being disabled."

    Engine facts (TGI 2.0 router, ``router/src/infer/v2``): the batching task sends a batch to the shards and awaits
    its step; new requests are validated (``tgi_request_input_length`` observed, ``tgi_request_count`` counted) and
    appended to the queue (``tgi_queue_size``); a request leaves the queue only when the batching task forms the next
    batch, and an abandoned one is dropped (``err="dropped"``) only then. With the shards hung in a CUDA-graph replay
    the step never returns: the batch (``tgi_batch_current_size``) stays, nothing succeeds, the queue only grows, and
    clients time out in front of it (the "empty packets"). So the queue is a hung engine's, not demand: must never
    replicas (one second; and each replica would hang the same with CUDA graphs on), a pool turn or lighter weights
    (the weights are already AWQ; a hang is not memory), more sequences or more TP (the batch does not step).

    Not asserted: a restart or a stall claim (one second of counters that move only when a request finishes cannot
    tell a hang from long generations: round ``advice_states`` holds the advisor to that), or ``--cuda-graphs 0``
    (no dial of the advisor's).

    Chosen where the report is silent: Mixtral-8x7B-Instruct-v0.1 stands in for the Nous-Hermes-2 fine-tune (the same
    architecture); 300 requests answered before the hang (~2,000 prompt and ~300 generated tokens at ~30 ms, clients
    sending ``max_new_tokens`` 1,024); three in the hung batch (each reserving 2,000 + 1,024 tokens), 180 queued behind
    it, ~2 arriving a second. The window: two more arrive. TGI 2.0.4 exposes no ``tgi_batch_max_total_tokens``. SLO:
    TTFT 5 s, TPOT 0.1 s.
    """
    tgi = TGIRouter(max_input=16_383, max_total=16_384, budget=None)
    tgi.arrive(300, prompt=2_000, max_new=1_024)
    tgi.finish(300, generated=300, tpot=0.03, queue=0.2)
    tgi.arrive(3 + 180, prompt=2_000, max_new=1_024)
    tgi.batch, tgi.reserved, tgi.queue = 3.0, 3 * 3_024.0, 180.0
    first = tgi.render()
    tgi.arrive(2, prompt=2_000, max_new=1_024)
    tgi.queue = 182.0
    return FieldState(
        id="tgi-2.0.4-queue-grows-behind-hung-engine-cuda-graphs",
        source="https://github.com/huggingface/text-generation-inference/issues/2192",
        engine_version="TGI 2.0.4 (no tgi_batch_max_total_tokens)",
        deployment={
            "name": "mixtral-awq-tgi-l40s",
            "engine": "tgi",
            "engine_version": "2.0.4",
            "model": "mistralai/Mixtral-8x7B-Instruct-v0.1",
            "quantization": "awq",
            "gpu": "l40s",
            "max_model_len": 16_384,
            "slo": SLO,
        },
        scrapes=[(first, tgi.render())],
        snapshot={"requests_running": 3, "requests_waiting": 182},
        must_never=[
            ("replicas", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("tensor_parallel_size", "increase"),
        ],
    )


# --- 4. llama.cpp: one slot idle, the client's request hung before it became a task ------------------------------


def _llamacpp_2026(rows: Sequence[tuple[str, str, str, float]]) -> str:
    """``llama-server --metrics`` of 2026 (``server-task.cpp`` ``to_metrics()``): ``# HELP``/``# TYPE`` for every
    family, no labels, no KV gauges (removed by PR #13660), ``prompt_tokens_cached_total`` beside the evaluated
    prompt tokens, ``n_busy_slots_per_decode`` a gauge."""
    out: list[str] = []
    for name, kind, text, value in rows:
        out += [f"# HELP llamacpp:{name} {text}", f"# TYPE llamacpp:{name} {kind}"]
        out.append(f"llamacpp:{name} {go_float(value)}")
    return "\n".join(out) + "\n"


def llamacpp_idle_slot_client_hang() -> FieldState:
    """orbi-build/orbi#233 ("Bug：本地 llama-server 单槽吞掉下一个请求且永不返回（模型进程活着/
    连接 ESTABLISHED/槽位空转）…", September 2026): a local ``llama-server`` (Qwen3.8-27B, ``--parallel 1``,
    one slot) behind the project's agent runner; nine runs killed in a day by the runner's ``model_wait_dead``
    guard after 605–1,814 s of silence. At the scene (#231): the slot's ``is_processing=false``,
    ``n_decoded_tokens=null`` — "llama 当前没在跑任何东西" (llama is running nothing); the client's socket
    to port 8080 ``ESTABLISHED``; the server's ``health={"status":"ok"}``, CPU ~23 %; the last server log line
    the previous task's ``release: stop processing``, "之后再无新的 prompt eval / 新 task" (no prompt eval,
    no new task since). Recovery: the runner kills the client (Pi) and the next run is served — the fix
    (orbi#236) is in the runner. The same project's #75: the client "停在 ``epoll_wait``" (parked in
    ``epoll_wait``) after its local proxy logged ``TimeoutError: no idle llama slot``, "llama slot
    ``is_processing=false``".

    Engine facts (``tools/server``): a request becomes a task in the server's queue, then runs in a slot; a task
    waiting for a slot is ``requests_deferred``, one in a slot ``requests_processing``; the token counters move when
    a prompt is evaluated and when a request is released; ``n_busy_slots_per_decode`` and ``n_decode_total`` move
    only with decodes. So the scrapes of those ten to thirty minutes read: nothing processing, nothing deferred, no
    counter moving — an idle server. The hang is between the client and the task queue, and killing the client, not
    the server, recovers. Nothing in the engine is short or stuck: no advice; in particular never a restart (the
    engine is idle and answers; the next run proves it), more slots (the one slot is free: ``is_processing=false``),
    replicas up (one second; and nothing waits) or down, another GPU.

    Chosen where the report is silent: Qwen3.8-27B is not in the advisor's tables; Qwen3-32B stands in (a dense
    model of the same class) as a Q4_K_M GGUF on one RTX 5090 (32 GB: ~20 GB of weights and a 32,768-cell cache at
    256 KiB a cell), ``--ctx-size 32768`` (Qwen3-32B's context is 40,960); the day's agent sessions (3.1 M prompt
    tokens evaluated, 26 M served from the slot's cache, 410,000 generated, the longest sequence 30,500 tokens). The
    window: the server idle. SLO: TTFT 5 s, TPOT 0.1 s.
    """

    def rows(*, throughput: float) -> list[tuple[str, str, str, float]]:
        return [
            ("prompt_tokens_total", "counter", "Number of prompt tokens processed.", 3_100_000.0),
            ("prompt_tokens_cached_total", "counter", "Number of prompt tokens reused from cache.", 26_000_000.0),
            ("prompt_seconds_total", "counter", "Prompt process time", 2_480.0),
            ("tokens_predicted_total", "counter", "Number of generation tokens processed.", 410_000.0),
            ("tokens_predicted_seconds_total", "counter", "Predict process time", 13_700.0),
            ("n_decode_total", "counter", "Total number of llama_decode() calls", 425_000.0),
            ("n_tokens_max", "counter", "Largest observed n_tokens.", 30_500.0),
            ("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", throughput),
            ("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", throughput),
            ("requests_processing", "gauge", "Number of requests processing.", 0.0),
            ("requests_deferred", "gauge", "Number of requests deferred.", 0.0),
            ("n_busy_slots_per_decode", "gauge", "Average number of busy slots per llama_decode() call", 1.0),
        ]

    return FieldState(
        id="llamacpp-single-slot-idle-request-hung-before-the-scheduler",
        source="https://github.com/orbi-build/orbi/issues/233",
        engine_version="llama.cpp of September 2026 (no KV gauges; prompt_tokens_cached_total)",
        deployment={
            "name": "qwen-27b-local-agent-runner",
            "engine": "llamacpp",
            "model": "Qwen/Qwen3-32B",
            "gguf_file_type": "Q4_K_M",
            "gpu": "rtx5090",
            "max_model_len": 32_768,
            "ctx_size": 32_768,
            "parallel": 1,
            "slo": SLO,
        },
        scrapes=[(_llamacpp_2026(rows(throughput=0.0)), _llamacpp_2026(rows(throughput=0.0)))],
        snapshot={"requests_running": 0, "requests_waiting": 0},
        no_advice=True,
        must_never=[
            RESTART,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            *IDLE_IS_NOT_SPARE,
        ],
        extra_check=no_stall_claimed,
    )


# --- 5. Triton TensorRT-LLM: a locust closed loop of 100 users read as a 228-request ceiling ----------------------


def _triton_general(*, iteration: float, timestamp_us: float) -> str:
    """The backend's ``nv_trt_llm_general_metrics`` rows (``custom_metrics_reporter.cc``: ``general_type`` ∈
    timestamp, iteration_counter; the timestamp in microseconds)."""
    labels = 'model="tensorrt_llm",version="1"'
    rows = [
        "# HELP nv_trt_llm_general_metrics General TRT LLM metrics",
        "# TYPE nv_trt_llm_general_metrics gauge",
        f'nv_trt_llm_general_metrics{{general_type="iteration_counter",{labels}}} {iteration:g}',
        f'nv_trt_llm_general_metrics{{general_type="timestamp",{labels}}} {timestamp_us:.0f}',
    ]
    return "\n".join(rows) + "\n"


def triton_trtllm_locust_closed_loop() -> FieldState:
    """triton-inference-server/tensorrtllm_backend#740 ("max request capped at 228 while load testing using locust",
    April 2025): "I deployed Qwen2.5-1.5B-Instruct model on A100 using tensorrtllm_backend using the following
    parameter values: TRITON_MAX_BATCH_SIZE=1024 INSTANCE_COUNT=1 MAX_QUEUE_DELAY_MS=32 MAX_QUEUE_SIZE=0
    DECOUPLED_MODE=true … I am not able to hit more than 228 request for any number of users and hatch rate for a run
    time of 60 seconds in locust with constant_throughput(1). for example, for num users = 100, hatch rate = 100, …
    p50 = 26000 ms p90 = 26000 ms p99 = 27000 ms p100 = 27000 ms reqs = 223 … what changes do I need to make?"

    Engine and client facts: a locust user runs its task, waits for the response, then waits what is left of its
    ``constant_throughput(1)`` second before the next; a user whose request takes 26 s sends one every 26 s — a
    closed loop whose request count is users × run time ÷ latency, whatever the server's batch. The backend's
    executor keeps up to ``max_batch_size`` (1,024) requests active and runs them in flight; its gauges are the last
    iteration's (``request_type`` active, scheduled, max; the KV blocks). Arithmetic: 100 users × 60 s ÷ 26 s ≈ 231
    requests, the report's 223–228 (those started in the last ~26 s are still running when the run stops): the cap
    is the test's, and it moves with the users, not with "any number of users" once each user waits 26 s. 100 in
    flight of 1,024 is a tenth of the batch cap. A 26 s request of a 1.5B model is its output length (at ~1,000
    tokens, ~26 ms a token at batch 100): the server answers all 100 at once. So must never: more sequences (100 of
    1,024: the batch cap never binds), replicas (one second; and nothing waits: a second server would see the same
    100 users), a pool turn (the pool holds ~6 % of its tokens), a restart (every iteration runs 100 requests).

    Not asserted: the test's fix (more users, or an open-loop load shape) — no dial of the advisor's; whether 26 ms a
    token is the engine's or the decoupled ensemble's post-processing (the thread does not say).

    Chosen where the report is silent: the Triton 25.03 container (TRT-LLM 0.18; rendered without the ``waiting`` and
    ``fraction`` rows its README shows from April 2025: 100 active of 1,024, so the executor's own queue is known
    empty); the engine built with ``max_batch_size`` 1,024 and ``max_seq_len`` 4,096; prompts ~300 tokens, outputs
    ~1,000 at ~26 ms; the pool the template's ``kv_cache_free_gpu_mem_fraction`` 0.9 of an A100 80 GB after ~3.1 GB
    of weights: 38,000 blocks of 64 tokens (2,432,000; Qwen2.5-1.5B holds 28 KiB a token); 100 active, all
    generating, ~1,300 tokens each (~2,030 blocks, 5.3 %); four finish in the window (3.8 a second: 223 in 60 s) and
    four users send anew (context 4). SLO: TTFT 5 s, TPOT 0.1 s.
    """
    blocks1 = {"tokens_per": 64.0, "used": 2_030.0, "free": 35_970.0, "max": 38_000.0}
    blocks2 = {"tokens_per": 64.0, "used": 2_012.0, "free": 35_988.0, "max": 38_000.0}
    first = _triton_trtllm(active=100, scheduled=100, context=0, max_batch=1_024, blocks=blocks1, success=1_900)
    first += _triton_general(iteration=1_203_400, timestamp_us=1.7453e15)
    second = _triton_trtllm(active=100, scheduled=100, context=4, max_batch=1_024, blocks=blocks2, success=1_904)
    second += _triton_general(iteration=1_203_438, timestamp_us=1.7453e15 + 1e6)
    return FieldState(
        id="triton-trtllm-locust-closed-loop-228-requests-not-a-cap",
        source="https://github.com/triton-inference-server/tensorrtllm_backend/issues/740",
        engine_version="Triton 25.03 tensorrtllm backend (TRT-LLM 0.18; no waiting/fraction rows)",
        deployment={
            "name": "qwen2.5-1.5b-triton-a100",
            "engine": "triton-trtllm",
            "model": "Qwen/Qwen2.5-1.5B-Instruct",
            "served_model": "tensorrt_llm",
            "gpu": "a100-80gb",
            "max_model_len": 4_096,
            "max_num_seqs": 1_024,
            "kv_cache_config": {"free_gpu_memory_fraction": 0.9},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 100, "requests_waiting": 0, "kv_cache_capacity_tokens": 2_432_000},
        must_never=[
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            *POOL_TURNS,
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_two_runaway_outputs_fill_pool(),
    tgi_overloaded_permit_leak(),
    tgi_queue_grows_behind_hung_engine(),
    llamacpp_idle_slot_client_hang(),
    triton_trtllm_locust_closed_loop(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
