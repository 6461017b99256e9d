"""Engines joining or leaving behind one target, end to end through ``once`` (breaker 19).

A Ray Serve deployment exports every replica's vLLM series on one page (``ray_vllm_*`` with ``ReplicaId``; pages
written as ``tests/read_pages.py`` writes them, from ``vllm/v1/metrics/ray_wrappers.py``). The snapshot's counters
are sums over the replicas, so a replica scaled away between the two scrapes drops the sum by that replica's
lifetime: the window read the drop as a restart and counted every other replica's lifetime as the increase
(1,497,021 prompt tokens/s for ~9,900, ``counter_resets`` 1, a CRITICAL "repeated restarts" page in ``run``). The
window now starts again at such a change (:func:`advisor.telemetry.population_change`): ``once``'s two scrapes hold
no rate across it — unknown, not a number — and no restart.
"""

from __future__ import annotations

from pathlib import Path

from tests.read_pages import _RAY
from tests.states.field import run_once_on

LIFETIME = 5_000_000
"""Prompt tokens each replica counted before the first scrape."""


def ray_page(replicas: list[str], second: int) -> str:
    """One scrape at ``second`` of a Ray Serve page with ``replicas`` (``ReplicaId`` values) behind it, each
    running 10, nothing waiting, KV 30 % used, and having counted :data:`LIFETIME` prompt tokens plus 1,000 a
    second (200 generated a second)."""
    lines: list[str] = []
    families = [
        ("num_requests_running", "gauge", "Number of requests in model execution batches.", lambda: 10),
        ("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", lambda: 0),
        ("kv_cache_usage_perc", "gauge", "KV-Cache usage. 1 means 100 percent usage.", lambda: 0.3),
        ("prompt_tokens_total", "counter", "Number of prefill tokens processed.", lambda: LIFETIME + 1000 * second),
        ("generation_tokens_total", "counter", "Number of generation tokens processed.", lambda: 200 * second),
    ]
    for name, kind, text, value in families:
        lines += [f"# HELP ray_vllm_{name} {text}", f"# TYPE ray_vllm_{name} {kind}"]
        for i, rid in enumerate(replicas):
            labels = f'{_RAY},ReplicaId="{rid}",WorkerId="w{i}",engine="0",model_name="qwen-0.5b"'
            lines.append(f"ray_vllm_{name}{{{labels}}} {value()}")
    return "\n".join(lines) + "\n"


DEPLOYMENT = {
    "name": "ray-qwen",
    "engine": "vllm",
    "model": "Qwen/Qwen2.5-0.5B",
    "gpu": "l4",
    "max_model_len": 8192,
    "slo": {"ttft_seconds": 2.0, "tpot_seconds": 0.1, "target_ratio": 0.9},
}


def test_a_replica_scaled_away_between_the_scrapes_is_no_restart_and_no_rate(tmp_path: Path) -> None:
    first = ray_page(["3r4e76ag", "9xk2p1qd", "k2m8q0zz"], 100)
    second = ray_page(["3r4e76ag", "9xk2p1qd"], 101)
    dep = run_once_on(tmp_path, DEPLOYMENT, [(first, second)])
    snap = dep["snapshot"]
    assert snap["requests_running"] == 20  # the replicas the newest scrape shows
    assert snap["counter_resets"] == 0
    assert snap["prompt_tokens_per_second"] is None and snap["generation_tokens_per_second"] is None
    assert not dep["recommendations"], dep["recommendations"]


def test_replicas_that_stay_give_their_own_rate(tmp_path: Path) -> None:
    """The control: the same page with no replica leaving reads the replicas' own 2 × 1,000 prompt tokens/s."""
    names = ["3r4e76ag", "9xk2p1qd"]
    dep = run_once_on(tmp_path, DEPLOYMENT, [(ray_page(names, 100), ray_page(names, 101))])
    snap = dep["snapshot"]
    assert snap["counter_resets"] == 0
    # the scrapes are ~1 s apart, stamped at their ends: a rate within the harness's jitter of 2,000
    assert 1500 <= snap["prompt_tokens_per_second"] <= 2500, snap["prompt_tokens_per_second"]
