"""``capacity-advisor inspect URL``: what the advisor makes of one target, with no config.

Scrapes the target twice, ``interval`` seconds apart, detects the engine (or uses the one given), and
returns one deployment object shaped as ``once --json`` prints it (``capacity`` and
``recommendations`` empty, since no deployment is configured), plus ``missing`` (the quantities the
engine did not expose), ``detected_engine`` and ``version_hints``.
"""

from __future__ import annotations

import time
from typing import Any

import requests

from advisor import conventions as c
from advisor.domain import TimedSnapshot
from advisor.engines import ENGINES, detect_engine, get_adapter
from advisor.engines.base import EngineAdapter
from advisor.engines.versions import version_hints
from advisor.errors import ParseError
from advisor.evaluate import Quality, TargetView, snapshot_view, target_state
from advisor.redact import redact_url
from advisor.sources.exposition import parse_exposition
from advisor.sources.scrape import scrape
from advisor.telemetry import window_stats


def inspect_target(url: str, engine: str = "auto", interval: float = 2.0) -> dict[str, Any]:
    """Scrape ``url`` twice and describe it (see the module docstring). Never raises for target trouble:
    a failed scrape is reported in ``targets[0]`` with its reason, and the state is ``unavailable``."""
    adapter: EngineAdapter | None = None if engine == "auto" else get_adapter(engine)
    detected: str | None = None if engine == "auto" else engine
    hints: list[str] = []
    history: list[TimedSnapshot] = []
    reason: str | None = None
    message: str | None = None
    with requests.Session() as session:
        for i in range(2):
            if i:
                time.sleep(interval)
            res = scrape(url, session)
            if not res.ok or res.text is None:
                reason, message = res.error_reason, res.error_message
                continue
            try:
                full = parse_exposition(res.text)
                if adapter is None:
                    detected = detect_engine(full)
                    if detected is None or detected not in ENGINES:
                        what = "GPU telemetry (DCGM)" if detected == "dcgm" else "no known engine's metrics"
                        raise ParseError(f"could not detect the engine: {what}")
                    adapter = get_adapter(detected)
                hints = version_hints(detected, full)
                expo = {k: v for k, v in full.items() if adapter.wants(k)}
                if not expo:
                    raise ParseError(f"no {adapter.engine} metrics in the response")
                history.append(TimedSnapshot(url, time.time(), adapter.snapshot(expo)))
                reason, message = None, None
            except ParseError as exc:
                reason, message = c.REASON_PARSE_ERROR, str(exc)
    view = TargetView(url, reason is None and bool(history), reason, message, tuple(history))
    now = time.time()
    quality = Quality(interval, 3, interval)
    state, why = target_state(view, now, quality)
    stats = window_stats(history, now, interval * 2 + 10) if history else None
    latest = [history[-1].snapshot] if view.up else []
    snapshot = snapshot_view(latest, stats, 1, why)
    return {
        "name": redact_url(url),
        "engine": detected,
        "detected_engine": detected,
        "version_hints": hints,
        "state": state,
        "snapshot": snapshot,
        "capacity": None,
        "concurrency_ceiling": None,
        "targets": [
            {
                "target": redact_url(url),
                "up": view.up,
                "state": state,
                "state_reason": why,
                "error_reason": reason,
                "error": message,
            }
        ],
        "rules": [],
        "recommendations": [],
        "missing": snapshot["missing"],
    }
