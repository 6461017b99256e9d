"""The advisor's own ``/metrics``: a prometheus-client collector over the latest :class:`CycleResult`.

The collector reads one immutable result per scrape, so a scrape never sees half a cycle. It registers
on an injected :class:`~prometheus_client.CollectorRegistry` (tests use a fresh one each). Unknown
values are omitted, never exported as 0. A recommendation that resolved keeps its
``advisor_recommendation_active`` series at 0, so dashboards and alerts see the transition rather than a
vanishing series; a deployment a reload removed loses every series at once (:meth:`AdvisorCollector.retain`), as a
target Prometheus no longer discovers does.
"""

from __future__ import annotations

import math
import re
import threading
from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from typing import cast

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from advisor import __version__
from advisor import conventions as c
from advisor.domain import Recommendation
from advisor.evaluate import redact_target_url
from advisor.results import CycleResult
from advisor.rules.base import Evaluation
from advisor.rules.lifecycle import RESOLVED_REMOVED

POOL_USAGE_RATIO = "advisor_pool_usage_ratio"
"""Per-pool usage 0–1, label ``pool``: ``kv`` and the engine's other pools (``swa``, ``mamba``, ``slots``)."""
QUEUE_REQUESTS = "advisor_queue_requests"
"""Requests waiting per named queue, label ``queue`` (``waiting_capacity``, ``decode_prealloc`` …)."""
RANKS_EXCLUDED = "advisor_data_parallel_ranks_excluded"
"""Data-parallel ranks left out of the aggregates for impossible or unknown values."""
LABEL_POOL = "pool"
LABEL_QUEUE = "queue"


def _latency_values(
    ev: Evaluation,
    tpot_err: GaugeMetricFamily,
    ttft_err: GaugeMetricFamily,
    decode_eff: GaugeMetricFamily,
    prefill_eff: GaugeMetricFamily,
    decode_over: GaugeMetricFamily,
    prefill_over: GaugeMetricFamily,
) -> list[tuple[GaugeMetricFamily, float | None]]:
    """The latency calibration's series of one deployment (``ev.latency``): errors once measured, each factor once
    a window updated it; ``None`` (absent) otherwise."""
    fit = ev.latency
    if fit is None:
        return []
    m = fit.model
    return [
        (tpot_err, fit.tpot_error_ratio),
        (ttft_err, fit.ttft_error_ratio),
        (decode_eff, m.decode.ratio if m.decode.updates else None),
        (prefill_eff, m.prefill.ratio if m.prefill.updates else None),
        (decode_over, m.decode_overhead.ratio if m.decode_overhead.updates else None),
        (prefill_over, m.prefill_overhead.ratio if m.prefill_overhead.updates else None),
    ]


def _speculation_values(
    ev: Evaluation, length: GaugeMetricFamily, draft: GaugeMetricFamily
) -> list[tuple[GaugeMetricFamily, float | None]]:
    """The window's speculative-decoding reading of one deployment (``ev.speculation``) when it is a measurement:
    drafts counted and counters that agree (:attr:`advisor.telemetry.SpeculationWindow.consistent`)."""
    sp = ev.speculation
    if sp is None or not sp.drafts or not sp.consistent:
        return []
    return [(length, sp.mean_acceptance_length), (draft, sp.draft_length)]


class AdvisorCollector(Collector):
    """Yields the advisory gauges for the latest cycle. Thread-safe: ``publish`` swaps one reference."""

    def __init__(self, resolved_limit: int = 100) -> None:
        self._result: CycleResult | None = None
        self._seen_recs: set[tuple[str, str, str, str]] = set()
        self._lock = threading.Lock()
        self._open_by_dep: dict[str, dict[str, Recommendation]] = {}
        self._resolved: deque[Recommendation] = deque(maxlen=resolved_limit)

    def publish(self, result: CycleResult) -> None:
        """Make ``result`` the one the next scrape reports.

        Also notes the recommendations that resolved since the previous result: those of a deployment in
        this result that were open before and are not now (a deployment missing from the result — its
        evaluation failed, or a reload removed it — resolves nothing, as the lifecycle resolves only on
        fresh data). They get ``resolved_at`` = the result's time, which is the time the lifecycle used.
        """
        with self._lock:
            self._result = result
            for d in result.deployments:
                now_open = {r.id: r for r in d.recommendations}
                for rid, r in self._open_by_dep.get(d.name, {}).items():
                    if rid not in now_open:
                        self._resolved.appendleft(replace(r, resolved_at=result.timestamp))
                self._open_by_dep[d.name] = now_open
                for r in d.recommendations:
                    self._seen_recs.add((d.name, r.dial, r.action, r.severity))

    def retain(self, deployments: Collection[str], now: float) -> None:
        """Forget every series of a deployment not in ``deployments`` (a reload removed it; issue 14): its
        ``advisor_recommendation_active`` series and every per-deployment gauge leave ``/metrics`` at once, and its
        open recommendations are noted as resolved at ``now`` (unix s) with ``resolved_reason`` ``removed``."""
        keep = set(deployments)
        with self._lock:
            for name in [n for n in self._open_by_dep if n not in keep]:
                for r in self._open_by_dep.pop(name).values():
                    self._resolved.appendleft(replace(r, resolved_at=now, resolved_reason=RESOLVED_REMOVED))
            self._seen_recs = {k for k in self._seen_recs if k[0] in keep}
            res = self._result
            if res is not None:
                self._result = replace(
                    res,
                    deployments=tuple(d for d in res.deployments if d.name in keep),
                    scrape_errors={k: v for k, v in res.scrape_errors.items() if k[0] in keep},
                )

    def recently_resolved(self) -> list[Recommendation]:
        """The last resolved recommendations (at most ``resolved_limit``), newest first, with every field."""
        with self._lock:
            return list(self._resolved)

    def collect(self) -> Iterator[Metric]:
        """Called by prometheus-client on each scrape of ``/metrics``."""
        with self._lock:
            res = self._result
            seen = set(self._seen_recs)
        dep = [c.LABEL_DEPLOYMENT]

        def gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=labels if labels is not None else dep)

        info = gauge(c.BUILD_INFO, "Build information of the advisor (value 1).", ["version"])
        info.add_metric([__version__], 1.0)
        yield info
        if res is None:
            return
        usage = gauge(
            c.KV_CACHE_USAGE_RATIO,
            "KV-cache usage 0-1 (evictable cache counts as free), capacity-weighted over replicas.",
        )
        cap = gauge(c.KV_CACHE_CAPACITY_TOKENS, "KV pool in tokens summed over replicas, as the engines report it.")
        ceil = gauge(
            c.CONCURRENCY_CEILING, "Sequences at max-model-len the answering replicas can hold in their KV pools."
        )
        running = gauge(c.REQUESTS_RUNNING, "Requests running, summed over replicas.")
        waiting = gauge(c.REQUESTS_WAITING, "Requests waiting, summed over replicas.")
        preempt = gauge(c.PREEMPTIONS_PER_SECOND, "Preemptions per second over the evaluation window.")
        good = gauge(
            c.GOODPUT_RATIO, "Estimated fraction of requests meeting both TTFT and TPOT targets over the window."
        )
        good_lo = gauge(
            c.GOODPUT_RATIO_LOWER,
            "Lower bound of the goodput ratio: whatever the dependence of TTFT and TPOT (Frechet) and "
            "wherever the observations lie in the bucket holding each target.",
        )
        good_hi = gauge(
            c.GOODPUT_RATIO_UPPER,
            "Upper bound of the goodput ratio: whatever the dependence of TTFT and TPOT (Frechet) and "
            "wherever the observations lie in the bucket holding each target.",
        )
        good_tps = gauge(c.GOODPUT_TOKENS_PER_SECOND, "Generation tokens per second times the goodput ratio.")
        model_err = gauge(
            c.CAPACITY_MODEL_ERROR_RATIO,
            "Capacity pass's KV tokens per replica divided by the engine's own report, minus 1.",
        )
        gen_tps = gauge(c.GENERATION_TOKENS_PER_SECOND, "Generation tokens per second over the window.")
        tpot_err = gauge(
            c.MODEL_TPOT_ERROR_RATIO,
            "The latency model's mean TPOT at the observed batch divided by the engine's over the last calibration "
            "window, minus 1, with the model before that window's update (a one-step-ahead error).",
        )
        ttft_err = gauge(
            c.MODEL_TTFT_ERROR_RATIO,
            "The latency model's prefill time (TTFT less queue time; TTFT when nothing queued) divided by the "
            "engine's over the last calibration window, minus 1, with the model before that window's update.",
        )
        decode_eff = gauge(
            c.MODEL_DECODE_EFFICIENCY_RATIO,
            "Online-calibrated decode speed divided by the published calibration's (decode step time ratio; the "
            "memory-bandwidth efficiency ratio where decode is bandwidth-bound). Absent before a window calibrated it.",
        )
        prefill_eff = gauge(
            c.MODEL_PREFILL_EFFICIENCY_RATIO,
            "Online-calibrated prefill speed divided by the published calibration's (the compute efficiency ratio "
            "where prefill is compute-bound). Absent before a window calibrated it.",
        )
        decode_over = gauge(
            c.MODEL_DECODE_OVERHEAD_RATIO,
            "Online-calibrated per-step CPU overhead of a decode step divided by the published calibration's. Absent "
            "before a window calibrated it (or when the published calibration has no overhead).",
        )
        prefill_over = gauge(
            c.MODEL_PREFILL_OVERHEAD_RATIO,
            "Online-calibrated fixed CPU time of a prefill (per-step and per-request overheads) divided by the "
            "published calibration's. Absent before a window calibrated it (or when the published calibration has "
            "no overhead).",
        )
        spec_len = gauge(
            c.SPECULATIVE_ACCEPTANCE_LENGTH_TOKENS,
            "Tokens a speculative verification round yields per sequence over the window, the bonus token included "
            "(1 + accepted draft tokens / drafts). Absent without speculation measured.",
        )
        spec_draft = gauge(
            c.SPECULATIVE_DRAFT_LENGTH_TOKENS,
            "Draft tokens scored per speculative verification round over the window (draft tokens / drafts). Absent "
            "without speculation measured.",
        )
        state = gauge(
            c.DEPLOYMENT_STATE,
            "Data-quality state of the deployment (1 for the current state).",
            [c.LABEL_DEPLOYMENT, c.LABEL_STATE],
        )
        tstate = gauge(
            c.TARGET_STATE,
            "Data-quality state of each target (1 for the current state).",
            [c.LABEL_DEPLOYMENT, c.LABEL_TARGET, c.LABEL_STATE],
        )
        up = gauge(
            c.TARGET_UP,
            "1 if the last scrape of the target succeeded, else 0 (as Prometheus's up).",
            [c.LABEL_DEPLOYMENT, c.LABEL_TARGET],
        )
        active = gauge(
            c.RECOMMENDATION_ACTIVE,
            "1 while a recommendation for this dial is open, 0 after it resolved.",
            [c.LABEL_DEPLOYMENT, c.LABEL_DIAL, c.LABEL_ACTION, c.LABEL_SEVERITY],
        )
        recommended = gauge(
            c.RECOMMENDED_VALUE,
            "An open incident's suggested value for each dial it proposes, its suggested turn and its ranked "
            "alternatives (replicas, max_num_seqs, gpu_memory_utilization, …); non-numeric suggestions are not "
            "exported. The replicas value is stabilized "
            "as HPA behavior does: it scales up to the lowest raw count of the last 60 s and down to the highest of "
            "the last 300 s (rules.replicas.scale_up_window / scale_down_window). For an autoscaler read "
            f"{c.DESIRED_REPLICAS}: it leads this value (the same model and stabilization applied to the arrival "
            "rate's trend), never below it while the incident is open, and is the current count when nothing is "
            "advised; present whenever the data is fresh.",
            [c.LABEL_DEPLOYMENT, c.LABEL_DIAL],
        )
        desired = gauge(
            c.DESIRED_REPLICAS,
            "Replicas the deployment should run (for KEDA / HPA); it leads the replica advice: max(the advice's "
            "count, ceil(arrival rate one evaluation window ahead at its Theil-Sen trend / requests/s one replica "
            "serves within the SLO)), both from the queueing model and stabilized as HPA behavior does "
            "(rules.replicas scale_up_window / scale_down_window), never reversing within one incident; the current "
            "count when neither asks more. Present whenever the data is fresh; absent (never 0) when it is stale or "
            "unavailable.",
        )
        headroom = gauge(
            c.CAPACITY_HEADROOM_RATIO,
            f"Fraction of capacity left at today's load: kind={c.HEADROOM_KV_CEILING} is 1 - KV usage (capacity-"
            f"weighted, newest scrape); kind={c.HEADROOM_SLO_THROUGHPUT} is 1 - arrival rate / (current replicas x "
            "requests/s one replica serves within the SLO, queueing model); negative beyond capacity. Absent when "
            "unknown or the data is not fresh.",
            [c.LABEL_DEPLOYMENT, c.LABEL_KIND],
        )
        exhaustion = gauge(
            c.TIME_TO_KV_EXHAUSTION_SECONDS,
            "Seconds until the first replica's KV pool is full at its usage trend (Theil-Sen slope over the "
            "evaluation window's scrapes): (1 - usage) / slope. Absent when usage does not grow significantly "
            "(Mann-Kendall, one-sided 5 %) or the data is not fresh.",
        )
        pool_usage = gauge(
            POOL_USAGE_RATIO,
            "Usage 0-1 of each pool a request needs (kv, and swa / mamba state / slots where the engine has them); "
            "highest over replicas. Unknown pools are omitted.",
            [c.LABEL_DEPLOYMENT, LABEL_POOL],
        )
        queue = gauge(
            QUEUE_REQUESTS,
            "Requests waiting in each named queue (vLLM waiting by reason, SGLang disaggregation queues), summed "
            "over replicas.",
            [c.LABEL_DEPLOYMENT, LABEL_QUEUE],
        )
        excluded = gauge(RANKS_EXCLUDED, "Data-parallel ranks left out of the aggregates (impossible values).")
        duplicates = gauge(
            c.TARGET_DUPLICATE_SERIES,
            "Samples the target's last page repeated (a series already on the page; the first kept, as Prometheus "
            "does), among the families the advisor reads; any lowers the deployment's confidence.",
            [c.LABEL_DEPLOYMENT, c.LABEL_TARGET],
        )
        open_keys: set[tuple[str, str, str, str]] = set()
        valued: set[tuple[str, str]] = set()
        for d in res.deployments:
            view, reported = d.snapshot, d.snapshot.reported
            labels = [d.name]
            ev = d.evaluation
            ceiling = d.concurrency_ceiling()  # with data-parallel ranks: whole requests per rank, summed
            for pool, u in {"kv": reported.kv_cache_usage_ratio, **ev.pool_usage}.items():
                if u is not None and math.isfinite(u):
                    pool_usage.add_metric([d.name, pool], float(u))
            for name, n in ev.queues.items():
                if n is not None and math.isfinite(n):
                    queue.add_metric([d.name, name], float(n))
            if ev.rank_coverage < 1.0 or ev.ranks_excluded:
                excluded.add_metric(labels, float(len(ev.ranks_excluded)))
            for fam, value in (
                (usage, reported.kv_cache_usage_ratio),
                (cap, reported.kv_cache_capacity_tokens),
                (ceil, ceiling),
                (running, reported.requests_running),
                (waiting, reported.requests_waiting),
                (preempt, reported.preemptions_per_second),
                (good, d.evaluation.goodput.ratio),
                (good_lo, d.evaluation.goodput.lower),
                (good_hi, d.evaluation.goodput.upper),
                (good_tps, d.evaluation.goodput_tokens_per_second),
                (gen_tps, reported.generation_tokens_per_second),
                (model_err, view.capacity_model_error_ratio),
                *_latency_values(ev, tpot_err, ttft_err, decode_eff, prefill_eff, decode_over, prefill_over),
                *_speculation_values(ev, spec_len, spec_draft),
            ):
                if value is not None:
                    fam.add_metric(labels, float(value))
            sig = d.signals
            if sig is not None and sig.desired_replicas is not None:
                desired.add_metric(labels, float(sig.desired_replicas))
                for kind, room in (
                    (c.HEADROOM_KV_CEILING, sig.kv_headroom_ratio),
                    (c.HEADROOM_SLO_THROUGHPUT, sig.slo_throughput_headroom_ratio),
                ):
                    if room is not None and math.isfinite(room):
                        headroom.add_metric([d.name, kind], room)
                if sig.kv_exhaustion_seconds is not None and math.isfinite(sig.kv_exhaustion_seconds):
                    exhaustion.add_metric(labels, sig.kv_exhaustion_seconds)
            for st in c.STATES:
                state.add_metric([d.name, st], 1.0 if d.state == st else 0.0)
            shown = [redact_target_url(t.url) for t in d.targets]
            for t, url in zip(d.targets, shown, strict=True):
                up.add_metric([d.name, url], 1.0 if t.up else 0.0)
                if t.up and t.history:
                    duplicates.add_metric([d.name, url], float(t.history[-1].duplicate_series))
            for url, (tst, _) in zip(shown, d.target_states, strict=False):
                for st in c.STATES:
                    tstate.add_metric([d.name, url, st], 1.0 if tst == st else 0.0)
            for r in d.recommendations:
                open_keys.add((d.name, r.dial, r.action, r.severity))
                # the suggested turn, then each alternative: one value per dial, the best-ranked first (an
                # autoscaler reads replicas whether or not replicas is the incident's first turn)
                for dial, v in r.dial_values():
                    if not isinstance(v, int | float) or isinstance(v, bool) or not math.isfinite(v):
                        continue
                    if (d.name, dial) not in valued:
                        valued.add((d.name, dial))
                        recommended.add_metric([d.name, dial], float(v))
        for key in sorted(seen | open_keys):
            active.add_metric(list(key), 1.0 if key in open_keys else 0.0)
        yield from (
            usage,
            cap,
            ceil,
            running,
            waiting,
            preempt,
            good,
            good_lo,
            good_hi,
            good_tps,
            gen_tps,
            model_err,
            tpot_err,
            ttft_err,
            decode_eff,
            prefill_eff,
            decode_over,
            prefill_over,
            spec_len,
            spec_draft,
            pool_usage,
            queue,
            excluded,
            state,
            tstate,
            up,
            duplicates,
            active,
            recommended,
            desired,
            headroom,
            exhaustion,
        )

        errors = CounterMetricFamily(
            c.SCRAPE_ERRORS,
            "Failed scrapes of a target by reason.",
            labels=[c.LABEL_DEPLOYMENT, c.LABEL_TARGET, c.LABEL_REASON],
        )
        for (dname, target, reason), n in sorted(res.scrape_errors.items()):
            errors.add_metric([dname, redact_target_url(target), reason], float(n))
        yield errors
        last = GaugeMetricFamily(c.LAST_EVALUATION_TIMESTAMP, "Unix time of the last completed evaluation cycle.")
        last.add_metric([], res.timestamp)
        yield last


class SelfMetrics:
    """The advisor's own operational metrics (cycle and step durations, notifications)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.step_seconds = Histogram(
            "advisor_cycle_step_duration_seconds",
            "Duration of each named step of an evaluation cycle.",
            ["step"],
            registry=registry,
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.cycles = Counter("advisor_cycles", "Evaluation cycles completed.", registry=registry)
        # overload made visible (issue 14): cycles the scheduler skipped because the previous one still ran, and
        # the last cycle's duration against its interval; names shared with rules/ (alerts on skipped cycles)
        self.cycles_skipped = Counter(
            "advisor_cycles_skipped",
            "Evaluation cycles not started because the previous one still ran (APScheduler max_instances or "
            "missed run times).",
            registry=registry,
        )
        self.cycle_duration = Gauge(
            "advisor_cycle_duration_seconds",
            "Wall time of the last completed evaluation cycle, from its tick to the last deployment published.",
            registry=registry,
        )
        self.cycle_interval = Gauge(
            "advisor_cycle_interval_seconds",
            "The configured evaluation interval (scrape_interval), seconds.",
            registry=registry,
        )
        self.cycle_last_success = Gauge(
            "advisor_cycle_last_success_timestamp_seconds",
            "Unix time the last evaluation cycle completed.",
            registry=registry,
        )
        self.cycle_failures = Counter(
            "advisor_cycle_failures",
            "Evaluation cycles (or one deployment's part of one) that failed.",
            ["deployment"],
            registry=registry,
        )
        self.config_reload_success = Gauge(
            "advisor_config_last_reload_successful",
            "1 if the last config reload succeeded (as Prometheus's).",
            registry=registry,
        )
        self.config_reload_success.set(1)
        self.config_reload_timestamp = Gauge(
            "advisor_config_last_reload_success_timestamp_seconds",
            "Unix time of the last successful config load.",
            registry=registry,
        )
        self.notifications_queued = Gauge(
            c.NOTIFICATIONS_QUEUED,
            "Notifications waiting in a receiver's outbox.",
            [c.LABEL_RECEIVER],
            registry=registry,
        )
        self.notifications = Counter(
            c.NOTIFICATIONS,
            "Alert transitions notified, by receiver and outcome: each once as sent, failed or dropped; "
            "resent counts every further POST of one (retries, Alertmanager keep-alives).",
            [c.LABEL_RECEIVER, c.LABEL_OUTCOME],
            registry=registry,
        )
        # the scrape workers (`run --workers N`, advisor/workers.py): one series per worker process
        self.workers = Gauge(
            c.WORKERS,
            "Scrape workers: worker processes (run --workers N), or 1 for the in-process pool.",
            registry=registry,
        )
        self.workers.set(1)
        self.worker_up = Gauge(
            c.WORKER_UP,
            "1 while the scrape worker process runs, 0 while it is down.",
            [c.LABEL_WORKER],
            registry=registry,
        )
        self.worker_restarts = Counter(
            c.WORKER_RESTARTS,
            "Times the scrape worker process was restarted after it died.",
            [c.LABEL_WORKER],
            registry=registry,
        )
        self.worker_cpu = Counter(
            c.WORKER_CPU_SECONDS,
            "CPU time (user and system) of the scrape worker process, as it last reported it, seconds.",
            [c.LABEL_WORKER],
            registry=registry,
        )


def make_registry() -> tuple[CollectorRegistry, AdvisorCollector, SelfMetrics]:
    """A fresh registry with the advisory collector and self-metrics registered on it."""
    registry = CollectorRegistry(auto_describe=True)
    collector = AdvisorCollector()
    registry.register(collector)
    return registry, collector, SelfMetrics(registry)


_LEGACY_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
"""A metric name the text format writes as it is (the Prometheus data model's legacy character set)."""
_LEGACY_LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""A label name the text format writes as it is."""
_LabelKey = tuple[str, tuple[tuple[str, str], ...]]
_go_float = cast("Callable[[float], str]", floatToGoString)
"""prometheus-client's own float formatting of sample values (Go's ``strconv.FormatFloat``, as Prometheus writes)."""


class _One:
    """A collector of one metric family (for :func:`prometheus_client.generate_latest`)."""

    def __init__(self, metric: Metric) -> None:
        self.metric = metric

    def collect(self) -> Iterator[Metric]:
        yield self.metric


def _label_value(value: str) -> str:
    """A label value escaped as the text format escapes it (backslash, newline, double quote)."""
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


class MetricsRenderer:
    """``/metrics`` in the Prometheus text format 0.0.4, byte for byte what
    :func:`prometheus_client.generate_latest` writes for the same registry, with each plain series' line prefix
    (its name and escaped, sorted label set) remembered from one render to the next.

    Why: the advisor exports about 15 series per target (``advisor_target_up``, ``advisor_target_state`` per state,
    ``advisor_scrape_errors_total`` per reason, …), the same series every cycle with new values.
    ``generate_latest`` escapes and validates every label of every sample on every render: at 1,000 targets
    (15,000 lines) it took 127–130 ms, this 69–73 ms, of which 32 ms is the collectors' own ``collect``
    (``timeit`` on one registry, issue 15) — 0.13 against 0.07 ms of CPU per target per scrape of the advisor.

    Gauge families, and counter families without ``_created`` samples, of legacy names and without timestamps take
    the remembered prefixes; every other family (histograms, counters with ``_created`` samples, anything
    ``generate_latest`` would escape or quote) is written by ``generate_latest`` itself. Memory: the prefixes of
    the last render only (a vanished series is forgotten at the next). Thread-safe: each render builds its own
    table and swaps it in whole.
    """

    def __init__(self) -> None:
        self._prefixes: dict[_LabelKey, str] = {}

    def render(self, registry: Collector) -> bytes:
        """The text exposition of every family ``registry.collect()`` yields, UTF-8.

        Raises:
            what ``registry.collect()`` or ``generate_latest`` raises.
        """
        old = self._prefixes
        new: dict[_LabelKey, str] = {}
        out: list[str] = []
        for metric in registry.collect():
            lines = self._plain_lines(metric, old, new)
            if lines is None:
                out.append(generate_latest(_One(metric)).decode("utf-8"))
            else:
                out.extend(lines)
        self._prefixes = new
        return "".join(out).encode("utf-8")

    @staticmethod
    def _plain_lines(metric: Metric, old: dict[_LabelKey, str], new: dict[_LabelKey, str]) -> list[str] | None:
        """``metric``'s lines when it is a plain gauge family, or a counter family without ``_created`` samples
        (else ``None``: ``generate_latest`` writes it)."""
        if metric.type == "gauge":
            name = metric.name
        elif metric.type == "counter":
            name = metric.name + "_total"  # the text format's name of the family and of its samples
        else:
            return None
        if _LEGACY_NAME.fullmatch(name) is None:
            return None
        doc = metric.documentation.replace("\\", r"\\").replace("\n", r"\n")
        lines = [f"# HELP {name} {doc}\n# TYPE {name} {metric.type}\n"]
        for s in metric.samples:
            if s.timestamp is not None or s.name != name:
                return None
            key = (name, tuple(s.labels.items()))
            prefix = new.get(key) or old.get(key)
            if prefix is None:
                if any(_LEGACY_LABEL.fullmatch(k) is None for k in s.labels):
                    return None
                labels = ",".join(f'{k}="{_label_value(v)}"' for k, v in sorted(s.labels.items()))
                prefix = f"{name}{{{labels}}} " if labels else f"{name} "
            new[key] = prefix
            lines.append(f"{prefix}{_go_float(s.value)}\n")
        return lines
