"""``engine: auto``: which engine produced an exposition, from its metric-name prefixes.

The heuristic of ``../shared/reference/engine-metrics-catalog.md`` §10: each engine prefixes every family it
registers. Engine families win over wrappers: a Dynamo *worker* passes its engine's ``vllm:*``/``sglang:*``/
``trtllm_*`` families through beside ``dynamo_component_*``, so it is that engine; only a frontend
(``dynamo_frontend_*`` and no engine family) is ``dynamo``. DCGM (``DCGM_FI_``) is GPU telemetry, not an
engine: ``dcgm`` is returned so callers can say so, but :func:`advisor.engines.get_adapter` has no adapter
for it.

Example::

    detect_engine(["vllm:num_requests_running", "process_start_time_seconds"])   → "vllm"
    detect_engine(["dynamo_component_uptime_seconds", "trtllm_request_success_total"]) → "trtllm"
    detect_engine(["python_gc_objects_collected_total"])                          → None
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

PREFIXES: Final[tuple[tuple[str, tuple[str, ...]], ...]] = (
    ("vllm", ("vllm:",)),
    ("sglang", ("sglang:", "sglang_")),
    ("tgi", ("tgi_",)),
    ("triton-trtllm", ("nv_trt_llm_",)),
    ("trtllm", ("trtllm_",)),
    ("llamacpp", ("llamacpp:",)),
    ("dynamo", ("dynamo_frontend_",)),
    ("dcgm", ("DCGM_FI_",)),
)
"""Engine id → family prefixes, in priority order (engines before wrappers and GPU telemetry)."""


def detect_engine(exposition_or_sample_names: Mapping[str, object] | Iterable[str]) -> str | None:
    """The engine id whose prefix the most sample names carry (ties: the earlier in :data:`PREFIXES`).

    Args:
        exposition_or_sample_names: an :data:`~advisor.domain.Exposition` (its keys are read) or sample names
            (e.g. the names a Prometheus API lists for a selector).

    Returns:
        An engine id, or ``None`` when no known prefix appears.
    """
    counts = dict.fromkeys((engine for engine, _ in PREFIXES), 0)
    for name in exposition_or_sample_names:
        for engine, prefixes in PREFIXES:
            if name.startswith(prefixes):
                counts[engine] += 1
                break
    engines_first = [e for e, _ in PREFIXES if e not in ("dynamo", "dcgm")]
    for group in (engines_first, ["dynamo"], ["dcgm"]):
        best = max(group, key=lambda e: counts[e])
        if counts[best] > 0:
            return best
    return None
