"""Field states, round 61: vLLM with a KV connector — LMCache's CPU offload under a vLLM whose own prefix cache already
holds the prompt (the "twice" query answered from vLLM's GPU blocks, LMCache loading three tokens: nothing to turn),
and the decode pod of a one-prefill-one-decode NixlConnector pair at concurrency 1 whose TTFT is twice a single GPU's
because the decode pod reports a prefill of its own — from two public reports.

Each row is built from one public report (``source``): the deployment as the report states it (where it does not,
or where its model or GPU is not in the advisor's tables, the docstring names the stand-in and why), and two scrapes
one second apart rendered as that engine prints them: vLLM through :class:`tests.states.VLLMEngine` (V1; the 0.11
label set for the 2025 releases). The connectors' own families (``lmcache:*``, ``vllm:nixl_*``) are not rendered:
the reports read vLLM's families only. The assertions come from the reports' numbers, the verdict each thread
establishes and engine facts, never from the advisor's output:

* ``vllm-lmcache-query-twice-warm-hit-served-by-vllm-prefix-cache`` — LMCache/LMCache#1109: Qwen2.5-72B-Instruct
  FP8, TP 2, ``--max-num-seqs 128``, ``LMCacheConnectorV1``; a 14,771-token prompt asked twice, "Cold TTFT: 5.442
  seconds"; the maintainer: "we are only loading 3 tokens from lmcache because vllm prefix caching is receiving cache
  hit … we are only measuring lmcache overhead and no benefits". One request at a time on an idle server: no advice.
* ``vllm-1p1d-nixl-decode-pod-concurrency-1-reports-its-own-prefill`` — vllm-project/vllm#21037: 1P1D with
  NixlConnector, "its TTFT is twice that of tp1 when concurrency is set to 1 … the decode instance is reporting
  prefill latency, which matches the prefill latency seen on the prefill instance". One request at a time: never
  replicas, more TP, more sequences or a pool turn.

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); every row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed
from tests.states.test_field_round4_vllm import POOL_TURNS

SLO = {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9}
"""A lenient long-prompt SLO (TTFT 10 s, 100 ms a token): chosen where the reports state none."""

# --- 1. LMCache CPU offload: the warm query is a vLLM prefix-cache hit; LMCache loads three tokens --------------------


def vllm_lmcache_query_twice_warm_hit() -> FieldState:
    """LMCache/LMCache#1109 ("TTFT performance better without LMCache when verified via query-twice.py in
    documentation", closed, July 2025): ``vllm serve /root/Qwen-Qwen2.5-72B-Instruct --tensor-parallel-size 2
    --max-num-seqs 128 --gpu-memory-utilization 0.9 --quantization fp8``, with and without ``--kv-transfer-config
    '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'``; ``query-twice.py`` sends "Number of tokens in
    prompt: 14771" twice, one request at a time: "Cold TTFT: 5.442 seconds", then the warm query. The maintainer's
    verdict: "we are only loading 3 tokens from lmcache because vllm prefix caching is receiving cache hit … This
    means we are only measuring lmcache overhead and no benefits"; LMCache pays off only once the workload overwhelms
    vLLM's GPU prefix cache, which two sequential queries do not.

    Engine facts (vLLM V1): ``vllm:kv_cache_usage_perc`` counts blocks held by running requests; a finished request's
    blocks stay cached but count as free (evictable), so an idle server with the prompt cached reads ~0 %;
    ``prefix_cache_hits`` counts the warm query's 14,768 block-aligned tokens (923 blocks of 16). The page shows one
    request in flight at most, nothing waiting, no preemption, TTFT of 5.4 s (cold) and a fraction of a second (warm)
    against a 14,771-token prompt. Nothing is short: the right answer is no advice at all (and so never replicas, more
    TP, more sequences, a pool turn or a restart).

    Not asserted: LMCache's own overhead or hit counts (``lmcache:*`` families, not vLLM's page; the thread read them
    from LMCache's log lines), or turning the connector off (not a dial the page can show).

    Chosen where the report is silent: the GPU (two H100 SXM; the maintainer's arithmetic is for "2x H100"); the pool
    (224,288 tokens, 14,018 blocks, the figure ``check-config`` prints: an input here); ~60
    output tokens a query at 30 ms a token; the warm TTFT 0.25 s. Before: the cold query finished. The window: the
    warm query arrives, hits 14,768 of its 14,771 tokens in vLLM's prefix cache and finishes. vLLM of July 2025 (0.9.x)
    rendered with the 0.11 label set. SLO: :data:`SLO`.
    """
    model = "Qwen/Qwen2.5-72B-Instruct"
    blocks = 14_018
    eng = VLLMEngine(
        model_name="Qwen-Qwen2.5-72B-Instruct",
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        started=time.time() - 900.0,
    )
    eng.cache_labels = {"cpu_offload_gb": "0.0"}
    eng.finish(1, prompt=14_771, output=60, ttft=5.442, tpot=0.03, queue=0.01)
    eng.first_tokens([5.442])
    eng.prefill(14_771)
    eng.decode(60, 0.03, steps=60, batch=1)
    first = eng.render()
    eng.finish(1, prompt=14_771, output=60, ttft=0.25, tpot=0.03, queue=0.01)
    eng.first_tokens([0.25])
    eng.prefill(14_771, cached=14_768)
    eng.decode(60, 0.03, steps=60, batch=1)
    return FieldState(
        id="vllm-lmcache-query-twice-warm-hit-served-by-vllm-prefix-cache",
        source="https://github.com/LMCache/LMCache/issues/1109",
        engine_version="vLLM 0.9.x of July 2025 with LMCacheConnectorV1 (V1; 0.11 label set)",
        deployment={
            "name": "qwen25-72b-lmcache",
            "engine": "vllm",
            "model": model,
            "served_model": "Qwen-Qwen2.5-72B-Instruct",
            "gpu": "h100-sxm",
            "quantization": "fp8",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "max_num_seqs": 128,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 0, "requests_waiting": 0},
        no_advice=True,
        must_never=[
            ("replicas", "increase"),
            ("tensor_parallel_size", "increase"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


# --- 2. 1P1D with NixlConnector at concurrency 1: the decode pod's page shows a prefill of its own --------------------


def vllm_1p1d_nixl_decode_pod_concurrency_one() -> FieldState:
    """vllm-project/vllm#21037 ("[Bug]: TTFT of 1p1d using NIXLConnector is twice that of tp1", closed stale, July
    2025): "I am attempting to implement PD disaggregation for 1p1d using NIXLConnector, but I've observed that its
    TTFT is twice that of tp1 when concurrency is set to 1. After checking the metrics for the decode instance via
    ``curl http://0.0.0.0:8200/metrics``, I noticed that the decode instance is reporting prefill latency, which
    matches the prefill latency seen on the prefill instance" (the reporter's screenshots are of
    ``vllm:request_prefill_time_seconds`` and ``vllm:request_decode_time_seconds`` on the decode pod).

    Engine facts (vLLM V1 with NixlConnector, ``kv_consumer``): the decode pod schedules the request, waits for its
    KV to arrive and then runs it; the interval from scheduling to the first token is observed as its prefill time,
    so the decode page carries a prefill time as long as the prefill pod's and a TTFT that adds both. One request at
    a time: one running on the decode pod, nothing waiting, no preemption, a pool nearly empty. The doubled TTFT is
    the hand-off path's (the thread's bug), not a shortage: more GPUs, more TP, more sequences or more blocks do not
    shorten a single request's serial hand-off. So must never: replicas (one second; and one request at a time), more
    TP, more sequences, a pool turn, a restart; no stall claimed.

    Not asserted: any fix of the hand-off (a connector or proxy change, not a dial on the page); the prefill pod (its
    page is not the one the reporter read and shows a plain prefill).

    Chosen where the report is silent: the model (Llama-3.1-8B-Instruct, a model the tables hold; "tp1" says one GPU
    a pod), one H100 SXM a pod, vLLM's defaults (0.9), the pool 420,624 tokens (26,289 blocks, the figure
    ``check-config`` prints: an input here); 2,000-token prompts and 128 output tokens at 8 ms a token; prefill
    0.12 s on each pod, so TTFT 0.24 s on the decode pod against 0.12 s on one GPU. Before: 300 sequential requests.
    The window: one request finishes, the next is admitted and decodes 110 tokens. vLLM of July 2025 (0.9.x) rendered
    with the 0.11 label set. SLO: :data:`SLO`.
    """
    model = "meta-llama/Llama-3.1-8B-Instruct"
    blocks = 26_289
    eng = VLLMEngine(
        model_name=model,
        num_gpu_blocks=blocks,
        max_model_len=32_768,
        gpu_memory_utilization=0.9,
        started=time.time() - 1_800.0,
    )
    eng.finish(300, prompt=2_000, output=128, ttft=0.24, tpot=0.008, queue=0.005)
    eng.first_tokens([0.24] * 301)
    eng.prefill(301 * 2_000)
    eng.decode(300 * 128 + 17, 0.008, steps=300 * 128 + 17, batch=1)
    eng.running, eng.waiting, eng.kv_usage = 1.0, 0.0, 2_017 / (blocks * 16)
    first = eng.render()
    eng.finish(1, prompt=2_000, output=128, ttft=0.24, tpot=0.008, queue=0.005)
    eng.first_tokens([0.24])
    eng.prefill(2_000)
    eng.decode(110, 0.008, steps=110, batch=1)
    eng.kv_usage = 2_110 / (blocks * 16)
    return FieldState(
        id="vllm-1p1d-nixl-decode-pod-concurrency-1-reports-its-own-prefill",
        source="https://github.com/vllm-project/vllm/issues/21037",
        engine_version="vLLM 0.9.x of July 2025, P/D decode pod with NixlConnector (V1; 0.11 label set)",
        deployment={
            "name": "llama8b-1p1d-decode",
            "engine": "vllm",
            "model": model,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 1,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32_768,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 0, "kv_cache_capacity_tokens": blocks * 16},
        must_never=[
            ("replicas", "increase"),
            ("tensor_parallel_size", "increase"),
            ("max_num_seqs", "increase"),
            *POOL_TURNS,
            RESTART,
        ],
        extra_check=no_stall_claimed,
    )


STATES = [
    vllm_lmcache_query_twice_warm_hit(),
    vllm_1p1d_nixl_decode_pod_concurrency_one(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
