"""Rule ``model_drift``: the capacity pass disagrees with the engine's own pool.

Fires when ``|predicted ÷ reported − 1|`` exceeds the bound (``data_quality.capacity_model_error_bound``).
The live rules already use the engine's number; what drift usually means is that the advisor's config
does not describe the engine (another memory budget, KV dtype or block size than the engine runs). Where
the engine reports the setting (vLLM ``cache_config_info`` labels), the rule proposes correcting the
advisor's config to it; otherwise it opens nothing and its status says so (the gauge
``advisor_capacity_model_error_ratio`` and a warning log carry the drift).
"""

from __future__ import annotations

from advisor import conventions as c
from advisor.capacity.model_label import ModelLabelMismatch
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import pools_disagree
from advisor.rules.turns import FIELD_FOR_DIAL, effect


class ModelDriftRule:
    """Capacity model vs the engine's reported pool beyond a bound → correct the advisor config."""

    id = c.RULE_MODEL_DRIFT
    supersedes: tuple[str, ...] = ()

    def __init__(self, bound: float = 0.15, for_seconds: float = 300.0):
        """``bound``: tolerated |error| (0.15 = 15 %)."""
        self.bound = bound
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def fires(self, ev: Evaluation) -> Condition:
        """The engine serves another model than the config's (``ev.model_mismatch``: said first, whatever the
        drift), else |error| > bound.

        The figure is the configured pass's miss (``capacity_model_error_ratio``, the exported gauge); when the engine
        reports other settings (``ev.config_drift``) the reason adds the miss of the pass on those,
        ``ev.running_model_error_ratio`` — the figure every predicted effect's note prints for that comparison.
        """
        err = ev.capacity_model_error_ratio
        m = ev.model_mismatch
        if m is not None and m.definite:
            evidence: dict[str, object] = {"engine_model": m.label, "config_model": m.configured}
            if m.preset is not None and m.preset != m.label:
                evidence["engine_model_preset"] = m.preset
            if err is not None:
                evidence["capacity_model_error_ratio"] = round(err, 4)
            if m.beside is not None:
                evidence["targets_serving_engine_model"] = m.beside[0]
                return Condition(True, m.note(), evidence)
            return Condition(
                True,
                f"the engine serves {m.label}, the config says {m.configured}: set deployments[].model — the capacity "
                "pass sizes the config's model, so its figures are the wrong model's",
                evidence,
            )
        apart = pools_disagree(ev)
        if apart is not None:
            return Condition(True, apart, {"pool_spread": list(ev.pool_spread or ())})
        if err is None:
            return Condition(None, "the engine does not report its pool")
        running = ev.running_model_error_ratio
        reason = f"the capacity pass predicts {err:+.0%} vs the engine's pool (bound ±{self.bound:.0%})"
        evidence = {"capacity_model_error_ratio": round(err, 4)}
        if ev.config_drift and running is not None:
            settings = ", ".join(f"{k} {v[1]}" for k, v in sorted(ev.config_drift.items()))
            reason = (
                f"the capacity pass predicts {err:+.0%} vs the engine's pool on the config's settings, {running:+.0%} "
                f"on the settings the engine reports ({settings}) (bound ±{self.bound:.0%})"
            )
            evidence["running_model_error_ratio"] = round(running, 4)
        return Condition(abs(err) > self.bound, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """|error| back within the bound."""
        cond = self.fires(ev)
        return Condition(None if cond.holds is None else not cond.holds, cond.reason, cond.evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Correct the advisor config where the engine reports what it runs with (``ev.config_drift``: one
        proposal per dial whose configured value differs from the reported one; none for a value the capacity pass
        refuses or the replicas disagree on, ``ev.config_unmodelled``)."""
        err = ev.capacity_model_error_ratio
        out: list[Proposal] = []
        m = ev.model_mismatch
        if m is not None and m.beside is not None:
            return [self._targets_proposal(ev, m)]
        if m is not None and m.definite:
            return [self._model_proposal(ev, m.configured, m.preset or m.label, m.label)]
        for field_name, (configured, reported) in sorted(ev.config_drift.items()):
            if field_name in ev.config_unmodelled:
                continue  # a value the config would refuse, or replicas that disagree: nothing to write into it
            dial = DIAL_FOR_FIELD.get(field_name, field_name)
            numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (configured, reported))
            out.append(
                Proposal(
                    rule=self.id,
                    dial=dial,
                    action="set",
                    current=configured,
                    suggested=reported,
                    flag=f"advisor config: {field_name}: {_yaml(reported)} (what the engine runs with)",
                    severity="info",
                    confidence=0.9,
                    summary=(
                        f"{ev.ctx.name}: the advisor's config says {field_name} {configured}, the engine runs "
                        f"{reported}"
                    ),
                    description=(
                        f"The capacity pass misses the engine's reported pool by {err or 0:+.0%}. The engine reports "
                        f"{field_name}={reported} (cache_config_info) while the advisor's config says "
                        f"{configured}; every turn is predicted from what the engine runs, and correcting the config "
                        "makes the capacity pass and `plan` describe it too."
                    ),
                    predicted_effect={field_name: effect(configured, reported)} if numeric else {},
                    evidence={"capacity_model_error_ratio": err, f"engine_{field_name}": reported},
                    score=1.0,
                )
            )
        return out

    def _targets_proposal(self, ev: Evaluation, m: ModelLabelMismatch) -> Proposal:
        """Keep in the deployment's ``targets`` only the replicas serving its model (``m.beside``): no engine dial, no
        predicted number (the pass sums the other model's pool and load with it)."""
        some, answering = m.beside or (0, 0)
        return Proposal(
            rule=self.id,
            dial=TARGETS_FIELD,
            action="set",
            current=f"{answering} targets, {some} serving {m.label}",
            suggested=f"{answering - some} targets serving {m.configured}",
            flag=f"advisor config: deployments[].targets: only the replicas serving {m.configured}",
            severity="warning",
            confidence=0.9,
            summary=f"{ev.ctx.name}: {some} of {answering} targets serve {m.label}, not {m.configured}",
            description=(
                f"{m.note()}. The deployment's KV pool, running and waiting requests and rates are the sums over its "
                "targets, so every figure and turn includes the other model's engines until they leave it."
            ),
            predicted_effect={},
            evidence={"engine_model": m.label, "config_model": m.configured, "targets_serving_engine_model": some},
            score=1.0,
        )

    def _model_proposal(self, ev: Evaluation, configured: str, suggested: str, label: str) -> Proposal:
        """Set the advisor config's ``model`` to what the engine serves: no engine dial, no predicted number (every
        figure of the pass on the wrong model is withheld, :func:`advisor.rules.common.model_quality`)."""
        shown = label if suggested == label else f"{label} (the preset {suggested})"
        return Proposal(
            rule=self.id,
            dial=MODEL_FIELD,
            action="set",
            current=configured,
            suggested=suggested,
            flag=f"advisor config: deployments[].model: {suggested} (what the engine serves)",
            severity="warning",
            confidence=0.9,
            summary=f"{ev.ctx.name}: the engine serves {label}, the config says {configured}",
            description=(
                f"The engine's own model label is {shown}; the advisor's config says model {configured}. The capacity "
                "pass sizes the config's model, so every turn it would predict is the wrong model's and is withheld "
                "until deployments[].model names what the engine serves (or served_model names the engine's "
                "--served-model-name alias of it)."
            ),
            predicted_effect={},
            evidence={"engine_model": label, "config_model": configured},
            score=1.0,
        )


TARGETS_FIELD = "targets"
"""The advisor config's field (``deployments[].targets``) ``model_drift`` proposes trimming when some targets serve
another model than the others; no engine dial."""

MODEL_FIELD = "model"
"""The advisor config's field (``deployments[].model``) ``model_drift`` proposes setting when the engine serves another
model; no engine dial."""

DIAL_FOR_FIELD: dict[str, str] = {field: dial for dial, field in FIELD_FOR_DIAL.items()}
"""CapacityInputs field → the dial id it is (fields that are no dial, such as ``num_gpu_blocks_override``, keep
their own name)."""


def _yaml(value: object) -> str:
    """``None`` as YAML writes it (``null``), other values as printed."""
    return "null" if value is None else str(value)
