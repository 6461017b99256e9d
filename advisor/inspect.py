"""``capacity-advisor inspect URL``: what the advisor makes of one target, with no config.

Scrapes the target twice, ``interval`` seconds apart, and reads each page through the daemon's own
:func:`advisor.observe.observe` (detects the engine, or uses the one given; reads ``served_model``), and
returns one deployment object shaped as ``once --json`` prints it (``capacity`` and
``recommendations`` empty, since no deployment is configured), plus ``missing`` (the quantities the
engine did not expose), ``detected_engine``, ``version_hints``, ``models`` (every served model on the page)
and ``hint`` (how to pick one with ``--served-model`` when there are several and none was picked).
"""

from __future__ import annotations

import re
import time
from typing import Any

import requests

from advisor.capacity.model_label import compare_model_label
from advisor.conventions import REASON_UNRECOGNIZED
from advisor.domain import TimedSnapshot
from advisor.engines.base import EngineAdapter
from advisor.engines.detect import detect_engine
from advisor.evaluate import Quality, TargetView, snapshot_view, target_state
from advisor.observe import observe, sample_names
from advisor.redact import redact_url, target_message
from advisor.sources.limits import DEFAULT_LABEL_LIMIT
from advisor.sources.scrape import scrape
from advisor.telemetry import window_stats


def inspect_target(
    url: str, engine: str = "auto", interval: float = 2.0, served_model: str | None = None
) -> dict[str, Any]:
    """Scrape ``url`` twice and describe it (see the module docstring). Never raises for target trouble:
    a failed scrape is reported in ``targets[0]`` with its reason, and the state is ``unavailable``.

    ``served_model`` picks one model of several (as the config's ``served_model``); one that matches none is
    ``served_model_not_found``, naming the models seen."""
    adapter: EngineAdapter | str = engine
    detected: str | None = None if engine == "auto" else engine
    hints: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    hint: str | None = None
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
            seen = observe(res.text, adapter, served_model, label_limit=DEFAULT_LABEL_LIMIT)
            if seen.adapter is not None:
                adapter, detected = seen.adapter, seen.engine
            hints, models = seen.version_hints or hints, seen.models or models
            if served_model is None:
                hint = seen.hint(redact_url(url))
            if seen.error_reason == REASON_UNRECOGNIZED:  # the engine the page itself shows, not the one pinned
                detected = detect_engine(sample_names(res.text))
            if seen.snapshot is None:
                reason, message = seen.error_reason, target_message(url, seen.error_message)
                continue
            history.append(TimedSnapshot(url, time.time(), seen.snapshot))
            reason, message = None, None
    view = TargetView(url, reason is None and bool(history), reason, message, tuple(history))
    now = time.time()
    quality = Quality(interval, 3, interval)
    state, why = target_state(view, now, quality)
    stats = window_stats(history, now, interval * 2 + 10) if history else None
    latest = [history[-1].snapshot] if view.up else []
    snapshot = snapshot_view(latest, stats, 1, why)
    return {
        "name": redact_url(url),
        "engine": detected if engine == "auto" else engine,
        "detected_engine": detected,
        "version_hints": list(hints),
        "models": list(models),
        "served_model": served_model,
        "hint": hint,
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


_SCHEMELESS = re.compile(r"^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(?::\d+)?(?:/[^@]*)?$")
"""``host:port/metrics``, ``localhost/metrics``, ``[::1]:8000/metrics``: a target written without a scheme and
without user-info (a scheme-less URL carrying ``user:password@`` stays refused, its password never echoed)."""


def with_scheme(url: str) -> str:
    """``url`` with ``http://`` in front when it has no scheme (``10.0.0.5:8000/metrics`` →
    ``http://10.0.0.5:8000/metrics``), as Prometheus's ``static_configs`` targets are ``host:port`` scraped over
    its default ``scheme: http`` (https://prometheus.io/docs/prometheus/latest/configuration/configuration/
    #scrape_config); anything else unchanged (:func:`advisor.config.check_http_url` then judges it)."""
    return url if "://" in url or not _SCHEMELESS.match(url) else f"http://{url}"


def model_label_note(configured: str, label: str | None, served_model: str | None) -> str | None:
    """One line when the engine's own model label is not the config's ``model``, naming both, else None.

    The capacity pass sizes the config's ``model``; an engine serving another one makes every prediction wrong,
    and before this line that was seen only as a large ``model_drift`` (+579 %). The decision is
    :func:`advisor.capacity.model_label.compare_model_label` (the one the rules read too): a label that names
    another preset is said to be that model; one that names none may be a ``--served-model-name`` alias, which
    ``served_model:`` declares.

    Example: ``model 'llama-3.1-8b' in the config, but the engine serves 'Qwen/Qwen2.5-0.5B'; the capacity pass
    sizes the config's model: set model: to what the engine serves``.
    """
    mismatch = compare_model_label(configured, label, served_model)
    return None if mismatch is None else mismatch.note()
