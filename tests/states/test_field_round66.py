"""Field states, round 66: a Ray Serve LLM deployment of two vLLM replicas of Qwen3-32B hit by 1,280 requests at
once, whose replicas Serve marked unhealthy and restarted while their engines were busy prefilling the burst — the
operator's measured fix a longer health-check timeout, never a restart nor more capacity — from one public report.

The row is built from one public report (``source``): the deployment as the report states it (where it does not, the
docstring names the stand-in and why), and two scrapes one second apart rendered as Ray's metrics export port shows a
Serve LLM app: :func:`tests.states.test_field_read.ray_page` (each replica's vLLM V1 families re-registered through
``vllm/v1/metrics/ray_wrappers.py``, sanitized ``ray_vllm_*`` names, the ``ReplicaId`` tag of vLLM PR #24267, Ray's
``Component``/``NodeAddress``/``SessionName``/``Version``/``WorkerId`` tags) over :class:`tests.states.VLLMEngine`
(the 0.11 label set). The assertions come from the report's numbers and verdict, never from the advisor's output:

* ``ray-serve-llm-qwen3-32b-2-replicas-1280-burst-health-check-timeout-not-restart`` — ray-project/ray#54070
  ("[serve.llm] vLLM engine became unhealthy under high incoming traffic", June 2025, closed): two replicas of
  Qwen3-32B at TP 4, ``gpu_memory_utilization`` 0.8, ``max_model_len`` 32,768, prefix caching; replicas marked
  unhealthy and restarted "around every half hour"; the engine's own line at the time: "Avg prompt throughput:
  27408.8 tokens/s, Avg generation throughput: 4.9 tokens/s, Running: 49 reqs, … Pending: 951 reqs, GPU KV cache
  usage: 16.8%". Root cause (the reporter): "The vLLM engine didn't crash … it was blocked by spiky incoming requests
  (we got 1280 requests at once) and it wasn't able to response the health_check signal within the default 10s
  timeout"; "changing ``HEALTH_CHECK_TIMEOUT_S`` to 600s … resolved the issue". Never a restart (the engine serves:
  prompt tokens flow), never a larger memory budget (the pool is 17 % used), never replicas (one second of
  history); no stall.

This round holds one state, not three: within the round's time limit no unused Ray Serve / KubeRay / KServe report
whose replicas' pages carry ``ReplicaId`` with a measured verdict, no unused vLLM V1 burst-TTFT report with a
measured non-replica fix, and no unused "looks alarming, needs nothing" vLLM V1 report with a stated verdict was
found whose thread the search tool returned in full (candidates seen: ray-project/ray#53356 — the thread's verdict
was not returned; vllm-project/vllm#20302 — the maintainers' answer was not returned; vllm-project/vllm#5176 and
#12077 — V0, 2024; vllm-project/vllm#27073 — already a row of round 4).

``once`` sees about one second of history, so no replica count may be proposed (it needs ≥ 30 s of history to
measure an arrival rate); the row says so with ``("replicas", "increase")`` in ``must_never``.
"""

from __future__ import annotations

import time

from tests.states import VLLMEngine
from tests.states.field import FieldState, round_tests
from tests.states.test_field_read import ray_page
from tests.states.test_field_round3_vllm import RESTART, no_stall_claimed

MODEL = "Qwen/Qwen3-32B"
BLOCKS = 42_000
"""Chosen: each replica's pool (672,000 tokens of 16-token blocks): Qwen3-32B keeps 64 layers × 8 KV heads × 128 ×
2 × 2 bytes = 256 KiB a token, 64 KiB a GPU at TP 4; at 0.8 of an 80 GB H100 after ~16 GB of weights and ~4 GB of
activations, ~44 GB a GPU for KV."""
PROMPT = 2_300.0
"""Chosen: tokens per burst prompt (49 running at 16.8 % of 672,000 tokens ≈ 2,300 each; the report gives no
lengths)."""


def _replica(*, done: int, running: float, waiting: float, kv: float) -> VLLMEngine:
    """One replica of the Serve app before the burst's window: ``done`` earlier requests served normally (TTFT 0.3 s,
    25 ms a token, 300 out), then the burst's ``running`` admitted (their prompts prefilled), ``waiting`` queued."""
    eng = VLLMEngine(
        model_name="qwen3-32b",
        num_gpu_blocks=BLOCKS,
        max_model_len=32_768,
        gpu_memory_utilization=0.8,
        started=time.time() - 1_500.0,
    )
    eng.finish(done, prompt=PROMPT, output=300, ttft=0.3, tpot=0.025, queue=0.02)
    eng.first_tokens([0.3] * done)
    eng.prefill(done * PROMPT + running * PROMPT, cached=done * 200.0)
    eng.decode(done * 299.0, 0.025, steps=done * 299.0 / 8, batch=8)
    eng.running, eng.waiting, eng.kv_usage = running, waiting, kv
    return eng


def _window(eng: VLLMEngine, *, admitted: int, first: float) -> None:
    """One second of the burst: ``admitted`` more prompts prefilled (27,408 prompt tokens/s in the report at 12 of
    2,300), a handful of first tokens after ``first`` seconds queued, ~5 generated tokens (4.9 tokens/s)."""
    eng.prefill(admitted * PROMPT, cached=admitted * 200.0)
    eng.first_tokens([first] * 5)
    eng.decode(5.0, 0.2, steps=1, batch=5)
    eng.running += admitted
    eng.waiting -= admitted
    eng.kv_usage += admitted * PROMPT / (BLOCKS * 16)


def ray_serve_qwen3_burst_health_check() -> FieldState:
    """ray-project/ray#54070 (June 2025, labelled bug/llm/serve/stability, closed): "When serving a LLM (Qwen3-32B)
    using ``LLMServer.as_deployment``, we noticed some health check timeout causing replica(s) to restart from time to
    time (around every half hour)"; ``deployment_config: num_replicas: 2``, ``engine_kwargs: tensor_parallel_size: 4,
    dtype: bfloat16, enforce_eager: True, gpu_memory_utilization: 0.8, max_model_len: 32768, enable_prefix_caching:
    True``; "Didn't receive health check response for replica Replica(id='rut1591v', …) after 10.0s, marking it
    unhealthy"; the engine at that moment: "Avg prompt throughput: 27408.8 tokens/s, Avg generation throughput: 4.9
    tokens/s, Running: 49 reqs, Swapped: 0 reqs, Pending: 951 reqs, GPU KV cache usage: 16.8%", "Prefix cache hit
    rate: GPU: 12.55%". Verdict (reporter, acknowledged by the maintainer): the engine had not crashed; "blocked by
    spiky incoming requests (we got 1280 requests at once)" it missed the 10 s health check; ``HEALTH_CHECK_TIMEOUT_S``
    600 s "resolved the issue".

    The state is the burst as the two replicas' pages show it: the replica the log line names (``rut1591v``) with 49
    running and 951 queued, its pool 16.8 % used, prefilling ~27,400 prompt tokens a second and generating ~5; the
    other replica holding the rest of the 1,280. Must never: a restart (the engines serve; a restart is exactly what
    the false health failure did), a larger memory budget (17–21 % of the pool used: memory is not what holds the
    queue), replicas (one second of history); no stall (prompt tokens move).

    Not asserted: the health-check timeout itself (a Serve setting the advisor has no dial for, and no page shows);
    whether a smaller prefill budget or fewer sequences would shorten the burst's TTFT (the report measures neither);
    any replica count (the report measured none). Nor the queue's TTFT: it is the burst's, not a steady load's.

    Chosen where the report is silent: the GPU (H100 SXM: 70 GB of bf16 weights need four 80 GB cards at 0.8);
    the pool (:data:`BLOCKS`) and prompt length (:data:`PROMPT`); the other replica ``9xk2p1qd`` with the rest of
    the burst (1,280 − 1,000 = 280: 49 running, 231 queued); 4,000 requests served per replica before the burst.
    The report ran vLLM's V0 engine with Serve's engine metrics off (``log_engine_metrics`` defaulted to false before
    Ray 2.51), so its page had no ``ray_vllm_*`` families; the state renders the page the maintainer's suggested
    re-run would serve with engine metrics on: Ray 2.52 Serve LLM with vLLM 0.11 V1 (``ReplicaId``-tagged), the
    engines' numbers the report's. SLO: TTFT 10 s (the health-check timeout the burst broke), TPOT 0.1 s.
    """
    hot = _replica(done=4_000, running=49, waiting=951, kv=0.168)
    other = _replica(done=4_000, running=49, waiting=231, kv=0.168)
    first = ray_page({"rut1591v": hot, "9xk2p1qd": other})
    _window(hot, admitted=12, first=9.0)
    _window(other, admitted=12, first=4.0)
    second = ray_page({"rut1591v": hot, "9xk2p1qd": other})
    return FieldState(
        id="ray-serve-llm-qwen3-32b-2-replicas-1280-burst-health-check-timeout-not-restart",
        source="https://github.com/ray-project/ray/issues/54070",
        engine_version="Ray 2.52 Serve LLM, vLLM 0.11 V1 (stand-in for the report's V0 run; see docstring)",
        deployment={
            "name": "ray-serve-qwen3-32b-tp4",
            "engine": "auto",
            "model": MODEL,
            "gpu": "h100-sxm",
            "tensor_parallel_size": 4,
            "gpu_memory_utilization": 0.8,
            "max_model_len": 32_768,
            "slo": {"ttft_seconds": 10.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
        },
        scrapes=[(first, second)],
        snapshot={"replicas": 2, "replicas_up": 2, "requests_waiting": (951 - 12) + (231 - 12)},
        named=["ReplicaId=rut1591v", "ReplicaId=9xk2p1qd"],
        must_never=[RESTART, ("gpu_memory_utilization", "increase"), ("replicas", "increase")],
        extra_check=no_stall_claimed,
    )


STATES = [
    ray_serve_qwen3_burst_health_check(),
]

XFAIL: dict[str, str] = {}
"""State id → why the advisor is wrong there (strict: the test passes only while it still fails)."""

once, test_field_state = round_tests(STATES, XFAIL)
