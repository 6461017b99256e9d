"""Issue 13, acceptance 5: ``backtest`` and the daemon give the same recommendations for the same history.

The daemon (:class:`advisor.service.Service`) runs against stand-in vLLM engines on loopback through a ramp
(idle → KV pool saturated → recovered), on a fake clock shared with the engines, one cycle per scrape
interval. Every snapshot it scraped is recorded with its timestamp as it enters the daemon's tracker. Those
histories are then replayed through the backtest's :class:`~advisor.backtest.Replayer` (what ``capacity-advisor
backtest`` runs, wired by :func:`advisor.backtest.replay_config`) at the daemon's evaluation times, and the two
must agree on every recommendation: id, rule, dial, current and suggested values, and when it opened and
resolved.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from advisor.backtest import TargetHistory, replay_config
from advisor.config import Config, parse_config
from advisor.domain import TimedSnapshot
from advisor.exporter import make_registry
from advisor.rules.lifecycle import Transition
from advisor.service import Service, deployment_context
from advisor.standin import Phase, StandInEngine, StandInServer

pytestmark = pytest.mark.integration

T0 = 1_750_000_000.0
INTERVAL = 1.0  # scrape deadlines are 0.8 × this: 0.4 s timed out once under load (two busy loops, 2026-12-04)
CYCLES = 60  # 60 s of scenario time

RAMP = (
    Phase("idle", 6, 0.05, 2, 0, 1.0, 1000, 200, 0, 0.1, 0.02),
    Phase("saturated", 24, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04),
    Phase("recovered", 100_000, 0.30, 10, 0, 2.0, 1000, 200, 0, 0.2, 0.03),
)


class FakeClock:
    """Unix seconds that move only when the test says so (the daemon and the engines read the same one)."""

    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def engines(clock: FakeClock) -> Iterator[list[StandInServer]]:
    servers = [
        StandInServer(StandInEngine(phases=RAMP, speed=1.0, num_gpu_blocks=1000, clock=clock)),
        StandInServer(StandInEngine(phases=RAMP[1:], speed=1.0, num_gpu_blocks=1000, clock=clock)),
    ]
    for s in servers:
        s.start_background()
    yield servers
    for s in servers:
        s.shutdown()
        s.server_close()


def _config(engines: list[StandInServer]) -> Config:
    def dep(name: str, urls: list[str]) -> dict[str, Any]:
        return {
            "name": name,
            "engine": "vllm",
            "targets": urls,
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "H100-SXM",
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
        }

    return parse_config(
        {
            "scrape_interval": f"{INTERVAL}s",
            "evaluation_window": "4s",
            "deployments": [
                dep("ramp", [engines[0].url()]),
                dep("pair", [engines[1].url(), engines[0].url()]),
            ],
            "rules": {"kv_saturation": {"for": "1s"}, "cooldown": "2s", "resolve_for": "1s"},
        }
    )


def _key(r: Any) -> tuple[Any, ...]:
    return (r.deployment, r.id, r.rule, r.dial, repr(r.current), repr(r.suggested), r.opened_at)


def test_backtest_replaying_a_recorded_daemon_run_gives_the_same_recommendations(
    clock: FakeClock, engines: list[StandInServer]
) -> None:
    cfg = _config(engines)
    _, collector, metrics = make_registry()
    live: list[Transition] = []
    svc = Service(cfg, collector, metrics, clock=clock, on_transition=live.append)
    recorded: dict[tuple[str, str], list[TimedSnapshot]] = {}
    observe = svc.tracker.observe

    def recording(deployment: str, url: str, point: TimedSnapshot) -> None:  # a tap: what the daemon saw
        recorded.setdefault((deployment, url), []).append(point)
        observe(deployment, url, point)

    svc.tracker.observe = recording  # type: ignore[method-assign]
    times: list[float] = []
    try:
        for k in range(CYCLES):
            clock.t = T0 + k * INTERVAL
            result = svc.run_once()
            times.append(result.timestamp)
            assert all(d.state != "unavailable" for d in result.deployments), [d.state for d in result.deployments]
    finally:
        svc.close(5)

    opened = {t.recommendation.id: t.recommendation for t in live if t.kind == "opened"}
    resolved = {t.recommendation.id: t.recommendation for t in live if t.kind == "resolved"}
    assert opened, "the ramp opened nothing: the comparison would be empty"
    assert resolved, "nothing resolved after the recovery: the comparison would miss resolve times"
    assert {r.deployment for r in opened.values()} == {"ramp", "pair"}

    # the backtest's path: the same config's rules, window and data quality; the recorded histories
    contexts = [deployment_context(d) for d in cfg.deployments]
    rp = replay_config(cfg, contexts, INTERVAL, targets={d.name: list(d.targets) for d in cfg.deployments})
    for (deployment, url), points in recorded.items():
        rp.feed(deployment, TargetHistory(url, points))
    replayed: list[Transition] = []
    for t in times:
        replayed += rp.evaluate(t)
    report = rp.report()

    assert [(t.kind, _key(t.recommendation)) for t in replayed] == [
        (t.kind, _key(t.recommendation)) for t in live if t.kind in ("opened", "resolved")
    ]
    got = {r.id: r for r in report.recommendations()}
    assert set(got) == set(opened)
    for rid, r in opened.items():
        b = got[rid]
        assert (b.deployment, b.rule, b.dial, b.current, b.suggested, b.opened_at) == (
            r.deployment,
            r.rule,
            r.dial,
            r.current,
            r.suggested,
            r.opened_at,
        )
        assert b.resolved_at == (resolved[rid].resolved_at if rid in resolved else None)
