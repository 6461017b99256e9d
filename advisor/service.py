"""The composition root: wires config, sources, adapters, rules, exporter and notifiers.

:meth:`Service.run_once` is a readable list of named steps, each timed into
``advisor_cycle_step_duration_seconds{step}``::

    scrape → normalize → evaluate → rules → publish → notify → persist

One target's failure is recorded (``advisor_target_up`` 0, ``advisor_scrape_errors_total{reason}``) and
never stops the others; one deployment's failure is logged, counted and skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from advisor import conventions as c
from advisor.acks import AckStore
from advisor.capacity.kv import capacity_pass
from advisor.capacity.models import ModelArch
from advisor.config import (
    Config,
    Deployment,
    capacity_inputs,
    check_runtime_paths,
    file_sd_targets,
    gpu_spec,
)
from advisor.domain import EngineSnapshot, Histogram, TimedSnapshot
from advisor.engines import get_adapter
from advisor.engines.base import EngineAdapter
from advisor.engines.dynamo import WORKER_KV_NAMES
from advisor.errors import CapacityError, ConfigError, StateError
from advisor.evaluate import Quality, TargetView, engines_behind, evaluate_deployment, target_state
from advisor.exporter import AdvisorCollector, SelfMetrics
from advisor.files import read_text_capped
from advisor.notify.notifier import Notifier, build_notifier
from advisor.observe import Observation, identify, observe
from advisor.redact import redact_url
from advisor.results import CycleResult, DeploymentResult
from advisor.rules.base import DeploymentContext, Rule, SLOTargets
from advisor.rules.lifecycle import Lifecycle, Transition
from advisor.rules.registry import builtin_rules, load_plugins
from advisor.sources.prometheus import PrometheusSource
from advisor.sources.scrape import ScrapeResult, scrape
from advisor.state import load_state, save_state

log = logging.getLogger(__name__)


@dataclass
class _Target:
    url: str
    session: requests.Session = field(default_factory=requests.Session)
    history: deque[TimedSnapshot] = field(default_factory=deque)
    up: bool = False
    error_reason: str | None = None
    error_message: str | None = None

    def view(self) -> TargetView:
        return TargetView(self.url, self.up, self.error_reason, self.error_message, tuple(self.history))


@dataclass
class _Deployment:
    spec: Deployment
    ctx: DeploymentContext
    adapter: EngineAdapter | None  # None while engine: auto has not been detected yet
    targets: list[_Target]
    prom_wanted: frozenset[str] | None = None  # source: prometheus — the series names to fetch
    prom_refresh: int = 0  # cycles until the names are listed again


def build_rules(cfg: Config) -> list[Rule]:
    """The built-in rules with thresholds from the config, then the plugins (broken ones skipped)."""
    rules = builtin_rules(cfg.rules, cfg.data_quality.capacity_model_error_bound)
    plugins, _ = load_plugins(cfg.rules.plugins)
    return rules + plugins


def deployment_context(
    dep: Deployment, base_dir: Path | None = None, engine: str | None = None, model: ModelArch | None = None
) -> DeploymentContext:
    """Map a configured deployment to the rules' context: the capacity pass under the deployment's own
    engine's accounting (:func:`advisor.config.capacity_inputs` → :func:`advisor.capacity.kv.capacity_pass`,
    the mapping ``plan``, the API and ``simulate`` use), so an SGLang, TGI, TensorRT-LLM or llama.cpp
    deployment is never sized as vLLM. ``engine``: the detected engine of an ``engine: auto`` deployment;
    ``model``: the architecture already resolved.

    Raises:
        CapacityError: the model or GPU cannot be resolved, or the weights do not fit.
    """
    inputs = capacity_inputs(dep, base_dir, engine=engine, model=model)
    return DeploymentContext(
        name=dep.name,
        engine=engine or dep.engine,
        slo=SLOTargets(dep.slo.ttft_seconds, dep.slo.tpot_seconds, dep.slo.target_ratio),
        inputs=inputs,
        capacity=capacity_pass(inputs),
        gpu=gpu_spec(dep),
        replicas=len(dep.targets),
        speculative_decoding=dep.speculative_decoding,
    )


def sized_for_engine(ctx: DeploymentContext, dep: Deployment, engine: str) -> DeploymentContext:
    """``ctx`` once ``engine: auto`` has been detected as ``engine``: re-sized with that engine's accounting
    (replica count kept). A deployment that engine cannot run keeps its size, with the engine set and a
    warning logged."""
    try:
        sized = deployment_context(dep, engine=engine, model=ctx.inputs.model)
    except CapacityError as exc:
        log.warning("deployment=%s: cannot size it as %s (%s); keeping the configured size", dep.name, engine, exc)
        return dataclasses.replace(ctx, engine=engine)
    return dataclasses.replace(sized, replicas=ctx.replicas)


def _num(v: Any) -> str:
    """A number as an operator reads it: 447,440 / 54.62 / 0.9 / unbounded."""
    if v is None:
        return "unbounded"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if float(v).is_integer():
        return f"{int(v):,}"
    return f"{v:,.2f}" if abs(v) >= 1 else f"{v:.3g}"


HISTORY_POINTS_PER_WINDOW = 8
"""Snapshots kept per target per evaluation window at most (plus the newest and restart boundaries)."""


def _restarted(a: EngineSnapshot, b: EngineSnapshot) -> bool:
    if a.process_start_time_seconds != b.process_start_time_seconds and b.process_start_time_seconds is not None:
        return True
    pairs = (
        (a.generation_tokens_total, b.generation_tokens_total),
        (a.prompt_tokens_total, b.prompt_tokens_total),
        (a.preemptions_total, b.preemptions_total),
    )
    return any(x is not None and y is not None and y < x for x, y in pairs)


def _share_buckets(h: Histogram, prev: Histogram) -> Histogram:
    """``h`` with each ``(bound, count)`` pair that equals the previous scrape's replaced by that object
    (idle upper buckets repeat scrape after scrape), and equal bounds sharing one float object."""
    if len(h.buckets) != len(prev.buckets):
        return h
    pairs = []
    changed = False
    for (bound, count), old in zip(h.buckets, prev.buckets, strict=True):
        if bound == old[0] and count == old[1]:
            pairs.append(old)
            changed = changed or (bound, count) is not old
        elif bound == old[0]:
            pairs.append((old[0], count))
            changed = True
        else:
            pairs.append((bound, count))
    return dataclasses.replace(h, buckets=tuple(pairs)) if changed else h


def record(history: deque[TimedSnapshot], point: TimedSnapshot, window: float) -> None:
    """Append ``point`` to a target's history, keeping memory bounded for fleets of thousands of targets:

    * parts equal to the previous snapshot's (engine configuration, the missing list) are shared, not
      copied;
    * points closer than ``window / HISTORY_POINTS_PER_WINDOW`` to their neighbours are thinned (the
      middle one of three is dropped) unless a restart happened across them — rates, histogram deltas and
      counter resets over the window stay exact; only the resolution of min/max gauges coarsens.
    """
    if history:
        prev = history[-1].snapshot
        snap = point.snapshot
        shared: dict[str, Any] = {}
        if snap.engine_config == prev.engine_config and snap.engine_config is not prev.engine_config:
            shared["engine_config"] = prev.engine_config
        if snap.missing == prev.missing and snap.missing is not prev.missing:
            shared["missing"] = prev.missing
        for name in ("ttft", "tpot", "e2e", "queue_time"):
            h, ph = getattr(snap, name), getattr(prev, name)
            if h is not None and ph is not None and h is not ph:
                shared[name] = _share_buckets(h, ph)
        if shared:
            point = dataclasses.replace(point, snapshot=dataclasses.replace(snap, **shared))
        if prev.e2e is not None and len(history) > 1:
            # nothing reads end-to-end latency from older points: keep it on the newest only
            history[-1] = dataclasses.replace(history[-1], snapshot=dataclasses.replace(prev, e2e=None))
    history.append(point)
    spacing = window / HISTORY_POINTS_PER_WINDOW
    if len(history) >= 3:
        a, b, c_ = history[-3], history[-2], history[-1]
        if (
            c_.timestamp - a.timestamp < spacing
            and not _restarted(a.snapshot, b.snapshot)
            and not _restarted(b.snapshot, c_.snapshot)
        ):
            history.remove(b)


def in_shard(name: str, shard: tuple[int, int]) -> bool:
    """Whether deployment ``name`` belongs to shard ``(i, n)``: a stable hash (the first 8 bytes of
    SHA-256) modulo ``n`` equals ``i``, as Prometheus's ``hashmod`` relabel action splits targets."""
    i, n = shard
    if n <= 1:
        return True
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") % n == i


def _sd_path(path: str, base_dir: Path | None) -> Path:
    p = Path(path)
    return base_dir / p if base_dir is not None and not p.is_absolute() else p


def sd_mtimes(cfg: Config, base_dir: Path | None) -> dict[str, float]:
    """Modification time of every ``file_sd`` file (missing files count as 0)."""
    out: dict[str, float] = {}
    for d in cfg.deployments:
        for f in d.file_sd:
            p = _sd_path(f, base_dir)
            try:
                out[str(p)] = p.stat().st_mtime
            except OSError:
                out[str(p)] = 0.0
    return out


def resolve_targets(dep: Deployment, base_dir: Path | None) -> list[str]:
    """The deployment's scrape URLs: ``targets`` plus every target of its ``file_sd`` files
    (:func:`advisor.config.file_sd_targets`; relative paths from ``base_dir``).

    Raises:
        ConfigError: a file_sd file is unreadable or malformed (naming the file and the entry).
    """
    urls = list(dep.targets)
    for f in dep.file_sd:
        for url in file_sd_targets(_sd_path(f, base_dir), dep.metrics_path):
            if url not in urls:
                urls.append(url)
    return urls


def prometheus_source(cfg: Config, base_dir: Path | None, source: str = "config") -> PrometheusSource:
    """The configured Prometheus API client; secret files are read now (relative to ``base_dir``, ``~``
    expanded). ``source`` names the config file in errors.

    Raises:
        ConfigError: a secret or CA file cannot be read, is empty, spans lines or holds what an HTTP header
            cannot carry (the message names the field, never the secret).
    """
    p = cfg.prometheus
    assert p is not None

    def path_of(name: str) -> Path:
        f = Path(name).expanduser()
        return base_dir / f if base_dir is not None and not f.is_absolute() else f

    def fail(field_: str, message: str) -> ConfigError:
        return ConfigError([(f"prometheus.{field_}", message)], source)

    def secret(field_: str, name: str | None) -> str | None:
        if name is None:
            return None
        f = path_of(name)
        try:
            text = read_text_capped(f, 64 * 1024).strip()
        except OSError as exc:
            raise fail(field_, f"cannot read {str(f)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise fail(field_, f"{str(f)!r} is not UTF-8 text") from None
        if not text or "\n" in text or "\r" in text:
            raise fail(field_, f"{str(f)!r} is empty or has more than one line")
        try:
            text.encode("latin-1")
        except UnicodeEncodeError:
            raise fail(field_, f"{str(f)!r} holds characters an HTTP header cannot carry (not Latin-1)") from None
        if any(ch < " " and ch != "\t" for ch in text):
            raise fail(field_, f"{str(f)!r} holds control characters")
        return text

    ca_file = None if p.ca_file is None else str(path_of(p.ca_file))
    token = secret("bearer_token_file", p.bearer_token_file)
    password = secret("password_file", p.password_file)
    try:
        return PrometheusSource(
            p.url,
            bearer_token=token,
            username=p.username,
            password=password,
            ca_file=ca_file,
            headers=p.headers,
            connect_timeout=p.connect_timeout,
            read_timeout=p.read_timeout,
        )
    except ValueError as exc:  # what the config model cannot see (e.g. a CA file that is not there)
        raise fail("ca_file" if str(exc).startswith("ca_file") else "url", str(exc)) from None


_EFFECT_LABELS = {
    "max_concurrency": "sequences at max-model-len",
    "concurrency_ceiling": "sequences at the observed length",
}
"""Console wording for predicted-effect keys whose names alone are ambiguous (both are concurrency ceilings)."""


def format_transition(t: Transition) -> str:
    """One readable line per incident transition: what, why, the suggested turn with its numbers and flag, and
    how many alternatives and withheld turns ride with it (``(+3 alternatives, 1 withheld)``)."""
    r = t.recommendation
    when = time.strftime("%H:%M:%S", time.localtime(r.resolved_at if t.kind == "resolved" else r.opened_at))
    problem = r.problem or r.rule
    turn = f"{r.rule} {r.dial} {r.current} → {r.suggested}"
    extra = f"(+{len(r.alternatives)} alternative{'' if len(r.alternatives) == 1 else 's'}, {len(r.withheld)} withheld)"
    if t.kind == "resolved":
        return f"[{when}] RESOLVED {r.deployment} {problem}: {turn} withdrawn {extra} — {t.reason} (id {r.id})"
    if t.kind == "updated":
        now = time.strftime("%H:%M:%S", time.localtime(r.updated_at) if r.updated_at is not None else time.localtime())
        return f"[{now}] UPDATED {r.deployment} {problem}: now {turn} {extra} ({t.reason}; still open, id {r.id})"
    effects = "; ".join(
        f"{_EFFECT_LABELS.get(k, k.replace('_', ' '))} {_num(v.get('before'))} → {_num(v.get('after'))}"
        for k, v in list(r.predicted_effect.items())[:3]
    )
    return (
        f"[{when}] OPENED {r.severity.upper()} {r.deployment} {problem}: {turn} {extra}"
        f" | why: {t.reason} | effect: {effects} | flag: {r.flag} | confidence {r.confidence:.2f} | id {r.id}"
    )


class Service:
    """Holds runtime state across cycles; ``run_once`` does one cycle."""

    cfg: Config
    base_dir: Path | None
    notifier: Notifier
    acks: AckStore
    prom: PrometheusSource | None
    state_file: Path | None
    lifecycle: Lifecycle
    _pool: ThreadPoolExecutor
    _quality: Quality
    _sd_mtimes: dict[str, float]

    def __init__(
        self,
        cfg: Config,
        collector: AdvisorCollector,
        metrics: SelfMetrics,
        base_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        ignore_for: bool = False,
        on_transition: Callable[[Transition], None] | None = None,
        shard: tuple[int, int] = (0, 1),
    ) -> None:
        """Build the runtime from a validated config.

        ``shard=(i, n)``: this advisor evaluates only the deployments whose stable hash modulo ``n`` is ``i``
        (all replicas of a deployment stay on one advisor, so its rules see every replica).

        Raises:
            CapacityError: a deployment's capacity pass cannot run.
            StateError: the state file or outbox is unreadable or of another version.
            ConfigError: a secret file cannot be read.
        """
        self.collector = collector
        self.metrics = metrics
        self.clock = clock
        self.ignore_for = ignore_for
        self.on_transition = on_transition
        self.shard = shard
        metrics.config_reload_timestamp.set(clock())  # the start-up load is the first successful load
        self.result: CycleResult | None = None
        self._model_error_warned: set[str] = set()
        self._round_started: float | None = None
        self.last_progress: float | None = None
        self._lock = threading.Lock()
        self.deployments: list[_Deployment] = []
        self.scrape_errors: dict[tuple[str, str, str], int] = {}
        self._errors_lock = threading.Lock()
        self._configure(cfg, base_dir, first=True)

    def _configure(self, cfg: Config, base_dir: Path | None, first: bool = False) -> None:
        """(Re)build everything that depends on the config, keeping target histories, open
        recommendations and error counts for the deployments and targets that stay."""
        check_runtime_paths(cfg, base_dir)
        old = {(d.spec.name, t.url): t for d in self.deployments for t in d.targets}
        old_adapters = {d.spec.name: (d.adapter, d.ctx.engine) for d in self.deployments}
        deployments = []
        for dep in cfg.deployments:
            if not in_shard(dep.name, self.shard):
                continue
            ctx = deployment_context(dep, base_dir)
            adapter = None if dep.engine == "auto" else get_adapter(dep.engine)
            if adapter is None and dep.name in old_adapters and old_adapters[dep.name][0] is not None:
                adapter, engine = old_adapters[dep.name]
                ctx = dataclasses.replace(ctx, engine=engine)
            urls = resolve_targets(dep, base_dir)
            targets = [old.get((dep.name, u)) or _Target(u) for u in urls]
            deployments.append(_Deployment(dep, ctx, adapter, targets))
        rules = build_rules(cfg)
        outbox = Path(cfg.outbox_dir) if cfg.outbox_dir else None
        if outbox is not None and base_dir is not None and not outbox.is_absolute():
            outbox = base_dir / outbox
        state_file = Path(cfg.state_file) if cfg.state_file else None
        if state_file is not None and base_dir is not None and not state_file.is_absolute():
            state_file = base_dir / state_file
        prom = prometheus_source(cfg, base_dir) if any(d.source == "prometheus" for d in cfg.deployments) else None
        # everything that can fail has run: swap in the new configuration
        if not first:
            self.notifier.close(10)
            self._pool.shutdown(wait=True)
            if self.prom is not None:
                self.prom.close()
        self.cfg = cfg
        self.base_dir = base_dir
        self.deployments = deployments
        kept = {(d.spec.name, t.url) for d in deployments for t in d.targets}
        self.scrape_errors = {k: v for k, v in self.scrape_errors.items() if (k[0], k[1]) in kept}
        for d in deployments:
            for t in d.targets:
                for reason in c.SCRAPE_ERROR_REASONS:
                    self.scrape_errors.setdefault((d.spec.name, t.url, reason), 0)
        if first:
            self.lifecycle = Lifecycle(rules, cooldown_seconds=cfg.rules.cooldown)
        else:
            self.lifecycle.rules = list(rules)
            self.lifecycle.cooldown_seconds = cfg.rules.cooldown
        self.acks = AckStore(state_file, clock=self.clock)
        self.notifier = build_notifier(
            list(cfg.receivers), outbox, self._count_outcome, base_dir=base_dir, suppressed=self.acks.suppressed
        )
        dq = cfg.data_quality
        self._quality = Quality(cfg.scrape_interval, dq.stale_after_intervals, dq.frozen_after)
        self.state_file = state_file
        if first and state_file is not None:
            known = {d.spec.name for d in deployments}
            restored = [r for r in load_state(state_file) if r.deployment in known]
            self.lifecycle.restore(restored)
            if restored:
                log.info("restored %d open recommendation(s) from %s", len(restored), state_file)
        self.prom = prom
        old_pool = getattr(self, "_pool", None)
        self._pool_size = 0
        self._ensure_pool()
        if old_pool is not None:
            old_pool.shutdown(wait=False)
        self._sd_mtimes = sd_mtimes(cfg, base_dir)

    def _ensure_pool(self) -> None:
        """One worker per scrape target and per ``source: prometheus`` deployment (at most 32), so that one
        slow target delays a cycle by its own timeout, not by a queue of them; grown when file_sd adds
        targets."""
        jobs = sum(len(d.targets) if d.spec.source == "scrape" else 1 for d in self.deployments)
        want = max(1, min(32, jobs))
        if want <= self._pool_size:
            return
        old = getattr(self, "_pool", None) if self._pool_size else None
        self._pool = ThreadPoolExecutor(max_workers=want, thread_name_prefix="scrape")
        self._pool_size = want
        if old is not None:
            old.shutdown(wait=False)

    def reload(self, path: Path) -> tuple[bool, str]:
        """Re-read the config file, as Prometheus does on SIGHUP: on success the new config takes effect
        at once (histories and open recommendations of what stays are kept); on failure the old config
        stays and the message says why. Returns ``(ok, message)``."""
        from advisor.config import load_config
        from advisor.errors import AdvisorError

        try:
            cfg = load_config(path)
            with self._lock:
                self._configure(cfg, path.resolve().parent)
        except AdvisorError as exc:
            self.metrics.config_reload_success.set(0)
            log.error("config reload failed; keeping the running config: %s", exc)
            return False, str(exc)
        except Exception as exc:  # a bug must not take the running daemon down with it
            self.metrics.config_reload_success.set(0)
            log.exception("config reload failed unexpectedly; keeping the running config")
            return False, f"reload failed: {type(exc).__name__}"
        self.metrics.config_reload_success.set(1)
        self.metrics.config_reload_timestamp.set(self.clock())
        log.info("config reloaded from %s: %d deployment(s)", path, len(self.deployments))
        return True, f"reloaded: {len(self.deployments)} deployment(s)"

    def _refresh_file_sd(self) -> None:
        """Re-read ``file_sd`` files whose modification time changed, adding and removing targets."""
        now = sd_mtimes(self.cfg, self.base_dir)
        if now == self._sd_mtimes:
            return
        self._sd_mtimes = now
        for d in self.deployments:
            if not d.spec.file_sd:
                continue
            try:
                urls = resolve_targets(d.spec, self.base_dir)
            except ConfigError as exc:
                log.error("deployment=%s: file_sd unusable, keeping the current targets: %s", d.spec.name, exc)
                continue
            except Exception:  # one deployment's discovery must never stop the others' cycle
                log.exception("deployment=%s: file_sd unusable, keeping the current targets", d.spec.name)
                continue
            by_url = {t.url: t for t in d.targets}
            d.targets = [by_url.get(u) or _Target(u) for u in urls]
            d.ctx = dataclasses.replace(d.ctx, replicas=max(1, len(d.targets)))
            for t in d.targets:
                for reason in c.SCRAPE_ERROR_REASONS:
                    self.scrape_errors.setdefault((d.spec.name, t.url, reason), 0)
            log.info("deployment=%s: file_sd now lists %d target(s)", d.spec.name, len(d.targets))
        self._ensure_pool()

    # -- steps -------------------------------------------------------------------------------------
    @contextmanager
    def _step(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.metrics.step_seconds.labels(step=name).observe(time.perf_counter() - start)

    def _scrape_all(self) -> list[tuple[_Deployment, _Target, ScrapeResult, float]]:
        jobs = [(d, t) for d in self.deployments if d.spec.source == "scrape" for t in d.targets]
        sc = self.cfg.scrape

        def one(job: tuple[_Deployment, _Target]) -> tuple[_Deployment, _Target, ScrapeResult, float]:
            d, t = job
            res = scrape(t.url, t.session, sc.connect_timeout, sc.read_timeout, sc.max_bytes)
            return d, t, res, self.clock()

        return list(self._pool.map(one, jobs))

    def _normalize(self, scraped: Sequence[tuple[_Deployment, _Target, ScrapeResult, float]]) -> None:
        for d, t, res, ts in scraped:
            reason, message = res.error_reason, res.error_message
            if res.ok and res.text is not None:
                try:
                    seen = observe(
                        res.text,
                        d.adapter or "auto",
                        d.spec.served_model,
                        configured_model=d.spec.model,
                        strict=True,
                    )
                except Exception as exc:  # an adapter bug must not stop other targets
                    log.exception("deployment=%s target=%s: adapter failed", d.spec.name, redact_url(t.url))
                    reason, message = c.REASON_PARSE_ERROR, f"adapter error: {type(exc).__name__}"
                else:
                    self._adopt(d, seen)
                    if seen.snapshot is not None:
                        record(t.history, TimedSnapshot(t.url, ts, seen.snapshot), self.cfg.evaluation_window)
                        t.up, t.error_reason, t.error_message = True, None, None
                        self._count_replicas(d)
                        continue
                    reason, message = seen.error_reason, seen.error_message
            changed = t.up or t.error_reason != reason
            t.up, t.error_reason, t.error_message = False, reason, message
            key = (d.spec.name, t.url, reason or c.REASON_PARSE_ERROR)
            with self._errors_lock:  # Prometheus queries run beside this loop
                self.scrape_errors[key] = self.scrape_errors.get(key, 0) + 1
            # a target that stays down is logged once (and again when the reason changes), not every scrape
            (log.warning if changed else log.debug)(
                "deployment=%s target=%s scrape failed: %s (%s)", d.spec.name, redact_url(t.url), reason, message
            )

    def _count_replicas(self, d: _Deployment) -> None:
        """The deployment's replicas: one per target, or each engine a target fronts (Ray Serve replicas)."""
        n = sum(engines_behind(t.history[-1].snapshot) if t.history else 1 for t in d.targets)
        if n != d.ctx.replicas:
            d.ctx = dataclasses.replace(d.ctx, replicas=max(1, n))

    def _adopt(self, d: _Deployment, seen: Observation) -> None:
        """``engine: auto``: keep the adapter of the first page an engine was detected on."""
        if d.adapter is None and seen.adapter is not None:
            d.adapter = seen.adapter
            d.ctx = sized_for_engine(d.ctx, d.spec, seen.adapter.engine)
            log.info("deployment=%s: detected engine %s", d.spec.name, seen.adapter.engine)

    def _prom_error(self, d: _Deployment, reason: str | None, message: str | None) -> None:
        assert self.cfg.prometheus is not None
        where = redact_url(self.cfg.prometheus.url)
        if not d.targets:  # nothing discovered yet: show the source itself, with why it failed
            d.targets.append(_Target(where))
        for t in d.targets:
            t.up, t.error_reason, t.error_message = False, reason, message
        key = (d.spec.name, where, reason or c.REASON_PARSE_ERROR)
        with self._errors_lock:  # deployments are queried concurrently
            self.scrape_errors[key] = self.scrape_errors.get(key, 0) + 1
        log.warning("deployment=%s prometheus=%s query failed: %s (%s)", d.spec.name, where, reason, message)

    def _query_prometheus(self, d: _Deployment) -> None:
        """``source: prometheus``: one range query per deployment per cycle, whatever the number of engine
        instances behind the selector; each instance becomes a target with the same history a scrape
        would build. The series names are listed (and the engine detected) every 20 cycles."""
        src = self.prom
        assert src is not None and d.spec.selector is not None
        now = self.clock()
        window = self.cfg.evaluation_window + self.cfg.scrape_interval
        if d.prom_wanted is None or d.prom_refresh <= 0:
            names = src.metric_names(d.spec.selector, now - window, now)
            if not names.ok:
                self._prom_error(d, names.error_reason, names.error_message)
                return
            found = identify(names.names, d.adapter or "auto")
            if found.adapter is None or (found.error_reason is not None and names.names):
                self._prom_error(d, found.error_reason, f"selector {d.spec.selector}: {found.error_message}")
                return
            self._adopt(d, found)
            d.prom_wanted = frozenset(n for n in names.names if found.adapter.wants(n) or n in WORKER_KV_NAMES)
            d.prom_refresh = 20
        d.prom_refresh -= 1
        assert d.adapter is not None
        if not d.prom_wanted:
            self._prom_error(d, c.REASON_UNRECOGNIZED, f"no {d.adapter.engine} series match the selector")
            return
        h = src.history(d.spec.selector, d.prom_wanted, now - window, now, self.cfg.scrape_interval)
        if not h.ok:
            self._prom_error(d, h.error_reason, h.error_message)
            return
        by_name = {t.url: t for t in d.targets}
        seen: set[str] = set()
        for g in h.groups:
            t = by_name.get(g.target)
            if t is None:
                t = _Target(g.target)
                d.targets.append(t)
                by_name[g.target] = t
            seen.add(g.target)
            try:
                observed = [
                    (ts, observe(expo, d.adapter, d.spec.served_model, configured_model=d.spec.model, strict=True))
                    for ts, expo in g.points
                    if expo
                ]
            except Exception as exc:  # an adapter bug must not stop other targets
                log.exception("deployment=%s target=%s: adapter failed", d.spec.name, g.target)
                t.up, t.error_reason, t.error_message = False, c.REASON_PARSE_ERROR, f"adapter error: {exc!r}"
                continue
            t.history = deque(TimedSnapshot(g.target, ts, o.snapshot) for ts, o in observed if o.snapshot is not None)
            last_up = g.up[-1][1] if g.up else 1.0
            ok = bool(t.history) and last_up == 1.0
            failed = observed[-1][1] if observed and not observed[-1][1].ok else None
            t.up = ok and failed is None
            if failed is not None:  # the page is there but says no (served_model_not_found, unrecognized)
                t.error_reason, t.error_message = failed.error_reason, failed.error_message
            else:
                t.error_reason = None if ok else c.REASON_HTTP_STATUS
                t.error_message = None if ok else "Prometheus reports the target down (up == 0) or has no samples"
        for t in d.targets:
            if t.url not in seen:
                t.up, t.error_reason, t.error_message = False, c.REASON_HTTP_STATUS, "no series in Prometheus"
        n = sum(engines_behind(t.history[-1].snapshot) if t.history else 1 for t in d.targets if t.url in seen)
        d.ctx = dataclasses.replace(d.ctx, replicas=max(1, n))

    def _trim(self, now: float, window: float) -> None:
        keep = window + 3 * self.cfg.scrape_interval
        for d in self.deployments:
            for t in d.targets:
                while t.history and now - t.history[0].timestamp > keep:
                    t.history.popleft()

    def _evaluate(self, now: float, window: float) -> tuple[list[DeploymentResult], list[Transition]]:
        results: list[DeploymentResult] = []
        transitions: list[Transition] = []
        for d in self.deployments:
            try:
                views = [t.view() for t in d.targets]
                ev, snapshot = evaluate_deployment(
                    d.ctx, views, now, window, self._quality, round_started=self._round_started
                )
                self._check_model_error(d.spec.name, snapshot.get("capacity_model_error_ratio"))
                with self._step("rules"):
                    transitions += self.lifecycle.evaluate(ev, ignore_for=self.ignore_for)
                for update in self.lifecycle.last_updates:  # shown, never notified: the alert is unchanged
                    if self.on_transition is not None:
                        self.on_transition(update)  # the console line (the log would repeat it on stderr)
                    else:
                        log.info("%s", format_transition(update))
                statuses = tuple(s for (dep, _), s in self.lifecycle.statuses.items() if dep == d.spec.name)
                results.append(
                    DeploymentResult(
                        name=d.spec.name,
                        engine=d.ctx.engine,
                        state=ev.state,
                        evaluation=ev,
                        snapshot=snapshot,
                        capacity=d.ctx.capacity,
                        targets=tuple(views),
                        recommendations=tuple(self.lifecycle.open_recommendations(d.spec.name)),
                        rule_statuses=statuses,
                        target_states=tuple(target_state(v, self._round_started or now, self._quality) for v in views),
                    )
                )
            except Exception:
                log.exception("deployment=%s: evaluation failed; skipped this cycle", d.spec.name)
                self.metrics.cycle_failures.labels(deployment=d.spec.name).inc()
        return results, transitions

    def _check_model_error(self, name: str, error: float | None) -> None:
        """Warn once (and again after it recovers) when the capacity pass misses the engine's own pool."""
        bound = self.cfg.data_quality.capacity_model_error_bound
        if error is not None and abs(error) > bound:
            if name not in self._model_error_warned:
                self._model_error_warned.add(name)
                log.warning(
                    "deployment=%s: the capacity pass predicts %+.0f%% vs the engine's reported KV pool "
                    "(bound ±%.0f%%); rules use the engine's number — check model, GPU, dtype and "
                    "gpu_memory_utilization in the config",
                    name,
                    error * 100,
                    bound * 100,
                )
        else:
            self._model_error_warned.discard(name)

    def _notify(self, transitions: Sequence[Transition]) -> None:
        for tr in transitions:
            if self.on_transition is not None:
                self.on_transition(tr)
            if tr.kind == "opened" and self.acks.suppressed(tr.recommendation.id, self.clock()):
                continue
            self.notifier.submit(tr.kind, tr.recommendation)

    def _count_outcome(self, receiver: str, outcome: str, queued: int) -> None:
        if outcome != "queued":
            self.metrics.notifications.labels(receiver=receiver, outcome=outcome).inc()
        self.metrics.notifications_queued.labels(receiver=receiver).set(queued)

    # -- the cycle ---------------------------------------------------------------------------------
    def scrape_once(self) -> None:
        """Scrape and normalize every target once (``once`` calls this twice before evaluating)."""
        with self._lock:
            self._round_started = self.clock()
            self._refresh_file_sd()
            # every scrape and every Prometheus query at once, one worker each: a slow target or selector
            # delays the cycle by its own latency, not by the sum over them
            prom = [d for d in self.deployments if d.spec.source == "prometheus"]
            queries = [self._pool.submit(self._query_prometheus_safely, d) for d in prom]
            with self._step("scrape"):
                scraped = self._scrape_all()
            with self._step("normalize"):
                self._normalize(scraped)
            with self._step("prometheus"):
                for q in queries:
                    q.result()

    def _query_prometheus_safely(self, d: _Deployment) -> None:
        try:
            self._query_prometheus(d)
        except Exception as exc:  # one deployment's source must never stop the others
            log.exception("deployment=%s: the prometheus source failed", d.spec.name)
            self._prom_error(d, c.REASON_PARSE_ERROR, f"source error: {type(exc).__name__}")

    def evaluate_once(self, window_seconds: float | None = None) -> CycleResult:
        """Evaluate, publish and notify from the history gathered so far (over ``window_seconds``,
        default the configured evaluation window)."""
        with self._lock:
            now = self.clock()
            window = window_seconds or self.cfg.evaluation_window
            self._trim(now, window)
            with self._step("evaluate"):
                results, transitions = self._evaluate(now, window)
            result = CycleResult(now, tuple(results), dict(self.scrape_errors))
            with self._step("publish"):
                self.result = result
                self.collector.publish(result)
            with self._step("notify"):
                self._notify(transitions)
            if transitions and self.state_file is not None:
                with self._step("persist"):
                    try:
                        save_state(self.state_file, self.lifecycle.open_recommendations(), now)
                    except StateError as exc:
                        self.metrics.cycle_failures.labels(deployment="(state file)").inc()
                        log.error("could not persist open recommendations; they stay in memory: %s", exc)
            self.metrics.cycles.inc()
            self.last_progress = now
            return result

    def run_once(self) -> CycleResult:
        """One whole cycle: scrape → normalize → evaluate → rules → publish → notify."""
        self.scrape_once()
        return self.evaluate_once()

    def healthy(self, now: float, intervals: int = 3) -> bool:
        """True when a cycle completed within ``intervals`` scrape intervals (or none was due yet)."""
        if self.last_progress is None:
            return True
        return now - self.last_progress <= intervals * self.cfg.scrape_interval + 5

    def close(self, timeout: float = 30.0) -> None:
        """Flush notifications and release threads and sessions."""
        self.notifier.close(timeout)
        self._pool.shutdown(wait=True)
        if self.prom is not None:
            self.prom.close()
        for d in self.deployments:
            for t in d.targets:
                t.session.close()
