"""A real store (Prometheus 2.42, VictoriaMetrics) that scrapes its engines less often than the advisor reads it.

Both stores scrape two stand-in vLLM engines every :data:`STORE_SCRAPE` seconds: one busy (its counters move on
every scrape) and one hung (requests running, no counter moving, new scrapes all the same). An advisor reads each
store by ``query_range`` every second (``federate: false``; both stores side by side) and evaluates after each read:
most points re-read the store's newest scrape. Before the fix, those re-reads looked like still intervals and the
busy engine drew ``stalled → restart the engine`` (as in CI, ``tests/e2e/test_sources_agree.py``'s query_range reads
on a loaded machine). Now:

* the busy engine is never ``stalled``, and its history holds one point per real scrape (each point shows another
  raw scrape, read back from the store with ``timestamp(up)`` at the point's time, and every counter moved);
* the hung engine is ``stalled`` (its new scrapes with identical values are new observations).

Without a binary the test is skipped with the reason — or fails when ``CI`` is set.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from pathlib import Path
from typing import Any

import pytest
import requests

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.e2e.prometheus import hostport, start_prometheus, wait_for_series
from tests.e2e.victoriametrics import require_binary, start_victoriametrics, victoriametrics_binary

pytestmark = pytest.mark.integration

BUSY = Phase("busy", 10_000, 0.62, 38, 0, 4.0, 1500, 300, 0, 0.35, 0.04)
HUNG = Phase("hung", 10_000, 0.62, 38, 5, 0.0, 1500, 300, 0, 0.35, 0.04)  # nothing finishes, nothing moves
STORE_SCRAPE = 4  # seconds between the store's scrapes of each engine
CYCLE = 1.0  # the advisor's scrape interval: it reads the store every second
CYCLES = 14
DEPLOYMENT: dict[str, Any] = {
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "max_num_seqs": 256,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}


def _service(store_url: str) -> Service:
    cfg = parse_config(
        {
            "scrape_interval": f"{CYCLE:g}s",
            "evaluation_window": "12s",
            "prometheus": {"url": store_url, "federate": False},
            "deployments": [
                {"name": job, "source": "prometheus", "selector": f'job="{job}"', **DEPLOYMENT}
                for job in ("busy", "hung")
            ],
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics, ignore_for=True)


def _scrape_time(store_url: str, job: str, at: float) -> float:
    """The raw scrape time the store shows for ``job``'s target at evaluation time ``at``."""
    r = requests.get(
        f"{store_url}/api/v1/query", params={"query": f'timestamp(up{{job="{job}"}})', "time": at}, timeout=5
    )
    r.raise_for_status()
    (sample,) = r.json()["data"]["result"]
    return float(sample["value"][1])


STORES = ("prometheus", "victoriametrics")
"""Read side by side, each by its own advisor, on the same two engines (one trial, not one per store)."""


def test_a_store_scraping_slower_than_the_reads_shows_no_stall_for_a_busy_engine(tmp_path: Path) -> None:
    victoriametrics_binary()
    require_binary("prometheus", "Debian: apt-get install -y prometheus")
    engines = {
        job: StandInServer(StandInEngine(phases=(phase,), speed=1.0)) for job, phase in (("busy", BUSY), ("hung", HUNG))
    }
    rules: dict[str, dict[str, list[list[str]]]] = {store: {"busy": [], "hung": []} for store in STORES}
    busy: dict[str, list[tuple[float, Any]]] = {}
    scraped: dict[str, list[float]] = {}
    with contextlib.ExitStack() as stack:
        for e in engines.values():
            e.start_background()
            stack.callback(e.server_close)
            stack.callback(e.shutdown)
        targets = {job: hostport(e.url()) for job, e in engines.items()}
        scrape = {
            "global": {"scrape_interval": f"{STORE_SCRAPE}s", "scrape_timeout": "1s"},
            "scrape_configs": [{"job_name": j, "static_configs": [{"targets": [t]}]} for j, t in targets.items()],
        }
        jobs = {j: [t] for j, t in targets.items()}
        urls = {
            "victoriametrics": stack.enter_context(start_victoriametrics(tmp_path / "vm", scrape)),
            "prometheus": stack.enter_context(start_prometheus(tmp_path / "prom", jobs, f"{STORE_SCRAPE}s")),
        }
        for url in urls.values():
            for job in engines:
                wait_for_series(url, f'vllm:num_requests_running{{job="{job}"}}')
        services = {store: _service(urls[store]) for store in STORES}
        for svc in services.values():
            stack.callback(svc.close)
        for _ in range(CYCLES):
            for store, svc in services.items():
                svc.scrape_once()
                for d in svc.evaluate_once().deployments:
                    rules[store][d.name].append(sorted(r["rule"] for r in d.as_dict()["recommendations"]))
            time.sleep(CYCLE)
        for store, svc in services.items():
            busy[store] = [
                (p.timestamp, p.snapshot) for u in svc.tracker.targets("busy") for p in svc.tracker.history("busy", u)
            ]
            scraped[store] = [_scrape_time(urls[store], "busy", t) for t, _ in busy[store]]

    for store in STORES:
        seen = rules[store]
        assert not [r for r in seen["busy"] if "stalled" in r], (store, seen["busy"])
        assert len(busy[store]) >= 2, (store, busy[store])
        assert len(set(scraped[store])) == len(scraped[store]), (store, scraped[store])  # one point per raw scrape
        counters = [s.generation_tokens_total for _, s in busy[store]]
        assert all(a is not None and b is not None and b > a for a, b in itertools.pairwise(counters)), (
            store,
            counters,
        )
        assert "stalled" in seen["hung"][-1], (store, seen["hung"])
