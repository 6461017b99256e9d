"""Rule ``host_or_buy``: a deployment far below its capacity for days, whose model is also sold per token —
the token-metered offers priced for the load it actually serves (issue 18, point 3).

Fires (severity ``info``) when, for ``for`` (72 h by default, so a quiet weekend is not a trend):

1. the over-provisioned measure holds (:class:`advisor.rules.over_provisioned.OverProvisionedRule`'s reading, with
   this rule's thresholds: SLO met, nothing waits, KV usage and running requests per replica under their fractions
   of the capacity, a steady load, every replica up);
2. token-metered offers exist for the served model (:func:`advisor.capacity.token_offers.offers_for`);
3. the hourly price of the deployment's instances is known: the deployment names its ``instance_type`` (config),
   priced on Kubernetes or systemd (:data:`VM_PRICED_PLATFORMS`) by the instance catalog
   (:mod:`advisor.capacity.instances`, the VM's on-demand price), on SageMaker, Vertex AI or Azure ML by that
   platform's own sourced price (:mod:`advisor.capacity.managed`; a managed platform's price is never a VM's);
4. the window served tokens (prompt and generation rates and the goodput are known, output above 0).

It never fires when no offer is known or the instance's price is unknown: the condition is then false, with that
reason, never a guess.

Evidence: the observed input and output tokens and requests per minute, the deployment's hourly price, the
self-hosted USD per million goodput tokens at that load, and every offer's USD per million at the same demand
(:func:`advisor.capacity.token_offers.offer_cost`), the cheapest first with its source and date.

Self-hosted cost at the observed load: ``hourly price ÷ (3600 × goodput tokens/s) × 10⁶``
(:func:`advisor.capacity.token_offers.self_hosted_usd_per_million` with peak = mean: the replicas are paid every hour
and the window's rates are its mean). The hourly price: an instance of ``n`` GPUs hosts ``n // GPUs per replica``
replicas, so ``ceil(replicas ÷ that)`` instances (as the dial search counts them, :mod:`advisor.capacity.search`);
a replica wider than one instance takes ``ceil(GPUs per replica ÷ n)`` instances.

The proposal's ``flag`` is ``None``: buying tokens is a purchase, not a dial of the engine or the platform; the
reason is in the evidence (:data:`advisor.platforms.FLAG_REASON_KEY`).
"""

from __future__ import annotations

import math
from typing import Any

from advisor import conventions as c
from advisor.capacity.instances import InstanceType, get_instance
from advisor.capacity.managed import managed_instances
from advisor.capacity.token_offers import Demand, offer_cost, offers_for, self_hosted_usd_per_million
from advisor.errors import CapacityError
from advisor.platforms import FLAG_REASON_KEY
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.rules.common import CEILING_SHARE, confidence, gpus_per_replica, other_model, percent
from advisor.rules.over_provisioned import OverProvisionedRule

VM_PRICED_PLATFORMS = (c.PLATFORM_KUBERNETES, "systemd")
"""Platforms whose instances cost what :mod:`advisor.capacity.instances` says (the VM's on-demand price). SageMaker,
Vertex AI and Azure ML price their instances themselves (issue 18, point 2): their own sourced prices
(:mod:`advisor.capacity.managed`), unknown when none is sourced; Bedrock is already a purchase (never fires)."""

PURCHASE_NOT_A_DIAL = "a purchase, not a dial: a token-metered offer replaces the deployment, no setting of it"
"""The ``flag`` ``None`` reason of every ``host_or_buy`` proposal."""


class HostOrBuyRule:
    """Far below capacity for days, with token-metered offers for the model → price them for this load."""

    id = c.RULE_HOST_OR_BUY
    supersedes: tuple[str, ...] = ()

    def __init__(
        self,
        max_usage: float = 0.3,
        max_load_ratio: float = 0.25,
        for_seconds: float = 72 * 3600.0,
        max_dispersion: float = 4.0,
    ):
        """``max_usage`` and ``max_load_ratio`` (0–1) and ``max_dispersion``: the over-provisioned measure's
        thresholds (:class:`~advisor.rules.over_provisioned.OverProvisionedRule`); ``for_seconds``: the
        for-duration, seconds."""
        self._measure = OverProvisionedRule(
            max_usage=max_usage, max_load_ratio=max_load_ratio, for_seconds=for_seconds, max_dispersion=max_dispersion
        )
        self._for = for_seconds

    def for_seconds(self) -> float:
        """Seconds the fire side must hold."""
        return self._for

    def _read(self, ev: Evaluation) -> tuple[bool | None, str, dict[str, Any]]:
        """Whether the fire side holds, the reason and the evidence (the module docstring's four conditions);
        ``evidence["comparable"]`` False when no offer or no price is known (nothing to compare, whatever the
        load)."""
        low = self._measure.fires(ev)
        evidence: dict[str, Any] = dict(low.evidence)
        if low.holds is None:
            return None, low.reason, evidence
        other = other_model(ev)
        if other is not None:
            return None, other, evidence
        model = ev.ctx.inputs.model.name
        found = offers_for(model)
        if not found:
            evidence["comparable"] = False
            return False, f"no token-metered offer is known for {model}", evidence
        hourly, why = _hourly_usd(ev)
        if hourly is None:
            evidence["comparable"] = False
            return False, f"the deployment's hourly price is unknown ({why}): nothing to compare", evidence
        s = ev.stats
        good = ev.goodput_tokens_per_second
        if s is not None and good is None and s.generation_tokens_per_second is not None and ev.goodput.ratio:
            good = s.generation_tokens_per_second * ev.goodput.ratio
        if (
            s is None
            or s.prompt_tokens_per_second is None
            or s.generation_tokens_per_second is None
            or s.requests_finished_per_second is None
            or good is None
        ):
            return None, "prompt, generation or finished-request rates or the goodput unknown", evidence
        if s.generation_tokens_per_second <= 0 or good <= 0:
            return False, "no tokens served in the window: nothing to price per token", evidence
        demand = Demand(
            input_tokens_per_minute=s.prompt_tokens_per_second * 60.0,
            output_tokens_per_minute=s.generation_tokens_per_second * 60.0,
            requests_per_minute=s.requests_finished_per_second * 60.0,
        )
        own = self_hosted_usd_per_million(hourly, good)
        costs = sorted(
            (offer_cost(o, demand) for o in found),
            key=lambda x: (x.usd_per_million_goodput_tokens is None, x.usd_per_million_goodput_tokens or 0.0),
        )
        evidence.update(
            {
                "input_tokens_per_minute": round(demand.input_tokens_per_minute, 1),
                "output_tokens_per_minute": round(demand.output_tokens_per_minute, 1),
                "requests_per_minute": round(demand.requests_per_minute, 2),
                "goodput_tokens_per_second": round(good, 3),
                "instance_type": ev.ctx.instance_type,
                "hourly_usd": round(hourly, 4),
                "self_hosted_usd_per_million_tokens": None if own is None else round(own, 4),
                "managed_offers": [x.as_dict() for x in costs],
            }
        )
        cheapest = costs[0]
        if cheapest.usd_per_million_goodput_tokens is None:
            evidence["comparable"] = False
            return False, "every offer for the model has an unknown price", evidence
        evidence["cheapest_offer_usd_per_million_tokens"] = round(cheapest.usd_per_million_goodput_tokens, 4)
        evidence["cheapest_offer_source"] = cheapest.offer.price_source
        reason = (
            f"{low.reason}; {demand.output_tokens_per_minute:,.0f} output tokens/min cost "
            f"${own:,.2f} per million self-hosted (${hourly:,.2f}/h) against "
            f"${cheapest.usd_per_million_goodput_tokens:,.2f} on {cheapest.offer.provider} {cheapest.offer.offer}"
            if own is not None
            else low.reason
        )
        return bool(low.holds), reason, evidence

    def fires(self, ev: Evaluation) -> Condition:
        """Far below capacity, an offer known, the price known, tokens served."""
        holds, reason, evidence = self._read(ev)
        return Condition(holds, reason, evidence)

    def clears(self, ev: Evaluation) -> Condition:
        """The over-provisioned measure clears (load or usage past twice the thresholds, a queue, the SLO missed),
        or the offers or the price stop being known."""
        busy = self._measure.clears(ev)
        if busy.holds:
            return busy
        _, reason, evidence = self._read(ev)
        if evidence.get("comparable") is False:
            return Condition(True, reason, evidence)
        return Condition(busy.holds, busy.reason, busy.evidence)

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """One informational proposal: the token-metered offers at this load, ``flag`` ``None`` (a purchase)."""
        holds, _, evidence = self._read(ev)
        if not holds or "managed_offers" not in evidence:
            return []
        s = ev.stats
        assert s is not None
        cheapest = evidence["managed_offers"][0]
        own = evidence["self_hosted_usd_per_million_tokens"]
        evidence[FLAG_REASON_KEY] = PURCHASE_NOT_A_DIAL
        window_h = s.covered_seconds / 3600.0
        offers_text = "; ".join(
            f"{o['provider']} {o['offer']} {o['provider_model_id']}: "
            + (
                "unknown"
                if o["usd_per_million_goodput_tokens"] is None
                else f"${o['usd_per_million_goodput_tokens']:,.2f} per million (${o['input_usd_per_million_tokens']}"
                f" in / ${o['output_usd_per_million_tokens']} out; {o['price_source']}, {o['price_as_of']})"
            )
            for o in evidence["managed_offers"]
        )
        return [
            Proposal(
                rule=self.id,
                dial=c.DIAL_MANAGED_OFFER,
                action="set",
                current=f"self-hosted on {ev.ctx.instance_type}",
                suggested=f"{cheapest['provider']} {cheapest['offer']} {cheapest['provider_model_id']}",
                flag=None,
                severity="info",
                confidence=confidence(ev, 0.6),
                summary=(
                    f"{ev.ctx.name}: far below capacity — {cheapest['provider']} sells this model at "
                    f"${cheapest['usd_per_million_goodput_tokens']:,.2f} per million tokens against "
                    f"${own:,.2f} self-hosted"
                ),
                description=(
                    f"Over the last {window_h:,.1f} h the deployment ran at {percent(evidence['load_ratio'])} of its "
                    f"concurrency ceiling per replica ({CEILING_SHARE}, at the window's peak), serving "
                    f"{evidence['input_tokens_per_minute']:,.0f} input and "
                    f"{evidence['output_tokens_per_minute']:,.0f} output tokens/min. At "
                    f"${evidence['hourly_usd']:,.2f}/h ({ev.ctx.instance_type}) that is ${own:,.2f} per million "
                    "goodput tokens; bought per token: "
                    f"{offers_text}. The providers' latency against this SLO is not modelled; compare with "
                    "`capacity-advisor plan --search --compare-managed` at the demand you expect."
                ),
                predicted_effect={
                    "usd_per_million_tokens": {"before": own, "after": cheapest["usd_per_million_goodput_tokens"]},
                },
                evidence=evidence,
                score=0.0,
                sufficient=False,
                cost=1.0,
            )
        ]


def _hourly_usd(ev: Evaluation) -> tuple[float | None, str]:
    """The deployment's instances' USD per hour (the module docstring), or ``None`` and why it is unknown."""
    name = ev.ctx.instance_type
    if name is None:
        return None, "no instance_type configured"
    inst: InstanceType
    if ev.ctx.platform in c.MANAGED_INSTANCE_PLATFORMS:
        rented = [m for m in managed_instances(ev.ctx.platform) if m.name == name]
        if not rented:
            return None, (
                f"{name} is not a {ev.ctx.platform} instance of advisor/data/managed_instances.csv ({ev.ctx.platform} "
                "prices its instances itself, never at a VM's price)"
            )
        inst = rented[0].as_instance()
        if inst.price_usd_per_hour is None or inst.whole_gpus < 1:
            return None, f"{name} has no sourced {ev.ctx.platform} price in advisor/data/managed_instances.csv"
    elif ev.ctx.platform not in VM_PRICED_PLATFORMS:
        return None, f"{ev.ctx.platform} rents no instances: the deployment is already a purchase"
    else:
        try:
            inst = get_instance(name)
        except CapacityError as exc:
            return None, str(exc)
        if inst.price_usd_per_hour is None or inst.whole_gpus < 1:
            return None, f"{name} has no on-demand price in the instance catalog"
    gpr = gpus_per_replica(ev)
    per = inst.whole_gpus // gpr
    replicas = ev.ctx.replicas
    count = math.ceil(replicas / per) if per >= 1 else replicas * math.ceil(gpr / inst.whole_gpus)
    return count * inst.price_usd_per_hour, ""
