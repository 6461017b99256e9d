"""Opening and resolving recommendations: for-durations, hysteresis, one open recommendation per dial.

Pure: the caller passes ``now``. The semantics follow Prometheus alerting rules
(``rules/alerting.go``): a condition that holds starts *pending*; it opens once it has held
continuously for the rule's for-duration; a pending condition that stops holding resets. Unlike
Prometheus, an open recommendation resolves only when the rule's *clear* side holds (a stricter
condition), so a value hovering at a threshold does not flap; and it never resolves because the data
went stale or unavailable — it waits for fresh data.

Each evaluation returns the :class:`Transition` list (opened / resolved) for notifiers and logs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from advisor import conventions as c
from advisor.domain import Recommendation
from advisor.rules.base import Evaluation, Proposal, Rule, rule_states

MAX_OPEN_PER_RULE = 3
"""At most this many dial turns open per (deployment, rule): the best-ranked ones."""


@dataclass(frozen=True, slots=True)
class Transition:
    """``kind`` is ``opened``, ``resolved`` or ``updated`` (an open recommendation's ``current`` or
    ``suggested`` value changed; identity, severity and alert state unchanged, so it is shown to the operator but
    never sent as a notification); ``reason`` is the rule's reading when it happened (for ``updated``: the
    values before); ``option``/``options`` place an opened recommendation among the alternatives opened with it."""

    kind: str
    recommendation: Recommendation
    reason: str = ""
    option: int = 1
    options: int = 1


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """Why a rule did or did not act at the last evaluation (for ``once`` and the API)."""

    rule: str
    deployment: str
    state: str  # firing | pending | inactive | unknown | superseded | cooldown
    reason: str


@dataclass
class _RuleState:
    pending_since: float | None = None
    open: dict[str, Recommendation] = field(default_factory=dict)  # dial -> recommendation


MATERIAL_CHANGE_RATIO = 0.10
"""A numeric suggestion must move by at least this fraction to change an open recommendation."""


def material_change(before: object, after: object) -> bool:
    """True when an open recommendation's value moved enough to re-announce it: numbers by at least
    :data:`MATERIAL_CHANGE_RATIO` of the old value (replicas 3 → 2 yes, max_num_seqs 28 → 29 no), anything else
    by any change (``fp8`` → ``auto``, ``None`` → a number).

    >>> material_change(28, 29), material_change(3, 2), material_change("auto", "fp8")
    (False, True, True)
    """
    numeric = (int, float)
    if isinstance(before, numeric) and isinstance(after, numeric) and not isinstance(before, bool | None):
        if isinstance(after, bool):
            return before != after
        if before == after:
            return False
        return abs(after - before) >= MATERIAL_CHANGE_RATIO * max(abs(before), 1e-12)
    return before != after


def rank_key(key: tuple[bool, float, float]) -> tuple[int, float, float]:
    """Sort key of a proposal's ``(sufficient, cost, score)``: those that close the whole gap first,
    cheapest first; then the rest by predicted gain per unit of cost, highest first."""
    sufficient, cost, score = key
    return (0, cost, -score) if sufficient else (1, -score, cost)


def recommendation_id(deployment: str, rule: str, dial: str, opened_at: float) -> str:
    """A stable id: the first 16 hex digits of SHA-256 over deployment, rule, dial and opening time."""
    raw = f"{deployment}\x00{rule}\x00{dial}\x00{opened_at:.3f}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def _from_proposal(p: Proposal, deployment: str, now: float, rank: int) -> Recommendation:
    return Recommendation(
        id=recommendation_id(deployment, p.rule, p.dial, now),
        deployment=deployment,
        rule=p.rule,
        dial=p.dial,
        action=p.action,
        current=p.current,
        suggested=p.suggested,
        flag=p.flag,
        severity=p.severity,
        confidence=p.confidence,
        summary=p.summary,
        description=p.description,
        runbook=f"{c.RUNBOOK_BASE}#{p.rule.replace('_', '-')}",
        opened_at=now,
        predicted_effect=p.predicted_effect,
        evidence=p.evidence,
        rank=rank,
    )


class Lifecycle:
    """Holds pending and open state for every (deployment, rule). Not thread-safe: one loop owns it."""

    def __init__(self, rules: Sequence[Rule], cooldown_seconds: float = 0.0) -> None:
        """``cooldown_seconds``: after a rule's recommendations resolve, it opens nothing for this long."""
        self.rules = list(rules)
        self.cooldown_seconds = cooldown_seconds
        self._resolved_at: dict[tuple[str, str], float] = {}
        self._keys: dict[str, tuple[bool, float, float]] = {}  # recommendation id -> (sufficient, cost, score)
        self._state: dict[tuple[str, str], _RuleState] = {}
        self.statuses: dict[tuple[str, str], RuleStatus] = {}
        self.last_updates: list[Transition] = []
        """``updated`` transitions of the last :meth:`evaluate` call (not in its return value: nothing is sent)."""

    def open_recommendations(self, deployment: str | None = None) -> list[Recommendation]:
        """Open recommendations, best-ranked first within each deployment."""
        out = [
            r
            for (dep, _), st in self._state.items()
            if deployment is None or dep == deployment
            for r in st.open.values()
        ]
        return sorted(out, key=lambda r: (r.deployment, r.rank, r.opened_at))

    def restore(self, recommendations: Sequence[Recommendation]) -> None:
        """Re-open recommendations from a state file, so a restart neither re-fires nor forgets."""
        for r in recommendations:
            st = self._state.setdefault((r.deployment, r.rule), _RuleState())
            st.open[r.dial] = r
            st.pending_since = r.opened_at

    def evaluate(self, ev: Evaluation, ignore_for: bool = False) -> list[Transition]:
        """Run every rule against one deployment's evaluation; return what opened and resolved."""
        transitions: list[Transition] = []
        self.last_updates = []
        dep = ev.ctx.name
        superseded_by: dict[str, str] = {}
        for rule in self.rules:
            key = (dep, rule.id)
            st = self._state.setdefault(key, _RuleState())
            if ev.state not in rule_states(rule):
                st.pending_since = None
                self.statuses[key] = RuleStatus(rule.id, dep, "unknown", f"not evaluated: data is {ev.state}")
                continue
            if st.open:
                transitions += self._maybe_resolve(rule, ev, st)
                if st.open:
                    self._refresh(rule, ev, st)
                    self.statuses[key] = RuleStatus(rule.id, dep, "firing", "open")
                    for other in rule.supersedes:
                        superseded_by.setdefault(other, rule.id)
                    continue
            fire = rule.fires(ev)
            if fire.holds is None:
                st.pending_since = None
                self.statuses[key] = RuleStatus(rule.id, dep, "unknown", f"could not run: {fire.reason}")
                continue
            if not fire.holds:
                st.pending_since = None
                self.statuses[key] = RuleStatus(rule.id, dep, "inactive", fire.reason)
                continue
            for other in rule.supersedes:
                superseded_by.setdefault(other, rule.id)
            if rule.id in superseded_by:
                st.pending_since = None
                self.statuses[key] = RuleStatus(
                    rule.id, dep, "superseded", f"{fire.reason}; superseded by {superseded_by[rule.id]}"
                )
                continue
            if st.pending_since is None:
                st.pending_since = ev.now
            held = ev.now - st.pending_since
            if not ignore_for and held < rule.for_seconds():
                self.statuses[key] = RuleStatus(
                    rule.id, dep, "pending", f"{fire.reason} (for {held:.0f}s of {rule.for_seconds():.0f}s)"
                )
                continue
            cooling = self._cooldown_left(dep, rule.id, ev.now)
            if cooling > 0 and not ignore_for:
                self.statuses[key] = RuleStatus(
                    rule.id, dep, "cooldown", f"{fire.reason} (resolved recently; {cooling:.0f}s of cooldown left)"
                )
                continue
            transitions += self._open(rule, ev, st, fire.reason)
            self.statuses[key] = RuleStatus(rule.id, dep, "firing" if st.open else "inactive", fire.reason)
        self._rerank(dep)
        return transitions

    def _cooldown_left(self, deployment: str, rule_id: str, now: float) -> float:
        resolved = self._resolved_at.get((deployment, rule_id))
        if resolved is None:
            return 0.0
        return max(0.0, self.cooldown_seconds - (now - resolved))

    def _rerank(self, deployment: str) -> None:
        """Rank every open recommendation of a deployment together (see :func:`rank_key`)."""
        opened = [
            (st, dial, r) for (dep, _), st in self._state.items() if dep == deployment for dial, r in st.open.items()
        ]
        opened.sort(key=lambda x: rank_key(self._keys.get(x[2].id, (False, 1.0, 0.0))))
        for rank, (st, dial, r) in enumerate(opened):
            if r.rank != rank:
                st.open[dial] = replace(r, rank=rank)

    def _taken_dials(self, deployment: str, rule_id: str) -> set[str]:
        return {
            dial for (dep, rid), st in self._state.items() if dep == deployment and rid != rule_id for dial in st.open
        }

    def _open(self, rule: Rule, ev: Evaluation, st: _RuleState, reason: str) -> list[Transition]:
        taken = self._taken_dials(ev.ctx.name, rule.id)
        proposals = [p for p in rule.propose(ev) if p.dial not in taken]
        proposals.sort(key=lambda p: rank_key((p.sufficient, p.cost, p.score)))
        alternatives = [p for p in proposals if not p.complementary]
        chosen = alternatives[:MAX_OPEN_PER_RULE] + [p for p in proposals if p.complementary]
        out = []
        for rank, p in enumerate(chosen):
            rec = _from_proposal(p, ev.ctx.name, ev.now, rank)
            self._keys[rec.id] = (p.sufficient, p.cost, p.score)
            st.open[p.dial] = rec
            out.append(Transition("opened", rec, reason, rank + 1, len(chosen)))
        return out

    def _refresh(self, rule: Rule, ev: Evaluation, st: _RuleState) -> None:
        """Keep open recommendations current without changing their identity: id, opening time, action and
        severity stay as opened (severity is an alert label; changing it would look to Alertmanager and
        dashboards like one alert resolving and another firing). Evidence and confidence follow every
        evaluation; the advice itself (values, flag, text, predicted effect) changes only when the suggested or
        current value moves materially (:func:`material_change`), and then an ``updated`` transition says so —
        so a suggestion wobbling 28 ↔ 29 neither floods the console nor drifts from what was announced."""
        for p in rule.propose(ev):
            old = st.open.get(p.dial)
            if old is None:
                continue
            self._keys[old.id] = (p.sufficient, p.cost, p.score)
            if material_change(old.suggested, p.suggested) or material_change(old.current, p.current):
                updated = replace(
                    old,
                    current=p.current,
                    suggested=p.suggested,
                    flag=p.flag,
                    confidence=p.confidence,
                    summary=p.summary,
                    description=p.description,
                    predicted_effect=p.predicted_effect,
                    evidence=p.evidence,
                )
                self.last_updates.append(Transition("updated", updated, f"was {old.current} → {old.suggested}"))
                st.open[p.dial] = updated
            else:
                st.open[p.dial] = replace(old, confidence=p.confidence, evidence=p.evidence)

    def _maybe_resolve(self, rule: Rule, ev: Evaluation, st: _RuleState) -> list[Transition]:
        clear = rule.clears(ev)
        if not clear.holds:
            return []
        out = [Transition("resolved", replace(r, resolved_at=ev.now), clear.reason) for r in st.open.values()]
        for r in st.open.values():
            self._keys.pop(r.id, None)
        st.open.clear()
        self._resolved_at[(ev.ctx.name, rule.id)] = ev.now
        st.pending_since = None
        return out
