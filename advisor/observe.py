"""One observation path: a page (text or samples) → the snapshot of the deployment's model. Pure.

The daemon's scrape path (:meth:`advisor.service.Service._normalize`), its Prometheus path
(:meth:`advisor.service.Service._query_prometheus`, :func:`advisor.sources.prometheus.to_timed_snapshots`),
``capacity-advisor inspect`` and ``once`` all call :func:`observe`, which parses once, detects the engine
once (``engine: auto``) and adapts once::

    text ──parse_exposition──▶ samples ──detect_engine──▶ adapter ──snapshot(model)──▶ EngineSnapshot
                                  │                                        ▲
                                  └── Dynamo worker KV gauges (worker_kv) ─┘

Every way a page can fail is a reason of :data:`advisor.conventions.SCRAPE_ERROR_REASONS`:

* ``parse_error`` — not Prometheus text (an HTML page, JSON, a truncated line).
* ``unrecognized`` — valid text with no family of the engine (or of any engine for ``auto``); the message
  names the metric-name prefixes seen (``DCGM_FI_``, ``go_``, ``process_``) and says when it is GPU telemetry.
* ``sample_limit`` — a series the advisor parsed carries more labels than ``label_limit`` (the sample count is
  checked before parsing, by :func:`advisor.sources.scrape.scrape`).
* ``nan_values`` — the engine's families are there, but every value the advisor reads from them is NaN or ±Inf (the
  snapshot holds no reading: :func:`reads_nothing`). A NaN sample is absent, not a value; a page with only some NaN
  values is read, its NaN quantities unknown.
* ``served_model_not_found`` — ``served_model`` names none of the models on the page; the message lists
  them. Nothing of another model is ever read in its place. In the daemon (``strict``) a page of several
  models with no ``served_model`` reads the one the deployment's ``model`` names, and is this error otherwise:
  the advisor never guesses which model a deployment is.

A series repeated on the page (same name and label set) is read once, its first sample kept, as Prometheus keeps
it (``scrape/scrape.go`` drops the later ones and counts them as duplicates); the repetitions are counted in
:attr:`Observation.duplicate_series` and named in the snapshot's ``missing``, for every engine and every family
(gauges, counters, histogram buckets), before any adapter sees the samples.

No I/O, no clock: callers stamp the time and keep the adapter :attr:`Observation.adapter` for the next page.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from advisor import conventions as c
from advisor.domain import SNAPSHOT_READING_FIELDS, EngineSnapshot, Exposition, RankValues, Sample
from advisor.engines import ENGINES, detect_engine, get_adapter
from advisor.engines.base import EngineAdapter
from advisor.engines.common import first_samples
from advisor.engines.detect import carries_engine, describe_unrecognized
from advisor.engines.dynamo import WORKER_KV_NAMES, worker_kv
from advisor.engines.versions import version_hints
from advisor.errors import ParseError
from advisor.listing import join_bounded
from advisor.redact import outside_text
from advisor.sources.exposition import parse_exposition
from advisor.sources.limits import label_limit_message, over_label_limit

SERVED_MODEL_FLAG: Final = "--served-model"
"""The ``inspect`` flag that picks one model of several (named in :attr:`Observation.hint`)."""


@dataclass(frozen=True, slots=True)
class Observation:
    """What one page says.

    Attributes:
        snapshot: the chosen model's snapshot, or ``None`` when the page failed (see ``error_reason``).
        engine: the engine id used (detected for ``auto``), ``None`` when none could be.
        adapter: the adapter used; a caller with ``engine: auto`` keeps it for the next page.
        models: every served model on the page, in exposition order (``()`` for engines without a model label).
        version_hints: what the names say about the engine's release (:func:`advisor.engines.versions.version_hints`).
        error_reason: ``None``, ``parse_error``, ``unrecognized``, ``sample_limit`` (``label_limit``) or
            ``served_model_not_found``.
        error_message: why, naming the prefixes or the models seen.
        duplicate_series: samples dropped because their series (name and label set) already appeared on the page,
            among the samples the adapter reads (the first of each kept); 0 for a clean page.
    """

    snapshot: EngineSnapshot | None
    engine: str | None = None
    adapter: EngineAdapter | None = None
    models: tuple[str, ...] = ()
    version_hints: tuple[str, ...] = ()
    error_reason: str | None = None
    error_message: str | None = None
    duplicate_series: int = 0

    @property
    def ok(self) -> bool:
        """True when a snapshot was read."""
        return self.snapshot is not None

    def hint(self, target: str = "URL") -> str | None:
        """How to pick one model when the page serves several and none was chosen, else ``None``.

        Example: ``"2 models on this target (a, b); pick one: capacity-advisor inspect URL --served-model NAME"``.
        """
        if len(self.models) < 2:
            return None
        return (
            f"{len(self.models)} models on this target ({join_bounded(self.models)}); pick one: "
            f"capacity-advisor inspect {target} {SERVED_MODEL_FLAG} NAME (served_model: NAME in the config)"
        )


def identify(
    names: Collection[str] | Mapping[str, object],
    engine: str | EngineAdapter = "auto",
    auto_detected: str | None = None,
) -> Observation:
    """The adapter for a page's sample names (``engine: auto`` detects), or why there is none; ``auto_detected``:
    where ``engine: auto`` detected ``engine`` (:func:`~advisor.engines.detect.describe_unrecognized`).

    Used alone where only names are known (the Prometheus API's series list); :func:`observe` calls it too.

    Returns:
        An :class:`Observation` with ``adapter`` and ``engine`` set and no snapshot, or with
        ``error_reason`` ``unrecognized`` (message from :func:`advisor.engines.detect.describe_unrecognized`).
    """
    if not isinstance(engine, str):
        adapter: EngineAdapter = engine
    elif engine == "auto":
        detected = detect_engine(names)
        if detected is None or detected not in ENGINES:
            return Observation(None, error_reason=c.REASON_UNRECOGNIZED, error_message=describe_unrecognized(names))
        adapter = get_adapter(detected)
    else:
        adapter = get_adapter(engine)
    if not any(adapter.wants(n) for n in names) or not carries_engine(names, adapter.engine):
        message = describe_unrecognized(names, adapter.engine, auto_detected)
        return Observation(None, adapter.engine, adapter, error_reason=c.REASON_UNRECOGNIZED, error_message=message)
    return Observation(None, adapter.engine, adapter)


def observe(
    page: str | Exposition,
    engine: str | EngineAdapter = "auto",
    served_model: str | None = None,
    *,
    configured_model: str | None = None,
    strict: bool = False,
    label_limit: int = 0,
    auto_detected: str | None = None,
) -> Observation:
    """Parse once, detect once, adapt once.

    Args:
        page: the exposition text as served on ``/metrics``, or samples already parsed (a Prometheus
            range-query point, keyed by sample name).
        engine: an engine id, ``"auto"``, or the adapter a previous observation returned.
        served_model: the model to read when the page carries several (``served_model`` in the config); it
            must match one of them (exactly, or ignoring case).
        configured_model: the deployment's ``model`` (a preset id such as ``Qwen/Qwen2.5-7B-Instruct``); with
            no ``served_model`` and several models on the page, the one it names (exactly, or ignoring case)
            is read.
        strict: the daemon's rule for a page of several models and no way to choose (no ``served_model``, no
            model matching ``configured_model``): ``served_model_not_found`` naming them, never a guess.
            ``False`` (``inspect``) reads the first and :meth:`Observation.hint` says how to pick.
        label_limit: labels a parsed series may carry (config ``scrape.label_limit``; ``0`` = no limit); a series
            over it fails the page with reason ``sample_limit``, naming the series, its labels and the limit.
        auto_detected: where ``engine: auto`` detected ``engine``: ``"other"`` on another target of the deployment
            (a page of another engine is then a mix of engines), ``"this"`` on this target earlier (its engine
            changed); ``unrecognized`` says which. ``None``: as configured.

    Returns:
        An :class:`Observation`; never raises for page trouble (bad text is ``parse_error``).

    Raises:
        ValueError: ``engine`` is not a known engine id.
    """
    if isinstance(engine, str) and engine != "auto":
        engine = get_adapter(engine)  # one adapter for the parse filter and the reading
    pinned = None if isinstance(engine, str) else engine
    keep: _Keep | None = None
    if isinstance(page, str):
        keep = None if pinned is None else _keep_for(pinned)
        try:
            samples: Exposition = parse_exposition(page, keep=keep)
        except ParseError as exc:
            return Observation(None, error_reason=c.REASON_PARSE_ERROR, error_message=outside_text(str(exc)))
        over = over_label_limit(samples, label_limit)
        if over is not None:
            return Observation(
                None, error_reason=c.REASON_SAMPLE_LIMIT, error_message=label_limit_message(*over, label_limit)
            )
        names: Collection[str] | Mapping[str, object] = samples
        if keep is not None and pinned is not None and page.strip() and not carries_engine(samples, pinned.engine):
            names = sample_names(page)  # none of the engine's own kept: name what the page does carry
    else:
        samples = page
        names = samples
    found = identify(names, engine, auto_detected)
    if found.adapter is None or found.error_reason is not None:
        return found
    adapter = found.adapter
    if keep is not None and keep.engine == adapter.engine:  # parsed with this engine's filter: every name passed it
        wanted: Exposition = samples
    else:
        wanted = {k: v for k, v in samples.items() if adapter.wants(k) or k in WORKER_KV_NAMES}
    read, notes = first_samples(wanted)  # every family of every engine: the first sample of a series wins
    duplicates = sum(map(len, wanted.values())) - sum(map(len, read.values())) if notes else 0
    workers = not WORKER_KV_NAMES.isdisjoint(read)
    expo = {k: v for k, v in read.items() if adapter.wants(k)} if workers else read  # else every name is wanted
    models = tuple(adapter.models(expo))
    hints = tuple(version_hints(adapter.engine, samples))
    # found is Observation(None, engine, adapter) (identify): built whole, as dataclasses.replace costs 5× more
    base = Observation(None, found.engine, adapter, models, hints, duplicate_series=duplicates)
    chosen = served_model
    if served_model is None and len(models) > 1:
        chosen = _match(configured_model, models) if configured_model else None
        if chosen is None and strict:
            message = (
                f"the page serves {len(models)} models ({join_bounded(models)}) and served_model is not set"
                + (f" (model {configured_model!r} is none of them)" if configured_model else "")
                + ": set served_model to the one this deployment is"
            )
            return dataclasses.replace(base, error_reason=c.REASON_SERVED_MODEL_NOT_FOUND, error_message=message)
    if served_model is not None and models:
        chosen = _match(served_model, models)
        if chosen is None:
            message = (
                f"served_model {served_model!r} matches none of the {len(models)} model(s) on the page: "
                f"{join_bounded(models)}"
            )
            return dataclasses.replace(base, error_reason=c.REASON_SERVED_MODEL_NOT_FOUND, error_message=message)
    snap = adapter.snapshot(expo, chosen)
    if workers:
        snap = worker_kv(snap, {k: v for k, v in read.items() if k in WORKER_KV_NAMES})
    if reads_nothing(snap):
        nan = nan_names(read)
        if nan:
            message = f"every value the advisor reads is NaN or infinite ({join_bounded(nan)})"
            return dataclasses.replace(base, error_reason=c.REASON_NAN_VALUES, error_message=message)
    if notes:
        snap = dataclasses.replace(snap, missing=(*notes, *snap.missing))
    return Observation(snap, found.engine, adapter, models, hints, duplicate_series=duplicates)


_READINGS: Final = SNAPSHOT_READING_FIELDS
_RANK_READINGS: Final = tuple(n for n in _READINGS if n in RankValues.__dataclass_fields__)


def reads_nothing(snap: EngineSnapshot) -> bool:
    """Whether ``snap`` holds no reading of the engine's load: every field of :data:`_READINGS` unknown, on the
    aggregate and on every rank, no pool usage, and no queue by reason or disaggregation queue."""
    if any(getattr(snap, n) is not None for n in _READINGS):
        return False
    if any(getattr(r, n) is not None for r in snap.ranks for n in _RANK_READINGS):
        return False
    if any(p.usage_ratio is not None or p.used is not None for p in snap.pools):
        return False
    return not snap.requests_waiting_by_reason and not snap.disaggregation_queues


def nan_names(samples: Exposition) -> list[str]:
    """The sample names of ``samples`` with a NaN or ±Inf value, sorted (``[]`` when none): the adapters read
    neither as a value (a gauge or counter at ±Inf is no more a reading than NaN)."""
    return sorted(name for name, ss in samples.items() if any(not math.isfinite(s.value) for s in ss))


def _match(served_model: str, models: Sequence[str]) -> str | None:
    """The page's spelling of ``served_model``: exact, else the one model equal ignoring case."""
    if served_model in models:
        return served_model
    folded = [m for m in models if m.casefold() == served_model.casefold()]
    return folded[0] if len(folded) == 1 else None


@dataclass(frozen=True, slots=True)
class _Keep:
    """The parse filter for one engine: its adapter's names plus the Dynamo worker KV gauges. Equal per engine
    id, so the selective parser's plan cache (keyed by the filter) holds one plan per engine."""

    engine: str
    wants: Callable[[str], bool] = dataclasses.field(compare=False, hash=False)

    def __call__(self, name: str) -> bool:
        return self.wants(name) or name in WORKER_KV_NAMES


def _keep_for(adapter: EngineAdapter) -> _Keep:
    return _Keep(adapter.engine, adapter.wants)


def sample_names(text: str) -> list[str]:
    """Every sample name of a valid page (a second, full parse: only on the ``unrecognized`` path)."""
    try:
        full: dict[str, list[Sample]] = parse_exposition(text)
    except ParseError:
        return []
    return list(full)
