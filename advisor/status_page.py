"""The status page at ``/``: what an operator needs without Grafana, as server-rendered HTML.

No script and no build step: one HTML document with one ``<style>`` element whose SHA-256 goes in the
``Content-Security-Policy`` header (:data:`CONTENT_SECURITY_POLICY`), so the browser runs nothing and
loads nothing else. It refreshes itself every scrape interval (5–30 s) with ``<meta http-equiv="refresh">``.

Shown, ordered by need (:func:`need_key`): a banner when the last config reload failed; a "needs attention"
list (deployments with a critical or warning incident, no answering target, stale data or a target down);
an overview (state, "1 of 2 targets down", open incidents); then per deployment the configuration the
advisor assumed (model, GPU, TP, max-model-len, ``gpu_memory_utilization``), the capacity model's drift from
the engine's reported pool (``+890% vs engine``), state, concurrency ceiling vs running, KV usage, waiting,
goodput; every open incident with its explanation, suggested turn, flag, predicted effect, ranked
alternatives, turns withheld (and why), evidence numbers, whether (by whom, when) it is snoozed or
acknowledged, and Acknowledge / Snooze forms; the rules' status; then the recently resolved incidents.

The forms POST ``application/x-www-form-urlencoded`` to ``/api/v1/recommendations/{id}/ack`` and ``…/snooze``
(the API's own endpoints and auth) with a CSRF token (:mod:`advisor.server` checks it and the Origin); they
are left out when the server refuses writes. Every text is HTML-escaped and URLs are shown without
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
from urllib.parse import quote

from advisor import __version__
from advisor import conventions as c
from advisor.acks import Ack
from advisor.capacity.engines import memory_budget, memory_budget_name
from advisor.domain import Recommendation, rfc3339
from advisor.notify.payload import runbook_link
from advisor.platforms import flag_text
from advisor.redact import redact_url, scrub
from advisor.results import CycleResult, DeploymentResult
from advisor.rules.common import LATENCY_MODEL_CONFIDENCE, effect_label
from advisor.rules.lifecycle import NOT_EVALUATED

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
.none{background:#57606a}.banner{background:#ffebe9;border:1px solid #cf222e;border-radius:.4rem;padding:.5rem .8rem}
#needs-attention{border:2px solid #bf8700;border-radius:.4rem;padding:.2rem .8rem;margin:.6rem 0}
form.act{display:inline-block;margin:.2rem .6rem .2rem 0}form.act input[name=reason]{width:14rem}
table.assumed{width:auto}
""".strip()

CSS_HASH = base64.b64encode(hashlib.sha256(CSS.encode()).digest()).decode()

CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src 'sha256-{CSS_HASH}'; img-src data:; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
"""Nothing but the page's own stylesheet (and the empty data: favicon) may load or run; forms post only to
this server."""

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


def _t(v: Any) -> str:
    """Free text (operator- or target-controlled) with its URLs redacted, HTML-escaped."""
    return _e(redact_text(str(v)))


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
    rows = "".join(f"<tr><td>{_e(effect_label(k))}</td><td class='n'>{_e(fmt_num(v))}</td></tr>" for k, v in m.items())
    return f"<table><tr><th>{headers[0]}</th><th>{headers[1]}</th></tr>{rows}</table>" if rows else ""


def _effect_table(effect: Mapping[str, Mapping[str, Any]]) -> str:
    rows = "".join(
        f"<tr><td>{_e(effect_label(k))}</td><td class='n'>{_e(fmt_num(v.get('before')))}</td>"
        f"<td class='n'>{_e(fmt_num(v.get('after')))}</td></tr>"
        for k, v in effect.items()
    )
    return f"<table><tr><th>predicted effect</th><th>before</th><th>after</th></tr>{rows}</table>" if rows else ""


SEVERITIES = ("critical", "warning", "info")
"""Incident severities, worst first (``Recommendation.severity``); an unknown severity ranks as ``info``."""

NO_NEED = len(SEVERITIES)
"""The need rank of a deployment with no open incident and every target answering with fresh data."""

ATTENTION_BELOW = 2
"""Need ranks below this (critical 0, warning 1) put a deployment in the "needs attention" list."""


def targets_down(d: DeploymentResult) -> tuple[int, int]:
    """``(down, total)``: the deployment's targets whose last scrape failed, and all its targets."""
    return sum(1 for t in d.targets if not t.up), len(d.targets)


def targets_line(d: DeploymentResult) -> str:
    """``"2 of 2 targets up"`` or ``"1 of 2 targets down"`` (``"no targets"`` when discovery found none)."""
    down, total = targets_down(d)
    noun = "target" if total == 1 else "targets"
    if total == 0:
        return "no targets"
    return f"{total} of {total} {noun} up" if down == 0 else f"{down} of {total} {noun} down"


def _severity_rank(severity: str) -> int:
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES) - 1


def severity_rank(d: DeploymentResult) -> int:
    """The worst open incident's severity as an index into :data:`SEVERITIES` (:data:`NO_NEED` when none)."""
    return min((_severity_rank(r.severity) for r in d.recommendations), default=NO_NEED)


def health_rank(d: DeploymentResult) -> int:
    """How badly the advisor's view of the deployment is degraded, on the severity scale: 0 (as critical) when
    no target answers (``unavailable``: the deployment may be down and the advisor is blind to it), 1 (as
    warning) when its data is ``stale`` or any target is down, else :data:`NO_NEED`."""
    if d.state == "unavailable":
        return 0
    if d.state == "stale" or targets_down(d)[0]:
        return 1
    return NO_NEED


def need_key(d: DeploymentResult) -> tuple[int, int, int, int, str]:
    """Sort key, most need first: the worse of :func:`severity_rank` and :func:`health_rank`, then the
    incidents' severity, then health, then more open incidents, then the name (so the order is total)."""
    sev, health = severity_rank(d), health_rank(d)
    return (min(sev, health), sev, health, -len(d.recommendations), d.name)


def order_by_need(deployments: Sequence[DeploymentResult]) -> list[DeploymentResult]:
    """The deployments ordered by :func:`need_key`: critical first, then warning, info, and none."""
    return sorted(deployments, key=need_key)


def needs_attention(d: DeploymentResult) -> bool:
    """Whether the deployment goes in the "needs attention" list (a critical or warning incident open, no
    answering target, stale data or a target down)."""
    return need_key(d)[0] < ATTENTION_BELOW


def need_label(d: DeploymentResult) -> tuple[str, str]:
    """``(css class, text)`` of the overview's need badge: the worst severity, or the health problem when that
    ranks worse (``unavailable``, ``stale``, ``target down``), or ``none``."""
    sev, health = severity_rank(d), health_rank(d)
    rank = min(sev, health)
    if rank == NO_NEED:
        return "none", "none"
    if sev <= health:
        return SEVERITIES[rank], SEVERITIES[rank]
    return SEVERITIES[rank], d.state if d.state in ("unavailable", "stale") else "target down"


def drift_text(d: DeploymentResult, bound: float | None = None) -> str:
    """The capacity model's KV pool against the engine's reported pool, as ``"+890% vs engine (…)"``.

    ``capacity_model_error_ratio`` (:func:`advisor.evaluate.evaluate_deployment`: model pool ÷ engine pool − 1)
    as a signed percentage, with both pools in tokens per replica; ``bound`` (the config's
    ``data_quality.capacity_model_error_bound``, a ratio) adds a warning when the drift exceeds it."""
    ev = d.evaluation
    err = ev.capacity_model_error_ratio
    if err is None or not math.isfinite(err) or ev.kv_capacity_source != "engine":
        return "unknown: no answering engine reports its KV pool"
    pct = f"{err:+.0%}" if abs(err) >= 0.1 else f"{err:+.1%}"
    text = (
        f"{pct} vs engine (the model's KV pool {fmt_num(d.capacity.kv_cache_tokens)} tokens per replica, "
        f"the engine reports {fmt_num(round(ev.kv_capacity_tokens or 0))})"
    )
    if bound is not None and abs(err) > bound:
        text += f"; beyond the ±{bound:.0%} bound, so predictions from the model are less trustworthy"
    return text


def latency_model_text(d: DeploymentResult) -> str:
    """The latency model behind the deployment's predicted TPOT, TTFT and replica counts, in one sentence: the
    published prior, or the online calibration's factors and last one-step-ahead errors; when an error is beyond
    the bound, why every recommendation's confidence is lowered
    (:meth:`advisor.capacity.calibration.LatencyFit.beyond_bound`,
    :func:`advisor.rules.common.latency_quality`).

    Example: ``"calibrated over 3 window(s): decode ×0.69, prefill ×1.02 (× the published calibration's speed); last
    error TPOT -31%, TTFT +4%; the latency model missed the observed mean TPOT by -31% (bound ±25%) … every
    recommendation's confidence is halved"``.
    """
    fit = d.evaluation.latency
    if fit is None:
        return "published calibration (not calibrated on this deployment)"
    m = fit.model
    if not m.calibrated and d.evaluation.ctx.gpu is None:  # window_observation needs the part's bandwidth and FLOP/s
        text = "published calibration: never calibrated here, the GPU is not a catalog part (no bandwidth or FLOP/s)"
    elif not m.calibrated and fit.never_because is not None:
        text = f"published calibration: never calibrated here, {fit.never_because}"
    elif not m.calibrated:
        text = "published calibration (no window with enough TPOT/TTFT observations yet)"
    else:  # a factor no window measured (no TPOT histogram, say) is the prior's: not shown as a measured ×1.00
        factors = [
            f"{name} ×{f.ratio:.2f}" if f.updates else f"{name} not measured"
            for name, f in (("decode", m.decode), ("prefill", m.prefill))
        ]
        text = f"calibrated over {fit.windows} window(s): {', '.join(factors)} (× the published calibration's speed)"
    errs = [
        f"{name} {err:+.0%}"
        for name, err in (("TPOT", fit.tpot_error_ratio), ("TTFT", fit.ttft_error_ratio))
        if err is not None
    ]
    if errs:
        text += "; last error " + ", ".join(errs)
    why = fit.beyond_bound()
    if why is not None:
        text += f"; {why}, so every recommendation's confidence is lowered (×{LATENCY_MODEL_CONFIDENCE:g})"
    return text


def assumed_config(d: DeploymentResult) -> list[tuple[str, str]]:
    """What the advisor assumed of the deployment, as ``(label, value)``: model, GPU, TP, max-model-len, the
    memory budget (``gpu_memory_utilization``; TensorRT-LLM's free-memory fraction, :func:`memory_budget`) and the
    other inputs of the capacity pass it ran."""
    cap, ctx = d.capacity, d.evaluation.ctx
    gpu = ctx.gpu.name if ctx.gpu is not None else f"{cap.gpu_memory_bytes / 2**30:,.2f} GiB (not in the GPU catalog)"
    rows = [
        ("model", cap.model_name or "unknown"),
        ("GPU", gpu),
        ("tensor parallel (TP)", fmt_num(cap.tensor_parallel_size)),
        ("max-model-len", fmt_num(cap.max_model_len)),
        # TensorRT-LLM's budget is its free-memory fraction, the value its turns start from (breaker 21: the page
        # showed 0.90 beside a turn "0.5 → 0.9")
        (f"budget ({memory_budget_name(ctx.inputs)})", f"{memory_budget(ctx.inputs):.2f}"),
    ]
    if cap.data_parallel_size > 1:
        rows.append(("data parallel (DP)", fmt_num(cap.data_parallel_size)))
    rows += [
        ("replicas", fmt_num(ctx.replicas)),
        ("weights dtype / quantization", f"{cap.dtype or 'unknown'} / {cap.quantization or 'none'}"),
        ("KV cache dtype", cap.kv_cache_dtype),
        ("KV pool (model)", f"{fmt_num(cap.kv_cache_tokens)} tokens per replica"),
    ]
    return rows


def _silenced(a: Ack | None) -> str:
    if a is None:
        return ""
    what = "acknowledged" if a.kind == "ack" else f"snoozed until {_e(_when(a.until))}"
    by = f" by {_e(a.by)}" if a.by else ""
    return (
        f" <span class='silenced'>{what}{by} at {_e(_when(a.created_at))}: {_t(a.reason)} — "
        "notifications silenced</span>"
    )


def _turn(action: Any, dial: Any, current: Any, suggested: Any) -> str:
    # a deployment without weight quantization (config ``quantization: null``) is not an unknown one
    now = "none" if current is None and dial == c.DIAL_WEIGHT_QUANTIZATION else fmt_num(current)
    return f"{_e(action)} {_e(dial)} {_e(now)} → {_e(fmt_num(suggested))}"


def _effects_inline(effect: Any) -> str:
    if not isinstance(effect, Mapping):
        return ""
    return "; ".join(
        f"{_e(effect_label(str(k)))} {_e(fmt_num(v.get('before')))} → {_e(fmt_num(v.get('after')))}"
        for k, v in effect.items()
        if isinstance(v, Mapping)
    )


def _alternatives(r: Recommendation) -> str:
    if not r.alternatives:
        return ""
    rows = "".join(
        f"<tr><td class='n'>{i}</td><td>{_e(a.get('rule', ''))}: "
        f"{_turn(a.get('action', ''), a.get('dial', ''), a.get('current'), a.get('suggested'))}</td>"
        f"<td><code>{_t(a.get('flag', ''))}</code></td>"
        f"<td>{_effects_inline(a.get('predicted_effect'))}</td>"
        f"<td class='n'>{_e(fmt_num(a.get('confidence')))}</td><td>{_t(a.get('why_rank', ''))}</td></tr>"
        for i, a in enumerate(r.alternatives, start=2)
    )
    return (
        f"<details open><summary>alternatives ({len(r.alternatives)}), ranked after the suggested turn</summary>"
        "<table class='alternatives'><tr><th>#</th><th>turn</th><th>flag</th><th>predicted effect</th>"
        f"<th>confidence</th><th>why it ranks here</th></tr>{rows}</table></details>"
    )


def _withheld(r: Recommendation) -> str:
    if not r.withheld:
        return ""
    rows = "".join(
        f"<tr><td>{_e(w.get('rule', ''))}</td><td>{_e(w.get('dial', ''))}</td><td>{_t(w.get('reason', ''))}</td></tr>"
        for w in r.withheld
    )
    return (
        f"<p><b>Withheld</b> ({len(r.withheld)}): turns the evidence contradicts</p>"
        f"<table class='withheld'><tr><th>rule</th><th>dial</th><th>why withheld</th></tr>{rows}</table>"
    )


SNOOZE_CHOICES = (("1h", "1 hour"), ("4h", "4 hours"), ("1d", "1 day"), ("1w", "1 week"))
"""The snooze form's durations (``parse_snooze_duration`` syntax)."""


def _actions(r: Recommendation, csrf_token: str | None) -> str:
    if csrf_token is None:
        return (
            "<p class='muted'>Acknowledge and snooze are off: this advisor accepts them only with basic auth "
            "(--web.config.file) or on a loopback listen address.</p>"
        )
    base = f"/api/v1/recommendations/{_e(quote(r.id, safe=''))}"
    token = f"<input type='hidden' name='csrf_token' value='{_e(csrf_token)}'>"
    choices = "".join(
        f"<option value='{v}'{' selected' if v == '4h' else ''}>{label}</option>" for v, label in SNOOZE_CHOICES
    )
    return (
        f"<div class='actions'><form class='act ack' method='post' action='{base}/ack'>{token}"
        "<input name='reason' required maxlength='1000' value='acknowledged on the status page' "
        "aria-label='reason for acknowledging'> <button type='submit'>Acknowledge</button></form>"
        f"<form class='act snooze' method='post' action='{base}/snooze'>{token}"
        f"<select name='duration' aria-label='snooze for'>{choices}</select> "
        "<input name='reason' required maxlength='1000' value='snoozed on the status page' "
        "aria-label='reason for snoozing'> <button type='submit'>Snooze</button></form></div>"
    )


def _rec(r: Recommendation, ack: Ack | None, csrf_token: str | None = None, runbook_base_url: str = "") -> str:
    evidence = {k: v for k, v in r.evidence.items() if isinstance(v, int | float | str | bool) or v is None}
    runbook = scrub(runbook_link(r.runbook, runbook_base_url))
    return (
        f"<div class='rec' id='rec-{_e(r.id)}'>"
        f"<p><span class='sev {_e(r.severity)}'>{_e(r.severity)}</span> <b>{_t(r.summary)}</b>{_silenced(ack)}</p>"
        f"<p>Suggested — {_e(r.rule)}: <b>{_turn(r.action, r.dial, r.current, r.suggested)}</b>"
        f" · confidence {r.confidence:.2f} · opened {_e(_when(r.opened_at))}"
        f" · <span class='muted'>{_e(r.problem) + ' · ' if r.problem else ''}id {_e(r.id)}</span></p>"
        f"<p class='why'>{_t(r.description)}</p>"
        f"<p>Flag:<code class='flag'>{_t(flag_text(r.flag, r.evidence))}</code></p>"
        f"{_effect_table(r.predicted_effect)}{_alternatives(r)}{_withheld(r)}"
        f"<details><summary>evidence ({len(evidence)} numbers)</summary>{_kv_table(evidence, ('metric', 'value'))}"
        f"</details><p><a href='{_e(runbook)}'>runbook</a></p>{_actions(r, csrf_token)}</div>"
    )


def _deployment(
    d: DeploymentResult,
    ack_of: Callable[[str], Ack | None],
    csrf_token: str | None = None,
    drift_bound: float | None = None,
    runbook_base_url: str = "",
) -> str:
    s = d.snapshot
    ceiling = d.concurrency_ceiling()
    g = d.evaluation.goodput
    bounds = "" if g.lower is None or g.upper is None else f" ({_pct(g.lower)}–{_pct(g.upper)})"
    targets = "".join(
        f"<tr><td>{_e(redact_url(t.url))}</td><td class='{_e(st)}'>{_e(st or ('up' if t.up else 'down'))}</td>"
        f"<td>{_e(redact_text(why or (t.error_message or '')))}</td></tr>"
        for t, (st, why) in zip(d.targets, d.target_states or [("", "")] * len(d.targets), strict=False)
    )
    ordered = sorted(d.recommendations, key=lambda r: (_severity_rank(r.severity), r.rank, r.id))
    recs = (
        "".join(_rec(r, ack_of(r.id), csrf_token, runbook_base_url) for r in ordered)
        or "<p class='muted'>None open.</p>"
    )
    rules = "".join(
        f"<tr><td>{_e(rs.rule)}</td><td>{_e(rs.state)}</td><td>{_t(rs.reason)}</td></tr>" for rs in d.rule_statuses
    )
    assumed = "".join(f"<tr><th>{_e(k)}</th><td>{_e(v)}</td></tr>" for k, v in assumed_config(d))
    return (
        f"<section id='dep-{_e(d.name)}'><h2>{_e(d.name)} <small class='muted'>{_e(d.engine)}</small> — "
        f"<span class='{_e(d.state)}'>{_e(d.state)}</span></h2>"
        f"<p class='muted'>{_e(targets_line(d))} · {_e(deployment_state_reason(d))}</p>"
        f"<details open><summary>assumed configuration</summary><table class='assumed'>{assumed}</table></details>"
        f"<p class='drift'>Capacity model vs engine: {_e(drift_text(d, drift_bound))}</p>"
        f"<p class='drift'>Latency model: {_e(latency_model_text(d))}</p>"
        "<table><tr><th>running / ceiling at max-model-len</th><th>waiting</th><th>KV usage</th><th>preemptions/s</th>"
        "<th>goodput</th><th>goodput tokens/s</th></tr>"
        f"<tr><td class='n'>{_e(fmt_num(s.get('requests_running')))} / "
        f"{'unknown' if ceiling is None else f'{ceiling:,.1f}'}</td>"
        f"<td class='n'>{_e(fmt_num(s.get('requests_waiting')))}</td>"
        f"<td class='n'>{_pct(s.get('kv_cache_usage_ratio'))}</td>"
        f"<td class='n'>{_e(fmt_num(s.get('preemptions_per_second')))}</td>"
        f"<td class='n'>{_pct(g.ratio)}{bounds}</td>"
        f"<td class='n'>{_e(fmt_num(d.evaluation.goodput_tokens_per_second))}</td></tr></table>"
        f"{_signals(d)}"
        f"<h3>Open incidents</h3>{recs}"
        f"<details><summary>targets ({_e(targets_line(d))})</summary><table><tr><th>target</th><th>state</th>"
        f"<th>why</th></tr>{targets}</table></details>"
        f"<details open><summary>rules</summary><table class='rules'><tr><th>rule</th><th>state</th><th>why</th></tr>"
        f"{rules}</table></details></section>"
    )


def _signals(d: DeploymentResult) -> str:
    """The autoscaler signals (issue 18, :mod:`advisor.signals`): desired replicas against the current count, the
    headroom of each kind and the time to KV exhaustion; ``unknown`` where the advisor exports nothing; under them,
    why desired replicas is that count (:attr:`~advisor.signals.AutoscalerSignals.desired_reason`)."""
    sig = d.signals
    if sig is None:
        return ""

    def room(v: float | None) -> str:
        return "unknown" if v is None else f"{v:.0%}"

    desired = "unknown (data not fresh)" if sig.desired_replicas is None else str(sig.desired_replicas)
    t = sig.kv_exhaustion_seconds
    exhaustion = "not growing" if t is None else f"{t:,.0f} s"
    if t is None and sig.kv_headroom_ratio is not None:  # a full pool that stays full is "not growing" too: say so
        exhaustion += f" ({1.0 - sig.kv_headroom_ratio:.0%} used)"
    if sig.desired_replicas is None or (t is None and not sig.kv_trend_measured):
        exhaustion = "unknown"  # no trend measured: KV usage not exposed, or too few readings yet (breaker 19)
    return (
        "<table class='signals'><tr><th>desired replicas</th><th>current replicas</th><th>headroom: KV</th>"
        "<th>headroom: throughput at SLO</th><th>KV full in</th></tr>"
        f"<tr><td class='n'>{_e(desired)}</td><td class='n'>{sig.current_replicas}</td>"
        f"<td class='n'>{_e(room(sig.kv_headroom_ratio))}</td>"
        f"<td class='n'>{_e(room(sig.slo_throughput_headroom_ratio))}</td>"
        f"<td class='n'>{_e(exhaustion)}</td></tr></table>"
        + (f"<p class='why'>desired replicas {_e(sig.desired_reason)}</p>" if sig.desired_reason else "")
    )


def _attention(deployments: Sequence[DeploymentResult], ack_of: Callable[[str], Ack | None]) -> str:
    items = []
    for d in deployments:
        if not needs_attention(d):
            continue
        cls, label = need_label(d)
        parts = []
        if health_rank(d) < NO_NEED:
            health = _e(targets_line(d))
            if d.state != "fresh":
                health += f" · {_e(d.state)}: {_e(deployment_state_reason(d))}"
            parts.append(f"<li>{health}</li>")
        for r in sorted(d.recommendations, key=lambda r: (_severity_rank(r.severity), r.rank, r.id)):
            if _severity_rank(r.severity) < ATTENTION_BELOW:
                parts.append(
                    f"<li><a href='#rec-{_e(r.id)}'><span class='sev {_e(r.severity)}'>{_e(r.severity)}</span> "
                    f"{_t(r.summary)}</a> — {_turn(r.action, r.dial, r.current, r.suggested)}"
                    f"{_silenced(ack_of(r.id))}</li>"
                )
        items.append(
            f"<li class='attention' data-deployment='{_e(d.name)}'><a href='#dep-{_e(d.name)}'>{_e(d.name)}</a> "
            f"<span class='sev {_e(cls)}'>{_e(label)}</span><ul>{''.join(parts)}</ul></li>"
        )
    body = f"<ol>{''.join(items)}</ol>" if items else "<p class='muted'>Nothing needs attention.</p>"
    return f"<section id='needs-attention'><h2>Needs attention</h2>{body}{_blind(deployments)}</section>"


def blind_rules(d: DeploymentResult) -> tuple[str, ...]:
    """The rules that could not run on the deployment's data this cycle (status ``unknown`` for a reason other
    than the data's state, which the deployment's own state already shows): what the advisor cannot see there."""
    return tuple(rs.rule for rs in d.rule_statuses if rs.state == "unknown" and not rs.reason.startswith(NOT_EVALUATED))


def _blind(deployments: Sequence[DeploymentResult]) -> str:
    """Beside "needs attention", the deployments where some rules could not run (breaker 19: "Nothing needs
    attention" read as all clear while goodput and saturation were unknown): silence there is not health."""
    items = [
        f"<li><a href='#dep-{_e(d.name)}'>{_e(d.name)}</a>: {_e(', '.join(rules))}</li>"
        for d in deployments
        if (rules := blind_rules(d))
    ]
    if not items:
        return ""
    return (
        "<p class='muted' id='blind'>Not checked this cycle (these rules could not run on the data; each "
        f"deployment's rules table says why):</p><ul class='blind'>{''.join(items)}</ul>"
    )


def _reload_banner(last_reload: tuple[bool, str, float] | None) -> str:
    if last_reload is None or last_reload[0]:
        return ""
    _, message, when = last_reload
    return (
        f"<div class='banner' id='reload-failed' role='alert'><b>Config reload failed</b> at {_e(_when(when))}: "
        f"{_t(message)}. The advisor keeps running the config it had before; fix the file and "
        "reload again.</div>"
    )


def _resolved(resolved: Sequence[Recommendation]) -> str:
    if not resolved:
        return "<p class='muted'>None since the advisor started.</p>"
    rows = "".join(
        f"<tr><td>{_e(_when(r.resolved_at))}</td><td>{_e(r.deployment)}</td><td>{_e(r.rule)}</td>"
        f"<td>{_turn(r.action, r.dial, r.current, r.suggested)}</td>"
        f"<td>{_t(r.summary)}</td><td><code>{_t(flag_text(r.flag, r.evidence))}</code></td></tr>"
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
    *,
    csrf_token: str | None = None,
    last_reload: tuple[bool, str, float] | None = None,
    drift_bound: float | None = None,
    runbook_base_url: str = "",
) -> str:
    """The whole page for the latest cycle, the recently resolved recommendations (newest first), and a
    lookup of each open recommendation's snooze or acknowledgement. The page reloads itself every
    ``refresh_seconds`` (the daemon passes its scrape interval, kept within 5–30 s).

    ``csrf_token``: the token the Acknowledge/Snooze forms carry (``None``: the server refuses writes, so no
    forms). ``last_reload``: the service's last config reload as ``(ok, message, unix s)``; a failed one shows
    a banner at the top. ``drift_bound``: ``data_quality.capacity_model_error_bound`` (ratio) for the drift
    line. ``runbook_base_url``: the config's ``runbook_base_url``; each runbook link goes there, as the
    notifications' ``runbook_url`` does (``""``: the default runbook). Deployments appear in
    :func:`order_by_need` order in the overview and below it."""
    refresh = max(1, int(refresh_seconds))
    if result is None:
        body = "<p>No evaluation yet: the first cycle has not finished.</p>"
        when = ""
    else:
        deployments = order_by_need(result.deployments)
        rows = "".join(
            f"<tr><td><a href='#dep-{_e(d.name)}'>{_e(d.name)}</a></td>"
            f"<td><span class='sev {_e(need_label(d)[0])}'>{_e(need_label(d)[1])}</span></td>"
            f"<td class='{_e(d.state)}'>{_e(d.state)}</td><td class='targets'>{_e(targets_line(d))}</td>"
            f"<td class='n'>{len(d.recommendations)}</td><td>{_e(deployment_state_reason(d))}</td></tr>"
            for d in deployments
        )
        overview = (
            "<table id='overview'><tr><th>deployment</th><th>need</th><th>state</th><th>targets</th><th>open</th>"
            "<th>why</th></tr>" + rows + "</table>"
            if rows
            else "<p>No deployment configured (or none in this shard).</p>"
        )
        body = (
            _attention(deployments, ack_of)
            + overview
            + "".join(_deployment(d, ack_of, csrf_token, drift_bound, runbook_base_url) for d in deployments)
        )
        when = f"<p class='muted'>Last evaluation {_e(_when(result.timestamp))}; refreshes every {refresh} s.</p>"
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width,initial-scale=1'>"
        f"<meta http-equiv='refresh' content='{refresh}'><link rel='icon' href='data:,'>"
        f"<title>capacity-advisor</title><style>{CSS}</style></head><body>"
        f"<h1>capacity-advisor <small class='muted'>{_e(__version__)}</small></h1>{_reload_banner(last_reload)}"
        f"{when}{body}"
        f"<h2>Recently resolved</h2>{_resolved(resolved)}"
        "<footer><a href='/metrics'>/metrics</a> · <a href='/api/v1/deployments'>/api/v1/deployments</a> · "
        "<a href='/api/v1/recommendations'>/api/v1/recommendations</a> · "
        "<a href='/api/v1/openapi.json'>/api/v1/openapi.json</a></footer></body></html>"
    )
