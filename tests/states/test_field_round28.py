"""Field states, round 28: load that sits where the fleet's averages do not show it — one hot SGLang replica behind a
router that never picks the other, one llama.cpp slot whose long prompt holds every step, and one vLLM replica taken
out of rotation by a rolling update — from three public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as the engine prints them: SGLang through :class:`tests.states.SGLangEngine` (0.5.x
scheduler and tokenizer families), llama.cpp through the ``llama-server --metrics`` rows of
:mod:`tests.states.test_field_round3_others` (the 2024 rows, KV gauges present), vLLM through
:class:`tests.states.VLLMEngine` (V1, the 0.33 label set). The assertions come from the reports' numbers, the verdict
each thread establishes and engine facts, never from the advisor's output:

* ``sglang-grpc-router-cache-aware-all-on-a-b-idle`` — two SGLang workers behind the router's gRPC pipeline: its
  cache-aware policy reads every worker's load as zero and sends every request to the first; the second "only
  receives health checks". After the fix the same two workers match HTTP's throughput. The fleet is not short and
  not spare: never replicas either way, never more TP, never a restart.
* ``llamacpp-8k-prompt-holds-every-step-generating-slot-frozen`` — a 32B model with three slots: an ~8,160-token
  prompt arrives while another slot streams, and each ``llama_decode`` of 2,048 tokens carries the stream's one token:
  it "freezes" for the prompt's ~8 s ("This is the expected behaviour", the maintainer). Token counters stand still
  (llama.cpp counts at a prompt's end and a request's end); one decode moves the cache. Never a restart, more slots,
  more replicas, a larger batch, a pool turn, or a context cap that refuses the prompt.
* ``vllm-kserve-rolling-update-surge-pod-and-draining-pod`` — KServe's graceful drain: a pod being replaced gets a
  15 s ``preStop`` sleep while the endpoint picker stops routing to it, then vLLM drains in-flight requests for up to
  45 s. Mid-rollout the fleet shows four pods: three routed at 100 running each (the surge pod among them), the old
  one draining with no arrivals (34 → 23). Never fewer replicas (the rollout removes the old pod by itself), never
  more, never a restart.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import SGLangEngine, VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_others import KV_GROWING_TURNS, _cap_at_least, _llamacpp, _llamacpp_rows
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round5 import _all

INTERACTIVE = {"ttft_seconds": 2.0, "tpot_seconds": 0.025, "target_ratio": 0.9}
"""An interactive chat SLO (25 ms a token): chosen where the reports state none."""


# --- 1. SGLang behind the gRPC router: cache-aware sends every request to worker A, B idles ------------------------


def sglang_grpc_router_all_on_one() -> FieldState:
    """sgl-project/sglang#15473 ("[router] bugfix: cache_aware in grpc inbalance forward", merged December 2025): "I
    found that when routing between two gRPC SGLang servers, the cache-aware strategy in sgl-router leads to highly
    unbalanced request distribution, resulting in lower throughput compared to HTTP. … As shown in the figure, the
    router consistently forwards requests to Instance A, while Instance B only receives health checks. This issue
    occurs because the gRPC pipeline lacks a worker load management mechanism, causing all worker loads to remain at
    zero. As a result, the ``cache-aware`` policy cannot detect load imbalance and always selects the first worker."
    The fix adds load guards to the gRPC pipeline; "After the fix, throughput under the cache-aware policy matches
    that of HTTP."

    Engine facts: the router, not the engine, picks the worker; each SGLang worker schedules only what it is sent, so
    B's scheduler gauges read 0 running, 0 queued and its tokenizer counters never leave zero (they advance when a
    request finishes, ``tokenizer_manager`` ``collect_metrics``). SGLang keeps a finished request's KV in the radix
    tree as evictable slots; ``sglang:token_usage`` counts only the slots running requests pin. Arithmetic (for the
    choices below): the benchmark's 256 in flight all run on A; a step there costs ~30 ms (weights 16 GB, ~40 GB of
    KV read at batch 256, prefill chunks interleaved), 256 ÷ 0.030 = 8,533 tokens/s; a request lives ~0.5 s + 256 ×
    0.030 = ~8.2 s, so ~31 finish a second. Balanced (the HTTP path, the fixed gRPC path), each worker runs 128 at
    ~15 ms: ~17,000 tokens/s over the two — the report's "lower throughput compared to HTTP". A holds 256 × ~640 =
    163,840 tokens pinned, 40 % of its 414,558-token pool; B holds none. The fleet's average (128 a worker, 20 % of
    the pools) describes neither worker. So must never: fewer replicas (B idles only because the router never picks
    it; without it A's load is unchanged and the fix has nowhere to send half of it), more replicas (a third worker
    the same router never picks; and one second of history sizes no fleet), more TP or lighter weights (both are
    remedies for a small batch whose step is the weights' read; the batch on A is 256, not the fleet's average 128,
    and the balanced pair already runs at ~15 ms, inside the SLO, with no GPU added and no quality risk), a restart (A
    serves: tokens move; B is healthy and answers its health checks).

    Not asserted: any turn on A alone (its 30 ms a token is above the 25 ms chosen below; a running cap on A is not
    what the thread establishes: the router is).

    Chosen where the report is silent (its numbers are in figures): Llama-3.1-8B-Instruct on one H100 SXM per
    worker at SGLang's default memory fraction (414,558 tokens a pool, the figure ``check-config`` prints for this
    deployment: an input here); ``sglang.bench_serving`` random requests of 512 prompt and ~256 output tokens at
    ``--max-concurrency 256``, five minutes in (A has answered 9,300; B none). The window: 31 finish on A and 31 are
    admitted; TTFT 0.5 s, queue ~10 ms. A's radix tree holds 240,000 evictable tokens of finished requests (random
    prompts: never reused). SGLang 0.5.6 of December 2025 (the router's gRPC mode) with the 0.5.x exposition. SLO:
    :data:`INTERACTIVE`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    pool = 414_558

    def worker() -> SGLangEngine:
        return SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=131_072, swa_tokens=0)

    def gauges(eng: SGLangEngine, running: float, pinned: float, evictable: float, throughput: float) -> None:
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, 0.0
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = pinned
        eng.g["kv_evictable_tokens"] = evictable
        eng.g["kv_available_tokens"] = pool - pinned - evictable
        eng.g["token_usage"] = eng.g["full_token_usage"] = round(pinned / pool, 3)
        eng.g["gen_throughput"] = throughput

    def serve(eng: SGLangEngine, n: int, tokens: float) -> None:
        eng.finish(n, prompt=512, output=256, ttft=0.5, tpot=0.030, queue=0.01)
        eng.prompt["true"] += n * 512.0
        eng.generation["true"] += n * 256.0
        eng.itl.observe(0.030, tokens)

    a, b = worker(), worker()
    serve(a, 9_300, 9_300 * 255 + 256 * 128)
    gauges(a, 256.0, 163_840.0, 240_000.0, 8_533.0)
    gauges(b, 0.0, 0.0, 0.0, 0.0)
    a_first, b_first = a.render(), b.render()
    serve(a, 31, 8_533)
    gauges(a, 256.0, 163_900.0, 240_150.0, 8_533.0)
    return FieldState(
        id="sglang-grpc-router-cache-aware-all-on-a-b-idle",
        source="https://github.com/sgl-project/sglang/pull/15473",
        engine_version="SGLang 0.5.6 of December 2025 behind sgl-router's gRPC pipeline (0.5.x exposition)",
        deployment={
            "name": "llama31-8b-sglang-grpc-pair",
            "engine": "sglang",
            "model": model,
            "gpu": "h100-sxm",
            "max_model_len": 131_072,
            "slo": INTERACTIVE,
        },
        scrapes=[(a_first, a.render()), (b_first, b.render())],
        snapshot={"requests_running": 256, "requests_waiting": 0, "kv_cache_capacity_tokens": 2 * pool},
        must_first=("load_balancer", "set"),  # the report's fix is the router's
        must_never=[
            ("replicas", "decrease"),
            ("replicas", "increase"),
            ("tensor_parallel_size", "increase"),
            ("weight_quantization", None),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. llama.cpp: an 8K prompt's 2,048-token decodes carry the streaming slot's one token each ----------------------


def llamacpp_long_prompt_freezes_stream() -> FieldState:
    """ggml-org/llama.cpp#10718 ("server : chunked prefill support", ggerganov, December 2024): "This is an example of
    what I think is "chunked prefill". The idea is to not block text-generating slots when a new large prompt comes
    for processing in parallel. ``# start server with 3 parallel slots`` ``./bin/llama-server -m
    ../models/qwen2.5-32b-coder-instruct/ggml-model-q8_0.gguf -ngl 99 -fa --port 8033 -c 0 -np 3`` ``# generation
    task with small prompt`` (a streamed chat: "Write quick sort in c++.") ``# task with a large prompt`` (``"prompt":
    "hello " × 8149 + ". I believe the meaning of life is", "n_predict": 64``). With this PR, the first task is no
    longer "blocked" by the second long prompt processing task. Still, I'm not sure how valuable this feature is.
    Chunking the prompts like this leads to slower overall prompt processing." The same maintainer earlier, in
    ggml-org/llama.cpp#4216 ("server : improvements and maintenance"), to "if there are 3 slots, two running requests
    at the token generation step, sending a new request will kinda "freeze" the others": "This is the expected
    behaviour. You can reduce the freezing effect by using a smaller batch size, but this can negatively affect the
    overall performance."

    Engine facts (``examples/server/server.cpp`` of December 2024): ``update_slots`` puts each generating slot's next
    token in the batch, then fills it with pending prompt tokens up to ``n_batch`` (2,048 by default), and runs one
    ``llama_decode``; so while an 8,160-token prompt is pending every step is ~2,048 tokens and the stream gets one
    token a step. ``server_metrics`` adds a prompt's tokens to ``prompt_tokens_total`` at its first sampled token
    (``on_prompt_eval``) and a request's generated tokens to ``tokens_predicted_total`` at its release
    (``on_prediction``); ``n_decode_total`` and the busy-slot count move each decode; ``prompt_tokens_seconds`` and
    ``predicted_tokens_seconds`` are the bucket since the last ``/metrics`` (reset by it), 0 when nothing completed.
    ``/metrics`` is answered by the same loop between decodes. Arithmetic: ``-c 0`` takes the model's 32,768-token
    context, 10,922 cells a slot over ``-np 3``; Qwen2.5-32B keeps 64 layers × 2 × 8 KV heads × 128 × 2 bytes = 256
    KiB a token (8 GiB for the 32,768 cells) beside ~34.8 GB of Q8_0 weights. A 2,048-token step of a 32B model is
    ~131 TFLOP, ~2 s on the stand-in below, so the prompt takes 4 steps, ~8 s, and the stream's ~37 ms tokens come
    one per ~2 s meanwhile. Between the two scrapes one decode completes: 2,047 prompt tokens and 1 generated enter
    the cache (2,667 → 4,715 cells, 8 → 14 %); no prompt finishes, no request finishes, so both token counters stand
    still and both throughput gauges read 0. So must never: a restart (the loop is decoding: the cache moves each
    step; in ~6 s the prompt completes and the stream resumes), more slots (a fourth slot's prompts share the same
    steps), more replicas (one second; and the freeze is per server, not a lack of servers), a larger batch (longer
    steps: a longer freeze, the maintainer's "smaller batch size" the other way), a pool turn (14 % of the cells
    used), a context cap below 8,224 (the prompt and its 64 tokens: a smaller cap refuses the request).

    Not asserted: the smaller batch or chunked prefill themselves (the maintainer weighs both against overall prompt
    throughput and the PR stayed open).

    Chosen where the report is silent: the GPU (the report names none; ``-ngl 99`` puts every layer on it) — an RTX
    6000 Ada (48 GB: the weights and the 8 GiB of cells fit); before: 40 chat requests answered (~40 prompt tokens,
    ~400 generated at ~37 ms a token), an idle third slot keeping ~440 cells of an earlier conversation; at the first
    scrape the stream has generated ~150 tokens and the long prompt's first 2,047 tokens are in the cache. llama.cpp
    of December 2024 (KV gauges present). SLO: :data:`INTERACTIVE`.
    """
    c1 = {"prompt": 1_630.0, "prompt_s": 4.2, "gen": 16_000.0, "gen_s": 592.0, "decodes": 16_160.0}
    c1 |= {"busy_avg": 1.0001, "prompt_tps": 0.0, "gen_tps": 0.0}
    # one decode of 2,048 tokens (the stream's one + 2,047 of the prompt) with two slots busy: n_busy_slots_total
    # 16,162 → 16,164 over 16,160 → 16,161 decodes
    c2 = dict(c1, decodes=16_161.0, busy_avg=16_164 / 16_161)
    c1["busy_avg"] = 16_162 / 16_160
    cells = 32_768
    return FieldState(
        id="llamacpp-8k-prompt-holds-every-step-generating-slot-frozen",
        source="https://github.com/ggml-org/llama.cpp/pull/10718",
        engine_version="llama.cpp of December 2024 (b4270-era server; KV gauges present)",
        deployment={
            "name": "qwen25-coder-32b-q8-np3",
            "engine": "llamacpp",
            "model": "Qwen/Qwen2.5-Coder-32B-Instruct",
            "gguf_file_type": "Q8_0",
            "gpu": "rtx6000-ada",
            "max_model_len": 10_922,
            "ctx_size": cells,
            "parallel": 3,
            "slo": INTERACTIVE,
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=2, deferred=0, kv=(2_667 / cells, 2_667.0))),
                _llamacpp(_llamacpp_rows(c2, busy=2, deferred=0, kv=(4_715 / cells, 4_715.0))),
            )
        ],
        snapshot={"requests_running": 2, "requests_waiting": 0},
        must_never=[
            RESTART,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
            ("max_num_batched_tokens", "increase"),
            *KV_GROWING_TURNS,
        ],
        extra_check=_all(no_stall_claimed, _cap_at_least(8_224)),
    )


# --- 3. vLLM under KServe: a rolling update — the surge pod warms up, the replaced pod drains -----------------------


def vllm_kserve_rollout_drain() -> FieldState:
    """kserve/kserve#5496 ("feat(llmisvc): adding vLLM shutdown-timeout", merged May 2026): "Implements graceful drain
    for LLM inference pods to ensure active requests complete fully before a pod exits during rolling updates or
    scale-down events. Without this, SIGTERM caused vLLM to abort in-flight requests immediately. … **preStop hook**
    (``/bin/sleep 15``): gives EPP (Endpoint Picker) time to detect the pod's readiness probe failure and stop routing
    new requests to it before SIGTERM is sent. … vLLM ``--shutdown-timeout`` … defaulting to 45 s. …
    ``terminationGracePeriodSeconds`` is also increased from the Kubernetes default (30 s) to 60 s … The drain
    sequence on pod termination is: preStop sleep (15 s) → EPP stops routing → SIGTERM → vLLM drains (≤45 s) → pod
    exits". Its companion kserve/kserve#5485: "When a pod is deleted, Kubernetes removes it from EndpointSlices
    immediately, but EPP needs a few seconds to propagate that change and stop routing new traffic to the pod."

    Engine and platform facts: a Deployment's rolling update with the default ``maxSurge`` 25 % (one pod of three,
    rounded up) and ``maxUnavailable`` 25 % (zero, rounded down) starts the new pod first and deletes an old one only
    once the new one is ready, so mid-rollout four pods answer ``/metrics``: three routed, the surge pod among them,
    and one old pod in its ``preStop`` sleep, which the endpoint picker no longer routes to. During the sleep the old
    process has had no SIGTERM: it serves its in-flight requests and its ``/metrics``; it admits nothing new (no
    prompt tokens, no first tokens), its running count falls as requests finish. vLLM's counters are the process's,
    so the surge pod's are small (its ``process_start_time_seconds`` later than the old pods'). Arithmetic (for the
    choices below): a request lives 0.15 s + 600 × 15 ms = 9.15 s; 100 running a pod is 10.9 answered a second a
    pod, 32.8 over the three routed pods, each holding 100 × ~1,300 = 130,000 tokens, 29 % of its 449,920-token
    pool. Six
    seconds after routing stopped the draining pod holds 100 × (1 − 6 ÷ 9.15) ≈ 34, its oldest (~1,500 tokens each),
    and answers ~11 in the window: 34 → 23; it is empty ~3 s later and exits at SIGTERM. The four pods' 334 → 323
    running are 81–84 a pod; the operator's three carry the same load at ~100 a pod, before the rollout and after
    it. So the draining pod's falling load is the rollout's, not spare capacity, and the pod count (four) is the
    controller's mid-rollout, not the fleet's (three). So must never: fewer replicas (the rollout removes the old pod
    within a minute by itself; a page to remove more reads the draining pod's emptying and the surge pod's presence
    as idle capacity), more replicas (one second of history; nothing waits on any pod), a restart (every pod decodes:
    tokens move; the draining one exits on its own schedule).

    Not asserted: a smaller GPU type (``over_provisioned`` may weigh one for an 8B model on an H100; the report says
    nothing of the fleet's GPUs).

    Chosen where the report is silent: Llama-3.1-8B-Instruct on one H100 SXM a pod at ``gpu_memory_utilization`` 0.9,
    ``max_model_len`` 8,192 (28,120 blocks of 16, the capacity pass's figure for this deployment: an input here);
    three replicas; chat traffic of ~1,000 prompt and ~600 output tokens at 15 ms a token, TTFT 0.15 s, nothing
    queued; the old pods up for a day (30,000 answered each), the surge pod ready 90 s ago (980 answered); the moment
    six seconds after the endpoint picker stopped routing to the draining pod. vLLM 0.18 (the first with
    ``--shutdown-timeout``) rendered with the 0.33 label set. SLO: :data:`INTERACTIVE`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 28_120
    pool = blocks * 16
    # process starts in wall-clock time, as a real scrape states them: the surge pod (day_ago + 1 day) started 145 s
    # before this state is served (ready 90 s: the engine's created is its start + 55 s)
    day_ago = time.time() - 86_400.0 - 145.0

    def pod(started: float, served: int, running: float, held: float) -> VLLMEngine:
        eng = VLLMEngine(
            model_name=model,
            num_gpu_blocks=blocks,
            max_model_len=8_192,
            gpu_memory_utilization=0.9,
            version="0.33",
            started=started,
        )
        eng.finish(served, prompt=1_000, output=600, ttft=0.15, tpot=0.015, queue=0.005)
        eng.first_tokens([0.15] * (served + int(running)))
        eng.prefill((served + running) * 1_000)
        generated = served * 600 + running * (held - 1_000)
        eng.decode(generated, 0.015, steps=generated / 100, batch=100)
        eng.running, eng.waiting, eng.kv_usage = running, 0.0, running * held / pool
        return eng

    def routed(eng: VLLMEngine) -> tuple[str, str]:
        first = eng.render()
        # the window: 11 finish, 11 are admitted and prefilled, 100 streams decode 66 tokens each
        eng.finish(11, prompt=1_000, output=600, ttft=0.15, tpot=0.015, queue=0.005)
        eng.first_tokens([0.15] * 11)
        eng.prefill(11 * 1_000)
        eng.decode(100 * 66, 0.015, steps=66, batch=100)
        eng.kv_usage = 100 * 1_305 / pool
        return first, eng.render()

    steady = [routed(pod(day_ago, 30_000, 100.0, 1_300.0)) for _ in range(2)]
    surge = routed(pod(day_ago + 86_400.0, 980, 100.0, 1_300.0))
    draining = pod(day_ago + 3_600.0, 30_000, 34.0, 1_500.0)
    drain_first = draining.render()
    # the window: no arrival (out of rotation), 11 finish, the rest decode on
    draining.finish(11, prompt=1_000, output=600, ttft=0.15, tpot=0.015, queue=0.005)
    draining.decode(28 * 66, 0.015, steps=66, batch=28)
    draining.running, draining.kv_usage = 23.0, 23 * 1_550 / pool
    return FieldState(
        id="vllm-kserve-rolling-update-surge-pod-and-draining-pod",
        source="https://github.com/kserve/kserve/pull/5496",
        engine_version="vLLM 0.18 under KServe v0.19's LLMInferenceService (rendered with the 0.33 label set)",
        deployment={
            "name": "llama31-8b-kserve",
            "engine": "vllm",
            "model": model,
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "slo": INTERACTIVE,
        },
        scrapes=[*steady, surge, (drain_first, draining.render())],
        snapshot={"requests_running": 3 * 100 + 23, "requests_waiting": 0, "kv_cache_capacity_tokens": 4 * pool},
        must_never=[
            ("replicas", "decrease"),
            ("replicas", "increase"),
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    sglang_grpc_router_all_on_one(),
    llamacpp_long_prompt_freezes_stream(),
    vllm_kserve_rollout_drain(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
