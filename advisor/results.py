"""The immutable result of one evaluation cycle, published by the service and read by the exporter,
the HTTP API and the CLI. Replaced whole each cycle, so readers never see a half-written cycle."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.capacity.fixes import plan_batch_cap
from advisor.capacity.kv import CapacityResult
from advisor.deployment_view import DeploymentView
from advisor.domain import Recommendation
from advisor.evaluate import TargetView
from advisor.redact import redact_url
from advisor.rules.base import Evaluation
from advisor.rules.lifecycle import RuleStatus
from advisor.signals import AutoscalerSignals


def json_text(obj: Any, *, indent: int | None = 2) -> str:
    """``obj`` as strict JSON: NaN and ±Inf become ``null`` (JSON has no such numbers; Python's ``json`` would
    write bare ``NaN``/``Infinity`` that no JSON parser accepts), objects JSON does not know as ``str()``.

    Example: ``{"usage": float("inf"), "ranks": [0.5, float("nan")]}`` →
    ``'{"usage": null, "ranks": [0.5, null]}'`` (with ``indent=None``).
    """
    return json.dumps(_finite(obj), indent=indent, allow_nan=False, default=_default)


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        return {str(k): _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def _default(obj: Any) -> Any:
    return str(obj)


@dataclass(frozen=True, slots=True)
class DeploymentResult:
    """One deployment after one cycle; ``snapshot`` is the typed view the exporter, the status page and the API
    read (:class:`~advisor.deployment_view.DeploymentView`; its ``as_json()`` is the ``snapshot`` JSON)."""

    name: str
    engine: str
    state: str
    evaluation: Evaluation
    snapshot: DeploymentView
    capacity: CapacityResult
    targets: tuple[TargetView, ...]
    recommendations: tuple[Recommendation, ...]
    rule_statuses: tuple[RuleStatus, ...]
    target_states: tuple[tuple[str, str], ...] = ()  # (state, reason) per target, in target order
    signals: AutoscalerSignals | None = None  # the autoscaler signals (advisor.signals); None: not computed

    def concurrency_ceiling(self) -> float | None:
        """Sequences at max-model-len the replicas that answered can hold together, from the engine's
        reported pool when known, else the capacity pass (``None`` when no replica answered). With
        data-parallel ranks a request cannot span ranks: the sum over ranks of ``⌊rank pool ÷ max-model-len⌋``
        (the snapshot's ``max_model_len_ceiling_requests``), never the summed pool ÷ max-model-len."""
        ev = self.evaluation
        if ev.replicas_up == 0 or ev.kv_capacity_tokens is None:
            return None
        per_rank = self.snapshot.max_model_len_ceiling_requests
        if ev.kv_rank_capacity_tokens and per_rank is not None:
            return float(per_rank)
        return ev.kv_capacity_tokens / self.capacity.max_model_len * ev.replicas_up

    def as_dict(self) -> dict[str, Any]:
        """The deployment object of ``once --json`` and ``/api/v1/deployments``; its ``capacity.inputs`` name the
        batch cap the pass took, as ``plan --json`` does (:func:`advisor.capacity.fixes.plan_batch_cap`)."""
        capacity = self.capacity.as_dict()
        ctx = self.evaluation.ctx
        plan_batch_cap(capacity, ctx.inputs.max_num_seqs, given=ctx.max_num_seqs_stated)
        return {
            "name": self.name,
            "engine": self.engine,
            "state": self.state,
            "snapshot": self.snapshot.as_json(),
            "capacity": capacity,
            "concurrency_ceiling": self.concurrency_ceiling(),
            "targets": [
                {
                    "target": redact_url(t.url),
                    "up": t.up,
                    "state": st[0],
                    "state_reason": st[1],
                    "error_reason": t.error_reason,
                    "error": t.error_message,
                }
                for t, st in zip(self.targets, self.target_states or [("", "")] * len(self.targets), strict=True)
            ],
            "rules": [{"rule": s.rule, "state": s.state, "reason": s.reason} for s in self.rule_statuses],
            "recommendations": [r.as_dict() for r in self.recommendations],
        }


@dataclass(frozen=True, slots=True)
class CycleResult:
    """Every deployment after one cycle, the cycle's unix time, and cumulative scrape errors."""

    timestamp: float
    deployments: tuple[DeploymentResult, ...] = ()
    scrape_errors: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
