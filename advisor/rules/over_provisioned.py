"""Rule ``over_provisioned``: sustained low use with the SLO met — fewer replicas or a smaller GPU.

Fires when the SLO is met (goodput at or above target), nothing waits, KV usage stays below
``max_usage`` over the window (and so does every other pool a request needs: a full Mamba state pool or
full llama.cpp slots with an idle KV cache is not spare capacity), and fewer than ``max_load_ratio`` × the
replica's concurrency ceiling run (the ceiling at the observed request length, bounded by max-num-seqs). Its
for-duration is long by default (30 min) so a quiet hour does not shrink a fleet. Never proposes a scale-up.

Proposes fewer replicas (enough that each runs at ``target_load_ratio`` of its ceiling), or with one
replica the smallest catalog GPU whose capacity pass still holds the load at the same target, with the
KV pool before and after.
"""

from __future__ import annotations

import math
from typing import Any

from advisor import conventions as c
from advisor.capacity import perf
from advisor.capacity.hardware import get_gpu, gpu_keys
from advisor.capacity.kv import capacity_pass
from advisor.errors import CapacityError
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import confidence, count, data_parallel_ranks, gpus_per_replica, replicas_proposal
from advisor.rules.flags import flag_for
from advisor.rules.turns import effect


class OverProvisionedRule:
    """Low use with the SLO met → fewer replicas or a smaller instance."""

    id = c.RULE_OVER_PROVISIONED
    supersedes: tuple[str, ...] = ()

    def __init__(
        self,
        max_usage: float = 0.3,
        max_load_ratio: float = 0.25,
        target_load_ratio: float = 0.5,
        for_seconds: float = 1800.0,
    ):
        """Ratios 0–1 as documented on the module; ``for_seconds`` the for-duration."""
        self.max_usage = max_usage
        self.max_load_ratio = max_load_ratio
        self.target_load_ratio = target_load_ratio
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _ceiling(self, ev: Evaluation) -> float:
        """Sequences one replica runs at most: max-num-seqs on each data-parallel rank (× ranks), or fewer when
        the pool holds fewer at the observed request length (prompt + output of finished requests)."""
        s = ev.stats
        ceiling = float(ev.ctx.inputs.max_num_seqs) * data_parallel_ranks(ev)
        if (
            s is not None
            and s.requests_finished_per_second
            and s.prompt_tokens_per_second is not None
            and s.generation_tokens_per_second is not None
            and ev.kv_capacity_tokens
        ):
            per_request = (s.prompt_tokens_per_second + s.generation_tokens_per_second) / s.requests_finished_per_second
            if per_request > 0:
                ceiling = min(ceiling, ev.kv_capacity_tokens / per_request)
        return max(ceiling, 1.0)

    def _reading(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        s = ev.stats
        g = ev.goodput.ratio
        if s is None or s.requests_running is None or s.requests_waiting is None or g is None:
            return None, "running, waiting or goodput unknown", {}
        usage = s.kv_cache_usage_ratio_max if s.kv_cache_usage_ratio_max is not None else s.kv_cache_usage_ratio
        if usage is None:
            return None, "KV usage unknown", {}
        ceiling = self._ceiling(ev)
        per_replica = s.requests_running / max(ev.replicas_up, 1)
        load = per_replica / ceiling
        evidence = {
            "goodput_ratio": g,
            "target_ratio": ev.ctx.slo.target_ratio,
            "kv_cache_usage_ratio_max": usage,
            "requests_running": s.requests_running,
            "requests_waiting": s.requests_waiting,
            "concurrency_ceiling_per_replica": round(ceiling, 2),
            "load_ratio": round(load, 4),
            "window_seconds": s.window_seconds,
        }
        # a pool other than the KV pool (a state pool, the slots) may be the full one: it counts as usage too
        others = [(u, p) for p, u in ev.pool_usage.items() if u is not None]
        hot = max(others, default=None)
        if hot is not None:
            evidence[f"{hot[1]}_pool_usage_ratio"] = hot[0]
        waiting = max(s.requests_waiting, s.requests_waiting_first or 0)
        holds = (
            g >= ev.ctx.slo.target_ratio
            and waiting == 0
            and usage < self.max_usage
            and (hot is None or hot[0] < self.max_usage)
            and load < self.max_load_ratio
        )
        reason = (
            f"goodput {g:.0%} (target {ev.ctx.slo.target_ratio:.0%}), {count(s.requests_running)} running "
            f"({load:.0%} of the ceiling per replica), "
            f"KV usage at most {usage:.1%}, {count(waiting)} waiting"
        )
        if hot is not None:
            reason += f", {hot[1]} pool usage {hot[0]:.1%}"
        return holds, reason, evidence

    def fires(self, ev: Evaluation) -> Condition:
        """SLO met, no queue, low KV usage and low load."""
        holds, reason, evidence = self._reading(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """Load or usage rose past twice the thresholds, a queue formed (more than 2 and 10 % of those
        running: a Poisson arrival catching a request in the queue is no queue), or the SLO is missed."""
        holds, reason, evidence = self._reading(ev)
        if holds is None:
            return Condition(None, reason, evidence)
        busy = (
            evidence["load_ratio"] >= 2 * self.max_load_ratio
            or evidence["kv_cache_usage_ratio_max"] >= 2 * self.max_usage
            or any(v >= 2 * self.max_usage for k, v in evidence.items() if k.endswith("_pool_usage_ratio"))
            or evidence["requests_waiting"] > max(2.0, 0.1 * evidence["requests_running"])
            or evidence["goodput_ratio"] < evidence["target_ratio"]
        )
        return Condition(busy, reason, evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Fewer replicas, or (one replica) a smaller GPU."""
        holds, _, evidence = self._reading(ev)
        s = ev.stats
        if holds is None or s is None or s.requests_running is None:
            return []
        ceiling = self._ceiling(ev)
        current = ev.ctx.replicas
        conf = confidence(ev, 0.8)
        situation = (
            f"Over the last {s.window_seconds:.0f}s the SLO was met (goodput {ev.goodput.ratio:.0%} against "
            f"{ev.ctx.slo.target_ratio:.0%}), nothing waited, KV usage peaked at "
            f"{evidence['kv_cache_usage_ratio_max']:.1%} and {count(s.requests_running)} requests ran across "
            f"{ev.replicas_up} replica(s), each able to run ~{ceiling:,.0f}."
        )
        if current > 1:
            needed = max(1, math.ceil(s.requests_running / (self.target_load_ratio * ceiling)))
            if needed < current:
                return [
                    replicas_proposal(
                        self.id,
                        ev,
                        needed,
                        severity="info",
                        confidence=conf,
                        evidence=evidence,
                        summary=f"{ev.ctx.name}: over-provisioned — scale replicas {current} → {needed}",
                        description=(
                            f"{situation} {needed} replica(s) carry this load at {self.target_load_ratio:.0%} of their "
                            f"ceiling; {current - needed} replica(s) of GPUs can be released."
                        ),
                        extra_effects={
                            "load_ratio": effect(
                                s.requests_running / (current * ceiling), s.requests_running / (needed * ceiling)
                            ),
                            "gpus": effect(current * gpus_per_replica(ev), needed * gpus_per_replica(ev)),
                        },
                    )
                ]
        smaller = self._smaller_gpu(ev, s.requests_running / max(ev.replicas_up, 1))
        if smaller is None:
            return []
        name, memory, tokens = smaller
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_INSTANCE_TYPE,
                action="set",
                current=ev.ctx.gpu.name if ev.ctx.gpu else f"{ev.ctx.inputs.gpu_memory_bytes / 2**30:.1f} GiB GPU",
                suggested=name,
                flag=flag_for(ev.ctx.engine, c.DIAL_INSTANCE_TYPE, f"an instance with {name} GPUs"),
                severity="info",
                confidence=conf,
                summary=f"{ev.ctx.name}: over-provisioned — a smaller GPU ({name}) carries this load",
                description=(
                    f"{situation} On {name} ({memory / 2**30:.1f} GiB) the capacity pass gives a pool of {tokens:,} "
                    f"tokens, enough for this load at {self.target_load_ratio:.0%} of the ceiling. (If per-request "
                    "latency matters more than cost, speculative decoding uses the idle bandwidth instead.)"
                ),
                predicted_effect={
                    "kv_cache_tokens": effect(ev.ctx.capacity.kv_cache_tokens, tokens),
                    "gpu_memory_bytes": effect(ev.ctx.inputs.gpu_memory_bytes, memory),
                },
                evidence=evidence,
                score=1.0,
                sufficient=True,
                cost=memory / ev.ctx.inputs.gpu_memory_bytes,
            )
        ]

    def _smaller_gpu(self, ev: Evaluation, running_per_replica: float) -> tuple[str, int, int] | None:
        """The catalog GPU with the least memory, below the current one (same vendor), whose pool still holds
        the load and whose decode roofline still carries the observed generation rate at the target load."""
        s = ev.stats
        inputs = ev.ctx.inputs
        per_request = None
        if s is not None and ev.kv_capacity_tokens and s.kv_cache_usage_ratio and running_per_replica > 0:
            per_request = s.kv_cache_usage_ratio * ev.kv_capacity_tokens / running_per_replica
        best: tuple[str, int, int] | None = None
        vendor = ev.ctx.gpu.name.split()[0] if ev.ctx.gpu is not None else "NVIDIA"
        for key in gpu_keys():
            g = get_gpu(key)
            if g.memory_bytes >= inputs.gpu_memory_bytes or g.bf16_flops is None:
                continue
            if g.name.split()[0] != vendor:  # the same engine build and kernels: no platform migration
                continue
            try:
                result = capacity_pass(_with_memory(inputs, g.memory_bytes))
            except CapacityError:
                continue
            need = max(running_per_replica / self.target_load_ratio, 1.0) * (per_request or result.max_model_len)
            if result.kv_cache_tokens < need or result.max_concurrency < 1:
                continue
            # a smaller GPU is also a slower one: its decode roofline at a full batch must carry the observed
            # generation rate with the same head-room (found by the closed-loop simulation test)
            if s is None or not s.generation_tokens_per_second or not per_request:
                continue
            # one engine's batch: max_num_seqs and the pool of one data-parallel rank
            rank_tokens = result.kv_cache_tokens / max(1, result.data_parallel_size)
            batch = max(1.0, min(float(inputs.max_num_seqs), rank_tokens / per_request))
            try:
                tps = perf.decode_tokens_per_second(_with_memory(inputs, g.memory_bytes), g, batch, per_request)
            except (CapacityError, ValueError):
                continue
            # tps is one engine's (one data-parallel rank's); the observed rate is per replica, over its ranks
            rank_rate = s.generation_tokens_per_second / max(ev.replicas_up, 1) / data_parallel_ranks(ev)
            if tps * self.target_load_ratio < rank_rate:
                continue
            if best is None or g.memory_bytes < best[1]:
                best = (g.name, g.memory_bytes, result.kv_cache_tokens)
        return best


def _with_memory(inputs: Any, memory: int) -> Any:
    import dataclasses

    return dataclasses.replace(inputs, gpu_memory_bytes=memory)
