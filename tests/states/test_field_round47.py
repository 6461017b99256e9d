"""Field states, round 47: pages the advisor may read wrongly because the engine changed under them or is not what
answers — two SGLang replicas launched with one byte-identical ``--max-total-tokens 200000`` that realized pools 20 %
apart, an SGLang 0.4.7 scheduler frozen ~20 s while FlashInfer JIT-compiles its cascade kernel for the first cached
prefix, a vLLM V1 engine whose 48 simultaneous ~100k-token prefills wait ~20 s on a first-use Triton compile and then
drain, and a vLLM production-stack router whose own ``/metrics`` prints all-zero ``vllm:`` gauges while three backends
serve behind it — from four public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its GPU or model is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered through :class:`tests.states.SGLangEngine` (the 0.5.x scheduler and tokenizer families;
0.4.7 replayed with that exposition, as rounds 16, 32, 34 and 41 replay 0.4.x) or :class:`tests.states.VLLMEngine`
(V1, the 0.33 label set for 2026 releases), and the router's page written here from the lines the report prints. The
assertions come from the reports' numbers, the verdict each thread establishes and engine facts, never from the
advisor's output:

* ``sglang-2026-max-total-tokens-200000-clamped-163089-on-one-of-two-replicas-no-advice`` — "max_total_tokens=200000
  is larger than the profiled value 163089. Use the profiled value instead"; across eight arms of the same command
  "200000, 200000, 163089, 170003, 200000, 162146, 200000, 184832", "one target held the pin, the other never did".
  At an equal, unqueued benchmark load no turn is due: never a restart (the relaunch re-profiles and never held the
  pin on that target), a pool turn, more or fewer sequences, or replicas either way.
* ``sglang-0.4.7-first-cached-prefix-20s-flashinfer-cascade-jit-stall-no-restart`` — "approximately 20-second stall
  when returning the first cached token … At the stall time, the cpu are busy on comiling something: … cicc …
  flashinfer/data/csrc/cascade.cu … -arch compute_80"; 0.4.6 did not. A one-time compile on the scheduler's CPU:
  never a restart, more TP, a pool turn, more sequences or replicas.
* ``vllm-2026-48x100k-prefills-first-use-triton-jit-20s-stall-then-drain-no-restart`` — "48 distinct ~100k-token
  prefills fired at once … During the stall (both GPUs at 0% util, ~290 W), both TP workers are in Triton
  compilation … About 20 s later both GPUs jump to 100% util … and it drains, just slowly (3 of 48 done in 78 s, zero
  errors)". Never a restart, more TP, replicas, more sequences, or a context cap under the 100k prompts.
* ``vllm-production-stack-router-metrics-all-zero-three-backends-serving-no-scale-in`` — "Here I have 3 vllm inference
  backends registered to my vllm-router. The router sees them properly, but don't forward their metrics"; its
  ``/metrics``: ``vllm:num_requests_running{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 0.0``, ``…waiting… 0.0``,
  ``vllm:gpu_cache_usage_perc… 0.0``. Zeros from a proxy are not an idle fleet: never replicas down, a smaller pool
  or fewer sequences.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import SGLangEngine, VLLMEngine, go_float
from tests.states.field import Advice, FieldState, round_tests
from tests.states.test_field_round3_others import _cap_at_least
from tests.states.test_field_round3_vllm import RESTART
from tests.states.test_field_round4_vllm import POOL_TURNS

REPLICAS_EITHER_WAY: list[Advice] = [("replicas", "increase"), ("replicas", "decrease")]

SCALE_IN: list[Advice] = [
    ("replicas", "decrease"),
    ("gpu_memory_utilization", "decrease"),
    ("kv_cache_memory_bytes", "decrease"),
    ("max_num_seqs", "decrease"),
    ("tensor_parallel_size", "decrease"),
    ("instance_type", None),
]
"""The turns that shrink a deployment: wrong wherever the page's zeros are not the engines' load."""


def _sglang_gauges(eng: SGLangEngine, *, running: float, queued: float, used: float, gen: float) -> None:
    pool = eng.g["max_total_num_tokens"]
    eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, queued
    eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = used
    eng.g["kv_available_tokens"] = pool - used
    eng.g["token_usage"] = eng.g["full_token_usage"] = round(used / pool, 4)
    eng.g["gen_throughput"] = gen


# --- 1. SGLang: one --max-total-tokens 200000, pools of 200,000 and 163,089 on two replicas ------------------------


def sglang_max_total_tokens_clamped_on_one_replica() -> FieldState:
    """Blackwellboy/model-serving-minefield#109 ("[research-integrity] --max-total-tokens is a request, not a pin:
    SGLang clamps it to a profiled value and two identical A/B arms ran 20 percent apart", closed, 2026-09-07): "You
    pin the KV pool so two benchmark arms are comparable. The server silently clamps the pin down to whatever it
    profiled for that launch, says so once at startup, and never mentions it again"; "max_total_tokens=200000 is
    larger than the profiled value 163089. Use the profiled value instead. KV Cache is allocated. dtype:
    torch.float8_e4m3fn, #tokens: 163089"; "Across eight arms of one A/B, every one launched with the same
    ``--max-total-tokens 200000`` and the same memory fraction, the realized pools were: 200000, 200000, 163089,
    170003, 200000, 162146, 200000, 184832. The clamp tracks whatever the profiler found free at that launch, so it
    varies between runs of the same command, and here it sorted by target: one target held the pin, the other never
    did."

    Engine facts (SGLang ``model_runner``): ``--max-total-tokens`` is honoured only when below the pool the memory
    profile allows (``min(requested, profiled)``), and ``sglang:max_total_num_tokens`` prints the realized pool. So a
    deployment of "two identical replicas" holds 200,000 + 163,089 = 363,089 tokens, not 400,000, and a relaunch of
    the clamped target re-profiles it (four launches there realized 162,146–184,832, never 200,000). Arithmetic: an A/B
    arm's equal stream to each target, 40 requests of ~3,000 tokens held each (120,000 tokens): 60 % of one pool and
    73.6 % of the other; nothing queued, ~25 ms a token. So no advice: never a restart (it re-rolls the profile and
    never held the pin on that target), a pool turn (nothing waits; the KV is already fp8), more or fewer sequences,
    replicas either way (one second).

    Not asserted: a larger memory fraction on the clamped target (what would let it hold the pin is the profile's free
    memory at launch, which the report does not explain).

    Chosen where the report is silent, and the stand-ins: the model (Llama-3.1-8B-Instruct, fp8 KV as the log shows),
    the GPU (one L40S a replica, ``mem_fraction_static`` 0.85: 200,000 fp8 tokens are 12.2 GiB, which the profile can
    give or, with less free at launch, not), ``context_len`` 32,768; history: 600 requests answered on each target
    (~2,000 prompt and ~1,000 generated tokens, TTFT ~0.4 s, TPOT ~25 ms). The window: ~1,600 tokens decoded on each,
    one answer ends and the next is admitted. SGLang 0.5.19 (September 2026) with the 0.5.x exposition. SLO: TTFT 2 s,
    TPOT 0.05 s.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"

    def replica(pool: int) -> tuple[str, str]:
        eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=32_768, swa_tokens=0)
        eng.finish(600, prompt=2_000, output=1_000, ttft=0.4, tpot=0.025, queue=0.01)
        eng.prompt["true"], eng.generation["true"] = 600 * 2_000.0, 600 * 1_000.0
        eng.itl.observe(0.025, 600 * 999 + 40 * 500)
        _sglang_gauges(eng, running=40.0, queued=0.0, used=120_000.0, gen=1_600.0)
        first = eng.render()
        eng.finish(1, prompt=2_000, output=1_000, ttft=0.4, tpot=0.025, queue=0.01)
        eng.prompt["true"] += 2_000.0
        eng.generation["true"] += 1_000.0
        eng.itl.observe(0.025, 1_600)
        _sglang_gauges(eng, running=40.0, queued=0.0, used=120_000.0 + 1_600 - 3_000 + 2_000, gen=1_600.0)
        return first, eng.render()

    return FieldState(
        id="sglang-2026-max-total-tokens-200000-clamped-163089-on-one-of-two-replicas-no-advice",
        source="https://github.com/Blackwellboy/model-serving-minefield/issues/109",
        engine_version="SGLang 0.5.19 (September 2026), --max-total-tokens 200000, fp8 KV (0.5.x exposition)",
        deployment={
            "name": "llama8b-ab-arm-two-targets",
            "engine": "sglang",
            "engine_version": "0.5.19",
            "model": model,
            "gpu": "l40s",
            "tensor_parallel_size": 1,
            "kv_cache_dtype": "fp8_e4m3",
            "mem_fraction_static": 0.85,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.05, "target_ratio": 0.9},
        },
        scrapes=[replica(200_000), replica(163_089)],
        snapshot={"requests_running": 80, "requests_waiting": 0, "kv_cache_capacity_tokens": 363_089},
        no_advice=True,
        must_never=[
            RESTART,
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("max_num_seqs", "decrease"),
            *REPLICAS_EITHER_WAY,
        ],
        extra_check=_cap_at_least(3_000),
    )


# --- 2. SGLang 0.4.7: the first cached prefix freezes the scheduler ~20 s on a FlashInfer JIT compile ---------------


def sglang_first_cached_prefix_cascade_jit_stall() -> FieldState:
    """sgl-project/sglang#7339 ("[Bug] In version 0.4.7 (including post1), there is an approximately 20-second stall
    when returning the first cached token during inference.", closed, June 2025): "Version 0.4.6 is ok. … At the
    stall time, the cpu are busy on comiling something: ``$ps -aux |grep cicc`` … ``"$CICC_PATH/cicc" --c++17 …
    --orig_src_file_name "/usr/local/lib/python3.12/dist-packages/flashinfer/data/csrc/cascade.cu" … -arch
    compute_80``".

    Engine facts (SGLang 0.4.7 with the FlashInfer attention backend): a request that hits the radix cache is the first
    to need FlashInfer's cascade (merge-state) kernel; without a prebuilt kernel FlashInfer JIT-compiles it with
    ``nvcc``/``cicc`` on first call, inside the scheduler process, and caches it under ``~/.cache/flashinfer``. While
    it compiles the scheduler loop does not run: no batch steps, no gauge is refreshed, no counter moves, for every
    request in the server, then it resumes and never compiles that kernel again. Arithmetic: ~20 s once; a restart
    costs the weights' reload and warm-up (minutes for any model) and, killed mid-compile, the compile again — and
    drops the requests in flight. So: never a restart, never more TP (the GPU is idle: the time is the host
    compiler's), never a pool turn (0.6 % of the pool is used), more sequences (three run, none queued), replicas
    (one second).

    Not asserted: whether a stall is claimed — the scheduler is frozen for those 20 s; the report's only question is
    what to do about it.

    Chosen where the report is silent, and the stand-ins: the model and GPU (``compute_80``: an Ampere A100; Qwen2.5-7B-
    Instruct stands in), SGLang's pool 1,000,000 tokens (an input), ``context_len`` 32,768; history: the server up ten
    minutes, 40 single-turn chats answered (no prefix hit yet: ~1,500 prompt, ~400 generated tokens, TTFT ~0.2 s, TPOT
    ~15 ms). The window: a follow-up turn sharing its conversation's 1,900-token prefix was admitted beside two decoding
    streams, and the compile began; both scrapes fall inside the ~20 s, identical. SGLang 0.4.7 replayed with the 0.5.x
    exposition. SLO: TTFT 2 s, TPOT 0.1 s.
    """
    model = "Qwen/Qwen2.5-7B-Instruct"
    pool = 1_000_000
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=32_768, swa_tokens=0)
    eng.finish(40, prompt=1_500, output=400, ttft=0.2, tpot=0.015, queue=0.005)
    eng.prompt["true"], eng.generation["true"] = 40 * 1_500.0 + 2 * 1_500.0, 40 * 400.0
    eng.itl.observe(0.015, 40 * 399 + 2 * 200)
    _sglang_gauges(eng, running=3.0, queued=0.0, used=2 * 1_700.0 + 2_300.0, gen=0.0)
    eng.g["cache_hit_rate"] = 0.0
    frozen = eng.render()
    return FieldState(
        id="sglang-0.4.7-first-cached-prefix-20s-flashinfer-cascade-jit-stall-no-restart",
        source="https://github.com/sgl-project/sglang/issues/7339",
        engine_version="SGLang 0.4.7 / 0.4.7.post1, FlashInfer backend, JIT (replayed with the 0.5.x exposition)",
        deployment={
            "name": "qwen25-7b-a100-chat",
            "engine": "sglang",
            "engine_version": "0.4.7",
            "model": model,
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(frozen, frozen)],
        snapshot={"requests_running": 3, "requests_waiting": 0, "kv_cache_capacity_tokens": pool},
        state=None,
        must_never=[
            RESTART,
            ("tensor_parallel_size", "increase"),
            *POOL_TURNS,
            ("max_num_seqs", "increase"),
            ("replicas", "increase"),
        ],
        extra_check=_cap_at_least(2_300),
    )


# --- 3. vLLM (2026): 48 prefills of ~100k tokens wait ~20 s on a first-use Triton compile, then drain -------------


def vllm_48_long_prefills_first_use_jit_stall() -> FieldState:
    """vllm-project/vllm#41834 ("[New Model][Nvidia] Add SM12x support for DeepSeek V4 Flash with essential fixes",
    open), a tester's run of the "wedge case" (2026-06-16): "I ran your wedge case on a pair of RTX PRO 6000... TP=2
    … 48 distinct ~100k-token prefills fired at once... at MTP=1, ``scheduler_reserve_full_isl`` left on (the
    default). py-spy was decisive, and it points at JIT compilation rather than a collective deadlock. During the
    stall (both GPUs at 0% util, ~290 W), both TP workers are in Triton compilation and EngineCore is parked waiting on
    them: ``make_llir (triton/backends/nvidia/compiler.py:417)`` … ``_forward_sparse_mla_prefill_triton`` … About 20 s
    later both GPUs jump to 100% util (~485 W) … and it drains, just slowly (3 of 48 done in 78 s, zero errors). …
    it's a first-use Triton JIT compile of the D512 split sparse-MLA prefill kernel for this long-prefill shape".

    Engine facts (vLLM V1): the engine core waits on its workers' step; a Triton kernel met for the first time at a new
    shape is compiled then, in the step, and cached (in-process, and under ``~/.triton``); no gauge or counter moves
    until the step returns. Arithmetic: 48 × ~100,000 = 4.8 M prompt tokens against a pool that admits a few of them
    at a time (the full-length reservation); 3 of 48 in 78 s is ~26 s a request once the kernel runs — a one-shot
    burst that drains, with no further arrivals. So: never a restart (the compile is once and ~20 s; a restart drops 48
    requests and pays the model load), never more TP (the GPUs sit at 0 % while the CPU compiles), never replicas
    (one second; the burst is one client's), never more sequences (the cap does not bind: 45 wait for the pool's
    reservation), never a context cap under the ~100k-token prompts.

    Not asserted: a pool turn (more KV would admit more of the 48 at once; the thread neither measures nor rejects
    it), and whether a stall is claimed (the engine is still for those 20 s).

    Chosen where the report is silent, and the stand-ins: DeepSeek V4 Flash is not in the advisor's tables;
    Llama-3.3-70B-Instruct in fp8 on the same two RTX PRO 6000 Blackwell at TP 2 stands in, fp8 KV,
    ``gpu_memory_utilization`` 0.9, ``max_model_len`` 131,072, 20,500 blocks of 16 (328,000 tokens, an input: three
    ~100k requests); the engine up five minutes, 20 short smoke-test requests answered (~200 prompt, ~100 generated
    tokens). The moment: ~10 s after the 48 arrived, three admitted with their first 8,192-token chunks scheduled, 45
    waiting, both scrapes inside the compile (identical). vLLM 0.30 (June 2026) with the 0.33 label set. SLO: TTFT
    120 s, TPOT 0.1 s (a long-prefill stress test).
    """
    model = "meta-llama/Llama-3.3-70B-Instruct"
    blocks, max_len = 20_500, 131_072
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=max_len,
        gpu_memory_utilization=0.9,
        version="0.33",
        started=time.time() - 300.0,
    )
    eng.cache_labels.update(cache_dtype="fp8")
    eng.finish(20, prompt=200, output=100, ttft=0.08, tpot=0.03, queue=0.01, max_tokens=128)
    eng.first_tokens([0.08] * 20)
    eng.prefill(20 * 200)
    eng.decode(20 * 99, 0.03, steps=20 * 99, batch=1)
    eng.counters["vllm:prefix_cache_queries"] += 3 * 100_000.0
    eng.running, eng.waiting, eng.kv_usage = 3.0, 45.0, 3 * 8_192 / (blocks * 16)
    frozen = eng.render()
    return FieldState(
        id="vllm-2026-48x100k-prefills-first-use-triton-jit-20s-stall-then-drain-no-restart",
        source="https://github.com/vllm-project/vllm/pull/41834",
        engine_version="vLLM 0.30 (June 2026 head of the SM12x branch; 0.33 label set), TP 2, first-use Triton JIT",
        deployment={
            "name": "long-prefill-wedge-2x-rtx-pro-6000",
            "engine": "vllm",
            "engine_version": "0.30.0",
            "model": model,
            "gpu": "rtx-pro-6000-blackwell",
            "quantization": "fp8",
            "kv_cache_dtype": "fp8",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": max_len,
            "slo": {"ttft_seconds": 120.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(frozen, frozen)],
        snapshot={"requests_running": 3, "requests_waiting": 45},
        state=None,
        must_never=[
            RESTART,
            ("tensor_parallel_size", "increase"),
            ("replicas", "increase"),
            ("max_num_seqs", "increase"),
        ],
        extra_check=_cap_at_least(100_000),
    )


# --- 4. vLLM production-stack router: its /metrics prints vllm: gauges at zero, three backends serve -------------


def _router_page(cpu: float) -> str:
    """The router's ``/metrics`` as the report prints it: the Python client's process and GC families, then the
    ``vllm:`` gauges at zero with only ``model_name`` (no engine's counters, histograms or cache config)."""
    model = "Qwen/Qwen2.5-Coder-32B-Instruct"
    lines = [
        "# HELP python_gc_objects_collected_total Objects collected during gc",
        "# TYPE python_gc_objects_collected_total counter",
        'python_gc_objects_collected_total{generation="0"} 6386.0',
        'python_gc_objects_collected_total{generation="1"} 5249.0',
        'python_gc_objects_collected_total{generation="2"} 472.0',
        "# HELP python_gc_objects_uncollectable_total Uncollectable objects found during GC",
        "# TYPE python_gc_objects_uncollectable_total counter",
        'python_gc_objects_uncollectable_total{generation="0"} 0.0',
        'python_gc_objects_uncollectable_total{generation="1"} 0.0',
        'python_gc_objects_uncollectable_total{generation="2"} 0.0',
        "# HELP python_gc_collections_total Number of times this generation was collected",
        "# TYPE python_gc_collections_total counter",
        'python_gc_collections_total{generation="0"} 915.0',
        'python_gc_collections_total{generation="1"} 83.0',
        'python_gc_collections_total{generation="2"} 6.0',
        "# HELP python_info Python platform information",
        "# TYPE python_info gauge",
        'python_info{implementation="CPython",major="3",minor="12",patchlevel="9",version="3.12.9"} 1.0',
        "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.",
        "# TYPE process_start_time_seconds gauge",
        "process_start_time_seconds 1.74262400557e+09",
        "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.",
        "# TYPE process_cpu_seconds_total counter",
        f"process_cpu_seconds_total {go_float(cpu)}",
        "# HELP process_open_fds Number of open file descriptors.",
        "# TYPE process_open_fds gauge",
        "process_open_fds 45.0",
        "# HELP process_max_fds Maximum number of open file descriptors.",
        "# TYPE process_max_fds gauge",
        "process_max_fds 1.048576e+06",
        "# HELP vllm:num_requests_running Number of requests in model execution batches.",
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{model_name="{model}"}} 0.0',
        "# HELP vllm:num_requests_waiting Number of requests waiting to be processed.",
        "# TYPE vllm:num_requests_waiting gauge",
        f'vllm:num_requests_waiting{{model_name="{model}"}} 0.0',
        "# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.",
        "# TYPE vllm:gpu_cache_usage_perc gauge",
        f'vllm:gpu_cache_usage_perc{{model_name="{model}"}} 0.0',
    ]
    return "\n".join(lines) + "\n"


def vllm_router_all_zero_metrics() -> FieldState:
    """vllm-project/production-stack#318 ("bug: No backend metrics when querying vllm-router /metrics endpoint",
    closed, March 2025): "Here I have 3 vllm inference backends registered to my vllm-router. The router sees them
    properly, but don't forward their metrics, despite the "metric scraping logs" in vllm-router logs. Here is what I
    get on /metrics:" — the Python client's ``python_gc_*``, ``python_info`` and ``process_*`` families
    (``process_start_time_seconds 1.74262400557e+09``, ``process_cpu_seconds_total 439.71999999999997``), then
    ``vllm:num_requests_running{model_name="Qwen/Qwen2.5-Coder-32B-Instruct"} 0.0``,
    ``vllm:num_requests_waiting{…} 0.0``, ``vllm:gpu_cache_usage_perc{…} 0.0``.

    Engine facts: the router (``vllm_router``) is a proxy: it scrapes each backend's ``/metrics`` for its routing
    decisions and serves its own ``/metrics``, where the ``vllm:`` families are its process's gauges, not any engine's;
    a vLLM engine's page carries its counters, histograms and ``vllm:cache_config_info`` beside these gauges. So a
    page of zero gauges with none of an engine's counters says nothing about the three backends' load. Must never:
    a scale-in of any kind (replicas down, a smaller KV budget, fewer sequences or less TP, a cheaper instance) —
    nothing on the page measures the backends — nor replicas up (one second).

    Not asserted: the deployment state, and whether the advisor names the page as a proxy's.

    Chosen where the report is silent: the backends (three, one A100 80 GB each serving Qwen2.5-Coder-32B-Instruct at
    TP 1, ``max_model_len`` 32,768 — the report names the model only); the advisor pointed at the router (the
    address the operator scraped). The page exactly as printed, cut where the report's listing continues with the
    prefix-cache families; in the window only the router's CPU counter moves. SLO: TTFT 2 s, TPOT 0.1 s.
    """
    return FieldState(
        id="vllm-production-stack-router-metrics-all-zero-three-backends-serving-no-scale-in",
        source="https://github.com/vllm-project/production-stack/issues/318",
        engine_version="vllm-router (production-stack 0.1.x, March 2025) in front of three vLLM backends",
        deployment={
            "name": "qwen-coder-32b-behind-vllm-router",
            "engine": "vllm",
            "model": "Qwen/Qwen2.5-Coder-32B-Instruct",
            "gpu": "a100-80gb",
            "tensor_parallel_size": 1,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(_router_page(439.71999999999997), _router_page(439.74))],
        state=None,
        must_never=[*SCALE_IN, ("replicas", "increase")],
    )


STATES = [
    sglang_max_total_tokens_clamped_on_one_replica(),
    sglang_first_cached_prefix_cascade_jit_stall(),
    vllm_48_long_prefills_first_use_jit_stall(),
    vllm_router_all_zero_metrics(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
