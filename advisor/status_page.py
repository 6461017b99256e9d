"""The status page at ``/``: what an operator needs without Grafana, as server-rendered HTML.

No script and no build step: one HTML document with one ``<style>`` element whose SHA-256 goes in the
``Content-Security-Policy`` header (:data:`CONTENT_SECURITY_POLICY`), so the browser runs nothing and
loads nothing else. It refreshes itself every scrape interval (5–30 s) with ``<meta http-equiv="refresh">``.

Shown: each deployment's state and why, concurrency ceiling vs running, KV usage, waiting, goodput;
every open recommendation with its explanation, dial turn, flag, predicted effect and evidence numbers,
and whether it is snoozed or acknowledged; then the recently resolved ones. URLs are shown without
credentials, query or fragment.
"""

from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from advisor import __version__
from advisor.acks import Ack
from advisor.domain import Recommendation, rfc3339
from advisor.redact import redact_url
from advisor.results import CycleResult, DeploymentResult

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:72rem;padding:1rem;
color:#1b1f24;background:#fff}
h1{font-size:1.4rem;margin:.2rem 0}h2{font-size:1.15rem;margin:1.6rem 0 .4rem}h3{font-size:1rem;margin:1rem 0 .3rem}
table{border-collapse:collapse;width:100%;margin:.3rem 0}th,td{text-align:left;padding:.25rem .5rem;
border-bottom:1px solid #d8dee4;vertical-align:top}th{background:#f6f8fa;font-weight:600}
td.n{text-align:right;font-variant-numeric:tabular-nums}
.muted{color:#57606a}.fresh{color:#1a7f37}.stale{color:#9a6700}.unavailable{color:#cf222e}
.sev{display:inline-block;padding:0 .4rem;border-radius:.3rem;font-size:.8rem;font-weight:600;color:#fff}
.critical{background:#cf222e}.warning{background:#bf8700}.info{background:#0969da}
.rec{border:1px solid #d8dee4;border-radius:.4rem;padding:.5rem .8rem;margin:.6rem 0}
.flag{display:block;background:#f6f8fa;padding:.3rem .5rem;border-radius:.3rem;overflow-wrap:anywhere}
.silenced{background:#fff8c5;padding:0 .3rem;border-radius:.3rem}
details{margin:.3rem 0}summary{cursor:pointer}footer{margin-top:2rem;font-size:.85rem}
""".strip()

CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()

CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src 'sha256-{CSS_HASH}'; img-src data:; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'"
)
"""Nothing but the page's own stylesheet (and the empty data: favicon) may load or run."""

_URL_RE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+")


def redact_text(text: str) -> str:
    """Free text with every URL in it shown as :func:`~advisor.redact.redact_url` shows it."""
    return _URL_RE.sub(lambda m: redact_url(m.group(0)), text)


def deployment_state_reason(d: DeploymentResult) -> str:
    """Why the deployment is in its state, from its targets' states."""
    states = list(d.target_states)
    up = sum(1 for t in d.targets if t.up)
    if d.state == "unavailable":
        why = "; ".join(sorted({redact_text(r) for s, r in states if s == "unavailable"})) or "no data yet"
        return f"no target answered ({why})"
    if d.state == "stale":
        return (
            "; ".join(
                f"{redact_url(t.url)}: {redact_text(r)}"
                for t, (s, r) in zip(d.targets, states, strict=False)
                if s == "stale"
            )
            or "a target's data is stale"
        )
    return f"{up} of {len(d.targets)} target(s) answering with fresh data"


def _when(ts: float | None) -> str:
    """Unix seconds → RFC 3339 to the second (the page need not show microseconds)."""
    return "unknown" if ts is None else rfc3339(float(int(ts)))


def _e(v: Any) -> str:
    return html.escape(str(v), quote=True)


def fmt_num(v: Any) -> str:
    """A number as an operator reads it (``1,234`` / ``54.62`` / ``0.0312``); ``unknown`` for None."""
    if v is None:
        return "unknown"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"


def _pct(v: float | None) -> str:
    return "unknown" if v is None or not math.isfinite(v) else f"{v:.1%}"


def _kv_table(m: Mapping[str, Any], headers: tuple[str, str]) -> str:
    rows = "".join(
        f"<tr><td>{_e(k.replace('_', ' '))}</td><td class='n'>{_e(fmt_num(v))}</td></tr>" for k, v in m.items()
    )
    return f"<table><tr><th>{headers[0]}</th><th>{headers[1]}</th></tr>{rows}</table>" if rows else ""


def _effect_table(effect: Mapping[str, Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{_e(k.replace('_', ' '))}</td><td class='n'>{_e(fmt_num(v.get('before')))}</td>"
        f"<td class='n'>{_e(fmt_num(v.get('after')))}</td></tr>"
        for k, v in effect.items()
    )
    return f"<table><tr><th>predicted effect</th><th>before</th><th>after</th></tr>{rows}</table>" if rows else ""


def _silenced(a: Ack | None) -> str:
    if a is None:
        return ""
    what = "acknowledged" if a.kind == "ack" else f"snoozed until {_e(_when(a.until))}"
    by = f" by {_e(a.by)}" if a.by else ""
    return f" <span class='silenced'>{what}{by}: {_e(a.reason)} — notifications silenced</span>"


def _rec(r: Recommendation, ack: Ack | None) -> str:
    evidence = {k: v for k, v in r.evidence.items() if isinstance(v, int | float | str | bool) or v is None}
    return (
        f"<div class='rec' id='rec-{_e(r.id)}'>"
        f"<p><span class='sev {_e(r.severity)}'>{_e(r.severity)}</span> <b>{_e(r.summary)}</b>{_silenced(ack)}</p>"
        f"<p>{_e(r.rule)}: <b>{_e(r.action)} {_e(r.dial)}</b> {_e(fmt_num(r.current))} → "
        f"<b>{_e(fmt_num(r.suggested))}</b> · confidence {r.confidence:.2f} · opened {_e(_when(r.opened_at))}"
        f" · <span class='muted'>id {_e(r.id)}</span></p>"
        f"<p class='why'>{_e(r.description)}</p>"
        f"<p>Flag:<code class='flag'>{_e(r.flag)}</code></p>"
        f"{_effect_table(r.predicted_effect)}"
        f"<details><summary>evidence ({len(evidence)} numbers)</summary>{_kv_table(evidence, ('metric', 'value'))}"
        f"</details><p><a href='{_e(r.runbook)}'>runbook</a></p></div>"
    )


def _deployment(d: DeploymentResult, ack_of: Callable[[str], Ack | None]) -> str:
    s = d.snapshot
    ceiling = d.concurrency_ceiling()
    g = d.evaluation.goodput
    bounds = "" if g.lower is None or g.upper is None else f" ({_pct(g.lower)}–{_pct(g.upper)})"
    targets = "".join(
        f"<tr><td>{_e(redact_url(t.url))}</td><td class='{_e(st)}'>{_e(st or ('up' if t.up else 'down'))}</td>"
        f"<td>{_e(redact_text(why or (t.error_message or '')))}</td></tr>"
        for t, (st, why) in zip(d.targets, d.target_states or [("", "")] * len(d.targets), strict=False)
    )
    recs = "".join(_rec(r, ack_of(r.id)) for r in d.recommendations) or "<p class='muted'>None open.</p>"
    rules = "".join(
        f"<tr><td>{_e(rs.rule)}</td><td>{_e(rs.state)}</td><td>{_e(rs.reason)}</td></tr>" for rs in d.rule_statuses
    )
    return (
        f"<section id='dep-{_e(d.name)}'><h2>{_e(d.name)} <small class='muted'>{_e(d.engine)}</small> — "
        f"<span class='{_e(d.state)}'>{_e(d.state)}</span></h2>"
        f"<p class='muted'>{_e(deployment_state_reason(d))}</p>"
        "<table><tr><th>running / ceiling</th><th>waiting</th><th>KV usage</th><th>preemptions/s</th>"
        "<th>goodput</th><th>goodput tokens/s</th></tr>"
        f"<tr><td class='n'>{_e(fmt_num(s.get('requests_running')))} / "
        f"{'unknown' if ceiling is None else f'{ceiling:,.1f}'}</td>"
        f"<td class='n'>{_e(fmt_num(s.get('requests_waiting')))}</td>"
        f"<td class='n'>{_pct(s.get('kv_cache_usage_ratio'))}</td>"
        f"<td class='n'>{_e(fmt_num(s.get('preemptions_per_second')))}</td>"
        f"<td class='n'>{_pct(g.ratio)}{bounds}</td>"
        f"<td class='n'>{_e(fmt_num(d.evaluation.goodput_tokens_per_second))}</td></tr></table>"
        f"<h3>Open recommendations</h3>{recs}"
        f"<details><summary>targets ({len(d.targets)})</summary><table><tr><th>target</th><th>state</th>"
        f"<th>why</th></tr>{targets}</table></details>"
        f"<details><summary>rules</summary><table><tr><th>rule</th><th>state</th><th>why</th></tr>{rules}</table>"
        "</details></section>"
    )


def _resolved(resolved: Sequence[Recommendation]) -> str:
    if not resolved:
        return "<p class='muted'>None since the advisor started.</p>"
    rows = "".join(
        f"<tr><td>{_e(_when(r.resolved_at))}</td><td>{_e(r.deployment)}</td><td>{_e(r.rule)}</td>"
        f"<td>{_e(r.action)} {_e(r.dial)} {_e(fmt_num(r.current))} → {_e(fmt_num(r.suggested))}</td>"
        f"<td>{_e(r.summary)}</td><td><code>{_e(r.flag)}</code></td></tr>"
        for r in resolved
    )
    return (
        "<table><tr><th>resolved</th><th>deployment</th><th>rule</th><th>dial</th><th>what</th><th>flag</th></tr>"
        f"{rows}</table>"
    )


def render_status_page(
    result: CycleResult | None,
    resolved: Sequence[Recommendation],
    ack_of: Callable[[str], Ack | None],
    refresh_seconds: int = 30,
) -> str:
    """The whole page for the latest cycle, the recently resolved recommendations (newest first), and a
    lookup of each open recommendation's snooze or acknowledgement. The page reloads itself every
    ``refresh_seconds`` (the daemon passes its scrape interval, kept within 5–30 s)."""
    refresh = max(1, int(refresh_seconds))
    if result is None:
        body = "<p>No evaluation yet: the first cycle has not finished.</p>"
        when = ""
    else:
        rows = "".join(
            f"<tr><td><a href='#dep-{_e(d.name)}'>{_e(d.name)}</a></td><td class='{_e(d.state)}'>{_e(d.state)}</td>"
            f"<td class='n'>{len(d.recommendations)}</td><td>{_e(deployment_state_reason(d))}</td></tr>"
            for d in result.deployments
        )
        overview = (
            "<table><tr><th>deployment</th><th>state</th><th>open</th><th>why</th></tr>" + rows + "</table>"
            if rows
            else "<p>No deployment configured (or none in this shard).</p>"
        )
        body = overview + "".join(_deployment(d, ack_of) for d in result.deployments)
        when = f"<p class='muted'>Last evaluation {_e(_when(result.timestamp))}; refreshes every {refresh} s.</p>"
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<meta http-equiv='refresh' content='{refresh}'><link rel='icon' href='data:,'>"
        f"<title>capacity-advisor</title><style>{CSS}</style></head><body>"
        f"<h1>capacity-advisor <small class='muted'>{_e(__version__)}</small></h1>{when}{body}"
        f"<h2>Recently resolved</h2>{_resolved(resolved)}"
        "<footer><a href='/metrics'>/metrics</a> · <a href='/api/v1/deployments'>/api/v1/deployments</a> · "
        "<a href='/api/v1/recommendations'>/api/v1/recommendations</a> · "
        "<a href='/api/v1/openapi.json'>/api/v1/openapi.json</a></footer></body></html>"
    )
