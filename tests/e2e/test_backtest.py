"""Backtest against a real Prometheus: the backtest reports the recommendation the live advisor made, at the
same time within one evaluation interval (issue 8, acceptance 5), for a ``source: scrape`` deployment (read
back by ``instance``) and a ``source: prometheus`` one (its selector); and ``capacity-advisor backtest``
prints it."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.backtest import BacktestReport, run_backtest
from advisor.backtestcmd import add_backtest_parser
from advisor.config import Config, parse_config
from advisor.sources.prometheus import PrometheusSource
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.e2e.backtest_check import HeldClock, LiveRun, compare_openings, run_live
from tests.e2e.prometheus import hostport, prometheus_binary, start_prometheus, wait_for_series

pytestmark = pytest.mark.integration

INTERVAL = 1.0
RAMP = (
    Phase("idle", 4, 0.05, 2, 0, 1.0, 1000, 200, 0, 0.1, 0.02),
    Phase("saturated", 8, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 4.0, 0.04),
    Phase("recovered", 10_000, 0.3, 20, 0, 2.0, 1000, 200, 0, 0.1, 0.02),
)
"""Idle 4 s → KV pool saturated with a queue for 8 s → recovered (scenario seconds = real seconds)."""


def advisor_config(engine_url: str, prometheus_url: str) -> dict[str, Any]:
    """Two deployments over one engine: scraped directly, and read from Prometheus (job ``standin``)."""
    dep: dict[str, Any] = {
        "engine": "auto",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
    }
    return {
        "scrape_interval": f"{INTERVAL:g}s",
        "evaluation_window": "4s",
        "prometheus": {"url": prometheus_url},
        "deployments": [
            {"name": "direct", "targets": [engine_url], **dep},
            {"name": "via-prometheus", "source": "prometheus", "selector": 'job="standin"', **dep},
        ],
        "rules": {"kv_saturation": {"for": "2s"}, "resolve_for": "2s"},
    }


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Config, LiveRun, str, Path]]:
    """The ramp watched live by the advisor and by Prometheus; yields (config, live run, Prometheus URL,
    config file). Prometheus stays up for the tests of this module."""
    if prometheus_binary() is None:
        pytest.skip("the prometheus binary is absent: run scripts/install-system-deps (Debian's prometheus package)")
    clock = HeldClock()
    engine = StandInServer(StandInEngine(phases=RAMP, speed=1.0, num_gpu_blocks=1000, clock=clock))
    engine.start_background()
    tmp = tmp_path_factory.mktemp("backtest")
    try:
        with start_prometheus(tmp / "prom", {"standin": [hostport(engine.url())]}, scrape_interval="500ms") as prom:
            wait_for_series(prom, "vllm:num_requests_running")
            data = advisor_config(engine.url(), prom)
            cfg = parse_config(data)
            config_file = tmp / "advisor.yaml"
            config_file.write_text(yaml.safe_dump(data))
            time.sleep(5)  # Prometheus holds a whole window of the idle engine before the live run starts

            def start_ramp(k: int, due: float) -> None:
                # phase changes fall a quarter interval after a live evaluation, so both the live scrape and
                # Prometheus's 0.5 s scrape see them by the next one: the expected difference is 0, not a step
                if k == 0:
                    clock.release(time.monotonic() - (time.time() - due) + 0.25)

            live = run_live(cfg, cycles=18, on_cycle=start_ramp)
            time.sleep(1.5)  # the last scrapes ingested
            yield cfg, live, prom, config_file
    finally:
        engine.shutdown()
        engine.server_close()


def backtest_command(argv: list[str]) -> int:
    """``capacity-advisor backtest …`` (through its own sub-parser, however advisor/cli.py wires it)."""
    parser = argparse.ArgumentParser(prog="capacity-advisor")
    add_backtest_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    rc: int = args.func(args)
    return rc


def _backtest(cfg: Config, prom: str, live: LiveRun, **kw: Any) -> BacktestReport:
    with PrometheusSource(prom) as src:
        return run_backtest(cfg, src, live.start, live.end, step=INTERVAL, **kw)


def test_the_backtest_opens_kv_saturation_within_one_interval_of_the_live_advisor(
    replayed: tuple[Config, LiveRun, str, Path],
) -> None:
    cfg, live, prom, _ = replayed
    report = _backtest(cfg, prom, live)
    for name in ("direct", "via-prometheus"):
        assert live.opened("kv_saturation", name), (name, live.transitions)
        dep = report.deployment(name)
        assert dep is not None and dep.engine == "vllm", dep
        assert not dep.warnings and not dep.errors, (dep.warnings, dep.errors)
    openings = compare_openings(report, live, "kv_saturation")
    assert openings
    for o in openings:
        assert o.offset is not None, (o, report.as_dict())
        assert abs(o.offset) <= INTERVAL + live.slack(INTERVAL), (o, live.jitter(), live.slack(INTERVAL))
    # and it resolved, after the pool recovered, within one interval of the live resolve too
    for name in ("direct", "via-prometheus"):
        live_resolved = [
            t.recommendation
            for t in live.transitions
            if t.kind == "resolved" and t.recommendation.deployment == name and t.recommendation.rule == "kv_saturation"
        ]
        dep = report.deployment(name)
        assert dep is not None
        kv = [r for r in dep.recommendations if r.rule == "kv_saturation"]
        assert live_resolved and kv
        live_at = live_resolved[0].resolved_at
        assert live_at is not None and kv[0].resolved_at is not None
        assert abs(kv[0].resolved_at - live_at) <= INTERVAL + live.slack(INTERVAL)
    # an SLO breach while saturated is reported for the scraped deployment
    direct = report.deployment("direct")
    assert direct is not None and direct.breaches


def test_small_query_chunks_give_the_same_report(replayed: tuple[Config, LiveRun, str, Path]) -> None:
    cfg, live, prom, _ = replayed
    whole = _backtest(cfg, prom, live)
    chunked = _backtest(cfg, prom, live, chunk_points=4)
    assert chunked.as_dict() == whole.as_dict()


def test_the_backtest_command_prints_the_recommendation(
    replayed: tuple[Config, LiveRun, str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, live, prom, config_file = replayed
    argv = ["backtest", "--config", str(config_file), "--prometheus", prom]
    argv += ["--from", f"{live.start:.3f}", "--to", f"{live.end:.3f}", "--step", f"{INTERVAL:g}"]
    assert backtest_command([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    rules = {r["rule"] for d in out["deployments"] for r in d["recommendations"]}
    assert "kv_saturation" in rules
    assert backtest_command([*argv, "--deployment", "direct", "--selector", 'direct=job="standin"']) == 0
    text = capsys.readouterr().out
    assert "== direct (vllm)" in text and "kv_saturation" in text and "via-prometheus" not in text
    assert 'series: {job="standin"}' in text
