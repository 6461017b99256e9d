"""Prometheus rule files from a config (pure: returns values, writes nothing — Pyrra's habit).

:func:`generate` takes small parameter objects (:class:`RulesInput`; :mod:`advisor.rulescmd` maps the config
to them) and returns three :class:`RuleFile` values plus the warnings to report; :func:`render` turns one into
YAML text. What comes out (names in :mod:`advisor.conventions_rules`):

``engines.rules.yml`` — engine metrics normalised per ``deployment`` label, whatever the engine:
    ``deployment:llm_kv_cache_usage:ratio``, ``deployment:llm_requests_running:sum``, ``…_waiting:sum``,
    ``deployment:llm_ttft_seconds:p90_rate5m`` (and p50, p99), ``deployment:llm_tpot_seconds:p90_rate5m``, rates
    of finished requests, generated tokens and preemptions. Each rule is one ``or`` chain over every engine's
    names, newest alias first, taken from the adapters' name tables (:mod:`advisor.engines`): the first term with
    data wins, as the adapters take the first alias with a usable value. A deployment behind a Dynamo frontend
    whose workers are scraped too reads the engine's own numbers (engines come before Dynamo).

``slo.rules.yml`` — per configured deployment, the fraction of requests within the TTFT and TPOT targets over
    each SLO window (``bucket{le=target} ÷ count`` of the rate), their product as the goodput estimate (the
    advisor's estimate, :func:`advisor.telemetry.goodput_ratio`), and the Google SRE workbook's multi-window,
    multi-burn-rate alerts on ``1 − goodput`` against the error budget ``1 − target_ratio``. Each of these rules
    carries the static label ``deployment`` (promtool lints same-name, same-label rules in a group as duplicates);
    ``engine: auto`` deployments share one ``or`` chain per window (:func:`_shared_rules`).

``advisor.rules.yml`` — alerts on the advisor's own gauges (a recommendation open, capacity-model drift,
    targets not fresh, the advisor not evaluating or absent, skipping cycles, failing to reload its config,
    losing or holding up notifications).

``kubernetes/`` — a KEDA ``ScaledObject`` on ``advisor_desired_replicas`` and an ``autoscaling/v2`` HPA example on
    the same external metric per deployment with an ``autoscaling:`` block (opt-in), and the three files' groups
    as one ``PrometheusRule``
    (:mod:`advisor.manifests`).

**Bucket boundaries.** ``bucket{le="2.5"} ÷ count`` is exact only when the target is a bucket bound; a target
between bounds has no series, so the generator takes the nearest bound of the engine's default buckets and
*reports* it (a warning and a comment above the rule), since that silently changes the SLO::

    vllm TTFT target 2.5 s  → le 2.5 (a bound: exact)
    vllm TTFT target 3 s    → le 2.5 (nearest of 2.5 and 5.0; reported)
    sglang TTFT target 2.5 s → le 2 (nearest of 2 and 4; reported)
    engine auto, TTFT 3 s   → per engine, its largest bound at or below the target: vllm 2.5, sglang 2,
                              dynamo 2.2 (reported: one warning for every auto deployment; the rule reads the
                              bound of the engine that answers, :func:`_shared_rules`)

A bound can be spelt several ways (``1.0`` by prometheus_client, ``1`` by Go and Rust clients; Prometheus 3
rewrites classic-histogram ``le`` values on ingestion), so the matcher lists every spelling: ``le=~"1|1[.]0"``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final

import yaml

from advisor import conventions as c
from advisor import conventions_rules as r
from advisor.engines import catalog
from advisor.engines.catalog import KVAccounting, LatencyBuckets, PromQLHandling
from advisor.engines.common import NameTable, Series
from advisor.manifests import PROMETHEUS_ADAPTER_RULE as _ADAPTER_RULE
from advisor.manifests import (
    Autoscaling,
    Manifest,
    autoscaling_warnings,
    hpa,
    opt_in_note,
    prometheus_rule,
    scale_target_problem,
    scaled_object,
)
from advisor.manifests import render as render_manifest

# --- inputs -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeploymentSLO:
    """One deployment's latency SLO, as the config states it.

    Attributes:
        name: the deployment name (the ``deployment`` label value).
        engine: engine id (``vllm``) or ``auto``.
        ttft_seconds / tpot_seconds: the targets.
        target_ratio: fraction of requests that must meet both (error budget = 1 − target_ratio).
        served_model: the engine's model label value to read when the engine serves several, else ``None``.
        autoscaling: its KEDA ScaledObject and HPA example settings (:mod:`advisor.manifests`), or ``None``
            (the config has no ``autoscaling:`` block, opt-in): none written; a Kubernetes one gets the opt-in line.
        platform: where the engine runs (:data:`advisor.conventions.PLATFORMS`).
    """

    name: str
    engine: str
    ttft_seconds: float
    tpot_seconds: float
    target_ratio: float
    served_model: str | None = None
    autoscaling: Autoscaling | None = None
    platform: str = c.PLATFORM_KUBERNETES


@dataclass(frozen=True, slots=True)
class RulesInput:
    """Everything the generator reads.

    Attributes:
        deployments: each deployment's SLO.
        scrape_interval_seconds: the advisor's cycle; the not-evaluating alert waits max(120 s, 4 cycles).
        capacity_model_error_bound: the drift alert's threshold on ``|advisor_capacity_model_error_ratio|``.
        source: the config's file name, named in each file's header.
    """

    deployments: tuple[DeploymentSLO, ...]
    scrape_interval_seconds: float = 15.0
    capacity_model_error_bound: float = 0.15
    source: str = "config"


# --- outputs ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rule:
    """One recording rule (``record``) or alerting rule (``alert``), with comments rendered above it."""

    expr: str
    record: str | None = None
    alert: str | None = None
    for_: str | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    comments: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """The rule as Prometheus reads it (what ``yaml.safe_load`` of :func:`render` gives back)."""
        out: dict[str, object] = {"record": self.record} if self.record else {"alert": self.alert}
        out["expr"] = self.expr
        if self.for_:
            out["for"] = self.for_
        if self.labels:
            out["labels"] = dict(self.labels)
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


@dataclass(frozen=True, slots=True)
class RuleGroup:
    name: str
    rules: tuple[Rule, ...]


@dataclass(frozen=True, slots=True)
class RuleFile:
    """One file under ``rules/``: its name, header comment lines and groups."""

    name: str
    header: tuple[str, ...]
    groups: tuple[RuleGroup, ...]

    def as_dict(self) -> dict[str, object]:
        return {"groups": [{"name": g.name, "rules": [x.as_dict() for x in g.rules]} for g in self.groups]}


@dataclass(frozen=True, slots=True)
class Generated:
    """The rule files, the Kubernetes manifests (:mod:`advisor.manifests`) and the warnings the command reports
    (each also a comment in the file it concerns)."""

    files: tuple[RuleFile, ...]
    warnings: tuple[str, ...]
    manifests: tuple[Manifest, ...] = ()
    notes: tuple[str, ...] = ()
    """What ``rules generate`` tells without anything being wrong (the Kubernetes deployments it writes no ScaledObject
    for, :func:`advisor.manifests.opt_in_note`): printed by that command as notes, never by ``check-config`` or
    ``once``, where advisory mode is the default and nothing is generated."""


# --- engine knowledge ---------------------------------------------------------------------------------------

EngineBuckets = LatencyBuckets
"""An engine's default TTFT and TPOT bucket bounds (the catalog's :class:`~advisor.engines.catalog.LatencyBuckets`)."""

ENGINE_BUCKETS: Final[Mapping[str, EngineBuckets]] = {e.engine: e.buckets for e in catalog.entries()}
"""Default bucket bounds per engine id, each row citing its source (from the engine catalog)."""


@dataclass(frozen=True, slots=True)
class _Engine:
    """How the rules read one engine: its name table and its catalog entry's PromQL handling."""

    engine: str
    table: NameTable
    promql: PromQLHandling
    kv: KVAccounting

    @property
    def collapse(self) -> tuple[str, ...]:
        """Labels whose gauges repeat one value (vLLM ``pid`` per API-server process, SGLang TP/PP ranks): max."""
        return self.promql.collapse

    @property
    def collapse_counters(self) -> tuple[str, ...]:
        """Labels whose counters and histograms repeat one value (SGLang TP/PP ranks): max."""
        return self.promql.collapse_counters

    @property
    def extra_matchers(self) -> tuple[tuple[str, str], ...]:
        return self.promql.extra_matchers

    @property
    def model_label(self) -> str | None:
        return self.promql.model_label

    @property
    def casefold_model(self) -> bool:
        return self.promql.casefold_model

    @property
    def alt_prefix(self) -> tuple[str, str] | None:
        """A second spelling of every name (SGLang), read after the first."""
        return self.promql.alt_prefix


_ENGINES: Final = tuple(_Engine(e.engine, e.name_table, e.promql, e.kv) for e in catalog.entries())
"""Engines in ``or``-chain order (the catalog's): the engines' own names before the Dynamo frontend's."""
_BY_ID: Final = {e.engine: e for e in _ENGINES}


# --- PromQL helpers -----------------------------------------------------------------------------------------


def _quote(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _selector(name: str, matchers: Sequence[tuple[str, str, str]]) -> str:
    """``vllm:num_requests_running{deployment!=""}`` from ``(label, op, value)`` triples."""
    return name + "{" + ",".join(f"{k}{op}{_quote(v)}" for k, op, v in matchers) + "}"


def _names(engine: _Engine, series: Series) -> tuple[str, ...]:
    if engine.alt_prefix and series.name.startswith(engine.alt_prefix[0]):
        return series.name, engine.alt_prefix[1] + series.name[len(engine.alt_prefix[0]) :]
    return (series.name,)


def _matchers(
    engine: _Engine, series: Series, scope: Sequence[tuple[str, str, str]], served_model: str | None = None
) -> list[tuple[str, str, str]]:
    out = list(scope)
    out += [(k, "=", v) for k, v in series.match]
    out += [(k, "=", v) for k, v in engine.extra_matchers]
    if served_model is not None and engine.model_label is not None:
        if engine.casefold_model:
            out.append((engine.model_label, "=~", "(?i)" + re.escape(served_model)))
        else:
            out.append((engine.model_label, "=", served_model))
    return out


def _collapse(engine: _Engine, inner: str, counter: bool = False) -> str:
    labels = engine.collapse_counters if counter else engine.collapse
    if not labels:
        return inner
    return f"max without ({', '.join(labels)}) ({inner})"


def _or_chain(terms: Sequence[str]) -> str:
    """``a\nor\nb``; a term of several lines goes in parentheses (``or`` binds loosest, so they only help
    the reader)."""
    return "\nor\n".join("(\n" + _indent(t, 2) + "\n)" if "\n" in t else t for t in terms)


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.splitlines())


_ALL: Final = ((r.DEPLOYMENT_LABEL, "!=", ""),)


def _aliases(engine: _Engine, fieldname: str) -> tuple[Series, ...]:
    return tuple(engine.table.get(fieldname, ()))


def _gauge_terms(fieldname: str, agg: str, engines: Sequence[_Engine] = _ENGINES) -> list[str]:
    """``agg by (deployment) (max without (replicas) (name{deployment!=""}))`` per engine and alias."""
    terms = []
    for e in engines:
        for s in _aliases(e, fieldname):
            for name in _names(e, s):
                terms.append(
                    f"{agg} by ({r.DEPLOYMENT_LABEL}) ({_collapse(e, _selector(name, _matchers(e, s, _ALL)))})"
                )
    return terms


def _counter_terms(fieldname: str, window: str) -> list[str]:
    terms = []
    for e in _ENGINES:
        for s in _aliases(e, fieldname):
            for name in _names(e, s):
                rate = f"rate({_selector(name, _matchers(e, s, _ALL))}[{window}])"
                terms.append(f"sum by ({r.DEPLOYMENT_LABEL}) ({_collapse(e, rate, counter=True)})")
    return terms


def _quantile_terms(fieldname: str, q: float, window: str) -> list[str]:
    terms = []
    for e in _ENGINES:
        for s in _aliases(e, fieldname):
            for name in _names(e, s):
                rate = f"rate({_selector(name + '_bucket', _matchers(e, s, _ALL))}[{window}])"
                terms.append(
                    f"histogram_quantile({q:g}, sum by ({r.DEPLOYMENT_LABEL}, le) ({_collapse(e, rate, True)}))"
                )
    return terms


def _kv_usage_terms() -> list[str]:
    """KV usage: each engine's fraction per replica, averaged over the deployment's replicas and ranks.

    The adapters weight by capacity; PromQL cannot read vLLM's capacity (it is a label of
    ``cache_config_info``), so the rule takes the plain mean, the same for every engine.
    """
    dep = f'{r.DEPLOYMENT_LABEL}!=""'

    def sel(s: Series) -> str:
        return s.name + "{" + ",".join([dep, *(f'{k}="{v}"' for k, v in s.match)]) + "}"

    def ratio(used: Series, maximum: Series) -> str:
        return f"avg by ({r.DEPLOYMENT_LABEL}) (\n  {sel(used)}\n  / ({sel(maximum)} > 0)\n)"

    def checked(used: Series, maximum: Series, free: Series) -> str:
        # one family with a category label: used ÷ max where the counts are the engine's (the Triton adapter's
        # advisor.engines.trtllm.blocks_consistent): whole numbers, used + free at most one block over max
        ign = f"ignoring ({', '.join(k for k, _ in used.match)})"
        u, m, f = sel(used), sel(maximum), sel(free)
        return (
            f"avg by ({r.DEPLOYMENT_LABEL}) (\n"
            f"  {u}\n  / {ign} ({m} > 0)\n"
            f"  and {ign}\n  ({u} + {ign} {f} - {ign} {m} <= 1)\n"
            f"  and {ign}\n  ({f} == floor({f}))\n"
            f"  and {ign}\n  ({u} == floor({u}))\n)"
        )

    def derived(e: _Engine) -> list[str]:
        # the catalog's KV accounting: used ÷ maximum for engines without a usage gauge (TGI's reservation
        # ratio, Triton's checked blocks, trtllm-serve's blocks), one term per alias generation
        out: list[str] = []
        for t in e.kv.derived:
            used, maximum = e.table[t.used], e.table[t.maximum]
            if t.free is None:
                out += [ratio(u, m) for u, m in zip(used, maximum, strict=True)]
            else:
                out += [checked(u, m, f) for u, m, f in zip(used, maximum, e.table[t.free], strict=True)]
        return out

    terms: list[str] = []
    for e in _ENGINES:
        terms += _gauge_terms("kv_cache_usage_ratio", "avg", (e,))
        terms += derived(e)
    return terms


def _recording_file(inp: RulesInput) -> RuleFile:
    rules: list[Rule] = [
        Rule(
            record=r.KV_CACHE_USAGE,
            expr=_or_chain(_kv_usage_terms()),
            comments=("KV-cache usage 0–1, mean over the deployment's replicas and data-parallel ranks.",),
        ),
        Rule(
            record=r.REQUESTS_RUNNING,
            expr=_or_chain(_gauge_terms("requests_running", "sum")),
            comments=("Requests running, summed over replicas and data-parallel ranks.",),
        ),
        Rule(
            record=r.REQUESTS_WAITING,
            expr=_or_chain(_gauge_terms("requests_waiting", "sum")),
            comments=("Requests waiting (queued or deferred), summed over replicas.",),
        ),
        Rule(
            record=r.REQUESTS_FINISHED_RATE,
            expr=_or_chain(_counter_terms("requests_finished_total", "5m")),
            comments=("Finished requests per second over 5m.",),
        ),
        Rule(
            record=r.GENERATION_TOKENS_RATE,
            expr=_or_chain(_counter_terms("generation_tokens_total", "5m")),
            comments=("Generated (output) tokens per second over 5m.",),
        ),
        Rule(
            record=r.PREEMPTIONS_RATE,
            expr=_or_chain(_counter_terms("preemptions_total", "5m")),
            comments=("Preemptions (SGLang: retractions) per second over 5m.",),
        ),
    ]
    for q in r.QUANTILES:
        rules.append(
            Rule(
                record=r.ttft_quantile(q),
                expr=_or_chain(_quantile_terms("ttft", q, "5m")),
                comments=(f"Time to first token, {q:g} quantile of the requests finished in the last 5m.",),
            )
        )
    for q in r.QUANTILES:
        rules.append(
            Rule(
                record=r.tpot_quantile(q),
                expr=_or_chain(_quantile_terms("tpot", q, "5m")),
                comments=(
                    f"Time per output token, {q:g} quantile over 5m (per-request TPOT where the engine has it,",
                    "else inter-token latency).",
                ),
            )
        )
    header = (
        *_banner(inp),
        "",
        "Engine metrics normalised per deployment, whatever the engine (vLLM, SGLang, TGI, TensorRT-LLM,",
        "llama.cpp, Dynamo). Every engine scrape job must carry the target label `deployment` (rules/README.md).",
        "Each rule is an `or` chain: the first engine name with data wins (newest alias first).",
    )
    return RuleFile(r.FILE_RECORDING, header, (RuleGroup(r.GROUP_ENGINES, tuple(rules)),))


def _banner(inp: RulesInput) -> tuple[str, ...]:
    return (
        f"Generated by `capacity-advisor rules generate --config {inp.source}`. Do not edit:",
        "change the config (or advisor/rulesgen.py) and regenerate.",
    )


# --- bucket boundaries --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BoundChoice:
    """The ``le`` used for a target and whether it differs.

    Attributes:
        target: the configured target, seconds.
        le: the bound used.
        exact: the target is one of the engine's bounds (or the buckets are unknown and it is used as given).
        note: why the bound differs or cannot be checked (``None`` when exact on known buckets).
    """

    target: float
    le: float
    exact: bool
    note: str | None


def _num(x: float) -> str:
    """The shortest exact decimal: ``2.0 → "2"``, ``0.1 → "0.1"``, ``0.043789389…`` in full (no rounding)."""
    return format(Decimal(repr(float(x))).normalize(), "f")


def choose_bound(target: float, bounds: Sequence[float], what: str, engine: str) -> BoundChoice:
    """The bucket bound to count "within target" at: the target where it is a bound, else the largest bound below it
    (a stricter SLO: a request counted within it met the target), the smallest when the target is below them all —
    the bound :func:`auto_bound` gives an ``engine: auto`` deployment, so setting ``engine:`` never moves the SLO
    (a fresh user's 2 s target read at le=1 with engine auto and at le=2.5 with engine vllm, 2026-12-06).

    Example (vLLM TTFT bounds … 1.0, 2.5, 5.0 …)::

        choose_bound(2.5, …) → le 2.5, exact
        choose_bound(3.0, …) → le 2.5, not exact: "… 3 s is between the buckets 2.5 and 5; le=2.5 is used …"
        choose_bound(4.5, …) → le 2.5 (not the nearer 5: a looser bound would count 4.9 s as within 4.5 s)

    With no bounds known (``engine: auto``) the target is used as given and the note says so.
    """
    finite = sorted(b for b in bounds if math.isfinite(b) and b > 0)  # a bound of 0 counts no request within
    if not finite:
        return BoundChoice(
            target,
            target,
            True,
            f"{what} target {_num(target)} s: the {engine} engine's buckets are unknown here, so the target is used "
            f"as le={_num(target)} unchecked; if it is not a bucket bound the rule finds no series (set `engine:`)",
        )
    for b in finite:
        if math.isclose(b, target, rel_tol=1e-9, abs_tol=0.0):
            return BoundChoice(target, b, True, None)
    nearest = auto_bound(target, finite)
    below = max((b for b in finite if b < target), default=None)
    above = min((b for b in finite if b > target), default=None)
    if below is not None and above is not None:
        where = f"between the buckets {_num(below)} and {_num(above)}"
    elif below is not None:
        where = f"above the last finite bucket {_num(below)}"
    else:
        where = f"below the first bucket {_num(finite[0])}"
    stricter = "stricter" if nearest < target else "looser"
    note = (
        f"{what} target {_num(target)} s is {where} of {engine}'s buckets; the generated Prometheus rules use "
        f"le={_num(nearest)} instead (a {stricter} SLO; the daemon's own goodput reads inside the bucket, with sure "
        "bounds). Set the target to a bucket bound to make this exact."
    )
    return BoundChoice(target, nearest, False, note)


def le_spellings(value: float) -> tuple[str, ...]:
    """Every way a client writes this bound in ``le``: prometheus_client (``repr``, Go-style exponent above
    1e6), Go's ``strconv.FormatFloat(v, 'g', -1, 64)``, a plain decimal (Rust), and OpenMetrics' ``1.0``.

    Example: ``2.5 → ("2.5",)``; ``1.0 → ("1.0", "1")``; ``0.00015000000000000001`` → one spelling.
    """
    digits = Decimal(repr(float(value))).normalize()
    plain = format(digits, "f")
    exp = digits.adjusted()
    py = _python_client(value)
    go = plain if -4 <= exp < 6 else _exponent(digits)
    openmetrics = plain if "." in plain or "e" in plain else plain + ".0"
    out: list[str] = []
    for s in (py, go, plain, openmetrics):
        if s not in out:
            out.append(s)
    return tuple(out)


def _python_client(d: float) -> str:
    """prometheus_client ``utils.floatToGoString`` for a positive finite value."""
    s = repr(float(d))
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def _exponent(digits: Decimal) -> str:
    """Go's ``%e`` form with the shortest digits: ``1e+06``, ``1.5e-05``."""
    sign, ds, _ = digits.as_tuple()
    text = "".join(str(x) for x in ds)
    exp = digits.adjusted()
    mant = text[0] + ("." + text[1:] if len(text) > 1 else "")
    return f"{'-' if sign else ''}{mant}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"


def le_matcher(value: float) -> tuple[str, str, str]:
    """``("le", "=", "2.5")`` or, for several spellings, ``("le", "=~", "1|1[.]0")``."""
    spellings = le_spellings(value)
    if len(spellings) == 1:
        return ("le", "=", spellings[0])
    return ("le", "=~", "|".join(s.replace(".", "[.]").replace("+", "[+]") for s in spellings))


# --- SLO rules ----------------------------------------------------------------------------------------------


def _fraction_terms(
    dep: DeploymentSLO, engines: Sequence[_Engine], fieldname: str, les: Mapping[str, float], window: str
) -> list[str]:
    """One term per engine and alias: ``bucket{le=<that engine's bound>} ÷ count`` (``les``: engine id → bound)."""
    scope = ((r.DEPLOYMENT_LABEL, "=", dep.name),)
    terms = []
    for e in engines:
        if e.engine not in les:
            continue
        for s in _aliases(e, fieldname):
            for name in _names(e, s):
                base = _matchers(e, s, scope, dep.served_model)
                good = f"rate({_selector(name + '_bucket', [*base, le_matcher(les[e.engine])])}[{window}])"
                count = f"rate({_selector(name + '_count', base)}[{window}])"
                terms.append(
                    f"sum by ({r.DEPLOYMENT_LABEL}) ({_collapse(e, good, counter=True)})\n"
                    f"/\nsum by ({r.DEPLOYMENT_LABEL}) ({_collapse(e, count, counter=True)})"
                )
    return terms


def _fmt(x: float) -> str:
    return format(x, ".10g")


def _burn_comment(factor: float, budget: float) -> str | None:
    """Why the burn-rate pair at ``factor`` can never fire on an error budget of ``budget`` (``None``: it can).

    The alert fires on ``1 − goodput > factor × budget``; an error ratio is at most 1, so a threshold of 1 or more
    is never crossed: with ``target_ratio`` 0.9 (budget 0.1) the 14.4× pair needs 1.44. Such a pair is not
    written (:func:`_slo_rules`); the others still are.
    """
    if factor * budget >= 1:
        return (
            f"burn rate {_fmt(factor)}× a budget of {_fmt(budget)} needs an error ratio of {_fmt(factor * budget)}"
            " ≥ 1: this alert can never fire, so it is not written (a target_ratio this low leaves no room for"
            " fast burns)"
        )
    return None


def _days(window: str) -> float:
    units = {"m": 1 / 1440, "h": 1 / 24, "d": 1.0}
    return float(window[:-1]) * units[window[-1]]


def auto_bound(target: float, bounds: Sequence[float]) -> float:
    """The bound an ``engine: auto`` rule counts "within target" at for one engine: the largest of the engine's
    finite bucket bounds at or below ``target`` (seconds); the smallest bound when all are above it; ``target``
    itself when the engine's buckets are unknown (``()``).

    Example (vLLM TTFT bounds … 1.0, 2.5, 5.0 …; SGLang … 1, 2, 4 …): ``auto_bound(3, vllm) → 2.5``,
    ``auto_bound(3, sglang) → 2``, ``auto_bound(2.5, vllm) → 2.5``.

    Never the nearest bound above (nor does :func:`choose_bound`, which counts at the same bound): the shared chains
    (:func:`_shared_rules`) rely on every bound chosen for a deployment being at most the one of the engine it runs
    (see there).
    """
    # a bound of 0 (Dynamo's first) counts no request as within any target: never chosen (breaker 12: a 1 ms
    # target read at le=0, goodput 0 and the burn alerts firing for good)
    finite = sorted(b for b in bounds if math.isfinite(b) and b > 0)
    if not finite:
        return target
    for b in finite:
        if math.isclose(b, target, rel_tol=1e-9, abs_tol=0.0):
            return b
    below = [b for b in finite if b < target]
    return below[-1] if below else finite[0]


def _engine_bounds(engine: str, fieldname: str) -> tuple[float, ...]:
    b = ENGINE_BUCKETS[engine]
    return b.ttft if fieldname == "ttft" else b.tpot


def _auto_les(dep: DeploymentSLO, fieldname: str) -> dict[str, float]:
    """An ``engine: auto`` deployment's bound per engine that has the histogram ``fieldname`` (``ttft`` or
    ``tpot``): :func:`auto_bound` of its target on that engine's default buckets (:data:`ENGINE_BUCKETS`)."""
    target = dep.ttft_seconds if fieldname == "ttft" else dep.tpot_seconds
    return {
        e.engine: auto_bound(target, _engine_bounds(e.engine, fieldname)) for e in _ENGINES if _aliases(e, fieldname)
    }


def _auto_text(les: Mapping[str, float]) -> str:
    """``2.5 (vllm, trtllm), 2 (sglang)``: each bound with the engines that use it, in catalog order."""
    by: dict[str, list[str]] = {}
    for engine, le in les.items():
        by.setdefault(_num(le), []).append(engine)
    return ", ".join(f"{le} ({', '.join(engines)})" for le, engines in by.items())


def _shared(dep: DeploymentSLO) -> bool:
    """The deployment reads the ``or`` chains written once for all ``engine: auto`` deployments
    (:func:`_shared_rules`): engine auto and no served model (whose label differs per engine)."""
    return dep.engine == "auto" and dep.served_model is None


def _le_any(values: Sequence[float]) -> tuple[str, str, str]:
    """``le`` matching every spelling of every value: :func:`le_matcher` for one value, else a regex."""
    distinct = list(dict.fromkeys(values))
    if len(distinct) == 1:
        return le_matcher(distinct[0])
    return ("le", "=~", _le_alternatives(distinct))


def _fraction(
    dep: DeploymentSLO, engines: Sequence[_Engine], fieldname: str, les: Mapping[str, float], window: str
) -> str:
    """The expression of one deployment's within-target fraction: its own ``or`` chain, or (an auto deployment
    without a served model) its ``deployment`` and its bounds on every engine read from the shared chain, the
    largest that has data (:func:`_shared_rules` says why that is its own engine's)."""
    if _shared(dep):
        shared = r.ttft_within_le(window) if fieldname == "ttft" else r.tpot_within_le(window)
        sel = _selector(shared, ((r.DEPLOYMENT_LABEL, "=", dep.name), _le_any(list(les.values()))))
        return f"max by ({r.DEPLOYMENT_LABEL}) ({sel})"
    return _or_chain(_fraction_terms(dep, engines, fieldname, les, window))


def _slo_rules(
    dep: DeploymentSLO,
) -> tuple[list[Rule], list[Rule], list[str]]:
    """Recording rules, alerts and warnings for one deployment.

    Every rule carries the static label ``deployment: <name>`` (the value its expression already has), so the
    rules of several deployments in one group are distinct: ``promtool check rules`` lints a group's rules with
    the same name and labels as duplicates. An auto deployment's unknown-bucket note is not among the warnings:
    :func:`_slo_file` reports it once for every auto deployment.
    """
    warnings: list[str] = []
    where = f"deployment {dep.name!r}"
    static = {r.DEPLOYMENT_LABEL: dep.name}
    if dep.engine == "auto":
        engines: Sequence[_Engine] = _ENGINES
        ttft_les, tpot_les = _auto_les(dep, "ttft"), _auto_les(dep, "tpot")
        ttft = BoundChoice(dep.ttft_seconds, dep.ttft_seconds, True, None)
        tpot = BoundChoice(dep.tpot_seconds, dep.tpot_seconds, True, None)
        has_ttft = has_tpot = True
    else:
        engines = (_BY_ID[dep.engine],)
        buckets = ENGINE_BUCKETS[dep.engine]
        has_ttft, has_tpot = bool(buckets.ttft), bool(buckets.tpot)
        if not has_ttft and not has_tpot:
            warnings.append(
                f"{where}: {dep.engine} exposes no TTFT or TPOT histogram (docs/engines.md); "
                "no goodput SLO rules or burn-rate alerts are generated for it"
            )
            return [], [], warnings
        ttft = choose_bound(dep.ttft_seconds, buckets.ttft, "TTFT", dep.engine)
        tpot = choose_bound(dep.tpot_seconds, buckets.tpot, "TPOT", dep.engine)
        ttft_les, tpot_les = {dep.engine: ttft.le}, {dep.engine: tpot.le}
        if not has_ttft:
            warnings.append(f"{where}: {dep.engine} exposes no TTFT histogram; goodput counts the TPOT target only")
        for choice, has, note in ((ttft, has_ttft, buckets.note_ttft_above), (tpot, has_tpot, buckets.note_tpot_above)):
            if has and note is not None and choice.le > note[0]:
                warnings.append(f"{where}: le={_num(choice.le)}: {note[1]}, where this target falls in +Inf")
        for choice, has in ((ttft, has_ttft), (tpot, has_tpot)):
            if has and choice.note is not None:
                warnings.append(f"{where}: {choice.note}")

    sel = _selector("", ((r.DEPLOYMENT_LABEL, "=", dep.name),))
    recording: list[Rule] = []
    comments = tuple(warnings)
    auto = dep.engine == "auto"
    ttft_at = f"{_num(ttft.le)} s" + (f" (at its engine's bound: {_auto_text(ttft_les)})" if auto else "")
    tpot_at = f"{_num(tpot.le)} s" + (f" (at its engine's bound: {_auto_text(tpot_les)})" if auto else "")
    for window in r.SLO_WINDOWS:
        factors = []
        if has_ttft:
            recording.append(
                Rule(
                    record=r.ttft_within_target(window),
                    expr=_fraction(dep, engines, "ttft", ttft_les, window),
                    labels=static,
                    comments=(
                        f"{dep.name}: fraction of requests with TTFT ≤ {ttft_at} over {window}.",
                        *comments,
                    ),
                )
            )
            factors.append(r.ttft_within_target(window) + sel)
        if has_tpot:
            recording.append(
                Rule(
                    record=r.tpot_within_target(window),
                    expr=_fraction(dep, engines, "tpot", tpot_les, window),
                    labels=static,
                    comments=(f"{dep.name}: fraction of requests with TPOT ≤ {tpot_at} over {window}.",),
                )
            )
            factors.append(r.tpot_within_target(window) + sel)
        expr = factors[0] if len(factors) == 1 else f"{factors[0]} * {factors[1]}\nor {factors[0]}\nor {factors[1]}"
        recording.append(
            Rule(
                record=r.goodput(window),
                expr=expr,
                labels=static,
                comments=(f"{dep.name}: goodput over {window} ≈ P(TTFT ok) × P(TPOT ok), as the advisor estimates.",),
            )
        )
        comments = ()
        ttft_at, tpot_at = f"{_num(ttft.le)} s", f"{_num(tpot.le)} s"  # each engine's bounds: the first window's

    budget = 1.0 - dep.target_ratio
    targets = []
    if has_ttft:
        targets.append(f"TTFT ≤ {_num(ttft.le)} s")
    if has_tpot:
        targets.append(f"TPOT ≤ {_num(tpot.le)} s")
    what = " or ".join(t.replace("≤", ">") for t in targets)
    alerts: list[Rule] = []
    for long_w, short_w, factor, for_, severity in r.BURN_RATE_WINDOWS:
        threshold = f"{_fmt(factor)} * {_fmt(budget)}"
        expr = f"1 - {r.goodput(long_w)}{sel} > {threshold}\nand\n1 - {r.goodput(short_w)}{sel} > {threshold}"
        never = _burn_comment(factor, budget)
        if never is not None:
            warnings.append(f"{where}: {long_w}/{short_w}: {never}")
            continue
        exhausted = _days(r.SLO_PERIOD) / factor
        alerts.append(
            Rule(
                alert=r.ALERT_GOODPUT_BUDGET_BURN,
                expr=expr,
                for_=for_,
                labels={
                    **static,
                    c.LABEL_SEVERITY: severity,
                    r.LABEL_LONG_WINDOW: long_w,
                    r.LABEL_SHORT_WINDOW: short_w,
                    r.LABEL_BURN_RATE: _fmt(factor),
                },
                annotations={
                    r.ANNOTATION_SUMMARY: (
                        f"Deployment {{{{ $labels.deployment }}}} is burning its goodput error budget "
                        f"{_fmt(factor)}× too fast."
                    ),
                    r.ANNOTATION_DESCRIPTION: (
                        f"{{{{ $value | humanizePercentage }}}} of the requests of {{{{ $labels.deployment }}}} over "
                        f"the last {long_w} had {what} (estimated from the engine's histograms), and the last "
                        f"{short_w} is as bad. The SLO allows {_fmt(budget * 100)}% (target "
                        f"{_fmt(dep.target_ratio * 100)}% over {r.SLO_PERIOD}); at this rate the budget lasts "
                        f"{exhausted:.3g} days."
                    ),
                    r.ANNOTATION_RUNBOOK_URL: r.runbook_url(r.ALERT_GOODPUT_BUDGET_BURN),
                },
                comments=(
                    f"{dep.name}: {long_w}/{short_w} windows at {_fmt(factor)}× the error budget "
                    f"1 − {_fmt(dep.target_ratio)} (SRE workbook ch. 5).",
                ),
            )
        )
    return recording, alerts, warnings


def _regex_literal(text: str) -> str:
    """``text`` as an RE2 literal (PromQL ``=~``): each metacharacter backslash-escaped."""
    return "".join("\\" + ch if ch in "\\.+*?()|[]{}^$" else ch for ch in text)


def _le_alternatives(values: Sequence[float]) -> str:
    """One regex matching every spelling of every bound (:func:`le_spellings`): ``2[.]5|1[.]0|1``."""
    out: list[str] = []
    for v in values:
        for spelling in le_spellings(v):
            piece = spelling.replace(".", "[.]").replace("+", "[+]")
            if piece not in out:
                out.append(piece)
    return "|".join(out)


def _shared_rules(deps: Sequence[DeploymentSLO], note: str | None) -> list[Rule]:
    """The within-bound fractions of every ``engine: auto`` deployment without a served model, per
    ``deployment`` and ``le``, over each SLO window: one ``or`` chain over every engine's names per window and
    target, written once whatever the number of such deployments (before, each deployment had its own chains:
    six auto deployments made a 315 KB ``slo.rules.yml``).

    Each term is ``sum by (deployment, le) (rate(<bucket>)) / ignoring (le) group_left sum by (deployment)
    (rate(<count>))`` of one engine's name: as in a deployment's own chain, a term yields only where that name has
    both series, and the first name with data wins per deployment and bound. An engine's terms match the bounds
    :func:`auto_bound` picks on that engine's buckets for every auto deployment (vLLM jumps from 2.5 to 5, so a
    3 s target is counted at vLLM's 2.5 and SGLang's 2), in every spelling (:func:`le_spellings`).

    A deployment reads the largest of its bounds on every engine (:func:`_fraction`). That is its own engine's:
    its series carry only that engine's chosen bounds, and any other engine's bound for this deployment that is
    also one of them is at most the target, so at most its own engine's (the largest at or below the target), and
    a fraction within a smaller bound is never larger.
    """
    if not deps:
        return []
    scope = ((r.DEPLOYMENT_LABEL, "=~", "|".join(_regex_literal(d.name) for d in deps)),)
    out: list[Rule] = []
    for window in r.SLO_WINDOWS:
        for fieldname, record in (("ttft", r.ttft_within_le(window)), ("tpot", r.tpot_within_le(window))):
            les = [_auto_les(d, fieldname) for d in deps]
            terms = []
            for e in _ENGINES:
                if not _aliases(e, fieldname):
                    continue
                le = ("le", "=~", _le_alternatives([x[e.engine] for x in les]))
                for s in _aliases(e, fieldname):
                    for name in _names(e, s):
                        base = _matchers(e, s, scope)
                        good = f"rate({_selector(name + '_bucket', [*base, le])}[{window}])"
                        count = f"rate({_selector(name + '_count', base)}[{window}])"
                        terms.append(
                            f"sum by ({r.DEPLOYMENT_LABEL}, le) ({_collapse(e, good, counter=True)})\n"
                            f"/ ignoring (le) group_left\n"
                            f"sum by ({r.DEPLOYMENT_LABEL}) ({_collapse(e, count, counter=True)})"
                        )
            comments: tuple[str, ...] = (
                f"engine auto ({', '.join(d.name for d in deps)}): fraction of requests with {fieldname.upper()} "
                f"≤ le over {window}, per deployment and bound, whatever the engine.",
            )
            if note is not None and not out:
                comments += (note,)
            out.append(Rule(record=record, expr=_or_chain(terms), comments=comments))
    return out


def _auto_warning(deps: Sequence[DeploymentSLO]) -> str | None:
    """One warning for every ``engine: auto`` deployment whose target is not a bucket bound of every engine
    (instead of two per deployment): which bound each engine is counted at, or ``None`` when every target is
    a bound of every engine that has the histogram."""
    parts = []
    for d in deps:
        for what, fieldname, target in (("TTFT", "ttft", d.ttft_seconds), ("TPOT", "tpot", d.tpot_seconds)):
            les = _auto_les(d, fieldname)
            if any(not math.isclose(le, target, rel_tol=1e-9, abs_tol=0.0) for le in les.values()):
                parts.append(f"{d.name!r} {what} {_num(target)} s at le={_auto_text(les)}")
    if not parts:
        return None
    names = list(dict.fromkeys(p.split(" ")[0] for p in parts))
    which = "deployment" if len(names) == 1 else "deployments"
    return (
        f"{which} {', '.join(names)}: engine auto: a target between an engine's bucket bounds is counted at that "
        "engine's largest bound below it (a stricter SLO; its smallest when the target is below them all): "
        f"{'; '.join(parts)}. Set `engine:` to check one engine's buckets, or a target that is a bound of the engine "
        "you run"
    )


def _slo_file(inp: RulesInput) -> tuple[RuleFile, list[str]]:
    autos = [d for d in inp.deployments if d.engine == "auto"]
    note = _auto_warning(autos)
    recording: list[Rule] = _shared_rules([d for d in autos if _shared(d)], note)
    alerts: list[Rule] = []
    warnings: list[str] = [note] if note is not None else []
    for dep in inp.deployments:
        rec, al, warn = _slo_rules(dep)
        recording += rec
        alerts += al
        warnings += [w for w in warn if w not in warnings]
    header = (
        *_banner(inp),
        "",
        "Goodput SLOs: per deployment, the fraction of requests within the TTFT and TPOT targets over each window",
        "(bucket at the target ÷ count), their product as the goodput estimate, and multi-window multi-burn-rate",
        f"alerts on 1 − goodput against the error budget 1 − target_ratio over {r.SLO_PERIOD}",
        '(Google SRE workbook, ch. 5 "Alerting on SLOs").',
    )
    if warnings:
        header += ("", "Warnings:", *(f"- {w}" for w in warnings))
    groups = (RuleGroup(r.GROUP_GOODPUT, tuple(recording)), RuleGroup(r.GROUP_SLO_ALERTS, tuple(alerts)))
    return RuleFile(r.FILE_SLO, header, groups), warnings


# --- alerts on the advisor's own gauges ---------------------------------------------------------------------


def _advisor_file(inp: RulesInput) -> RuleFile:
    bound = _fmt(inp.capacity_model_error_bound)
    stale_after = max(120.0, 4 * inp.scrape_interval_seconds)
    rules: list[Rule] = []
    for severity in c.SEVERITIES:
        rules.append(
            Rule(
                alert=r.ALERT_RECOMMENDATION_OPEN,
                # by deployment and severity only: an open incident's dial and action follow its suggested turn,
                # and an alert whose labels change is another alert (issue 13: labels fixed for the incident's life)
                expr=(
                    f"max by ({c.LABEL_DEPLOYMENT}, {c.LABEL_SEVERITY}) "
                    f'({c.RECOMMENDATION_ACTIVE}{{{c.LABEL_SEVERITY}="{severity}"}}) == 1'
                ),
                labels={c.LABEL_SEVERITY: severity},
                annotations=_notes(
                    r.ALERT_RECOMMENDATION_OPEN,
                    "Deployment {{ $labels.deployment }}: the advisor holds "
                    f"{_article(severity)} {severity} recommendation open.",
                    f"The capacity advisor holds {_article(severity)} {severity} recommendation"
                    " open for {{ $labels.deployment }}. The dial to turn, its evidence, predicted effect, confidence "
                    "and the exact engine flag are on the advisor's status page and /api/v1/recommendations.",
                ),
                comments=(
                    f"{_article(severity).capitalize()} {severity} recommendation is open. The advisor applied its own",
                    "for-durations and hysteresis before opening it, so this alert has no `for`. Labelled by",
                    "deployment and severity only: the dial follows the incident's suggested turn, and a label",
                    "that changes would make a second alert.",
                ),
            )
        )
    rules.append(
        Rule(
            alert=r.ALERT_CAPACITY_MODEL_DRIFT,
            expr=f"abs({c.CAPACITY_MODEL_ERROR_RATIO}) > {bound}",
            for_="30m",
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_CAPACITY_MODEL_DRIFT,
                "The capacity model of {{ $labels.deployment }} misses the engine's KV pool by "
                "{{ $value | humanizePercentage }}.",
                "The advisor's capacity pass and the KV pool the engine reports for {{ $labels.deployment }} have "
                f"differed by more than {_fmt(inp.capacity_model_error_bound * 100)}% for 30 minutes "
                "(data_quality.capacity_model_error_bound). Predictions for this deployment are less trustworthy "
                "until the config matches what the engine runs.",
            ),
        )
    )
    rules.append(
        Rule(
            alert=r.ALERT_TARGET_NOT_FRESH,
            expr=f'{c.TARGET_STATE}{{{c.LABEL_STATE}!="{c.STATE_FRESH}"}} == 1',
            for_="10m",
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_TARGET_NOT_FRESH,
                "Target {{ $labels.target }} of {{ $labels.deployment }} has been {{ $labels.state }} for 10 minutes.",
                "The advisor has not had usable data from {{ $labels.target }} ({{ $labels.deployment }}) for 10 "
                "minutes: unavailable = its scrapes fail; stale = no new samples, or requests running while the "
                "token counters stand still (a frozen engine). No recommendation fires on this data.",
            ),
        )
    )
    rules.append(
        Rule(
            alert=r.ALERT_NOT_EVALUATING,
            # the cycle's own completion time; 0 until the first cycle completes (then CapacityAdvisorAbsent
            # speaks), and an advisor that does not export it yet falls back to the published evaluation's time
            expr=(
                f"time() - ({c.CYCLE_LAST_SUCCESS_TIMESTAMP} > 0 or {c.LAST_EVALUATION_TIMESTAMP}) "
                f"> {_fmt(stale_after)}"
            ),
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_NOT_EVALUATING,
                "The capacity advisor has not completed an evaluation for {{ $value | humanizeDuration }}.",
                f"Its last evaluation cycle finished more than {_fmt(stale_after)} s ago (max of 120 s and 4 "
                "scrape intervals) although its /metrics still answers: the loop is stuck or every cycle fails. "
                "No recommendation opens or resolves meanwhile.",
            ),
            comments=(f"More than max(120 s, 4 × scrape_interval) = {_fmt(stale_after)} s without an evaluation.",),
        )
    )
    rules.append(
        Rule(
            alert=r.ALERT_ABSENT,
            expr=f"absent({c.LAST_EVALUATION_TIMESTAMP})",
            for_="5m",
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_ABSENT,
                "Prometheus has no capacity-advisor metrics.",
                f"{c.LAST_EVALUATION_TIMESTAMP} has been absent for 5 minutes: the advisor is down, not scraped, "
                "or has not completed its first evaluation. Nothing watches the deployments' capacity meanwhile.",
            ),
        )
    )
    rules += _health_rules()
    header = (
        *_banner(inp),
        "",
        "Alerts on the capacity advisor's own gauges (advisor_*; names in advisor/conventions.py).",
    )
    return RuleFile(r.FILE_ADVISOR, header, (RuleGroup(r.GROUP_ADVISOR_ALERTS, tuple(rules)),))


def _health_rules() -> list[Rule]:
    """Alerts on the advisor failing at its own work (issue 14), each after the Prometheus mixin alert on the same
    failure of Prometheus (prometheus/prometheus ``documentation/prometheus-mixin/alerts.libsonnet``):

    * ``CapacityAdvisorCyclesSkipped`` — ``increase(advisor_cycles_skipped_total[5m]) > 0`` for 15m, as
      ``PrometheusMissingRuleEvaluations`` on ``prometheus_rule_group_iterations_missed_total``;
    * ``CapacityAdvisorConfigReloadFailed`` — ``max_over_time(advisor_config_last_reload_successful[5m]) == 0``
      for 10m, as ``PrometheusBadConfig`` (warning here: the advisor keeps running the last good config);
    * ``CapacityAdvisorNotificationsLost`` — ``increase(advisor_notifications_total{outcome=~"failed|dropped"}
      [15m]) > 0``: a notification a receiver rejected, or kept undelivered past ``retention``, is gone for good
      (Prometheus alerts on its notification errors, ``PrometheusErrorSendingAlertsToAnyAlertmanager``; no
      ``for`` here: each is final); the service creates each receiver's outcome series at 0, so the first one
      counts;
    * ``CapacityAdvisorNotificationsStuck`` — ``min_over_time(advisor_notifications_queued[15m]) > 0``: a
      receiver's outbox has not emptied once in 15 minutes (its head is being retried); ``min_over_time``, as
      ``PrometheusNotificationQueueRunningFull`` watches its queue, so one failed scrape makes no false negative.
    """
    lost = f"{c.NOTIFY_FAILED}|{c.NOTIFY_DROPPED}"
    return [
        Rule(
            alert=r.ALERT_CYCLES_SKIPPED,
            expr=f"increase({c.CYCLES_SKIPPED}_total[5m]) > 0",
            for_="15m",
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_CYCLES_SKIPPED,
                "The capacity advisor has skipped evaluation cycles for 15 minutes.",
                "Cycles were skipped in every 5-minute window for 15 minutes: a cycle takes longer than "
                "scrape_interval, so the next one does not start. Deployments are evaluated less often than "
                "configured and data grows older than it looks. Compare advisor_cycle_duration_seconds with "
                "advisor_cycle_interval_seconds.",
            ),
            comments=(
                "Cycles skipped because the previous one still ran (overload): PrometheusMissingRuleEvaluations.",
            ),
        ),
        Rule(
            alert=r.ALERT_CONFIG_RELOAD_FAILED,
            expr=f"max_over_time({c.CONFIG_LAST_RELOAD_SUCCESSFUL}[5m]) == 0",
            for_="10m",
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_CONFIG_RELOAD_FAILED,
                "The capacity advisor's last config reload failed.",
                "The last reload of the advisor's config (SIGHUP or POST /-/reload) failed and has not succeeded "
                "since, for 10 minutes. The advisor keeps running the last good config: the change you made is "
                "not in effect, and the next restart will fail on the same config.",
            ),
        ),
        Rule(
            alert=r.ALERT_NOTIFICATIONS_LOST,
            expr=f'increase({c.NOTIFICATIONS}_total{{{c.LABEL_OUTCOME}=~"{lost}"}}[15m]) > 0',
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_NOTIFICATIONS_LOST,
                "Receiver {{ $labels.receiver }}: alert notifications {{ $labels.outcome }} in the last 15 minutes.",
                "Alert transitions to receiver {{ $labels.receiver }} were {{ $labels.outcome }} in the last 15 "
                "minutes: failed = the receiver rejected them (a 4xx, or max_attempts ran out); "
                "dropped = not delivered within the receiver's retention. Nobody was told about those openings "
                "or resolutions; the advisor's status page and /api/v1/recommendations still show them.",
            ),
            comments=("Every failed or dropped notification is final: no `for`.",),
        ),
        Rule(
            alert=r.ALERT_NOTIFICATIONS_STUCK,
            expr=f"min_over_time({c.NOTIFICATIONS_QUEUED}[15m]) > 0",
            labels={c.LABEL_SEVERITY: "warning"},
            annotations=_notes(
                r.ALERT_NOTIFICATIONS_STUCK,
                "Receiver {{ $labels.receiver }}: notifications have waited in the outbox for 15 minutes.",
                "The outbox of receiver {{ $labels.receiver }} has not emptied once in 15 minutes: the receiver is "
                "down, slow or answering errors, and the advisor keeps retrying. Waiting notifications are dropped "
                "when their retention ends.",
            ),
            comments=("The outbox never emptied in 15 minutes: its head is being retried.",),
        ),
    ]


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


def _notes(alert: str, summary: str, description: str) -> dict[str, str]:
    return {
        r.ANNOTATION_SUMMARY: summary,
        r.ANNOTATION_DESCRIPTION: description,
        r.ANNOTATION_RUNBOOK_URL: r.runbook_url(alert),
    }


# --- entry points -------------------------------------------------------------------------------------------


def _manifests(inp: RulesInput, files: Sequence[RuleFile]) -> tuple[tuple[Manifest, ...], list[str], list[str]]:
    """The KEDA ScaledObjects, the HPA example and the PrometheusRule (:mod:`advisor.manifests`), one line for the
    Kubernetes deployments without an ``autoscaling:`` block (:func:`advisor.manifests.opt_in_note`: opt-in), and
    a warning per deployment with one that gets no ScaledObject or HPA
    (:func:`advisor.manifests.scale_target_problem`: not on
    Kubernetes, not a Kubernetes name, too long for KEDA) or whose settings act against the signal
    (:func:`advisor.manifests.autoscaling_warnings`)."""
    settings: list[Autoscaling] = []
    warnings: list[str] = []
    unasked = [d.name for d in inp.deployments if d.autoscaling is None and d.platform == c.PLATFORM_KUBERNETES]
    note = opt_in_note(unasked)
    told = [note] if note is not None else []
    for dep in inp.deployments:
        if dep.autoscaling is None:
            continue
        problem = scale_target_problem(dep.autoscaling)
        if problem is None:
            settings.append(dep.autoscaling)
            warnings += autoscaling_warnings(dep.autoscaling)
        else:
            warnings.append(problem)
    notes = ("", "Warnings:", *(f"- {w}" for w in (*told, *warnings))) if told or warnings else ()
    keda = Manifest(
        r.FILE_KEDA,
        (
            *_banner(inp),
            "",
            "KEDA ScaledObjects (keda.sh/v1alpha1, KEDA >= 2.17 for fallback.behavior): each engine Deployment scaled",
            f"on {c.DESIRED_REPLICAS}, the replica count the advisor advises. An empty answer (advisor down, data",
            'not fresh) is an error (ignoreNullValues: "false"), and after fallback.failureThreshold errors KEDA',
            "holds max(current, fallback.replicas) replicas: an advisor outage never scales an engine down.",
            "Apply in the engines' namespace. Fields: advisor/manifests.py; README, Autoscaling.",
            *notes,
        ),
        tuple(scaled_object(a) for a in settings),
    )
    hpas = Manifest(
        r.FILE_HPA,
        (
            *_banner(inp),
            "",
            "An example: plain autoscaling/v2 HPAs on the external metric "
            f"{c.DESIRED_REPLICAS}, without KEDA. Needs an",
            "external-metrics adapter; prometheus-adapter's config for it:",
            "",
            *(f"  {line}" for line in _ADAPTER_RULE),
            "",
            "Do not apply an HPA to a Deployment that a KEDA ScaledObject scales (KEDA creates its own HPA).",
            *notes,
        ),
        tuple(hpa(a) for a in settings),
    )
    groups = [{"name": g.name, "rules": [x.as_dict() for x in g.rules]} for f in files for g in f.groups]
    rule = Manifest(
        r.FILE_PROMETHEUS_RULE,
        (
            *_banner(inp),
            "",
            f"The rule groups of {', '.join(f.name for f in files)} as one prometheus-operator PrometheusRule.",
            "prometheus-operator loads it when its labels match the Prometheus's ruleSelector (kube-prometheus-stack:",
            "add `release: <your release name>`).",
        ),
        (prometheus_rule(r.PROMETHEUS_RULE_NAME, groups),),
    )
    return (keda, hpas, rule), warnings, told


def generate(inp: RulesInput) -> Generated:
    """Every rule file and manifest for ``inp`` and the warnings to report (see the module docstring)."""
    slo, warnings = _slo_file(inp)
    files = (_recording_file(inp), slo, _advisor_file(inp))
    manifests, more, notes = _manifests(inp, files)
    return Generated(files, tuple(dict.fromkeys((*warnings, *more))), manifests, tuple(notes))


_PLAIN: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/-]*$")
_YAML_WORDS: Final = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})


def _scalar(value: str) -> str:
    if _PLAIN.match(value) and value.lower() not in _YAML_WORDS and yaml.safe_load(value) == value:
        return value
    return json.dumps(value, ensure_ascii=False)


def render(f: RuleFile) -> str:
    """The file as YAML: header comments, then groups; every ``expr`` a literal block, comments above rules.

    ``yaml.safe_load(render(f)) == f.as_dict()`` (a test holds this).
    """
    out: list[str] = [("# " + line).rstrip() for line in f.header]
    out.append("groups:")
    for g in f.groups:
        out.append(f"  - name: {_scalar(g.name)}")
        if not g.rules:
            out.append("    rules: []")
            continue
        out.append("    rules:")
        for rule in g.rules:
            out.extend(f"      # {line}".rstrip() for line in rule.comments)
            head = f"record: {_scalar(rule.record)}" if rule.record else f"alert: {_scalar(rule.alert or '')}"
            out.append(f"      - {head}")
            out.append("        expr: |-")
            out.extend(_indent(rule.expr, 10).splitlines())
            if rule.for_:
                out.append(f"        for: {_scalar(rule.for_)}")
            for key, mapping in (("labels", rule.labels), ("annotations", rule.annotations)):
                if mapping:
                    out.append(f"        {key}:")
                    out.extend(f"          {k}: {_scalar(v)}" for k, v in mapping.items())
    return "\n".join(out) + "\n"


def render_all(generated: Generated) -> dict[str, str]:
    """File name (a path under the output folder) → text for every generated file and manifest."""
    return {**{f.name: render(f) for f in generated.files}, **{m.name: render_manifest(m) for m in generated.manifests}}
