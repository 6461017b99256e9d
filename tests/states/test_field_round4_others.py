"""Field states, round 4: SGLang, TGI, llama.cpp server and TensorRT-LLM (trtllm-serve, Triton), from public reports.

Every row replays one report as that engine exposes it on ``/metrics`` (metric names, types and labels from
``../shared/reference/engine-metrics-catalog.md`` §2 SGLang, §3 TGI, §4 TensorRT-LLM, §6 llama.cpp) and states
what the advisor must and must never propose, from the report's numbers and the engine's documented behaviour (the
arithmetic is in each docstring), not from the advisor's output. Where a report leaves a number out, the docstring
says which value was chosen. ``once`` sees about one second of history, so no replica count may be proposed where
a queue exists (round 3 explains why); ``("replicas", "increase")`` is in ``must_never`` there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pytest

from tests.states import VLLM_LATENCY_BUCKETS, VLLM_TPOT_BUCKETS, VLLM_TTFT_BUCKETS, Hist, SGLangEngine, go_float
from tests.states.field import (
    FieldState,
    FieldStateRuns,
    check_field_state,
    matching,
    number,
    run_field_states,
    with_xfails,
)
from tests.states.test_field_round3_others import KV_GROWING_TURNS, TGIRouter, _llamacpp, _llamacpp_rows

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}


def _no_cap_below(floor: float) -> Any:
    """Every proposed ``max_model_len`` decrease (alternatives included) suggests at least ``floor``."""

    def check(result: dict[str, Any]) -> None:
        caps = matching(result.get("recommendations") or [], ("max_model_len", "decrease"))
        bad = [c for c in caps if number(c.get("suggested")) < floor]
        assert not bad, f"context cap below {floor:g}: {[(c.get('current'), c.get('suggested')) for c in bad]}"

    return check


# --- 1. SGLang: a 39-prompt batch drains through a 56k-token pool -------------------------------------------------


def sglang_offline_burst_drains() -> FieldState:
    """sgl-project/sglang#1612 ("SGLang hangs after hitting 0.00 token usage on Engine.generate", October 2024): 39
    prompts handed to the engine at once; the scheduler log while they are admitted::

        Prefill batch. #new-seq: 4, #new-token: 8192, … token usage: 0.04, #running-req: 1, #queue-req: 38
        Prefill batch. #new-seq: 6, #new-token: 8192, … token usage: 0.18, #running-req: 4, #queue-req: 34
        Prefill batch. #new-seq: 5, #new-token: 8192, … token usage: 0.33, #running-req: 9, #queue-req: 30
        Prefill batch. #new-seq: 5, #new-token: 8192, … token usage: 0.48, #running-req: 13, #queue-req: 26
        Prefill batch. #new-seq: 5, #new-token: 8192, … token usage: 0.62, #running-req: 17, #queue-req: 22
        Prefill batch. #new-seq: 5, #new-token: 8192, … token usage: 0.77, #running-req: 21, #queue-req: 18

    Arithmetic from the log: each 8,192-token prefill chunk adds ~0.145 of token usage, so the pool is 8,192 ÷ 0.145 ≈
    56,500 tokens; five new sequences per 8,192-token chunk is ~1,640 prompt tokens a request. Running + queued is 39
    at every line (17 + 22 = 21 + 18): nothing new arrives, the queue falls by ~4 a second as the chunked prefill
    admits it. A fixed batch handed over at once is a transient: its queue drains by itself within seconds, and its
    arrival rate after the hand-over is zero. The hang the title reports comes later (after the last request), not in
    this window: tokens move here (the usage rises 0.62 → 0.77 in a second).

    Must never: any replica change (a transient queue with zero arrivals: no sustained demand to size for), a
    restart of the engine (it is working: usage climbing, queue draining), a context cap (prompts are ~1,640 tokens of
    a 56k pool: a cap frees nothing), more running requests (``max_num_seqs`` increase: the pool, not the cap, admits
    them), a KV-pool turn (77 % used, nothing evicted or retracted: not saturated).

    Chosen where the report is silent: the model (Llama-3.1-8B-Instruct on one L4 24 GB: 16 GB of weights and a
    56,500-token pool at 128 KiB a token = 6.9 GB) and ``--context-length`` 8,192; SGLang 0.3 replayed with the
    0.5.x exposition (:class:`tests.states.SGLangEngine`); no request finishes inside the window (the first output
    of a 39-prompt batch is still prefilling), so SGLang's finish-time counters stand still; ``max_running_requests``
    left to SGLang's default (2,048 on this pool).
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    pool = 56_500
    eng = SGLangEngine(model_name=model, max_total_num_tokens=pool, context_len=8192, swa_tokens=0)

    def gauges(running: float, queue: float, usage: float) -> None:
        used = round(usage * pool)
        eng.g["num_running_reqs"], eng.g["num_queue_reqs"] = running, queue
        eng.g["num_used_tokens"] = eng.g["kv_used_tokens"] = float(used)
        eng.g["kv_available_tokens"] = float(pool - used)
        eng.g["token_usage"] = eng.g["full_token_usage"] = usage
        eng.g["gen_throughput"] = 0.0

    # the engine served a warm-up prompt before the batch: lifetime counters are not zero
    eng.finish(1, prompt=2062, output=64, ttft=0.4, tpot=0.02, queue=0.0)
    eng.prompt["true"], eng.generation["true"] = 2062.0, 64.0
    gauges(17.0, 22.0, 0.62)
    first = eng.render()
    gauges(21.0, 18.0, 0.77)
    second = eng.render()
    return FieldState(
        id="sglang-39-prompt-batch-drains-by-itself",
        source="https://github.com/sgl-project/sglang/issues/1612",
        engine_version="SGLang 0.3.x (replayed with the 0.5.x exposition)",
        deployment={
            "name": "llama31-8b-sglang-batch",
            "engine": "sglang",
            "model": model,
            "gpu": "l4",
            "max_model_len": 8192,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 21, "requests_waiting": 18, "kv_cache_capacity_tokens": pool},
        must_never=[
            ("replicas", None),
            ("engine_process", None),
            ("max_model_len", "decrease"),
            ("max_num_seqs", "increase"),
            *KV_GROWING_TURNS,
        ],
    )


# --- 2. TGI: an idle 4-shard deployment holds all its VRAM overnight ------------------------------------------------


def tgi_idle_holds_vram() -> FieldState:
    """huggingface/text-generation-inference#2615 ("Excessive use of VRAM for Llama 3.1 8B", October 2024): TGI 2.3.0
    (router ``2.3.1-dev0``), ``meta-llama/Llama-3.1-8B-Instruct`` sharded over 4 × L40S 48 GB, ``max_input_tokens
    5000``, ``max_total_tokens 6024``, ``max_concurrent_requests 128``; the operator sees the GPUs full while the
    server does little. The maintainer: "TGI will always use all the allowed memory for KV-cache, to allow MANY users
    on the same machine … If you want to control how much VRAM you use, you need to set ``--cuda-memory-fraction``".

    The engine facts: the VRAM is TGI's warm-up-sized KV budget, held whether or not requests run; it is not load.
    Replayed at night: nothing queued (``tgi_queue_size`` 0), nothing in the batch (``tgi_batch_current_size`` 0,
    nothing reserved), no request arriving in the window. With about one second of history nothing may be advised:
    no scale-up of any kind (replicas, shards, memory, KV dtype, more sequences) on an idle engine, no restart (no
    request is held, so nothing is hung), and no scale-down either (a quiet second is not a sustained low: the
    over-provisioning rule waits 30 minutes). Must: no advice at all.

    Chosen: the day's lifetime counters (3,000 requests of ~900 prompt and ~250 generated tokens at 18 ms a token,
    0.2 s queued); no ``tgi_batch_max_total_tokens`` (the image is 2.3.0; the gauge ships in 2.3.1).
    """
    tgi = TGIRouter(max_input=5000, max_total=6024, budget=None)
    tgi.arrive(3000, prompt=900, max_new=1024)
    tgi.finish(3000, generated=250, tpot=0.018, queue=0.2)
    first = tgi.render()
    second = tgi.render()
    return FieldState(
        id="tgi-llama31-8b-4xl40s-idle-at-night",
        source="https://github.com/huggingface/text-generation-inference/issues/2615",
        engine_version="TGI 2.3.0",
        deployment={
            "name": "llama31-8b-tgi",
            "engine": "tgi",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "l40s",
            "tensor_parallel_size": 4,
            "max_model_len": 6024,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 0, "requests_waiting": 0},
        must_never=[
            ("replicas", None),
            ("engine_process", None),
            ("tensor_parallel_size", "increase"),
            ("max_num_seqs", "increase"),
            *KV_GROWING_TURNS,
        ],
        no_advice=True,
    )


# --- 3. llama.cpp: a second request's prompt waits behind a CPU-bound decode


def llamacpp_cpu_bound_slow_ttft() -> FieldState:
    """ggml-org/llama.cpp#4875 ("Slow Time-To-First-Token (TTFT) when running ``./server`` with ``--parallel``", build
    b1794): 4 × RTX 4090 with an "Intel Xeon E2670v3" CPU "at 100% utilisation when inference is running"; two requests
    sent ~0.5 s apart: the first's TTFT is fast, the second's "around 10 secs". The slot timings: "prompt eval time =
    225.17 ms / 18 tokens (… 79.94 tokens per second)", "eval time = 7828.23 ms / 241 runs (32.48 ms per token, 30.79
    tokens per second)", "slot 2 released (259 tokens in cache)".

    Engine facts: llama.cpp runs one ``llama_decode`` batch at a time for all slots, so a new slot's prompt shares
    each step with the others' decode ("This is the expected behaviour", ggerganov in #4216); the 32 ms a token of a
    7B model on a 4090 (memory-bound time ~8 ms) is the host CPU, not the GPU. Arithmetic: 2 of 4 slots busy,
    ``requests_deferred`` 0 (no request waits for a slot), the cache holds ~500 of 8,192 cells (6 %). Nothing the
    advisor can turn buys CPU: more replicas on the same host share its cores; more slots put more requests into the
    same CPU-bound step; the KV cache is nearly empty; the requests (~259 tokens) are far below the 2,048-cell slot.
    llama.cpp exposes no TTFT histogram, so the 10 s cannot be seen; nothing may be invented from it. Must never:
    replicas increase, ``--parallel`` increase, KV-pool turns, a context cap below 2,048 (a slot's share).

    Chosen (the report gives neither model nor flags): Llama-2-7B at ``-c 8192 -np 4`` on one of the 4090s
    (``--ctx-size`` split 2,048 a slot); the window: one token each for two busy slots a decode step, 30 steps a
    second (counters from the 2024 exposition; KV gauges present before PR #13660).
    """
    c1 = {"prompt": 18_400.0, "prompt_s": 230.0, "gen": 48_000.0, "gen_s": 1560.0, "decodes": 40_000.0}
    c1 |= {"busy_avg": 1.4, "prompt_tps": 79.94, "gen_tps": 30.79}
    c2 = dict(c1, prompt=18_418.0, prompt_s=230.225, gen=48_241.0, gen_s=1567.83, decodes=40_030.0)
    return FieldState(
        id="llamacpp-cpu-bound-second-slot-slow-ttft",
        source="https://github.com/ggml-org/llama.cpp/issues/4875",
        engine_version="llama.cpp b1794 (replayed with the 2024 exposition, KV gauges present)",
        deployment={
            "name": "llama2-7b-np4",
            "engine": "llamacpp",
            "model": "meta-llama/Llama-2-7b-hf",
            "gpu": "rtx4090",
            "max_model_len": 2048,
            "ctx_size": 8192,
            "parallel": 4,
            "slo": SLO,
        },
        scrapes=[
            (
                _llamacpp(_llamacpp_rows(c1, busy=2, deferred=0, kv=(480 / 8192, 480.0))),
                _llamacpp(_llamacpp_rows(c2, busy=2, deferred=0, kv=(510 / 8192, 510.0))),
            )
        ],
        snapshot={"requests_running": 2, "requests_waiting": 0},
        must_never=[("replicas", "increase"), ("max_num_seqs", "increase"), *KV_GROWING_TURNS],
        extra_check=_no_cap_below(2048),
    )


# --- TensorRT-LLM expositions ----------------------------------------------------------------------------------------


def _triton_trtllm(
    *, active: float, scheduled: float, context: float, max_batch: float, blocks: Mapping[str, float], success: float
) -> str:
    """Triton 24.09 ``tensorrtllm`` backend on ``:8002/metrics`` (prometheus-cpp text): the category-labelled gauges
    of ``custom_metrics_reporter.cc`` before 2025 (no ``request_type="waiting"``, no ``fraction``) and Triton core's
    counters; ``model="tensorrt_llm"``, ``version="1"``."""

    def row(family: str, label: str, kind: str, value: float) -> str:
        return f'{family}{{{label}="{kind}",model="tensorrt_llm",version="1"}} {value:g}'

    out = [
        "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes",
        "# TYPE nv_inference_request_success counter",
        f'nv_inference_request_success{{model="tensorrt_llm",version="1"}} {success:g}',
        "# HELP nv_trt_llm_request_metrics TRT LLM request metrics",
        "# TYPE nv_trt_llm_request_metrics gauge",
    ]
    for kind, v in (("context", context), ("scheduled", scheduled), ("max", max_batch), ("active", active)):
        out.append(row("nv_trt_llm_request_metrics", "request_type", kind, v))
    out += ["# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics"]
    out += ["# TYPE nv_trt_llm_kv_cache_block_metrics gauge"]
    for kind in ("tokens_per", "used", "free", "max"):
        out.append(row("nv_trt_llm_kv_cache_block_metrics", "kv_cache_block_type", kind, blocks[kind]))
    out += ["# HELP nv_trt_llm_inflight_batcher_metrics TRT LLM inflight batcher metrics"]
    out += ["# TYPE nv_trt_llm_inflight_batcher_metrics gauge"]
    for kind, v in (("paused_requests", 0.0), ("micro_batch_id", 0.0), ("generation_requests", scheduled - context)):
        out.append(row("nv_trt_llm_inflight_batcher_metrics", "inflight_batcher_specific_metric", kind, v))
    return "\n".join(out) + "\n"


# --- 4. Triton TRT-LLM: the paged KV cache pinned at 2,560 tokens, eight active, one scheduled


def triton_trtllm_pool_pinned_2560() -> FieldState:
    """triton-inference-server/server#7676 ("Dynamic batching not working with TRT-LLM backend", Triton 24.09):
    Llama-3.1-8B-Instruct on an A100, the model filled with ``triton_max_batch_size:64, …,
    max_tokens_in_paged_kv_cache:2560, max_attention_window_size:2560, kv_cache_free_gpu_mem_fraction:0.5, …,
    batching_strategy:inflight_fused_batching``; the batcher logs ``"Active Request Count":8, … "Max Request
    Count":8`` while only one request at a time is scheduled ("When Active Request Count is greater than 1,
    Scheduled Requests should also be greater than 1").

    Engine facts: the backend sizes the paged KV cache as the smaller of ``kv_cache_free_gpu_mem_fraction`` of the free
    memory and ``max_tokens_in_paged_kv_cache`` tokens (TRT-LLM: "Both free_gpu_memory_fraction and max_tokens are
    set … The smaller value will be used"). Arithmetic: 0.5 × (80 GB − 16 GB of bf16 weights) = 32 GB would hold
    ~250,000 tokens at 128 KiB a token; the pin holds 2,560 — 40 blocks of 64 tokens. The default
    ``GUARANTEED_NO_EVICT`` scheduler admits a request only when its prompt + max output fit in the free blocks: at
    ~1,000 + 1,024 tokens one request holds the pool, so 8 active run one at a time. The ceiling is the pinned pool,
    not the batch size. Must propose: lifting the pin (the token budget of the pool, ``kv_cache_memory_bytes``
    increase — ``kv_cache_config.max_tokens``). Must never: more sequences (``max_num_seqs`` increase: 8 are already
    active and 1 fits), a larger memory fraction or an fp8 KV cache (the pin in tokens is the smaller bound: neither
    adds a token while it stands), replicas (one second of history, and each replica would be pinned the same), a
    context cap below the ~2,000 tokens a request reserves.

    Chosen (the log line is cut after "Max Request Count"): prompts of ~1,000 tokens with ``max_tokens`` 1,024; 1
    scheduled (in generation), 7 waiting inside the batcher (Triton 24.09 has no ``request_type="waiting"``); the
    running request holds 19 of the 40 blocks; one request finishes in the window (~2 s each: 8 queued behind
    one another is the "not batching" the operator sees).
    """
    blocks1 = {"tokens_per": 64.0, "used": 19.0, "free": 21.0, "max": 40.0}
    blocks2 = {"tokens_per": 64.0, "used": 17.0, "free": 23.0, "max": 40.0}
    first = _triton_trtllm(active=8, scheduled=1, context=0, max_batch=8, blocks=blocks1, success=600)
    second = _triton_trtllm(active=8, scheduled=1, context=1, max_batch=8, blocks=blocks2, success=601)
    return FieldState(
        id="triton-trtllm-kv-pinned-2560-one-scheduled",
        source="https://github.com/triton-inference-server/server/issues/7676",
        engine_version="Triton 24.09 (tensorrtllm backend, no waiting gauge)",
        deployment={
            "name": "llama31-8b-triton",
            "engine": "triton-trtllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "a100-80gb",
            "max_model_len": 2560,
            "max_num_seqs": 8,
            "kv_cache_config": {"max_tokens": 2560, "free_gpu_memory_fraction": 0.5},
            "slo": SLO,
        },
        scrapes=[(first, second)],
        # running = scheduled (1); waiting unknown: the active list is full (8 of max 8), so the executor's own queue
        # may hold more — the 7 held back are the capacity queue (requests_waiting_by_reason)
        snapshot={"requests_running": 1, "requests_waiting": None, "kv_cache_capacity_tokens": 2560},
        must_propose=[("kv_cache_memory_bytes", "increase")],
        must_never=[
            ("max_num_seqs", "increase"),
            ("gpu_memory_utilization", "increase"),
            ("kv_cache_dtype", None),
            ("replicas", "increase"),
        ],
        extra_check=_no_cap_below(2048),
    )


# --- trtllm-serve exposition ------------------------------------------------------------------------------------------


class TRTLLMServe:
    """``trtllm-serve`` ``/prometheus/metrics`` (``tensorrt_llm/metrics/collector.py``: prefix ``trtllm_``, labels
    ``engine_type="trtllm"`` + ``model_name``, multiprocess registry: no ``_created``, vLLM's bucket bounds;
    request families observed when a request finishes)."""

    def __init__(self, model: str) -> None:
        self.labels = {"engine_type": "trtllm", "model_name": model}
        self.g: dict[str, float] = {}
        self.c: dict[str, float] = {"prompt_tokens": 0.0, "generation_tokens": 0.0}
        self.success = {"stop": 0.0, "length": 0.0}
        self.h = {
            "time_to_first_token_seconds": Hist(VLLM_TTFT_BUCKETS),
            "time_per_output_token_seconds": Hist(VLLM_TPOT_BUCKETS),
            "e2e_request_latency_seconds": Hist(VLLM_LATENCY_BUCKETS),
            "request_queue_time_seconds": Hist(VLLM_LATENCY_BUCKETS),
        }

    def finish(self, n: int, *, prompt: float, output: float, ttft: float, tpot: float, queue: float) -> None:
        self.success["length"] += n
        self.c["prompt_tokens"] += n * prompt
        self.c["generation_tokens"] += n * output
        self.h["time_to_first_token_seconds"].observe(ttft, n)
        self.h["time_per_output_token_seconds"].observe(tpot, n)
        self.h["e2e_request_latency_seconds"].observe(ttft + tpot * (output - 1), n)
        self.h["request_queue_time_seconds"].observe(queue, n)

    def gauges(
        self, *, running: float, waiting: float, paused: float, max_blocks: float, used: float, max_batch: float
    ) -> None:
        """The scheduler and KV gauges: requests running, waiting and paused, the pool's blocks (32 tokens each) and
        how many are used, the runtime batch size."""
        self.g.update(
            num_requests_running=running,
            num_requests_waiting=waiting,
            num_paused_requests=paused,
            kv_cache_max_blocks=max_blocks,
            kv_cache_used_blocks=used,
            kv_cache_free_blocks=max_blocks - used,
            kv_cache_tokens_per_block=32.0,
            kv_cache_utilization=used / max_blocks,
            max_batch_size_runtime=max_batch,
        )

    def render(self) -> str:
        lab = ",".join(f'{k}="{v}"' for k, v in sorted(self.labels.items()))
        out: list[str] = []
        for name, value in self.g.items():
            out += [f"# HELP trtllm_{name} {name}", f"# TYPE trtllm_{name} gauge", f"trtllm_{name}{{{lab}}} {value:g}"]
        for name, value in self.c.items():
            out += [f"# HELP trtllm_{name}_total {name}", f"# TYPE trtllm_{name}_total counter"]
            out.append(f"trtllm_{name}_total{{{lab}}} {go_float(value)}")
        out += ["# HELP trtllm_request_success_total Finished requests.", "# TYPE trtllm_request_success_total counter"]
        for reason, v in self.success.items():
            out.append(f'trtllm_request_success_total{{{lab},finished_reason="{reason}"}} {go_float(v)}')
        for name, hist in self.h.items():
            out += [f"# HELP trtllm_{name} {name}", f"# TYPE trtllm_{name} histogram"]
            out.extend(hist.lines(f"trtllm_{name}", self.labels, created=None))
        return "\n".join(out) + "\n"


# --- 5. trtllm-serve: MAX_UTILIZATION pauses requests under KV oversubscription


def trtllm_max_utilization_oversubscribed() -> FieldState:
    """NVIDIA/TensorRT-LLM#16827 ("MAX_UTILIZATION causes a 40.6% output-throughput drop and 9.1x TPOT p99 under
    KV-cache oversubscription (Llama-3.3-70B-FP8, H200, v1.2.1)"): ``trtllm-serve`` (PyTorch backend), long-context
    workload whose "KV working set exceeds the KV-cache pool", 128 requests × 512 output tokens. Switching
    ``scheduler_config.capacity_scheduler_policy`` from the default ``GUARANTEED_NO_EVICT`` to ``MAX_UTILIZATION``:
    output throughput 161.0 → 95.7 tokens/s (−40.6 %), TPOT p99 122 → 1,111 ms, end-to-end p99 150 → 563 s (TTFT
    p50 35.8 → 27.1 s: requests admitted earlier); "off pressure … equivalent within noise" (574.7 vs 576.1 tokens/s).
    The reporters' reading: the policy "admits more prefills than the pool sustains and then repeatedly
    pauses/evicts running requests".

    So the served replica runs ``MAX_UTILIZATION`` with its pool full and requests paused. The report's own A/B is the
    remedy: the admission policy back to ``GUARANTEED_NO_EVICT`` (+68 % output throughput, TPOT p99 ÷ 9 at the same
    pool). Must propose: the admission policy. Must never: more concurrent sequences (``max_num_seqs`` increase: more
    admissions into a full pool is exactly what pauses requests), replicas (a 128-request benchmark run over one
    second of history), a context cap below the ~8,500 tokens the requests hold (it would reject the workload).

    Chosen where the report is silent: TP 1 on one H200; the pool at the default ``free_gpu_memory_fraction`` 0.9 of
    the ~65 GB the fp8 weights leave, bf16 KV at 320 KiB a token: 5,800 blocks of 32 tokens (185,600 tokens); prompts
    of ~8,000 tokens; the moment: 24 running (the pool holds ~21 at 8,512 tokens), 3 paused
    (``trtllm_num_paused_requests``), 100 waiting, 97 % of the blocks used; 95.7 tokens/s over 24 running is ~0.25 s a
    token; one request finishes in the window (TTFT 27 s, 25 s of it queued). Metric names of collector.py on main
    2026 (which release first ships each is not established; catalog §4.2).
    """
    model = "meta-llama/Llama-3.3-70B-Instruct"
    srv = TRTLLMServe(model)
    srv.finish(3, prompt=8000, output=512, ttft=27.0, tpot=0.25, queue=25.0)

    def gauges(waiting: float, used: float) -> None:
        srv.gauges(running=24.0, waiting=waiting, paused=3.0, max_blocks=5800.0, used=used, max_batch=2048.0)

    gauges(101.0, 5630.0)
    first = srv.render()
    srv.finish(1, prompt=8000, output=512, ttft=27.0, tpot=0.25, queue=25.0)
    gauges(100.0, 5640.0)
    second = srv.render()
    return FieldState(
        id="trtllm-serve-max-utilization-kv-oversubscribed",
        source="https://github.com/NVIDIA/TensorRT-LLM/issues/16827",
        engine_version="TensorRT-LLM 1.2.1 trtllm-serve (collector.py names of main 2026)",
        deployment={
            "name": "llama33-70b-fp8-trtllm",
            "engine": "trtllm",
            "model": model,
            "gpu": "h200",
            "quantization": "fp8",
            "max_model_len": 16384,
            "max_num_seqs": 2048,
            "slo": SLO,
        },
        scrapes=[(first, second)],
        snapshot={"requests_running": 24, "requests_waiting": 100, "kv_cache_capacity_tokens": 185_600},
        must_propose=[("admission_policy", None)],
        must_never=[("max_num_seqs", "increase"), ("replicas", "increase")],
        extra_check=_no_cap_below(8500),
    )


STATES = [
    sglang_offline_burst_drains(),
    tgi_idle_holds_vram(),
    llamacpp_cpu_bound_slow_ttft(),
    triton_trtllm_pool_pinned_2560(),
    trtllm_max_utilization_oversubscribed(),
]


XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

PARAMS = with_xfails(STATES, XFAIL)


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module, a few at a time (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, STATES)


@pytest.mark.parametrize("state", PARAMS, ids=[s.id for s in STATES])
def test_field_state(once: FieldStateRuns, state: FieldState) -> None:
    check_field_state(once[state], state)


def test_triton_pool_reads_the_pinned_blocks(once: FieldStateRuns) -> None:
    """The Triton state's pool is read from the block gauges as the engine sized it (40 × 64 = 2,560 tokens), not from
    the memory fraction: the used + free = max check holds on every scrape (17 + 23 = 40)."""
    (pinned,) = [s for s in STATES if s.id == "triton-trtllm-kv-pinned-2560-one-scheduled"]
    snap = once[pinned]["snapshot"]
    assert snap["kv_cache_capacity_tokens"] == pytest.approx(2560.0)
    assert math.isclose(snap["kv_cache_usage_ratio"], 17 / 40, rel_tol=1e-6), snap["kv_cache_usage_ratio"]
