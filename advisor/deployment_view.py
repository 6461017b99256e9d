"""The typed view of one deployment after one evaluation: what the exporter, the status page and the API read.

:func:`advisor.evaluate.evaluate_deployment` builds one :class:`DeploymentView` per deployment and cycle; the
``snapshot`` object of ``once --json`` and ``/api/v1/deployments`` is derived from it (:meth:`DeploymentView.as_json`,
the same keys and values the untyped dict had). Readers use the typed fields; the view is also a read-only
``Mapping`` of that JSON, for callers that still read it by key. Pure: no I/O.

Units: tokens, requests, seconds, ratios 0–1; ``None`` = unknown, never 0.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from advisor.domain import PoolReading, RankValues

__all__ = ["DeploymentView", "EngineView"]


@dataclass(frozen=True, slots=True)
class EngineView:
    """The engine-reported part of a deployment's view: the newest gauges and counters summed over the replicas
    that answered, KV usage capacity-weighted, the window's TTFT/TPOT summaries. Needs no configuration
    (``inspect`` shows it alone).

    Attributes:
        state_reason: why the deployment is in its data-quality state.
        model: the served model name of the first answering replica (None: no model label, or none answered).
        replicas: replicas configured (or found); replicas_up: engines that answered.
        requests_running, requests_waiting: requests, summed.
        preemptions_total, prompt_tokens_total, generation_tokens_total: counters, summed.
        kv_cache_usage_ratio: 0–1, capacity-weighted over replicas.
        kv_cache_capacity_tokens: the engines' reported pools, tokens, summed.
        ttft_seconds, tpot_seconds: the window's histogram summary (``count``, ``sum``, ``p50``, ``p90``,
            ``p99`` seconds, ``source`` and an optional ``note``), or None when the engine has none.
        window_seconds: the window the rates span, seconds: newest − oldest scrape in the evaluation window
            (:attr:`~advisor.telemetry.WindowStats.covered_seconds`), so rate × window_seconds is the counter's
            increase — ~2 s for ``once --interval 2`` (its evaluation window, ~4 s, adds the scrapes' time and one
            interval), 285 s for the daemon's 300 s window at 15 s scrapes; the evaluation window itself when it
            holds one scrape (no rates then). The span the rules' readings state ("over the last 2s").
        generation_tokens_per_second, prompt_tokens_per_second, preemptions_per_second: rates over the window.
        counter_resets: engine restarts seen in the window.
        ranks: per data-parallel rank values (at most ``MAX_RANKS_SHOWN``); ranks_truncated: how many more
            (None when none were cut).
        kv_cache_capacity_tokens_largest_rank: the largest single rank's pool, tokens.
        pools: pools other than the KV pool (SGLang ``swa``/``mamba``, llama.cpp ``slots``), merged over replicas.
        requests_waiting_by_reason, disaggregation_queues: requests waiting, by reason and by queue, summed.
        kv_cache_hybrid: the engine runs a hybrid KV cache (None unknown).
        ranks_excluded: ranks left out of the aggregates, and why.
        missing: metrics the engines did not expose, sorted.
    """

    state_reason: str
    model: str | None
    replicas: int
    replicas_up: int
    requests_running: float | None
    requests_waiting: float | None
    preemptions_total: float | None
    prompt_tokens_total: float | None
    generation_tokens_total: float | None
    kv_cache_usage_ratio: float | None
    kv_cache_capacity_tokens: float | None
    ttft_seconds: Mapping[str, Any] | None
    tpot_seconds: Mapping[str, Any] | None
    window_seconds: float | None
    generation_tokens_per_second: float | None
    prompt_tokens_per_second: float | None
    preemptions_per_second: float | None
    counter_resets: int | None
    ranks: tuple[RankValues, ...]
    kv_cache_capacity_tokens_largest_rank: float | None
    pools: tuple[PoolReading, ...]
    requests_waiting_by_reason: Mapping[str, float]
    disaggregation_queues: Mapping[str, float]
    kv_cache_hybrid: bool | None
    ranks_excluded: tuple[str, ...]
    missing: tuple[str, ...]
    ranks_truncated: int | None = None

    def as_json(self) -> dict[str, Any]:
        """The engine part of the ``snapshot`` JSON object (``ranks_truncated`` only when ranks were cut)."""
        view: dict[str, Any] = {
            "state_reason": self.state_reason,
            "model": self.model,
            "replicas": self.replicas,
            "replicas_up": self.replicas_up,
            "requests_running": self.requests_running,
            "requests_waiting": self.requests_waiting,
            "preemptions_total": self.preemptions_total,
            "prompt_tokens_total": self.prompt_tokens_total,
            "generation_tokens_total": self.generation_tokens_total,
            "kv_cache_usage_ratio": self.kv_cache_usage_ratio,
            "kv_cache_capacity_tokens": self.kv_cache_capacity_tokens,
            "ttft_seconds": None if self.ttft_seconds is None else dict(self.ttft_seconds),
            "tpot_seconds": None if self.tpot_seconds is None else dict(self.tpot_seconds),
            "window_seconds": self.window_seconds,
            "generation_tokens_per_second": self.generation_tokens_per_second,
            "prompt_tokens_per_second": self.prompt_tokens_per_second,
            "preemptions_per_second": self.preemptions_per_second,
            "counter_resets": self.counter_resets,
            "ranks": [r.as_dict() for r in self.ranks],
            "kv_cache_capacity_tokens_largest_rank": self.kv_cache_capacity_tokens_largest_rank,
            "pools": [p.as_dict() for p in self.pools],
            "requests_waiting_by_reason": dict(self.requests_waiting_by_reason),
            "disaggregation_queues": dict(self.disaggregation_queues),
            "kv_cache_hybrid": self.kv_cache_hybrid,
            "ranks_excluded": list(self.ranks_excluded),
            "missing": list(self.missing),
        }
        if self.ranks_truncated is not None:
            view["ranks_truncated"] = self.ranks_truncated
        return view


@dataclass(frozen=True, slots=True)
class DeploymentView(Mapping[str, Any]):
    """One deployment after one evaluation: the engines' report and the advisor's reading of it.

    A read-only ``Mapping`` of :meth:`as_json`, so ``view["requests_running"]`` still reads the JSON; new readers
    use the fields. The JSON is derived once, when first read (the daemon builds a view per deployment per cycle and
    its exporter reads the fields: most views are never read as JSON); a key whose JSON value is one of this view's
    own fields (:data:`_OWN_KEYS`, e.g. ``capacity_model_error_ratio``) is answered from the field without it.

    Attributes:
        reported: what the engines report (:class:`EngineView`).
        kv_cache_capacity_tokens_predicted: the capacity pass's pool per replica, tokens.
        capacity_model_error_ratio: the capacity pass's pool ÷ the engine's reported pool − 1 (None: no report).
        goodput_ratio: the joint estimate of requests meeting both targets, 0–1; goodput_ratio_bounds its
            (lower, upper) Fréchet bounds.
        goodput_tokens_per_second: generation tokens/s × goodput ratio.
        ttft_within_target_ratio, tpot_within_target_ratio: fraction of the window's requests within each
            target, 0–1.
        max_model_len: the context the deployment serves, tokens.
        max_model_len_ceiling_requests: requests of ``max_model_len`` the answering replicas hold at once
            (whole requests per rank, summed), or None when a pool is unknown.
        pool_usage: ``kv`` and the engine's other pools → usage 0–1 (None unknown).
        ttft_target_bounds_used, tpot_target_bounds_used: the histogram bucket bounds the fraction was read
            between when the target is not a bucket bound (None when it is exact).
    """

    reported: EngineView
    kv_cache_capacity_tokens_predicted: int
    capacity_model_error_ratio: float | None
    goodput_ratio: float | None
    goodput_ratio_bounds: tuple[float | None, float | None]
    goodput_tokens_per_second: float | None
    ttft_within_target_ratio: float | None
    tpot_within_target_ratio: float | None
    max_model_len: int
    max_model_len_ceiling_requests: float | None
    pool_usage: Mapping[str, float | None]
    ttft_target_bounds_used: tuple[float, ...] | None = None
    tpot_target_bounds_used: tuple[float, ...] | None = None
    _json: dict[str, Any] | None = field(init=False, default=None, repr=False, compare=False)

    def _view(self) -> dict[str, Any]:
        """The JSON, built on the first call (an immutable view's JSON never changes; two threads racing build
        equal dicts and either is kept)."""
        out = self._json
        if out is None:
            out = self._build_json()
            object.__setattr__(self, "_json", out)
        return out

    def _build_json(self) -> dict[str, Any]:
        out = self.reported.as_json()
        out.update(
            {
                "kv_cache_capacity_tokens_predicted": self.kv_cache_capacity_tokens_predicted,
                "capacity_model_error_ratio": self.capacity_model_error_ratio,
                "goodput_ratio": self.goodput_ratio,
                "goodput_ratio_bounds": list(self.goodput_ratio_bounds),
                "goodput_tokens_per_second": self.goodput_tokens_per_second,
                "ttft_within_target_ratio": self.ttft_within_target_ratio,
                "tpot_within_target_ratio": self.tpot_within_target_ratio,
                "max_model_len": self.max_model_len,
                "max_model_len_ceiling_requests": self.max_model_len_ceiling_requests,
                "pool_usage": dict(self.pool_usage),
            }
        )
        if self.ttft_target_bounds_used is not None:
            out["ttft_target_bounds_used"] = list(self.ttft_target_bounds_used)
        if self.tpot_target_bounds_used is not None:
            out["tpot_target_bounds_used"] = list(self.tpot_target_bounds_used)
        return out

    def as_json(self) -> dict[str, Any]:
        """The ``snapshot`` object of ``once --json`` and ``/api/v1/deployments`` (a fresh copy; nested
        values are shared, do not mutate them)."""
        return dict(self._view())

    def __getitem__(self, key: str) -> Any:
        if key in _OWN_KEYS:
            return getattr(self, key)  # the JSON holds this field as it is (_build_json)
        return self._view()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view())

    def __len__(self) -> int:
        return len(self._view())


_OWN_KEYS: frozenset[str] = frozenset(
    {
        "kv_cache_capacity_tokens_predicted",
        "capacity_model_error_ratio",
        "goodput_ratio",
        "goodput_tokens_per_second",
        "ttft_within_target_ratio",
        "tpot_within_target_ratio",
        "max_model_len",
        "max_model_len_ceiling_requests",
    }
)
"""Keys of :meth:`DeploymentView.as_json` whose value is the :class:`DeploymentView` field of that name, unchanged
(no :class:`EngineView` key shares a name with them): :meth:`DeploymentView.__getitem__` reads them off the field."""
