"""A real store (Prometheus 2.42, VictoriaMetrics) that scrapes its engines less often than the advisor reads it.

Both stores scrape two stand-in vLLM engines every :data:`STORE_SCRAPE` seconds: one busy (its counters move on
every scrape) and one hung (requests running, no counter moving, new scrapes all the same). An advisor reads each
store by ``query_range`` every second (``federate: false``) and evaluates after each read: most points re-read the
store's newest scrape. Before the fix, those re-reads looked like still intervals and the busy engine drew
``stalled → restart the engine`` (as in CI, ``tests/e2e/test_sources_agree.py[query_range]`` on a loaded machine).
Now:

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


@pytest.mark.parametrize("store", ["prometheus", "victoriametrics"])
def test_a_store_scraping_slower_than_the_reads_shows_no_stall_for_a_busy_engine(tmp_path: Path, store: str) -> None:
    if store == "victoriametrics":
        victoriametrics_binary()
    else:
        require_binary("prometheus", "Debian: apt-get install -y prometheus")
    engines = {
        job: StandInServer(StandInEngine(phases=(phase,), speed=1.0)) for job, phase in (("busy", BUSY), ("hung", HUNG))
    }
    rules: dict[str, list[list[str]]] = {"busy": [], "hung": []}
    with contextlib.ExitStack() as stack:
        for e in engines.values():
            e.start_background()
            stack.callback(e.server_close)
            stack.callback(e.shutdown)
        targets = {job: hostport(e.url()) for job, e in engines.items()}
        if store == "victoriametrics":
            scrape = {
                "global": {"scrape_interval": f"{STORE_SCRAPE}s", "scrape_timeout": "1s"},
                "scrape_configs": [{"job_name": j, "static_configs": [{"targets": [t]}]} for j, t in targets.items()],
            }
            url = stack.enter_context(start_victoriametrics(tmp_path / "vm", scrape))
        else:
            jobs = {j: [t] for j, t in targets.items()}
            url = stack.enter_context(start_prometheus(tmp_path / "prom", jobs, f"{STORE_SCRAPE}s"))
        for job in engines:
            wait_for_series(url, f'vllm:num_requests_running{{job="{job}"}}')
        svc = _service(url)
        stack.callback(svc.close)
        for _ in range(CYCLES):
            svc.scrape_once()
            for d in svc.evaluate_once().deployments:
                rules[d.name].append(sorted(r["rule"] for r in d.as_dict()["recommendations"]))
            time.sleep(CYCLE)
        busy = [(p.timestamp, p.snapshot) for u in svc.tracker.targets("busy") for p in svc.tracker.history("busy", u)]
        scraped = [_scrape_time(url, "busy", t) for t, _ in busy]

    assert not [r for r in rules["busy"] if "stalled" in r], rules["busy"]
    assert len(busy) >= 2, busy
    assert len(set(scraped)) == len(scraped), scraped  # one point per raw scrape
    counters = [s.generation_tokens_total for _, s in busy]
    assert all(a is not None and b is not None and b > a for a, b in itertools.pairwise(counters)), counters
    assert "stalled" in rules["hung"][-1], rules["hung"]
