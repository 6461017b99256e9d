"""Field states for issue 13, problems 4 and 5: hung engines (``stalled``) and over-provisioning by TP.

Problem 4 — a hung engine: requests inside it (waiting, running, or both) while its token and finished-request
counters stand still. Before issue 13 a queue with nothing running was ``fresh`` and no rule fired (queue growth
read the piling arrivals as load), and a freeze with requests running was ``stale`` and silent. The right advice is
to restart the engine process (pseudo-dial ``engine_process``, action ``restart``); no capacity turn helps, and more
replicas beside a hung engine still send it its share.

Problem 5 — over-provisioning by TP: a large model at a high TP using a small fraction of its pool under a light,
steady load gets the lower TP that holds the load within the SLO; a lull after a busy spell gets nothing.

``once`` sees two scrapes one second apart, so these rows set ``rules.stalled.min_intervals: 1`` (the daemon's
default is 3 intervals and a for-duration). Every row is built from the public report in ``source``, as that engine
exposes it (vLLM V1 through :class:`tests.states.VLLMEngine`, SGLang 0.5 through :class:`tests.states.SGLangEngine`,
the llm-d inference simulator through :func:`_sim_page` below, written from its ``pkg/llm-d-inference-sim/metrics.go``
family names); where a report does not name the model or GPU, a stand-in is named in the row's docstring.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.states import SGLangEngine, VLLMEngine
from tests.states.field import FieldState, FieldStateRuns, check_field_state, run_field_states

STALL_RULES = {"rules": {"stalled": {"min_intervals": 1}}}
RESTART = ("engine_process", "restart")
CAPACITY_TURNS: list[tuple[str, str | None]] = [
    ("replicas", None),
    ("kv_cache_dtype", None),
    ("gpu_memory_utilization", None),
    ("max_model_len", None),
    ("tensor_parallel_size", None),
    ("max_num_seqs", None),
    ("weight_quantization", None),
    ("instance_type", None),
]
"""Every capacity turn: none helps a hung engine."""


def _stalled_targets(n: int) -> Any:
    def check(result: dict[str, Any]) -> None:
        recs = [r for r in result.get("recommendations") or [] if r.get("dial") == "engine_process"]
        assert recs, "no restart advice"
        stalled = (recs[0].get("evidence") or {}).get("stalled_targets") or {}
        assert len(stalled) == n, f"stalled targets {stalled}, expected {n}"
        for url in stalled:
            assert url in recs[0]["flag"], f"the flag does not name {url}"

    return check


def _frozen(eng: VLLMEngine) -> tuple[str, str]:
    """Two identical scrapes: the engine did work earlier (its counters are high) and nothing since."""
    eng.prefill(4_000_000)
    eng.decode(900_000, 0.03)
    eng.finish(40, prompt=2_000, output=400, ttft=0.8, tpot=0.03, queue=0.1)
    page = eng.render()
    return page, page


def vllm_queue_nothing_running() -> FieldState:
    """vllm-project/vllm#45414 ("Scheduler deadlocks without KV-cache connector"): the engine repeatedly sits at
    "Running: 0 reqs, Waiting: 5-6 reqs, GPU KV cache usage: 0.0%, Throughput: 0.0 tokens/s" for 9+ minutes;
    health and readiness probes return 200. ``vllm serve Qwen/Qwen3.5-397B-A17B-GPTQ-Int4 --tensor-parallel-size 4
    --gpu-memory-utilization=0.90``, a 0.2x-era V1 build (``num_requests_waiting_by_reason`` exposed).

    Stand-ins: the model table has no Qwen3.5-397B; Qwen3-235B-A22B in GPTQ int4 at TP 4 on H100s (the report names
    no GPU) has the same shape — a large MoE in int4 on four GPUs. The queue grows 5 → 6 between the scrapes, so
    ``queue_growth`` reads arrivals outpacing service; it must not scale replicas for a deadlock.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-235B-A22B",
        num_gpu_blocks=56_221,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    eng.running, eng.waiting, eng.kv_usage = 0.0, 5.0, 0.0
    first, _ = _frozen(eng)
    eng.waiting = 6.0
    second = eng.render()
    return FieldState(
        id="vllm-deadlock-queue-nothing-running",
        source="https://github.com/vllm-project/vllm/issues/45414",
        engine_version="vLLM 0.2x (V1; rendered with the 0.33 label set)",
        deployment={
            "name": "qwen-moe",
            "engine": "vllm",
            "model": "Qwen/Qwen3-235B-A22B",
            "quantization": "gptq",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        extra_config=STALL_RULES,
        snapshot={"requests_running": 0, "requests_waiting": 6, "kv_cache_usage_ratio": 0.0},
        state="fresh",
        must_first=RESTART,
        must_never=CAPACITY_TURNS,
        extra_check=_stalled_targets(1),
    )


def vllm_hang_request_running() -> FieldState:
    """vllm-project/vllm#17972 ("vLLM server hangs and timeouts after initial requests"), vLLM 0.8.x V1: the
    engine logs "Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%" with 0.0 tokens/s every ten seconds,
    while ``/health`` answers 200; the client times out.

    Stand-ins: the report serves a vision-language model (its prompts carry ``<image>``) without naming the GPU;
    Qwen2-VL-7B-Instruct on one H100 stands in. The data is ``stale`` (frozen: a request runs, no counter moves),
    and the stalled rule still speaks — no capacity rule may read the frozen gauges.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen2-VL-7B-Instruct",
        num_gpu_blocks=63_475,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 0.0
    first, second = _frozen(eng)
    return FieldState(
        id="vllm-hang-one-request-running",
        source="https://github.com/vllm-project/vllm/issues/17972",
        engine_version="vLLM 0.8 (V1; rendered with the 0.11 label set)",
        deployment={
            "name": "vl-7b",
            "engine": "vllm",
            "model": "Qwen/Qwen2-VL-7B-Instruct",
            "gpu": "h100-sxm",
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        extra_config=STALL_RULES,
        snapshot={"requests_running": 1, "requests_waiting": 0},
        state="stale",
        state_reason_contains=("frozen",),
        must_first=RESTART,
        must_never=CAPACITY_TURNS,
    )


def _sim_page(*, running: float, waiting: float, prompt: float, generated: float, done: float) -> str:
    """One llm-d inference simulator page (``pkg/llm-d-inference-sim/metrics.go``: the vLLM family names it
    registers; ``gpu_cache_usage_perc``, ``cache_config_info{block_size, num_gpu_blocks}``)."""
    m = '{model_name="meta-llama/Llama-3.1-8B-Instruct"}'
    lines = [
        "# HELP vllm:num_requests_running Number of requests currently running on GPU.",
        "# TYPE vllm:num_requests_running gauge",
        f"vllm:num_requests_running{m} {running}",
        "# HELP vllm:num_requests_waiting Prometheus metric for the number of queued requests.",
        "# TYPE vllm:num_requests_waiting gauge",
        f"vllm:num_requests_waiting{m} {waiting}",
        "# HELP vllm:gpu_cache_usage_perc Prometheus metric for the fraction of KV-cache blocks currently in use.",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        f"vllm:gpu_cache_usage_perc{m} 0",
        "# HELP vllm:prompt_tokens_total Total number of prompt tokens processed.",
        "# TYPE vllm:prompt_tokens_total counter",
        f"vllm:prompt_tokens_total{m} {prompt}",
        "# HELP vllm:generation_tokens_total Total number of generated tokens.",
        "# TYPE vllm:generation_tokens_total counter",
        f"vllm:generation_tokens_total{m} {generated}",
        "# HELP vllm:request_success_total Count of successfully processed requests.",
        "# TYPE vllm:request_success_total counter",
        f'vllm:request_success_total{{finished_reason="stop",model_name="meta-llama/Llama-3.1-8B-Instruct"}} {done}',
        "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig.",
        "# TYPE vllm:cache_config_info gauge",
        'vllm:cache_config_info{block_size="16",num_gpu_blocks="28120"} 1',
    ]
    return "\n".join(lines) + "\n"


def sim_pods_stuck_queues() -> FieldState:
    """llm-d/llm-d-autoscaling#769: after a benchmark severed its connections, requests already forwarded stayed
    "permanently stuck" in the simulator pods' queues — 213, 78, 40 and 32 waiting on the four pods listed — while a
    pod that started after the test had an empty queue. The autoscaler read the queues as saturation and would not
    scale down. Nothing is processed: the counters stand still.

    The advisor must name the stuck pods and ask for their restart, never scale replicas up for the queues. The
    simulator runs no model; Llama-3.1-8B-Instruct on H100 (the simulator's 28,120-block cache) stands in.
    """
    queues = [213.0, 78.0, 40.0, 32.0]
    scrapes = []
    for i, q in enumerate(queues):
        page = _sim_page(running=0, waiting=q, prompt=500_000.0 + i, generated=90_000.0 + i, done=300.0 + i)
        scrapes.append((page, page))
    empty = _sim_page(running=0, waiting=0, prompt=0, generated=0, done=0)
    scrapes.append((empty, empty))
    return FieldState(
        id="llmd-sim-pods-stuck-queues",
        source="https://github.com/llm-d/llm-d-autoscaling/issues/769",
        engine_version="llm-d-inference-sim (vLLM family names)",
        deployment={
            "name": "ms-sim",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=scrapes,
        extra_config=STALL_RULES,
        snapshot={"requests_waiting": 363, "requests_running": 0},
        state="fresh",
        must_first=RESTART,
        must_never=[("replicas", "increase"), *CAPACITY_TURNS[1:]],
        extra_check=_stalled_targets(4),
    )


def sglang_drained_gauges_hang() -> FieldState:
    """sgl-project/sglang#33858, SGLang 0.5.16 with ``--tokenizer-worker-num 2``: under queue overflow the benchmark
    stops at 1309/4096 while ``sglang:num_running_reqs`` and ``sglang:num_queue_reqs`` are 0, the inference work has
    drained and ``/health`` answers 200; the unfinished requests hang in the tokenizer workers, which the metrics do
    not count. Nothing is inside the engine as its gauges see it: no stall may be claimed (a restart advised from
    these numbers would be a guess), and no capacity advice either. Stand-in: Llama-3.1-8B on one H100 for the
    report's ``deepseek-v4-flash`` (not in the model table).
    """
    eng = SGLangEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct", max_total_num_tokens=440_000, context_len=8192, swa_tokens=0
    )
    eng.finish(30, prompt=1_000, output=200, ttft=0.5, tpot=0.03, queue=0.1)
    page = eng.render()
    return FieldState(
        id="sglang-drained-gauges-requests-hang-in-tokenizer",
        source="https://github.com/sgl-project/sglang/issues/33858",
        engine_version="SGLang 0.5.16",
        deployment={
            "name": "sglang-8b",
            "engine": "sglang",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(page, page)],
        extra_config=STALL_RULES,
        snapshot={"requests_running": 0, "requests_waiting": 0},
        state="fresh",
        must_never=[RESTART, *CAPACITY_TURNS],
        no_advice=True,
    )


# --- problem 5: over-provisioning by TP -------------------------------------------------------------------------


def _light(eng: VLLMEngine, *, running: tuple[float, float], usage: tuple[float, float]) -> tuple[str, str]:
    """A light second: 1 request of 1,500 + 300 tokens finishes; ``running`` and KV ``usage`` at each scrape."""
    eng.prefill(3_000_000)
    eng.decode(600_000, 0.02)
    eng.finish(200, prompt=1_500, output=300, ttft=0.2, tpot=0.02, queue=0.01)
    eng.running, eng.kv_usage = running[0], usage[0]
    first = eng.render()
    eng.prefill(1_500)
    eng.decode(300, 0.02, steps=50, batch=running[1])
    eng.first_tokens([0.2])
    eng.finish(1, prompt=1_500, output=300, ttft=0.2, tpot=0.02, queue=0.01)
    eng.running, eng.kv_usage = running[1], usage[1]
    return first, eng.render()


def vllm_70b_tp8_light_load() -> FieldState:
    """vllm-project/vllm#8089 ("Llama 3 70B; vLLM does not scale beyond TP=4"): Llama-3-70B in FP8 on eight H100s;
    the maintainer: "Using unnecessarily large TP size will hurt performance, because the communication overhead is
    larger", and the reporter sizes the KV cache of a 3,000-token sequence at ~8 GB.

    The deployment of the report (70B FP8, TP 8, H100 SXM) under a light steady load (the off-peak hours the
    over-provisioning question is about; the report benchmarks at saturation): 6 requests running of 1,500 + 300
    tokens, KV usage 3 %, goodput met. The first advice is a lower TP, freeing GPUs; never a scale-up.
    """
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-70B-Instruct",
        num_gpu_blocks=94_078,
        max_model_len=8192,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    first, second = _light(eng, running=(6.0, 6.0), usage=(0.03, 0.03))
    return FieldState(
        id="vllm-70b-fp8-tp8-h100-light-steady-load",
        source="https://github.com/vllm-project/vllm/issues/8089",
        engine_version="vLLM 0.11 (V1)",
        deployment={
            "name": "llama70b",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "quantization": "fp8",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 6, "requests_waiting": 0, "kv_cache_usage_ratio": 0.03},
        must_first=("tensor_parallel_size", "decrease"),
        must_never=[
            ("replicas", "increase"),
            ("tensor_parallel_size", "increase"),
            ("gpu_memory_utilization", "increase"),
            RESTART,
        ],
        extra_check=_frees_gpus,
    )


def _frees_gpus(result: dict[str, Any]) -> None:
    first = (result.get("recommendations") or [])[0]
    assert first["current"] == 8 and first["suggested"] in (1, 2, 4), first
    gpus = first["predicted_effect"]["gpus"]
    assert gpus["before"] == 8 and gpus["after"] == first["suggested"], gpus


def vllm_70b_tp8_lull() -> FieldState:
    """dstackai/dstack#2656: the RPS autoscaler averages traffic over one minute, so a dip in arrivals read as low
    load stopped a replica that was still processing. The same 70B FP8 TP 8 deployment (vllm#8089) in a lull: 48
    requests were running at the first scrape, 6 at the second (the light row's reading); usage 20 % → 3 %. A lull
    after a busy spell is no light load: no over-provisioning turn, whatever the newest numbers say.
    """
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-70B-Instruct",
        num_gpu_blocks=94_078,
        max_model_len=8192,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    first, second = _light(eng, running=(48.0, 6.0), usage=(0.20, 0.03))
    return FieldState(
        id="vllm-70b-tp8-transient-lull",
        source="https://github.com/dstackai/dstack/issues/2656",
        engine_version="vLLM 0.11 (V1)",
        deployment={
            "name": "llama70b",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-70B-Instruct",
            "quantization": "fp8",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 8,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 6, "requests_waiting": 0},
        must_never=[
            ("tensor_parallel_size", "decrease"),
            ("replicas", "decrease"),
            ("instance_type", None),
            RESTART,
        ],
        extra_check=_lull_named,
    )


def _lull_named(result: dict[str, Any]) -> None:
    reason = next((str(r.get("reason")) for r in result.get("rules") or [] if r.get("rule") == "over_provisioned"), "")
    assert "not steady" in reason, f"over_provisioned reason: {reason!r}"


STATES = [
    vllm_queue_nothing_running(),
    vllm_hang_request_running(),
    sim_pods_stuck_queues(),
    sglang_drained_gauges_hang(),
    vllm_70b_tp8_light_load(),
    vllm_70b_tp8_lull(),
]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module (both tables), a few at a time
    (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, STATES + NOT_A_HANG_STATES)


@pytest.mark.parametrize("state", STATES, ids=[s.id for s in STATES])
def test_field_state(once: FieldStateRuns, state: FieldState) -> None:
    check_field_state(once[state], state)


# --- problem 4, the other side: still counters that are not a hang ------------------------------------------------
#
# These rows set ``min_intervals: 1`` too, so that the only thing between the scrapes and a restart is the reading
# under test: counters that move only when a request finishes, and a queue that waits on another stage. Before the
# fix every one of them proposed restarting a healthy engine.


def sglang_long_generations_counters_still() -> FieldState:
    """sgl-project/sglang#3909 ("During inference, throughput steadily decreases"): DeepSeek-R1 on 2 × 8 H20 with
    SGLang; the log shows ``Decode batch. #running-req: 8, #token: 62531 → 65411, gen throughput (token/s): 186,
    #queue-req: 0`` for minutes — eight long generations (prompts of ~7,600 tokens) decoding, nothing finishing.

    SGLang counts prompt and generated tokens and requests only when a request finishes
    (``TokenizerMetricsCollector.observe_one_finished_request``), so between the scrapes every counter stands still
    while the engine decodes 186 tokens/s: no restart may be advised. Stand-in: the GPU table has no H20 and the
    advisor models one node, so DeepSeek-R1 on one node of 8 H200 at TP 8 (a healthy engine either way); the pool
    is the report's (62,531 tokens at usage 0.13 → 481,000). The data-quality check reads "frozen" the same way
    (``evaluate._frozen``: requests running, token counters still), so the state is not asserted here.
    """
    eng = SGLangEngine(
        model_name="deepseek-ai/DeepSeek-R1", max_total_num_tokens=481_000, context_len=163_840, swa_tokens=0
    )
    eng.finish(40, prompt=7_600, output=3_000, ttft=1.5, tpot=0.04, queue=0.2)
    eng.prompt["true"], eng.generation["true"] = 40 * 7_600.0, 40 * 3_000.0
    eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = 8.0, 0.0
    eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = 62_531.0
    eng.g["token_usage"] = eng.g["full_token_usage"] = 0.13
    eng.g["gen_throughput"] = 186.64
    first = eng.render()
    # one second later: 186 more tokens decoded (the gauges move), no request finished (the counters do not)
    eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = 62_717.0
    eng.g["gen_throughput"] = 185.93
    second = eng.render()
    return FieldState(
        id="sglang-long-generations-counters-still",
        source="https://github.com/sgl-project/sglang/issues/3909",
        engine_version="SGLang 0.4.3 (rendered with the 0.5 families)",
        deployment={
            "name": "r1",
            "engine": "sglang",
            "model": "deepseek-ai/DeepSeek-R1",
            "gpu": "h200",
            "tensor_parallel_size": 8,
            "max_model_len": 163_840,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        extra_config=STALL_RULES,
        snapshot={"requests_running": 8, "requests_waiting": 0},
        state=None,
        must_never=[RESTART, ("replicas", "increase")],
        extra_check=_stall_not_claimed("only when a request finishes"),
    )


def vllm_pd_decode_waiting_for_remote_kv() -> FieldState:
    """vllm-project/vllm#50754 ("[PD][NixlPush] Notify D of NIXL writes that failed to post so it stops waiting"):
    in push mode the prefill node writes KV into the decode node; when it cannot start a transfer it only logs, and
    the decode node's request "hangs until its lease expires while holding blocks over a half-written cache".

    The decode engine as its ``/metrics`` shows it (vLLM 0.33 label set): nothing running, three requests waiting,
    all three ``deferred`` (``num_requests_waiting_by_reason{reason="deferred"}``: waiting for remote KV), KV usage
    4 % held by them, every counter still. The engine's own compute is idle and healthy; the stage that stalls is
    the transfer from the prefill side. A restart of this engine drops the requests handed over and cures nothing.
    Stand-in: the PR names no model or GPU; Qwen3-8B on one H100 SXM.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-8B",
        num_gpu_blocks=28_000,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        version="0.33",
    )
    first, _ = _frozen(eng)
    eng.running, eng.waiting, eng.deferred, eng.kv_usage = 0.0, 3.0, 3.0, 0.04
    first = second = eng.render()
    return FieldState(
        id="vllm-pd-decode-waiting-for-remote-kv",
        source="https://github.com/vllm-project/vllm/pull/50754",
        engine_version="vLLM 0.33 (V1, NixlConnector kv_consumer)",
        deployment={
            "name": "qwen-decode",
            "engine": "vllm",
            "model": "Qwen/Qwen3-8B",
            "gpu": "h100-sxm",
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        extra_config=STALL_RULES,
        snapshot={"requests_running": 0, "requests_waiting": 3},
        state="fresh",
        must_never=[RESTART, *CAPACITY_TURNS],
        extra_check=_stall_not_claimed("waiting_deferred 3"),
    )


def _tgi_page(*, running: float, queued: float, finished: float, prompt: float, generated: float) -> str:
    """One TGI page: the router's families (``router/src/server.rs``, ``validation.rs``, ``infer.rs`` of the v0.9
    line; :mod:`advisor.engines.tgi`), histograms with their ``_sum`` and ``_count``; ``max_total_tokens`` 5,120
    (the report's ``--max-input-length 1024 --max-total-tokens 5120``): generated-token buckets of 51.2 tokens."""
    lines = [
        "# TYPE tgi_batch_current_size gauge",
        f"tgi_batch_current_size {running}",
        "# TYPE tgi_queue_size gauge",
        f"tgi_queue_size {queued}",
        "# TYPE tgi_batch_current_max_tokens gauge",
        f"tgi_batch_current_max_tokens {running * 5120}",
        "# TYPE tgi_request_count counter",
        f"tgi_request_count {finished + running + queued}",
        "# TYPE tgi_request_success counter",
        f"tgi_request_success {finished}",
    ]
    for name, total, step in (
        ("tgi_request_input_length", prompt, 10.24),
        ("tgi_request_generated_tokens", generated, 51.2),
    ):
        lines.append(f"# TYPE {name} histogram")
        mean = total / finished
        for k in range(1, 101):
            bound = step * k
            lines.append(f'{name}_bucket{{le="{bound:g}"}} {finished if bound >= mean else 0}')
        lines += [f'{name}_bucket{{le="+Inf"}} {finished}', f"{name}_sum {total}", f"{name}_count {finished}"]
    return "\n".join(lines) + "\n"


def tgi_4k_outputs_counters_still() -> FieldState:
    """huggingface/text-generation-inference#614: an operator raises ``max_new_tokens`` to 4,096 (the maintainer:
    ``--max-input-length 1024 --max-total-tokens 5120``). At ~30 ms a token a 4,096-token answer decodes for two
    minutes, and TGI records generated tokens and successes only when a request ends (``tgi_request_generated_tokens``
    is a histogram observed at the end, ``tgi_request_success`` likewise): with 4 long answers running and 2 queued
    nothing moves between the scrapes on a healthy server. Stand-in: the report names no model or GPU; Llama-3.1-8B
    on one A10G. 30 requests finished before, of 900 prompt and 3,000 generated tokens on average.
    """
    page = _tgi_page(running=4, queued=2, finished=30, prompt=27_000, generated=90_000)
    return FieldState(
        id="tgi-4k-outputs-counters-still",
        source="https://github.com/huggingface/text-generation-inference/issues/614",
        engine_version="TGI 0.9 (router families)",
        deployment={
            "name": "tgi-8b",
            "engine": "tgi",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "a10g",
            "max_model_len": 5120,
            "slo": {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(page, page)],
        extra_config=STALL_RULES,
        snapshot={"requests_running": 4, "requests_waiting": 2},
        state=None,
        must_never=[RESTART, ("replicas", "increase")],
        extra_check=_stall_not_claimed("only when a request finishes"),
    )


def _stall_not_claimed(why: str) -> Any:
    def check(result: dict[str, Any]) -> None:
        (stalled,) = [r for r in result.get("rules") or [] if r.get("rule") == "stalled"]
        assert stalled["state"] == "inactive", stalled
        assert why in str(stalled.get("reason")), stalled

    return check


NOT_A_HANG_STATES = [
    sglang_long_generations_counters_still(),
    vllm_pd_decode_waiting_for_remote_kv(),
    tgi_4k_outputs_counters_still(),
]


@pytest.mark.parametrize("state", NOT_A_HANG_STATES, ids=[s.id for s in NOT_A_HANG_STATES])
def test_still_counters_that_are_no_hang(once: FieldStateRuns, state: FieldState) -> None:
    check_field_state(once[state], state)
