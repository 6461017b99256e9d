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
from advisor.rules.base import Condition, Evaluation, Proposal
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
        """|error| > bound."""
        err = ev.capacity_model_error_ratio
        if err is None:
            return Condition(None, "the engine does not report its pool")
        return Condition(
            abs(err) > self.bound,
            f"the capacity pass predicts {err:+.0%} vs the engine's pool (bound ±{self.bound:.0%})",
            {"capacity_model_error_ratio": round(err, 4)},
        )

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


DIAL_FOR_FIELD: dict[str, str] = {field: dial for dial, field in FIELD_FOR_DIAL.items()}
"""CapacityInputs field → the dial id it is (fields that are no dial, such as ``kv_cache_memory_bytes``, keep
their own name)."""


def _yaml(value: object) -> str:
    """``None`` as YAML writes it (``null``), other values as printed."""
    return "null" if value is None else str(value)
