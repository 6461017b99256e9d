"""advisor.backtest on synthetic histories: recommendations open and resolve when the live loop's rules
would have opened and resolved them, SLO breaches are the intervals below target, and the command line
parses what it documents."""

from __future__ import annotations

import argparse
import itertools
import json
import socket
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.assembly import deployment_context
from advisor.backtest import (
    BacktestReport,
    Replayer,
    TargetHistory,
    backtest,
    evaluation_times,
    format_report,
    instance_of,
    replay_config,
    run_backtest,
    scrape_selector,
)
from advisor.backtestcmd import add_backtest_parser, parse_time
from advisor.config import Config, parse_config
from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.sources.prometheus import PrometheusSource
from tests.inprocess import run_cli

T0 = 1_700_000_000.0
URL = "http://10.0.0.5:8000/metrics"
BOUNDS = (0.05, 0.1, 0.5, 1.0, 2.5, 5.0, float("inf"))


def _config(**rules: Any) -> Config:
    return parse_config(
        {
            "scrape_interval": "5s",
            "evaluation_window": "30s",
            "deployments": [
                {
                    "name": "chat-8b",
                    "engine": "vllm",
                    "targets": [URL],
                    "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "gpu": "H100-SXM",
                    "max_model_len": 8192,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.95},
                }
            ],
            "rules": {"kv_saturation": {"for": "30s"}, "cooldown": "1s", **rules},
        }
    )


def _hist(counts: dict[float, float], total_sum: float) -> Histogram:
    cumulative = 0.0
    buckets = []
    for b in BOUNDS:
        cumulative += counts.get(b, 0.0)
        buckets.append((b, cumulative))
    return Histogram(tuple(buckets), cumulative, total_sum)


def _phase(t: float) -> str:
    """idle before T0+60, saturated until T0+180, recovered after."""
    if t < T0 + 60:
        return "idle"
    return "saturated" if t < T0 + 180 else "recovered"


def _history(start: float, end: float, step: float = 5.0, target: str = URL) -> list[TimedSnapshot]:
    """A vLLM-like target: 10 requests finish per step; TTFT 0.2 s except 4 s while saturated."""
    out = []
    ttft_counts: dict[float, float] = {}
    tpot_counts: dict[float, float] = {}
    ttft_sum = tpot_sum = 0.0
    gen = prompt = 0.0
    t = start
    while t <= end + 1e-9:
        ph = _phase(t)
        slow = ph == "saturated"
        ttft_bucket = 5.0 if slow else 0.5
        ttft_counts[ttft_bucket] = ttft_counts.get(ttft_bucket, 0.0) + 10
        ttft_sum += 10 * (4.0 if slow else 0.2)
        tpot_counts[0.05] = tpot_counts.get(0.05, 0.0) + 10
        tpot_sum += 10 * 0.03
        gen += 2000
        prompt += 10_000
        snap = EngineSnapshot(
            engine="vllm",
            model="m",
            kv_cache_usage_ratio={"idle": 0.3, "saturated": 0.99, "recovered": 0.4}[ph],
            requests_running={"idle": 5.0, "saturated": 50.0, "recovered": 20.0}[ph],
            requests_waiting=20.0 if slow else 0.0,
            preemptions_total=0.0,
            prompt_tokens_total=prompt,
            generation_tokens_total=gen,
            ttft=_hist(ttft_counts, ttft_sum),
            ttft_source="vllm:time_to_first_token_seconds",
            tpot=_hist(tpot_counts, tpot_sum),
            tpot_source="vllm:time_per_output_token_seconds",
        )
        out.append(TimedSnapshot(target, t, snap))
        t += step
    return out


def _run(cfg: Config, histories: list[TargetHistory], end: float = T0 + 300) -> BacktestReport:
    ctx = deployment_context(cfg.deployments[0])
    return backtest(cfg, [ctx], {"chat-8b": histories}, T0, end)


def test_kv_saturation_opens_after_its_for_duration_and_resolves_when_usage_falls() -> None:
    cfg = _config()
    report = _run(cfg, [TargetHistory(URL, _history(T0 - 40, T0 + 300))])
    dep = report.deployment("chat-8b")
    assert dep is not None
    kv = [r for r in dep.recommendations if r.rule == "kv_saturation"]
    assert kv, dep.recommendations
    # saturation is first seen at T0+60; it must hold for 30 s; evaluations every 5 s
    assert {r.opened_at for r in kv} == {T0 + 90}
    # one incident per problem (issue 13): kv_saturation clears at T0+180, but goodput_below_target (the same
    # saturation problem) holds until the window no longer holds the slow requests — the breach's end, T0+205 —
    # and the incident resolves once that clear has held rules.resolve_for (default 30 s): T0+235
    assert {r.resolved_at for r in kv} == {T0 + 235}
    assert [b.end for b in dep.breaches] == [T0 + 205]
    first = kv[0]
    assert first.flag and first.dial and first.suggested is not None
    assert "KV usage 99.0%" in first.opened_reason
    assert dep.states == {"fresh": 61}
    assert dep.evaluations == len(evaluation_times(T0, T0 + 300, 5))


def test_slo_breach_spans_the_windows_that_hold_slow_requests() -> None:
    report = _run(_config(), [TargetHistory(URL, _history(T0 - 40, T0 + 300))])
    dep = report.deployment("chat-8b")
    assert dep is not None
    assert len(dep.breaches) == 1
    b = dep.breaches[0]
    # the first window holding slow requests ends at T0+60; the last one starts before T0+180
    assert b.start == T0 + 60
    assert b.end is not None and T0 + 200 <= b.end <= T0 + 215
    assert b.worst_ratio == pytest.approx(0.0)
    assert b.target_ratio == 0.95
    assert b.requests == pytest.approx(60)


def test_a_breach_still_running_at_the_end_has_no_end_and_an_open_recommendation_no_resolve() -> None:
    report = _run(_config(), [TargetHistory(URL, _history(T0 - 40, T0 + 150))], end=T0 + 150)
    dep = report.deployment("chat-8b")
    assert dep is not None
    assert [b.end for b in dep.breaches] == [None]
    kv = [r for r in dep.recommendations if r.rule == "kv_saturation"]
    assert kv and all(r.resolved_at is None for r in kv)
    d = report.as_dict()
    json.dumps(d)  # JSON-ready
    assert d["deployments"][0]["slo"]["breaches"][0]["end"] is None
    assert d["deployments"][0]["recommendations"][0]["resolved_at"] is None


def test_no_data_means_unavailable_and_nothing_opens() -> None:
    cfg = _config()
    ctx = deployment_context(cfg.deployments[0])
    rp = replay_config(cfg, [ctx], targets={"chat-8b": [URL]})
    for t in evaluation_times(T0, T0 + 60, 5):
        assert rp.evaluate(t) == []
    dep = rp.report().deployment("chat-8b")
    assert dep is not None
    assert dep.states == {"unavailable": 13}
    assert not dep.recommendations and not dep.breaches


def test_a_target_prometheus_reports_down_is_unavailable_and_holds_the_for_duration_back() -> None:
    cfg = _config()
    points = _history(T0 - 40, T0 + 300)
    # Prometheus's up series: down from T0+70 to T0+100 (no engine samples then either)
    up = [(p.timestamp, 0.0 if T0 + 70 <= p.timestamp < T0 + 100 else 1.0) for p in points]
    kept = [p for p in points if not T0 + 70 <= p.timestamp < T0 + 100]
    report = _run(cfg, [TargetHistory(URL, kept, up)])
    dep = report.deployment("chat-8b")
    assert dep is not None
    assert dep.states["unavailable"] == 6
    # why each evaluation could not judge, as the daemon's snapshot says it (breaker 26: "unavailable 121" alone)
    assert sum(dep.state_reasons.values()) == 6 and all(k.startswith("unavailable: ") for k in dep.state_reasons)
    assert list(dep.state_reasons) == ["unavailable: no target answered (http_status)"], dep.state_reasons
    assert "6 evaluation(s) unavailable: " in format_report(report)
    kv = [r for r in dep.recommendations if r.rule == "kv_saturation"]
    # pending restarts at T0+100 when data returns: opens 30 s later
    assert {r.opened_at for r in kv} == {T0 + 130}


def test_feeding_in_chunks_gives_the_same_report_as_feeding_at_once() -> None:
    cfg = _config()
    ctx = deployment_context(cfg.deployments[0])
    points = _history(T0 - 40, T0 + 300)
    whole = _run(cfg, [TargetHistory(URL, points)])
    rp = replay_config(cfg, [ctx], targets={"chat-8b": [URL]})
    times = evaluation_times(T0, T0 + 300, 5)
    for i in range(0, len(points), 7):
        chunk = points[max(0, i - 2) : i + 7]  # overlapping chunks are harmless
        rp.feed("chat-8b", TargetHistory(URL, chunk))
        while times and times[0] <= chunk[-1].timestamp:
            rp.evaluate(times.pop(0))
    chunked = rp.report(T0, T0 + 300, 5)
    assert chunked.as_dict() == whole.as_dict()


def test_evaluation_times_must_increase_and_ranges_are_checked() -> None:
    cfg = _config()
    rp = replay_config(cfg, [deployment_context(cfg.deployments[0])])
    rp.evaluate(T0)
    with pytest.raises(ValueError, match="increase"):
        rp.evaluate(T0)
    with pytest.raises(ValueError, match="before start"):
        evaluation_times(T0, T0 - 1, 5)
    with pytest.raises(ValueError, match="larger step"):
        evaluation_times(T0, T0 + 10_000_000, 1)
    assert evaluation_times(T0, T0 + 10, 5) == [T0, T0 + 5, T0 + 10]
    # any start: the times sit on a 1/8 s grid, so for-durations see whole steps, exactly
    times = evaluation_times(1_796_038_786.8230913, 1_796_038_800.0, 1.0)
    assert times[0] == 1_796_038_786.875
    assert all(b - a == 1.0 for a, b in itertools.pairwise(times))
    assert times[7] - times[5] == 2.0


@pytest.mark.parametrize("at", [1_796_601_700.1, 1_796_601_700.0625, 1_796_601_700.0])
def test_a_range_of_one_instant_is_one_evaluation(at: float) -> None:
    """Breaker 15: ``--from`` and ``--to`` the same instant 0.1 s past a grid point rounded the start up past the end:
    no evaluation, and ``backtest`` died on ``times[0]`` (IndexError, exit 1)."""
    assert evaluation_times(at, at, 15) == [1_796_601_700.0]


def test_a_step_below_the_grid_is_refused_by_the_flag() -> None:
    """Breaker 15: ``--step 1e-9`` ran every 0.125 s without a word."""
    r = run_cli("backtest", "--config", "x.yaml", "--from", "now-2m", "--to", "now", "--step", "1e-9")
    assert r.returncode == 2 and "--step" in r.stderr and "0.125" in r.stderr, r.stderr


def test_replicas_of_a_prometheus_deployment_are_the_instances_with_data() -> None:
    cfg = _config()
    ctx = deployment_context(cfg.deployments[0])
    rp = Replayer(
        [ctx],
        [],
        scrape_interval=5,
        evaluation_window=30,
        quality=replay_config(cfg, [ctx]).quality,
        dynamic_targets=["chat-8b"],
    )
    rp.feed("chat-8b", TargetHistory("a:1", _history(T0 - 40, T0 + 20, target="a:1")))
    rp.feed("chat-8b", TargetHistory("b:1", _history(T0 - 40, T0 - 30, target="b:1")))
    rp.evaluate(T0 + 20)
    dep = rp._deps["chat-8b"]
    assert dep.ctx.replicas == 1  # b:1 has had no data for longer than the window


def test_format_report_reads_as_a_timeline() -> None:
    text = format_report(_run(_config(), [TargetHistory(URL, _history(T0 - 40, T0 + 300))]))
    assert "== chat-8b (vllm)" in text
    assert "OPEN" in text and "kv_saturation" in text and "flag: " in text and "resolved 2023-11-14T22:17:15Z" in text
    assert "BREACH" in text and "worst 0.0%" in text


def test_instances_and_the_derived_selector() -> None:
    assert instance_of("http://10.0.0.5:8000/metrics") == ("10.0.0.5:8000", r"10\.0\.0\.5:8000")
    assert instance_of("https://engine.example/metrics") == ("engine.example", r"engine\.example(:443)?")
    assert instance_of("http://[::1]:9000/metrics")[0] == "[::1]:9000"
    sel = scrape_selector([URL, "http://10.0.0.6:8000/metrics"])
    assert sel == 'instance=~"10\\\\.0\\\\.0\\\\.5:8000|10\\\\.0\\\\.0\\\\.6:8000"'


def test_parse_time_forms() -> None:
    now = 1_800_000_000.0
    assert parse_time("now", now) == now
    assert parse_time("now-1h", now) == now - 3600
    assert parse_time("-5m", now) == now - 300
    assert parse_time("1700000000.5", now) == 1_700_000_000.5
    assert parse_time("2023-11-14T22:13:20Z", now) == T0
    assert parse_time("2023-11-14T22:13:20", now) == T0  # no zone: UTC
    assert parse_time("2023-11-15T00:13:20+02:00", now) == T0
    for bad in ("yesterday", "nan", "now+1h"):
        with pytest.raises(ValueError):
            parse_time(bad, now)


def test_the_backtest_parser() -> None:
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="command", required=True)
    add_backtest_parser(sub)
    args = p.parse_args(
        [
            "backtest",
            "--config",
            "c.yaml",
            "--prometheus",
            "http://127.0.0.1:9090",
            "--from",
            "2023-11-14T22:13:20Z",
            "--to",
            "1700000300",
            "--step",
            "15",
            "--selector",
            'chat-8b=job="vllm"',
            "--json",
        ]
    )
    assert (args.from_, args.to, args.step, args.json) == (T0, T0 + 300, 15.0, True)
    assert args.selector == [("chat-8b", 'job="vllm"')]
    for bad in (["--selector", "nope"], ["--selector", 'x=job=vllm"'], ["--from", "soon"]):
        argv = ["backtest", "--config", "c", "--from", "now-1h", "--to", "now", *bad]
        with pytest.raises(SystemExit):
            p.parse_args(argv)


def test_an_unreachable_prometheus_is_an_error_in_the_report_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{s.getsockname()[1]}"
    s.close()  # nothing listens there now
    cfg = _config()
    with PrometheusSource(url, connect_timeout=1, read_timeout=1) as src:
        report = run_backtest(cfg, src, T0, T0 + 60)
    assert not report.ok
    dep = report.deployment("chat-8b")
    assert dep is not None and dep.errors and "connection_refused" in dep.errors[0]
    assert dep.states == {"unavailable": 13} and not dep.recommendations

    config = tmp_path / "advisor.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "scrape_interval": "5s",
                "evaluation_window": "30s",
                "deployments": [
                    {
                        "name": "chat-8b",
                        "targets": [URL],
                        "model": "meta-llama/Llama-3.1-8B-Instruct",
                        "gpu": "H100-SXM",
                        "max_model_len": 8192,
                        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                    }
                ],
            }
        )
    )
    p = argparse.ArgumentParser()
    add_backtest_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["backtest", "--config", str(config), "--prometheus", url, "--from", "now-1m", "--to", "now"])
    assert args.func(args) == 1
    out = capsys.readouterr()
    # the store is named (a walkthrough: "listing series names failed: connection_refused", no URL)
    assert f"ERROR: listing series names at {url} failed: connection_refused" in out.out
    assert "could not be read" in out.err
    # unknown is not "nothing": no evaluation had data, so the report claims neither no advice nor no breach
    # (walkthrough: it printed "would have recommended nothing" and "no breach in 0 evaluations")
    assert "would have recommended nothing" not in out.out and "no breach in 0" not in out.out, out.out
    assert "no recommendation could be judged: no evaluation had fresh data; 1 error(s) above" in out.out, out.out
    assert "SLO: unknown (no evaluation had a known goodput ratio)" in out.out, out.out
    # without --prometheus and without a prometheus section: invalid input
    args = p.parse_args(["backtest", "--config", str(config), "--from", "now-1m", "--to", "now"])
    assert args.func(args) == 2


def test_a_selector_for_a_deployment_left_out_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 19 (flags that do not apply are refused, in every command): ``--selector other=…`` with
    ``--deployment chat-8b`` was accepted and never read. Refused before any query (nothing listens on the URL)."""
    import yaml

    config = tmp_path / "advisor.yaml"
    deployment = {
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    config.write_text(
        yaml.safe_dump({"deployments": [{"name": "chat-8b", **deployment}, {"name": "other", **deployment}]})
    )
    p = argparse.ArgumentParser()
    add_backtest_parser(p.add_subparsers(dest="command", required=True))
    argv = ["backtest", "--config", str(config), "--prometheus", "http://127.0.0.1:9", "--from", "now-1m"]
    args = p.parse_args([*argv, "--to", "now", "--deployment", "chat-8b", "--selector", 'other=job="x"'])
    assert args.func(args) == 2
    err = capsys.readouterr().err
    assert "--selector other=" in err and "--deployment chat-8b leaves it out" in err
