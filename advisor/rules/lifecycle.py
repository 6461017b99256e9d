"""Opening, updating and resolving incidents: one open recommendation per deployment and problem (issue 13).

Pure: the caller passes ``now``. Each *rule* keeps Prometheus alerting semantics (``rules/alerting.go``): a
condition that holds starts *pending*; it becomes active once it has held continuously for the rule's
for-duration; a pending condition that stops holding resets. Unlike Prometheus, an active rule leaves only when
its *clear* side holds (a stricter condition) continuously for ``resolve_hold_seconds`` (Prometheus's
``keep_firing_for``), so neither a value hovering at a threshold nor a one-scrape dip flaps; and nothing
resolves because the data went stale or unavailable — it waits for data the rule is evaluated on
(:func:`advisor.rules.base.rule_states`).

Rules of one *problem* (:func:`advisor.rules.base.rule_problem`: ``queue_growth``, ``kv_saturation``,
``goodput_below_target``, ``admission_thrash`` and ``pool_context`` are all ``saturation``) share one *incident*
per deployment, the :class:`~advisor.domain.Recommendation`:

* it opens when the first rule of the problem becomes active (and, after a resolve, not within
  ``cooldown_seconds``) and some turn can be suggested;
* it stays open — same ``id``, ``opened_at`` and ``severity`` — while any rule of the problem is active (has
  not cleared) or pending; a rule that follows another (``queue_growth`` clears while ``goodput_below_target``
  holds) continues the incident; the one exception: an incident capped at ``warning`` for a critical turn's low
  confidence reopens once as ``critical`` when the confidence comes (:meth:`Lifecycle._escalated`);
* it resolves when every active rule has cleared and no rule of the problem is pending.

Every evaluation merges the active rules' proposals, ranks them (:func:`rank_key`, explained by
:func:`why_rank`), suggests the best and lists the rest as ``alternatives``; proposals a rule withholds on its
own evidence, and those of a rule superseded by another that fires, go to ``withheld``. Summary, description,
evidence, confidence, alternatives and withheld follow the current evidence; the suggested turn changes only
when another turn ranks strictly better at two evaluations in a row (or the current one disappears), and its
value only by a material step (:func:`material_change`) that two evaluations in a row make the same way (one
evaluation's reading is the moment's: seq_cap read "max_num_seqs 4 → 214" at a queue's turnaround between 13 and 6,
breaker 23); a replica count passes its own stabilizer instead, and a turn made (the current value moved) moves it at
once. Replica counts pass through the HPA-style
:class:`~advisor.rules.replicas.ReplicaStabilizer` and never change direction within one incident.

For-durations count the time a condition was *seen* to hold. An evaluation after the clock stepped back (``now``
before the deployment's previous evaluation), or, given ``max_gap_seconds`` (the daemon's: its stalled-loop bound,
3 scrape intervals + 5 s), after a longer gap, cannot vouch for the time since the previous one: the deployment's
pending conditions restart their clock there (:attr:`Lifecycle.last_restart` says which, for the log) and so does
a challenger's run. A step back counts as no time for the cooldown and the replica stabilizer's windows (what was
left or seen before it stays so); active rules and open incidents are not affected by either.

Each evaluation returns the ``opened`` / ``resolved`` :class:`Transition` list for notifiers (one of each per
incident); ``updated`` transitions (a new suggested turn or value) are in :attr:`Lifecycle.last_updates` and are
shown, never sent.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from advisor import conventions as c
from advisor.domain import Recommendation
from advisor.platforms import FLAG_REASON_KEY, KUBERNETES, PLATFORM_KEY, keda_replicas_text, platform_flag
from advisor.rules.base import Condition, Evaluation, Proposal, Rule, rule_problem, rule_states
from advisor.rules.common import (
    gpus_per_replica,
    latency_quality,
    load_balance,
    model_quality,
    page_quality,
    uneven_withheld,
)
from advisor.rules.flags import flag_for
from advisor.rules.replicas import ReplicaStabilizer

log = logging.getLogger(__name__)

NOT_EVALUATED = "not evaluated: data is "
"""The reason of a rule not run because the deployment's data state is not one it reads (followed by the state):
``not evaluated: data is unavailable``. ``once`` folds these into one line under the state's own reason."""


@dataclass(frozen=True, slots=True)
class Transition:
    """``kind`` is ``opened``, ``resolved`` or ``updated`` (an open incident's suggested turn or value changed;
    identity, severity and alert state unchanged, so it is shown to the operator but never sent as a
    notification); ``reason`` is the rule's reading when it happened (for ``updated``: the turn before).
    ``option``/``options`` are always 1 since issue 13 (the alternatives ride inside the recommendation); they
    stay for readers of the previous transition shape (backtest)."""

    kind: str
    recommendation: Recommendation
    reason: str = ""
    option: int = 1
    options: int = 1


@dataclass(frozen=True, slots=True)
class PendingRestart:
    """An evaluation of ``deployment`` at ``now`` restarted the for-durations of its pending conditions: it came
    more than ``max_gap_seconds`` after the previous one (at ``previous``), or before it (the clock stepped back),
    so it cannot vouch that they held in between.

    Attributes:
        deployment: the deployment evaluated.
        previous: its previous evaluation (unix s).
        now: this evaluation (unix s).
        rules: ``(rule id, seconds it had been pending at the previous evaluation)`` of each restarted condition,
            in rule order.
    """

    deployment: str
    previous: float
    now: float
    rules: tuple[tuple[str, float], ...]

    @property
    def gap_seconds(self) -> float:
        """``now − previous``: negative when the clock stepped back."""
        return self.now - self.previous


@dataclass(frozen=True, slots=True)
class RuleStatus:
    """Why a rule did or did not act at the last evaluation (for ``once`` and the API).

    ``state``: ``firing`` (active, its turns merged into the problem's incident), ``pending`` (holds, for-duration
    not yet over), ``inactive`` (does not hold), ``unknown`` (could not run, or not evaluated on this data),
    ``superseded`` (holds, but a rule whose diagnosis replaces it fires), ``withheld`` (holds, but every turn it
    has is contradicted by its own evidence, or it has none), ``cooldown`` (holds, but the problem's incident
    resolved less than ``cooldown_seconds`` ago).
    """

    rule: str
    deployment: str
    state: str
    reason: str


HOLDING_STATES: frozenset[str] = frozenset({"firing", "pending", "superseded", "withheld", "cooldown"})
"""The :class:`RuleStatus` states in which the rule's condition holds (or, ``firing``, has not cleared)."""


MATERIAL_CHANGE_RATIO = 0.10
"""A numeric suggestion must move by at least this fraction to change an open recommendation."""

SWITCH_AFTER_EVALUATIONS = 2
"""Another turn must rank strictly better at this many consecutive evaluations to replace the suggested one…"""
SWITCH_AFTER_SECONDS = 120.0
"""…and for at least this long: whether a turn "closes the gap" is judged against the momentary backlog, which
jitters; a waiting queue of 60 ± 30 made utilization and fp8 KV trade places five times in nine minutes with the
count alone. Two minutes is the default for-duration of the saturation rules."""

RISK_ORDER: tuple[str, ...] = (
    c.DIAL_GPU_MEMORY_UTILIZATION,
    c.DIAL_KV_CACHE_MEMORY_BYTES,
    c.DIAL_KV_CACHE_DTYPE,
    c.DIAL_MAX_MODEL_LEN,
    c.DIAL_WEIGHT_QUANTIZATION,
)
"""Stated risk order of the turns that add no GPU (issue 13): a larger memory budget, as a utilization or as vLLM's
pinned byte budget (OOM risk at peaks) <
fp8 KV (small accuracy risk) < a context cap (refuses long requests) < weight quantization (quality delta to
measure); every other dial ranks after these."""

_RISK_WORDS = {
    c.DIAL_GPU_MEMORY_UTILIZATION: "lowest risk (utilization)",
    c.DIAL_KV_CACHE_MEMORY_BYTES: "lowest risk (the pool's byte budget)",
    c.DIAL_KV_CACHE_DTYPE: "second-lowest risk (KV dtype)",
    c.DIAL_MAX_MODEL_LEN: "third in risk (context cap)",
    c.DIAL_WEIGHT_QUANTIZATION: "highest stated risk (weight quantization)",
}

_GPU_DIALS = (
    c.DIAL_REPLICAS,
    c.DIAL_TENSOR_PARALLEL_SIZE,
    "pipeline_parallel_size",
    "data_parallel_size",
)
"""Dials whose increase adds GPUs; read by :func:`gpus_added` when a proposal leaves ``gpus_added`` at 0."""

_SEVERITY_ORDER = {s: i for i, s in enumerate(c.SEVERITIES)}  # critical 0, warning 1, info 2


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


def _numeric_direction(before: object, after: object) -> int | None:
    """+1 or −1 as a numeric suggestion rises or falls from ``before`` to ``after``; ``None`` for anything else (a
    name, a mapping, a number to or from ``None``)."""
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (before, after))
    if not numbers or before == after:
        return None
    return 1 if after > before else -1  # type: ignore[operator]


def predicted_gain(p: Proposal) -> float:
    """The turn's predicted gain as a ratio (×): ``score × cost``, since :class:`Proposal` defines ``score`` as
    gain per unit of cost (a pool turn's KV-pool ratio; replicas ``needed ÷ current``)."""
    gain = p.score * p.cost
    return gain if math.isfinite(gain) else 0.0


def gpus_added(p: Proposal, ev: Evaluation | None = None) -> float:
    """GPUs the turn adds to the deployment: ``p.gpus_added`` when the rule set it (negative: GPUs it frees);
    otherwise, for an
    increase of ``replicas`` or a parallel size, what the turn adds at the deployment's replicas × TP × PP × DP
    (from ``ev``; without it, the dial's own step); 0 for every other turn."""
    if p.gpus_added != 0:
        return float(p.gpus_added)  # negative: GPUs the turn frees (a lower TP, fewer replicas)
    cur, new = p.current, p.suggested
    if p.dial not in _GPU_DIALS or isinstance(cur, bool) or isinstance(new, bool):
        return 0.0
    if not isinstance(cur, int | float) or not isinstance(new, int | float) or new <= cur:
        return 0.0
    if ev is None:
        return float(new - cur)
    per_replica = gpus_per_replica(ev)
    if p.dial == c.DIAL_REPLICAS:
        return float((new - cur) * per_replica)
    return float(ev.ctx.replicas * per_replica * (new - cur) / max(cur, 1))


def _changes(p: Proposal) -> int:
    """Configuration changes the turn makes: the flags in the engine's flag (at least one), whatever platform
    ``p.flag`` is restated for."""
    flag = p.engine_flag if p.engine_flag is not None else p.flag
    return max(1, sum(1 for tok in (flag or "").split() if tok.startswith("--")))


def _qualified(ev: Evaluation, proposals: Sequence[Proposal]) -> list[Proposal]:
    """A rule's proposals through the checks every rule's (plugins' too) pass: the scraped page's quality, the
    latency model's, the model served, and whether the replicas' loads are the router's (:func:`load_balance`)."""
    return load_balance(ev, model_quality(ev, latency_quality(ev, page_quality(ev, proposals))))


def localized(ev: Evaluation, p: Proposal) -> Proposal:
    """``p`` with its flag said in the deployment's platform's terms (:func:`advisor.platforms.platform_flag`),
    the engine's flag kept in ``engine_flag``; ``flag`` ``None`` with the reason in ``evidence`` when the platform
    does not offer the dial. Kubernetes (the default) keeps the engine's flag, except a replica turn where KEDA sets the
    count (:func:`_keda_localized`); an already restated proposal is returned as it is."""
    platform = ev.ctx.platform
    if p.engine_flag is not None or p.flag is None:
        return p
    if platform == KUBERNETES:
        return _keda_localized(ev, p)
    gpus = gpus_per_replica(ev) if p.dial == c.DIAL_INSTANCE_TYPE else None  # the instance must hold a replica
    flag, reason = platform_flag(platform, ev.ctx.engine, p.dial, p.suggested, p.flag, gpu_count=gpus)
    evidence = {**p.evidence, PLATFORM_KEY: platform}
    if flag is None:
        evidence[FLAG_REASON_KEY] = reason
    else:
        evidence.pop(FLAG_REASON_KEY, None)
    return replace(p, flag=flag, engine_flag=p.flag, evidence=evidence)


def _keda_localized(ev: Evaluation, p: Proposal) -> Proposal:
    """A Kubernetes replica turn where KEDA sets the count (:attr:`~advisor.rules.base.DeploymentContext.
    scaled_by_keda`): the ``kubectl scale`` phrase replaced by what sets it (:func:`advisor.platforms.
    keda_replicas_text`), the engine's phrasing kept in ``engine_flag``. Any other proposal is returned as it is."""
    keda = ev.ctx.scaled_by_keda
    value = p.suggested
    if keda is None or p.dial != c.DIAL_REPLICAS or p.flag is None:
        return p
    if not isinstance(value, int) or isinstance(value, bool):
        return p
    k8s = flag_for(ev.ctx.engine, c.DIAL_REPLICAS, value)
    if k8s not in p.flag:
        return p
    said = keda_replicas_text(value, keda.target, keda.namespace, keda.min_replicas, keda.max_replicas)
    return replace(p, flag=p.flag.replace(k8s, said), engine_flag=p.flag)


def rank_key(p: Proposal, added: float | None = None) -> tuple[Any, ...]:
    """The deterministic sort key of a proposal among an incident's turns (lowest first), as issue 13 states it:

    1. turns that go *with* another (``complementary``: a max-num-seqs cap beside a pool turn) after those that
       stand alone;
    2. turns that add no GPU before GPU-adding ones (``added``: :func:`gpus_added`, default ``p.gpus_added``);
    3. those that close the whole gap (``sufficient``) first;
    4. no-GPU turns by the risk order :data:`RISK_ORDER` (others after), then by the GPUs they free (most first),
       then by predicted gain (:func:`predicted_gain`, highest first); GPU-adding turns by predicted gain per
       added GPU, highest first;
    5. ties to fewer changes (:func:`_changes`), then the dial's name, then the rule's id.
    """
    gpus = p.gpus_added if added is None else added
    gain = predicted_gain(p)
    if gpus > 0:
        middle: tuple[float, ...] = (0.0, -round((gain - 1.0) / gpus, 9))
    else:
        risk = RISK_ORDER.index(p.dial) if p.dial in RISK_ORDER else len(RISK_ORDER)
        # a turn that frees GPUs (over-provisioning: TP 8 → 4 frees 4) ranks by the GPUs it frees, most first
        middle = (float(risk), round(gpus, 9), -round(gain, 9))
    return (p.complementary, gpus > 0, not p.sufficient, *middle, _changes(p), p.dial, p.rule)


def why_rank(p: Proposal, added: float | None = None) -> str:
    """One sentence saying why :func:`rank_key` puts the turn where it is.

    Examples: ``adds no GPU; closes the gap; lowest risk (utilization)``; ``adds 2 GPUs; closes the gap; +85%
    per added GPU``.
    """
    gpus = p.gpus_added if added is None else added
    gain = predicted_gain(p)
    parts: list[str] = []
    if p.complementary:
        parts.append("goes with another turn (does not close the gap alone)")
    if gpus > 0:
        n = f"{gpus:g}"
        parts.append(f"adds {n} GPU{'' if gpus == 1 else 's'}")
    elif gpus < 0:
        n = f"{-gpus:g}"
        parts.append(f"frees {n} GPU{'' if gpus == -1 else 's'}")
    else:
        parts.append("adds no GPU")
    if not p.complementary:
        parts.append("closes the gap" if p.sufficient else "does not close the gap alone")
    if gpus > 0:
        parts.append(f"{(gain - 1.0) / gpus:+.0%} per added GPU")
    else:
        parts.append(_RISK_WORDS.get(p.dial, f"risk not in the stated order ({p.dial})"))
        if gain > 0 and not p.complementary:
            parts.append(f"predicted gain ×{gain:.2f}")
    return "; ".join(parts)


RESOLVED_REMOVED = "removed"
"""The ``resolved_reason`` of an incident :meth:`Lifecycle.resolve_orphans` resolves: a reload removed its deployment
or every rule of its problem (issue 14; Alertmanager gets the resolution, not an alert left to time out)."""
RESOLVED_ESCALATED = "escalated"
"""The ``resolved_reason`` of a ``warning`` incident that reopens as ``critical`` (:meth:`Lifecycle._escalated`): it
opened at ``warning`` only because its critical turn's confidence was below
:data:`advisor.conventions.LOW_CONFIDENCE` (a window not yet full after a start), and the confidence has come."""


def recommendation_id(deployment: str, rule: str, dial: str, opened_at: float) -> str:
    """A stable id: the first 16 hex digits of SHA-256 over deployment, rule (an incident: its problem), dial
    (an incident: empty) and opening time."""
    raw = f"{deployment}\x00{rule}\x00{dial}\x00{opened_at:.3f}".encode()
    return hashlib.sha256(raw).hexdigest()[:16]


@dataclass
class _RuleState:
    pending_since: float | None = None
    active: bool = False  # held for its for-duration and has not cleared: keeps the incident open
    clear_since: float | None = None  # active, and its clear side has held since (unix s): the resolve hold


@dataclass
class _Incident:
    rec: Recommendation
    challenger: str | None = None  # dial ranking strictly better than the suggested one
    challenger_runs: int = 0
    challenger_since: float = 0.0  # unix s when the challenger first ranked better (this run)
    replicas_direction: str | None = None  # increase | decrease, fixed at the first replica advice
    replicas_last: int | None = None  # last stabilized replica count advised
    replicas_turn: Proposal | None = None  # the last replicas turn advised, held while the incident is open
    folded: list[Recommendation] = field(default_factory=list)  # previous-release records to resolve once
    capped: bool = False  # opened at warning only because its critical turn's confidence was < LOW_CONFIDENCE
    value_pending: int | None = None  # +1/-1: the last evaluation moved the suggested value materially this way
    missing_runs: int = 0  # consecutive evaluations whose turns lacked the suggested dial


@dataclass(frozen=True, slots=True)
class _Turn:
    """A candidate turn with its ranking inputs."""

    p: Proposal
    gpus: float

    @property
    def key(self) -> tuple[Any, ...]:
        return rank_key(self.p, self.gpus)


def resolve_hold(rule: Rule, default: float) -> float:
    """Seconds ``rule``'s clear side must hold before it leaves: ``default`` (``rules.resolve_for``), or 0 for a
    rule whose ``resolve_at_once`` attribute is true — advice to take capacity away, which must go the moment it
    stops being true (breaker 29: "scale replicas 2 → 1" stayed open, and ``advisor_desired_replicas`` read 1, for the
    30 s hold into an overload of 300 waiting)."""
    return 0.0 if getattr(rule, "resolve_at_once", False) else default


class Lifecycle:
    """Holds pending/active state per (deployment, rule) and the open incident per (deployment, problem).

    Not thread-safe: one loop owns it. ``replica_stabilizer`` (default: one with the default windows) turns each
    evaluation's raw replica count into the advised one.
    """

    def __init__(
        self,
        rules: Sequence[Rule],
        cooldown_seconds: float = 0.0,
        replica_stabilizer: ReplicaStabilizer | None = None,
        max_gap_seconds: float | None = None,
        resolve_hold_seconds: float = 0.0,
    ) -> None:
        """``cooldown_seconds``: after a problem's incident resolves, it does not reopen for this long.
        ``resolve_hold_seconds``: an active rule leaves only once its clear side has held at every evaluation for
        this long (0: at the first evaluation it holds); a clear that stops holding, or an evaluation that cannot
        vouch for the time since the previous one, starts the hold again.
        ``max_gap_seconds``: the longest time between two evaluations of a deployment that still vouches for the
        time between them; after a longer gap its pending for-durations restart (``None``: every forward gap
        vouches, the evaluations are the caller's grid — the unit tests, the backtest).

        Raises:
            ValueError: ``max_gap_seconds`` is not a finite number > 0.
        """
        self.rules = list(rules)
        self.cooldown_seconds = cooldown_seconds
        self.resolve_hold_seconds = resolve_hold_seconds
        self._max_gap_seconds = _checked_gap(max_gap_seconds)
        self.replica_stabilizer = replica_stabilizer if replica_stabilizer is not None else ReplicaStabilizer()
        self._resolved_at: dict[tuple[str, str], float] = {}  # (deployment, problem) -> unix s
        self._state: dict[tuple[str, str], _RuleState] = {}  # (deployment, rule)
        self._incidents: dict[tuple[str, str], _Incident] = {}  # (deployment, problem)
        # the same incidents by deployment, then problem: a deployment's are read each evaluation, and a scan of
        # every deployment's would cost O(deployments²) a cycle (kept in step by _add_incident / _drop_incident)
        self._by_deployment: dict[str, dict[str, _Incident]] = {}
        self._observed: tuple[str, float] | None = None  # (deployment, now) of the last replica observation
        self._evaluated_at: dict[str, float] = {}  # deployment -> unix s of its last evaluation
        self.last_restart: PendingRestart | None = None
        """The restart of the last :meth:`evaluate` call's pending for-durations (``None``: none restarted)."""
        self.statuses: dict[tuple[str, str], RuleStatus] = {}
        self._failed_logged: set[tuple[str, str, str]] = set()  # (deployment, rule, exception type) logged once
        self.last_updates: list[Transition] = []
        """``updated`` transitions of the last :meth:`evaluate` call (not in its return value: nothing is sent)."""

    @property
    def max_gap_seconds(self) -> float | None:
        """The longest time between two evaluations of a deployment that vouches for the time between (seconds;
        ``None``: any forward gap). Setting it (a reload) raises ``ValueError`` unless ``None`` or finite > 0."""
        return self._max_gap_seconds

    @max_gap_seconds.setter
    def max_gap_seconds(self, seconds: float | None) -> None:
        self._max_gap_seconds = _checked_gap(seconds)

    # -- reading -----------------------------------------------------------------------------------------------
    def open_recommendations(self, deployment: str | None = None) -> list[Recommendation]:
        """Open incidents, most severe first within each deployment (then the earliest opened)."""
        if deployment is None:
            out = [inc.rec for inc in self._incidents.values()]
        else:
            out = [inc.rec for inc in self._by_deployment.get(deployment, {}).values()]
        return sorted(out, key=lambda r: (r.deployment, r.rank, r.opened_at, r.problem))

    def _add_incident(self, key: tuple[str, str], inc: _Incident) -> None:
        self._incidents[key] = inc
        self._by_deployment.setdefault(key[0], {})[key[1]] = inc

    def _drop_incident(self, key: tuple[str, str]) -> None:
        del self._incidents[key]
        mine = self._by_deployment[key[0]]
        del mine[key[1]]
        if not mine:
            del self._by_deployment[key[0]]

    def problem_of(self, rule_id: str) -> str:
        """The problem of a rule id among :attr:`rules` (an unknown id is its own problem)."""
        for rule in self.rules:
            if rule.id == rule_id:
                return rule_problem(rule)
        return rule_id

    # -- restart -----------------------------------------------------------------------------------------------
    def restore(self, recommendations: Sequence[Recommendation]) -> None:
        """Re-open incidents from a state file, so a restart neither re-fires nor forgets.

        Records of the previous release carry no ``problem`` and may hold several open recommendations of one
        problem per deployment (one per rule and dial): each record's problem is its rule's
        (:meth:`problem_of`); per (deployment, problem) the earliest opened becomes the incident (keeping its
        ``id``, so the notification already sent stays the one that resolves) and the others are folded into
        its ``alternatives``. Each restored rule is active again (it leaves on its clear side). The folded records
        were notified separately by the previous release, so the first evaluation of their problem returns one
        ``resolved`` transition for each (reason: folded into the incident), and no alert is left firing forever.
        """
        groups: dict[tuple[str, str], list[Recommendation]] = {}
        for r in recommendations:
            problem = r.problem or self.problem_of(r.rule)
            groups.setdefault((r.deployment, problem), []).append(r)
        for (dep, problem), recs in groups.items():
            recs.sort(key=lambda r: (r.opened_at, r.rank, r.id))
            first = recs[0]
            folded = tuple(_alternative_from_record(r) for r in recs[1:])
            for r in recs:
                st = self._state.setdefault((dep, r.rule), _RuleState())
                st.active = True
                st.pending_since = r.opened_at if st.pending_since is None else st.pending_since
            if (dep, problem) in self._incidents:
                continue
            rec = replace(first, problem=problem, alternatives=tuple(first.alternatives) + folded)
            inc = _Incident(rec=rec, folded=recs[1:])
            _note_replicas(inc)
            self._add_incident((dep, problem), inc)

    def resolve_orphans(self, deployments: Collection[str], now: float) -> list[Transition]:
        """Resolve the open incidents no evaluation visits any longer, at ``now`` (unix s): those of a deployment
        not in ``deployments`` (a reload removed it) and those of a problem no rule in :attr:`rules` has (a reload
        disabled its rules or gave them another problem). One ``resolved`` transition each (and each folded
        previous-release record), with ``resolved_reason`` :data:`RESOLVED_REMOVED`, so no alert is left firing and
        no incident is stranded in the state file. The rule states and statuses of removed deployments and rules
        are forgotten. Such a resolve starts no cooldown (and ends any: the problem was not seen to clear).
        """
        problems = {rule_problem(r) for r in self.rules}
        out: list[Transition] = []
        for key, inc in list(self._incidents.items()):
            dep, problem = key
            if dep in deployments and problem in problems:
                continue
            why = (
                f"deployment {dep} is no longer configured"
                if dep not in deployments
                else f"no configured rule has the problem {problem} any longer"
            )
            self._drop_incident(key)
            # not a resolve of the condition: no cooldown, so a deployment or rules a later reload brings back
            # open again at once (breaker 19: removed and re-added by SIGHUP at 96 % KV, it stayed in "cooldown"
            # for 5 minutes while its advisor_desired_replicas fell from 2 to 1)
            self._resolved_at.pop(key, None)
            out += [
                Transition("resolved", replace(r, resolved_at=now, resolved_reason=RESOLVED_REMOVED), why)
                for r in inc.folded
            ]
            out.append(Transition("resolved", replace(inc.rec, resolved_at=now, resolved_reason=RESOLVED_REMOVED), why))
        ids = {r.id for r in self.rules}
        for dep in [dep for dep in self._evaluated_at if dep not in deployments]:
            del self._evaluated_at[dep]
        for k in [k for k in self._state if k[0] not in deployments or k[1] not in ids]:
            del self._state[k]
        for k in [k for k in self.statuses if k[0] not in deployments or k[1] not in ids]:
            del self.statuses[k]
        return out

    # -- one evaluation ----------------------------------------------------------------------------------------
    def evaluate(self, ev: Evaluation, ignore_for: bool = False) -> list[Transition]:
        """Run every rule against one deployment's evaluation; return the incidents that opened and resolved."""
        transitions: list[Transition] = []
        self.last_updates = []
        dep = ev.ctx.name
        self.last_restart = self._vouch(dep, ev.now)
        problems: dict[str, list[Rule]] = {}
        for rule in self.rules:
            problems.setdefault(rule_problem(rule), []).append(rule)
        superseded_by: dict[str, tuple[str, str]] = {}  # rule id -> (superseding rule, its reason)
        for problem, rules in problems.items():
            transitions += self._evaluate_problem(ev, problem, rules, superseded_by, ignore_for)
        self._rank_incidents(dep)
        return transitions

    def _vouch(self, dep: str, now: float) -> PendingRestart | None:
        """Note ``now`` as ``dep``'s last evaluation. When it cannot vouch for the time since the previous one (it
        is earlier, or later by more than :attr:`max_gap_seconds`), restart the deployment's pending for-durations
        at ``now`` (the evaluation then sees whether the condition still holds) and its incidents' challenger runs;
        a step back also moves the deployment's resolve times back by the step, so the cooldown left is what it
        was at the previous evaluation. Returns the restart when a pending condition restarted."""
        previous = self._evaluated_at.get(dep)
        self._evaluated_at[dep] = now
        if previous is None or previous <= now <= previous + (self.max_gap_seconds or math.inf):
            return None
        restarted: list[tuple[str, float]] = []
        for rule in self.rules:
            st = self._state.get((dep, rule.id))
            if st is not None and st.clear_since is not None:
                st.clear_since = now  # nor for a clear side's hold
            if st is not None and not st.active and st.pending_since is not None:
                restarted.append((rule.id, max(0.0, previous - st.pending_since)))
                st.pending_since = now
        for inc in self._by_deployment.get(dep, {}).values():
            inc.challenger, inc.challenger_runs = None, 0
        if now < previous:
            for key in [k for k in self._resolved_at if k[0] == dep]:
                self._resolved_at[key] -= previous - now
        return PendingRestart(dep, previous, now, tuple(restarted)) if restarted else None

    def _guarded(self, ev: Evaluation, rule: Rule, what: str, call: Callable[[Evaluation], Condition]) -> Condition:
        """``call(ev)`` — the rule's ``fires`` or ``clears`` — or, when it raises, an unknown condition naming the
        failure (logged once per deployment, rule and exception type): one rule's failure never stops the deployment's
        other rules (round 67: a CapacityError in one rule's turn dropped the whole deployment from ``once``)."""
        try:
            return call(ev)
        except Exception as exc:
            return Condition(None, self._failed(ev, rule, what, exc))

    def _proposals(self, ev: Evaluation, rule: Rule) -> list[Proposal]:
        """``rule.propose(ev)``, or none when it raises (logged as :meth:`_guarded` logs): the condition stands, the
        rule's turns are missing for this evaluation, the other rules' turns are not."""
        try:
            return rule.propose(ev)
        except Exception as exc:
            self._failed(ev, rule, "propose", exc)
            return []

    def _failed(self, ev: Evaluation, rule: Rule, what: str, exc: Exception) -> str:
        key = (ev.ctx.name, rule.id, type(exc).__name__)
        if key not in self._failed_logged:
            self._failed_logged.add(key)
            log.error("deployment=%s: rule %s failed in %s: %s: %s", key[0], rule.id, what, key[2], exc, exc_info=exc)
        return f"the rule failed ({type(exc).__name__}: {str(exc)[:200]})"

    def _evaluate_problem(
        self,
        ev: Evaluation,
        problem: str,
        rules: list[Rule],
        superseded_by: dict[str, tuple[str, str]],
        ignore_for: bool,
    ) -> list[Transition]:
        dep = ev.ctx.name
        key = (dep, problem)
        inc = self._incidents.get(key)
        evaluated = False
        cleared: list[str] = []
        reasons: dict[str, str] = {}
        contributing: list[tuple[Rule, list[Proposal]]] = []
        feeding: list[Proposal] = []  # proposals of holding rules, for the replica stabilizer
        pending: list[tuple[Rule, list[Proposal]]] = []  # rules of the problem whose condition holds, still pending
        for rule in rules:
            skey = (dep, rule.id)
            st = self._state.setdefault(skey, _RuleState())
            if ev.state not in rule_states(rule):
                st.pending_since = None
                st.clear_since = None  # data it is not evaluated on vouches for no clear time (breaker 29)
                self.statuses[skey] = RuleStatus(rule.id, dep, "unknown", f"{NOT_EVALUATED}{ev.state}")
                continue
            evaluated = True
            clearing = ""
            if st.active:
                clear = self._guarded(ev, rule, "clears", rule.clears)
                if not clear.holds:
                    st.clear_since = None
                else:
                    if st.clear_since is None:
                        st.clear_since = ev.now
                    held_clear = ev.now - st.clear_since
                    hold = resolve_hold(rule, self.resolve_hold_seconds)
                    if ignore_for or held_clear >= hold:
                        st.active = False
                        st.pending_since = None
                        st.clear_since = None
                        cleared.append(clear.reason)
                        self.statuses[skey] = RuleStatus(rule.id, dep, "inactive", f"cleared: {clear.reason}")
                        continue
                    # one scrape's dip does not resolve: the clear side must hold for the resolve hold
                    clearing = f"; clearing: clear for {held_clear:.0f}s of {hold:.0f}s: {clear.reason}"
            fire = self._guarded(ev, rule, "fires", rule.fires)
            if fire.holds or st.active:
                for other in rule.supersedes:
                    superseded_by.setdefault(other, (rule.id, fire.reason))
            if st.active:
                # fire side gone: either clearing (the clear side holds, counting to the resolve hold) or between
                # the two thresholds ("not yet clear"), never both
                between = "" if fire.holds or clearing else "; not yet clear"
                reasons[rule.id] = fire.reason + between + clearing
                props = [localized(ev, q) for q in _qualified(ev, self._proposals(ev, rule))]
                contributing.append((rule, props))
                feeding += props
                continue
            if fire.holds is None:
                st.pending_since = None
                self.statuses[skey] = RuleStatus(rule.id, dep, "unknown", f"could not run: {fire.reason}")
                continue
            if not fire.holds:
                st.pending_since = None
                self.statuses[skey] = RuleStatus(rule.id, dep, "inactive", fire.reason)
                continue
            reasons[rule.id] = fire.reason
            if st.pending_since is None:
                st.pending_since = ev.now
            props = [localized(ev, q) for q in _qualified(ev, self._proposals(ev, rule))]
            if props and all(uneven_withheld(p) for p in props):
                # every turn waits on the router: the for-duration counts from when the loads are even again, so a
                # condition read while the router was at fault does not page the moment it is fixed (breaker 9:
                # queue_growth paged "replicas 2 → 3" 42 s after the fix, on a window still holding the fault)
                st.pending_since = ev.now
            held = ev.now - st.pending_since
            feeding += props
            if not ignore_for and held < rule.for_seconds():
                pending.append((rule, props))
                text = f"{fire.reason} (for {held:.0f}s of {rule.for_seconds():.0f}s)"
                if rule.id in superseded_by:
                    by, why = superseded_by[rule.id]
                    self.statuses[skey] = RuleStatus(rule.id, dep, "superseded", f"{text}; superseded by {by}: {why}")
                else:
                    self.statuses[skey] = RuleStatus(rule.id, dep, "pending", text)
                continue
            if inc is None and not ignore_for:
                cooling = self._cooldown_left(dep, problem, ev.now)
                if cooling > 0:
                    self.statuses[skey] = RuleStatus(
                        rule.id,
                        dep,
                        "cooldown",
                        f"{fire.reason} (resolved recently; {cooling:.0f}s of cooldown left)",
                    )
                    continue
            st.active = True
            contributing.append((rule, props))
        if not evaluated:
            return []
        self._feed_replicas(ev, feeding)
        if contributing and pending:
            # the problem is established (a rule of it completed its for-duration): the turns of its rules whose
            # condition holds but are still pending join the ranking at once, so an incident does not open on
            # one rule's turn and switch to a better one seconds later when the next rule's for-duration ends
            order = {r.id: i for i, r in enumerate(rules)}
            contributing = sorted(contributing + pending, key=lambda rp: order[rp[0].id])
        turns, withheld = self._merge(ev, contributing, superseded_by)
        turns = self._stabilized_turns(ev, inc, turns)
        out: list[Transition] = []
        if inc is not None and inc.folded:
            why = f"folded into incident {inc.rec.id} ({problem}): one recommendation per problem since issue 13"
            out += [Transition("resolved", replace(r, resolved_at=ev.now), why) for r in inc.folded]
            inc.folded = []
        if inc is None:
            if turns:
                inc = self._open(ev, problem, turns, withheld)
                self._add_incident(key, inc)
                out.append(Transition("opened", inc.rec, reasons.get(inc.rec.rule) or next(iter(reasons.values()))))
        elif not any(
            self._state[(dep, r.id)].active or self._state[(dep, r.id)].pending_since is not None for r in rules
        ):
            resolved = replace(inc.rec, resolved_at=ev.now)
            self._drop_incident(key)
            self._resolved_at[key] = ev.now
            why = "; ".join(cleared) or "no rule of the problem holds any longer"
            out.append(Transition("resolved", resolved, why))
            inc = None
        elif contributing:
            firing = {r.id for r, _ in contributing if r.id not in superseded_by}
            turns = self._held_replicas(ev, inc, turns, withheld, firing)
            escalation = self._escalated(ev, key, inc, turns, withheld)
            if escalation:
                out += escalation
                inc = self._incidents[key]
            else:
                self._refresh(ev, inc, turns, withheld)
        self._set_statuses(ev, problem, contributing, superseded_by, reasons, inc)
        return out

    # -- merging -----------------------------------------------------------------------------------------------
    def _feed_replicas(self, ev: Evaluation, proposals: list[Proposal]) -> None:
        """Observe the deployment's raw replica count once per evaluation: the first rule's, in rule order (one
        replica number per deployment, whichever problem asks)."""
        if self._observed == (ev.ctx.name, ev.now):
            return
        for p in proposals:
            if p.dial == c.DIAL_REPLICAS and p.withheld is None and isinstance(p.suggested, int | float):
                self.replica_stabilizer.observe(ev.ctx.name, ev.now, int(p.suggested))
                self._observed = (ev.ctx.name, ev.now)
                return

    def _merge(
        self,
        ev: Evaluation,
        contributing: list[tuple[Rule, list[Proposal]]],
        superseded_by: Mapping[str, tuple[str, str]],
    ) -> tuple[list[_Turn], list[dict[str, Any]]]:
        """The candidate turns (one per dial: the first rule's in rule order), ranked, and the withheld ones."""
        withheld: list[dict[str, Any]] = []
        by_dial: dict[str, Proposal] = {}
        for rule, props in contributing:
            for p in props:
                if rule.id in superseded_by:
                    by, why = superseded_by[rule.id]
                    withheld.append({"rule": p.rule, "dial": p.dial, "reason": f"superseded by {by}: {why}"})
                elif p.withheld is not None:
                    withheld.append({"rule": p.rule, "dial": p.dial, "reason": p.withheld})
                else:
                    by_dial.setdefault(p.dial, p)
        turns = [_Turn(p, gpus_added(p, ev)) for p in by_dial.values()]
        turns.sort(key=lambda t: t.key)
        return turns, withheld

    def _stabilize(self, ev: Evaluation, inc: _Incident | None, p: Proposal) -> Proposal | None:
        """A replicas proposal at the stabilized count (``None``: no turn), never against the incident's
        direction (then the last advised count stays)."""
        if not isinstance(p.current, int | float) or not isinstance(p.suggested, int | float):
            return p
        current = int(p.current)
        raw = int(p.suggested)
        value = self.replica_stabilizer.value(ev.ctx.name, ev.now, current)
        direction = inc.replicas_direction if inc is not None else None
        last = inc.replicas_last if inc is not None else None
        against = (direction == "increase" and value <= current) or (direction == "decrease" and value >= current)
        if against or value == current:
            if last is None or last == current:
                return None
            value = last
        if value == raw:
            return p
        action = "increase" if value > current else "decrease"
        effects = {k: dict(v) for k, v in p.predicted_effect.items()}
        scale = value / max(raw, 1)
        for k in ("kv_cache_tokens_total", "concurrency_ceiling"):
            after = effects.get(k, {}).get("after")
            if isinstance(after, int | float):
                effects[k]["after"] = after * scale
        util = effects.get("utilization", {}).get("after")
        if isinstance(util, int | float):
            effects["utilization"]["after"] = util / scale
        effects.pop("queue_wait_seconds", None)  # not linear in replicas: the rule's figure was for the raw count
        if "replicas" in effects:
            effects["replicas"]["after"] = value
        note = (
            f" Stabilized as Kubernetes' HPA behavior does (scale up to the lowest count of the last "
            f"{self.replica_stabilizer.up_window:.0f}s, down to the highest of the last "
            f"{self.replica_stabilizer.down_window:.0f}s): {value} replicas; this window alone says {raw}."
        )
        return localized(
            ev,
            replace(
                p,
                suggested=value,
                action=action,
                flag=flag_for(ev.ctx.engine, c.DIAL_REPLICAS, value),
                engine_flag=None,
                summary=p.summary.replace(f"{current} → {raw}", f"{current} → {value}"),
                description=p.description + note,
                predicted_effect=effects,
                evidence={**p.evidence, "replicas_raw": raw, "replicas_stabilized": value},
                cost=max(value / max(current, 1), 1.0),
            ),
        )

    def _stabilized_turns(self, ev: Evaluation, inc: _Incident | None, turns: list[_Turn]) -> list[_Turn]:
        out: list[_Turn] = []
        for t in turns:
            if t.p.dial != c.DIAL_REPLICAS:
                out.append(t)
                continue
            p = self._stabilize(ev, inc, t.p)
            if p is not None:
                out.append(_Turn(p, gpus_added(p, ev)))
        out.sort(key=lambda t: t.key)
        return out

    # -- opening and refreshing --------------------------------------------------------------------------------
    def _open(
        self,
        ev: Evaluation,
        problem: str,
        turns: list[_Turn],
        withheld: list[dict[str, Any]],
    ) -> _Incident:
        """A new incident suggesting the best of ``turns`` (non-empty, ranked); its severity is the most severe
        of the turns', capped at ``warning`` below :data:`advisor.conventions.LOW_CONFIDENCE`."""
        best = turns[0]
        dep = ev.ctx.name
        severity = min((t.p.severity for t in turns), key=lambda s: _SEVERITY_ORDER.get(s, len(_SEVERITY_ORDER)))
        capped = severity == "critical" and best.p.confidence < c.LOW_CONFIDENCE
        if capped:
            severity = "warning"
        rec = Recommendation(
            id=recommendation_id(dep, problem, "", ev.now),
            deployment=dep,
            rule=best.p.rule,
            dial=best.p.dial,
            action=best.p.action,
            current=best.p.current,
            suggested=best.p.suggested,
            flag=best.p.flag,
            severity=severity,
            confidence=best.p.confidence,
            summary=best.p.summary,
            description=_described(best, turns),
            runbook=f"{c.RUNBOOK_BASE}#{best.p.rule.replace('_', '-')}",
            opened_at=ev.now,
            predicted_effect=best.p.predicted_effect,
            evidence=best.p.evidence,
            problem=problem,
            alternatives=tuple(_alternative(t) for t in turns[1:]),
            withheld=tuple(withheld),
        )
        inc = _Incident(rec=rec, capped=capped)
        inc.replicas_turn = next((t.p for t in turns if t.p.dial == c.DIAL_REPLICAS), None)
        _note_replicas(inc)
        return inc

    def _escalated(
        self,
        ev: Evaluation,
        key: tuple[str, str],
        inc: _Incident,
        turns: list[_Turn],
        withheld: list[dict[str, Any]],
    ) -> list[Transition]:
        """The transitions that escalate ``inc`` to ``critical``, or none. Only an incident that opened at
        ``warning`` because its critical turn's confidence was below :data:`advisor.conventions.LOW_CONFIDENCE`
        (``capped``) escalates, once, when a critical turn now has that confidence: its ``warning`` incident resolves
        (``resolved_reason`` :data:`RESOLVED_ESCALATED`) and a ``critical`` one opens with the same turn, replica
        direction and count — a new alert, since Alertmanager identifies one by its labels and ``severity`` is one
        of them. The confidence was low for want of evidence, a window not yet full after a start
        (:func:`advisor.rules.common.confidence`); with severity fixed at opening, an incident opened then stayed
        ``warning`` for its life and never reached a route on ``severity="critical"`` (walkthrough, 2026-12-07: the
        demo's saturated engine opened "WARNING … confidence 0.23" and read 0.75 half a minute later). Never back
        to ``warning``."""
        if not inc.capped or not turns:
            return []
        dep = key[0]
        if any(getattr(self._state.get((dep, r.id)), "clear_since", None) is not None for r in self.rules):
            # a rule of it is clearing: the problem is ending, not worse (breaker 29: "KV pool saturated" re-paged
            # critical 19 s after the burst ended, at 14.5 % KV, as the window's confidence rose)
            return []
        ordered = sorted(turns, key=lambda t: t.p.dial != inc.rec.dial)  # the incident's turn first (stable sort)
        new = self._open(ev, key[1], ordered, withheld)
        if new.rec.severity != "critical":
            return []
        new.replicas_direction = inc.replicas_direction or new.replicas_direction
        self._drop_incident(key)  # not a resolve of the condition: no cooldown
        self._add_incident(key, new)
        why = (
            f"escalated to critical: its critical turn's confidence is now {new.rec.confidence:.2f} (≥ "
            f"{c.LOW_CONFIDENCE:g}); reopened as {new.rec.id}"
        )
        old = replace(inc.rec, resolved_at=ev.now, resolved_reason=RESOLVED_ESCALATED)
        return [
            Transition("resolved", old, why),
            Transition(
                "opened",
                new.rec,
                f"escalated from {inc.rec.id} (warning at confidence below {c.LOW_CONFIDENCE:g}): {new.rec.summary}",
            ),
        ]

    def _held_replicas(
        self,
        ev: Evaluation,
        inc: _Incident,
        turns: list[_Turn],
        withheld: list[dict[str, Any]],
        firing: Collection[str],
    ) -> list[_Turn]:
        """``turns`` plus the incident's replicas turn when this window proposes none (nor withholds one) while
        the rule that proposed it still fires (``firing``: rule ids; a rule that cleared takes its turn with it):
        once proposed, a replica count stays advised for the life of the incident, at the stabilizer's value
        (:meth:`ReplicaStabilizer.value`, never against the incident's direction: else the last advised count),
        so the advice and ``advisor_recommended_value{dial="replicas"}`` do not come and go with the momentary
        data. Not held when the configured count changed (the turn was made) or the stabilized count is the
        current one."""
        held = inc.replicas_turn
        if held is None or held.rule not in firing or any(t.p.dial == c.DIAL_REPLICAS for t in turns):
            return turns
        if any(w.get("dial") == c.DIAL_REPLICAS for w in withheld):
            return turns
        current = ev.ctx.replicas
        if held.current != current or not isinstance(held.suggested, int | float):
            return turns
        value = self.replica_stabilizer.value(ev.ctx.name, ev.now, current)
        direction = inc.replicas_direction
        if (direction == "increase" and value <= current) or (direction == "decrease" and value >= current):
            value = current
        if value == current:
            value = inc.replicas_last if inc.replicas_last is not None else int(held.suggested)
        if value == current:
            return turns
        note = (
            f" This evaluation's data proposes no replica count; the incident keeps its replica advice at {value} "
            "(stabilized) until it resolves."
        )
        p = localized(
            ev,
            replace(
                held,
                suggested=value,
                action="increase" if value > current else "decrease",
                flag=flag_for(ev.ctx.engine, c.DIAL_REPLICAS, value),
                engine_flag=None,
                summary=held.summary.replace(f"{current} → {held.suggested}", f"{current} → {value}"),
                description=held.description.split(" This evaluation's data proposes no replica count")[0] + note,
                gpus_added=float(max(0, value - current) * gpus_per_replica(ev))
                if value > current
                else held.gpus_added,
                cost=max(value / max(current, 1), 1.0),
            ),
        )
        out = [*turns, _Turn(p, gpus_added(p, ev))]
        out.sort(key=lambda t: t.key)
        return out

    def _refresh(self, ev: Evaluation, inc: _Incident, turns: list[_Turn], withheld: list[dict[str, Any]]) -> None:
        """Re-render the incident from the current evidence; keep id, opened_at and severity; change the
        suggested turn only after :data:`SWITCH_AFTER_EVALUATIONS` strictly better rankings over at least
        :data:`SWITCH_AFTER_SECONDS` (or when it is gone from :data:`SWITCH_AFTER_EVALUATIONS` evaluations in a row:
        one evaluation without it holds it, as its rule may have cleared for one scrape and fired again the next —
        breaker 23's rerun: seq_cap cleared on one scrape at "4 running of a cap of 4, 179 waiting", and the incident
        switched at once to "replicas 2 → 6", where it then stayed two minutes) and its value only by a material step
        two evaluations in a row make."""
        old = inc.rec
        if not turns:
            inc.rec = replace(old, withheld=tuple(withheld) or old.withheld)
            return
        keep = next((t for t in turns if t.p.dial == old.dial), None)
        if keep is None:
            inc.missing_runs += 1
            if inc.missing_runs < SWITCH_AFTER_EVALUATIONS:
                note = (
                    f" This evaluation proposes no {old.dial} turn; it stays suggested unless the next does not either."
                )
                inc.rec = replace(
                    old,
                    description=old.description.split(" This evaluation proposes no ")[0] + note,
                    withheld=tuple(withheld),
                    alternatives=_held_alternatives(old, turns),
                )
                return
        inc.missing_runs = 0
        best = turns[0]
        chosen = best
        if keep is not None and best is not keep:  # best ranks strictly better (keys are distinct)
            if inc.challenger == best.p.dial:
                inc.challenger_runs += 1
            else:
                inc.challenger, inc.challenger_runs, inc.challenger_since = best.p.dial, 1, ev.now
            held_long = ev.now - inc.challenger_since >= SWITCH_AFTER_SECONDS
            chosen = best if inc.challenger_runs >= SWITCH_AFTER_EVALUATIONS and held_long else keep
        if chosen is not keep or keep is best:
            inc.challenger, inc.challenger_runs = None, 0
        p = chosen.p
        switched = p.dial != old.dial
        moved_current = material_change(old.current, p.current)
        moved = material_change(old.suggested, p.suggested) or moved_current
        direction = _numeric_direction(old.suggested, p.suggested)
        if switched or not moved or moved_current or p.dial == c.DIAL_REPLICAS or direction is None:
            inc.value_pending = None  # replica counts have their own stabilizer; a turn made moves at once
        elif inc.value_pending != direction:  # the first evaluation to move it this way: held until the next agrees
            inc.value_pending, moved = direction, False
        else:
            inc.value_pending = None
        held_note = ""
        if not switched and not moved:
            if inc.value_pending is not None:
                held_note = (
                    f" This evaluation alone suggests {p.suggested}; the advice stays at {old.suggested} unless the "
                    "next evaluation moves it the same way."
                )
            elif p.suggested != old.suggested:
                held_note = (
                    f" This evaluation alone suggests {p.suggested}; the advice stays at {old.suggested} until it "
                    f"moves by {MATERIAL_CHANGE_RATIO:.0%} or more."
                )
            p = replace(
                p,
                current=old.current,
                suggested=old.suggested,
                action=old.action,
                # the same value is written as this evaluation writes it (a reload may have changed what the flag
                # names: the scale target, KEDA's bounds); a held other value keeps its announced flag
                flag=p.flag if p.suggested == old.suggested else old.flag,
                summary=p.summary.replace(f"→ {p.suggested}", f"→ {old.suggested}"),
                # the same turn's effect is this evaluation's, as its description is (a walkthrough read "from 31.1
                # to 73.4" in the description beside the opening's 30.2 → 71.4 in predicted_effect); a held other
                # value keeps the effect announced with it
                predicted_effect=p.predicted_effect if p.suggested == old.suggested else old.predicted_effect,
            )
        if chosen is not best:
            held_note += (
                f" At this evaluation {best.p.dial} ranks better ({why_rank(best.p, best.gpus)}); the suggestion "
                f"changes if it still does {SWITCH_AFTER_SECONDS:.0f}s after it first did."
            )
        others = [t for t in turns if t.p.dial != p.dial]
        ranked = [_Turn(p, chosen.gpus), *others]
        inc.replicas_turn = next((t.p for t in ranked if t.p.dial == c.DIAL_REPLICAS), inc.replicas_turn)
        rec = replace(
            old,
            rule=p.rule,
            dial=p.dial,
            action=p.action,
            current=p.current,
            suggested=p.suggested,
            flag=p.flag,
            confidence=p.confidence,
            summary=p.summary,
            description=_described(ranked[0], ranked) + held_note,
            runbook=f"{c.RUNBOOK_BASE}#{p.rule.replace('_', '-')}",
            predicted_effect=p.predicted_effect,
            evidence=p.evidence,
            alternatives=_held_alternatives(old, others),
            withheld=tuple(withheld),
        )
        if switched or moved:
            rec = replace(rec, updated_at=ev.now)
            was = (
                f"was {old.dial} {old.current} → {old.suggested}"
                if switched
                else f"was {old.current} → {old.suggested}"
            )
            self.last_updates.append(Transition("updated", rec, was))
        inc.rec = rec
        _note_replicas(inc)

    # -- statuses, ranks, cooldown -----------------------------------------------------------------------------
    def _set_statuses(
        self,
        ev: Evaluation,
        problem: str,
        contributing: list[tuple[Rule, list[Proposal]]],
        superseded_by: Mapping[str, tuple[str, str]],
        reasons: Mapping[str, str],
        inc: _Incident | None,
    ) -> None:
        """Active rules: ``firing`` (merged into the incident), ``superseded`` or ``withheld`` with the reason."""
        dep = ev.ctx.name
        where = f" (in the {problem} incident {inc.rec.id})" if inc is not None else ""
        for rule, props in contributing:
            reason = reasons.get(rule.id, "")
            if rule.id in superseded_by:
                by, why = superseded_by[rule.id]
                state, text = "superseded", f"{reason}; superseded by {by}: {why}"
            elif props and all(p.withheld is not None for p in props):
                # dials withheld for one reason (a model mismatch withholds them all) named together, the reason once
                held: dict[str, list[str]] = {}
                for p in props:
                    held.setdefault(str(p.withheld), []).append(p.dial)
                state, text = "withheld", f"{reason}; " + "; ".join(f"{', '.join(d)}: {w}" for w, d in held.items())
            elif inc is None:
                state, text = "withheld", f"{reason}; no dial turn to suggest"
            else:
                state, text = "firing", reason + where
            self.statuses[(dep, rule.id)] = RuleStatus(rule.id, dep, state, text)

    def _rank_incidents(self, deployment: str) -> None:
        """``rank`` of each open incident of a deployment: most severe first, then the earliest opened."""
        items = list(self._by_deployment.get(deployment, {}).items())  # (problem, incident)
        items.sort(key=lambda pi: (_SEVERITY_ORDER.get(pi[1].rec.severity, 9), pi[1].rec.opened_at, pi[0]))
        for rank, (_, inc) in enumerate(items):
            if inc.rec.rank != rank:
                inc.rec = replace(inc.rec, rank=rank)

    def _cooldown_left(self, deployment: str, problem: str, now: float) -> float:
        """Seconds before the (deployment, problem) incident may reopen (0 when it may; at most the cooldown: a
        resolve after ``now``, from before a step back of the clock this deployment's evaluations did not see — it
        was removed meanwhile —, counts as one at ``now``)."""
        resolved = self._resolved_at.get((deployment, problem))
        if resolved is None:
            return 0.0
        if resolved > now:
            self._resolved_at[(deployment, problem)] = resolved = now
        return max(0.0, self.cooldown_seconds - (now - resolved))


def _checked_gap(seconds: float | None) -> float | None:
    """``seconds`` when ``None`` or a finite number > 0. Raises ``ValueError`` otherwise."""
    if seconds is not None and (not math.isfinite(seconds) or seconds <= 0):
        raise ValueError(f"max_gap_seconds must be a finite number > 0, got {seconds!r}")
    return seconds


def _note_replicas(inc: _Incident) -> None:
    """Remember the replica count the incident advises (suggested or among its alternatives) and, the first time,
    its direction: within one incident the replica advice never turns around."""
    r = inc.rec
    turns: list[Mapping[str, Any]] = [{"dial": r.dial, "action": r.action, "suggested": r.suggested}]
    turns += list(r.alternatives)
    for turn in turns:
        if turn.get("dial") != c.DIAL_REPLICAS:
            continue
        value, action = turn.get("suggested"), turn.get("action")
        if isinstance(value, int | float) and not isinstance(value, bool):
            inc.replicas_last = int(value)
            if inc.replicas_direction is None and action in ("increase", "decrease"):
                inc.replicas_direction = str(action)
        return


def _alternative(t: _Turn) -> dict[str, Any]:
    """An alternative as the recommendation carries it."""
    p = t.p
    return {
        "rule": p.rule,
        "dial": p.dial,
        "action": p.action,
        "current": p.current,
        "suggested": p.suggested,
        "flag": p.flag,
        "predicted_effect": {k: dict(v) for k, v in p.predicted_effect.items()},
        "confidence": p.confidence,
        "why_rank": why_rank(p, t.gpus),
        "sufficient": p.sufficient,
        **({FLAG_REASON_KEY: p.evidence.get(FLAG_REASON_KEY)} if p.flag is None else {}),
    }


def _held_alternatives(old: Recommendation, others: list[_Turn]) -> tuple[dict[str, Any], ...]:
    """The alternatives of ``others``, each at its last announced value (an alternative of ``old``, or ``old``'s
    suggested turn when the suggestion switched) unless the value moved materially (:func:`material_change`,
    the rule the suggested turn follows) or the current value changed: a max_num_seqs cap jittering 28 ↔ 31
    with the window is one announced value, not a new one each evaluation. Ranking and reasons stay current."""
    before: dict[str, Mapping[str, Any]] = {str(a.get("dial")): a for a in old.alternatives}
    before.setdefault(
        old.dial,
        {
            "current": old.current,
            "suggested": old.suggested,
            "action": old.action,
            "flag": old.flag,
            "predicted_effect": old.predicted_effect,
        },
    )
    out: list[dict[str, Any]] = []
    for t in others:
        alt = _alternative(t)
        prev = before.get(t.p.dial)
        if (
            prev is not None
            and prev.get("current") == alt["current"]
            and not material_change(prev.get("suggested"), alt["suggested"])
        ):
            alt.update(
                action=prev.get("action", alt["action"]),
                suggested=prev.get("suggested"),
                flag=alt["flag"] if prev.get("suggested") == alt["suggested"] else prev.get("flag", alt["flag"]),
                predicted_effect={k: dict(v) for k, v in (prev.get("predicted_effect") or {}).items()},
            )
        out.append(alt)
    return tuple(out)


def _alternative_from_record(r: Recommendation) -> dict[str, Any]:
    """A previous-release record folded into the incident that restores its problem."""
    return {
        "rule": r.rule,
        "dial": r.dial,
        "action": r.action,
        "current": r.current,
        "suggested": r.suggested,
        "flag": r.flag,
        "predicted_effect": {k: dict(v) for k, v in r.predicted_effect.items()},
        "confidence": r.confidence,
        "why_rank": f"restored from the previous release (opened as {r.id}); re-ranked at the next evaluation",
    }


def _described(best: _Turn, turns: list[_Turn]) -> str:
    """The suggested turn's description plus why it ranks where it does and how many turns there are."""
    text = best.p.description
    text += f" Suggested of {len(turns)} turns: {why_rank(best.p, best.gpus)}." if len(turns) > 1 else ""
    return text
