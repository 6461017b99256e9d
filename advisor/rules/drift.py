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
from advisor.rules.turns import effect


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
        """Correct the advisor config where the engine reports what it runs with."""
        cfg = ev.engine_config
        err = ev.capacity_model_error_ratio
        out: list[Proposal] = []
        reported = cfg.get("gpu_memory_utilization")
        try:
            engine_util = float(reported) if reported not in (None, "None") else None
        except ValueError:
            engine_util = None
        configured = ev.ctx.inputs.gpu_memory_utilization
        if engine_util is not None and abs(engine_util - configured) > 0.005:
            out.append(
                Proposal(
                    rule=self.id,
                    dial=c.DIAL_GPU_MEMORY_UTILIZATION,
                    action="set",
                    current=configured,
                    suggested=engine_util,
                    flag=f"advisor config: gpu_memory_utilization: {engine_util} (what the engine runs with)",
                    severity="info",
                    confidence=0.9,
                    summary=(
                        f"{ev.ctx.name}: the advisor's config says gpu_memory_utilization {configured}, the engine "
                        f"runs {engine_util}"
                    ),
                    description=(
                        f"The capacity pass misses the engine's reported pool by {err or 0:+.0%}. The engine reports "
                        f"gpu_memory_utilization={engine_util} (cache_config_info) while the advisor's config says "
                        f"{configured}; correct the config so that predictions for every other dial start from what "
                        "runs."
                    ),
                    predicted_effect={"gpu_memory_utilization": effect(configured, engine_util)},
                    evidence={"capacity_model_error_ratio": err, "engine_gpu_memory_utilization": engine_util},
                    score=1.0,
                )
            )
        return out
