"""The rule modules a deployment is evaluated with: the built-in ones in their order, plus plugins.

Order matters: a rule that supersedes others comes before them (:class:`advisor.rules.base.Rule`).

==========================  ==============================================================================
rule                        supersedes
==========================  ==============================================================================
stalled                     admission_thrash, queue_growth, kv_saturation, goodput_below_target,
                            speculative_decoding, kv_budget, over_provisioned, seq_cap (a hung engine's gauges
                            describe the hang, not the load), admission_wedged and rank_wedged (one restart);
                            runs on stale data too
admission_wedged            the rules stalled supersedes but itself (vLLM admits nothing with slots and blocks
                            free: the queue is a wedge, not load)
rank_wedged                 the same (one data-parallel rank holds its queue with nothing running)
load_imbalance              —  (one replica strains while another idles: the router; the other rules' turns sized
                            on the fleet's average are withheld meanwhile, common.load_balance)
pool_context                kv_saturation, queue_growth, goodput_below_target, admission_thrash, seq_cap
admission_thrash            kv_saturation
kv_budget                   —  (problem ``saturation``: preemptions with head-room; comes before kv_saturation so
                            that after repeated OOM restarts its *lower* speaks for gpu_memory_utilization)
queue_growth                —  (comes before kv_saturation so its replica count wins the replicas dial)
kv_saturation               —
goodput_below_target        —
seq_cap                     —  (requests wait for a sequence slot while the pool has room)
prefix_caching_off          —  (long prompts prefilled whole on a vLLM engine with its prefix cache off)
speculative_decoding        —
weights_crowd               —
over_provisioned            —
host_or_buy                 —  (informational: the over-provisioned measure held for days, and the model is sold
                            per token)
model_drift                 —
==========================  ==============================================================================

Plugins: third-party rule modules register a factory under the entry-point group ``advisor.rules``; the
factory is called with the plugin's settings mapping (``rules.plugins.<name>`` in the config, ``{}`` when
absent) and returns an object satisfying the :class:`~advisor.rules.base.Rule` protocol. A plugin that
fails to import, to build, or to satisfy the protocol is reported (logged and listed in the returned
problems) and skipped — never fatal. ``advisor/rules/template.py`` is a starting point.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from importlib.metadata import entry_points
from typing import Any

from advisor import conventions as c
from advisor.rules.admission import AdmissionThrashRule
from advisor.rules.admission_wedged import AdmissionWedgedRule
from advisor.rules.base import Rule
from advisor.rules.drift import ModelDriftRule
from advisor.rules.goodput import GoodputRule
from advisor.rules.host_or_buy import HostOrBuyRule
from advisor.rules.kv_budget import KVBudgetRule
from advisor.rules.kv_saturation import KVSaturationRule
from advisor.rules.load_imbalance import LoadImbalanceRule
from advisor.rules.over_provisioned import OverProvisionedRule
from advisor.rules.pool_context import PoolContextRule
from advisor.rules.prefix_caching import PrefixCachingRule
from advisor.rules.queue_growth import QueueGrowthRule
from advisor.rules.rank_wedged import RankWedgedRule
from advisor.rules.replicas import MIN_ARRIVAL_SPAN_SECONDS
from advisor.rules.seq_cap import SeqCapRule
from advisor.rules.speculative import SpeculativeRule
from advisor.rules.stalled import StalledRule
from advisor.rules.weights import WeightsCrowdRule

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = c.RULE_PLUGIN_GROUP
_REQUIRED = ("id", "supersedes", "for_seconds", "fires", "clears", "propose")


def builtin_rules(cfg: Any, model_error_bound: float = 0.15) -> list[Rule]:
    """The built-in rules with thresholds from ``cfg`` (an :class:`advisor.config.RulesConfig`), in order,
    skipping those with ``enabled: false``."""
    r = cfg
    replicas = getattr(r, "replicas", None)
    drain = getattr(replicas, "drain_seconds", None)
    history = float(getattr(replicas, "min_history", MIN_ARRIVAL_SPAN_SECONDS))
    candidates: list[tuple[bool, Rule]] = [
        (
            r.stalled.enabled,
            StalledRule(
                r.stalled.min_intervals,
                r.stalled.for_,
                r.stalled.finish_only_counters_for,
                r.stalled.observable_intervals,
            ),
        ),
        (
            r.admission_wedged.enabled,
            AdmissionWedgedRule(r.admission_wedged.max_usage, r.admission_wedged.min_wait, r.admission_wedged.for_),
        ),
        (r.rank_wedged.enabled, RankWedgedRule(r.rank_wedged.for_)),
        (r.load_imbalance.enabled, LoadImbalanceRule(r.load_imbalance.for_)),
        (r.pool_context.enabled, PoolContextRule(r.pool_context.min_full_length_requests, r.pool_context.for_)),
        (
            r.admission_thrash.enabled,
            AdmissionThrashRule(
                r.admission_thrash.usage_threshold,
                r.admission_thrash.max_running_per_replica,
                r.admission_thrash.min_pool_share,
                r.admission_thrash.target_concurrency,
                r.admission_thrash.for_,
                min_history_seconds=history,
            ),
        ),
        (
            r.kv_budget.enabled,
            KVBudgetRule(r.kv_budget.raise_to, r.kv_budget.max_restarts, r.kv_budget.lower_by, r.kv_budget.for_),
        ),
        (
            r.queue_growth.enabled,
            QueueGrowthRule(
                r.queue_growth.min_growth_per_second,
                r.queue_growth.target_utilization,
                r.queue_growth.for_,
                drain_seconds=drain,
                min_history_seconds=history,
                resolve_below=r.kv_saturation.resolve_below,
            ),
        ),
        (
            r.kv_saturation.enabled,
            KVSaturationRule(
                r.kv_saturation.usage_threshold,
                r.kv_saturation.resolve_below,
                r.kv_saturation.for_,
                drain_seconds=drain,
                min_history_seconds=history,
            ),
        ),
        (
            r.goodput.enabled,
            GoodputRule(
                r.goodput.for_,
                r.goodput.min_requests,
                r.goodput.target_utilization,
                drain_seconds=drain,
                min_history_seconds=history,
            ),
        ),
        (r.seq_cap.enabled, SeqCapRule(r.seq_cap.max_usage, r.seq_cap.max_usage_after, r.seq_cap.for_)),
        (
            r.prefix_caching_off.enabled,
            PrefixCachingRule(r.prefix_caching_off.for_, r.prefix_caching_off.long_prompt_tokens),
        ),
        (
            r.speculative_decoding.enabled,
            SpeculativeRule(
                r.speculative_decoding.max_batch_per_replica,
                r.speculative_decoding.disable_by_batch_size,
                r.speculative_decoding.disable_above_batch_per_replica,
                r.speculative_decoding.for_,
            ),
        ),
        (
            r.weights_crowd.enabled,
            WeightsCrowdRule(r.weights_crowd.min_weight_share, r.weights_crowd.max_ceiling, r.weights_crowd.for_),
        ),
        (
            r.over_provisioned.enabled,
            OverProvisionedRule(
                r.over_provisioned.max_usage,
                r.over_provisioned.max_load_ratio,
                r.over_provisioned.target_load_ratio,
                r.over_provisioned.for_,
                r.over_provisioned.max_dispersion,
            ),
        ),
        (
            r.host_or_buy.enabled,
            HostOrBuyRule(
                r.host_or_buy.max_usage,
                r.host_or_buy.max_load_ratio,
                r.host_or_buy.for_,
                r.host_or_buy.max_dispersion,
            ),
        ),
        (r.model_drift.enabled, ModelDriftRule(model_error_bound, r.model_drift.for_)),
    ]
    return [rule for enabled, rule in candidates if enabled]


def load_plugins(settings: Mapping[str, Mapping[str, Any]] | None = None) -> tuple[list[Rule], list[str]]:
    """Rules from the ``advisor.rules`` entry points, and a problem line for each plugin skipped."""
    rules: list[Rule] = []
    problems: list[str] = []
    settings = settings or {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            factory = ep.load()
            rule = factory(dict(settings.get(ep.name, {})))
            missing = [name for name in _REQUIRED if not hasattr(rule, name)]
            if missing:
                raise TypeError(f"does not satisfy the Rule protocol: missing {', '.join(missing)}")
            rule_id = rule.id
            if not isinstance(rule_id, str) or not rule_id:
                raise TypeError("its id must be a non-empty string")
        except Exception as exc:  # a broken plugin is reported and skipped, never fatal
            msg = f"rule plugin {ep.name!r} ({ep.value}) skipped: {type(exc).__name__}: {exc}"
            log.error("%s", msg)
            problems.append(msg)
            continue
        rules.append(rule)
        log.info("loaded rule plugin %s (%s)", ep.name, rule_id)
    return rules, problems
