"""Issue 18, the autoscaler signals through a running daemon's ``/metrics`` (and its status page), against stand-in
vLLM engines on loopback: ``advisor_desired_replicas`` is the current count while nothing is advised, the advised
count while the KV pool is saturated, absent once the data is stale; ``advisor_capacity_headroom_ratio`` and
``advisor_time_to_kv_exhaustion_seconds`` as worked out by hand from the stand-in's phase."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from advisor import conventions as c
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.http.conftest import SATURATED, Daemon, config, start_daemon, stop_daemon

pytestmark = pytest.mark.integration

IDLE = (Phase("idle", 1e9, 0.2, 3, 0, 1.0, 500, 100, 0, 0.1, 0.02),)
"""Light load: KV 20 % flat, 3 running, nothing waiting, 1 request/s, TTFT 0.1 s and TPOT 0.02 s (well inside the
SLO of :func:`tests.http.conftest.config`)."""

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _samples(d: Daemon) -> Samples:
    text = requests.get(d.url + "/metrics", timeout=30).text
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in text_string_to_metric_families(text)
        for s in fam.samples
    }


def _wait(d: Daemon, ok: Callable[[Samples], bool], what: str, timeout: float = 30.0) -> Samples:
    deadline = time.monotonic() + timeout
    while True:
        got = _samples(d)
        if ok(got):
            return got
        if time.monotonic() > deadline:
            shown = {k: v for k, v in got.items() if k[0].startswith(("advisor_desired", "advisor_capacity_head"))}
            raise AssertionError(f"{what}: not seen within {timeout:.0f} s; signals: {shown}")
        time.sleep(0.2)


def _dep(name: str = "chat-8b") -> tuple[tuple[str, str], ...]:
    return ((c.LABEL_DEPLOYMENT, name),)


def _fresh(name: str = "chat-8b") -> Callable[[Samples], bool]:
    return lambda s: s.get((c.DEPLOYMENT_STATE, (("deployment", name), ("state", c.STATE_FRESH)))) == 1.0


def _standin(phases: tuple[Phase, ...]) -> StandInServer:
    srv = StandInServer(StandInEngine(phases=phases, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    return srv


@pytest.fixture
def idle_pair() -> Iterator[tuple[StandInServer, StandInServer]]:
    a, b = _standin(IDLE), _standin(IDLE)
    yield a, b
    for s in (a, b):
        s.shutdown()
        s.server_close()


def test_fresh_gives_the_current_count_then_stale_gives_nothing(
    idle_pair: tuple[StandInServer, StandInServer],
) -> None:
    """Two replicas at light load: nothing advised → desired 2 (the two targets), KV headroom 1 − 0.2 = 0.8, no
    exhaustion time (usage flat). Both engines stop → the data goes stale/unavailable → every signal leaves."""
    a, b = idle_pair
    data = config(a.url())
    data["deployments"][0]["targets"] = [a.url(), b.url()]
    d = start_daemon(data)
    try:
        s = _wait(d, lambda s: _fresh()(s) and (c.DESIRED_REPLICAS, _dep()) in s, "desired replicas while fresh")
        assert s[(c.DESIRED_REPLICAS, _dep())] == 2.0
        kv = (c.CAPACITY_HEADROOM_RATIO, (("deployment", "chat-8b"), ("kind", c.HEADROOM_KV_CEILING)))
        assert s[kv] == pytest.approx(0.8, abs=1e-9)
        assert (c.TIME_TO_KV_EXHAUSTION_SECONDS, _dep()) not in s
        page = requests.get(d.url + "/", timeout=30).text
        deadline = time.monotonic() + 30  # "not growing" once three KV readings give a trend ("unknown" before)
        while "not growing" not in page and time.monotonic() < deadline:
            time.sleep(0.5)
            page = requests.get(d.url + "/", timeout=30).text
        assert "<th>desired replicas</th><th>current replicas</th><th>headroom: KV</th>" in page
        # desired 2, current 2, KV headroom 80 %, throughput headroom (not asserted), KV flat: not growing, with
        # the usage it stays at (a pool flat at 98 % is "not growing" too: a fresh user read that as room)
        assert "<td class='n'>2</td><td class='n'>2</td><td class='n'>80%</td>" in page
        assert "<td class='n'>not growing (20% used)</td>" in page
        assert "<p class='why'>desired replicas 2: the current count, no open incident advises replicas</p>" in page
        for srv in (a, b):
            srv.shutdown()
            srv.server_close()
        s = _wait(d, lambda s: not _fresh()(s), "the data going stale", timeout=60)
        assert (c.DESIRED_REPLICAS, _dep()) not in s
        assert not [k for k in s if k[0] in (c.CAPACITY_HEADROOM_RATIO, c.TIME_TO_KV_EXHAUSTION_SECONDS)]
    finally:
        stop_daemon(d)


def test_saturated_gives_the_advised_count() -> None:
    """KV 99 % with 40 waiting: kv_saturation opens an incident whose replicas value (its turn or an alternative,
    ``advisor_recommended_value{dial="replicas"}``) is above the one replica running; desired replicas is that
    count, not the current 1."""
    srv = _standin(SATURATED)
    data = config(srv.url())
    data["rules"] = {"kv_saturation": {"for": "0.5s"}, "replicas": {"min_history": "1s"}}
    d = start_daemon(data)
    rec_key = (c.RECOMMENDED_VALUE, (("deployment", "chat-8b"), ("dial", c.DIAL_REPLICAS)))
    try:
        s = _wait(d, lambda s: rec_key in s and _fresh()(s), "a replicas advice", timeout=60)
        advised = s[rec_key]
        assert advised > 1.0
        assert s[(c.DESIRED_REPLICAS, _dep())] == advised
    finally:
        stop_daemon(d)
        srv.shutdown()
        srv.server_close()
