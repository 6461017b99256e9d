"""The dial search behind ``plan --search``: the cheapest deployments that meet a latency SLO.

Given a model, a workload (:class:`~advisor.capacity.queueing.Workload`) and an SLO
(:class:`~advisor.capacity.queueing.SLO`), every combination of the dials in :class:`SearchSpace` is put
through the capacity pass (:mod:`advisor.capacity.kv`), the roofline (:mod:`advisor.capacity.perf`) and the
service model (:mod:`advisor.capacity.queueing`), on every priced instance type of the chosen cloud
(:mod:`advisor.capacity.instances`):

1. **Replica** = (GPU, TP degree, weight precision, KV dtype, max-model-len, max-num-seqs). The capacity pass
   gives its KV pool; the batch it can run is ``min(max_num_seqs, KV ceiling at prompt + output tokens)``
   (a sequence holds its whole context by its last token, so this cap never preempts); the roofline gives
   the decode step at the mean context ``prompt + output / 2`` and the prefill time of a typical prompt.
   Rejected here: weights that do not fit, a pool that cannot hold one worst-case request, a GPU without a
   published bandwidth or tensor rate (A10G), TP not dividing the heads.
2. **Replicas** = the fewest meeting the goodput target (:func:`~advisor.capacity.queueing.replicas_for_slo`).
   Rejected here: one idle replica already misses the SLO (its prefill exceeds the TTFT target, or its
   batch-1 TPOT the TPOT target), or more than ``max_replicas`` would be needed.
3. **Instances**: an instance of ``n`` GPUs hosts ``n // TP`` replicas; ``ceil(replicas ÷ (n // TP))``
   instances at the on-demand price. Cost per million goodput tokens = hourly cost ÷ (3600 × goodput
   tokens/s) × 10⁶.

Replica configurations are evaluated cheapest-lower-bound first (the lower bound: the replicas needed for
stability alone, on the cheapest instance that holds one), and skipped once the bound exceeds the ``limit``-th
best cost found: this is what keeps the search under a second or two (``bench/search.py`` times it).

The max-model-len dial: under the vLLM V1 accounting the cap changes neither the weights nor the activation
profile, so a cap above the worst-case context never raises capacity and one below it refuses the worst-case
request; the default space therefore sets it to the worst-case context (``SearchSpace.max_model_lens``
overrides). Weight precision means serving a checkpoint in that precision (an FP8 or AWQ variant of the
model); its quality is outside this model. Accelerators vLLM does not run through CUDA/ROCm (TPU, Inferentia,
Trainium) and fractional GPUs are not searched.

Pure: no I/O but the package's own tables, no clock; progress is reported through a callback.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from advisor.capacity.deployment import DeploymentSpec, deployment_inputs
from advisor.capacity.hardware import GPUSpec, get_gpu
from advisor.capacity.instances import InstanceType, list_instances
from advisor.capacity.kv import CapacityInputs, CapacityResult, capacity_pass, weights_bytes_per_gpu
from advisor.capacity.models import ModelArch
from advisor.capacity.operating import idle_latency_miss, replica_service, slo_unreachable_reason
from advisor.capacity.perf import PerfAssumptions, assumptions_for
from advisor.capacity.queueing import SLO, ReplicaService, ServicePrediction, Workload, replicas_for_slo
from advisor.errors import CapacityError, WontStartError

__all__ = [
    "CLOSE_LATENCY_MISS",
    "CLOSE_PRICE_FACTOR",
    "DEFAULT_LIMIT",
    "OWNED",
    "Candidate",
    "Rejection",
    "ReplicaConfig",
    "SearchResult",
    "SearchSpace",
    "search_deployments",
]

DEFAULT_LIMIT: Final = 10
"""Feasible deployments :func:`search_deployments` lists by default (``plan --search --limit``)."""

CLOSE_LATENCY_MISS: Final = 1.25
"""A rejected configuration "came close" when its best latencies (one idle replica:
:func:`advisor.capacity.operating.idle_latency_miss`) miss a target by at most this factor (25 %)…"""

CLOSE_PRICE_FACTOR: Final = 2.0
"""… and its cheapest host costs at most this many times the cheapest feasible deployment (any price when none is
feasible); on owned GPUs (no price) it needs at most this many times the GPUs owned. Only such rejections are
listed as "best rejected" (issue 19)."""

OWNED: Final = "owned"
"""The ``cloud`` (and instance name) of the GPUs an operator already has (``plan --search --own GPU:COUNT``):
no price, so the search ranks by the GPUs used, the least changed model, then goodput and latency instead."""

NOT_SEARCHED_PREFIXES: Final = ("tpu-", "inferentia", "trn", "trainium")
"""GPU keys of accelerators the vLLM CUDA/ROCm accounting does not describe."""


@dataclass(frozen=True)
class SearchSpace:
    """The dials and their settings (vLLM flag names in brackets).

    Attributes:
        weight_precisions: ``None`` = the checkpoint's dtype, ``fp8``, ``awq`` (int4) [``--quantization``];
            fp8 only on GPUs with an fp8 tensor rate.
        kv_cache_dtypes: [``--kv-cache-dtype``].
        tensor_parallel_sizes: [``--tensor-parallel-size``]; only those dividing the attention heads and at
            most the instance's GPUs.
        max_num_seqs: batch caps [``--max-num-seqs``].
        max_model_lens: caps [``--max-model-len``]; ``None`` → the workload's worst-case context.
        gpu_memory_utilization: [``--gpu-memory-utilization``], held fixed.
        max_replicas: the most replicas considered.
        gpu_keys: the catalog GPUs to search (``plan --search --gpu``); ``None`` = every GPU of a priced
            instance.
    """

    weight_precisions: tuple[str | None, ...] = (None, "fp8", "awq")
    kv_cache_dtypes: tuple[str, ...] = ("auto", "fp8")
    tensor_parallel_sizes: tuple[int, ...] = (1, 2, 4, 8)
    max_num_seqs: tuple[int, ...] = (64, 128, 256, 512)
    max_model_lens: tuple[int, ...] | None = None
    gpu_memory_utilization: float = 0.9
    max_replicas: int = 256
    gpu_keys: tuple[str, ...] | None = None


@dataclass(frozen=True)
class ReplicaConfig:
    """One setting of the per-replica dials."""

    gpu_key: str
    tensor_parallel_size: int
    quantization: str | None
    kv_cache_dtype: str
    max_model_len: int
    max_num_seqs: int

    @property
    def weights_label(self) -> str:
        """``checkpoint``, ``fp8`` or ``awq``."""
        return self.quantization or "checkpoint"

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {
            "gpu": self.gpu_key,
            "tensor_parallel_size": self.tensor_parallel_size,
            "quantization": self.quantization,
            "kv_cache_dtype": self.kv_cache_dtype,
            "max_model_len": self.max_model_len,
            "max_num_seqs": self.max_num_seqs,
        }


@dataclass(frozen=True)
class Candidate:
    """A deployment that meets the SLO: ``replicas`` replicas of ``config`` on ``instances`` × ``instance``."""

    config: ReplicaConfig
    instance: InstanceType
    replicas: int
    instances: int
    hourly_cost_usd: float | None
    """USD/h of the instances; None on owned GPUs (no price: not 0)."""
    cost_per_million_goodput_tokens_usd: float | None
    """USD per million goodput output tokens; None on owned GPUs."""
    kv_cache_tokens: int
    batch_cap: int
    prediction: ServicePrediction

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the prediction's latencies in seconds)."""
        p = self.prediction
        return {
            **self.config.as_dict(),
            "cloud": self.instance.cloud,
            "instance_type": self.instance.name,
            "gpus_per_instance": self.instance.whole_gpus,
            "replicas": self.replicas,
            "instances": self.instances,
            "gpu_model": self.instance.gpu_model,
            "hourly_cost_usd": _round(self.hourly_cost_usd),
            "cost_per_million_goodput_tokens_usd": _round(self.cost_per_million_goodput_tokens_usd),
            "price_region": self.instance.price_region,
            "price_as_of": self.instance.price_as_of,
            "kv_cache_tokens_per_replica": self.kv_cache_tokens,
            "batch_cap": self.batch_cap,
            "mean_batch": round(p.mean_batch, 2),
            "ttft_p50_seconds": p.ttft_p50_seconds,
            "ttft_p90_seconds": p.ttft_p90_seconds,
            "ttft_p99_seconds": p.ttft_p99_seconds,
            "tpot_p50_seconds": p.tpot_p50_seconds,
            "tpot_p90_seconds": p.tpot_p90_seconds,
            "tpot_p99_seconds": p.tpot_p99_seconds,
            "mean_queue_wait_seconds": p.mean_queue_wait_seconds,
            "goodput_ratio": p.goodput_ratio,
            "goodput_tokens_per_second": p.goodput_tokens_per_second,
        }


@dataclass(frozen=True)
class Rejection:
    """A replica configuration that cannot meet the SLO, why, and the cheapest it could have cost
    (``lower_bound_hourly_cost_usd``: the replicas stability alone needs, each on the cheapest instance that holds
    one — not one instance's price; a fresh user read the legend's "single instance" against 2–4× the catalog's)."""

    config: ReplicaConfig
    reason: str
    lower_bound_hourly_cost_usd: float
    instance: str
    stage: str = "weights"
    """How far it got: ``weights`` (do not fit), ``pool`` (no room for one worst-case request), ``perf`` (no
    roofline figures for the GPU), ``slo`` (runs, but misses the SLO at any replica count, or needs more GPUs than
    are owned)."""
    latency_miss: float | None = None
    """At stage ``slo``: :func:`advisor.capacity.operating.idle_latency_miss` (≤ 1: both targets met at batch 1);
    None before it."""

    @property
    def close(self) -> bool:
        """It came close: it runs and misses by at most :data:`CLOSE_LATENCY_MISS` (the price test is the
        search's, against the cheapest feasible deployment)."""
        return self.latency_miss is not None and self.latency_miss <= CLOSE_LATENCY_MISS

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields (``lower_bound_hourly_cost_usd`` None on owned GPUs: no price)."""
        return {
            **self.config.as_dict(),
            "instance_type": self.instance,
            "stage": self.stage,
            "lower_bound_hourly_cost_usd": None if self.instance == OWNED else _round(self.lower_bound_hourly_cost_usd),
            "latency_miss": None if self.latency_miss is None else round(self.latency_miss, 4),
            "reason": self.reason,
        }


def _round(value: float | None) -> float | None:
    """USD to 4 decimals; None (no price) stays None."""
    return None if value is None else round(value, 4)


@dataclass(frozen=True)
class SearchResult:
    """Feasible deployments (cheapest first), the best rejected configurations, and counts."""

    feasible: list[Candidate]
    rejected: list[Rejection]
    configurations: int
    evaluated: int
    pruned: int
    frontier: list[tuple[float, float, str]] = field(default_factory=list)
    """(goodput tokens/s per GPU, TPOT p90 seconds, label) of every feasible configuration evaluated."""
    unpriced: dict[str, int] = field(default_factory=dict)
    """GPU name → configurations that fit it but could not be timed: the catalog has no published compute or
    bandwidth figure for the part (counted among those that cannot run)."""

    @property
    def cannot_run(self) -> str:
        """``"32 cannot run (…)"``: the configurations neither evaluated nor pruned, and why, naming the GPUs the
        catalog cannot time (a walkthrough read "32 cannot run (weights, KV pool, context or GPU features)" for an
        8B model on H100 NVL, whose only problem was the catalog's missing tensor rate)."""
        n = self.configurations - self.evaluated - self.pruned
        text = f"{n} cannot run (weights, KV pool, context or GPU features"
        if self.unpriced:
            parts = ", ".join(f"{k} {v}" for k, v in sorted(self.unpriced.items()))
            text += f"; of them, no published compute or bandwidth figure to time them on: {parts}"
        return text + ")"

    @property
    def reason(self) -> str | None:
        """Why nothing is listed — none of the configurations both starts and meets the SLO, with the counts of
        each kind of failure — or None when a deployment is feasible (``plan --search --json``'s ``reason``, the
        counterpart of plain ``plan``'s)."""
        if self.feasible:
            return None
        return (
            f"no feasible configuration: of {self.configurations} searched, {self.cannot_run} and {self.evaluated} "
            "that run miss the SLO at any replica count, or need more GPUs than a host searched has"
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready fields: ``feasible`` (the deployments, cheapest first; empty when none is), ``reason``
        (:attr:`reason`: None unless ``feasible`` is empty), ``rejected`` and the counts."""
        return {
            "feasible": [c.as_dict() for c in self.feasible],
            "reason": self.reason,
            "rejected": [r.as_dict() for r in self.rejected],
            "configurations": self.configurations,
            "evaluated": self.evaluated,
            "pruned": self.pruned,
        }


@dataclass
class _Prepared:
    config: ReplicaConfig
    inputs: CapacityInputs | None
    gpu: GPUSpec
    hosts: list[InstanceType]
    result: CapacityResult | None = None
    service: ReplicaService | None = None
    reason: str = ""
    stage: str = "weights"
    lower_bound: float = math.inf
    cheapest_host: str = ""


def owned_host(gpu_key: str, count: int) -> InstanceType:
    """``count`` GPUs of the catalog's ``gpu_key`` an operator already has, as one host with no price (cloud and
    name :data:`OWNED`).

    Raises:
        UnknownGPUError: ``gpu_key`` is not in the catalog.
    """
    gpu = get_gpu(gpu_key)
    return InstanceType(
        cloud=OWNED,
        name=OWNED,
        family=OWNED,
        gpu_key=gpu.key,
        gpu_model=gpu.name,
        gpu_count=float(count),
        gpu_memory_per_gpu_gb=gpu.memory_bytes / 1e9,
        vcpus=None,
        host_ram_gib=None,
        gpu_interconnect="",
        price_usd_per_hour=None,
        price_region="",
        price_as_of="",
        source="--own",
    )


def _owned(inst: InstanceType) -> bool:
    return inst.cloud == OWNED


def _hosts_by_gpu(
    cloud: str | None, instances: Sequence[InstanceType] | None = None, gpu_keys: tuple[str, ...] | None = None
) -> dict[str, list[InstanceType]]:
    hosts: dict[str, list[InstanceType]] = {}
    if instances is None:
        pool = list_instances(cloud, priced_only=True)
    else:
        if not any(_owned(i) for i in instances):
            list_instances(cloud)  # validates the cloud's name
        pool = [
            i
            for i in instances
            if _owned(i) or (i.price_usd_per_hour is not None and (cloud is None or i.cloud == cloud))
        ]
    for inst in pool:
        if inst.whole_gpus < 1 or inst.gpu_key.startswith(NOT_SEARCHED_PREFIXES):
            continue
        if gpu_keys is not None and inst.gpu_key not in gpu_keys:
            continue
        hosts.setdefault(inst.gpu_key, []).append(inst)
    return hosts


def _price(inst: InstanceType, per: int, replicas: int) -> tuple[float, int] | None:
    """(hourly cost, instances) of ``replicas`` replicas at ``per`` a host, or None when the host cannot: no
    price, or owned GPUs too few (owned: cost 0 for ordering only, never reported)."""
    count = math.ceil(replicas / per)
    if _owned(inst):
        return (0.0, 1) if count <= 1 else None
    if inst.price_usd_per_hour is None:
        return None
    return count * inst.price_usd_per_hour, count


def _cheapest(hosts: Sequence[InstanceType], tp: int, replicas: int) -> tuple[float, InstanceType | None, int]:
    """(hourly cost, instance, instances) of the cheapest way to host ``replicas`` replicas of ``tp`` GPUs."""
    best: tuple[float, InstanceType | None, int] = (math.inf, None, 0)
    for inst in hosts:
        per = inst.whole_gpus // tp
        priced = None if per < 1 else _price(inst, per, replicas)
        if priced is None:
            continue
        if priced[0] < best[0]:
            best = (priced[0], inst, priced[1])
    return best


def _prepare(
    cfg: ReplicaConfig,
    model: ModelArch,
    gpu: GPUSpec,
    hosts: list[InstanceType],
    workload: Workload,
    space: SearchSpace,
    assumptions: PerfAssumptions,
) -> _Prepared:
    prep = _Prepared(config=cfg, inputs=None, gpu=gpu, hosts=hosts)
    one_cost, one_host, _ = _cheapest(hosts, cfg.tensor_parallel_size, 1)
    prep.lower_bound, prep.cheapest_host = one_cost, one_host.name if one_host else ""
    try:
        # the one resolver the daemon, the API, `plan` and `simulate` use (the part's interconnect included)
        inputs = deployment_inputs(
            DeploymentSpec(
                engine="vllm",
                model=model,
                gpu=gpu.key,
                tensor_parallel_size=cfg.tensor_parallel_size,
                gpu_memory_utilization=space.gpu_memory_utilization,
                max_model_len=cfg.max_model_len,
                quantization=cfg.quantization,
                kv_cache_dtype=cfg.kv_cache_dtype,
                max_num_seqs=cfg.max_num_seqs,
            )
        )
        prep.inputs = inputs
        result = capacity_pass(inputs)
    except CapacityError as exc:
        # the problem alone: a remedy in the message (advisor.errors.WontStartError.remedy) names directions
        # the search itself explores, and would say "quantized weights" to a quantized row
        prep.reason = exc.problem if isinstance(exc, WontStartError) else str(exc)
        if prep.inputs is not None:
            requested = gpu.memory_bytes * space.gpu_memory_utilization
            prep.stage = "weights" if weights_bytes_per_gpu(prep.inputs) >= requested else "pool"
        return prep
    prep.result = result
    if not result.fits_one_full_length_request:
        prep.stage = "pool"
        prep.reason = (
            f"the KV pool ({result.kv_cache_tokens:,} tokens) cannot hold one {cfg.max_model_len:,}-token request"
        )
        return prep
    try:  # the one engine model `plan` evaluates too (advisor.capacity.operating)
        service = replica_service(inputs, gpu, result, workload, assumptions)
    except CapacityError as exc:
        prep.reason, prep.stage = str(exc), "perf"
        return prep
    prep.service = service
    cap, t_p, step = service.batch_cap, service.prefill_seconds, service.decode_step
    full = t_p + workload.output_tokens * step(float(cap))
    lam = workload.arrival_rate
    need = max(1, math.floor(lam * full / cap) + 1 if lam > 0 else 1, math.floor(lam * t_p) + 1)
    prep.lower_bound, host, _ = _cheapest(hosts, cfg.tensor_parallel_size, need)
    prep.cheapest_host = host.name if host else prep.cheapest_host
    return prep


def search_deployments(
    model: ModelArch,
    workload: Workload,
    slo: SLO,
    *,
    cloud: str | None = None,
    instances: Sequence[InstanceType] | None = None,
    space: SearchSpace = SearchSpace(),
    limit: int = DEFAULT_LIMIT,
    rejected_limit: int = 5,
    assumptions: PerfAssumptions | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SearchResult:
    """The ``limit`` cheapest deployments of ``model`` meeting ``slo`` under ``workload`` on ``cloud``
    (``aws``/``azure``/``gcp``, all when ``None``), and the ``rejected_limit`` cheapest configurations that
    cannot, with the reason. Feasible deployments are sorted by hourly cost, then cost per million goodput
    tokens; one per (instance type, TP, weights, KV dtype), with its best max-num-seqs.

    Acceptance example: Llama-3.1-70B-Instruct, 5 req/s of 2,000 + 500 tokens, TTFT 2.5 s and TPOT 50 ms for
    90 %, AWS: bf16 weights need 131.5 GiB (TP 2 on H100s holds 65.8 GiB of weights per GPU), fp8 65.8 GiB
    fits one 80 GB H100 only with a small pool, AWQ int4 about 35 GiB (see the test and ``bench/search.py``
    for what is chosen).

    ``instances``: the instance types to host on, with their prices (default: every priced row of
    ``instances.csv``); a managed platform's own (:meth:`advisor.capacity.managed.ManagedInstance.as_instance`)
    price the search at that platform's rates. Unpriced ones are skipped, but for GPUs an operator owns
    (:func:`owned_host`): those have no price, host at most what they hold, and the deployments are ranked by
    the GPUs used (lowest first), the least changed model (:func:`quality_risk`), then goodput ratio (highest first),
    TPOT p90 and TTFT p90. ``space.gpu_keys``
    restricts the GPUs searched.

    "Best rejected" lists only configurations that came close (:data:`CLOSE_LATENCY_MISS`,
    :data:`CLOSE_PRICE_FACTOR`); with nothing feasible and nothing close, the nearest misses.

    ``progress(done, total)`` is called as replica configurations are evaluated. ``assumptions``: the roofline's
    efficiency factors for every GPU; ``None`` (the default) takes each GPU's own,
    :func:`advisor.capacity.perf.assumptions_for` ``("vllm", gpu)``, as ``plan`` does for one configuration.

    Raises:
        CapacityError: an unknown cloud.
    """
    hosts = _hosts_by_gpu(cloud, instances, space.gpu_keys)
    worst = workload.worst_context_tokens
    lens = space.max_model_lens or (worst,)
    configs: list[tuple[ReplicaConfig, GPUSpec, list[InstanceType]]] = []
    for key in sorted(hosts):
        gpu = get_gpu(key)
        most = max(i.whole_gpus for i in hosts[key])
        for tp in space.tensor_parallel_sizes:
            if tp > most:
                continue
            for q in space.weight_precisions:
                if q == "fp8" and not gpu.fp8_flops:
                    continue
                for kv in space.kv_cache_dtypes:
                    for mml in lens:
                        for mns in space.max_num_seqs:
                            cfg = ReplicaConfig(key, tp, q, kv, mml, mns)
                            configs.append((cfg, gpu, hosts[key]))
    total = len(configs)
    prepared: list[_Prepared] = []
    for cfg, gpu, hs in configs:
        if cfg.max_model_len < worst:
            prep = _Prepared(cfg, None, gpu, hs, reason=f"max-model-len {cfg.max_model_len} < worst case {worst}")
            cost, host, _ = _cheapest(hs, cfg.tensor_parallel_size, 1)
            prep.lower_bound, prep.cheapest_host = cost, host.name if host else ""
        else:
            factors = assumptions if assumptions is not None else assumptions_for("vllm", gpu)
            prep = _prepare(cfg, model, gpu, hs, workload, space, factors)
        prepared.append(prep)
    prepared.sort(key=lambda p: (p.lower_bound, p.config.max_num_seqs))

    best_by_group: dict[tuple[str, int, str | None, str], Candidate] = {}
    frontier: list[tuple[float, float, str]] = []
    evaluated = pruned = 0
    viable = [p for p in prepared if not p.reason]
    rejected = [Rejection(p.config, p.reason, p.lower_bound, p.cheapest_host, p.stage) for p in prepared if p.reason]
    done = total - len(viable)
    for j, p in enumerate(viable):
        if progress is not None and j % 16 == 0:
            progress(done + j, total)
        costs = sorted(c.hourly_cost_usd for c in best_by_group.values() if c.hourly_cost_usd is not None)
        if len(costs) >= limit and p.lower_bound > costs[limit - 1]:
            pruned += 1
            continue
        assert p.service is not None and p.result is not None
        evaluated += 1
        prediction = replicas_for_slo(workload, p.service, slo, space.max_replicas)
        if prediction is None:
            reason = slo_unreachable_reason(p.service, workload, slo, space.max_replicas)
            miss = idle_latency_miss(p.service, slo)
            rejected.append(Rejection(p.config, reason, p.lower_bound, p.cheapest_host, "slo", miss))
            continue
        tp = p.config.tensor_parallel_size
        frontier.append(
            (
                prediction.goodput_tokens_per_second / (prediction.replicas * tp),
                prediction.tpot_p90_seconds,
                f"{p.config.gpu_key} TP{tp} {p.config.weights_label}/{p.config.kv_cache_dtype} "
                f"seqs {p.config.max_num_seqs}",
            )
        )
        for inst in p.hosts:
            per = inst.whole_gpus // tp
            priced = None if per < 1 else _price(inst, per, prediction.replicas)
            if priced is None:
                if _owned(inst) and per >= 1:
                    gpus = prediction.replicas * tp  # close: at most CLOSE_PRICE_FACTOR × the GPUs owned
                    near = gpus <= CLOSE_PRICE_FACTOR * inst.whole_gpus
                    rejected.append(
                        Rejection(
                            p.config,
                            f"needs {prediction.replicas} replica(s) × TP {tp} = {prediction.replicas * tp} GPUs; "
                            f"{inst.whole_gpus} owned",
                            p.lower_bound,
                            inst.name,
                            "slo",
                            idle_latency_miss(p.service, slo) if near else None,
                        )
                    )
                continue
            hourly, count = priced
            goodput = prediction.goodput_tokens_per_second
            per_million = hourly / (3600 * goodput) * 1e6 if goodput > 0 else math.inf
            cand = Candidate(
                config=p.config,
                instance=inst,
                replicas=prediction.replicas,
                instances=count,
                hourly_cost_usd=None if _owned(inst) else hourly,
                cost_per_million_goodput_tokens_usd=None if _owned(inst) else per_million,
                kv_cache_tokens=p.result.kv_cache_tokens,
                batch_cap=p.service.batch_cap,
                prediction=prediction,
            )
            group = (inst.name, tp, p.config.quantization, p.config.kv_cache_dtype)
            old = best_by_group.get(group)
            if old is None or _rank(cand) < _rank(old):
                best_by_group[group] = cand
    if progress is not None:
        progress(total, total)
    feasible = sorted(best_by_group.values(), key=_rank)[:limit]
    cheapest = feasible[0].hourly_cost_usd if feasible else None
    return SearchResult(
        feasible=feasible,
        rejected=_best_rejections(rejected, cheapest, rejected_limit),
        configurations=total,
        evaluated=evaluated,
        pruned=pruned,
        frontier=frontier,
        unpriced=dict(Counter(p.gpu.name for p in prepared if p.stage == "perf")),
    )


_STAGE_ORDER: Final = {"weights": 0, "pool": 1, "perf": 2, "slo": 3}
_PRECISION_ORDER: Final = {"awq": 0, "fp8": 1}


def _best_rejections(rejected: list[Rejection], cheapest: float | None, limit: int) -> list[Rejection]:
    """One rejection per (GPU, TP) — the one that got furthest, then the smallest miss, then the smallest weights
    — among those that came close (:attr:`Rejection.close`, and from at most :data:`CLOSE_PRICE_FACTOR` × the
    ``cheapest`` feasible hourly cost; ``None``: nothing priced is feasible), cheapest first. With nothing close
    and nothing feasible, the nearest misses, so the operator still sees why."""
    ceiling = math.inf if cheapest is None else CLOSE_PRICE_FACTOR * cheapest
    close = [r for r in rejected if r.close and r.lower_bound_hourly_cost_usd <= ceiling]
    pool = close if close or cheapest is not None else rejected
    best: dict[tuple[str, int], Rejection] = {}
    for r in pool:
        key = (r.config.gpu_key, r.config.tensor_parallel_size)
        old = best.get(key)
        if old is None or _rejection_rank(r) < _rejection_rank(old):
            best[key] = r
    return sorted(
        best.values(),
        key=lambda r: (r.lower_bound_hourly_cost_usd, -_STAGE_ORDER[r.stage], r.latency_miss or math.inf),
    )[:limit]


_WEIGHT_RISK: Final = {None: 0, "fp8": 1, "awq": 2}
"""Quality risk of a weight precision, least first: the checkpoint's own, FP8, AWQ (int4)."""


def quality_risk(config: ReplicaConfig) -> int:
    """How far ``config`` strays from the checkpoint: the weights' risk (:data:`_WEIGHT_RISK`) twice, plus 1 for an
    FP8 KV cache. Every feasible candidate meets the SLO (its replicas are sized to it), so between two at one price
    the one that changes the model's numbers less ranks first: the walkthrough saw ``--own H100-SXM:1`` rank AWQ
    weights with an FP8 KV cache first and the checkpoint, meeting the SLO at 100 % goodput on the same GPU, fifth."""
    return 2 * _WEIGHT_RISK.get(config.quantization, 2) + (0 if config.kv_cache_dtype == "auto" else 1)


def _rank(c: Candidate) -> tuple[float, ...]:
    """Priced: hourly cost, then the quality risk (:func:`quality_risk`), cost per million goodput tokens and the
    larger batch cap. Owned (no price): GPUs used, the quality risk, then goodput ratio (highest first), TPOT p90 and
    TTFT p90."""
    p = c.prediction
    risk = float(quality_risk(c.config))
    if c.hourly_cost_usd is None or c.cost_per_million_goodput_tokens_usd is None:
        gpus = c.replicas * c.config.tensor_parallel_size
        return (float(gpus), risk, -round(p.goodput_ratio, 6), p.tpot_p90_seconds, p.ttft_p90_seconds)
    return (round(c.hourly_cost_usd, 6), risk, c.cost_per_million_goodput_tokens_usd, -float(c.config.max_num_seqs))


def _rejection_rank(r: Rejection) -> tuple[float, ...]:
    q = _PRECISION_ORDER.get(r.config.quantization or "", 2)
    miss = math.inf if r.latency_miss is None else r.latency_miss
    return (-_STAGE_ORDER[r.stage], miss, r.lower_bound_hourly_cost_usd, q, r.config.max_num_seqs)
