"""What a rule module sees and what it returns.

A rule is pure: it reads an :class:`Evaluation` (one deployment's window of telemetry, its configuration
and its capacity pass, at time ``now``) and answers two questions:

* :meth:`Rule.condition` — does the state it recognizes hold (``True``), clearly not hold (``False``),
  or can it not tell (``None``, with the reason)? Conditions have a *fire* side and a *clear* side so
  that a hysteresis band between them keeps a recommendation from flapping.
* :meth:`Rule.propose` — the dial turns that address the state, each a :class:`Proposal` with the
  predicted effect from re-running the capacity pass with that dial turned.

Timing (for-durations, resolving, ids) is not the rule's business: :mod:`advisor.rules.lifecycle`
does it for every rule alike, as Prometheus's rule manager does for alerting rules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from advisor.capacity.calibration import LatencyFit
from advisor.capacity.hardware import GPUSpec
from advisor.capacity.kv import CapacityInputs, CapacityResult
from advisor.capacity.model_label import ModelLabelMismatch
from advisor.capacity.perf import PerfAssumptions
from advisor.telemetry import (
    EngineTime,
    FractionBelow,
    GoodputEstimate,
    LifetimePrefill,
    SpeculationWindow,
    WindowStats,
)


@dataclass(frozen=True, slots=True)
class SLOTargets:
    """TTFT and TPOT targets in seconds and the fraction of requests that must meet both."""

    ttft_seconds: float
    tpot_seconds: float
    target_ratio: float


@dataclass(frozen=True, slots=True)
class DeploymentContext:
    """A deployment as the rules need it: engine, SLO, capacity inputs and result, replica count.

    ``perf_assumptions``: the efficiency factors of the deployment's latency prior, which the rules' latency model
    and the online calibration start from (:class:`advisor.capacity.calibration.LatencyModel`); ``None`` (the
    daemon's) means the published calibration for the engine and GPU
    (:func:`advisor.capacity.perf.assumptions_for`). Setting it pins the prior, e.g. to the plain roofline of
    :data:`advisor.capacity.perf.DEFAULT_ASSUMPTIONS` whose figures can be checked by hand.

    ``platform``: where the engine runs (:data:`advisor.platforms.PLATFORMS`); every proposal's flag is restated in
    its terms (:func:`advisor.rules.lifecycle.localized`).

    ``instance_type``: the instance catalog's name of what each replica runs on (:mod:`advisor.capacity.instances`,
    config ``instance_type``), whose on-demand price the ``host_or_buy`` rule reads; ``None``: not configured (the
    price is unknown).

    ``model`` / ``served_model``: the config's ``model`` and ``served_model`` as written, which the engine's own
    model label is compared with (:func:`advisor.capacity.model_label.compare_model_label`); ``None``: not
    compared.

    ``max_num_seqs_stated``: the config states the sequence cap (``max_num_seqs``/``parallel``); otherwise
    ``inputs.max_num_seqs`` is the engine's modelled default (vLLM's, by version and GPU) or an assumption (256 for
    SGLang, TGI and TensorRT-LLM, whose own caps are derived from their pools), which ``seq_cap`` does not read as the
    cap that queues requests.

    ``scaled_by_keda``: set when KEDA sets the replica count (a ``platform: kubernetes`` deployment with an
    ``autoscaling:`` block); ``None``: replicas are scaled by hand.
    """

    name: str
    engine: str
    slo: SLOTargets
    inputs: CapacityInputs
    capacity: CapacityResult
    gpu: GPUSpec | None
    replicas: int
    speculative_decoding: bool = False
    perf_assumptions: PerfAssumptions | None = None
    platform: str = "kubernetes"
    instance_type: str | None = None
    model: str | None = None
    served_model: str | None = None
    scaled_by_keda: KedaScaling | None = None
    max_num_seqs_stated: bool = False


@dataclass(frozen=True, slots=True)
class KedaScaling:
    """A Kubernetes deployment whose replica count KEDA sets from ``advisor_desired_replicas`` (the config's
    ``autoscaling:`` block, :class:`advisor.config.AutoscalingConfig`): ``target`` (``scaleTargetRef.name``),
    ``namespace`` (``None``: kubectl's), ``min_replicas``/``max_replicas`` (``minReplicaCount``/``maxReplicaCount``).
    A replica turn then says what sets the count (:func:`advisor.platforms.keda_replicas_text`)."""

    target: str
    namespace: str | None
    min_replicas: int
    max_replicas: int


class LazyFloat:
    """A number computed when first asked (``lazy()``) and remembered: for an :class:`Evaluation` figure that walks
    the whole window and only some rules read. Two are equal when their values are (an evaluation compares by its
    figures, not by how they are computed)."""

    __slots__ = ("_compute", "_done", "_value")

    def __init__(self, compute: Callable[[], float | None]) -> None:
        """``compute``: returns the value (``None``: unknown); called at most once."""
        self._compute = compute
        self._value: float | None = None
        self._done = False

    def __call__(self) -> float | None:
        if not self._done:
            self._value = self._compute()
            self._done = True
        return self._value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LazyFloat) and self() == other()

    def __hash__(self) -> int:
        return hash(self())

    def __repr__(self) -> str:
        return f"LazyFloat({self()!r})"


@dataclass(frozen=True, slots=True)
class Evaluation:
    """One deployment at one evaluation.

    Attributes:
        ctx: configuration and capacity pass.
        state: ``fresh``, ``stale`` or ``unavailable`` (rules only fire on ``fresh``).
        stats: the window's telemetry combined over replicas that answered (``None`` when none did).
        replicas_up: replicas whose last scrape succeeded.
        kv_capacity_tokens: the pool per replica in tokens — the engine's own report when known, else the
            capacity pass's prediction.
        kv_capacity_source: ``engine`` or ``model``.
        kv_capacity_tokens_smallest: the smallest pool one answering replica's engine reports (tokens), ``None``
            when none reports one: where replicas differ, a request that fits the mean pool may not fit every one.
        ttft_ok / tpot_ok: fraction of the window's requests within each target.
        goodput: the joint estimate from the two fractions.
        goodput_tokens_per_second: generation tokens/s × goodput ratio.
        samples: scrapes that fell in the window (over all replicas), for confidence.
        engine_config: the engines' self-reported configuration (vLLM ``cache_config_info`` labels), every label
            any answering replica reports; one they report differently holds
            :data:`advisor.conventions.ENGINE_CONFIG_MIXED`.
        capacity_model_error_ratio: the capacity pass's pool ÷ the engine's reported pool − 1, the pass on the
            advisor's config (the gauge ``advisor_capacity_model_error_ratio``).
        running_model_error_ratio: the same miss of the pass on what the engine reports running with (``ctx``
            after ``config_drift``): equal to ``capacity_model_error_ratio`` when nothing drifted. Every figure
            printed for "the pass on the engine's settings vs the engine's pool" (``model_drift``'s reason, the
            predicted effects' "The capacity pass predicts …" note) is this one, computed once in
            :func:`advisor.evaluate.evaluate_deployment`.
        pool_spread: ``(target, tokens, target, tokens)`` of the smallest and the largest KV pool an engine behind
            the answering targets reports (targets redacted), with two or more pools reported; ``None`` otherwise.
            Replicas of one deployment run one model with one set of flags: pools far apart mean one runs with other
            settings (:func:`advisor.rules.common.pools_disagree`).
        model_mismatch: the engine's own model label names another model than the config's ``model``
            (:func:`advisor.capacity.model_label.compare_model_label`, definite only: an alias the advisor cannot
            tell apart is ``None``). The capacity pass then sizes the wrong model: ``model_drift`` names both, and
            every prediction computed from the pass is withheld (:func:`advisor.rules.common.model_quality`).
        capacity_model_error_bound: how far (``|capacity_model_error_ratio|``) the capacity pass may miss the
            engine's reported pool before predicted effects lose confidence (config
            ``data_quality.capacity_model_error_bound``; 0.15 by default, the config's default).
        expected_samples: scrapes the window would hold at the configured interval (``once``: the scrapes it
            took, 2 per target).
        now: unix seconds.
        kv_rank_capacity_tokens: each data-parallel rank's own KV pool (tokens) of one replica, when the
            engine reports ranks; empty otherwise. One request lives on one rank, so whether a max-length
            request fits is judged against the largest of these, never their sum.
        kv_rank_usage_ratio_max: the fullest data-parallel rank's KV usage (0–1) at the newest scrape, over the
            answering replicas; ``None`` when no engine reports ranks. One request lives on one rank, so a rank
            whose pool is full is not spare capacity however empty the others are (the summed usage is their
            capacity-weighted mean).
        rank_requests_running_max: the most requests one data-parallel rank runs at the newest scrape; ``None``
            when no engine reports ranks.
        pool_usage: pools other than the KV pool (``swa``, ``mamba``, ``slots``) → usage 0–1 at the newest
            scrape, the highest over answering replicas (``None`` unknown). llama.cpp slots without a deferred
            request are ``busy ÷ max_num_seqs`` (the configured ``--parallel``).
        queues: requests waiting, by queue: ``waiting_capacity`` / ``waiting_deferred`` (vLLM
            ``num_requests_waiting_by_reason``) and the disaggregation queues (``decode_prealloc`` …), summed
            over answering replicas; only those exposed.
        waiting_capacity_min: requests waiting for capacity (vLLM ``waiting_capacity``) at the window's emptiest
            scrape, summed over the answering replicas' own minima: at least that many waited at every scrape of
            the window. ``None`` when a replica does not split its queue by reason.
        kv_usage_moved: some answering replica's own KV usage gauge changed between two of its samples in the window
            (its scheduler allocated or freed blocks: a working engine, whatever its counters say); ``False`` when
            every replica's stood still, ``None`` when none has two known readings. The window's min and max of
            the summed usage cannot say this with several replicas: their gap is between replicas, not in time.
        stuck_ranks: ``"<target> rank <r>"`` for each data-parallel rank that held waiting requests with none running
            and an empty pool at every one of at least two scrapes of the window while another rank of its target
            ran requests (:func:`advisor.evaluate._stuck_ranks`).
        kv_cache_hybrid: an answering engine reports several KV-cache groups (hybrid model).
        ranks_excluded: ``"<rank>: <why>"`` for each data-parallel rank left out of the aggregates.
        rank_coverage: fraction of reporting ranks that were used (1.0 without ranks); scales confidence.
        duplicate_series: samples the answering targets' newest pages repeated (a series already on the page; the
            first sample kept, as Prometheus keeps it). A page that contradicts itself lowers confidence
            (:func:`advisor.rules.common.confidence`).
        config_drift: the capacity-pass dials the engine reports running with a value other than the advisor's
            config: field → ``(configured, reported)`` (``{"gpu_memory_utilization": (0.9, 0.5)}``). ``ctx`` then
            holds the reported values (and the capacity pass re-run on them), so every turn starts from what runs;
            ``capacity_model_error_ratio`` stays the configured pass's miss (the drift rule's reading).
        config_unmodelled: the capacity-pass dials whose engine-reported value cannot be used, field → why (the
            replicas disagree, or the capacity pass refuses the value): the dial's current value is unknown, so no
            rule turns it and ``model_drift`` proposes no config value for it.
        stalled_seconds: the longest time, ending at a target's newest sample, over which that target's engine
            held requests (running or waiting) while none of its generation-token, prompt-token and
            finished-request counters moved (:func:`advisor.evaluate.stall_span`); 0.0 when every engine moves.
        stalled_intervals: ``stalled_seconds`` in scrape intervals (rounded down, with a quarter interval of
            jitter allowed); 0 when nothing stalls.
        stalled_targets: each stalled target (URL with credentials redacted) → its still intervals (≥ 1 only).
        stalled_requests_running / stalled_requests_waiting: requests running / waiting at the newest sample of
            the stalled targets, summed (``None`` when no target stalls or the engine does not say).
        counter_deltas: increase over the window of ``generation_tokens``, ``prompt_tokens`` and
            ``requests_finished``, summed over answering targets (``None`` unknown); what moved and what did not.
        requests_running_max: the window's peak of running requests, summed over answering targets (each
            target's own peak: an upper bound on the deployment's); ``None`` unknown.
        requests_running_busiest: the most running requests one answering target held at one of the window's scrapes
            (all its data-parallel ranks together); ``None`` unknown. An upper bound on any one engine's batch.
        requests_running_dispersion: how unsteady the load was: the largest over targets of the index of
            dispersion (variance ÷ mean) of running requests across the window's samples. A steady Poisson load
            gives about 1 (M/G/∞ occupancy is Poisson); a lull after a busy spell gives far more (40 → 2: 17).
            ``None`` with fewer than two samples; 0.0 when nothing ran.
        replica_ages_seconds: (newest, oldest): seconds the most and the least recently started answering
            engines have run (each its newest sample's time less its ``process_start_time_seconds``); ``None``
            where no engine states its start. A young replica beside old ones means the fleet is changing (a
            rollout's surge pod, a scale-up, a restart).
        requests_running_by_target: (engine, running requests) for each engine that takes its own requests: a
            target's mean over the window, or each data-parallel rank's at its newest sample
            (:func:`advisor.evaluate.running_by_engine`); () unknown. Far apart (one busy, another idle) they mean
            the router, not the fleet's size, sets each engine's load (:func:`advisor.rules.common.uneven_load`).
        requests_running_by_target_early: each target's mean over the window's older half (the same targets);
            uneven there, the window's rates still carry the router's doing after it changed.
        requests_running_mean: the window's mean of running requests, summed over answering targets (each target's
            mean of its samples in the window); ``None`` unknown. The batch the latency calibration observes.
        engine_time: the window's time counters, for engines without latency histograms (llama.cpp: seconds its
            sequences spent generating, per generated token, and seconds spent on prompts;
            :class:`advisor.telemetry.EngineTime`), summed over answering targets; ``None`` when the engine does not
            count them.
        speculation: the window's speculative-decoding counters summed over answering targets
            (:class:`advisor.telemetry.SpeculationWindow`: drafts, draft and accepted tokens, accepted by position);
            ``None`` when no engine counts drafts. Drafts that moved say speculation runs, whatever the config says.
        lifetime_tokens_per_finished_request: mean prompt + generation tokens of a request since the engines
            started (their newest cumulative values): from the per-request length histograms where every engine
            exposes them (vLLM, TGI), else the token counters ÷ finished requests where the engines count tokens for
            exactly the requests they count as finished (SGLang, TensorRT-LLM); ``None`` otherwise, or when fewer
            than 20 are counted. It says how long the traffic is when the window finished nothing (a thrash may
            finish nothing for minutes).
        lifetime_prefill: the engines' mean TTFT, queue time and prompt length since they started
            (:func:`advisor.telemetry.lifetime_prefill`, at least 20 requests counted); ``None`` otherwise. How the
            requests reached their first token when the window finished too few to say (a single user's long turns).
        lifetime_prompt_per_generated_token: prompt tokens the engines read per token they generated since they
            started (:func:`advisor.evaluate.lifetime_prompt_per_generated_token`: the token counters summed over the
            answering targets); ``None`` unknown. The workload's mix of reading and writing.
        tpot_is_itl: an answering target's TPOT histogram is its inter-token latency (``EngineSnapshot.tpot_is_itl``),
            which on some engines observes one gap per step, not per token
            (:func:`advisor.engines.catalog.itl_per_token`).
        window_generation_tokens_per_request: returns the mean generated tokens of the requests that finished in the
            window, from the engines' per-request generation length histograms (vLLM, TGI), ``None`` where a target
            lacks them or fewer than 5 finished (:func:`advisor.evaluate._window_generation_tokens`); not the
            generation counter ÷ completions, which counts the running requests' tokens too.
        window_tokens_per_request_from_histograms: returns the mean prompt + generation tokens of a request over the
            window from the engines' per-request length histograms (vLLM, TGI: each histogram's sum ÷ count, so a
            mean over the requests it observed), ``None`` where a target lacks them or no request was observed;
            computed when first asked and remembered (it walks every scrape of the window, and only a context cap's
            check reads it); ``None``: not available.
        longest_sequence_tokens: the longest sequence an answering engine has held since it started (llama.cpp
            ``n_tokens_max``), the largest over targets; ``None`` unknown. A request that long was served.
        requests_paused_max: requests the engines paused (TensorRT-LLM ``MAX_UTILIZATION``:
            ``EngineSnapshot.requests_paused``), the largest reading of the window per target, summed over targets;
            ``None`` when no target exposes it. Above 0: the engine evicts running requests for KV.
        latency: the deployment's latency model, calibrated online on its TPOT/TTFT
            (:class:`advisor.capacity.calibration.LatencyFit`, set by
            :class:`advisor.online_calibration.OnlineCalibration`);
            ``None``: not calibrated here (a lone evaluation), the rules use the published prior.
    """

    ctx: DeploymentContext
    state: str
    stats: WindowStats | None
    replicas_up: int
    kv_capacity_tokens: float | None
    kv_capacity_source: str
    ttft_ok: FractionBelow | None
    tpot_ok: FractionBelow | None
    goodput: GoodputEstimate
    goodput_tokens_per_second: float | None
    samples: int
    expected_samples: int
    now: float
    engine_config: Mapping[str, str] = field(default_factory=dict)
    config_drift: Mapping[str, tuple[Any, Any]] = field(default_factory=dict)
    config_unmodelled: Mapping[str, str] = field(default_factory=dict)
    capacity_model_error_ratio: float | None = None
    capacity_model_error_bound: float = 0.15
    running_model_error_ratio: float | None = None
    model_mismatch: ModelLabelMismatch | None = None
    pool_spread: tuple[str, float, str, float] | None = None
    kv_rank_capacity_tokens: tuple[float, ...] = ()
    kv_rank_usage_ratio_max: float | None = None
    rank_requests_running_max: float | None = None
    pool_usage: Mapping[str, float | None] = field(default_factory=dict)
    queues: Mapping[str, float] = field(default_factory=dict)
    waiting_capacity_min: float | None = None
    kv_usage_moved: bool | None = None
    stuck_ranks: tuple[str, ...] = ()
    kv_cache_hybrid: bool = False
    ranks_excluded: tuple[str, ...] = ()
    rank_coverage: float = 1.0
    duplicate_series: int = 0
    stalled_seconds: float = 0.0
    stalled_intervals: int = 0
    stalled_targets: Mapping[str, int] = field(default_factory=dict)
    stalled_requests_running: float | None = None
    stalled_requests_waiting: float | None = None
    counter_deltas: Mapping[str, float | None] = field(default_factory=dict)
    requests_running_max: float | None = None
    requests_running_busiest: float | None = None
    requests_running_dispersion: float | None = None
    requests_running_mean: float | None = None
    replica_ages_seconds: tuple[float, float] | None = None
    requests_running_by_target: tuple[tuple[str, float], ...] = ()
    requests_running_by_target_early: tuple[tuple[str, float], ...] = ()
    latency: LatencyFit | None = None
    engine_time: EngineTime | None = None
    speculation: SpeculationWindow | None = None
    longest_sequence_tokens: float | None = None
    requests_paused_max: float | None = None
    lifetime_tokens_per_finished_request: float | None = None
    lifetime_prefill: LifetimePrefill | None = None
    lifetime_prompt_per_generated_token: float | None = None
    tpot_is_itl: bool = False
    window_tokens_per_request_from_histograms: LazyFloat | None = None
    window_generation_tokens_per_request: LazyFloat | None = None
    kv_capacity_tokens_smallest: float | None = None

    def speculation_runs(self) -> bool:
        """Whether the engine runs speculative decoding: the config says so (``speculative_decoding``, or a
        ``speculative_config`` the capacity pass reads), or the engine's draft counter moved in the window (a draft
        is proposed only while speculation runs, whatever the config says), or its counters are on a page of an
        engine that registers them only when speculation is configured (:attr:`SpeculationWindow.configured`)."""
        measured = self.speculation is not None and self.speculation.runs
        return self.ctx.speculative_decoding or self.ctx.inputs.speculative is not None or measured

    def coverage(self) -> float:
        """Fraction of the window's expected scrapes that arrived, 0–1."""
        if self.expected_samples <= 0:
            return 0.0
        return min(1.0, self.samples / self.expected_samples)


@dataclass(frozen=True, slots=True)
class Condition:
    """A rule's reading of the state: ``holds`` is True, False, or None when the rule cannot tell."""

    holds: bool | None
    reason: str
    evidence: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Proposal:
    """One dial turn a rule proposes.

    ``predicted_effect`` maps a quantity (``kv_cache_tokens``, ``concurrency_ceiling``, ``replicas``,
    ``queue_wait_seconds`` …) to ``{"before": x, "after": y}``.

    Ranking across every rule of a deployment (:func:`advisor.rules.lifecycle.rank_key`): proposals that
    close the whole gap (``sufficient``) come first, cheapest ``cost`` first (GPUs after ÷ before, times a
    quality penalty for lossy turns); then the rest by ``score`` (predicted gain per unit of cost).
    A ``complementary`` proposal goes with the others rather than instead of them (capping max-num-seqs at
    the knee beside a pool turn), so it opens even past the per-rule limit of alternatives.

    ``withheld``: the reason, in numbers, that the rule's own evidence contradicts this turn (a context cap when
    the observed requests are short); a withheld proposal is never suggested and is listed under the incident's
    ``withheld`` with that reason. ``gpus_added``: GPUs the turn adds to the deployment (0 for turns that add
    none: utilization, KV dtype, context cap, quantization; TP 1 → 2 on 3 replicas adds 3), which decides the
    ranking's first split (turns that add no GPU rank first).

    ``flag``: the change as the deployment's platform takes it (:func:`advisor.platforms.platform_flag`), or
    ``None`` when the platform does not offer the dial (the reason is in ``evidence``'s
    :data:`advisor.platforms.FLAG_REASON_KEY`). ``engine_flag``: the engine's own flag the rule wrote, kept once
    ``flag`` is restated for a platform (``None`` until then): the ranking counts changes on it, so a turn ranks
    the same on every platform.
    """

    rule: str
    dial: str
    action: str
    current: Any
    suggested: Any
    flag: str | None
    severity: str
    confidence: float
    summary: str
    description: str
    predicted_effect: Mapping[str, Mapping[str, Any]]
    evidence: Mapping[str, Any]
    score: float
    sufficient: bool = True
    cost: float = 1.0
    complementary: bool = False
    withheld: str | None = None
    gpus_added: float = 0.0
    engine_flag: str | None = None


@dataclass(frozen=True, slots=True)
class Withheld:
    """A turn a rule considered and did not propose because its own evidence contradicts it (issue 13).

    ``reason`` names the measurement that falsified the diagnosis, in numbers (``observed prompts average 1,900
    tokens, 1.4% of max-model-len 131,072: a context cap frees nothing``).
    """

    rule: str
    dial: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        """``{"rule", "dial", "reason"}``."""
        return {"rule": self.rule, "dial": self.dial, "reason": self.reason}


class Rule(Protocol):
    """The rule-module protocol.

    ``id`` is stable. ``supersedes`` names rules whose advice this rule's diagnosis replaces: while this
    rule fires, they open nothing (a pool smaller than one request is not cured by more replicas). Rules
    are evaluated in order, so a superseding rule comes before the rules it supersedes.

    Optional attributes (read with :func:`rule_problem` and :func:`rule_states`, so plugins may omit them):
    ``problem`` — the problem the rule diagnoses (``saturation``); the proposals of every rule of one problem
    merge into one incident per deployment (default: the rule's own id); ``evaluated_in`` — the data states the
    rule runs in (default ``("fresh",)``; the ``stalled`` rule also runs on ``stale`` data); ``resolve_at_once`` — true
    for a rule whose advice must go the evaluation it stops being true, without ``rules.resolve_for``'s hold (advice
    to take capacity away: :func:`advisor.rules.lifecycle.resolve_hold`).
    """

    id: str
    supersedes: tuple[str, ...]

    def for_seconds(self) -> float:
        """Seconds the fire condition must hold continuously before recommendations open."""
        ...

    def fires(self, ev: Evaluation) -> Condition:
        """The fire side: the recognized state holds."""
        ...

    def clears(self, ev: Evaluation) -> Condition:
        """The clear side: the state is over (stricter than ``not fires`` — the hysteresis band)."""
        ...

    def propose(self, ev: Evaluation) -> list[Proposal]:
        """Dial turns for the state, best first."""
        ...


def rule_problem(rule: Rule) -> str:
    """The problem a rule diagnoses: its ``problem`` attribute, else its id (one incident per rule)."""
    problem = getattr(rule, "problem", None)
    return problem if isinstance(problem, str) and problem else rule.id


def rule_states(rule: Rule) -> tuple[str, ...]:
    """The data states a rule is evaluated in: its ``evaluated_in`` attribute, else ``("fresh",)``."""
    states = getattr(rule, "evaluated_in", None)
    return tuple(states) if states else ("fresh",)
