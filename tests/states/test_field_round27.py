"""Field states, round 27: counters that say something other than load — client aborts that leave token counters
moving with no request recorded, and engine restarts that send every counter back to zero — from three public
reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model is not in the advisor's tables, the docstring names the choice and why), and two scrapes one
second apart rendered through :class:`tests.states.VLLMEngine` (V1; the 0.11 label set for 2025 releases, the 0.33
set for 2026 ones). The assertions come from the reports' numbers, the verdict each thread establishes and engine
facts, never from the advisor's output:

* ``vllm-0.10-five-client-aborts-prompt-tokens-no-request`` — five streaming requests, each closed by its client
  after 64 bytes: ``vllm:prompt_tokens_total`` +3,010, every per-request series (success counter, e2e, prompt
  length) +0. Ordinary client behaviour on an idle engine: no stall, no restart, no pool or context turn.
* ``vllm-grpo-shard-recreated-mid-step-counters-restart-at-zero`` — an RL trainer's controller recreates one of two
  generation engines between the step's start and end snapshots; its counters fall 1,000 → 200 prompt tokens, 500 →
  100 generated, 10 → 2 requests (the review's "-800 / -400 / -8"). A restart, not negative work: no negative rate,
  one restart counted, no restart proposed, no budget cut for one controller-driven recreation.
* ``llmd-two-saturated-decode-pods-liveness-killed-not-oom`` — two vLLM decode pods saturated by a benchmark miss
  their 1 s ``/health`` probes; the kubelet restarts both containers in place. Each engine restarted once, because
  of the probe's timeout: never "repeated restarts, likely OOM — lower ``gpu_memory_utilization``", never a restart,
  never replicas from one second.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``. Where a row's
restart happens "between" the two scrapes, the harness's second for it stands for the gap between the last scrape
of the old process and the first of the new one: the advisor reads a restart from ``process_start_time_seconds``
and from counters that fall, never from the wall clock between scrapes.
"""

from __future__ import annotations

from typing import Any

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS
from tests.states.test_field_round5 import _all

INTERACTIVE = {"ttft_seconds": 2.0, "tpot_seconds": 0.025, "target_ratio": 0.9}
"""An interactive chat SLO (25 ms a token): chosen where the reports state none."""

BATCH = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
"""A throughput SLO (benchmarks and RL rollouts): chosen where the reports state none."""


def _restarts_counted(n: int) -> Any:
    """The snapshot counts ``n`` engine restarts in the window and reads no token rate below zero (a fall of a
    counter is a reset, never negative work)."""

    def check(result: dict[str, Any]) -> None:
        snap = result.get("snapshot") or {}
        assert snap.get("counter_resets") == n, f"counter_resets {snap.get('counter_resets')!r}, expected {n}"
        for key in ("prompt_tokens_per_second", "generation_tokens_per_second", "preemptions_per_second"):
            value = snap.get(key)
            assert value is None or value >= 0, f"{key} = {value!r}: a counter reset read as negative work"

    return check


# --- 1. vLLM 0.10.1.1: five client aborts move the token counters and no per-request series ------------------------


def vllm_client_aborts_prompt_tokens_no_request() -> FieldState:
    """vllm-project/vllm#55634 ("[Usage]: aborted requests are counted in prompt_tokens_total but absent from every
    per-request metric", open): "Server: ``vllm==0.10.1.1``, ``Qwen2.5-0.5B-Instruct``, one RTX 4090,
    ``--enable-prefix-caching --enable-prompt-tokens-details``. Five streaming completion requests, each read for 64
    bytes and then closed by the client — an ordinary client-side abort. Metric deltas across the five: |
    ``vllm:prompt_tokens_total`` | **+3010** | ``vllm:request_prompt_tokens_sum`` | 0 |
    ``vllm:request_prompt_tokens_count`` | 0 | ``vllm:e2e_request_latency_seconds_count`` | 0 |
    ``vllm:request_success_total`` (all ``finished_reason`` labels) | 0 |. Reproduced twice, three days apart,
    identical numbers." The reporter's follow-up: "``vllm:request_success_total{finished_reason="abort"}`` is
    **already a declared series** — it simply can never become non-zero today"; "``_update_stats_from_finished()``
    has exactly one caller, ``process_outputs()``".

    Engine facts (vLLM V1): ``IterationStats.update_from_output`` (``vllm/v1/metrics/stats.py``) adds a request's
    prompt length to the prompt-token counter when its prefill completes (its first output), counts every generated
    token, observes TTFT at the first token and an inter-token gap at each later one — none of it waits for the
    request to finish. ``OutputProcessor.abort_requests`` (``vllm/v1/engine/output_processor.py``) drops an aborted
    request's state without ``_update_stats_from_finished``, so the success counter and every per-request histogram
    (e2e, queue, prefill, decode, prompt and generation length) stay where they were. ``kv_cache_usage_perc`` is
    ``1 − free ÷ total`` blocks (``vllm/v1/core/block_pool.py``), and a finished or aborted request's blocks return
    to the free queue (cached, still free). Arithmetic: 3,010 ÷ 5 = 602 prompt tokens a request (the script's
    sentence × 60); with prefix caching the 602-token prompt hits its 37 full blocks of 16 (592 tokens) after the
    first computation. Qwen2.5-0.5B keeps 24 layers × 2 × 2 KV heads × 64 × 2 bytes = 12 KiB a token; a 4090 at 0.9
    is 21.6 GiB, less ~0.92 GiB of weights and ~1.9 GiB of activations and graphs: ~18.75 GiB = 1,638,848 tokens
    (102,428 blocks of 16). The engine runs nothing at either scrape (the script sends the five one after another,
    each gone within tens of milliseconds). So prompt tokens that move while no request finishes are aborts, not a
    stall and not a request length to plan for: must never — a restart (it serves), a context cap (602-token
    prompts under a 32,768 context), a pool turn (the pool is 0 % used), more sequences (none waits), replicas.

    Not asserted: "no advice at all" — an idle 4090 serving a 0.5B model is outside what the thread establishes.

    Chosen where the report is silent: the served name is the report's ``Qwen2.5-0.5B-Instruct`` (the advisor's
    ``Qwen/Qwen2.5-0.5B`` preset has its shapes); ``max_model_len`` 32,768 (the model's); ``max_num_seqs`` 256 (the
    default); each aborted stream generates 8 tokens before the disconnect lands (the first SSE chunk alone is
    longer than 64 bytes; the report gives no generation delta). Before: 20 completions of the same prompt (602 in,
    300 out, the blocks cached after the first). The window: the five aborted streams. vLLM 0.10.1.1 rendered with
    the 0.11 label set. SLO: :data:`INTERACTIVE`.
    """
    served = "Qwen/Qwen2.5-0.5B-Instruct"
    blocks = 102_428
    eng = VLLMEngine(model_name=served, num_gpu_blocks=blocks, max_model_len=32_768, gpu_memory_utilization=0.9)
    eng.finish(20, prompt=602, output=300, ttft=0.02, tpot=0.003, queue=0.0)
    eng.first_tokens([0.02] * 20)
    eng.prefill(20 * 602, cached=19 * 592)
    eng.decode(20 * 299, 0.003, steps=20 * 299, batch=1)
    first = eng.render()
    # the window: five streams, each prefilled (prompt counted, first token observed), 8 tokens out, then aborted —
    # no finished-request stats: success counters and per-request histograms unchanged
    eng.first_tokens([0.015] * 5)
    eng.prefill(5 * 602, cached=5 * 592)
    eng.decode(5 * 8, 0.003, steps=5 * 7, batch=1)
    return FieldState(
        id="vllm-0.10-five-client-aborts-prompt-tokens-no-request",
        source="https://github.com/vllm-project/vllm/issues/55634",
        engine_version="vLLM 0.10.1.1 (rendered with the 0.11 label set)",
        deployment={
            "name": "qwen25-05b-4090",
            "engine": "vllm",
            "engine_version": "0.10.1.1",
            "model": "Qwen/Qwen2.5-0.5B",
            "served_model": served,
            "gpu": "rtx4090",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 256,
            "slo": INTERACTIVE,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 0, "requests_waiting": 0, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            RESTART,
            ("max_model_len", "decrease"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. an RL trainer recreates one generation engine mid-step: its counters restart at zero -----------------------


def vllm_grpo_shard_recreated_mid_step() -> FieldState:
    """NVIDIA-NeMo/RL#4052 ("feat(telemetry)!: instrument the single-controller path and propagate traces", review of
    ``nemo_rl/models/generation/vllm/utils.py``, September 2026). The function under review takes "start_counters:
    Counter snapshot taken before generation. end_counters: Counter snapshot taken after generation" and computes
    ``delta = {k: end_counters.get(k, 0.0) - start_counters.get(k, 0.0) …}``; the reviewer: "**TL;DR — when
    ``restart_shard`` recreates an engine mid-step, its Prometheus counters restart at 0, so this difference goes
    negative and is logged as a negative count.** … A reset end snapshot gives ``{'vllm/prompt_tokens': -800,
    'vllm/generation_tokens': -400, 'vllm/generations_ok': -8}``, and an empty end snapshot gives -1000 / -500 /
    -10." ``restart_shard`` is the single controller's recovery (NVIDIA-NeMo/RL#3592, "restart dead generation shards
    and re-admit them at the next refit").

    Engine facts: vLLM V1's ``PrometheusStatLogger`` (``vllm/v1/metrics/loggers.py``) creates its counters and
    histograms when an engine starts, so a recreated engine's start at zero; ``prometheus_client`` exposes the new
    process's ``process_start_time_seconds`` and each counter's ``_created``. Prometheus reads a counter that falls as
    a reset and its value after the fall as the increase since. Arithmetic: the recreated shard's start snapshot is
    the one the "-1000 / -500 / -10" of the empty case imply (1,000 prompt tokens, 500 generated, 10 requests), its end
    snapshot 200 / 100 / 2 (200 − 1,000 = −800, 100 − 500 = −400, 2 − 10 = −8): ten requests of 100 prompt and 50
    generated tokens before, two on the new engine after. The other shard goes 1,000 → 1,200, 500 → 600, 10 → 12 over
    the same step. The window holds one restart (one engine, once), ~400 prompt and ~200 generated tokens a second
    and no negative one. So must never: a restart (the controller has just done it and the new engine serves), a
    budget cut (one recreation by the controller is not an engine that keeps crashing), replicas from one second.

    Not asserted: the fleet's size (nothing in the review speaks to it; both engines are idle at the step's
    snapshots, between generation calls).

    Chosen where the report is silent: two generation shards (one recreated), Llama-3.1-8B-Instruct on one H100 each,
    not colocated with training (``gpu_memory_utilization`` 0.9; the pool is the capacity pass's, 26,289 blocks of
    16), ``max_model_len`` 4,096; TTFT 50 ms and 15 ms a token; the new engine started an hour after the old one
    (the review gives no time). vLLM of September 2026 rendered with the 0.33 label set. SLO: :data:`BATCH`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 26_289
    started = 1.7624e9

    def shard(start: float) -> VLLMEngine:
        return VLLMEngine(
            model_name=model,
            num_gpu_blocks=blocks,
            max_model_len=4_096,
            gpu_memory_utilization=0.9,
            version="0.33",
            started=start,
        )

    def serve(eng: VLLMEngine, n: int) -> None:
        eng.finish(n, prompt=100, output=50, ttft=0.05, tpot=0.015, queue=0.0)
        eng.first_tokens([0.05] * n)
        eng.prefill(n * 100)
        eng.decode(n * 50, 0.015, steps=n * 49, batch=1)

    steady = shard(started)
    serve(steady, 10)
    steady_first = steady.render()
    serve(steady, 2)
    old = shard(started)
    serve(old, 10)
    new = shard(started + 3_600.0)
    serve(new, 2)
    return FieldState(
        id="vllm-grpo-shard-recreated-mid-step-counters-restart-at-zero",
        source="https://github.com/NVIDIA-NeMo/RL/pull/4052",
        engine_version="vLLM of September 2026 (rendered with the 0.33 label set)",
        deployment={
            "name": "grpo-generation",
            "engine": "vllm",
            "model": model,
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 4_096,
            "slo": BATCH,
        },
        scrapes=[(steady_first, steady.render()), (old.render(), new.render())],
        snapshot={"requests_running": 0, "requests_waiting": 0, "kv_cache_capacity_tokens": 2 * blocks * 16},
        must_never=[
            RESTART,
            ("gpu_memory_utilization", "decrease"),
            ("replicas", "increase"),
        ],
        extra_check=_all(no_stall_claimed, _restarts_counted(1)),
    )


# --- 3. llm-d: two saturated decode pods miss their 1 s /health probes, the kubelet restarts both ------------------


def llmd_decode_pods_liveness_killed() -> FieldState:
    """llm-d/llm-d-benchmark#1734 ("Raise readiness/liveness probe tolerance", merged August 2026): "The decode
    readiness and liveness probes inherited no timeoutSeconds, so the kubelet applied its 1s default. With
    failureThreshold 3 and periodSeconds 5, a saturated vLLM only had to miss three 1s /health checks (~15s) to be
    marked NotReady, which de-registered the endpoint from the InferencePool and left the EPP with no candidates. Set
    failureThreshold 10 and timeoutSeconds 15 on both probes." The same gap, named in KServe's vLLM templates
    (kserve/kserve#5602): "``livenessProbe`` had ``failureThreshold: 3`` (restart after 30s, before traffic even
    stops)".

    Engine and platform facts: the kubelet restarts a container whose liveness probe fails ``failureThreshold`` times
    in a row — in place, in the same pod, so the scrape target (the pod's address) stays and the engine behind it is
    a new process: ``process_start_time_seconds`` moves and every vLLM counter and histogram starts again from zero
    (``vllm/v1/metrics/loggers.py`` creates them at engine start). vLLM's ``/health`` is answered by the same API
    server process that streams every response, so under saturation a 1 s timeout is missed; nothing in a liveness
    kill is an out-of-memory crash, and ``gpu_memory_utilization`` does not move the probe's timeout. Arithmetic: the
    probes' three misses at 5 s intervals kill a container ~15 s into saturation; both pods take the same benchmark
    and saturate together, so both are killed in the same minute — one restart each. Saturated, each pod runs 256
    (its ``max_num_seqs``) with 180 waiting and 97 % of its 449,920-token pool held (~1,700 tokens a sequence);
    after the restart each serves again, 120 admitted, 30 % of the pool. So: two restarts in the window are two
    engines restarted once each, by their probes — must never "repeated restarts (likely OOM)" with a smaller memory
    budget (a smaller pool for a saturated engine: more preemption, more queueing, the probes missed sooner), never a
    restart (the kubelet has just done it), never replicas from one second.

    Not asserted: the fix (probe timeouts are not among the advisor's dials); any turn for the saturation itself (the
    window straddles the restart: the old processes' queue is not the new ones').

    Chosen where the report is silent: two decode pods (aggregated serving; llm-d names its serving role ``decode``
    with or without a prefill role), Llama-3.1-8B-Instruct on one H100 each, ``gpu_memory_utilization`` 0.9,
    ``max_model_len`` 8,192, ``max_num_seqs`` 256 (the pool is the capacity pass's, 28,120 blocks of 16); the
    benchmark's requests 1,000 tokens in and 1,000 out; before the kill each pod had answered 3,000 (TTFT up to 30 s
    under the queue, 45 ms a token) and preempted 400; the new processes started ten minutes after the old ones
    (model load and probes). vLLM of August 2026 rendered with the 0.33 label set. SLO: :data:`BATCH`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 28_120
    started = 1.7624e9

    def pod(start: float) -> VLLMEngine:
        return VLLMEngine(
            model_name=model,
            num_gpu_blocks=blocks,
            max_model_len=8_192,
            gpu_memory_utilization=0.9,
            version="0.33",
            started=start,
        )

    scrapes: list[tuple[str, str]] = []
    for shift in (0.0, 37.0):
        old = pod(started + shift)
        old.finish(2_500, prompt=1_000, output=1_000, ttft=4.0, tpot=0.045, queue=3.5)
        old.finish(500, prompt=1_000, output=1_000, ttft=30.0, tpot=0.045, queue=29.0)
        old.first_tokens([4.0] * 2_500 + [30.0] * 756)
        old.prefill(3_256 * 1_000)
        old.decode(3_000 * 1_000 + 256 * 500, 0.045, steps=(3_000 * 1_000 + 256 * 500) / 256, batch=256)
        old.preempt(400)
        old.running, old.waiting, old.kv_usage = 256.0, 180.0, 0.97
        new = pod(started + shift + 600.0)
        # serving again: 120 admitted, prefilled, first tokens out, 20 decode steps; nothing finished yet
        new.first_tokens([0.9] * 120)
        new.prefill(120 * 1_000)
        new.decode(120 * 20, 0.03, steps=20, batch=120)
        new.running, new.waiting, new.kv_usage = 120.0, 0.0, 0.30
        scrapes.append((old.render(), new.render()))
    return FieldState(
        id="llmd-two-saturated-decode-pods-liveness-killed-not-oom",
        source="https://github.com/llm-d/llm-d-benchmark/pull/1734",
        engine_version="vLLM of August 2026 in llm-d (rendered with the 0.33 label set)",
        deployment={
            "name": "llmd-decode",
            "engine": "vllm",
            "model": model,
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8_192,
            "max_num_seqs": 256,
            "slo": BATCH,
        },
        scrapes=scrapes,
        snapshot={"requests_running": 240, "requests_waiting": 0, "kv_cache_capacity_tokens": 2 * blocks * 16},
        must_never=[
            ("gpu_memory_utilization", "decrease"),
            RESTART,
            ("replicas", "increase"),
        ],
        extra_check=_all(no_stall_claimed, _restarts_counted(2)),
    )


STATES = [
    vllm_client_aborts_prompt_tokens_no_request(),
    vllm_grpo_shard_recreated_mid_step(),
    llmd_decode_pods_liveness_killed(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
