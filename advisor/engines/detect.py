"""``engine: auto``: which engine produced an exposition, from its metric-name prefixes.

The heuristic of ``../shared/reference/engine-metrics-catalog.md`` §10: each engine prefixes every family it
registers. Engine families win over wrappers: a Dynamo *worker* passes its engine's ``vllm:*``/``sglang:*``/
``trtllm_*`` families through beside ``dynamo_component_*``, so it is that engine; only a frontend
(``dynamo_frontend_*`` and no engine family) is ``dynamo``; a worker page carrying only ``dynamo_component_*``
is read by the Dynamo adapter too. DCGM (``DCGM_FI_``) is GPU telemetry, not an engine: ``dcgm`` is returned
so callers can say so, but :func:`advisor.engines.get_adapter` has no adapter for it.

Re-exports count as their engine: Ray Serve LLM's ``RayPrometheusStatLogger`` (``vllm/v1/metrics/ray_wrappers.py``,
names sanitized to ``[a-zA-Z0-9_]`` and prefixed ``ray_`` by Ray's exporter: ``ray_vllm_num_requests_running``;
before sanitizing, ``ray_vllm:num_requests_running``, as in ray-project/ray PR #52719) is ``vllm``.

A page no prefix matches is *unrecognized*, not unparseable: :func:`describe_unrecognized` names the
metric-name prefixes it does carry (``DCGM_FI_``, ``go_``, ``process_``), so the operator sees what was scraped.

Example::

    detect_engine(["vllm:num_requests_running", "process_start_time_seconds"])   → "vllm"
    detect_engine(["dynamo_component_uptime_seconds", "trtllm_request_success_total"]) → "trtllm"
    detect_engine(["python_gc_objects_collected_total"])                          → None
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import Final

from advisor.engines import catalog

_MAX_PREFIXES_NAMED: Final = 8

TELEMETRY_PREFIXES: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (("dcgm", ("DCGM_FI_",)),)
"""Pages that are not an engine's but are recognised to say so: DCGM exporter (``dcgm-exporter``'s
``DCGM_FI_*`` field names). No catalog entry: :func:`advisor.engines.get_adapter` has no adapter for them."""


@cache
def prefixes() -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Engine id → family prefixes in priority order: the catalog's engines, then its frontends
    (:func:`advisor.engines.catalog.detection_prefixes`), then GPU telemetry (:data:`TELEMETRY_PREFIXES`).

    Example: ``(("vllm", ("vllm:", "ray_vllm_", "ray_vllm:")), …, ("dynamo", ("dynamo_frontend_", …)),
    ("dcgm", ("DCGM_FI_",)))``.
    """
    return (*catalog.detection_prefixes(), *TELEMETRY_PREFIXES)


@cache
def _groups() -> tuple[tuple[str, ...], ...]:
    """Engine ids in the order detection prefers them: engines, frontends, telemetry."""
    frontends = {e.engine for e in catalog.entries() if e.frontend_only}
    ids = [engine for engine, _ in catalog.detection_prefixes()]
    return (
        tuple(e for e in ids if e not in frontends),
        tuple(e for e in ids if e in frontends),
        tuple(engine for engine, _ in TELEMETRY_PREFIXES),
    )


def detect_engine(exposition_or_sample_names: Mapping[str, object] | Iterable[str]) -> str | None:
    """The engine id whose prefix the most sample names carry (ties: the earlier in :func:`prefixes`); an
    engine's own families win over a frontend's, and both over GPU telemetry.

    Args:
        exposition_or_sample_names: an :data:`~advisor.domain.Exposition` (its keys are read) or sample names
            (e.g. the names a Prometheus API lists for a selector).

    Returns:
        An engine id, or ``None`` when no known prefix appears.
    """
    table = prefixes()
    counts = dict.fromkeys((engine for engine, _ in table), 0)
    for name in exposition_or_sample_names:
        for engine, engine_prefixes in table:
            if name.startswith(engine_prefixes):
                counts[engine] += 1
                break
    for group in _groups():
        if not group:
            continue
        best = max(group, key=lambda e: counts[e])
        if counts[best] > 0:
            return best
    return None


def carries_engine(exposition_or_sample_names: Mapping[str, object] | Iterable[str], engine: str) -> bool:
    """Whether a page carries at least one family of ``engine``'s own prefixes (:func:`prefixes`); ``True`` for
    an engine with no prefix known. Names every exporter has (``process_start_time_seconds``, which some
    adapters read) are not proof: a vLLM page read with ``engine: sglang`` was taken for an SGLang page with
    every reading unknown (breaker, 2026-12-03).

    Example: ``(["vllm:num_requests_running", "process_start_time_seconds"], "sglang")`` → ``False``.
    """
    own = dict(prefixes()).get(engine)
    if not own:
        return True
    return any(name.startswith(own) for name in exposition_or_sample_names)


def name_prefixes(exposition_or_sample_names: Mapping[str, object] | Iterable[str]) -> list[str]:
    """The metric-name prefixes a page carries, most frequent first (at most 8), for messages.

    A known family prefix of :func:`prefixes` counts as itself (``DCGM_FI_``); any other name counts by its
    first word up to and including the first ``_`` or ``:`` (``go_gc_duration_seconds`` → ``go_``).

    Example: ``["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "go_goroutines"]`` → ``["DCGM_FI_", "go_"]``.
    """
    known = [p for _, engine_prefixes in prefixes() for p in engine_prefixes]
    counts: dict[str, int] = {}
    for name in exposition_or_sample_names:
        prefix = next((p for p in known if name.startswith(p)), None)
        if prefix is None:
            cut = min((i for i in (name.find("_", 1), name.find(":", 1)) if i > 0), default=-1)
            prefix = name[: cut + 1] if cut > 0 else name
        counts[prefix] = counts.get(prefix, 0) + 1
    return sorted(counts, key=lambda p: (-counts[p], p))[:_MAX_PREFIXES_NAMED]


def auto_engine_mismatch(page: str, adopted: str, this_target: bool) -> str:
    """Why a page of engine ``page`` is not read by an ``engine: auto`` deployment that detected ``adopted`` first
    (on this target earlier when ``this_target``, else on another of its targets), and what to do: the daemon keeps
    the engine it detected first, across reloads that keep the target it was detected on.

    Example: ``("sglang", "vllm", False)`` → ``"no vllm metrics: the page looks like sglang, but this deployment's
    engine: auto was detected as vllm on another of its targets and keeps it: if the targets serve different
    engines, give this one a deployment of its own; if every target's engine changed, set engine: sglang (or restart
    the advisor to detect it again)"``.
    """
    where = "this target earlier" if this_target else "another of its targets"
    fix = (
        f"the engine behind it changed: set engine: {page}, or restart the advisor to detect it again"
        if this_target
        else f"if the targets serve different engines, give this one a deployment of its own; if every target's engine "
        f"changed, set engine: {page} (or restart the advisor to detect it again)"
    )
    return (
        f"no {adopted} metrics: the page looks like {page}, but this deployment's engine: auto was detected as "
        f"{adopted} on {where} and keeps it: {fix}"
    )


def describe_unrecognized(
    exposition_or_sample_names: Mapping[str, object] | Iterable[str],
    engine: str | None = None,
    auto_detected: str | None = None,
) -> str:
    """Why a page is ``unrecognized``, naming the prefixes seen.

    Args:
        exposition_or_sample_names: the page's samples (or sample names).
        engine: the engine the deployment is pinned to, or ``None`` for ``engine: auto``.
        auto_detected: where ``engine: auto`` detected ``engine`` (the daemon keeps the first engine it detects):
            ``"other"`` on another target of the deployment (a page of another engine then means the targets mix
            engines), ``"this"`` on this target earlier (the engine behind it changed); the hint says so instead of
            "set engine: …". ``None``: ``engine`` is the configured one.

    Example: a DCGM exporter page → ``"GPU telemetry (DCGM exporter), not an inference engine; metric-name
    prefixes seen: DCGM_FI_, go_"``; ``node_load1 0.5`` → ``"no known engine's metrics; metric-name prefixes
    seen: node_"``; an empty page → ``"no metrics at all (empty page)"``.
    """
    names = list(exposition_or_sample_names)
    if not names:
        return "no metrics at all (empty page)"
    seen = "metric-name prefixes seen: " + ", ".join(name_prefixes(names))
    detected = detect_engine(names)
    if detected == "dcgm":
        return f"GPU telemetry (DCGM exporter), not an inference engine; {seen}"
    if engine is not None and detected is not None and detected != engine and auto_detected in ("other", "this"):
        return f"{auto_engine_mismatch(detected, engine, auto_detected == 'this')}; {seen}"
    if engine is not None and detected is not None and detected != engine:
        return f"no {engine} metrics (the page looks like {detected}; set engine: {detected} or auto); {seen}"
    if engine is not None:
        return f"no {engine} metrics; {seen}"
    return f"no known engine's metrics; {seen}"
