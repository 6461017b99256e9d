"""Issue 15: direct scrape, a real Prometheus 2.42 and a real VictoriaMetrics give the same recommendations for
one engine's history, with ``source: prometheus`` reading incrementally (only the points since the previous
cycle), through ``/federate`` or ``query_range``.

One stand-in vLLM engine (``advisor.standin``) runs a scenario that is busy for its first seconds and then
saturates its KV pool (requests waiting, preemptions); Prometheus (Debian's ``prometheus``, started by
:func:`tests.e2e.prometheus.start_prometheus`) and VictoriaMetrics (:func:`tests.e2e.victoriametrics.
start_victoriametrics`, ``-search.latencyOffset=0s``) scrape it every second. Two advisors run their cycles side
by side: one with a deployment scraping the engine directly and one reading it through Prometheus, the other
reading it through VictoriaMetrics — with the incremental reads from the stores' ``/federate`` endpoint (the
newest sample of each series, stamped with its scrape time), and beside them the same pair reading by
``query_range`` (four advisors on the same engine and stores; one trial, not two in turn). The saturation begins
after the stores' first (whole-window) read, so every recommendation about it comes from points appended by
incremental reads. At the end:

* the three views hold the same recommendations (rule, dial, action, current value), suggested values equal
  within 10 % or 1 (those derived from window rates differ by a store's lag behind a direct scrape, at most one
  scrape interval of counter growth — the bound of ``tests/sources/test_victoriametrics_real.py``);
* each store's incremental history gives the recommendations a fresh advisor gets from one whole-window read of
  the same store at the same time, and no evaluation time is held twice.

Without a binary the test is skipped with the reason — or fails when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

import pytest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.e2e.prometheus import hostport, start_prometheus, wait_for_series
from tests.e2e.victoriametrics import require_binary, start_victoriametrics, victoriametrics_binary

pytestmark = pytest.mark.integration

BUSY = Phase("busy", 15, 0.62, 38, 0, 4.0, 1500, 300, 0, 0.35, 0.04)
SATURATED = Phase("saturated", 10_000, 0.97, 48, 12, 3.0, 1500, 300, 1.0, 0.5, 0.05)
SPEED = 3.0  # scenario seconds per second: busy for 5 s, then saturated
CYCLE = 2.0  # the advisors' scrape interval, seconds
WINDOW = 8.0  # their evaluation window, seconds
CYCLES = 12  # 24 s: the saturation fills the window twice over
DEPLOYMENT: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "max_num_seqs": 256,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}


def _service(store_url: str, engine_url: str | None, federate: bool = True) -> Service:
    deployments: list[dict[str, Any]] = [
        {"name": "via-store", "source": "prometheus", "selector": 'job="vllm"', **DEPLOYMENT}
    ]
    if engine_url is not None:
        deployments.insert(0, {"name": "direct", "targets": [engine_url], **DEPLOYMENT})
    cfg = parse_config(
        {
            "scrape_interval": f"{CYCLE:g}s",
            "evaluation_window": f"{WINDOW:g}s",
            "prometheus": {"url": store_url, "federate": federate},
            "deployments": deployments,
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics, ignore_for=True)


def _recommendations(result: dict[str, Any]) -> list[tuple[Any, ...]]:
    return sorted((r["rule"], r["dial"], r["action"], str(r["current"])) for r in result["recommendations"])


def _suggested_agree(a: dict[str, Any], b: dict[str, Any]) -> bool:
    key = lambda r: (r["rule"], r["dial"], r["action"])  # noqa: E731
    for x, y in zip(sorted(a["recommendations"], key=key), sorted(b["recommendations"], key=key), strict=True):
        u, v = x["suggested"], y["suggested"]
        if isinstance(u, int | float) and isinstance(v, int | float) and not isinstance(u, bool):
            if abs(u - v) > max(1.0, 0.1 * abs(v)):
                return False
        elif u != v:
            return False
    return True


MODES = {"federate": True, "query_range": False}
Key = tuple[str, str]
"""(store, mode)."""
"""The stores' incremental reads: ``/federate`` answers, or ``query_range`` (both run side by side in one trial)."""


def test_direct_prometheus_and_victoriametrics_recommend_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    victoriametrics_binary()
    require_binary("prometheus", "Debian: apt-get install -y prometheus")
    go: list[float] = []  # the scenario's clock stands still until both stores scrape the engine

    def scenario_clock() -> float:
        return time.monotonic() - go[0] if go else 0.0

    engine = StandInServer(
        StandInEngine(phases=(BUSY, SATURATED), speed=SPEED, num_gpu_blocks=2000, clock=scenario_clock)
    )
    engine.start_background()
    target = hostport(engine.url())
    scrape = {
        "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
        "scrape_configs": [{"job_name": "vllm", "static_configs": [{"targets": [target]}]}],
    }
    results: dict[Key, dict[str, Any]] = {}
    direct: dict[str, dict[str, Any]] = {}
    whole: dict[Key, dict[str, Any]] = {}
    stamps: dict[Key, list[float]] = {}
    first_read: dict[Key, list[tuple[Any, ...]]] = {}
    used: dict[Key, bool | None] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(engine.server_close)
        stack.callback(engine.shutdown)
        stores = {
            "victoriametrics": stack.enter_context(start_victoriametrics(tmp_path / "vm", scrape)),
            "prometheus": stack.enter_context(start_prometheus(tmp_path / "prom", {"vllm": [target]}, "1s")),
        }
        for url in stores.values():
            wait_for_series(url, "vllm:num_requests_running")
        go.append(time.monotonic())
        services = {
            (name, mode): _service(stores[name], engine.url() if name == "prometheus" else None, federate)
            for mode, federate in MODES.items()
            for name in ("prometheus", "victoriametrics")
        }
        for svc in services.values():
            stack.callback(svc.close)
        for i in range(CYCLES):
            for key, svc in services.items():
                svc.scrape_once()
                if i == 0:
                    first_read[key] = _recommendations(svc.evaluate_once().deployments[-1].as_dict())
            time.sleep(CYCLE)
        for key, svc in services.items():
            name, mode = key
            for _ in range(3):  # counted in reads: on a loaded machine one store query can outlast its 1.6 s deadline
                svc.scrape_once()
                evaluated = {d.name: d.as_dict() for d in svc.evaluate_once().deployments}
                if evaluated["via-store"]["state"] != "unavailable":
                    break
                time.sleep(CYCLE)
            assert svc.prom is not None
            used[key] = svc.prom.federation  # True: the incremental reads were /federate answers
            results[key] = evaluated["via-store"]
            if "direct" in evaluated:
                direct[mode] = evaluated["direct"]
            stamps[key] = [
                p.timestamp for u in svc.tracker.targets("via-store") for p in svc.tracker.history("via-store", u)
            ]
            want = _recommendations(results[key])
            for _ in range(3):  # counted in reads: a read at "now" can precede the store's ingestion of the last scrape
                fresh = _service(stores[name], None)  # one whole-window read of the same store, now
                fresh.clock = svc.clock
                try:
                    fresh.scrape_once()
                    whole[key] = fresh.evaluate_once().deployments[0].as_dict()
                finally:
                    fresh.close()
                if _recommendations(whole[key]) == want:
                    break
                time.sleep(CYCLE)

    for mode, federate in MODES.items():
        d = direct[mode]
        assert d["state"] == "fresh" and _recommendations(d), d["recommendations"]
        for name in ("prometheus", "victoriametrics"):
            key = (name, mode)
            via = results[key]
            assert used[key] is (True if federate else None), key
            assert via["engine"] == "vllm" and via["state"] == "fresh", (key, via["state"])
            assert not first_read[key] or first_read[key] != _recommendations(via), key  # the saturation came later
            assert stamps[key] == sorted(set(stamps[key])), key  # no evaluation time held twice
            assert _recommendations(via) == _recommendations(d), (key, via["recommendations"])
            assert _suggested_agree(via, d), (key, via["recommendations"], d["recommendations"])
            assert _recommendations(via) == _recommendations(whole[key]), key
            assert _suggested_agree(via, whole[key]), (key, via["recommendations"], whole[key]["recommendations"])
        with capsys.disabled():
            for label, r in (("direct", d), *((n, results[(n, mode)]) for n in ("prometheus", "victoriametrics"))):
                got = [(x["dial"], x["action"], x["suggested"]) for x in r["recommendations"]]
                print(f"\n[sources agree, {mode}] {label}: {got}")
