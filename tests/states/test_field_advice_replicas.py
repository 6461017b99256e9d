"""Field states for issue 13, problem 7: one replica number, sized for the arrival rate, never for the backlog.

A replica count answers "how many replicas serve this arrival rate within the SLO". A queue that a one-shot batch
or a burst left behind is not an arrival rate: sizing replicas to hold every running and waiting request at once
("holding all 407 running and waiting requests at once" → 1 → 13 in the issue) pages an operator to scale to N
for a backlog that drains by itself. Each row replays a public report's state as that vLLM version exposes it
(:class:`tests.states.VLLMEngine`, the V1 label set) and asserts the range the replica advice must fall in —
written from the report's numbers, not from the advisor's output.

Flow balance gives the arrival rate over the two scrapes one second apart: λ = completions + (running + waiting
at the second scrape − at the first). A queue draining while requests complete has λ ≈ completions − drain.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.e2e.prometheus import free_port
from tests.states import VLLMEngine
from tests.states.field import (
    FieldState,
    FieldStateRuns,
    check_field_state,
    matching,
    run_field_states,
)

SLO = {"ttft_seconds": 5.0, "tpot_seconds": 0.1, "target_ratio": 0.9}


def _replicas_at_most(most: int) -> Any:
    """Every replica suggestion (first or alternative) is at most ``most``."""

    def check(result: dict[str, Any]) -> None:
        recs = list(result.get("recommendations") or [])
        for cand in matching(recs, ("replicas", None)):
            assert int(cand["suggested"]) <= most, f"replicas {cand['current']} → {cand['suggested']} (> {most})"

    return check


def _engine(running: float, waiting: float, usage: float, max_model_len: int) -> VLLMEngine:
    eng = VLLMEngine(
        model_name="meta-llama/Llama-3.1-8B-Instruct",
        num_gpu_blocks=27000,
        max_model_len=max_model_len,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.running, eng.waiting, eng.kv_usage = running, waiting, usage
    return eng


def one_shot_benchmark_backlog() -> FieldState:
    """vLLM V1 offline throughput benchmark: 1,000 prompts at once, 260 running, 475 waiting, KV 100 %.

    vllm-project/vllm PR #25787 (its test: ``vllm bench throughput --input-len 1024 --output-len 1024
    --num-prompts 1000``) logs "Avg generation throughput: 7097.7 tokens/s, Running: 260 reqs, Waiting: 475 reqs,
    GPU KV cache usage: 100.0%". Every request arrived at the start: nothing arrives now, ~6.9 requests/s complete
    (7,097.7 ÷ 1,024) and as many leave the queue. λ = 7 + (728 − 735) = 0: the backlog drains by itself. Holding
    all 735 at once would be ⌈735 ÷ 260⌉ = 3 replicas; the arrival rate needs 1 — no replica page, although every
    request admitted now misses the TTFT target (it waited for the backlog, which is draining).
    """
    eng = _engine(260.0, 475.0, 1.0, 8192)
    eng.prefill(260 * 1024)
    eng.decode(260 * 500, 0.037)
    eng.finish(50, prompt=1024, output=1024, ttft=60.0, tpot=0.037, queue=58.0)
    first = eng.render()
    eng.waiting = 468.0
    eng.first_tokens([62.0, 64.0, 65.0, 66.0, 68.0, 70.0, 71.0])  # the 7 admitted waited a minute: TTFT misses 5 s
    eng.prefill(7 * 1024)
    eng.decode(7098, 0.037)
    eng.finish(7, prompt=1024, output=1024, ttft=70.0, tpot=0.037, queue=68.0)
    return FieldState(
        id="vllm-one-shot-benchmark-backlog-no-replica-page",
        source="https://github.com/vllm-project/vllm/pull/25787",
        engine_version="vLLM V1 (0.10.x, the 0.11 label set)",
        deployment={
            "name": "bench-8b",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "max_num_seqs": 1024,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 260, "requests_waiting": 468, "kv_cache_usage_ratio": 1.0},
        must_never=[("replicas", "increase")],
        extra_check=_replicas_at_most(1),
    )


def burst_of_long_prompts_draining() -> FieldState:
    """vLLM V1, 100 requests of ~16,400 prompt and 4,096 output tokens sent at 20 requests/s: 42 wait at KV 96 %.

    vllm-project/vllm#43295: the benchmark sends 100 requests at a configured 20 RPS (all within 5 s; total input
    1,639,637 tokens, 409,600 generated, 0.25 requests/s completed, mean TTFT 153.9 s) and the server logs
    "Running: 18 reqs, Waiting: 43 reqs, GPU KV cache usage: 95.9%" then 42, 33, 23 waiting. The arrivals stopped:
    over a second one request completes and one is admitted, λ = 1 + (60 − 61) = 0. Holding all 61 at once would be
    ⌈61 ÷ 18 × 0.959⌉ = 4 replicas; a burst that already ended needs none.
    """
    eng = _engine(18.0, 43.0, 0.959, 32768)
    eng.prefill(18 * 16_400)
    eng.decode(18 * 2_000, 0.017)
    eng.finish(5, prompt=16_400, output=4_096, ttft=150.0, tpot=0.017, queue=148.0)
    first = eng.render()
    eng.waiting = 42.0
    eng.first_tokens([154.0])  # the one admitted waited 2.5 minutes (the report's mean TTFT 153.9 s)
    eng.prefill(16_400)
    eng.decode(1_100, 0.017)
    eng.finish(1, prompt=16_400, output=4_096, ttft=160.0, tpot=0.017, queue=158.0)
    return FieldState(
        id="vllm-ended-burst-draining-no-replica-page",
        source="https://github.com/vllm-project/vllm/issues/43295",
        engine_version="vLLM V1 (the 0.11 label set)",
        deployment={
            "name": "mtp-8b",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32768,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 18, "requests_waiting": 42, "kv_cache_usage_ratio": 0.959},
        must_never=[("replicas", "increase")],
        extra_check=_replicas_at_most(1),
    )


def queue_depth_burst_with_room() -> FieldState:
    """vLLM V1 behind a KEDA ScaledObject on ``vllm:num_requests_waiting`` (trigger at 30) and KV usage (60 %).

    llm-d/llm-d-autoscaling PR #1517 scales on "Queue Depth: 30 requests" and "KV Cache: 60%". Here a burst puts 30
    requests in the queue within one second while the pool is 22 % full and 40 of 256 sequences run; 20 chat
    requests (500 prompt, 150 output tokens) complete per second. A queue beside a pool and slots with room is the
    next steps' admissions, not a ceiling: the replica's service rate is not its completions (it is not
    saturated). That second's rate, 20 + 30 = 50/s, fits two replicas at most; sizing from "each replica completes
    20/s" would say ⌈50 ÷ 16⌉ = 4 — the queue-depth trigger's scale-to-N.
    """
    eng = _engine(40.0, 0.0, 0.22, 8192)
    eng.prefill(40 * 500)
    eng.decode(40 * 75, 0.008)
    eng.finish(200, prompt=500, output=150, ttft=0.08, tpot=0.008, queue=0.001)
    first = eng.render()
    eng.waiting = 30.0
    eng.prefill(20 * 500)
    eng.decode(20 * 150, 0.008)
    eng.finish(20, prompt=500, output=150, ttft=0.09, tpot=0.008, queue=0.002)
    return FieldState(
        id="vllm-queue-depth-burst-beside-free-pool",
        source="https://github.com/llm-d/llm-d-autoscaling/pull/1517",
        engine_version="vLLM V1 (the 0.11 label set)",
        deployment={
            "name": "chat-8b",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 40, "requests_waiting": 30, "kv_cache_usage_ratio": 0.22},
        extra_check=_replicas_at_most(2),
    )


def hung_engine_queue() -> FieldState:
    """vLLM V1 that stopped completing: 1 running, 14 waiting for over an hour, KV 76.5 %, 5.4 tokens/s.

    intel/llm-scaler#391: "Running: 1 reqs, Waiting: 14 reqs for over an hour, despite no active input prompts",
    generation 5.4 tokens/s. Nothing completes, so no arrival rate can be measured and more replicas do not unstick
    a hung engine: no replica count may be proposed.
    """
    eng = _engine(1.0, 14.0, 0.765, 32768)
    eng.prefill(8_000)
    eng.decode(20_000, 0.18)
    first = eng.render()
    eng.decode(5.4, 0.18)
    return FieldState(
        id="vllm-hung-queue-no-replica-count",
        source="https://github.com/intel/llm-scaler/issues/391",
        engine_version="vLLM V1 (the 0.11 label set)",
        deployment={
            "name": "xpu-8b",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 32768,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 1, "requests_waiting": 14},
        must_never=[("replicas", None)],
    )


def _status(result: dict[str, Any], rule: str) -> dict[str, Any]:
    return next((r for r in result.get("rules") or [] if r.get("rule") == rule), {})


def _replicas_withheld_for_history(result: dict[str, Any]) -> None:
    """No replica turn anywhere; the incident (if any) lists it under ``withheld`` with the history it lacks, and
    ``queue_growth`` (whose only turn is replicas) is shown ``withheld`` with that reason, never ``inactive``."""
    recs = list(result.get("recommendations") or [])
    assert not matching(recs, ("replicas", None)), f"a replica count from ~1 s of history: {recs}"
    st = _status(result, "queue_growth")
    assert st.get("state") == "withheld", st
    seen = re.search(r"needs ≥ 30 s of history over ≥ 4 scrapes; this evaluation sees (\d+) s", str(st.get("reason")))
    assert seen and int(seen.group(1)) < 30, st


def burst_start_over_one_second() -> FieldState:
    """A multi-stage bursty load (llm-d/llm-d-autoscaling PR #1118: Qwen3-32B, ~1,000 prompt and ~1,000 output
    tokens, RPS 15 → 2 → 10 → 15 → 5 → 2; its autoscaler peaked at 4 replicas). ``once`` scrapes twice, 1 s apart,
    at the step from 2 to 10 requests/s on one replica (TP 2 on H100): 60 running (2/s × ~30 s each), then the
    step's first second admits 4 more up to max-num-seqs 64 and queues 9, while 2 complete. Over that second
    λ = 2 + (73 − 60) ÷ 1 = 15/s against 2/s served, ⌈15 ÷ 1.6⌉ = 10 replicas from one second of a step (ba5d9ee
    proposed 1 → 8) — the
    "scale to N" of a momentary backlog (the `once` walkthrough proposed 10 where the daemon and ``simulate`` said
    2). An arrival rate needs ≥ 30 s over ≥ 4 scrapes: no replica count may be proposed; it is withheld, saying so.
    """
    eng = VLLMEngine(
        model_name="Qwen/Qwen3-32B",
        num_gpu_blocks=20_000,
        max_model_len=8192,
        gpu_memory_utilization=0.9,
        version="0.11",
    )
    eng.running, eng.waiting, eng.kv_usage = 60.0, 0.0, 0.19
    eng.prefill(600 * 1000)
    eng.decode(600 * 1000, 0.03)
    eng.finish(540, prompt=1000, output=1000, ttft=0.4, tpot=0.03, queue=0.01)
    first = eng.render()
    eng.running, eng.waiting, eng.kv_usage = 64.0, 9.0, 0.2
    eng.first_tokens([0.3, 0.35, 0.4, 0.45])
    eng.prefill(4 * 1000)
    eng.decode(60 * 33, 0.03)
    eng.finish(2, prompt=1000, output=1000, ttft=0.4, tpot=0.03, queue=0.01)
    return FieldState(
        id="vllm-burst-start-one-second-no-replica-count",
        source="https://github.com/llm-d/llm-d-autoscaling/pull/1118",
        engine_version="vLLM V1 (the 0.11 label set)",
        deployment={
            "name": "bursty-32b",
            "engine": "vllm",
            "model": "Qwen/Qwen3-32B",
            "gpu": "h100-sxm",
            "tensor_parallel_size": 2,
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "max_num_seqs": 64,
            "slo": SLO,
        },
        scrapes=[(first, eng.render())],
        snapshot={"requests_running": 64, "requests_waiting": 9},
        must_never=[("replicas", "increase")],
        extra_check=_replicas_withheld_for_history,
    )


def _dead_replica_file() -> str:
    """A file_sd file naming one replica that refuses connections (a free loopback port nobody listens on)."""
    return json.dumps([{"targets": [f"127.0.0.1:{free_port()}"], "labels": {}}])


def _not_over_provisioned_while_down(result: dict[str, Any]) -> None:
    st = _status(result, "over_provisioned")
    assert st.get("state") == "inactive", st
    assert "1 of 4 replica(s) are down or stale (3 answer)" in str(st.get("reason")), st


def one_of_four_replicas_dead() -> FieldState:
    """vllm-project/production-stack#420 ("Do not route to dead nodes": a production incident where one vLLM node
    died and the router kept routing to it). Four replicas configured (Llama-3.1-8B on H100 stands in: the report
    names no model), one refusing connections; the three that answer run 10 requests each at KV 3 %, nothing
    waits, the SLO is met. Light as it looks, the fourth replica's requests are failing or moved to the three, and
    the window holds three of four replicas' data: freeing GPUs now ("scale replicas 4 → 1", which the advisor
    proposed while its own text said "across 3 replica(s)") would cut the fleet while it is already short. No
    fewer replicas, lower TP or smaller GPU; ``over_provisioned`` says why, with the count down.
    """
    scrapes = []
    for _ in range(3):
        eng = _engine(10.0, 0.0, 0.03, 8192)
        eng.prefill(400 * 600)
        eng.decode(400 * 200, 0.012)
        eng.finish(400, prompt=600, output=200, ttft=0.15, tpot=0.012, queue=0.002)
        first = eng.render()
        eng.first_tokens([0.15, 0.16, 0.14, 0.15, 0.16])
        eng.prefill(5 * 600)
        eng.decode(10 * 83, 0.012)
        eng.finish(5, prompt=600, output=200, ttft=0.15, tpot=0.012, queue=0.002)
        scrapes.append((first, eng.render()))
    return FieldState(
        id="vllm-one-of-four-replicas-dead-no-scale-down",
        source="https://github.com/vllm-project/production-stack/issues/420",
        engine_version="vLLM V1 (the 0.11 label set)",
        deployment={
            "name": "chat-8b",
            "engine": "vllm",
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "h100-sxm",
            "gpu_memory_utilization": 0.9,
            "max_model_len": 8192,
            "slo": SLO,
            "file_sd": ["dead.json"],
        },
        scrapes=scrapes,
        files={"dead.json": _dead_replica_file()},
        snapshot={"requests_running": 30, "requests_waiting": 0},
        state=None,
        must_never=[("replicas", "decrease"), ("tensor_parallel_size", "decrease"), ("instance_type", None)],
        extra_check=_not_over_provisioned_while_down,
    )


STATES = [
    one_shot_benchmark_backlog(),
    burst_of_long_prompts_draining(),
    queue_depth_burst_with_room(),
    hung_engine_queue(),
    burst_start_over_one_second(),
    one_of_four_replicas_dead(),
]


@pytest.fixture(scope="module")
def once(tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
    """``once --json`` of every state of this module, a few at a time (:func:`tests.states.field.run_field_states`)."""
    return run_field_states(tmp_path_factory, STATES)


@pytest.mark.parametrize("state", STATES, ids=[s.id for s in STATES])
def test_field_state(once: FieldStateRuns, state: FieldState) -> None:
    check_field_state(once[state], state)
