"""``capacity-advisor backtest``: replay the rules over a Prometheus's history (:mod:`advisor.backtest`).

::

    capacity-advisor backtest --prometheus URL --from T1 --to T2 --config FILE [--step S]
                              [--selector NAME=SELECTOR ...] [--deployment NAME ...] [--json]

Exit codes: 0 the report; 1 some history could not be read (the report is printed, with the errors);
2 invalid input (config, flags, times).

Times: RFC 3339 (``2026-05-01T12:00:00Z``; no zone means UTC), unix seconds, ``now``, or ``now-1h`` /
``-1h`` (Prometheus durations). ``--prometheus`` defaults to the config's ``prometheus.url``; the config's
credentials and headers are used either way.
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
import time
from pathlib import Path

from advisor.argtypes import bounded_float, http_url_arg
from advisor.conventions import BACKTEST_GRID, BACKTEST_MIN_STEP_SECONDS
from advisor.errors import ConfigError

_RELATIVE = re.compile(r"^(?:now)?\s*-\s*(?P<d>[0-9][0-9a-z.]*)$")


def parse_time(text: str, now: float | None = None) -> float:
    """Unix seconds from RFC 3339, unix seconds, ``now`` or ``now-<duration>`` (``-<duration>`` too).

    Raises:
        ValueError: none of those forms.
    """
    from advisor.config import parse_duration

    now = time.time() if now is None else now
    s = text.strip()
    if s == "now":
        return now
    m = _RELATIVE.match(s)
    if m:
        return now - parse_duration(m.group("d"))
    try:
        v = float(s)
    except ValueError:
        pass
    else:
        if v != v or v in (float("inf"), float("-inf")):
            raise ValueError(f"not a finite time: {text!r}")
        return v
    try:
        dt = datetime.datetime.fromisoformat(s.replace(" ", "T"))
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (use RFC 3339 such as 2026-05-01T12:00:00Z, unix seconds, now or now-1h)"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=datetime.UTC)
    return dt.timestamp()


def _time_arg(text: str) -> float:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _selector_arg(text: str) -> tuple[str, str]:
    name, sep, selector = text.partition("=")
    if not sep or not name or not selector:
        raise argparse.ArgumentTypeError(f"must be NAME=SELECTOR, e.g. chat-8b='job=\"vllm\"', got {text!r}")
    from advisor.sources.promql import validate_selector

    try:
        return name, validate_selector(selector)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid selector for {name}: {exc}") from None


def cmd_backtest(args: argparse.Namespace) -> int:
    """Fetch the history, replay, print the report (exit 2 on invalid input)."""
    from advisor.backtest import format_report, run_backtest
    from advisor.config import PrometheusConfig, load_config
    from advisor.service import prometheus_source

    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    url = args.prometheus or (cfg.prometheus.url if cfg.prometheus is not None else None)
    if url is None:
        print(
            "capacity-advisor: backtest needs --prometheus URL (the config has no prometheus section)", file=sys.stderr
        )
        return 2
    prom = cfg.prometheus.model_copy(update={"url": url}) if cfg.prometheus else PrometheusConfig(url=url)
    cfg = cfg.model_copy(update={"prometheus": prom})
    if args.to < args.from_:
        print("capacity-advisor: --to is before --from", file=sys.stderr)
        return 2
    unread = [n for n, _ in (args.selector or []) if args.deployment and n not in args.deployment]
    if unread:  # refused, not ignored (issue 19)
        print(
            f"capacity-advisor: --selector {', '.join(unread)}=… does not apply: --deployment "
            f"{', '.join(args.deployment)} leaves {'it' if len(unread) == 1 else 'them'} out of the backtest",
            file=sys.stderr,
        )
        return 2
    base_dir = Path(args.config).resolve().parent
    with prometheus_source(cfg, base_dir) as source:
        report = run_backtest(
            cfg,
            source,
            args.from_,
            args.to,
            step=args.step,
            selectors=dict(args.selector or []),
            base_dir=base_dir,
            deployments=args.deployment or None,
        )
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        print(format_report(report))
    if not report.ok:
        print("capacity-advisor: some history could not be read (see the errors above)", file=sys.stderr)
        return 1
    return 0


def add_backtest_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """Add the ``backtest`` sub-command to ``capacity-advisor``'s sub-parsers."""
    p = sub.add_parser(
        "backtest",
        help="replay the rules over a Prometheus's history: what would have been recommended, and when",
        description=(
            "Replay the config's rules over [--from, --to] using range queries against a Prometheus-compatible "
            "API, and print each recommendation the advisor would have opened and resolved, and each interval "
            "in which a deployment's goodput ratio over the evaluation window was below its SLO target. "
            'source: scrape deployments are read by instance="host:port" of their target URLs (override with '
            "--selector); source: prometheus deployments by their selector."
        ),
    )
    p.add_argument("--config", required=True, help="YAML config file (deployments, rules, SLOs)")
    p.add_argument(
        "--prometheus", type=http_url_arg, help="base URL of the Prometheus API (default: the config's prometheus.url)"
    )
    p.add_argument(
        "--from",
        dest="from_",
        metavar="T1",
        required=True,
        type=_time_arg,
        help="start: RFC 3339, unix seconds, or now-1h",
    )
    p.add_argument(
        "--to", metavar="T2", required=True, type=_time_arg, help="end: RFC 3339, unix seconds, now, or now-5m"
    )
    p.add_argument(
        "--step",
        type=bounded_float(BACKTEST_MIN_STEP_SECONDS, 86400.0, "seconds between evaluations"),
        default=None,
        help=f"seconds between evaluations, at least {BACKTEST_MIN_STEP_SECONDS:g}, rounded to 1/{BACKTEST_GRID} s "
        "(default: the config's scrape_interval)",
    )
    p.add_argument(
        "--selector",
        action="append",
        type=_selector_arg,
        metavar="NAME=SELECTOR",
        help="PromQL label matchers for one deployment, overriding the configured or derived one (repeatable)",
    )
    p.add_argument("--deployment", action="append", metavar="NAME", help="only this deployment (repeatable)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=cmd_backtest)
    return p
