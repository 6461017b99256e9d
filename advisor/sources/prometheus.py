"""A Prometheus-compatible HTTP API as a source (Prometheus, Thanos, Mimir, VictoriaMetrics).

The source rebuilds, from data Prometheus already holds, the *same* histories the scraper produces: per
target (grouped by ``instance`` by default) a list of ``(timestamp, Exposition)``, where an
:data:`~advisor.domain.Exposition` is exactly what :func:`advisor.sources.exposition.parse_exposition`
would have made of that target's ``/metrics`` at that time. Adapters, telemetry and rules do not know
which source fed them.

One cycle for one deployment costs **one** ``/api/v1/query_range`` request, however many engine instances
the selector matches (one per batch with :meth:`PrometheusSource.history_batches`, when they are too many for one
answer), and asks only for the evaluation times since the previous cycle, up to now (:func:`incremental_range`)::

    {__name__=~"up|vllm:kv_cache_usage_perc|vllm:num_requests_running|…", job="vllm", namespace="prod"}

Once a target's window is filled, :meth:`PrometheusSource.latest` reads instead the newest sample of each series
from ``GET /federate`` (text exposition format, one line per series with its millisecond timestamp; Prometheus and
VictoriaMetrics serve it, Thanos Querier and Mimir answer 404): about half the bytes of a two-point range answer
and a third of its decoding, each target's point stamped with its scrape's time (:func:`groups_from_federation`).

Reshaping (:func:`histories_from_matrix`, pure) — example matrix entry and what it becomes::

    {"metric": {"__name__": "vllm:time_to_first_token_seconds_bucket", "job": "vllm",
                "instance": "10.0.0.5:8000", "engine": "0", "model_name": "m", "le": "+Inf"},
     "values": [[1700000000, "41"], [1700000015, "44"]]}
    {"metric": {"__name__": "up", "job": "vllm", "instance": "10.0.0.5:8000"}, "values": [...]}

    → group "10.0.0.5:8000": [(1700000000.0, {"vllm:time_to_first_token_seconds_bucket":
                                   [Sample(…, {"engine": "0", "model_name": "m", "le": "+Inf"}, 41.0)]}),
                               (1700000015.0, {…: [Sample(…, 44.0)]})]

* ``__name__`` becomes the sample name; values (strings in the API: ``"NaN"``, ``"+Inf"``, ``"1e+06"``)
  become floats; ``le`` stays a string and the adapters parse it with ``float()`` as they do for a scrape
  (``"1"``, ``"1.0"`` and Prometheus 3's normalised ``"1.0"`` are the same bound).
* **Target labels are dropped, engine labels kept.** The labels Prometheus attached to a target (``job``,
  ``instance`` and whatever service discovery and relabelling added: ``namespace``, ``pod`` …) are read
  from that target's ``up`` series, fetched in the same query; without an ``up`` series (a store that does
  not keep it, or a selector on engine labels) ``job`` and ``instance`` are dropped. The group-by labels and
  ``drop_labels`` are always dropped. An engine label that collided with a target label was renamed
  ``exported_<name>`` by Prometheus; it gets its own name back.
* A series repeated inside one group after dropping (two jobs scraping one target) is read once, with a
  warning: at each time from a job that was up then; the target is up when any of its jobs is, and the jobs down
  meanwhile are named (:attr:`PromGroup.down_jobs`). Native-histogram series (no classic buckets) are skipped
  with a warning.
* Series come in the API's order (sorted by labels), not the engine's: with several models behind one
  engine pass ``model`` explicitly rather than relying on "the first".

Time: ``query_range`` evaluates at ``start, start + step, …, end``; each point holds the newest sample at
or before that time (within Prometheus's 5-minute look-back). A point is stamped with the time of the raw scrape it
shows (:data:`SCRAPE_TIME`, below), as a direct scrape and a ``/federate`` point are, so a window's increase ÷ its
span is the engine's rate whichever read gave its ends (``tests/sources/test_prometheus_real.py`` measures it); only a
store that cannot say when it scraped (no ``up`` series) leaves the evaluation time, up to one of its scrape intervals
later than the scrape. A target that went down drops out (its series
are marked stale), as a failed scrape adds nothing to the scraper's history.

One point per raw scrape: when the store scrapes a target less often than ``step`` (a late scrape on a loaded
machine, a longer scrape interval, remote-write or ingestion delay), consecutive points repeat one scrape, and its
counters would read flat while requests run — still intervals to the stall check, a zero per-interval rate. The
query therefore also asks for ``timestamp(up{…})`` (:data:`SCRAPE_TIME`: the raw scrape's own time in both
Prometheus and VictoriaMetrics), and a point showing the same scrape as the point before it is dropped
(:func:`histories_from_matrix`; across reads ``Service._apply_groups``), so the history holds the real scrapes,
as direct scraping would. A store that cannot say (no ``up`` series for the selector) keeps every point; a scrape
time that is no unix time at or before its point (``NaN``, garbage, negative: :func:`_scrape_times`) costs that
point of that target, with a warning, not the answer. With an advisor ``scrape_interval`` shorter than the
store's, the newest point then ages up to one store interval between scrapes (``data_quality.stale_after_intervals``
judges it): set it to the store's scrape interval.

VictoriaMetrics (``tests/sources/test_victoriametrics_real.py``): it is asked not to move ``start`` and ``end``
to multiples of ``step`` (:data:`VM_NO_ALIGN_PARAM`); it must run with ``-search.latencyOffset=0s`` (its default,
``30s``, hides the newest samples from queries); it keeps about 12 significant digits of a value (``1/3`` reads
back as ``0.333333333333``), so its gauges equal a scrape's within a relative 1e-11.

Errors never raise into the loop: :meth:`PrometheusSource.history` and :meth:`PrometheusSource.metric_names`
return a result with ``ok=False`` and one reason from :data:`advisor.conventions.SCRAPE_ERROR_REASONS`::

    reason               when
    ───────────────────  ───────────────────────────────────────────────────────────────────────────
    connection_refused   no connection: refused, DNS, reset, TLS failure (the message says which)
    timeout              connect or read timeout, the body passing its deadline, or the API's own
                         ``errorType: timeout`` (query evaluation took too long)
    http_status          a non-2xx status or a redirect, or ``status: error`` from the API; the message
                         carries the API's ``errorType`` and ``error`` (``bad_data``: a bad regex …)
    too_large            the response passed ``max_bytes``
    parse_error          not JSON, or JSON not shaped as the API documents

Programming and configuration errors — an invalid selector, ``end < start``, a step giving more than
11,000 points — raise :class:`ValueError` when the call is made; check selectors at configuration time with
:func:`advisor.sources.promql.validate_selector`.

Secrets: the bearer token and the password are sent, never shown. Messages are composed here from the
failure class and the API's error text with the token, the password and any ``Authorization`` value
scrubbed; ``repr()`` shows the base URL without user-info or query.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import json
import math
import operator
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import requests

from advisor.conventions import (
    REASON_HTTP_STATUS,
    REASON_NAN_VALUES,
    REASON_PARSE_ERROR,
    REASON_TIMEOUT,
    REASON_TOO_LARGE,
)
from advisor.domain import Exposition, Sample, TimedSnapshot
from advisor.engines.base import EngineAdapter
from advisor.engines.common import _FirstSamples, first_samples
from advisor.errors import ParseError

# the HTTP edge shared with the scraper: one deadline over the whole request, one byte cap, one redaction
from advisor.http_edge import (
    DeadlineAdapter,
    EdgeDecodeError,
    EdgeError,
    EdgeLimits,
    EdgeTimeoutError,
    EdgeTooLargeError,
    open_stream,
    read_capped,
    use_deadline_adapter,
)
from advisor.observe import observe
from advisor.redact import outside_text, redact_url
from advisor.sources.promql import (
    LABEL_NAME_RE,
    LabelMatcher,
    match_selector,
    parse_selector,
    re2_escape,
    vector_selector,
)
from advisor.sources.selective_parser import _BLANK_OK, FrozenLabels, _Blank

UP: Final = "up"
"""The series Prometheus writes per target and scrape; its labels are the target's labels."""

SCRAPE_TIME: Final = "advisor_scrape_timestamp_seconds"
"""The name :meth:`PrometheusSource.history` gives, in its answer, to ``timestamp(up{<selector>})``: per target and
evaluation time, the unix time (seconds, millisecond precision) of the raw scrape the point shows — the identity of
that scrape. Prometheus (2.42) and VictoriaMetrics (1.79) both answer the raw sample's own time, not the evaluation
time (measured: store scraping every 4 s, ``step`` 1 s: the value changes once per scrape).
``scrape_duration_seconds`` was rejected as an identity: VictoriaMetrics keeps it to the millisecond, so
consecutive scrapes of a fast target read the same value (measured: ``0.002`` on four scrapes in a row)."""

SCRAPE_TIME_MARK: Final = ("advisor_series", "scrape_time")
"""A label put on the :data:`SCRAPE_TIME` series inside the query: PromQL's ``or`` matches series on their labels
without ``__name__``, so without it ``timestamp(up)`` would match ``up`` itself and be dropped."""

DEFAULT_TARGET_LABELS: Final = ("job", "instance")
"""Dropped from engine series when a group has no ``up`` series to name its target labels."""

VM_NO_ALIGN_PARAM: Final = "nocache"
"""``query_range`` parameter keeping VictoriaMetrics's points at ``start + k × step``: without ``nocache=1`` it
moves ``start`` and ``end`` to multiples of ``step`` for queries of 50 points or more (VictoriaMetrics
``app/vmselect/promql`` ``AdjustStartEnd``; victoriametrics-datasource v0.26.0 release notes). Other
Prometheus-compatible APIs ignore it."""

MIN_POINT_GAP_STEPS: Final = 0.5
"""A point read from a store is appended to a target's history only when it is at least this many steps newer
than the target's newest point (:func:`incremental_range`): a re-read of the same sample at a later evaluation
time is not a new interval."""

MAX_POINTS_PER_SERIES: Final = 11_000
"""Prometheus refuses ``query_range`` calls resolving to more points per series than this."""

_ERROR_CHARS: Final = 200

Wanted = Callable[[str], bool] | Collection[str]
"""Which metric names to fetch: the names themselves, or an adapter's ``wants`` predicate."""


# --- results ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromGroup:
    """One target's history as Prometheus holds it.

    Attributes:
        labels: the group-by labels and their values (``{"instance": "10.0.0.5:8000"}``).
        target: the name to give its :class:`~advisor.domain.TimedSnapshot` values: the ``instance`` value
            when grouping by ``instance`` alone, else ``label=value`` pairs joined by ``,``.
        points: ``(time, Exposition)`` in time order; only times with engine samples. The time is the raw scrape's
            (:attr:`scraped`) where the store says it, as a direct scrape and a ``/federate`` point are stamped, else
            the evaluation time.
        up: ``(evaluation time, up value)`` in time order (``1`` scraped, ``0`` scrape failed); empty when
            the store has no ``up`` series for the target. With several scrape jobs on the target (one ``up``
            series each) the target is up when any job is: its engine series are read from the jobs up.
        dropped_labels: the label names removed from the engine's series (target and group-by labels).
        scraped: one per point: the unix time of the raw scrape the point shows (:data:`SCRAPE_TIME`; a
            ``/federate`` point's own time), ``nan`` where the store did not say; ``()`` when it said for none
            (a store without ``up``, a stand-in). Two points showing one scrape are one observation
            (:func:`same_scrape`).
        error: why this target's part of the answer could not be read (a ``/federate`` sample without a
            timestamp), naming the target; its points are then ``()``, and the caller fails this target alone.
            ``None`` when read.
        down_jobs: the target's scrape jobs (``job`` label values) whose newest ``up`` is 0 while another job's
            is 1: the target reads up, from the other job, and these are named in its state.
    """

    labels: Mapping[str, str]
    target: str
    points: tuple[tuple[float, Exposition], ...]
    up: tuple[tuple[float, float], ...] = ()
    dropped_labels: frozenset[str] = frozenset()
    scraped: tuple[float, ...] = ()
    error: str | None = None
    down_jobs: tuple[str, ...] = ()

    def scrape_of(self, i: int) -> float:
        """The raw scrape time of point ``i`` (``nan`` when unknown)."""
        return self.scraped[i] if self.scraped else math.nan


@dataclass(frozen=True, slots=True)
class MatrixHistories:
    """What :func:`histories_from_matrix` made of one matrix: the groups, and what it had to skip."""

    groups: tuple[PromGroup, ...]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PromHistory:
    """The outcome of :meth:`PrometheusSource.history`.

    Attributes:
        ok: the API answered with a usable matrix.
        groups: one :class:`PromGroup` per target, sorted by ``target``; ``()`` when not ``ok`` — except from
            :meth:`PrometheusSource.history_batches`, where they are the targets of the batches that answered.
        query: the PromQL sent (no secrets: label matchers and metric names only).
        error_reason: one of ``advisor.conventions.SCRAPE_ERROR_REASONS`` when not ``ok``.
        error_message: a short cause, free of credentials; ``None`` when ``ok``.
        duration_seconds: wall time of the call, every request included (monotonic clock).
        status_code: the HTTP status of the last response, when one arrived.
        warnings: the API's ``warnings`` plus what the reshaping skipped.
        queries: HTTP requests this call made (1, or 2 when ``wanted`` was a predicate; one per batch for
            :meth:`PrometheusSource.history_batches`).
        response_bytes: decoded size of the ``query_range`` answer (what ``max_bytes`` caps); summed over the
            batches of :meth:`PrometheusSource.history_batches`.
        failed: :meth:`PrometheusSource.history_batches` only — the instances (values of the first ``group_by``
            label) whose batch failed, sorted; ``error_reason``/``error_message`` are the first failure's.
    """

    ok: bool
    groups: tuple[PromGroup, ...] = ()
    query: str = ""
    error_reason: str | None = None
    error_message: str | None = None
    duration_seconds: float = 0.0
    status_code: int | None = None
    warnings: tuple[str, ...] = ()
    queries: int = 0
    response_bytes: int = 0
    failed: tuple[str, ...] = ()

    def group(self, target: str) -> PromGroup | None:
        """The group named ``target``, or ``None``."""
        return next((g for g in self.groups if g.target == target), None)


@dataclass(frozen=True, slots=True)
class PromNames:
    """The outcome of :meth:`PrometheusSource.metric_names`: the metric names that exist for a selector."""

    ok: bool
    names: frozenset[str] = frozenset()
    error_reason: str | None = None
    error_message: str | None = None
    duration_seconds: float = 0.0
    status_code: int | None = None
    warnings: tuple[str, ...] = ()


# --- pure reshaping -------------------------------------------------------------------------------------------


@dataclass
class _GroupBuild:
    up_labels: set[str] = field(default_factory=set)
    ups: list[tuple[Mapping[str, str], dict[float, float]]] = field(default_factory=list)  # per up series (job)
    scraped: list[dict[float, float]] = field(default_factory=list)  # per SCRAPE_TIME series (one per scrape job)
    bad_scraped: list[tuple[float, Any]] = field(default_factory=list)  # (evaluation time, value): no scrape time
    series: list[tuple[str, dict[str, str], list[tuple[float, float]]]] = field(default_factory=list)


def _number(raw: Any, what: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ParseError(f"{what}: expected a number or numeric string, got {type(raw).__name__}")
    try:
        return float(raw)
    except ValueError:
        raise ParseError(f"{what}: not a number: {str(raw)[:40]!r}") from None


_PAIR_TYPES: Final = frozenset({list})
_TIME_TYPES: Final = frozenset({int, float})
_VALUE_TYPES: Final = frozenset({str, int, float})
_LABEL_TYPES: Final = frozenset({str})


def _values(raw: Any, where: str) -> list[tuple[float, float]]:
    if not isinstance(raw, list):
        raise ParseError(f"{where}: 'values' is not a list")
    # fast path, type checks at C speed (a fleet's answer holds millions of pairs): every pair a 2-list of a
    # number and a numeric string, as the API writes them; anything else takes the loop below, which says where
    if set(map(type, raw)) <= _PAIR_TYPES and set(map(len, raw)) <= {2}:
        times = [p[0] for p in raw]
        values = [p[1] for p in raw]
        if set(map(type, times)) <= _TIME_TYPES and set(map(type, values)) <= _VALUE_TYPES:
            with contextlib.suppress(ValueError):
                floats = list(map(float, times))
                if all(map(math.isfinite, floats)):
                    return list(zip(floats, map(float, values), strict=True))
    out: list[tuple[float, float]] = []
    for j, pair in enumerate(raw):
        out.append((_pair_time(pair, j, where), _number(pair[1], f"{where} value {j}")))
    return out


def _pair_time(pair: Any, j: int, where: str) -> float:
    """The time of ``pair``, the ``j``-th ``[time, "value"]`` pair of a range answer's series at ``where``.

    Raises:
        ParseError: ``pair`` is not a two-item list, or its time is not a finite number.
    """
    if not isinstance(pair, list) or len(pair) != 2:
        raise ParseError(f'{where}: value {j} is not a [time, "value"] pair')
    t = _number(pair[0], f"{where} value {j} time")
    if not math.isfinite(t):
        raise ParseError(f"{where}: value {j} time is not finite")
    return t


SCRAPE_TIME_SLACK: Final = 1.0
"""Seconds a :data:`SCRAPE_TIME` value may pass its evaluation time (a point shows a sample at or before it; the
store rounds times to the millisecond): later, it is no scrape time (:func:`_scrape_times`)."""


def _scrape_times(raw: Any, where: str) -> tuple[dict[float, float], list[tuple[float, Any]]]:
    """A :data:`SCRAPE_TIME` series' values: evaluation time → raw scrape time, and the ``(evaluation time, value)``
    pairs whose value is no scrape time — not a number (``"garbage"``), ``NaN``, ``±Inf``, not positive, or more
    than :data:`SCRAPE_TIME_SLACK` after its evaluation time. Those are left out (their points' scrapes are then
    unknown, and the points are left out: :func:`_one_per_scrape`) rather than failing the answer.

    Raises:
        ParseError: ``raw`` is not a list of ``[time, value]`` pairs with finite times.
    """
    try:
        pairs: list[tuple[float, float]] | None = _values(raw, where)
    except ParseError:
        pairs = None
    if pairs is not None and all(0.0 < s <= t + SCRAPE_TIME_SLACK for t, s in pairs):
        return dict(pairs), []
    if not isinstance(raw, list):
        raise ParseError(f"{where}: 'values' is not a list")
    good: dict[float, float] = {}
    bad: list[tuple[float, Any]] = []
    for j, pair in enumerate(raw):
        t = _pair_time(pair, j, where)
        try:
            s = _number(pair[1], where)
        except ParseError:
            s = math.nan
        if 0.0 < s <= t + SCRAPE_TIME_SLACK:
            good[t] = s
        else:
            bad.append((t, pair[1]))
    return good, bad


def _job_name(labels: Mapping[str, str]) -> str:
    """An ``up`` series' scrape job as an operator knows it: its ``job`` label, else all its labels."""
    return labels.get("job") or "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def _up_of(
    ups: Sequence[tuple[Mapping[str, str], dict[float, float]]], metric: Mapping[str, str]
) -> dict[float, float]:
    """The ``up`` values of the scrape job whose target labels ``metric`` carries (``{}`` when none does)."""
    for labels, values in ups:
        if all(metric.get(k) == v for k, v in labels.items()):
            return values
    return {}


def _from_jobs_up(
    copies: Sequence[tuple[Mapping[float, float], list[tuple[float, float]]]],
) -> list[tuple[float, float]]:
    """One engine series scraped by several jobs (its copies in answer order, each with its job's ``up``): at each
    time the value of the first copy whose job was not down then (``up`` 1 or unknown), else of the first copy.
    A job that is down has stale copies (VictoriaMetrics serves them through its look-back); both copies up, the
    first is read, as before."""
    best: dict[float, tuple[bool, float]] = {}
    for up, values in copies:
        for t, v in values:
            down = up.get(t) == 0.0
            held = best.get(t)
            if held is None or (held[0] and not down):
                best[t] = (down, v)
    return sorted((t, v) for t, (_, v) in best.items())


def _target_name(labels: Mapping[str, str], group_by: Sequence[str]) -> str:
    if tuple(group_by) == ("instance",):
        return labels["instance"]
    return ",".join(f"{k}={v}" for k, v in labels.items())


def _engine_labels(metric: Mapping[str, str], drop: frozenset[str]) -> dict[str, str]:
    labels = {k: v for k, v in metric.items() if k not in drop}
    for k in [k for k in labels if k.startswith("exported_")]:
        original = k[len("exported_") :]
        if original in drop and original not in labels:
            labels[original] = labels.pop(k)
    return labels


def histories_from_matrix(
    data: Any,
    group_by: Sequence[str] = ("instance",),
    drop_labels: Collection[str] = (),
) -> MatrixHistories:
    """Turn a ``query_range`` matrix into per-target histories of expositions (see the module docstring).

    Args:
        data: the ``data`` member of a successful ``/api/v1/query_range`` answer:
            ``{"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"], ...]}, ...]}``.
        group_by: labels whose values name a target (a series without one has ``""`` for it).
        drop_labels: further label names to remove from every engine series.

    Returns:
        The groups sorted by target name (a target with only an ``up`` series has no points), and warnings
        for skipped native-histogram and duplicate series. With a :data:`SCRAPE_TIME` series for a target, a
        point showing the same raw scrape as the point before it is dropped (:func:`_one_per_scrape`) and each
        kept point's scrape time is in :attr:`PromGroup.scraped`.

    Raises:
        ParseError: ``data`` is not shaped as the API documents (the message says where).
    """
    if not isinstance(data, Mapping):
        raise ParseError("query_range data is not an object")
    if data.get("resultType") != "matrix":
        raise ParseError(f"expected a matrix result, got resultType {data.get('resultType')!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise ParseError("query_range data.result is not a list")
    group_by = tuple(group_by)
    builds: dict[tuple[str, ...], _GroupBuild] = {}
    native = 0
    for i, item in enumerate(result):
        where = f"series {i}"
        if not isinstance(item, Mapping):
            raise ParseError(f"{where} is not an object")
        metric = item.get("metric")
        if not isinstance(metric, Mapping) or not (
            set(map(type, metric)) <= _LABEL_TYPES and set(map(type, metric.values())) <= _LABEL_TYPES
        ):
            raise ParseError(f"{where}: 'metric' is not an object of string labels")
        name = metric.get("__name__")
        if not name:
            raise ParseError(f"{where} has no __name__ (a query that drops metric names cannot be read)")
        where = f"series {i} ({name})"
        if "values" not in item:
            if "histograms" in item:
                native += 1
                continue
            raise ParseError(f"{where} has no 'values'")
        key = tuple(metric.get(label, "") for label in group_by)
        build = builds.setdefault(key, _GroupBuild())
        if name == SCRAPE_TIME and metric.get(SCRAPE_TIME_MARK[0]) == SCRAPE_TIME_MARK[1]:
            times, wrong = _scrape_times(item["values"], where)  # a bad value costs its point, not the answer
            build.scraped.append(times)
            build.bad_scraped.extend(wrong)
            continue
        values = _values(item["values"], where)
        if name == UP:
            build.up_labels.update(k for k in metric if k != "__name__")
            build.ups.append(({k: v for k, v in metric.items() if k != "__name__"}, dict(values)))
            continue
        build.series.append((name, dict(metric), values))

    warnings: list[str] = []
    if native:
        warnings.append(f"skipped {native} native-histogram series (only classic histograms are read)")
    groups: list[PromGroup] = []
    for key, build in builds.items():
        target_labels = build.up_labels or set(DEFAULT_TARGET_LABELS)
        drop = frozenset({"__name__", *group_by, *drop_labels, *target_labels})
        labels = dict(zip(group_by, key, strict=True))
        target = _target_name(labels, group_by)
        by_time: dict[float, dict[str, list[Sample]]] = {}
        # each engine series once: (name, engine labels) → its copies (several when two jobs scrape the target)
        copies: dict[tuple[str, frozenset[tuple[str, str]]], list[tuple[dict[str, str], dict[str, str], Any]]] = {}
        for name, metric, values in build.series:
            engine_labels = _engine_labels(metric, drop)
            copies.setdefault((name, frozenset(engine_labels.items())), []).append((engine_labels, metric, values))
        duplicates = 0
        for (name, _), same in copies.items():
            engine_labels, _, values = same[0]
            if len(same) > 1:  # read from the job up at each time (_from_jobs_up)
                duplicates += len(same) - 1
                values = _from_jobs_up([(_up_of(build.ups, metric), vs) for _, metric, vs in same])
            for t, v in values:
                by_time.setdefault(t, {}).setdefault(name, []).append(Sample(name, engine_labels, v))
        if duplicates:
            warnings.append(
                f"{target}: {duplicates} series repeated once target labels were dropped (two scrape jobs on one "
                "target?); read once"
            )
        points, scraped, unknown = _one_per_scrape(sorted(by_time.items()), build.scraped)
        bad = len({t for t, _ in build.bad_scraped} & by_time.keys())
        if build.bad_scraped:
            t, raw = build.bad_scraped[0]
            warnings.append(
                f"{target}: {len(build.bad_scraped)} scrape time(s) ({SCRAPE_TIME}, timestamp(up)) not a unix time at "
                f"or before their evaluation time (first: {str(raw)[:40]!r} at {t:.3f}); the {bad} point(s) at those "
                "times left out: their scrape is unknown"
            )
        if unknown > bad:
            warnings.append(
                f"{target}: {unknown - bad} point(s) without a scrape time (no up sample at that time) left out: a "
                "point whose scrape is unknown could re-read the one before it"
            )
        up, down = _merged_up(build.ups)
        groups.append(
            PromGroup(
                labels=labels,
                target=target,
                points=points,
                up=up,
                dropped_labels=drop - {"__name__"},
                scraped=scraped,
                down_jobs=down,
            )
        )
    groups.sort(key=lambda g: g.target)
    return MatrixHistories(groups=tuple(groups), warnings=tuple(warnings))


def _merged_up(
    ups: Sequence[tuple[Mapping[str, str], Mapping[float, float]]],
) -> tuple[tuple[tuple[float, float], ...], tuple[str, ...]]:
    """A target's ``up`` by evaluation time from its ``up`` series (one per scrape job): 1 at a time when any job
    scraped it then, else the jobs' value; and the jobs down at the newest time while another is up
    (:attr:`PromGroup.down_jobs`). Example: ``vllm`` 1, 1 and ``vllm-probe`` 0, 0 → up 1, 1, down ``vllm-probe``."""
    if len(ups) == 1:
        return tuple(sorted(ups[0][1].items())), ()
    merged: dict[float, float] = {}
    for _, values in ups:
        for t, v in values.items():
            merged[t] = v if merged.get(t, 0.0) != 1.0 else 1.0
    if not merged:
        return (), ()
    newest = max(merged)
    down = sorted({_job_name(labels) for labels, values in ups if values.get(newest) == 0.0})
    return tuple(sorted(merged.items())), tuple(down) if merged[newest] == 1.0 else ()


SAME_SCRAPE_SECONDS: Final = 0.0005
"""Two raw scrape times closer than this are one scrape: both stores keep sample times in whole milliseconds
(``timestamp()`` answers seconds with three decimals, ``/federate`` integer milliseconds)."""


def same_scrape(a: float, b: float) -> bool:
    """Whether two raw scrape times (:attr:`PromGroup.scraped`) name one scrape; ``nan`` (unknown) is never the
    same as anything."""
    return abs(a - b) < SAME_SCRAPE_SECONDS


def _one_per_scrape(
    points: list[tuple[float, Exposition]], scraped_at: Sequence[Mapping[float, float]]
) -> tuple[tuple[tuple[float, Exposition], ...], tuple[float, ...], int]:
    """Drop each point that shows the same raw scrape as the point before it (of its target).

    ``query_range`` fills every evaluation time with the newest sample at or before it, so when the store's own
    scrape is slower than ``step`` (a late scrape on a loaded machine, a longer scrape interval, remote-write or
    ingestion delay) consecutive points repeat one scrape: every counter reads flat while requests run, which the
    stall check (``advisor.evaluate.stall_span``) counts as still intervals, and a per-interval rate reads 0 for
    that step. Kept: the first point showing each scrape, so the history holds one point per real scrape, as the
    scraper's would. An engine that really stalls still answers new scrapes (new times, same values): kept.

    Example: points at 100, 101, 102, 103 showing scrapes at 99.5, 99.5, 101.5, 101.5 → points 100 and 102.
    Without scrape times (``scraped_at`` empty: a store without ``up``) every point is kept, as before, and
    ``scraped`` is ``()``. With scrape times for some points only, a point without one (or with ``nan``) is left
    out and counted (its scrape is unknown: it may re-read the one before it; a point lost costs coverage, a
    re-read counted as new reads as a stall), and so is a point whose scrape is not newer than the last kept one
    (a store's answer cannot go back in time for one target). Returns ``(points kept, their scrape times, points
    left out for an unknown scrape time)``.

    ``scraped_at`` holds one mapping (point time → scrape time) per scrape-time series of the target: several when
    two scrape jobs scrape one target. The series kept are one job's, but which one's is not known here, so a point
    is new only when every job's scrape is new (a job scraping more often than another then loses points to it:
    coverage, never a re-read), and its scrape time is the oldest of them.
    """
    if not scraped_at:
        return tuple(points), (), 0
    kept: list[tuple[float, Exposition]] = []
    scraped: list[float] = []
    lasts = [-math.inf] * len(scraped_at)
    unknown = 0
    for t, expo in points:
        ats = [m.get(t, math.nan) for m in scraped_at]
        if any(math.isnan(at) for at in ats):
            unknown += 1
            continue
        if any(same_scrape(at, last) or at < last for at, last in zip(ats, lasts, strict=True)):
            continue
        # stamped with its scrape's time, as a /federate point and a direct scrape are: an evaluation time is up to
        # one store interval later, and a window from a range point to a /federate one read that much short
        # (breaker 15: 600 tokens/s read as 628–890 by once, +57 % over two targets)
        kept.append((min(ats), expo))
        scraped.append(min(ats))
        lasts = ats
    return tuple(kept), tuple(scraped), unknown


def prometheus_down(up: float) -> tuple[str, str]:
    """``(reason, message)`` for a target the store does not show up: its newest ``up`` is 0 (the store's scrape
    failed), not 0 or 1 (``NaN``: breaker 15 saw it reported as "up == 0"), or 1 with no engine sample held.

    Example: ``prometheus_down(math.nan)`` → ``("nan_values", "Prometheus's up for the target reads nan, …")``.
    """
    if math.isnan(up) or up not in (0.0, 1.0):
        return REASON_NAN_VALUES, f"Prometheus's up for the target reads {up!r}, neither 1 (scraped) nor 0 (failed)"
    if up == 0.0:
        return REASON_HTTP_STATUS, "Prometheus reports the target down (up == 0: its own scrape failed)"
    return REASON_HTTP_STATUS, "Prometheus reports the target up but holds no sample of its engine"


def to_timed_snapshots(
    group: PromGroup, adapter: EngineAdapter, model: str | None = None, configured_model: str | None = None
) -> list[TimedSnapshot]:
    """One :class:`~advisor.domain.TimedSnapshot` per point of ``group``: what the scraper's history holds.

    Each point goes through :func:`advisor.observe.observe`, as a scraped page does; a point that observes
    nothing (``served_model`` not among its models; several models and none chosen, as the daemon's
    ``strict`` rule says, with ``configured_model`` the deployment's ``model``) is left out. ``adapter`` is the
    deployment's adapter (``advisor.engines.get_adapter``); adapter exceptions propagate (the caller isolates
    them per target, as it does for scraped expositions).
    """
    out: list[TimedSnapshot] = []
    for t, expo in group.points:
        snap = observe(expo, adapter, model, configured_model=configured_model, strict=True).snapshot if expo else None
        if snap is not None:
            out.append(TimedSnapshot(group.target, t, snap))
    return out


# --- the federation endpoint: the newest sample of each series ---------------------------------------------------

_FED_LINE: Final = re.compile(
    r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+(-?[0-9]+))?[ \t]*$", re.MULTILINE
)
"""One sample line of the text exposition format with its optional millisecond timestamp: name, label body
(between the braces), value, timestamp."""

_FED_LABEL: Final = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(?:,|$)')
_FED_ESCAPE: Final = re.compile(r"\\(.)")
_FED_UNESCAPED: Final = {"n": "\n", "\\": "\\", '"': '"'}


def _fed_unescape(value: str) -> str:
    if "\\" not in value:
        return value
    return _FED_ESCAPE.sub(lambda m: _FED_UNESCAPED.get(m.group(1), "\\" + m.group(1)), value)


def _fed_labels(body: str, where: str) -> dict[str, str]:
    """``a="1",b="x\\"y"`` → ``{"a": "1", "b": 'x"y'}``; a leading or trailing comma is allowed."""
    body = body.strip(" \t,")
    labels: dict[str, str] = {}
    pos = 0
    for m in _FED_LABEL.finditer(body):
        if m.start() != pos:
            break
        labels[m.group(1)] = _fed_unescape(m.group(2))
        pos = m.end()
    if pos != len(body):
        raise ParseError(f"{where}: malformed labels {{{body[:80]}}}")
    return labels


def _federation_up(
    rows: Sequence[tuple[str, str, str]], labels_of: Callable[[str], Mapping[str, str]]
) -> tuple[tuple[tuple[float, float], ...], tuple[str, ...]]:
    """A target's ``up`` from its ``/federate`` up lines ``(label text, value, timestamp in ms)``, one per scrape
    job: ``((time, value),)``. With several jobs: the newest line's time, and 1 when any job's newest scrape
    succeeded (the engine's series come from that job), else the newest line's value; and the jobs down while
    another is up (:attr:`PromGroup.down_jobs`). Example: ``vllm`` 1 at …000 and ``vllm-probe`` 0 at …001 →
    ``((…001, 1.0),)``, down ``vllm-probe`` (before, the newest line's 0 read the target down).

    Raises:
        ValueError: a value or timestamp that is no number.
    """
    if len(rows) <= 1:
        return tuple((int(ts) / 1000, float(v)) for _, v, ts in rows), ()
    ups = sorted((int(ts) / 1000, float(v), body) for body, v, ts in rows)
    if not any(v == 1.0 for _, v, _ in ups):
        return ((ups[-1][0], ups[-1][1]),), ()
    down = sorted({_job_name(labels_of(body)) for _, v, body in ups if v == 0.0})
    return ((ups[-1][0], 1.0),), tuple(down)


def _fed_bad_line(text: str) -> str:
    """The first line of ``text`` that is neither a sample, a comment nor blank (for the error message)."""
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.startswith("#") and not _FED_LINE.fullmatch(line):
            return f"line {n} is not a sample: {line[:80]!r}"
    return "a line is not a sample"


def groups_from_federation(
    text: str,
    group_by: Sequence[str] = ("instance",),
    drop_labels: Collection[str] = (),
) -> MatrixHistories:
    """Turn a ``/federate`` answer (the newest sample of each series, text exposition format, each sample with its
    millisecond timestamp) into one point per target, reshaped as :func:`histories_from_matrix` does (target
    labels from the ``up`` series dropped, ``exported_`` names given back, a repeated series read once).

    Prometheus and VictoriaMetrics write ``name{labels} value timestamp_ms`` lines and ``# TYPE`` comments, every
    family ``untyped``: the sample names are the keys of the exposition, as a scrape's are.

    Time: a group's point is stamped with the newest timestamp among its engine samples (one scrape stamps all of
    them alike), its ``up`` with ``up``'s own. A group whose ``up`` is 0 at or after that time has no point:
    the engine's samples are the last ones before its scrapes began to fail (VictoriaMetrics still serves them).
    A target scraped by several jobs is up when one of them is (:func:`_federation_up`; the others are named in
    :attr:`PromGroup.down_jobs`), and a series both jobs hold is read from a job that is up.

    A sample without a timestamp (a proxy or store in between that drops them) cannot be placed in time: its
    target's group has no point and an :attr:`PromGroup.error` naming it; the other targets are read.

    Cost: the lines are matched at C speed; labels are parsed once per distinct label set with the group-by
    labels cut out, so every target's copy of one engine series shares one parse (and one labels dict).

    Raises:
        ParseError: a line that is not a sample or a comment, a value that is no number, or malformed labels.
    """
    group_by = tuple(group_by)
    if len(group_by) == 1:
        fast = _federation_by_one_label(text, group_by[0], drop_labels)
        if fast is not None:
            return fast
    return _federation_general(text, group_by, drop_labels)


@functools.lru_cache(maxsize=8)
def _keyed_line(label: str) -> re.Pattern[str]:
    """A sample line carrying ``label``, split around it: name, labels before it (ending in ``,`` or empty), its
    value, labels after it, the sample value and the timestamp. ``,label="`` cannot occur inside a label value
    (a value's quotes are escaped), so the first such text is the label."""
    return re.compile(
        r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{((?:.*?,)?)[ \t]*"
        + re.escape(label)
        + r'[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*,?(.*)\}[ \t]+(\S+)(?:[ \t]+(-?[0-9]+))?[ \t]*$',
        re.MULTILINE,
    )


def _sample_lines(text: str) -> int:
    """Lines of ``text`` that are neither comments nor empty (whitespace-only lines count: the caller then takes
    the general path, which tells them apart)."""
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    comments = text.count("\n#") + text.startswith("#")
    empty = text.count("\n\n") + text.startswith("\n")
    return lines - comments - empty


def _federation_by_one_label(text: str, label: str, drop_labels: Collection[str]) -> MatrixHistories | None:
    """:func:`groups_from_federation` grouped by one label, with one C-speed pass splitting every line around
    that label and one Python pass building the samples (labels parsed once per distinct label set). ``None``
    when the general path must decide: a line without the label or not a sample, or two series of one target
    equal once target labels are dropped (the general path reads them once, with a warning)."""
    rows = _keyed_line(label).findall(text)
    if len(rows) != _sample_lines(text):
        return None
    parsed: dict[str, dict[str, str]] = {}

    def labels_of(body: str) -> dict[str, str]:
        got = parsed.get(body)
        if got is None:
            got = parsed[body] = _fed_labels(body, "federation answer")
        return got

    ups: dict[str, list[tuple[str, str, str]]] = {}
    for name, pre, key, post, value, ts in rows:
        if not ts:
            return None  # a sample without a timestamp: the general path fails its target alone
        if name == UP:
            ups.setdefault(key, []).append((pre + post, value, ts))
    base = frozenset({"__name__", label, *drop_labels})
    drops: dict[frozenset[str], frozenset[str]] = {}
    drop_of: dict[str, frozenset[str]] = {}
    for key, up_rows in ups.items():
        names = frozenset(k for body, _, _ in up_rows for k in labels_of(body))
        drop = drops.get(names)
        if drop is None:
            drop = drops[names] = base | (names or frozenset(DEFAULT_TARGET_LABELS))
        drop_of[key] = drop
    no_up = base | frozenset(DEFAULT_TARGET_LABELS)
    # per drop set: "name{labels without the group label" → the engine labels (one dict shared by every target)
    caches: dict[frozenset[str], dict[str, Mapping[str, str]]] = {}
    owner: dict[tuple[str, frozenset[tuple[str, str]], frozenset[str]], str] = {}
    builds: dict[str, list[Any]] = {}  # key → [exposition, drop, its cache, newest timestamp text, as a number]
    try:
        for name, pre, key, post, value, ts in rows:
            if name == UP:
                continue
            b = builds.get(key)
            if b is None:
                drop = drop_of.get(key, no_up)
                b = builds[key] = [{}, drop, caches.setdefault(drop, {}), ts, int(ts)]
            ck = f"{name}{{{pre}{post}"
            kept = b[2].get(ck)
            if kept is None:
                body = pre + post
                kept = b[2][ck] = _engine_labels(labels_of(body), b[1])
                if owner.setdefault((name, frozenset(kept.items()), b[1]), body) != body:
                    return None  # two series equal once target labels are dropped
            if ts != b[3]:
                t = int(ts)
                if t > b[4]:
                    b[3], b[4] = ts, t
            samples = b[0].get(name)
            if samples is None:
                samples = b[0][name] = []
            samples.append(Sample(name, kept, float(value)))
        groups: list[PromGroup] = []
        for key in builds.keys() | ups.keys():
            up, down = _federation_up(ups.get(key, ()), labels_of)
            b = builds.get(key)
            at = b[4] / 1000 if b is not None else math.inf
            stale = bool(up) and up[-1][1] == 0.0 and up[-1][0] >= at
            drop = drop_of.get(key, no_up)
            groups.append(
                PromGroup(
                    labels={label: _fed_unescape(key)},
                    target=_fed_unescape(key) if label == "instance" else f"{label}={_fed_unescape(key)}",
                    points=((at, b[0]),) if b is not None and not stale else (),
                    up=up,
                    dropped_labels=drop - {"__name__"},
                    scraped=(at,) if b is not None and not stale else (),
                    down_jobs=down,
                )
            )
    except ValueError as exc:
        raise ParseError(f"federation answer: {exc}") from None
    groups.sort(key=lambda g: g.target)
    return MatrixHistories(groups=tuple(groups))


def _federation_general(text: str, group_by: tuple[str, ...], drop_labels: Collection[str]) -> MatrixHistories:
    """:func:`groups_from_federation` for any ``group_by``, one Python step per line."""
    cut = [re.compile(r"(?:^|,)[ \t]*" + re.escape(g) + r'[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"') for g in group_by]
    rows = _FED_LINE.findall(text)
    lines = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
    if len(rows) != lines:
        other = sum(1 for line in text.splitlines() if not line.strip() or line.lstrip().startswith("#"))
        if len(rows) != lines - other:
            raise ParseError(f"federation answer: {_fed_bad_line(text)}")
    parsed: dict[str, dict[str, str]] = {}
    builds: dict[tuple[str, ...], tuple[list[tuple[str, str, str, str]], list[tuple[str, str, str]]]] = {}
    untimed: dict[tuple[str, ...], list[str]] = {}  # per target: the names of its samples without a timestamp
    for name, body, value, ts in rows:
        values: list[str] = []
        for rx in cut:
            m = rx.search(body)
            if m is None:
                values.append("")
                continue
            values.append(_fed_unescape(m.group(1)))
            body = body[: m.start()] + body[m.end() :]
        series, ups = builds.setdefault(tuple(values), ([], []))
        if not ts:
            untimed.setdefault(tuple(values), []).append(name)
        elif name == UP:
            ups.append((body, value, ts))
        else:
            series.append((name, body, value, ts))

    warnings: list[str] = []
    groups: list[PromGroup] = []
    engine: dict[tuple[str, frozenset[str]], tuple[dict[str, str], frozenset[tuple[str, str]]]] = {}

    def labels_of(body: str) -> dict[str, str]:
        got = parsed.get(body)
        if got is None:
            got = parsed[body] = _fed_labels(body, "federation answer")
        return got

    for key, (series, up_rows) in builds.items():
        up_labels = {k for body, _, _ in up_rows for k in labels_of(body)}
        target_labels = up_labels or set(DEFAULT_TARGET_LABELS)
        drop = frozenset({"__name__", *group_by, *drop_labels, *target_labels})
        labels = dict(zip(group_by, key, strict=True))
        target = _target_name(labels, group_by)
        try:
            up, down_jobs = _federation_up(up_rows, labels_of)
        except ValueError as exc:
            raise ParseError(f"federation answer: {target}: up: {exc}") from None
        if key in untimed:
            names = untimed[key]
            groups.append(
                PromGroup(
                    labels=labels,
                    target=target,
                    points=(),
                    up=up,
                    dropped_labels=drop - {"__name__"},
                    down_jobs=down_jobs,
                    error=(
                        f"{target}: {len(names)} sample(s) of the /federate answer without a timestamp (first: "
                        f"{names[0]}): its point cannot be placed in time, so this target is not read this time "
                        "(Prometheus stamps every sample; a proxy or store in between may not)"
                    ),
                )
            )
            continue
        # two scrape jobs on the target: its up lines' labels and values, to read a repeated series from a job up
        jobs = [(labels_of(body), float(v)) for body, v, _ in up_rows] if len(up_rows) > 1 else []
        expo: dict[str, list[Sample]] = {}
        chosen: dict[tuple[str, frozenset[tuple[str, str]]], tuple[str, dict[str, str], str, str, bool]] = {}
        duplicates = 0
        newest = -math.inf
        try:
            for name, body, value, ts in series:
                got = engine.get((body, drop))
                if got is None:
                    kept = _engine_labels(labels_of(body), drop)
                    got = engine[(body, drop)] = (kept, frozenset(kept.items()))
                identity = (name, got[1])
                full = labels_of(body) if jobs else {}
                down = any(v == 0.0 and all(full.get(k) == x for k, x in job.items()) for job, v in jobs)
                held = chosen.get(identity)
                if held is not None:
                    duplicates += 1
                    if not held[4] or down:
                        continue  # the first copy is read, unless its job is down and this one's is not
                chosen[identity] = (name, got[0], value, ts, down)
            for name, kept_labels, value, ts, _ in chosen.values():
                t = int(ts)
                if t > newest:
                    newest = t
                expo.setdefault(name, []).append(Sample(name, kept_labels, float(value)))
        except ValueError as exc:
            raise ParseError(f"federation answer: {target}: {exc}") from None
        if duplicates:
            warnings.append(
                f"{target}: {duplicates} series repeated once target labels were dropped (two scrape jobs on one "
                "target?); read once"
            )
        at = newest / 1000
        stale = bool(up) and up[-1][1] == 0.0 and up[-1][0] >= at
        groups.append(
            PromGroup(
                labels=labels,
                target=target,
                points=((at, expo),) if expo and not stale else (),
                up=up,
                dropped_labels=drop - {"__name__"},
                scraped=(at,) if expo and not stale else (),
                down_jobs=down_jobs,
            )
        )
    groups.sort(key=lambda g: g.target)
    return MatrixHistories(groups=tuple(groups), warnings=tuple(warnings))


# --- the federation endpoint, read every cycle: a cache of the series set ----------------------------------------

FEDERATION_CACHE_READS: Final = 64
"""Reads after which :class:`FederationReader` starts its cache afresh, so a series that vanished (an instance gone,
a label value changed) is forgotten within this many reads (one per batch: 50 batches of 200 instances make a
10,000-instance cycle; rebuilding costs one parse per series shape, 132 for a vLLM instance)."""

FEDERATION_CACHE_SHAPES: Final = 100_000
"""Series shapes :class:`FederationReader` holds at most before it starts afresh. A shape is a series line with
the group label's value, the sample value and the timestamp cut out, so a fleet of identically-labelled engines
shares one shape per series of one engine (132 for the vLLM page of ``bench/prom_source.py``, whatever the number
of instances: 0.2 MB); a label unique to each instance on every series (``pod=…``) makes one shape per series.
A shape holds about 2 KB (measured with ``tracemalloc`` on the bench's 200-instance answer: 1.95 KB per shape of
the shared kind, 0.38 KB per shape with a ``pod=…`` of its own, whose shapes share one engine-labels object per
series: 1.08 KB before they did; the key text, its engine-labels dict, the repeated-series check's key and its series
numbers), so at most about 200 MB. Past the bound (over ~750 instances of 132 series with a label of their own) the
cache would not last from one cycle to the next and every line would be parsed afresh, at about 1.5 times the
reference path's cost (measured, 200 ``pod=…`` instances: 1.93 s against 1.29 s): the reader then reads by the
reference path for :data:`FEDERATION_CACHE_READS` reads before it tries again."""

FirstSamples: Final = _FirstSamples
"""A family's samples known to repeat no series: :func:`first_samples` (in ``observe``, then in the adapter) passes
such a list through instead of hashing every label set again (its documented contract, ``engines/common.py``)."""

_FED_TIMESTAMP: Final = re.compile(r"-?[0-9]+")
_LABELS: Final = operator.attrgetter("labels")
_FED_ODD_SPACE: Final = re.compile(r"[^\S \n]")
"""Whitespace other than space and newline: ``float()`` would strip it from a value the reference parser refuses,
so an answer holding any takes the reference path."""
_FED_ODD_ASCII_SPACE: Final = tuple(c for c in map(chr, range(128)) if c.isspace() and c not in " \n")
""":data:`_FED_ODD_SPACE` in ASCII text, each looked for by ``in`` (a C scan, about 10× the regex's speed)."""


def _odd_space(text: str) -> bool:
    """Whether ``text`` holds whitespace other than space and newline (:data:`_FED_ODD_SPACE`)."""
    if text.isascii():
        return any(c in text for c in _FED_ODD_ASCII_SPACE)
    return _FED_ODD_SPACE.search(text) is not None


class FederationReader:
    """:func:`groups_from_federation` for the same series read again and again: the federation answer of one
    selector repeats the same series lines every cycle with new values and timestamps (Prometheus's scrape loop
    exploits the same with its series cache, ``scrape/scrape.go`` ``scrapeCache``).

    Each line is cut at C speed around the group label's value (``str.partition``) and at its last two spaces
    (``str.rsplit``); what remains — the name and the other labels, its *shape* — is looked up in a cache of the
    parsed engine labels, shared by every instance with that shape. A line then costs two partitions, one split,
    two dict look-ups, ``float()`` and its :class:`~advisor.domain.Sample` (built as the selective parser builds
    its samples, a filled ``_Blank`` turned into one: a third of the frozen dataclass's ``__init__``, ~0.6 µs a
    line saved). Everything the reference path derives from the series set alone (the parse and validation of the
    label text, the dropping of target labels, the repeated-series check) is done once per shape, on its first sight,
    by the reference's own code (:func:`_keyed_line`, :func:`_fed_labels`, :func:`_engine_labels`).

    Results are those of :func:`groups_from_federation` (a hypothesis property test compares them on generated
    answers: ``tests/sources/test_federation_reader.py``). Whatever the cache cannot vouch for — a line not cut as
    the reference cuts it (odd spacing, a comment mentioning the label, a value with an escape), an escaped group
    value, whitespace other than spaces, a timestamp not ``-?[0-9]+``, a value ``float()`` refuses, two series of
    one drop set equal once target labels are dropped — sends the whole answer down the reference path, which
    decides (or raises) as it always did. The last is checked per target, as the reference's line-by-line path
    (``_federation_general``) checks it: targets told apart only by target labels on every series (``pod=…`` also
    on ``up``: every target's series are equal once it is dropped) are read from the cache too. Each shape's series
    is numbered on first sight, and once two label texts give one series anywhere in the cache, every read checks
    that no target holds one series twice (a C-speed set of numbers per family and target) and otherwise takes the
    reference path, which then reads line by line (keeping the first, with a warning) or in one pass (keeping
    both) — whichever it does, the answer is its own.

    Each family is handed over as :data:`FirstSamples` when it repeats no series (judged by
    :func:`first_samples` itself on the cached shapes, once per shape set, and where two shapes are one series, per
    target by the shapes' series numbers): ``observe`` and the adapter then skip hashing every sample's label set
    (20–40 % of ``observe``'s time per vLLM instance, measured on 200; 13 % with ``pod=…``, 252 against 290 ms).

    Memory: bounded by :data:`FEDERATION_CACHE_SHAPES`; the cache starts afresh every
    :data:`FEDERATION_CACHE_READS` reads (a vanished series is forgotten by then) and after a repeated-series
    fallback; past the bound, the next :data:`FEDERATION_CACHE_READS` reads take the reference path. Thread-safe:
    concurrent reads share the cache through single dict operations (a shape is numbered before it is cached, and the
    flag saying two label texts own one series is set before either is), and each read keeps the cache generation it
    started with.

    ``reads``, ``fallbacks`` and ``misses`` count reads, reads that took the reference path, and shapes parsed.
    """

    def __init__(self, max_shapes: int = FEDERATION_CACHE_SHAPES, lifetime_reads: int = FEDERATION_CACHE_READS):
        """Raises:
        ValueError: ``max_shapes`` or ``lifetime_reads`` below 1."""
        if max_shapes < 1 or lifetime_reads < 1:
            raise ValueError("max_shapes and lifetime_reads must be positive")
        self.max_shapes = max_shapes
        self.lifetime_reads = lifetime_reads
        self.reads = 0
        self.fallbacks = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._gen: _FedGeneration = _FedGeneration()
        self._bypass = 0  # reads left that go straight to the reference path (the cache overflowed)

    def read(
        self, text: str, group_by: Sequence[str] = ("instance",), drop_labels: Collection[str] = ()
    ) -> MatrixHistories:
        """:func:`groups_from_federation` of ``text``, equal to it; raises what it raises."""
        group_by = tuple(group_by)
        with self._lock:
            self.reads += 1
            if self._gen.shapes > self.max_shapes:
                # shapes of their own per target (a label unique to each, pod=…) past the bound: each read would
                # parse every line afresh, at more cost than the reference path; the cache waits one lifetime
                self._bypass = self.lifetime_reads
            if self.reads % self.lifetime_reads == 0 or self._gen.shapes > self.max_shapes:
                self._gen = _FedGeneration()
            gen = self._gen
            bypass = self._bypass > 0
            self._bypass -= bypass
        fast = None
        if len(group_by) == 1 and not bypass and not _odd_space(text):
            fast = _federation_cached(text, group_by[0], frozenset(drop_labels), gen)
        if fast is None:
            with self._lock:
                self.fallbacks += 1
                if gen.collided and self._gen is gen:
                    self._gen = _FedGeneration()
            return groups_from_federation(text, group_by, drop_labels)
        with self._lock:
            self.misses += fast[1]
        return fast[0]


@dataclass
class _FedGeneration:
    """One life of :class:`FederationReader`'s cache: per (group label, drop set), shape → (sample name, engine
    labels); per drop set, (name, engine labels) → the label text that owns them first (the repeated-series check)
    and the one :class:`~advisor.sources.selective_parser.FrozenLabels` every shape of that series hands out (the
    pair's ``id`` numbers the series), and per such labels object (by ``id``) that number (``series_of``) and the
    number of its series as :func:`first_samples` tells series apart (``sample_of``, from ``sampled``: an empty
    value is no label).

    One labels object per series, shared by the shapes of every instance and kept for the generation's life, is what
    the adapters' shape memos (``advisor.engines.common.ShapeMemo``: :func:`first_samples`, the vLLM adapter's
    layouts) key on, as they key on the selective parser's series cache on the direct path: the next read of an
    instance, and every instance of the same series set, find the page's layout by its label objects."""

    kept: dict[tuple[str, frozenset[str]], dict[str, tuple[str, Mapping[str, str]]]] = field(default_factory=dict)
    owner: dict[tuple[str, frozenset[tuple[str, str]], frozenset[str]], tuple[str, FrozenLabels]] = field(
        default_factory=dict
    )
    series_of: dict[int, int] = field(default_factory=dict)
    sampled: dict[tuple[str, frozenset[tuple[str, str]]], list[None]] = field(default_factory=dict)
    sample_of: dict[int, int] = field(default_factory=dict)
    # two label texts own one series (targets told apart only by target labels on every series, ``pod=…`` also on
    # ``up``; or two scrape jobs on one target): each read then checks every target for a series it holds twice
    shared: bool = False
    # per (group label, drop set): the size of its shape cache when last checked, and the families in which
    # first_samples finds two shapes to be one series (a cache only grows within a generation: an equal size is
    # the same set of shapes)
    repeating: dict[tuple[str, frozenset[str]], tuple[int, frozenset[str]]] = field(default_factory=dict)
    shapes: int = 0
    collided: bool = False


def _repeating(gen: _FedGeneration, where: tuple[str, frozenset[str]]) -> frozenset[str]:
    """The families in which two cached shapes of ``where`` are one series to :func:`first_samples` (the judge of
    what repeats a series: equal label sets, an empty value being no label). In the others, a target's samples,
    one per distinct shape, repeat no series and are handed over as :data:`FirstSamples`; in these, a target's
    samples are when their shapes' series numbers (``_FedGeneration.sample_of``) differ (pods: each target has
    shapes of its own, all one series across targets)."""
    entries = list(gen.kept[where].values())
    known = gen.repeating.get(where)
    if known is not None and known[0] == len(entries):
        return known[1]
    families: dict[str, list[Sample]] = {}
    for name, kept in entries:
        if name != UP:
            families.setdefault(name, []).append(Sample(name, kept, 0.0))
    repeating = frozenset(n for n, ss in families.items() if first_samples({n: ss})[1])
    gen.repeating[where] = (len(entries), repeating)
    return repeating


def _federation_cached(
    text: str, label: str, drop_labels: frozenset[str], gen: _FedGeneration
) -> tuple[MatrixHistories, int] | None:
    """:class:`FederationReader`'s path: the groups and the shapes parsed, or ``None`` for the reference path."""
    keyed = _keyed_line(label)
    marker = label + '="'
    # the up lines first (they name each target's labels, which decide what is dropped): found at C speed
    ups: dict[str, list[tuple[str, str, str]]] = {}
    up_head = UP + "{"
    pos = 0 if text.startswith(up_head) else text.find("\n" + up_head)
    while pos != -1:
        start = pos + 1 if text[pos] == "\n" else pos
        end = text.find("\n", start)
        line = text[start:] if end == -1 else text[start:end]
        m = keyed.fullmatch(line)
        if m is None or not m.group(6) or "\\" in m.group(3):
            return None
        _, pre, key, post, value, ts = m.groups()
        ups.setdefault(key, []).append((pre + post, value, ts))
        pos = text.find("\n" + up_head, start)
    base = frozenset({"__name__", label, *drop_labels})
    no_up = base | frozenset(DEFAULT_TARGET_LABELS)
    drop_of: dict[str, frozenset[str]] = {}
    try:
        for key, up_rows in ups.items():
            names = frozenset(k for body, _, _ in up_rows for k in _fed_labels(body, "federation answer"))
            drop_of[key] = base | (names or frozenset(DEFAULT_TARGET_LABELS))
    except ParseError:
        return None
    kept_by_drop = gen.kept
    owner, series_of, sampled, sample_of = gen.owner, gen.series_of, gen.sampled, gen.sample_of
    blank_ok, new_object = _BLANK_OK, object.__new__
    misses = 0
    # key → [exposition, drop set, its shape cache, newest timestamp text, as a number]
    builds: dict[str, list[Any]] = {}
    try:
        for line in text.split("\n"):
            head, sep, tail = line.partition(marker)
            if not sep:
                if not line or line[0] == "#":
                    continue
                return None
            key, _, rest = tail.partition('"')
            series, value, ts = rest.rsplit(" ", 2)
            b = builds.get(key)
            if b is None:
                if line[0] == "#":
                    continue
                if "\\" in key:
                    return None
                drop = drop_of.get(key, no_up)
                cache = kept_by_drop.get((label, drop))
                if cache is None:
                    cache = kept_by_drop.setdefault((label, drop), {})
                # the newest timestamp is set by the first engine sample (an up line may come first)
                b = builds[key] = [{}, drop, cache, None, -math.inf]
            shape = head + series
            entry = b[2].get(shape)
            if entry is None:
                if line[0] == "#":
                    continue
                m = keyed.fullmatch(line)
                if m is None:
                    return None
                name, pre, key_, post, value_, ts_ = m.groups()
                if (
                    key_ != key
                    or value_ != value
                    or ts_ != ts
                    or head != f"{name}{{{pre}"
                    or series != (f",{post}}}" if post else "}")
                ):
                    return None
                if name == UP:
                    entry = (UP, {})
                else:
                    body = pre + post
                    found = _engine_labels(_fed_labels(body, "federation answer"), b[1])
                    items = frozenset(found.items())
                    # one read-only labels object per series (per drop set), whatever label text gives it: every
                    # instance's sample of it carries that object, so the adapters' shape memos recognise the page
                    own = owner.setdefault((name, items, b[1]), (body, FrozenLabels(found)))
                    kept = own[1]
                    if own[0] != body:  # another label text gives this series: across targets, or within one?
                        gen.shared = True
                        if kept in map(_LABELS, b[0].get(name, ())):
                            gen.collided = True
                            return None  # within this target: the reference decides (and warns)
                    series_of[id(kept)] = id(own)
                    given = items if "" not in kept.values() else frozenset(x for x in items if x[1])
                    sample_of[id(kept)] = id(sampled.setdefault((name, given), [None]))
                    entry = (name, kept)
                b[2][shape] = entry
                gen.shapes += 1
                misses += 1
            name, kept = entry
            if name == UP:
                continue
            if ts != b[3]:
                if not _FED_TIMESTAMP.fullmatch(ts):
                    return None
                t = int(ts)
                if t > b[4]:
                    b[3], b[4] = ts, t
            samples = b[0].get(name)
            if samples is None:
                samples = b[0][name] = FirstSamples()
            if blank_ok:  # the selective parser's way: the Sample Sample(...) makes, at a third of its cost
                filling: _Blank = new_object(_Blank)
                filling.name = name
                filling.labels = kept
                filling.value = float(value)
                filling.__class__ = Sample  # type: ignore[assignment]
                samples.append(filling)
            else:
                samples.append(Sample(name, kept, float(value)))
        repeating = {where: _repeating(gen, where) for where in {(label, b[1]) for b in builds.values()}}
        # the shared flag is read once the lines are: a shape another read adds meanwhile sets it before it is cached
        shared = gen.shared
        groups: list[PromGroup] = []
        for key in builds.keys() | ups.keys():
            up, down = _federation_up(ups.get(key, ()), lambda body: _fed_labels(body, "federation answer"))
            b = builds.get(key)
            expo = b[0] if b is not None else None
            if b is not None:
                bad = repeating[(label, b[1])]
                for n, ss in b[0].items():
                    ids = list(map(id, map(_LABELS, ss)))
                    if shared and len(set(map(series_of.__getitem__, ids))) != len(ids):
                        # a series twice in one target, and two label texts of one series in this generation: the
                        # reference may read the answer line by line, which keeps the first and warns
                        gen.collided = True
                        return None
                    # a family with two samples of one series (first_samples' judgement: the shapes' series numbers)
                    # or a shape twice (each shape has its own labels dict) becomes a plain list again:
                    # first_samples checks it, as it checks any page's
                    if len(set(map(sample_of.__getitem__, ids) if n in bad else ids)) != len(ids):
                        b[0][n] = list(ss)
            at = b[4] / 1000 if b is not None else math.inf
            stale = bool(up) and up[-1][1] == 0.0 and up[-1][0] >= at
            drop = drop_of.get(key, no_up)
            groups.append(
                PromGroup(
                    labels={label: key},
                    target=key if label == "instance" else f"{label}={key}",
                    points=((at, expo),) if expo and not stale else (),
                    up=up,
                    dropped_labels=drop - {"__name__"},
                    scraped=(at,) if expo and not stale else (),
                    down_jobs=down,
                )
            )
    except (ValueError, ParseError):
        return None
    groups.sort(key=lambda g: g.target)
    return MatrixHistories(groups=tuple(groups)), misses


def incremental_range(last_end: float | None, now: float, window: float, step: float) -> tuple[float, float]:
    """The ``[start, end]`` of the next cycle's ``query_range`` (unix seconds): ``end`` is ``now`` and ``start``
    is ``end − n × step``, so the newest point shows what the store holds at ``now`` (as fresh as a scrape made
    now) and the points fall ``step`` apart counting back from it.

    ``n`` covers the times since ``last_end`` (the ``end`` of the previous successful read): the points at least
    half a step newer than ``last_end``. On the first read and after a gap longer than ``window`` (failures, a
    reload, a stalled store) it covers the whole window: ``n = ⌊window / step⌋``. A range always spans at least
    two points (``n ≥ 1``): when only one is new the one before it is read again, because VictoriaMetrics
    answers a one-point range ending within about a second of now with no series at all (measured on 1.79.5; a
    two-point range ending at the same time holds the point).

    Successive cycles' evaluation times are not on one grid (each read counts back from its own ``now``), so a
    point read again comes back at a different time, a fraction of a step after the one held, showing the same
    sample: kept, it would be a still interval (a counter that did not move over a moment, which the stall
    check reads as a hung engine) and it would halve the next real interval. The caller keeps only points at
    least half a step newer than a target's newest point (:data:`MIN_POINT_GAP_STEPS`;
    ``Service._apply_groups``).

    Example: ``incremental_range(None, 1000.5, 60, 15)`` → ``(940.5, 1000.5)``;
    ``incremental_range(1000.5, 1016.0, 60, 15)`` → ``(1001.0, 1016.0)``;
    ``incremental_range(1000.5, 1046.0, 60, 15)`` → ``(1016.0, 1046.0)`` (three new points).

    Raises:
        ValueError: ``step`` or ``window`` not positive and finite.
    """
    for label, value in (("step", step), ("window", window)):
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{label} must be > 0 seconds, got {value!r}")
    whole = max(1, math.floor(window / step + 1e-9))
    if last_end is None or now - last_end > window:
        n = whole
    else:
        n = min(whole, max(1, math.floor((now - last_end) / step - MIN_POINT_GAP_STEPS + 1e-9)))
    return now - n * step, now


def _batches(values: Collection[str], size: int) -> list[list[str]]:
    ordered = sorted(set(values))
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def _in_batches(
    read: Callable[[list[str]], PromHistory],
    instances: Collection[str],
    batch: int,
    on_batch: Callable[[PromHistory], None] | None,
    stop_on: Collection[int] = (),
) -> PromHistory:
    """Run ``read`` on ``instances`` ``batch`` at a time and merge the answers (``PrometheusSource.history_batches``
    describes the result); a first batch failing with a status in ``stop_on`` ends the run there."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive number of instances, got {batch!r}")
    began = time.monotonic()
    groups: list[PromGroup] = []
    warnings: list[str] = []
    queries = size = 0
    first = ""
    failure: PromHistory | None = None
    failed: list[str] = []
    chunks = _batches(instances, batch)
    # the next batch is fetched (and reshaped) while this one is handed on: the store's time to answer overlaps
    # the caller's work instead of adding to it; at most two answers are held
    ahead = ThreadPoolExecutor(max_workers=1, thread_name_prefix="prom-batch") if len(chunks) > 1 else None
    pending: Future[PromHistory] | None = None
    try:
        for i, chunk in enumerate(chunks):
            h = read(chunk) if pending is None else pending.result()
            pending = None
            stop = not h.ok and i == 0 and h.status_code in stop_on
            if ahead is not None and i + 1 < len(chunks) and not stop:
                pending = ahead.submit(read, chunks[i + 1])
            queries += h.queries
            size += h.response_bytes
            first = first or h.query
            if not h.ok:
                failure = failure or h
                failed.extend(chunk)
                if stop:
                    failed.extend(v for rest in chunks[1:] for v in rest)
                    break
                continue
            warnings.extend(h.warnings)
            if on_batch is not None:
                on_batch(h)
            else:
                groups.extend(h.groups)
            del h
    finally:  # an exception (the caller's on_batch) waits for the batch in flight; nothing is left running
        if ahead is not None:
            ahead.shutdown(wait=True, cancel_futures=True)
    groups.sort(key=lambda g: g.target)
    return PromHistory(
        ok=failure is None,
        groups=tuple(groups),
        query=first,
        error_reason=None if failure is None else failure.error_reason,
        error_message=None if failure is None else failure.error_message,
        duration_seconds=time.monotonic() - began,
        status_code=None if failure is None else failure.status_code,
        warnings=tuple(warnings),
        queries=queries,
        response_bytes=size,
        failed=tuple(sorted(failed)),
    )


# --- HTTP ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Answer:
    data: Any = None
    error_reason: str | None = None
    error_message: str | None = None
    status_code: int | None = None
    warnings: tuple[str, ...] = ()
    response_bytes: int = 0

    @property
    def ok(self) -> bool:
        return self.error_reason is None


def _with_scrape_times(query: str, matchers: Sequence[LabelMatcher]) -> str:
    """``query`` or the selected targets' :data:`SCRAPE_TIME` series: ``timestamp(up{…})`` renamed and marked.

    For ``job="vllm"``: ``{__name__=~"up|vllm:…",job="vllm"} or label_replace(label_replace(timestamp(
    {__name__=~"up",job="vllm"}), "__name__", "advisor_scrape_timestamp_seconds", "", ""), "advisor_series",
    "scrape_time", "", "")`` (accepted by Prometheus 2.42 and VictoriaMetrics 1.79: measured).
    """
    up = f"timestamp({vector_selector(matchers, [UP])})"
    named = f'label_replace({up}, "__name__", "{SCRAPE_TIME}", "", "")'
    mark, value = SCRAPE_TIME_MARK
    return f'{query} or label_replace({named}, "{mark}", "{value}", "", "")'


def _check_range(start: float, end: float) -> None:
    for label, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"{label} must be a finite number of seconds, got {value!r}")
    if end < start:
        raise ValueError(f"end ({end!r}) is before start ({start!r})")


def _check_times(start: float, end: float, step: float) -> None:
    _check_range(start, end)
    if isinstance(step, bool) or not isinstance(step, int | float) or not math.isfinite(step) or step <= 0:
        raise ValueError(f"step must be > 0 seconds, got {step!r}")
    points = math.floor((end - start) / step) + 1
    if points > MAX_POINTS_PER_SERIES:
        raise ValueError(
            f"{points} points per series (({end} − {start}) / {step}) exceeds Prometheus's limit of "
            f"{MAX_POINTS_PER_SERIES}; use a larger step or a shorter window"
        )


def _seconds(value: float) -> str:
    return repr(float(value))


class PrometheusSource:
    """Reads engine series from one Prometheus-compatible HTTP API.

    Thread-safe as far as ``requests.Session`` is (deployments may be read concurrently); ``queries_made``
    counts every HTTP request sent, for the "queries per cycle" budget.
    """

    def __init__(
        self,
        base_url: str,
        *,
        session: requests.Session | None = None,
        bearer_token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        ca_file: str | Path | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 3.0,
        read_timeout: float = 30.0,
        max_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        """Check everything that can be checked before the first request.

        Args:
            base_url: ``http(s)://host:port`` plus any path prefix (``https://mimir.example/prometheus``);
                ``/api/v1/…`` is appended. No user-info or query string (credentials go in the arguments).
            session: a caller-owned session (connection reuse, proxies); a new one when ``None``.
            bearer_token: sent as ``Authorization: Bearer …``; exclusive with basic auth.
            username, password: HTTP basic auth; both or neither.
            ca_file: PEM bundle to verify the server's certificate (``requests`` ``verify=``); the system
                store when ``None``.
            headers: extra request headers (``X-Scope-OrgID`` for Mimir tenants).
            connect_timeout: seconds to connect.
            read_timeout: seconds for the first byte of the answer and for any stall after it; with
                ``connect_timeout`` also the overall deadline of one request. Sent as the API's ``timeout``
                so the server stops evaluating when the source stops waiting.
            max_bytes: cap on a decoded answer. A point costs about 35 bytes of JSON, so 64 MiB is about
                1.9 million points: 300 vLLM targets × ~300 series × 21 points (5 min at 15 s steps). Fetch
                only the points since the previous cycle to stay far below it.

        Raises:
            ValueError: a malformed URL, mixed or half-given credentials, a missing CA file, a non-positive
                timeout or cap. The message never contains the token or the password.
        """
        try:
            parts = urlsplit(base_url)
            host = parts.hostname
        except ValueError:
            raise ValueError(f"base_url {redact_url(base_url)!r} is not a URL") from None
        if parts.scheme not in ("http", "https") or not host:
            raise ValueError(f"base_url {redact_url(base_url)!r} must be http:// or https:// with a host")
        if parts.username is not None or parts.password is not None:
            raise ValueError("base_url must not carry user-info; pass username/password or bearer_token")
        if parts.query or parts.fragment:
            raise ValueError(f"base_url {redact_url(base_url)!r} must not have a query string or fragment")
        if bearer_token is not None and (username is not None or password is not None):
            raise ValueError("give either bearer_token or username/password, not both")
        if (username is None) != (password is None):
            raise ValueError("basic auth needs both username and password")
        if bearer_token is not None and (not bearer_token.strip() or "\n" in bearer_token or "\r" in bearer_token):
            raise ValueError("bearer_token is empty or spans lines")
        if ca_file is not None and not Path(ca_file).is_file():
            raise ValueError(f"ca_file {str(ca_file)!r} is not a readable file")
        for label, t in (("connect_timeout", connect_timeout), ("read_timeout", read_timeout)):
            if not (isinstance(t, int | float) and math.isfinite(t) and t > 0):
                raise ValueError(f"{label} must be a positive number of seconds, got {t!r}")
        if not (isinstance(max_bytes, int) and max_bytes > 0):
            raise ValueError(f"max_bytes must be a positive integer, got {max_bytes!r}")

        self._base = base_url.rstrip("/")
        self.base_url = redact_url(self._base)
        if session is None:
            session = requests.Session()
            # the daemon queries deployments concurrently (up to 32 workers): keep a connection for each
            # instead of urllib3's default 10, which would log "connection pool is full" every cycle
            adapter = DeadlineAdapter(pool_connections=4, pool_maxsize=32)
            session.mount("http://", adapter)
            session.mount("https://", adapter)
            self._owns_session = True
        else:
            self._owns_session = False
        self._session = use_deadline_adapter(session)
        self._headers = dict(headers or {})
        self._auth = (username, password) if username is not None and password is not None else None
        if bearer_token is not None:
            self._headers["Authorization"] = f"Bearer {bearer_token}"
        self._verify: bool | str = str(ca_file) if ca_file is not None else True
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self.max_bytes = max_bytes
        self._secrets = self._secret_strings(bearer_token, username, password)
        self._lock = threading.Lock()
        self._queries = 0
        self._bytes = 0
        self.federation_reader: FederationReader | None = FederationReader()
        """Reads :meth:`latest`'s answers with a cache of the series set (:class:`FederationReader`); ``None``
        reads each answer afresh with :func:`groups_from_federation` (the reference path, for comparisons)."""
        self.federation: bool | None = None
        """Whether the store serves ``/federate`` (:meth:`latest`): ``None`` until asked, ``False`` once it
        answered 404 or 405 (Thanos Querier, Mimir), ``True`` once it answered."""

    @staticmethod
    def _secret_strings(token: str | None, username: str | None, password: str | None) -> tuple[str, ...]:
        secrets = [token or "", password or ""]
        if username is not None and password is not None:
            pair = f"{username}:{password}".encode()
            secrets += [base64.b64encode(pair).decode(), base64.urlsafe_b64encode(pair).decode()]
        return tuple(sorted((s for s in secrets if s), key=len, reverse=True))

    def __repr__(self) -> str:
        return f"PrometheusSource({self.base_url!r})"

    @property
    def queries_made(self) -> int:
        """HTTP requests sent since construction (every call of every method)."""
        with self._lock:
            return self._queries

    @property
    def bytes_received(self) -> int:
        """Decoded answer bytes received since construction (every call of every method)."""
        with self._lock:
            return self._bytes

    def close(self) -> None:
        """Close the session if this source created it."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- public API ------------------------------------------------------------------------------------------

    def history(
        self,
        selector: str,
        wanted: Wanted,
        start: float,
        end: float,
        step: float,
        group_by: Sequence[str] = ("instance",),
        drop_labels: Collection[str] = (),
        instances: Collection[str] | None = None,
    ) -> PromHistory:
        """Every wanted series of the selected targets over ``[start, end]``, as per-target histories.

        Args:
            selector: PromQL label matchers picking the deployment's targets (``job="vllm",namespace="prod"``).
            wanted: the metric (sample) names to read — a collection costs one request; a predicate such as
                ``adapter.wants`` first asks which names exist (:meth:`metric_names`), two requests.
            start, end: unix seconds, inclusive.
            step: seconds between evaluation points (the advisor's scrape interval, or Prometheus's).
            group_by: labels naming a target; ``("instance",)`` gives one history per scraped endpoint.
            drop_labels: further labels to strip from engine series (see :func:`histories_from_matrix`).
            instances: when given, only targets whose first ``group_by`` label has one of these values (one
                ``=~`` matcher of the escaped values, added to the selector's); a batch of
                :meth:`history_batches`.

        Returns:
            A :class:`PromHistory`; never raises for network, HTTP or API errors.

        Raises:
            ValueError: an invalid selector, label name, metric name or time range (a caller's mistake), or an
                empty ``instances``.
        """
        matchers = parse_selector(selector)
        group_by = tuple(group_by)
        if instances is not None:
            if not instances or not group_by:
                raise ValueError("instances must name at least one value of the first group_by label")
            regex = "|".join(re2_escape(v) for v in sorted(set(instances)))
            matchers = (*matchers, LabelMatcher(group_by[0], "=~", regex))
        bad = [g for g in (*group_by, *drop_labels) if not LABEL_NAME_RE.fullmatch(g)]
        if not group_by or bad:
            raise ValueError(f"group_by must name at least one label and every label must be valid; bad: {bad}")
        _check_times(start, end, step)
        began = time.monotonic()
        queries = 0

        if isinstance(wanted, str):
            raise ValueError("wanted must be a collection of metric names or a predicate, not one string")
        if isinstance(wanted, Collection):
            names = set(wanted)
        else:
            listed = self.metric_names(selector, start, end)
            queries += 1
            if not listed.ok:
                return PromHistory(
                    ok=False,
                    error_reason=listed.error_reason,
                    error_message=f"listing metric names: {listed.error_message}",
                    duration_seconds=time.monotonic() - began,
                    status_code=listed.status_code,
                    queries=queries,
                )
            names = {n for n in listed.names if wanted(n)}
        names.discard(UP)
        if not names:
            return PromHistory(
                ok=True,
                duration_seconds=time.monotonic() - began,
                warnings=(f"no wanted metric exists for {{{selector}}} between {start:.0f} and {end:.0f}",),
                queries=queries,
            )
        query = _with_scrape_times(vector_selector(matchers, sorted(names | {UP})), matchers)
        params = [
            ("query", query),
            ("start", _seconds(start)),
            ("end", _seconds(end)),
            ("step", _seconds(step)),
            ("timeout", _seconds(self.read_timeout)),
            # VictoriaMetrics moves start and end to multiples of step when a query resolves to >= 50 points
            # (for its response cache), unless nocache=1; Prometheus, Thanos and Mimir ignore the parameter
            (VM_NO_ALIGN_PARAM, "1"),
        ]
        answer = self._call("POST", "/api/v1/query_range", params)
        queries += 1

        def done(**kw: Any) -> PromHistory:
            return PromHistory(
                query=query,
                duration_seconds=time.monotonic() - began,
                status_code=answer.status_code,
                queries=queries,
                response_bytes=answer.response_bytes,
                **kw,
            )

        if not answer.ok:
            return done(ok=False, error_reason=answer.error_reason, error_message=answer.error_message)
        try:
            shaped = histories_from_matrix(answer.data, group_by, drop_labels)
        except ParseError as exc:
            return done(ok=False, error_reason=REASON_PARSE_ERROR, error_message=self._clean(str(exc)))
        return done(ok=True, groups=shaped.groups, warnings=answer.warnings + shaped.warnings)

    def history_batches(
        self,
        selector: str,
        wanted: Wanted,
        start: float,
        end: float,
        step: float,
        instances: Collection[str],
        batch: int,
        group_by: Sequence[str] = ("instance",),
        drop_labels: Collection[str] = (),
        on_batch: Callable[[PromHistory], None] | None = None,
    ) -> PromHistory:
        """:meth:`history` for a selector matching many targets: ``instances`` (values of the first
        ``group_by`` label, e.g. from :meth:`label_values`) are read ``batch`` at a time, one ``query_range``
        each, so no answer grows with the fleet past ``max_bytes``. The groups of every batch are merged
        (sorted by target); a target whose label value is not in ``instances`` is not read.

        Returns:
            One :class:`PromHistory`: ``ok`` only when every batch answered. A failed batch does not stop the
            others: the groups of those that answered are kept, the failed batches' instances are listed in
            ``failed`` and the first failure gives ``error_reason``/``error_message``/``status_code``.
            ``queries`` and ``response_bytes`` count every batch sent; ``query`` is the first batch's. With
            ``on_batch``, each batch that answered is handed to it as it arrives and its groups are not kept
            (``groups`` is ``()``): memory holds one batch's answer, not the fleet's.

        Raises:
            ValueError: as :meth:`history`, or ``batch`` < 1.
        """

        def read(chunk: list[str]) -> PromHistory:
            return self.history(selector, wanted, start, end, step, group_by, drop_labels, instances=chunk)

        return _in_batches(read, instances, batch, on_batch)

    def latest(
        self,
        selector: str,
        names: Collection[str],
        group_by: Sequence[str] = ("instance",),
        drop_labels: Collection[str] = (),
        instances: Collection[str] | None = None,
    ) -> PromHistory:
        """The newest sample of each selected series of ``names`` (and ``up``), one point per target stamped
        with its samples' own timestamp: one ``GET /federate?match[]={__name__=~"up|…",<selector>}`` request
        (Prometheus, VictoriaMetrics), reshaped by :func:`groups_from_federation`. ``instances`` narrows it to
        those values of the first ``group_by`` label (as :meth:`history`).

        An answer a few times smaller and cheaper to decode than :meth:`history`'s for the same targets: text,
        one line per series, no JSON. Stores without the endpoint (Thanos Querier, Mimir) answer 404:
        ``ok=False``, ``error_reason`` ``http_status``, ``status_code`` 404 — the caller falls back to
        :meth:`history`. Failures as :meth:`history` (``too_large`` past ``max_bytes``, ``timeout`` …).

        Raises:
            ValueError: an invalid selector or label name, ``names`` one string, or ``instances`` empty.
        """
        matchers = parse_selector(selector)
        group_by = tuple(group_by)
        bad = [g for g in (*group_by, *drop_labels) if not LABEL_NAME_RE.fullmatch(g)]
        if not group_by or bad:
            raise ValueError(f"group_by must name at least one label and every label must be valid; bad: {bad}")
        if isinstance(names, str):
            raise ValueError("names must be a collection of metric names, not one string")
        if instances is not None:
            if not instances:
                raise ValueError("instances must name at least one value of the first group_by label")
            regex = "|".join(re2_escape(v) for v in sorted(set(instances)))
            matchers = (*matchers, LabelMatcher(group_by[0], "=~", regex))
        began = time.monotonic()
        query = vector_selector(matchers, sorted(set(names) | {UP}))
        answer = self._call("GET", "/federate", [("match[]", query)], text=True)

        def done(**kw: Any) -> PromHistory:
            return PromHistory(
                query=query,
                duration_seconds=time.monotonic() - began,
                status_code=answer.status_code,
                queries=1,
                response_bytes=answer.response_bytes,
                **kw,
            )

        if answer.status_code in (404, 405):
            self.federation = False
        elif answer.ok:
            self.federation = True
        if not answer.ok:
            return done(ok=False, error_reason=answer.error_reason, error_message=answer.error_message)
        try:
            reader = self.federation_reader
            read = groups_from_federation if reader is None else reader.read
            shaped = read(answer.data, group_by, drop_labels)
        except ParseError as exc:
            return done(ok=False, error_reason=REASON_PARSE_ERROR, error_message=self._clean(str(exc)))
        return done(ok=True, groups=shaped.groups, warnings=shaped.warnings)

    def latest_batches(
        self,
        selector: str,
        names: Collection[str],
        instances: Collection[str],
        batch: int,
        group_by: Sequence[str] = ("instance",),
        drop_labels: Collection[str] = (),
        on_batch: Callable[[PromHistory], None] | None = None,
    ) -> PromHistory:
        """:meth:`latest` ``batch`` instances at a time, one request each; merged, failed and handed over as
        :meth:`history_batches` does. A 404 or 405 on the first batch (no federation endpoint) stops there.

        Raises:
            ValueError: as :meth:`latest`, or ``batch`` < 1.
        """

        def read(chunk: list[str]) -> PromHistory:
            return self.latest(selector, names, group_by, drop_labels, instances=chunk)

        return _in_batches(read, instances, batch, on_batch, stop_on=(404, 405))

    def label_values(
        self, label: str, selector: str, start: float | None = None, end: float | None = None
    ) -> PromNames:
        """The values of ``label`` on the selected series (``names`` holds them): the instances behind a
        selector for :meth:`history_batches` (``label="instance"``), or the metric names (``"__name__"``).

        One ``GET /api/v1/label/<label>/values?match[]={…}`` request; ``start``/``end`` as :meth:`metric_names`.

        Raises:
            ValueError: an invalid label name, selector or time range.
        """
        if not LABEL_NAME_RE.fullmatch(label):
            raise ValueError(f"not a label name: {label!r}")
        return self._label_values(label, selector, start, end)

    def metric_names(self, selector: str, start: float | None = None, end: float | None = None) -> PromNames:
        """The metric names with series on the selected targets — for ``engine: auto``
        (:func:`advisor.engines.detect.detect_engine` takes them) and for choosing ``wanted`` names.

        One ``GET /api/v1/label/__name__/values?match[]={…}`` request. ``start``/``end`` (unix s) limit the
        look-up to recent data (recommended: the evaluation window; without them the server searches all
        the data it holds).

        Raises:
            ValueError: an invalid selector or time range.
        """
        return self._label_values("__name__", selector, start, end)

    def _label_values(self, label: str, selector: str, start: float | None, end: float | None) -> PromNames:
        matchers = parse_selector(selector)
        params = [("match[]", match_selector(matchers))]
        if start is not None or end is not None:
            if start is None or end is None:
                raise ValueError("give both start and end, or neither")
            _check_range(start, end)
            params += [("start", _seconds(start)), ("end", _seconds(end))]
        began = time.monotonic()
        answer = self._call("GET", f"/api/v1/label/{label}/values", params)
        if not answer.ok:
            return PromNames(
                ok=False,
                error_reason=answer.error_reason,
                error_message=answer.error_message,
                duration_seconds=time.monotonic() - began,
                status_code=answer.status_code,
            )
        data = answer.data
        if not isinstance(data, list) or not all(isinstance(n, str) for n in data):
            return PromNames(
                ok=False,
                error_reason=REASON_PARSE_ERROR,
                error_message="label values answer is not a list of strings",
                duration_seconds=time.monotonic() - began,
                status_code=answer.status_code,
            )
        return PromNames(
            ok=True,
            names=frozenset(data),
            duration_seconds=time.monotonic() - began,
            status_code=answer.status_code,
            warnings=answer.warnings,
        )

    # -- one request -----------------------------------------------------------------------------------------

    def _clean(self, text: str) -> str:
        """One line, secrets scrubbed, control characters escaped, at most 200 characters
        (:func:`advisor.redact.outside_text`)."""
        return outside_text(" ".join(text.split()), self._secrets, _ERROR_CHARS)

    def _call(self, method: str, path: str, params: list[tuple[str, str]], text: bool = False) -> _Answer:
        """Send one API request; classify every failure (never raises for network or API errors). With ``text``
        (``/federate``) a 2xx answer's ``data`` is the body as text, not decoded JSON."""
        with self._lock:
            self._queries += 1
        url = self._base + path
        deadline = time.monotonic() + self.connect_timeout + self.read_timeout
        limits = EdgeLimits(self.connect_timeout, self.read_timeout, self.max_bytes)
        accept = "text/plain;version=0.0.4" if text else "application/json"
        headers = {"Accept": accept, **self._headers}
        try:
            response = open_stream(
                self._session,
                method,
                url,
                limits,
                deadline,
                params=params if method == "GET" else None,
                data=params if method != "GET" else None,
                headers=headers,
                auth=self._auth,
                verify=self._verify,
                allow_redirects=False,
            )
        except EdgeError as exc:
            return _Answer(error_reason=exc.reason, error_message=exc.message)

        with response:
            status = response.status_code
            if 300 <= status < 400:
                location = redact_url(response.headers.get("Location", "")) or "an unnamed place"
                return _Answer(
                    error_reason=REASON_HTTP_STATUS,
                    error_message=self._clean(
                        f"HTTP {status} redirect to {location}; point base_url at the final address"
                    ),
                    status_code=status,
                )
            try:
                body = read_capped(response, deadline, limits, noun="the answer")
            except EdgeTooLargeError:
                return _Answer(
                    error_reason=REASON_TOO_LARGE,
                    error_message=f"answer exceeds the cap of {self.max_bytes} bytes; narrow the selector or window",
                    status_code=status,
                )
            except EdgeTimeoutError as exc:
                stalled = "stalled" in exc.message
                return _Answer(
                    error_reason=REASON_TIMEOUT,
                    error_message=f"answer stalled longer than {self.read_timeout:g}s"
                    if stalled
                    else f"answer not complete within {self.connect_timeout + self.read_timeout:g}s",
                    status_code=status,
                )
            except EdgeDecodeError:
                return _Answer(
                    error_reason=REASON_PARSE_ERROR,
                    error_message="answer could not be decoded (Content-Encoding)",
                    status_code=status,
                )
            except EdgeError as exc:
                return _Answer(error_reason=exc.reason, error_message=exc.message, status_code=status)
            reason_phrase = response.reason or ""
        with self._lock:
            self._bytes += len(body)
        if text and 200 <= status < 300:
            return _Answer(data=body.decode("utf-8", errors="replace"), status_code=status, response_bytes=len(body))
        return replace(self._interpret(status, reason_phrase, body), response_bytes=len(body))

    def _interpret(self, status: int, reason_phrase: str, body: bytes) -> _Answer:
        """Status and body → data or a classified error (the API's ``errorType``/``error`` when given)."""
        text = body.decode("utf-8", errors="replace")
        try:
            payload: Any = json.loads(text)
        except (ValueError, RecursionError):  # RecursionError: hostile, absurdly nested JSON
            payload = None
        if isinstance(payload, Mapping) and payload.get("status") == "error":
            error_type = str(payload.get("errorType") or "unknown")
            error = str(payload.get("error") or "")
            prefix = f"HTTP {status}: " if not 200 <= status < 300 else ""
            return _Answer(
                error_reason=REASON_TIMEOUT if error_type == "timeout" else REASON_HTTP_STATUS,
                error_message=self._clean(f"{prefix}Prometheus error {error_type}: {error}"),
                status_code=status,
            )
        if not 200 <= status < 300:
            head = f"HTTP {status} {reason_phrase}".rstrip()
            snippet = self._clean(text)
            return _Answer(
                error_reason=REASON_HTTP_STATUS,
                error_message=self._clean(f"{head}: {snippet}" if snippet else head),
                status_code=status,
            )
        if not isinstance(payload, Mapping):
            what = "not JSON" if payload is None else f"JSON {type(payload).__name__}, not an object"
            snippet = self._clean(text[:80])
            return _Answer(
                error_reason=REASON_PARSE_ERROR,
                error_message=self._clean(f"answer is {what}: {snippet!r}"),
                status_code=status,
            )
        if payload.get("status") != "success" or "data" not in payload:
            return _Answer(
                error_reason=REASON_PARSE_ERROR,
                error_message=self._clean(f"answer has status {payload.get('status')!r} and no usable data"),
                status_code=status,
            )
        raw_warnings = payload.get("warnings") or []
        warnings = tuple(self._clean(str(w)) for w in raw_warnings) if isinstance(raw_warnings, list) else ()
        return _Answer(data=payload["data"], status_code=status, warnings=warnings)
