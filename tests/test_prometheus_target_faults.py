"""``source: prometheus``: a fault in one target's part of the store's answer stays that target's, and no point is
lost or frozen without a word (adversarial review, h15):

1. a ``/federate`` line without a timestamp;
2. one of two scrape jobs on a target down;
3. a bad value in the scrape-time series;
4. the advisor's clock stepping back;
5. a scrape landing late when the reads switch from ranges to ``/federate``.

A stand-in Prometheus HTTP API on loopback holds a small vLLM fleet scraped by the store every :data:`SCRAPE`
seconds (each scrape job at its own offset) and answers ``query_range`` as Prometheus does (each evaluation time
holds the newest scrape at or before it; a job's engine series are marked stale once its scrape fails, so they
have no value then) and ``/federate`` (the newest sample of each series with its millisecond timestamp); asked
for ``timestamp(up)`` it answers the raw scrape's time (:data:`advisor.sources.prometheus.SCRAPE_TIME`). The
service's clock is driven by the test; nothing sleeps.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from advisor.sources.prometheus import SCRAPE_TIME, SCRAPE_TIME_MARK
from tests.conftest import reply

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
T0 = 1_700_000_000.0  # the service's clock at the first read (a multiple of SCRAPE)
STEP = 5.0  # the advisor's scrape interval
SCRAPE = 5.0  # the store scrapes every job at k × SCRAPE + the job's offset (``Store.interval``)
GEN_RATE = 120.0  # generation tokens per second
INSTANCES = ("10.0.0.1:8000", "10.0.0.2:8000", "10.0.0.3:8000")
BAD = INSTANCES[1]


def _series(scraped: float) -> dict[str, float]:
    """The engine's page at a scrape: counters of the scrape time, 12 running."""
    moved = scraped - T0 + 10_000
    return {
        "vllm:num_requests_running": 12.0,
        "vllm:num_requests_waiting": 3.0,
        "vllm:kv_cache_usage_perc": 0.5,
        "vllm:generation_tokens_total": GEN_RATE * moved,
        "vllm:prompt_tokens_total": 400.0 * moved,
    }


def _scrape_of(value: float) -> float:
    """The scrape time a ``vllm:generation_tokens_total`` value shows."""
    return value / GEN_RATE - 10_000 + T0


@dataclass(frozen=True)
class Job:
    """One scrape job on a target: ``name`` is its ``job`` label; it scrapes ``offset`` seconds after the grid; its
    scrapes fail (``up`` 0) from ``down_from`` on."""

    name: str = "vllm"
    offset: float = 0.0
    down_from: float = math.inf


@dataclass
class Store:
    clock: Callable[[], float]
    jobs: dict[str, tuple[Job, ...]] = field(default_factory=lambda: {i: (Job(),) for i in INSTANCES})
    untimed: set[str] = field(default_factory=set)  # /federate: these instances' lines carry no timestamp
    nan_up: set[str] = field(default_factory=set)  # these instances' up reads NaN (a store's garbage)
    # query_range: instance → (evaluation time, the value its scrape-time series reads then)
    bad_scrape_time: dict[str, tuple[float, str]] = field(default_factory=dict)
    engine_series: bool = True  # False: the store holds up and its times, no engine sample
    names_listed: bool = True  # False: the store holds no series under the selector yet (an empty name listing)
    lag: float = 0.0  # the store holds a scrape this many seconds after it happened (a late scrape, ingestion)
    interval: float = SCRAPE
    federations: int = 0
    ranges: int = 0

    def scrape(self, job: Job, t: float) -> float:
        """The newest scrape of ``job`` the store holds for evaluation time ``t``, read now."""
        at = min(t, self.clock() - self.lag) - job.offset
        return self.interval * math.floor(at / self.interval + 1e-9) + job.offset


def _matrix(store: Store, times: list[float], with_scrape_times: bool) -> list[dict[str, Any]]:
    result: list[dict[str, Any]] = []
    for inst, jobs in store.jobs.items():
        for job in sorted(jobs, key=lambda j: j.name):  # Prometheus sorts series by their labels
            target = {"instance": inst, "job": job.name}
            scrapes = [store.scrape(job, t) for t in times]
            ups = [math.nan if inst in store.nan_up else 1.0 if s < job.down_from else 0.0 for s in scrapes]
            result.append(
                {
                    "metric": {"__name__": "up", **target},
                    "values": [[t, repr(u)] for t, u in zip(times, ups, strict=True)],
                }
            )
            for name in _series(T0) if store.engine_series else ():
                labels = {"__name__": name, **target, "engine": "0", "model_name": MODEL}
                values = [[t, repr(_series(s)[name])] for t, s, u in zip(times, scrapes, ups, strict=True) if u == 1.0]
                if values:  # a failed scrape marks the job's series stale: no value after it
                    result.append({"metric": labels, "values": values})
            if with_scrape_times:
                metric = {"__name__": SCRAPE_TIME, SCRAPE_TIME_MARK[0]: SCRAPE_TIME_MARK[1], **target}
                stamps = [[t, f"{s:.3f}"] for t, s in zip(times, scrapes, strict=True)]
                if inst in store.bad_scrape_time:
                    at, bad = store.bad_scrape_time[inst]
                    stamps = [[t, bad if t == at else v] for t, v in stamps]
                result.append({"metric": metric, "values": stamps})
    return result


def _federation(store: Store) -> str:
    lines: list[str] = []
    for inst, jobs in store.jobs.items():
        for job in jobs:
            s = store.scrape(job, math.inf)
            stamp = "" if inst in store.untimed else f" {round(s * 1000)}"
            up = math.nan if inst in store.nan_up else 1 if s < job.down_from else 0
            lines.append(f'up{{instance="{inst}",job="{job.name}"}} {"NaN" if up != up else up}{stamp}')
            if not up or not store.engine_series:  # a failed scrape marks the job's series stale: not served
                continue
            for name, value in _series(s).items():
                labels = f'engine="0",instance="{inst}",job="{job.name}",model_name="{MODEL}"'
                lines.append(f"{name}{{{labels}}} {value!r}{stamp}")
    return "\n".join(lines) + "\n"


def _answer(store: Store, h: BaseHTTPRequestHandler) -> None:
    parts = urlsplit(h.path)
    params = dict(parse_qsl(parts.query))
    if h.command == "POST":
        params.update(parse_qsl(h.rfile.read(int(h.headers.get("Content-Length") or 0)).decode()))
    data: Any
    if parts.path == "/api/v1/label/__name__/values":
        data = sorted({*_series(T0), "up"}) if store.names_listed else []
    elif parts.path == "/api/v1/label/instance/values":
        data = list(store.jobs)
    elif parts.path == "/api/v1/query_range":
        store.ranges += 1
        start, end, step = float(params["start"]), float(params["end"]), float(params["step"])
        times = [start + k * step for k in range(round((end - start) / step) + 1)]
        data = {"resultType": "matrix", "result": _matrix(store, times, "timestamp(" in params["query"])}
    elif parts.path == "/federate":
        store.federations += 1
        reply(h, 200, _federation(store).encode(), "text/plain; version=0.0.4")
        return
    else:
        reply(h, 404, b"not found")
        return
    reply(h, 200, json.dumps({"status": "success", "data": data}).encode(), "application/json")


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(http_server: Callable[[Callable[[BaseHTTPRequestHandler], None]], str]) -> Iterator[tuple[Store, str, Clock]]:
    clock = Clock()
    s = Store(clock)
    yield s, http_server(lambda h: _answer(s, h)), clock


def _service(url: str, clock: Clock, federate: bool) -> Service:
    cfg = parse_config(
        {
            "scrape_interval": f"{STEP:g}s",
            "evaluation_window": "60s",
            "prometheus": {"url": url, "federate": federate},
            "deployments": [
                {
                    "name": "fleet",
                    "source": "prometheus",
                    "engine": "vllm",
                    "selector": 'namespace="prod"',
                    "model": MODEL,
                    "gpu": "H100-SXM",
                    "max_model_len": 8192,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ],
        }
    )
    _, collector, metrics = make_registry()
    return Service(cfg, collector, metrics, clock=clock, ignore_for=True)


def _targets(svc: Service) -> dict[str, dict[str, Any]]:
    return {t["target"]: t for t in svc.evaluate_once().deployments[0].as_dict()["targets"]}


def _stamps(svc: Service, target: str) -> list[float]:
    return [p.timestamp for p in svc.tracker.history("fleet", target)]


def _reads(svc: Service, clock: Clock, n: int) -> None:
    """``n`` more cycles, :data:`STEP` seconds apart (the clock ends at the last one)."""
    for _ in range(n):
        clock.now += STEP
        svc.scrape_once()


# --- 1. a /federate line without a timestamp ------------------------------------------------------------------


def test_a_federate_answer_without_timestamps_for_one_instance_fails_that_target_only_and_names_it(
    store: tuple[Store, str, Clock], caplog: pytest.LogCaptureFixture
) -> None:
    """Prometheus's ``/federate`` stamps every sample; a proxy or another store in between may not. Before, one
    such line failed the whole deployment (every target ``parse_error: federation answer: sample up has no
    timestamp``, no instance named). Now the instance whose lines carry no time fails, named; the others read."""
    s, url, clock = store
    svc = _service(url, clock, federate=True)
    try:
        svc.scrape_once()
        _reads(svc, clock, 13)  # the window by query_range, then /federate
        s.untimed.add(BAD)
        with caplog.at_level(logging.WARNING, logger="advisor.service"):
            _reads(svc, clock, 2)
        targets = _targets(svc)
        stamps = {i: _stamps(svc, i) for i in INSTANCES}
    finally:
        svc.close()
    assert s.federations == 15
    bad = targets[BAD]
    assert not bad["up"] and bad["error_reason"] == "parse_error", bad
    assert BAD in bad["error"] and "timestamp" in bad["error"], bad
    for inst in INSTANCES:
        if inst != BAD:
            assert targets[inst]["up"] and targets[inst]["state"] == "fresh", targets[inst]
            assert stamps[inst][-1] == clock.now  # this read's scrape
    assert stamps[BAD][-1] == clock.now - 2 * STEP  # nothing of the untimed reads entered its history
    assert any(BAD in r.getMessage() and "timestamp" in r.getMessage() for r in caplog.records)


# --- 1b. an up that reads NaN ------------------------------------------------------------------------------------


@pytest.mark.parametrize("federate", [False, True], ids=["query_range", "federate"])
def test_an_up_that_reads_nan_is_said_so_not_called_up_zero(store: tuple[Store, str, Clock], federate: bool) -> None:
    """Breaker 15: a NaN ``up`` was reported ``http_status`` "Prometheus reports the target down (up == 0) or has no
    samples": neither happened. It is ``nan_values`` now, naming what ``up`` read; the other targets read."""
    s, url, clock = store
    s.nan_up.add(BAD)
    svc = _service(url, clock, federate=federate)
    try:
        svc.scrape_once()
        _reads(svc, clock, 13)
        targets = _targets(svc)
    finally:
        svc.close()
    bad = targets[BAD]
    assert not bad["up"] and bad["error_reason"] == "nan_values", bad
    assert "up" in bad["error"] and "nan" in bad["error"] and "up == 0" not in bad["error"], bad
    assert all(targets[i]["up"] for i in INSTANCES if i != BAD), targets


# --- 2. two scrape jobs on one target, one down -----------------------------------------------------------------


@pytest.mark.parametrize("federate", [False, True], ids=["query_range", "federate"])
def test_a_target_scraped_by_two_jobs_one_down_reads_up_from_the_other_and_names_the_down_job(
    store: tuple[Store, str, Clock], federate: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """``vllm-probe`` (sorting after ``vllm``, scraping a second later) fails every scrape of the target ``vllm``
    scrapes fine. Before, the target's merged ``up`` was the down job's (the last series read; in ``/federate``
    the newest sample), so the target read down ("Prometheus reports the target down (up == 0)") though its
    engine series were fresh. The engine's series come from the job that is up: the target is up and fresh, and
    its state names the down job (logged once)."""
    s, url, clock = store
    s.jobs[BAD] = (Job("vllm"), Job("vllm-probe", offset=1.0, down_from=-math.inf))
    clock.now = T0 + 2.0  # reads between the two jobs' scrapes: the down job's up is the newest sample
    svc = _service(url, clock, federate=federate)
    try:
        with caplog.at_level(logging.WARNING, logger="advisor.service"):
            svc.scrape_once()
            _reads(svc, clock, 15)
        targets = _targets(svc)
        stamps = _stamps(svc, BAD)
    finally:
        svc.close()
    assert (s.federations > 0) == federate
    t = targets[BAD]
    assert t["up"] and t["state"] == "fresh", t
    assert "vllm-probe" in (t["error"] or ""), t
    assert stamps[-1] == clock.now - 2.0  # the scrape's own time, from /federate and query_range alike
    assert sum("vllm-probe" in r.getMessage() and BAD in r.getMessage() for r in caplog.records) == 1


# --- 3. a bad value in the scrape-time series ------------------------------------------------------------------


@pytest.mark.parametrize("value", ["garbage", "NaN", "-1", "+Inf"])
def test_a_bad_scrape_time_drops_that_point_of_that_target_only_and_says_so(
    store: tuple[Store, str, Clock], value: str, caplog: pytest.LogCaptureFixture
) -> None:
    """``timestamp(up{…})`` of one instance reads ``value`` at one evaluation time (whenever it is read). Before:
    ``garbage`` failed every target of the deployment, each read holding that time (the whole answer a parse
    error); ``-1`` left the point out with no word; ``+Inf`` hid every later point of the read. Now that one
    point is left out, with a warning naming the target, and every other point is read."""
    s, url, clock = store
    bad_at = T0 + 3 * STEP
    s.bad_scrape_time[BAD] = (bad_at, value)
    svc = _service(url, clock, federate=False)
    try:
        with caplog.at_level(logging.WARNING, logger="advisor.service"):
            svc.scrape_once()
            _reads(svc, clock, 6)
        targets = _targets(svc)
        stamps = {i: _stamps(svc, i) for i in INSTANCES}
    finally:
        svc.close()
    assert all(t["up"] and t["state"] == "fresh" for t in targets.values()), targets
    good = [T0 + k * STEP for k in range(7)]
    for inst in INSTANCES:
        assert [x for x in stamps[inst] if x >= T0] == [x for x in good if inst != BAD or x != bad_at], inst
    said = [r.getMessage() for r in caplog.records if "scrape time" in r.getMessage()]
    assert said and all(BAD in m and not any(i in m for i in INSTANCES if i != BAD) for m in said), said


# --- 4. the clock stepping back ---------------------------------------------------------------------------------


@pytest.mark.parametrize("federate", [False, True], ids=["query_range", "federate"])
def test_the_clock_stepping_back_is_said_and_the_targets_are_judged_on_what_they_show_since(
    store: tuple[Store, str, Clock], federate: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The advisor's clock steps back an hour (a host clock that ran ahead, set right). Before: every point held
    was newer than any the reads found, so none was appended, nothing was logged, and the targets read ``fresh``
    for the hour (their newest point was "in the future", never old). Now the step is logged with its size, the
    points from the clock's future are dropped, and the reads append again."""
    _, url, clock = store
    svc = _service(url, clock, federate=federate)
    try:
        svc.scrape_once()
        _reads(svc, clock, 13)
        clock.now -= 3600.0
        with caplog.at_level(logging.WARNING, logger="advisor.service"):
            _reads(svc, clock, 3)
        targets = _targets(svc)
        stamps = {i: _stamps(svc, i) for i in INSTANCES}
    finally:
        svc.close()
    said = [r.getMessage() for r in caplog.records if "stepped back" in r.getMessage()]
    assert len(said) == 1 and "3,59" in said[0], [r.getMessage() for r in caplog.records]
    for inst in INSTANCES:
        assert stamps[inst] == sorted(set(stamps[inst])) and stamps[inst][-1] == clock.now, inst
        assert targets[inst]["up"] and targets[inst]["state"] == "fresh"


def test_the_clock_stepping_back_with_no_new_point_since_does_not_read_fresh(store: tuple[Store, str, Clock]) -> None:
    """The same step, and the store holds no engine sample since (``up`` only): before, every target read
    ``fresh`` for the hour on the points from the clock's future; now they hold no point, and say so."""
    s, url, clock = store
    svc = _service(url, clock, federate=False)
    try:
        svc.scrape_once()
        _reads(svc, clock, 13)
        clock.now -= 3600.0
        s.engine_series = False
        _reads(svc, clock, 3)
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert result["state"] == "unavailable", result["targets"]
    assert all(t["state"] != "fresh" for t in result["targets"])


# --- 5. the switch from ranges to /federate with a scrape landing late -------------------------------------------


def test_a_late_scrape_read_by_the_first_federate_read_is_kept(store: tuple[Store, str, Clock]) -> None:
    """The store scrapes every 2 s (at …0.5) and holds each scrape 9.4 s after it happened. The last range read
    (at T0) shows the scrape of T0 − 9.5 first at the evaluation time T0 − 5 (stamped with that evaluation time
    until range points took their scrape's time, breaker 15); the first ``/federate`` read (T0 + 5) finds the scrape
    of T0 − 5.5 — newer. Before, it was dropped as old. Each read shows its store's newest scrape, and the stamps
    increase."""
    s, url, clock = store
    s.interval, s.lag = 2.0, 9.4
    s.jobs = {i: (Job(offset=0.5),) for i in INSTANCES}
    svc = _service(url, clock, federate=True)
    try:
        svc.scrape_once()
        newest = [s.scrape(Job(offset=0.5), math.inf)]
        for _ in range(6):
            _reads(svc, clock, 1)
            newest.append(s.scrape(Job(offset=0.5), math.inf))
        history = svc.tracker.history("fleet", BAD)
    finally:
        svc.close()
    assert s.ranges == 1 and s.federations == 6
    shown = [_scrape_of(p.snapshot.generation_tokens_total or math.nan) for p in history]
    assert shown[-len(newest) :] == pytest.approx(newest, abs=1e-6), (shown, newest)
    assert [p.timestamp for p in history] == sorted({p.timestamp for p in history})


# --- 5b. a window whose older points came by query_range and newer ones by /federate -----------------------------


@pytest.mark.parametrize("offset", [0.0, 2.5, 4.9])
def test_a_window_read_by_ranges_then_federate_gives_the_engines_rate(
    store: tuple[Store, str, Clock], offset: float
) -> None:
    """Breaker 15: a range point was stamped with its evaluation time, a ``/federate`` point with its scrape's, so a
    window from one to the other was short by up to one store interval and every rate read high (600 tokens/s read
    as 628–890 by ``once``, +57 % over two targets; ``run`` ~2 % high for the first window). Each point is stamped
    with its scrape's time now: the rate is the engines' (3 × 120 tokens/s), exactly, whatever the scrape offset."""
    s, url, clock = store
    s.jobs = {i: (Job(offset=offset),) for i in INSTANCES}
    svc = _service(url, clock, federate=True)
    try:
        svc.scrape_once()  # the window by query_range
        _reads(svc, clock, 3)  # then /federate: the window holds both
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    assert s.ranges == 1 and s.federations == 3
    snap = result["snapshot"]
    assert snap["generation_tokens_per_second"] == pytest.approx(len(INSTANCES) * GEN_RATE, rel=1e-9), snap
    assert snap["prompt_tokens_per_second"] == pytest.approx(len(INSTANCES) * 400.0, rel=1e-9), snap


# --- 6. the advisor starting before the store's first scrape of the engines ----------------------------------


def test_engines_the_store_starts_holding_after_the_advisor_started_are_read_at_once_and_the_store_is_no_target(
    store: tuple[Store, str, Clock],
) -> None:
    """Daemon breaker (Prometheus mode): the advisor's first listing found no engine series (the store had not scraped
    them yet). That empty listing was kept for 20 cycles — the deployment unavailable for 20 intervals (5 min at the
    default 15 s) after its series came — and the store's own URL, shown as the target while nothing was discovered,
    stayed listed as an unavailable target for good (``CapacityAdvisorTargetNotFresh`` would page on it). Now the
    names are listed again the next cycle, and the placeholder goes once the instances are read."""
    s, url, clock = store
    s.names_listed = False
    svc = _service(url, clock, federate=False)
    try:
        svc.scrape_once()
        first = _targets(svc)
        assert list(first) == [url], first  # nothing discovered: the store itself, with why
        s.names_listed = True
        _reads(svc, clock, 2)
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    targets = {t["target"]: t for t in result["targets"]}
    assert url not in targets, targets
    assert sorted(targets) == sorted(INSTANCES), targets
    assert result["state"] != "unavailable", result
