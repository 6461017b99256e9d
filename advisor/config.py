"""The configuration file: one validated pydantic model, defaults in one place.

A config reads like this (``deploy/advisor.example.yaml`` has the full example)::

    scrape_interval: 15s
    evaluation_window: 5m
    deployments:
      - name: chat-8b
        engine: vllm
        targets: ["http://10.0.0.5:8000/metrics"]
        model: meta-llama/Llama-3.1-8B-Instruct     # preset id, or a path to a config.json
        gpu: H100-SXM
        tensor_parallel_size: 1
        gpu_memory_utilization: 0.9
        max_model_len: 8192
        max_num_seqs: 256
        slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.95}
    receivers:
      - {name: ops, type: webhook, url: "http://127.0.0.1:9099/hook"}

:func:`load_config` reports *every* invalid field at once, each with its path in the file
(``deployments[0].slo.target_ratio``), by raising :class:`advisor.errors.ConfigError`.
Durations accept Prometheus-style strings (``90s``, ``5m``, ``1h30m``) or plain seconds.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeVar, get_args
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from advisor.capacity.deployment import (
    LANGUAGE_MODEL_ONLY_ENGINES,
    VLLM_DEFAULT_UTILIZATION,
    DeploymentSpec,
    deployment_inputs,
    resolve_gpu,
    spec_from_settings,
)
from advisor.capacity.gguf import as_served, file_type_name
from advisor.capacity.hardware import GPUSpec, get_gpu
from advisor.capacity.inputs import VLLM_BATCHED_BELOW_SEQS
from advisor.capacity.kv import MAX_KV_CACHE_MEMORY_BYTES, MAX_NUM_GPU_BLOCKS, CapacityInputs, capacity_pass
from advisor.capacity.lora import LoRASettings
from advisor.capacity.models import (
    ModelArch,
    language_model_only_limits,
    mm_limit_problems,
    without_unused_vision_tower,
)
from advisor.conventions import (
    MANAGED_INSTANCE_PLATFORMS,
    MIN_SCRAPE_INTERVAL_SECONDS,
    PLATFORM_KUBERNETES,
    RULE_PLUGIN_GROUP,
    RUNBOOK_BASE,
)
from advisor.engines import ENGINES
from advisor.errors import FILE_PROBLEM, CapacityError, ConfigError
from advisor.files import read_text_capped
from advisor.listing import join_bounded
from advisor.manifests import DNS_1123_LABEL, DNS_1123_SUBDOMAIN, KEDA_DEFAULT_MAX_REPLICAS
from advisor.modelfile import resolve_model as resolve_model
from advisor.notify.config import ReceiverConfig
from advisor.platforms import PLATFORMS
from advisor.rules.replicas import MIN_ARRIVAL_SCRAPES, ReplicaStabilizer, spans_at_least
from advisor.sources.limits import DEFAULT_LABEL_LIMIT, DEFAULT_SAMPLE_LIMIT


def check_http_url(url: str) -> str:
    """An absolute http(s) URL with a host and a valid port; the error never echoes the URL (it may
    hold credentials) — only its redacted form."""
    from advisor.redact import redact_url

    try:
        parts = urlsplit(url)
        port = parts.port
        host = parts.hostname
    except ValueError as exc:
        raise ValueError(f"not a valid URL ({exc}): {redact_url(url)!r}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise ValueError(f"must be an http:// or https:// URL with a host, got {redact_url(url)!r}")
    if any(ch.isspace() for ch in url):
        raise ValueError(f"must not contain white space: {redact_url(url)!r}")
    if ":" not in host and not _HOST_NAME.fullmatch(host):
        # an IPv6 literal (the brackets stripped) holds ':'; anything else is a DNS name or an IPv4 address
        unexpanded = " (the config does not expand environment variables: write the host, or template the file)"
        written = parts.netloc.rpartition("@")[2]  # as written: hostname is lower-cased
        written = written.rsplit(":", 1)[0] if parts.port is not None else written
        raise ValueError(
            f"host {written!r} is not a host name (letters, digits, '.', '-' and '_' only)"
            + (unexpanded if "$" in host else "")
            + f": {redact_url(url)!r}"
        )
    del port
    return url


_HOST_NAME = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?\.?")
"""A DNS name or IPv4 address as a target's host (RFC 1123 labels, plus the '_' some resolvers and service
names allow, and a trailing root dot): a ``${VAR}`` left unexpanded (breaker 28: it passed ``check-config`` and
failed every scrape as a DNS error) or a stray character is refused where the config is read."""


TargetURL = Annotated[str, AfterValidator(check_http_url)]

_DURATION_RE = re.compile(
    r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?"
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+)ms)?$"
)


MAX_DURATION_SECONDS = 365 * 86400.0


def parse_duration(value: object) -> float:
    """Parse ``15s``, ``5m``, ``1h30m``, ``250ms``, ``2d``, ``1w`` (Prometheus's units: y = 365 d, w = 7 d) or a
    number of seconds into seconds (float).

    Raises:
        ValueError: for anything else, naming the accepted forms.
    """
    if isinstance(value, bool):
        raise ValueError("a duration must be a number of seconds or a string like '15s', '5m', '1h'")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            raise ValueError(f"duration out of range (at most {MAX_DURATION_SECONDS:g} seconds)") from None
    elif isinstance(value, str):
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            m = _DURATION_RE.match(text)
            if not text or m is None or not any(m.groups()):
                raise ValueError(
                    f"invalid duration {value!r}: use a number of seconds or a string like '15s', '5m', '1h30m'"
                ) from None
            y, w, d, h, mi, s, ms = (float(g) if g else 0.0 for g in m.groups())
            seconds = y * 365 * 86400 + w * 7 * 86400 + d * 86400 + h * 3600 + mi * 60 + s + ms / 1000
    else:
        raise ValueError("a duration must be a number of seconds or a string like '15s', '5m', '1h'")
    if not math.isfinite(seconds) or seconds > MAX_DURATION_SECONDS:
        raise ValueError(f"duration must be finite and at most {MAX_DURATION_SECONDS:g} seconds (one year)")
    if seconds <= 0:
        raise ValueError(f"duration must be positive, got {value!r}")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


def _parse_window(value: Any) -> float:
    """A stabilization window: a duration (:func:`parse_duration`), or 0 (no stabilization), in seconds."""
    if not isinstance(value, bool) and isinstance(value, int | float) and value == 0:
        return 0.0
    if isinstance(value, str) and value.strip() in ("0", "0s", "0.0"):
        return 0.0
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ValueError(f"{exc} (a window may also be 0: no stabilization)") from None


Window = Annotated[float, BeforeValidator(_parse_window)]


def _numeric_not_bool(annotation: object) -> bool:
    """Whether a field's type takes a number (``int``, ``float``, optional or annotated) but no boolean."""

    def admits(t: object, kinds: tuple[object, ...]) -> bool:
        return t in kinds or any(admits(a, kinds) for a in get_args(t))

    return admits(annotation, (int, float)) and not admits(annotation, (bool, Any))


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _refuse_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        """``true``/``false`` where a number is expected is an error naming the field: pydantic's lax mode would
        read it as 1/0 (``gpu_memory_used_by_others_gib: true`` as 1 GiB)."""
        if isinstance(value, bool) and info.field_name is not None:
            field = cls.model_fields.get(info.field_name)
            if field is not None and _numeric_not_bool(field.annotation):
                raise ValueError(f"must be a number, not the boolean {str(value).lower()}")
        if isinstance(value, str) and info.field_name is not None:  # pydantic's lax mode reads '0.3' as 0.3
            field = cls.model_fields.get(info.field_name)
            if field is not None and _numeric_not_bool(field.annotation) and not _reads_text(field):
                raise ValueError(_string_for_number(value))
        return value


_BARE_EXPONENT = re.compile(r"([-+]?[0-9]+)([eE][-+]?[0-9]+)")
"""A number in exponent form with no dot, which YAML 1.1 (PyYAML) reads as text even unquoted: ``1e9``."""


def _string_for_number(value: str) -> str:
    """Why text where a number belongs is refused, and how to write it: ``'0.3'`` → without quotes; ``1e9`` →
    YAML 1.1 reads an exponent without a dot as text (its float pattern needs the dot: ``1.0e9``); anything else →
    not a number."""
    shown = repr(value[:40])
    bare = _BARE_EXPONENT.fullmatch(value.strip())
    if bare:
        return (
            f"must be a number, not the string {shown}: YAML 1.1 reads an exponent without a dot as text; "
            f"write {bare[1]}.0{bare[2]} or the number in full"
        )
    try:
        float(value)
    except ValueError:
        try:
            seconds = parse_duration(value)
        except ValueError:
            return f"must be a number, not the string {shown}"
        return f"must be a number, not the string {shown}: this field takes seconds as a plain number ({seconds:g})"
    return f"must be a number, not the string {shown}: write it without quotes"


def _reads_text(field: Any) -> bool:
    """Whether a numeric field takes text on purpose: ``str`` among its types, or a before-validator that parses
    it (a :data:`Duration` such as ``5m``)."""

    def admits(t: object) -> bool:
        if t is str:
            return True
        meta = getattr(t, "__metadata__", ())
        return any(isinstance(m, BeforeValidator) for m in meta) or any(admits(a) for a in get_args(t))

    return admits(field.annotation) or any(isinstance(m, BeforeValidator) for m in field.metadata)


class SLO(_Strict):
    """Latency targets: a request is *good* when TTFT ≤ ``ttft_seconds`` and TPOT ≤ ``tpot_seconds``;
    the SLO is met when at least ``target_ratio`` of requests are good (DistServe's goodput definition,
    Zhong et al., OSDI 2024)."""

    ttft_seconds: float = Field(gt=0, description="time-to-first-token target, seconds")
    tpot_seconds: float = Field(gt=0, description="time-per-output-token target, seconds")
    target_ratio: float = Field(
        default=0.95,
        gt=0,
        lt=1,
        description="fraction of requests that must meet both, below 1: at 1 the queueing model's tail has no finite "
        "sizing (advisor.capacity.queueing.SLO refuses it, as plan --target-ratio does) and the burn-rate alerts have "
        "no error budget; 0.999 is three nines",
    )


class TRTLLMKVCacheConfig(_Strict):
    """TensorRT-LLM's ``kv_cache_config`` (``tensorrt_llm/llmapi/llm_args.py`` ``KvCacheConfig``): the pool is
    ``free_gpu_memory_fraction`` of the memory free after the weights, capped at ``max_tokens`` tokens when given
    (the smaller is used)."""

    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000_000, strict=True)
    free_gpu_memory_fraction: float | None = Field(default=None, gt=0, le=1)


ENGINE_KEYS: dict[str, tuple[str, ...]] = {
    "num_gpu_blocks_override": ("vllm", "dynamo", "auto"),
    "kv_cache_memory_bytes": ("vllm", "dynamo", "auto"),
    "data_parallel_size": ("vllm", "sglang", "trtllm", "triton-trtllm", "dynamo", "auto"),
    "enable_expert_parallel": ("vllm", "sglang", "trtllm", "triton-trtllm", "dynamo", "auto"),
    "mem_fraction_static": ("sglang", "auto"),
    "cuda_memory_fraction": ("tgi", "auto"),
    "kv_cache_config": ("trtllm", "triton-trtllm", "auto"),
    "ctx_size": ("llamacpp", "auto"),
    "parallel": ("llamacpp", "auto"),
    "kv_unified": ("llamacpp", "auto"),
    "cpu_offload_gb": ("vllm", "dynamo", "auto"),
    "speculative_config": ("vllm", "dynamo", "auto"),
    "enable_lora": ("vllm", "dynamo", "auto"),
    "max_loras": ("vllm", "dynamo", "auto"),
    "max_lora_rank": ("vllm", "dynamo", "auto"),
    "lora_extra_vocab_size": ("vllm", "dynamo", "auto"),
    "lora_dtype": ("vllm", "dynamo", "auto"),
    "fully_sharded_loras": ("vllm", "dynamo", "auto"),
    "language_model_only": ("vllm", "dynamo", "auto"),
    "limit_mm_per_prompt": ("vllm", "dynamo", "auto"),
    "gguf_file_type": ("vllm", "llamacpp", "auto"),
    "sampler": ("vllm", "dynamo", "auto"),
    "engine_version": ("vllm", "sglang", "tgi", "dynamo", "auto"),
    "pipeline_parallel_size": ("vllm", "dynamo", "auto"),
    "enforce_eager": ("vllm", "dynamo", "auto"),
    "enable_chunked_prefill": ("vllm", "dynamo", "auto"),
    "enable_prefix_caching": ("vllm", "dynamo", "auto"),
    "vllm_use_v1": ("vllm", "dynamo", "auto"),
}
"""Engine-specific deployment keys and the engines that read them (their flags: see each field)."""

BUDGET_KEYS: dict[str, str] = {
    "sglang": "SGLang, whose pool is sized by mem_fraction_static (give it as --mem-fraction-static runs)",
    "tgi": "TGI, whose pool is sized by cuda_memory_fraction (give it as --cuda-memory-fraction runs)",
    "trtllm": "TensorRT-LLM, whose pool is kv_cache_config.free_gpu_memory_fraction of the memory free after the "
    "weights",
    "triton-trtllm": "TensorRT-LLM, whose pool is kv_cache_config.free_gpu_memory_fraction of the memory free after "
    "the weights",
    "llamacpp": "llama.cpp, whose KV cache is --ctx-size cells whatever the GPU memory (give ctx_size and parallel as "
    "the server runs)",
}
"""Engines that do not read ``gpu_memory_utilization`` (vLLM's ``--gpu-memory-utilization``), each with what sizes its
pool instead: a value away from the default is refused, not ignored (walkthrough, 2026-12-07: ``engine: sglang`` with
``gpu_memory_utilization: 0.95`` was accepted and the pass used SGLang's default fraction 0.834)."""


def budget_key_error(engine: object, value: object) -> str | None:
    """Why ``gpu_memory_utilization: value`` is refused on ``engine`` (:data:`BUDGET_KEYS`: an engine that does not
    read it, the value away from vLLM's default, :data:`advisor.capacity.deployment.VLLM_DEFAULT_UTILIZATION`), or
    None."""
    own = BUDGET_KEYS.get(engine) if isinstance(engine, str) else None
    if own is None or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    return None if value == VLLM_DEFAULT_UTILIZATION else f"gpu_memory_utilization: {value:g} does nothing on {own}"


def _checked_field(check: Callable[[str], str], value: str | None) -> str | None:
    """``check(value)`` (None stays None), its :class:`CapacityError` raised as the ValueError pydantic reports
    under the field's name."""
    if value is None:
        return None
    try:
        return check(value)
    except CapacityError as exc:
        raise ValueError(str(exc)) from None


def engine_version_field(value: str | None) -> str | None:
    """The ``engine_version`` of a config deployment or an API plan request: a release
    :func:`advisor.capacity.generation.checked_version` reads (``0.6.6``, ``v0.10.2``), else ValueError (pydantic's
    field error, naming the field)."""
    from advisor.capacity.generation import checked_version

    return _checked_field(checked_version, value)


def speculative_config_field(value: Any) -> Any:
    """The ``speculative_config`` of a config deployment or an API plan request: a mapping (or its JSON text) with
    a known ``method`` and counts in range (:func:`advisor.capacity.speculative.speculative_mapping`), else
    ValueError; the model-dependent checks run with the capacity pass."""
    if value is None:
        return None
    from advisor.capacity.speculative import speculative_mapping

    try:
        return speculative_mapping(value)
    except CapacityError as exc:
        raise ValueError(str(exc)) from None


def engine_key_error(
    settings: BaseModel | Mapping[str, Any], engine: str, model: type[BaseModel] | None = None
) -> str | None:
    """The first :data:`ENGINE_KEYS` key ``settings`` (a config deployment or the API's plan request; or its raw
    mapping, with ``model`` its class) sets away from its default that ``engine`` does not read, as a message naming
    the key and its engines; None if none."""
    if isinstance(settings, BaseModel):
        fields = type(settings).model_fields
        given = {k: getattr(settings, k) for k in ENGINE_KEYS if k in fields}
    else:
        assert model is not None
        fields = model.model_fields
        given = {k: settings[k] for k in ENGINE_KEYS if k in fields and k in settings}
    for key, engines in ENGINE_KEYS.items():
        if key in given and engine not in engines and given[key] != fields[key].default:
            return f"{key}: a setting of {', '.join(e for e in engines if e != 'auto')}, not of engine {engine}"
    return None


def _whole_seconds(value: float) -> float:
    if value != int(value):
        raise ValueError(f"must be whole seconds (Kubernetes and KEDA take integer seconds), got {value:g}")
    return value


WholeSeconds = Annotated[float, BeforeValidator(parse_duration), AfterValidator(_whole_seconds)]
WholeWindow = Annotated[float, BeforeValidator(_parse_window), AfterValidator(_whole_seconds)]
"""A whole number of seconds that may be 0 (KEDA's cooldownPeriod, the HPA's stabilization window)."""


class AutoscalingConfig(_Strict):
    """How ``capacity-advisor rules generate`` writes the deployment's KEDA ``ScaledObject`` and HPA example
    (README, Autoscaling). Opt-in: only a ``platform: kubernetes`` deployment with an ``autoscaling:`` block gets
    them (a ScaledObject lets KEDA change the replica count; none is written unasked), and the others get one line
    saying how to opt in. Keys follow KEDA's ScaledObject spec
    (https://keda.sh/docs/2.20/reference/scaledobject-spec/), in the config's snake_case:

    * ``scale_target``: the engine's Kubernetes Deployment (``scaleTargetRef.name``; default: the deployment's
      ``name``, which must then be an RFC 1123 name);
    * ``namespace``: the ScaledObject's and HPA's namespace, which must be the Deployment's (default: none, the
      namespace ``kubectl apply -n`` gives);
    * ``min_replica_count`` / ``max_replica_count``: KEDA ``minReplicaCount`` / ``maxReplicaCount`` (HPA
      ``minReplicas`` / ``maxReplicas``); default 1 (the advisor never advises 0: an engine at zero has a cold start
      of minutes) and KEDA's 100 — a bound nobody chose, so ``rules generate`` warns when ``max_replica_count`` is
      not given (each replica is a GPU server; set it to what the operator will pay for);
    * ``cooldown_period``: KEDA ``cooldownPeriod`` (default KEDA's 300 s; KEDA applies it only when scaling to
      and from zero, i.e. with ``min_replica_count: 0``);
    * ``polling_interval``: KEDA ``pollingInterval``, how often KEDA queries Prometheus (default KEDA's 30 s);
    * ``stabilization``: the HPA's ``behavior.scaleDown.stabilizationWindowSeconds`` (default 0: the advisor's
      signal is already held for ``rules.replicas.scale_down_window``; Kubernetes' own default of 300 s would hold
      it that long again);
    * ``fallback_replicas`` / ``fallback_failure_threshold``: KEDA ``fallback``: after this many failed queries in
      a row (the advisor down, its series stale) KEDA holds ``max(current, fallback_replicas)`` replicas
      (``behavior: currentReplicasIfHigher``), never the minimum; ``fallback_replicas`` defaults to the larger of
      ``min_replica_count`` and the number of ``targets`` the config lists, the threshold to 3 (KEDA's example);
    * ``prometheus_url``: the Prometheus that scrapes the advisor, as KEDA reaches it (``serverAddress``; default
      the ``prometheus-operated`` Service that prometheus-operator creates in namespace ``monitoring``).
    """

    scale_target: str | None = Field(
        default=None, max_length=253, pattern=DNS_1123_SUBDOMAIN, description="the engine's Kubernetes Deployment"
    )
    namespace: str | None = Field(
        default=None, max_length=63, pattern=DNS_1123_LABEL, description="Kubernetes namespace"
    )
    min_replica_count: int = Field(default=1, ge=0, le=2**31 - 1, strict=True, description="KEDA minReplicaCount")
    max_replica_count: int = Field(
        default=KEDA_DEFAULT_MAX_REPLICAS, ge=1, le=2**31 - 1, strict=True, description="KEDA maxReplicaCount"
    )
    cooldown_period: WholeWindow = Field(default=300.0, ge=0, le=2**31 - 1, description="KEDA cooldownPeriod")
    polling_interval: WholeSeconds = Field(default=30.0, ge=1, le=2**31 - 1, description="KEDA pollingInterval")
    stabilization: WholeWindow = Field(
        default=0.0, ge=0, le=3600, description="HPA behavior.scaleDown.stabilizationWindowSeconds (0-3600)"
    )
    fallback_replicas: int | None = Field(default=None, ge=0, le=2**31 - 1, strict=True, description="KEDA fallback")
    fallback_failure_threshold: int = Field(default=3, ge=1, le=2**31 - 1, strict=True)
    prometheus_url: TargetURL = Field(
        default="http://prometheus-operated.monitoring.svc:9090", description="KEDA's Prometheus serverAddress"
    )

    @model_validator(mode="after")
    def _bounds(self) -> AutoscalingConfig:
        if self.min_replica_count > self.max_replica_count:
            raise ValueError(
                f"min_replica_count {self.min_replica_count} is above max_replica_count {self.max_replica_count}"
            )
        f = self.fallback_replicas
        if f is not None and not self.min_replica_count <= f <= self.max_replica_count:
            raise ValueError(
                f"fallback_replicas {f} is outside min_replica_count {self.min_replica_count} .. max_replica_count "
                f"{self.max_replica_count}"
            )
        return self


class Deployment(_Strict):
    """One served model: its engine, replicas' scrape URLs, and the configuration the engine runs with."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=128)
    engine: str = Field(
        default="auto",
        description="engine id, or auto: detected from the exposition's metric names",
        json_schema_extra={"enum": ["auto", *ENGINES]},
    )
    platform: str = Field(
        default=PLATFORMS[0],
        description="where the engine runs: every recommendation's flag is said in its terms (container args and "
        "replicas, a unit's ExecStart, SageMaker LMI OPTION_* variables, Vertex AI or Azure ML deployment fields); "
        "bedrock has no engine dials (advisor.platforms)",
        json_schema_extra={"enum": list(PLATFORMS)},
    )
    served_model: str | None = Field(
        default=None,
        min_length=1,
        description="the engine's model label to read when it serves several (default: the only or first one)",
    )
    instance_type: str | None = Field(
        default=None,
        min_length=1,
        description="the instance catalog's name of what each replica runs on (advisor/data/instances.csv: "
        "p4d.24xlarge, Standard_ND96asr_v4, a2-ultragpu-8g; on SageMaker advisor/data/managed_instances.csv: "
        "ml.g5.12xlarge); its on-demand price is the deployment's cost in the host_or_buy rule (unset: unknown, and "
        "that rule never fires)",
    )
    source: Literal["scrape", "prometheus"] = Field(
        default="scrape", description="scrape the targets, or read the engines' series from the prometheus API"
    )
    targets: list[TargetURL] = Field(default_factory=list, description="one /metrics URL per replica (scrape)")
    file_sd: list[str] = Field(
        default_factory=list, description="Prometheus file_sd files (JSON/YAML) listing more targets; re-read on change"
    )
    metrics_path: str = Field(default="/metrics", pattern=r"^/", description="path for file_sd targets")
    selector: str | None = Field(
        default=None, description='PromQL label matchers for source: prometheus, e.g. job="vllm",namespace="prod"'
    )
    model: str = Field(min_length=1, description="preset id, or a path to a Hugging Face config.json")
    gpu: str | None = Field(default=None, description="GPU catalog name, e.g. H100-SXM")
    gpu_memory_gib: float | None = Field(
        default=None, gt=0, le=16384, description="overrides the catalog's GPU memory (GiB)"
    )
    gpu_count: int | None = Field(default=None, ge=1, description="GPUs per replica; defaults to TP size")
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    dtype: str = "auto"
    quantization: str | None = None
    kv_cache_dtype: str = "auto"
    gpu_memory_utilization: float = Field(
        default=VLLM_DEFAULT_UTILIZATION,
        gt=0,
        le=1,
        description="vLLM --gpu-memory-utilization; SGLang and TGI are sized by mem_fraction_static / "
        "cuda_memory_fraction",
    )

    max_model_len: int = Field(ge=16, le=10_000_000)
    max_num_seqs: int | None = Field(default=None, ge=1, description="default: the engine's (256, or 1024 on big GPUs)")
    max_num_batched_tokens: int | None = Field(default=None, ge=1)
    block_size: int | None = Field(default=None, ge=1, le=1024, description="default: 16 (64 for MLA on vLLM V1)")
    sampler: Literal["flashinfer", "torch"] | None = Field(
        default=None,
        description="vLLM's top-k/top-p sampler warm-up: flashinfer (no sort) or torch (default: the official "
        "vllm/vllm-openai image's, FlashInfer on V1 0.8-0.11.0, torch otherwise)",
    )
    engine_version: str | None = Field(
        default=None,
        max_length=64,
        description="the engine's version, e.g. 0.6.6 (vLLM: which accounting sizes the KV pool, V0 or V1 and its "
        "release's rules; SGLang: its default mem_fraction_static; TGI: its block size). Unset: the current "
        "release's rules",
    )
    pipeline_parallel_size: int = Field(
        default=1, ge=1, le=1024, strict=True, description="vLLM --pipeline-parallel-size: stages of layers"
    )
    enforce_eager: bool = Field(default=False, strict=True, description="vLLM --enforce-eager: no CUDA graphs")
    enable_chunked_prefill: bool | None = Field(
        default=None,
        strict=True,
        description="vLLM --enable-chunked-prefill (true) / --no-enable-chunked-prefill (false); unset: the "
        "engine's rule for its version",
    )
    enable_prefix_caching: bool | None = Field(
        default=None,
        strict=True,
        description="vLLM --enable-prefix-caching (true) / --no-enable-prefix-caching (false); unset: the engine's "
        "rule for its version and model (the engine's cache_config_info says what runs, and wins)",
    )
    vllm_use_v1: bool | None = Field(
        default=None,
        strict=True,
        description="vLLM's VLLM_USE_V1 environment variable on 0.8-0.10: false (V0) or true (V1); unset: the "
        "engine's own rule (version, GPU compute capability, features)",
    )
    num_gpu_blocks_override: int | None = Field(
        default=None,
        ge=1,
        le=MAX_NUM_GPU_BLOCKS,
        strict=True,
        description="vLLM --num-gpu-blocks-override: the KV pool is exactly this many blocks of block_size tokens",
    )
    kv_cache_memory_bytes: int | None = Field(
        default=None,
        ge=1,
        le=MAX_KV_CACHE_MEMORY_BYTES,
        strict=True,
        description="vLLM --kv-cache-memory-bytes: KV cache memory per GPU, bytes (replaces the utilization budget)",
    )
    data_parallel_size: int = Field(
        default=1,
        ge=1,
        le=1024,
        strict=True,
        description="vLLM --data-parallel-size / SGLang --dp-size: model copies behind each target, each with its "
        "own KV pool (a request runs on one)",
    )
    enable_expert_parallel: bool = Field(
        default=False,
        strict=True,
        description="vLLM --enable-expert-parallel (SGLang --ep-size equal to the GPUs): experts split whole over "
        "tensor_parallel_size x data_parallel_size GPUs",
    )
    gpu_memory_used_by_others_gib: float = Field(
        default=0.0,
        ge=0,
        le=16384,
        description="GiB other processes hold on each GPU before the engine starts (a shared GPU)",
    )
    mem_fraction_static: float | None = Field(
        default=None, gt=0, le=1, description="SGLang --mem-fraction-static (default: SGLang's rule by GPU memory)"
    )
    cuda_memory_fraction: float | None = Field(default=None, gt=0, le=1, description="TGI --cuda-memory-fraction (1.0)")
    kv_cache_config: TRTLLMKVCacheConfig | None = Field(
        default=None, description="TensorRT-LLM kv_cache_config (max_tokens, free_gpu_memory_fraction)"
    )
    ctx_size: int | None = Field(
        default=None,
        ge=1,
        le=100_000_000,
        strict=True,
        description="llama.cpp --ctx-size: KV cells shared by the --parallel slots (default max_model_len x parallel)",
    )
    parallel: int | None = Field(
        default=None,
        ge=1,
        le=65_536,
        strict=True,
        description="llama.cpp --parallel: slots (default max_num_seqs or 1)",
    )
    kv_unified: bool = Field(
        default=False, strict=True, description="llama.cpp --kv-unified: the slots share the cells"
    )
    speculative_decoding: bool = Field(default=False, description="whether the engine runs with a draft model")
    cpu_offload_gb: float = Field(
        default=0.0,
        ge=0,
        le=16384,
        description="vLLM --cpu-offload-gb: GiB of weights per GPU moved to CPU memory (off the GPU)",
    )
    speculative_config: dict[str, Any] | None = Field(
        default=None,
        description="vLLM --speculative-config as a mapping, e.g. {method: eagle, num_speculative_tokens: 3}: the "
        "draft's layers share the KV pool and its weights load on the GPU (eagle3 and draft models also need "
        "draft_parameters / draft_layers)",
    )
    enable_lora: bool = Field(
        default=False, strict=True, description="vLLM --enable-lora: adapter slots are allocated at load"
    )
    max_loras: int = Field(default=1, ge=1, description="vLLM --max-loras: adapter slots on the GPU (≥ 1)")
    max_lora_rank: int = Field(
        default=16, ge=1, description="vLLM --max-lora-rank: the rank each slot is sized for (8, 16, 32, 64 …)"
    )
    lora_extra_vocab_size: int | None = Field(
        default=None, ge=0, description="vLLM --lora-extra-vocab-size (before 0.12; default 256)"
    )
    lora_dtype: str = Field(default="auto", description="vLLM --lora-dtype: auto (the model dtype) or a dtype name")
    fully_sharded_loras: bool = Field(default=False, strict=True, description="vLLM --fully-sharded-loras")
    language_model_only: bool = Field(
        default=False,
        strict=True,
        description="vLLM --language-model-only: a multimodal checkpoint's encoder towers are not loaded",
    )
    limit_mm_per_prompt: dict[str, int] | None = Field(
        default=None,
        description="vLLM --limit-mm-per-prompt as a mapping ({image: 2, video: 0}): a modality at 0 is not profiled "
        "(every modality of a tower at 0: the tower is not loaded); unset: vLLM's defaults",
    )
    gguf_file_type: str | None = Field(
        default=None,
        max_length=16,
        description="the GGUF file's type as llama-quantize names it (Q4_K_M, Q8_0 …; llama.cpp logs it as 'file "
        "type'): each tensor's width (vLLM --quantization gguf, llama.cpp); unset: the checkpoint's own weights",
    )
    slo: SLO
    autoscaling: AutoscalingConfig | None = Field(
        default=None,
        description="opt-in: the KEDA ScaledObject and HPA example that `rules generate` writes, with their bounds "
        "(README, Autoscaling); without it none is written",
    )

    @field_validator("engine_version")
    @classmethod
    def _check_engine_version(cls, value: str | None) -> str | None:
        return engine_version_field(value)

    @field_validator("gguf_file_type")
    @classmethod
    def _check_gguf_file_type(cls, value: str | None) -> str | None:
        return _checked_field(file_type_name, value)

    @field_validator("limit_mm_per_prompt", mode="before")
    @classmethod
    def _check_mm_limits(cls, value: object) -> object:
        if value is None:
            return value
        if not isinstance(value, dict):
            raise ValueError(
                f"must be a mapping of modality to items per prompt ({{image: 2, video: 0}}), got {value!r}"
            )
        problems = mm_limit_problems(value)
        if problems:
            raise ValueError("; ".join(problems))
        return value

    @field_validator("speculative_config", mode="before")
    @classmethod
    def _check_speculative_config(cls, value: Any) -> Any:
        return speculative_config_field(value)

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        """``auto`` or an engine id of the catalog (:data:`advisor.engines.ENGINES`)."""
        if value != "auto" and value not in ENGINES:
            same = [e for e in ("auto", *ENGINES) if e.lower() == value.lower()]  # ids are lower-case: VLLM → vllm
            close = same or difflib.get_close_matches(value, ENGINES, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown engine {value!r}; known: auto, {', '.join(ENGINES)}{hint}")
        return value

    @field_validator("instance_type")
    @classmethod
    def _known_instance(cls, value: str | None) -> str | None:
        """``None`` or an instance type of the catalog (:func:`advisor.capacity.instances.instance_names`) or of a
        managed platform's (:func:`advisor.capacity.managed.managed_instances`: ``ml.g5.xlarge``)."""
        if value is None:
            return value
        names = known_instance_names()
        if value not in names:
            same = [n for n in names if n.lower() == value.lower()]  # the catalogs' names are case-sensitive here
            close = same or difflib.get_close_matches(value, names, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(
                f"unknown instance type {value!r} (not in advisor/data/instances.csv nor "
                f"advisor/data/managed_instances.csv){hint}"
            )
        return value

    @field_validator("platform")
    @classmethod
    def _known_platform(cls, value: str) -> str:
        """A platform of :data:`advisor.platforms.PLATFORMS`."""
        if value not in PLATFORMS:
            close = difflib.get_close_matches(value, PLATFORMS, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"unknown platform {value!r}; known: {', '.join(PLATFORMS)}{hint}")
        return value

    @field_validator("targets")
    @classmethod
    def _check_targets(cls, targets: list[str]) -> list[str]:
        from advisor.redact import endpoint_key, redact_url

        seen: dict[str, int] = {}
        for i, url in enumerate(targets):
            key = endpoint_key(url)
            if key in seen:
                raise ValueError(
                    f"targets[{i}] ({redact_url(url)!r}) is one target with targets[{seen[key]}] "
                    f"({redact_url(targets[seen[key]])!r}) once credentials and the query are set aside (the advisor "
                    "labels each target so: a query may carry secrets) and the host and path are written one way "
                    "(case, default port, escapes, dot segments, a trailing slash): the same page listed twice would "
                    "count as two replicas; they must differ in host, port or path"
                )
            seen[key] = i
        return targets

    @field_validator("selector")
    @classmethod
    def _check_selector(cls, selector: str | None) -> str | None:
        if selector is None:
            return None
        from advisor.sources.promql import validate_selector

        return validate_selector(selector)

    @model_validator(mode="after")
    def _source_inputs(self) -> Deployment:
        if self.source == "scrape" and not self.targets and not self.file_sd:
            raise ValueError("targets: at least one /metrics URL (or a file_sd file) is needed with source: scrape")
        if self.source == "prometheus" and not self.selector:
            raise ValueError('selector: needed with source: prometheus (e.g. job="vllm")')
        return self

    @model_validator(mode="after")
    def _gpu_given(self) -> Deployment:
        if self.gpu is None and self.gpu_memory_gib is None:
            raise ValueError(GPU_NEEDED)
        if self.gpu_count is not None and self.gpu_count < self.tensor_parallel_size * self.data_parallel_size:
            raise ValueError(
                f"gpu_count {self.gpu_count} is less than tensor_parallel_size {self.tensor_parallel_size} x "
                f"data_parallel_size {self.data_parallel_size}: each rank needs its own GPU"
            )
        return self

    @model_validator(mode="after")
    def _engine_keys(self) -> Deployment:
        problem = engine_key_error(self, self.engine)
        if problem is not None:
            raise ValueError(problem)
        if self.ctx_size is not None and self.ctx_size < (self.parallel or 1):
            raise ValueError(f"ctx_size: {self.ctx_size} cells cannot give each of {self.parallel} slots one")
        batched, seqs = self.max_num_batched_tokens, self.max_num_seqs
        if self.engine == "vllm" and batched is not None and seqs is not None and batched < seqs:
            raise ValueError(VLLM_BATCHED_BELOW_SEQS.format(batched=batched, seqs=seqs))
        unread = budget_key_error(self.engine, self.gpu_memory_utilization)  # walkthroughs: llama.cpp 0.8, SGLang 0.95
        if unread is not None:
            raise ValueError(unread)
        both = self.parallel is not None and self.max_num_seqs is not None
        if self.engine == "llamacpp" and both and self.parallel != self.max_num_seqs:
            raise ValueError(
                f"parallel: {self.parallel} slots contradicts max_num_seqs: {self.max_num_seqs}; on llama.cpp both "
                "are --parallel (the concurrent requests): give one, or the same value"
            )
        if not self.enable_lora:  # vLLM builds no LoRAConfig without --enable-lora: the other dials do nothing
            from advisor.capacity.lora import LORA_DIALS

            fields = type(self).model_fields
            for key in LORA_DIALS:  # away from its default (a dump re-validated sets every field)
                if getattr(self, key) != fields[key].default:
                    raise ValueError(f"{key}: does nothing without enable_lora: true (vLLM --enable-lora)")
        return self


_PLATFORM_CLOUD: Final = {"vertex": "gcp", "azure-ml": "azure"}
"""The cloud whose machine names a managed platform takes when ``managed_instances.csv`` has no rows for it:
Vertex AI's ``machineSpec.machineType`` is a Compute Engine machine type
(https://cloud.google.com/vertex-ai/docs/reference/rest/v1/MachineSpec), an Azure ML managed online deployment's
``instance_type`` an Azure VM size
(https://learn.microsoft.com/en-us/azure/machine-learning/reference-managed-online-endpoints-vm-sku-list)."""


def known_instance_names() -> list[str]:
    """Every ``instance_type`` a deployment may name: the cloud VMs of ``advisor/data/instances.csv``
    (:func:`advisor.capacity.instances.instance_names`), then each managed platform's rows of
    ``advisor/data/managed_instances.csv`` (:func:`advisor.capacity.managed.managed_instances`)."""
    from advisor.capacity.instances import instance_names
    from advisor.capacity.managed import managed_instances

    return [*instance_names(), *(m.name for p in MANAGED_INSTANCE_PLATFORMS for m in managed_instances(p))]


def instance_type_problem(platform: str, instance_type: str | None, gpu: str | None) -> str | None:
    """Why ``instance_type`` cannot be what a ``platform`` deployment with ``gpu`` runs on, or ``None``:

    * ``bedrock`` rents no instances (Amazon Bedrock serves the model itself): none may be named;
    * ``kubernetes`` and ``systemd`` run on a cloud VM: a name of ``advisor/data/instances.csv``
      (:func:`advisor.capacity.instances.instance_names`), not a managed platform's ``ml.*`` name;
    * ``sagemaker``, ``vertex``, ``azure-ml``: a name of that platform's rows in ``advisor/data/managed_instances.csv``
      (:func:`advisor.capacity.managed.managed_instances`); a platform with no rows takes its cloud's VM names
      (:data:`_PLATFORM_CLOUD`);
    * the instance's GPU (its catalog ``gpu_key``) is the deployment's ``gpu`` (:func:`advisor.capacity.hardware.
      get_gpu`); an unknown ``gpu`` is reported by the catalog check, not here.

    A name in no catalog is the field validator's (``_known_instance``).
    """
    from advisor.capacity.instances import get_instance, instance_names
    from advisor.capacity.managed import managed_instances

    if instance_type is None:
        return None
    if platform == "bedrock":
        return (
            f"{instance_type!r} on platform bedrock: Amazon Bedrock serves the model itself and rents "
            "no instances (throughput is on-demand tokens or Provisioned Throughput model units); remove instance_type"
        )
    managed = {m.name: m for p in MANAGED_INSTANCE_PLATFORMS for m in managed_instances(p)}
    if platform in MANAGED_INSTANCE_PLATFORMS:
        own = {m.name: m.raw.name for m in managed_instances(platform)}
        allowed = list(own) or instance_names(_PLATFORM_CLOUD.get(platform))
        if instance_type not in allowed:
            as_ml = [n for n, raw in own.items() if raw == instance_type]
            hint = f"; did you mean {as_ml[0]!r}?" if as_ml else ""
            where = (
                "its rows of advisor/data/managed_instances.csv" if own else "its cloud's advisor/data/instances.csv"
            )
            return f"{instance_type!r} is not a {platform} instance ({where}){hint}"
        raw_name = own.get(instance_type, instance_type)
    else:
        if instance_type in managed:
            m = managed[instance_type]
            return (
                f"{instance_type!r} is a {m.platform} endpoint instance; platform {platform} runs on "
                f"the cloud VM itself: did you mean {m.raw.name!r}?"
            )
        raw_name = instance_type
    if gpu is None:
        return None
    try:
        spec = get_gpu(gpu)
    except CapacityError:
        return None
    inst = get_instance(raw_name)
    if inst.gpu_key != spec.key:
        return (
            f"{instance_type} has {inst.gpu_model} GPUs, the deployment's gpu is {gpu} ({spec.name}); "
            "set instance_type to an instance with that GPU, or gpu to the instance's"
        )
    return None


def platform_problems(deployments: Sequence[Any]) -> list[tuple[str, str]]:
    """Checks of the raw deployment mappings (so that they are reported beside schema errors) that read the
    platform: each ``instance_type`` fits its platform and GPU (:func:`instance_type_problem`; a name in no catalog
    is left to the field's own check), and no two Kubernetes deployments scale the same Deployment — the same
    effective ``autoscaling.scale_target`` (default the deployment's name) in the same ``autoscaling.namespace``,
    which would be two KEDA ScaledObjects of one name, two scalers fighting over one Deployment. Only
    ``platform: kubernetes`` deployments with an ``autoscaling:`` block get ScaledObjects
    (:func:`advisor.manifests.scale_target_problem`); a
    repeated deployment name is reported as such (:func:`_whole_file_checks`)."""
    known = set(known_instance_names())
    problems: list[tuple[str, str]] = []
    seen: dict[tuple[str, str | None], str] = {}
    for i, dep in enumerate(deployments):
        if not isinstance(dep, Mapping):
            continue
        platform = dep.get("platform", PLATFORM_KUBERNETES)
        if not isinstance(platform, str) or platform not in PLATFORMS:
            continue
        it, gpu = dep.get("instance_type"), dep.get("gpu")
        if isinstance(it, str) and it in known:
            problem = instance_type_problem(platform, it, gpu if isinstance(gpu, str) else None)
            if problem is not None:
                problems.append((f"deployments[{i}].instance_type", problem))
        name, auto = dep.get("name"), dep.get("autoscaling")
        if platform != PLATFORM_KUBERNETES or not isinstance(name, str) or not isinstance(auto, Mapping):
            continue
        target, namespace = auto.get("scale_target", name), auto.get("namespace")
        if not isinstance(target, str) or not (namespace is None or isinstance(namespace, str)):
            continue
        first = seen.setdefault((target, namespace), name)
        if first != name:
            ns = "" if namespace is None else f" in namespace {namespace!r}"
            problems.append(
                (
                    f"deployments[{i}].autoscaling.scale_target",
                    f"deployments {first!r} and {name!r} both scale the Deployment {target!r}{ns}: KEDA would get "
                    "two ScaledObjects of that name, two scalers fighting over one Deployment; set "
                    "autoscaling.scale_target (or autoscaling.namespace) so that each names its own",
                )
            )
    return problems


Receiver = ReceiverConfig
"""A notification receiver (webhook, Slack, Alertmanager): see :class:`advisor.notify.config.ReceiverConfig`."""


class KVSaturationRule(_Strict):
    """KV pool saturation: usage ≥ ``usage_threshold`` with requests waiting or preemptions rising,
    continuously for ``for_``. Resolves once usage stays below ``resolve_below`` with nothing waiting
    (the band between avoids flapping). 0.9 follows vLLM's own guidance that preemption starts as the
    pool fills (docs/configuration/optimization.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)
    enabled: bool = True
    usage_threshold: float = Field(default=0.9, gt=0, le=1)
    resolve_below: float = Field(default=0.8, gt=0, le=1)
    for_: Duration = Field(default=60.0, alias="for")

    @model_validator(mode="after")
    def _band(self) -> KVSaturationRule:
        if self.resolve_below > self.usage_threshold:
            raise ValueError(
                f"resolve_below ({self.resolve_below}) must not exceed usage_threshold ({self.usage_threshold}): "
                "the band between them keeps a recommendation from flapping"
            )
        return self


class GoodputRule(_Strict):
    """Goodput below the SLO's target ratio continuously for ``for_`` → add replicas."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)
    enabled: bool = True
    for_: Duration = Field(default=120.0, alias="for")
    min_requests: int = Field(default=20, ge=1, description="finished requests the window needs to judge")
    target_utilization: float = Field(default=0.8, gt=0, lt=1)


class DataQualityConfig(_Strict):
    """When data is not to be trusted (rules never fire on it)."""

    stale_after_intervals: int = Field(
        default=3, ge=1, description="a target with no new sample for this many scrape intervals is stale"
    )
    frozen_after: Duration = Field(
        default=60.0,
        description="requests running while the token counters stand still this long: the engine is frozen",
    )
    capacity_model_error_bound: float = Field(
        default=0.15, gt=0, le=10, description="warn when the capacity pass misses the engine's pool by more"
    )


class _RuleBase(_Strict):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False)
    enabled: bool = True


class PoolContextRule(_RuleBase):
    """The pool holds fewer than ``min_full_length_requests`` requests of max-model-len: one long request
    can hold the whole pool, and one larger than the pool blocks the queue for good."""

    for_: Duration = Field(default=60.0, alias="for")
    min_full_length_requests: float = Field(default=1.0, gt=0, le=1024)


class AdmissionThrashRule(_RuleBase):
    """A few very long requests hold the pool: usage ≥ ``usage_threshold`` with at most
    ``max_running_per_replica`` running, each holding ≥ ``min_pool_share`` of the pool, and a queue or
    preemptions. More concurrent sequences would only thrash more."""

    for_: Duration = Field(default=120.0, alias="for")
    usage_threshold: float = Field(default=0.9, gt=0, le=1)
    max_running_per_replica: float = Field(default=8, gt=0)
    min_pool_share: float = Field(default=0.1, gt=0, le=1)
    target_concurrency: int = Field(default=8, ge=1, description="sequences a capped context must let fit")


class QueueGrowthRule(_RuleBase):
    """Arrival rate above service rate: the waiting queue grows by ≥ ``min_growth_per_second``."""

    for_: Duration = Field(default=120.0, alias="for")
    min_growth_per_second: float = Field(default=0.05, ge=0)
    target_utilization: float = Field(default=0.8, gt=0, lt=1)


class SeqCapRule(_RuleBase):
    """Running at ``max_num_seqs`` with requests waiting while KV usage is at most ``max_usage``, for ``for`` →
    raise the cap so the pool holds the running and waiting requests at ``max_usage_after`` (and, with a TPOT
    target, no further than the batch that still meets it)."""

    for_: Duration = Field(default=60.0, alias="for")
    max_usage: float = Field(default=0.5, gt=0, lt=1, description="KV usage at or below which the pool has room")
    max_usage_after: float = Field(
        default=0.9, gt=0, le=1, description="KV usage the raised cap may fill at the observed tokens per request"
    )


class PrefixCachingOffRule(_RuleBase):
    """A vLLM V1 engine with prefix caching off whose prompts average at least ``long_prompt_tokens`` and whose TTFT
    past the queue wait averages over the TTFT target, for ``for`` → turn prefix caching on."""

    for_: Duration = Field(default=60.0, alias="for")
    long_prompt_tokens: float = Field(
        default=1024.0, gt=0, le=10_000_000, description="mean prompt tokens from which prefill holds the TTFT"
    )


class AdmissionWedgedRule(_RuleBase):
    """A vLLM engine that holds its queue with room to run it and barely works (vllm-project/vllm#53130): requests
    wait for capacity at every scrape while requests run, a slot is free, the fullest pool is at most ``max_usage``
    full and still, the engine's tokens run under a tenth of its modelled prefill rate, and the window's admitted
    requests waited ``min_wait`` on average (or none was admitted and none finished for ``min_wait``), for ``for`` →
    restart the engine process."""

    for_: Duration = Field(default=60.0, alias="for")
    max_usage: float = Field(default=0.5, gt=0, lt=1, description="KV usage at or below which blocks count as free")
    min_wait: Duration = Field(
        default=60.0,
        description="mean TTFT of the window's admitted requests (or a window with none admitted or finished) that "
        "shows requests are held",
    )


class LoadImbalanceRule(_RuleBase):
    """One replica or data-parallel rank runs 8 or more requests while another runs at most a tenth of that, and the
    deployment strains (goodput below target, a queue or preemptions), for ``for`` → fix the router."""

    for_: Duration = Field(default=60.0, alias="for")


class RankWedgedRule(_RuleBase):
    """A data-parallel rank that holds waiting requests with none running and an empty pool at every scrape of the
    window while another rank runs and tokens flow (sgl-project/sglang#39271), for ``for`` → restart the engine."""

    for_: Duration = Field(default=60.0, alias="for")


class OverProvisionedRule(_RuleBase):
    """Sustained low use with the SLO met: KV usage below ``max_usage`` and fewer than
    ``max_load_ratio`` × the concurrency ceiling running at the window's peak, a steady load (dispersion at most
    ``max_dispersion``), nothing waiting, for ``for`` (long, so a quiet hour does not shrink a fleet). Proposes
    fewer replicas, a lower TP, or a smaller GPU."""

    for_: Duration = Field(default=1800.0, alias="for")
    max_usage: float = Field(default=0.3, gt=0, le=1)
    max_load_ratio: float = Field(default=0.25, gt=0, le=1)
    target_load_ratio: float = Field(default=0.5, gt=0, le=1, description="load per replica sized for")
    max_dispersion: float = Field(
        default=4.0,
        gt=0,
        le=1000,
        description="largest variance ÷ mean of running requests over the window that is a steady load (a steady "
        "Poisson load gives about 1; a lull after a busy spell far more)",
    )


class HostOrBuyRule(_RuleBase):
    """The over-provisioned measure (``max_usage``, ``max_load_ratio``, ``max_dispersion``, as that rule reads
    them) held for ``for`` (days by default: a quiet weekend is not a trend), token-metered offers known for the
    model and the deployment's ``instance_type`` priced: an informational comparison, per million tokens, of
    hosting against buying (advisor.rules.host_or_buy)."""

    for_: Duration = Field(default=72 * 3600.0, alias="for")
    max_usage: float = Field(default=0.3, gt=0, le=1)
    max_load_ratio: float = Field(default=0.25, gt=0, le=1)
    max_dispersion: float = Field(default=4.0, gt=0, le=1000)


class SpeculativeRule(_RuleBase):
    """Small batches with TPOT over target: speculative decoding (disabled again by batch size)."""

    for_: Duration = Field(default=300.0, alias="for")
    max_batch_per_replica: float = Field(default=4, gt=0)
    disable_by_batch_size: int = Field(default=8, ge=1)
    disable_above_batch_per_replica: float = Field(default=32, gt=0)


class KVBudgetRule(_RuleBase):
    """Preemptions with a budget under ``raise_to`` → raise it; ``max_restarts`` restarts of one engine in the window
    (likely OOM) → lower it by ``lower_by``."""

    for_: Duration = Field(default=120.0, alias="for")
    raise_to: float = Field(default=0.9, gt=0, le=0.95)
    max_restarts: int = Field(default=2, ge=1)
    lower_by: float = Field(default=0.05, gt=0, lt=0.5)


class WeightsCrowdRule(_RuleBase):
    """Weights take ≥ ``min_weight_share`` of the budget and the ceiling at max-model-len is below
    ``max_ceiling`` sequences."""

    for_: Duration = Field(default=300.0, alias="for")
    min_weight_share: float = Field(default=0.6, gt=0, lt=1)
    max_ceiling: float = Field(default=8, gt=0)


class ModelDriftRule(_RuleBase):
    """The capacity pass misses the engine's reported pool by more than ``data_quality.capacity_model_error_bound``."""

    for_: Duration = Field(default=300.0, alias="for")


class StalledRule(_RuleBase):
    """A hung engine: requests inside it (waiting, running, or both) while its generation-token, prompt-token and
    finished-request counters stand still for ``min_intervals`` consecutive scrape intervals, then ``for`` →
    restart the engine process (pseudo-dial ``engine_process``). Runs on stale data too: a frozen engine's data is
    stale (``data_quality.frozen_after``), and this rule is what speaks for it."""

    for_: Duration = Field(default=60.0, alias="for")
    min_intervals: int = Field(
        default=3, ge=1, le=10_000, description="consecutive still scrape intervals that make a stall"
    )
    finish_only_counters_for: Duration = Field(
        default=600.0,
        description=(
            "on an engine whose token counters move only when a request finishes (SGLang, TGI, TensorRT-LLM, "
            "llama.cpp), a stall with requests running must last at least this long (and longer than max-model-len "
            "x the mean TPOT); it is then a warning, never critical"
        ),
    )
    observable_intervals: int | None = Field(
        default=None,
        ge=1,
        description=(
            "the most scrape intervals one evaluation sees; `once` sets 1 (fewer than min_intervals: the rule "
            "reports unknown); unset for the daemon"
        ),
    )


class ReplicasConfig(_Strict):
    """How the one replica number per deployment is sized and stabilized (:mod:`advisor.rules.replicas`).

    ``scale_up_window``: the advice scales up only to the lowest raw count of this window (default 60 s; 0 = at
    once). ``scale_down_window``: it scales down only to the highest raw count of this window (default 300 s,
    Kubernetes HPA's ``scaleDown.stabilizationWindowSeconds``). ``drain_seconds``: when set, the count also
    clears the waiting backlog within this time while arrivals go on (default: off). ``min_history``: no replica
    count is proposed from a window spanning less than this (default 30 s,
    :data:`advisor.rules.replicas.MIN_ARRIVAL_SPAN_SECONDS`; the demo's 10× clock sets 4 s = 40 simulated s)."""

    scale_up_window: Window = Field(default=60.0, description="scale up to the lowest raw count of this window")
    scale_down_window: Window = Field(default=300.0, description="scale down to the highest raw count of this window")
    drain_seconds: Duration | None = Field(default=None, description="clear a backlog within this time (off)")
    min_history: Duration = Field(
        default=30.0,
        description="no replica count from a window spanning less (its arrival rate is a momentary backlog)",
    )


def stabilizer_from(cfg: ReplicasConfig) -> ReplicaStabilizer:
    """The daemon's :class:`advisor.rules.replicas.ReplicaStabilizer` for ``rules.replicas``."""
    return ReplicaStabilizer(cfg.scale_up_window, cfg.scale_down_window)


class RulesConfig(_Strict):
    """Thresholds of the rule modules (each documented on its class), plus the cooldown after a resolve."""

    cooldown: Duration = Field(default=300.0, description="a resolved rule opens nothing again for this long")
    resolve_for: Duration = Field(
        default=30.0,
        ge=0,
        le=86_400,
        description=(
            "an open recommendation resolves only after its rules' clear side held this long at every evaluation "
            "(Prometheus's keep_firing_for): one scrape's dip does not resolve it; 0 resolves at the first"
        ),
    )
    pool_context: PoolContextRule = PoolContextRule()
    admission_thrash: AdmissionThrashRule = AdmissionThrashRule()
    queue_growth: QueueGrowthRule = QueueGrowthRule()
    kv_saturation: KVSaturationRule = KVSaturationRule()
    goodput: GoodputRule = GoodputRule()
    speculative_decoding: SpeculativeRule = SpeculativeRule()
    kv_budget: KVBudgetRule = KVBudgetRule()
    weights_crowd: WeightsCrowdRule = WeightsCrowdRule()
    over_provisioned: OverProvisionedRule = OverProvisionedRule()
    seq_cap: SeqCapRule = SeqCapRule()
    prefix_caching_off: PrefixCachingOffRule = PrefixCachingOffRule()
    admission_wedged: AdmissionWedgedRule = AdmissionWedgedRule()
    rank_wedged: RankWedgedRule = RankWedgedRule()
    load_imbalance: LoadImbalanceRule = LoadImbalanceRule()
    host_or_buy: HostOrBuyRule = HostOrBuyRule()
    model_drift: ModelDriftRule = ModelDriftRule()
    stalled: StalledRule = StalledRule()
    replicas: ReplicasConfig = ReplicasConfig()
    plugins: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="settings passed to each entry-point rule plugin, by plugin name"
    )


class ScrapeConfig(_Strict):
    """How targets are scraped."""

    connect_timeout: Duration = 3.0
    read_timeout: Duration = 10.0
    max_bytes: int = Field(default=16 * 1024 * 1024, ge=1024)
    sample_limit: int = Field(
        default=DEFAULT_SAMPLE_LIMIT,
        ge=0,
        description="a page with more sample lines (lines not starting with #) fails the scrape with reason "
        "sample_limit, before it is parsed, as Prometheus's sample_limit; 0 = no limit",
    )
    label_limit: int = Field(
        default=DEFAULT_LABEL_LIMIT,
        ge=0,
        description="a series the advisor reads with more labels fails the scrape with reason sample_limit, as "
        "Prometheus's label_limit; 0 = no limit",
    )


class PrometheusConfig(_Strict):
    """A Prometheus-compatible HTTP API (Prometheus, Thanos, Mimir, VictoriaMetrics) for deployments with
    ``source: prometheus``. Secrets may come from files; they never appear in logs or the API."""

    url: TargetURL
    bearer_token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    headers: dict[str, str] = Field(default_factory=dict, description="e.g. X-Scope-OrgID for Mimir")
    connect_timeout: Duration = 3.0
    read_timeout: Duration = 30.0
    max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=1024,
        le=4 * 1024**3,
        description="cap on one decoded query answer (bytes, at most 4 GiB: the answer is held in memory); a bigger "
        "answer fails the cycle with reason too_large",
    )
    batch_instances: int = Field(
        default=200,
        ge=1,
        description="a selector matching more instances than this is read in batches of this many instances, "
        "one query each (instance=~ matchers); the instances are listed when the series names are",
    )
    federate: bool = Field(
        default=True,
        description="read each cycle's new points from /federate (the newest sample of each series) once the "
        "window is filled; a store without it (404/405: Thanos Querier, Mimir) is read by query_range instead",
    )


class Config(_Strict):
    """The whole configuration file."""

    scrape_interval: Duration = 15.0
    evaluation_window: Duration = 300.0
    deployments: list[Deployment] = Field(min_length=1)
    receivers: list[ReceiverConfig] = Field(default_factory=list)
    outbox_dir: str | None = Field(
        default=None, description="undelivered notifications kept across restarts (relative to this file)"
    )
    runbook_base_url: TargetURL = Field(
        default=RUNBOOK_BASE,
        description="notifications link each rule's runbook section as <this>#<rule>; point it at an internal "
        "wiki copy of rules/runbook.md",
    )

    @field_validator("runbook_base_url")
    @classmethod
    def _runbook_without_credentials(cls, v: str) -> str:
        # every notification carries this URL to third parties (chat, paging): credentials would leak with it
        if urlsplit(v).username is not None or urlsplit(v).password is not None:
            raise ValueError("must not carry credentials (user:password@): every notification shows this URL")
        return v

    rules: RulesConfig = RulesConfig()
    scrape: ScrapeConfig = ScrapeConfig()
    prometheus: PrometheusConfig | None = None
    data_quality: DataQualityConfig = DataQualityConfig()
    state_file: str | None = Field(
        default=None, description="where open recommendations are kept across restarts (relative to this file)"
    )

    @model_validator(mode="after")
    def _unique_names(self) -> Config:
        problems: list[tuple[str, str]] = []
        scrape, prometheus = _whole_file_checks(
            [d.name for d in self.deployments],
            [d.source for d in self.deployments],
            [r.name for r in self.receivers],
            self.scrape_interval,
            self.evaluation_window,
            self.scrape,
            self.prometheus,
            problems,
        )
        if problems:
            raise ConfigError(problems)
        if scrape is self.scrape and prometheus is self.prometheus:
            return self
        return self.model_copy(update={"scrape": scrape, "prometheus": prometheus})


def _whole_file_checks(
    names: Sequence[object],
    sources: Sequence[object],
    receiver_names: Sequence[object],
    interval: float | None,
    window: float | None,
    scrape: ScrapeConfig | None,
    prometheus: PrometheusConfig | None,
    problems: list[tuple[str, str]],
    prometheus_given: bool | None = None,
) -> tuple[ScrapeConfig | None, PrometheusConfig | None]:
    """The checks that read several parts of the file together, appending to ``problems``: names unique,
    ``source: prometheus`` has a ``prometheus:`` section, the interval and window agree, timeouts fit the interval
    (:func:`_fit_timeouts`). Run by :class:`Config` on the validated file, and by :func:`parse_config` on whatever
    parts validate alone when the schema fails (a part that does not is passed as None and its checks skipped), so
    that one run reports every error. Returns ``scrape`` and ``prometheus`` with unset timeouts fitted.

    ``prometheus_given`` says whether the file has a ``prometheus:`` section (default: ``prometheus is not None``).
    """
    for part, listed in (("deployment", names), ("receiver", receiver_names)):
        for i, n in enumerate(listed):
            if isinstance(n, str) and n in listed[:i]:
                first = f"{part}s[{listed.index(n)}]"  # load_config adds its line (_with_first_lines)
                problems.append(
                    (f"{part}s[{i}].name", f"{part} names must be unique: {n!r} repeats, {FIRST_AT} {first}")
                )
    given = prometheus is not None if prometheus_given is None else prometheus_given
    for i, source in enumerate(sources):
        if source == "prometheus" and not given:
            problems.append((f"deployments[{i}].source", "source: prometheus needs the top-level prometheus: {url: …}"))
    if interval is not None and interval < MIN_SCRAPE_INTERVAL_SECONDS:
        problems.append(
            ("scrape_interval", f"must be at least {MIN_SCRAPE_INTERVAL_SECONDS * 1000:g}ms, got {interval:g}s")
        )
    if interval is not None and window is not None and window < interval:
        problems.append(("evaluation_window", f"must be at least scrape_interval ({window:g}s < {interval:g}s)"))
    if interval is None:
        return scrape, prometheus
    fitted_scrape = None if scrape is None else _fit_timeouts(scrape, "scrape", interval, problems)
    fitted_prometheus = None if prometheus is None else _fit_timeouts(prometheus, "prometheus", interval, problems)
    return fitted_scrape, fitted_prometheus


_T = TypeVar("_T", ScrapeConfig, PrometheusConfig)

DEFAULT_DEADLINE_SHARE = 0.8
"""Timeouts the file leaves unset fit a request's deadline in this share of the scrape interval, leaving the rest
for normalize and evaluate (issue 14: defaults that filled the whole interval made every cycle overrun)."""


def _fit_timeouts(section: _T, name: str, interval: float, problems: list[tuple[str, str]]) -> _T:
    """A request's deadline (``connect_timeout + read_timeout``) must fit in one scrape interval, as Prometheus
    requires ``scrape_timeout <= scrape_interval``: otherwise one slow target or query holds up every cycle.
    Timeouts the file sets are checked (a problem naming the field to change, the value that fits and what the two
    take when left unset); one left unset takes what the other leaves of :data:`DEFAULT_DEADLINE_SHARE` of the
    interval (or of the whole interval when that leaves nothing); with neither set, the defaults shrink to that
    share (:func:`_unset_timeouts`).

    Example: ``scrape: {connect_timeout: 3s, read_timeout: 9s}`` at ``scrape_interval: 5s`` → ``scrape.read_timeout:
    … set scrape.read_timeout to at most 2s, or remove both timeouts (at 5s they take 1s + 3s, 80% of
    scrape_interval)``."""
    total = section.connect_timeout + section.read_timeout
    budget = interval * DEFAULT_DEADLINE_SHARE
    explicit = {"connect_timeout", "read_timeout"} & section.model_fields_set
    if not explicit and total <= budget * (1 + 1e-9):
        return section
    if len(explicit) == 1:  # the unset one takes what the set one leaves, if anything
        (given,) = explicit
        other = "read_timeout" if given == "connect_timeout" else "connect_timeout"
        default = getattr(section, other)
        for room in (budget, interval):
            left = room - getattr(section, given)
            if left > 0:
                return section.model_copy(update={other: min(default, left)})
    if explicit and total <= interval * (1 + 1e-9):  # what the file sets is checked against the interval
        return section
    connect, read = _unset_timeouts(section, interval)
    if explicit:
        unset = f"{connect:g}s + {read:g}s, {DEFAULT_DEADLINE_SHARE:.0%} of scrape_interval"  # what fits unset
        if len(explicit) == 1:
            (field_,) = explicit
            other = "read_timeout" if field_ == "connect_timeout" else "connect_timeout"
            message = (
                f"{field_} ({getattr(section, field_):g}s) leaves nothing of scrape_interval ({interval:g}s) for "
                f"{other}: set {name}.{field_} below {interval:g}s ({other} takes what is left), or remove it "
                f"(at {interval:g}s the two take {unset})"
            )
        else:
            room = interval - section.connect_timeout
            field_, fix = (
                ("read_timeout", f"set {name}.read_timeout to at most {room:g}s")
                if room > 0
                else ("connect_timeout", f"set {name}.connect_timeout + read_timeout to at most {interval:g}s")
            )
            message = (
                f"connect_timeout + read_timeout ({total:g}s) must not exceed scrape_interval ({interval:g}s): "
                f"one slow request would hold up every cycle; {fix}, or remove both timeouts "
                f"(at {interval:g}s they take {unset})"
            )
        problems.append((f"{name}.{field_}", message))
        return section
    return section.model_copy(update={"connect_timeout": connect, "read_timeout": read})


def _unset_timeouts(section: ScrapeConfig | PrometheusConfig, interval: float) -> tuple[float, float]:
    """``(connect_timeout, read_timeout)`` in seconds that ``section``'s defaults shrink to at ``interval`` when the
    file sets neither: a deadline of :data:`DEFAULT_DEADLINE_SHARE` of the interval, connect at most a quarter of it
    (and at most its default), read the rest. 15 s → 3 + 9; 5 s → 1 + 3; 4 s → 0.8 + 2.4."""
    budget = interval * DEFAULT_DEADLINE_SHARE
    default = type(section).model_fields["connect_timeout"].default
    connect = min(float(default), budget / 4)
    return connect, budget - connect


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _problems_from(err: ValidationError) -> list[tuple[str, str]]:
    problems = []
    for e in err.errors(include_url=False):
        loc = [p for p in e["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden" and loc and isinstance(loc[-1], str):
            msg = _unknown_key(loc[:-1], loc[-1])
        elif e["type"] == "model_type":
            msg = _not_a_mapping(loc, e.get("input"))
        elif e["type"] == "missing":
            msg = _missing(loc)
        elif e["type"] == "too_short" and isinstance(e.get("input"), list):
            least = (e.get("ctx") or {}).get("min_length", 1)
            msg = f"needs at least {least} entr{'y' if least == 1 else 'ies'}, got {len(e['input'])}"
        elif (
            e["type"] == "string_type"
            and isinstance(e.get("input"), (int, float))
            and not isinstance(e.get("input"), bool)
        ):
            # the number is not echoed: the field may be a secret (a numeric bearer_token, hmac_secret or header
            # value was printed whole by check-config, the reload log and the status page's banner: breaker 20)
            msg = "must be text, not a number: put it in quotes as written (YAML read a number)"
        elif e["type"] == "string_pattern_mismatch":
            pattern = (e.get("ctx") or {}).get("pattern", "")
            msg = f"{_shown(e.get('input'))} does not match the pattern {pattern}"
        problems.append((_loc(loc), msg))
    return problems


def _missing(loc: Sequence[int | str]) -> str:
    """Why a required key is refused: "required", and for a section the keys it needs (read from its model), so
    that ``slo`` missing says ``required: a mapping with ttft_seconds, tpot_seconds`` at once."""
    model = _model_at(loc)
    if model is None:
        return "required"
    needed = [f.alias or name for name, f in model.model_fields.items() if f.is_required()]
    return f"required: a mapping with {', '.join(needed)}" if needed else "required (a mapping)"


def _shown(value: object) -> str:
    """A value as a message quotes it: ``'bad name!'``, at most 40 characters of text."""
    return repr(value[:40]) if isinstance(value, str) else repr(value)


def _not_a_mapping(loc: Sequence[int | str], value: object) -> str:
    """Why a value where a section (a mapping of keys) belongs is refused: what it is, and the keys the section
    takes (read from the config model at ``loc``), instead of pydantic's "Input should be a valid dictionary or
    instance of AutoscalingConfig"."""
    kind = {list: "a list", str: "text", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__
    )
    keys = _fields_at(loc)
    takes = f" (keys: {join_bounded(keys, limit=6)})" if keys else ""
    return f"must be a mapping{takes}, not {kind}"


def _unknown_key(parent: Sequence[int | str], key: str) -> str:
    """Why ``key`` is refused under ``parent``: where it belongs when a part one level down has a field of that name
    (``platform`` at the top level: "not a top-level key; it belongs in each deployments[] entry
    (deployments[0].platform)"), else "unknown key" with the closest known key, if any.

    The places are read from the config models (:func:`_homes`), never listed by hand."""
    here = "a top-level key" if not parent else f"a key of {_loc(parent)}"
    homes = _homes(parent, key)
    if homes:
        return f"not {here}; it belongs in {join_bounded(homes, ' or ', limit=3)}"
    above = _above(parent, key)
    if above is not None:
        return f"not {here}; it belongs {above}"
    known = _fields_at(parent)
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    if not close:  # a key without its unit suffix: ttft → ttft_seconds
        close = [k for k in known if k.startswith(f"{key}_")][:1]
    return f"unknown key; did you mean {close[0]!r}?" if close else "unknown key"


def _homes(parent: Sequence[int | str], key: str) -> list[str]:
    """The parts one level below ``parent`` whose model has a field (or alias) ``key``, each as
    ``"slo (deployments[0].slo.ttft_seconds)"``, or ``"each deployments[] entry (deployments[0].platform)"`` for a
    list of models; ``[]`` when none has it."""
    model = _model_at(parent)
    if model is None:
        return []
    out = []
    for name, f in model.model_fields.items():
        child = _model_in(f.annotation)
        if child is None or key not in _names_of(child):
            continue
        part = f.alias or name
        if _is_list(f.annotation):
            where = _loc([*parent, part, 0, key])
            out.append(f"each {_loc([*parent, part])}[] entry ({where})")
        else:
            out.append(f"{part} ({_loc([*parent, part, key])})")
    return out


def _above(parent: Sequence[int | str], key: str) -> str | None:
    """Where ``key`` belongs when a model above ``parent`` has it (the nearest): ``"at the top level
    (scrape_interval)"`` or ``"in deployments[0] (deployments[0].gpu)"``; ``None`` when none does."""
    for cut in range(len(parent) - 1, -1, -1):
        at = parent[:cut]
        if at and isinstance(at[-1], str) and _is_list_field(at):
            continue  # a list's own path (deployments) is no mapping: its entries (deployments[0]) are
        model = _model_at(at)
        if model is not None and key in _names_of(model):
            return f"at the top level ({key})" if not at else f"in {_loc(at)} ({_loc([*at, key])})"
    return None


def _is_list_field(loc: Sequence[int | str]) -> bool:
    """Whether the field ``loc`` ends at is a list of models (``deployments``)."""
    owner = _model_at(loc[:-1])
    field_ = None if owner is None else owner.model_fields.get(loc[-1])
    return field_ is not None and _is_list(field_.annotation)


def _is_list(annotation: Any) -> bool:
    """Whether ``annotation`` is a list (``list[Deployment]``, ``list[X] | None``)."""
    if getattr(annotation, "__origin__", None) is list:
        return True
    return any(_is_list(a) for a in getattr(annotation, "__args__", ()) if a is not annotation)


def _names_of(model: Any) -> list[str]:
    """The keys a config model takes: each field's alias, else its name."""
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_at(loc: Sequence[int | str]) -> Any:
    """The config model found by following ``loc`` from :class:`Config` (list indexes skipped), or ``None`` where
    the path leaves the models (a mapping, an unknown key)."""
    model: Any = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field_ = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field_ is None:
            return None
        model = _model_in(field_.annotation)
        if model is None:
            return None
    return model


def _fields_at(loc: Sequence[int | str]) -> list[str]:
    """The field names (and aliases) of the config model found by following ``loc`` from :class:`Config`
    (list indexes skipped); ``[]`` where the path leaves the models (a mapping, an unknown key)."""
    model = _model_at(loc)
    return [] if model is None else _names_of(model)


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside an annotation (``Deployment``, ``list[Deployment]``, ``X | None``), or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that repeats a key: plain PyYAML keeps the last value, so a
    second ``targets:`` or ``slo:`` would silently replace the first. Keys brought in by a ``<<`` merge may be
    overridden, as YAML intends."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        """Build one node; a value PyYAML's constructors cannot build (an impossible date such as
        ``2020-13-45``, ``!!bool maybe``, an int of 5,000 digits) is a YAML error at that node, not a crash."""
        try:
            return super().construct_object(node, deep=deep)
        except (yaml.YAMLError, RecursionError):
            raise
        except Exception as exc:
            kind = node.tag.rsplit(":", 1)[-1]
            plain = isinstance(node, yaml.ScalarNode) and not node.style
            hint = "; quote it to make it a string" if plain and kind in ("timestamp", "int", "float") else ""
            raise yaml.constructor.ConstructorError(
                None, None, f"not a valid {kind} ({type(exc).__name__}){hint}", node.start_mark
            ) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):  # e.g. !!set on a sequence: the base reports it
            return super().construct_mapping(node, deep=deep)
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: the base constructor reports it
                continue
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first set on line {first + 1})", key_node.start_mark
                )
            seen[key] = key_node.start_mark.line
        return super().construct_mapping(node, deep=deep)


def yaml_problem(exc: yaml.YAMLError, text: str | None = None) -> tuple[str, str]:
    """``(where, message)`` for a YAML error: ``line N, column M`` and PyYAML's one-line problem, never its
    snippet of the offending line (which may hold a secret). A character YAML refuses (a control character:
    PyYAML's ``ReaderError``, which carries a position in the stream, not a mark) is located in ``text`` when
    given, and named by its code point."""
    if isinstance(exc, yaml.reader.ReaderError):
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        where = FILE_PROBLEM
        if text is not None and 0 <= exc.position <= len(text):
            before = text[: exc.position]
            where = f"line {before.count(chr(10)) + 1}, column {exc.position - (before.rfind(chr(10)) + 1) + 1}"
        return where, f"not valid YAML: character U+{code:04X} is not allowed (a control character)"
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else FILE_PROBLEM
    problem = getattr(exc, "problem", None) or type(exc).__name__
    return where, f"not valid YAML: {problem}"


def load_yaml(text: str) -> Any:
    """Parse YAML safely, refusing repeated keys.

    Raises:
        yaml.YAMLError: not YAML, or a mapping repeats a key (``problem_mark`` locates it).
        RecursionError: absurdly deep nesting.
    """
    return yaml.load(text, Loader=_UniqueKeyLoader)


def file_sd_targets(path: Path, metrics_path: str) -> list[str]:
    """The scrape URLs a Prometheus ``file_sd`` file (JSON or YAML) lists: ``[{"targets": ["host:port", …],
    "labels": {…}}, …]``; the labels ``__scheme__`` and ``__metrics_path__`` set each URL's scheme and path.

    Raises:
        ConfigError: unreadable, not UTF-8, not JSON/YAML, not that shape, or a target that is not a valid
            http(s) URL — naming the file and the entry.
    """
    where = f"file_sd {str(path)!r}"
    try:
        data = load_yaml(read_text_capped(path))
    except OSError as exc:
        raise ConfigError([(where, f"cannot read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError:
        raise ConfigError([(where, "not UTF-8 text")]) from None
    except (yaml.YAMLError, RecursionError) as exc:
        raise ConfigError([(where, f"not JSON or YAML: {type(exc).__name__}")]) from None
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError([(where, "must be a list of {targets: [...], labels: {...}}")])
    urls: list[str] = []
    problems: list[tuple[str, str]] = []
    for i, group in enumerate(data):
        if not isinstance(group, dict) or not isinstance(group.get("targets"), list):
            problems.append((f"{where}[{i}]", "needs a targets list"))
            continue
        labels = group.get("labels") or {}
        if not isinstance(labels, dict):
            problems.append((f"{where}[{i}].labels", "must be a mapping of label names to values"))
            continue
        scheme = str(labels.get("__scheme__", "http"))
        path_ = str(labels.get("__metrics_path__", metrics_path))
        if not path_.startswith("/"):
            problems.append((f"{where}[{i}].labels.__metrics_path__", "must start with /"))
            continue
        for j, hostport in enumerate(group["targets"]):
            if not isinstance(hostport, str) or not hostport or "/" in hostport or "@" in hostport:
                problems.append((f"{where}[{i}].targets[{j}]", "must be a host:port string"))
                continue
            url = f"{scheme}://{hostport}{path_}"
            try:
                check_http_url(url)
            except ValueError as exc:
                problems.append((f"{where}[{i}].targets[{j}]", str(exc)))
                continue
            if url not in urls:
                urls.append(url)
    if problems:
        raise ConfigError(problems)
    return urls


GIB = 1024**3


def gpu_spec(dep: Deployment) -> GPUSpec | None:
    """The catalog part ``dep`` runs on, as :func:`advisor.capacity.deployment.resolve_gpu` identifies it from
    ``gpu`` and ``gpu_memory_gib`` (``None`` when no one part is meant, e.g. a memory several parts have).

    Raises:
        CapacityError: the name is not in the catalog and no memory is given.
    """
    memory = None if dep.gpu_memory_gib is None else int(dep.gpu_memory_gib * GIB)
    return resolve_gpu(dep.gpu, memory).part


def deployment_spec(
    dep: Deployment, base_dir: Path | None = None, engine: str | None = None, model: ModelArch | None = None
) -> DeploymentSpec:
    """The frozen :class:`~advisor.capacity.deployment.DeploymentSpec` of a configured deployment, for the one
    resolver (:func:`advisor.capacity.deployment.resolve_deployment`) the API, ``plan``, ``simulate`` and the
    search use too.

    ``engine`` sizes the deployment as that engine (``engine: auto`` once the engine is detected); ``model``
    an architecture already resolved from ``dep.model`` (nothing is read again).

    Raises:
        CapacityError: the model cannot be resolved.
    """
    if model is None:
        model = resolve_model(dep.model, base_dir)
    if dep.language_model_only or (engine or dep.engine) in LANGUAGE_MODEL_ONLY_ENGINES:
        model = without_unused_vision_tower(model, language_model_only_limits())
    elif dep.limit_mm_per_prompt:
        model = without_unused_vision_tower(model, dep.limit_mm_per_prompt)
    model, quantization = as_served(
        model, dep.gguf_file_type, dep.quantization, names=("gguf_file_type", "quantization")
    )
    kv_config = dep.kv_cache_config or TRTLLMKVCacheConfig()
    spec = spec_from_settings(
        dep,
        engine=engine or dep.engine,
        model=model,
        gpu_memory_utilization=dep.gpu_memory_utilization if "gpu_memory_utilization" in dep.model_fields_set else None,
        free_gpu_memory_fraction=kv_config.free_gpu_memory_fraction,
        max_tokens=kv_config.max_tokens,
    )
    # vLLM-only keys (ENGINE_KEYS refuses them for other engines)
    return dataclasses.replace(
        spec,
        quantization=quantization,
        lora=LoRASettings(
            max_loras=dep.max_loras,
            max_lora_rank=dep.max_lora_rank,
            lora_extra_vocab_size=dep.lora_extra_vocab_size,
            lora_dtype=dep.lora_dtype,
            fully_sharded_loras=dep.fully_sharded_loras,
        )
        if dep.enable_lora
        else None,
    )


def capacity_inputs(
    dep: Deployment, base_dir: Path | None = None, engine: str | None = None, model: ModelArch | None = None
) -> CapacityInputs:
    """Map a deployment to the capacity pass's inputs under its engine's own accounting
    (:func:`deployment_spec` → :func:`advisor.capacity.deployment.deployment_inputs`, the one mapping ``plan``,
    the API and ``simulate`` use too).

    ``gpu_memory_gib`` and ``gpu_memory_used_by_others_gib`` (GiB = 2^30 bytes): the device memory (overriding
    the catalog's, and naming the part when only one has it) and what other processes hold on it.

    Raises:
        CapacityError: the model or GPU cannot be resolved.
    """
    return deployment_inputs(deployment_spec(dep, base_dir, engine, model))


GPU_NEEDED: Final = "set gpu (a catalog name) or gpu_memory_gib"
"""A deployment names neither its GPU nor its memory (the schema's check, and the raw-mapping one beside the schema's
errors: a fresh user met it only in a second run, after fixing a missing max_model_len, 2026-12-06)."""


def _semantic_problems(deployments: Sequence[Any], base_dir: Path | None) -> list[tuple[str, str]]:
    """Checks needing the catalogs, run on the raw deployment mappings so that they are reported
    together with schema errors: the model resolves, the GPU is known (or given at all), the context fits the
    model."""
    problems: list[tuple[str, str]] = []
    for i, dep in enumerate(deployments):
        if not isinstance(dep, Mapping):
            continue
        where = f"deployments[{i}]"
        if dep.get("gpu") is None and dep.get("gpu_memory_gib") is None:
            problems.append((where, GPU_NEEDED))
        # the engine's keys, worded as the schema's own check words them: said beside the field errors that stop it
        # (walkthrough, 2026-12-07: mem_fraction_static on vLLM surfaced only once three other fields were fixed)
        engine = dep.get("engine", Deployment.model_fields["engine"].default)
        if isinstance(engine, str):
            for unread in (
                engine_key_error(dep, engine, Deployment),
                budget_key_error(engine, dep.get("gpu_memory_utilization")),
            ):
                if unread is not None:
                    problems.append((where, unread))
        model = dep.get("model")
        arch: ModelArch | None = None
        if isinstance(model, str) and model:
            try:
                arch = resolve_model(model, base_dir)
            except CapacityError as exc:
                problems.append((f"{where}.model", str(exc)))
        gpu = dep.get("gpu")
        if isinstance(gpu, str):
            try:
                get_gpu(gpu)
            except CapacityError as exc:
                problems.append((f"{where}.gpu", str(exc)))
        mml = dep.get("max_model_len")
        if arch is not None and isinstance(mml, int) and not isinstance(mml, bool):
            beyond = context_problem(mml, arch)
            if beyond is not None:
                problems.append((f"{where}.max_model_len", beyond))
    return problems


def context_problem(max_model_len: int, arch: ModelArch) -> str | None:
    """Why ``max_model_len`` tokens exceed ``arch``'s context (:attr:`ModelArch.context_tokens`), as a config file and
    ``POST /api/v1/plan`` refuse it (vLLM's ``_get_and_verify_max_len`` raises unless
    ``VLLM_ALLOW_LONG_MAX_MODEL_LEN`` is set); None when it fits."""
    if max_model_len <= arch.context_tokens:
        return None
    return (
        f"{max_model_len} exceeds the model's context of {arch.context_tokens} tokens "
        f"({arch.context_words}); vLLM refuses this unless VLLM_ALLOW_LONG_MAX_MODEL_LEN is set"
    )


def _beside(base_dir: Path | None, path: str) -> Path:
    """``path`` as the daemon reads it: relative paths from the config file's folder ``base_dir`` (when known)."""
    return Path(path) if base_dir is None or Path(path).is_absolute() else base_dir / path


def _file_problems(deployments: Sequence[tuple[int, Deployment]], base_dir: Path | None) -> list[tuple[str, str]]:
    """file_sd files that exist must parse (``deployments``: each with its index in the file). Whether files and
    folders exist at all is checked when the daemon starts (:func:`check_runtime_paths`): a config is often checked
    on another machine than it runs on."""
    problems: list[tuple[str, str]] = []
    for i, dep in deployments:
        for f in dep.file_sd:
            p = _beside(base_dir, f)
            if not p.exists():
                continue
            try:
                file_sd_targets(p, dep.metrics_path)
            except ConfigError as exc:
                problems += [(f"deployments[{i}].file_sd: {path}", msg) for path, msg in exc.problems]
    return problems


def check_runtime_paths(cfg: Config, base_dir: Path | None) -> None:
    """At daemon start: the state file is a regular file or absent (the daemon reads only regular files:
    :func:`advisor.files.read_text_capped`), its folder exists and is writable, the outbox path is a folder (or can
    be made).

    Raises:
        ConfigError: naming the field and the path.
    """
    problems: list[tuple[str, str]] = []
    if cfg.state_file is not None:
        p = _beside(base_dir, cfg.state_file)
        if p.is_dir():
            problems.append(("state_file", f"{str(p)!r} is a folder; give a file path"))
        elif p.exists() and not p.is_file():
            problems.append(("state_file", f"{str(p)!r} is not a regular file (a FIFO, socket or device)"))
        elif not p.parent.is_dir():
            problems.append(("state_file", f"the folder {str(p.parent)!r} does not exist"))
        elif not os.access(p.parent, os.W_OK):
            problems.append(("state_file", f"the folder {str(p.parent)!r} is not writable"))
    if cfg.outbox_dir is not None:
        p = _beside(base_dir, cfg.outbox_dir)
        if p.exists() and not p.is_dir():
            problems.append(("outbox_dir", f"{str(p)!r} exists and is not a folder"))
    if problems:
        raise ConfigError(problems)


def runtime_path_warnings(cfg: Config, base_dir: Path | None) -> list[str]:
    """What the daemon would refuse at start on this machine (:func:`check_runtime_paths`, and file_sd files that
    do not exist), as warnings for ``check-config``: a config is often checked on another machine than it runs on,
    so these do not make it invalid, but an operator checking on the host itself learns them before ``run``."""
    problems: list[tuple[str, str]] = []
    try:
        check_runtime_paths(cfg, base_dir)
    except ConfigError as exc:
        problems += exc.problems
    for i, dep in enumerate(cfg.deployments):
        for f in dep.file_sd:
            p = _beside(base_dir, f)
            if not p.is_file():
                problems.append((f"deployments[{i}].file_sd", f"{str(p)!r} is not a readable file here"))
    return [f"on this machine the daemon would refuse to start: {where}: {why}" for where, why in problems]


def _capacity_problems(deployments: Sequence[tuple[int, Deployment]], base_dir: Path | None) -> list[tuple[str, str]]:
    """The capacity pass runs for every deployment (the weights fit, TP splits the heads); ``deployments``: each
    with its index in the file."""
    problems: list[tuple[str, str]] = []
    for i, dep in deployments:
        try:
            capacity_pass(capacity_inputs(dep, base_dir))
        except CapacityError as exc:
            problems.append((f"deployments[{i}]", str(exc)))
    return problems


def parse_config(data: Any, source: str = "config", base_dir: Path | None = None) -> Config:
    """Validate already-loaded YAML data, reporting every problem in one run: the schema, the checks that read
    several parts together (:func:`_whole_file_checks`), the catalogs (:func:`_semantic_problems`), the capacity
    pass, file_sd files, the prometheus section and rule plugins. When the schema fails, the later checks run on
    each part that validates alone (:func:`_parts`), so a duplicate name or a deployment that does not fit is
    reported with the bad duration beside it, not in a second run.

    Raises:
        ConfigError: with every problem found, each ``(path, message)``.
    """
    if data is None:  # an empty file, or one of comments only: nothing to validate, and no field is wrong
        empty = "empty: no deployments (deploy/advisor.example.yaml is a complete example)"
        raise ConfigError([(FILE_PROBLEM, empty)], source)
    if not isinstance(data, Mapping):
        kind = "a list" if isinstance(data, list) else "a single value"
        raise ConfigError([(FILE_PROBLEM, f"the file must be a YAML mapping (deployments: …), not {kind}")], source)
    raw_deployments = data.get("deployments")
    semantic = _semantic_problems(raw_deployments if isinstance(raw_deployments, list) else [], base_dir)
    # a deployment whose model or GPU is unknown is not sized: its problem is already said
    unsized = {m.group(1) for path, _ in semantic if (m := re.match(r"deployments\[(\d+)\]", path))}
    problems: list[tuple[str, str]] = []
    cfg: Config | None = None
    try:
        cfg = Config.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as err:
        problems = _problems_from(err)
    except ConfigError as err:  # the whole-file checks failed, every field valid
        problems = err.problems
    rules: RulesConfig | None
    if cfg is not None:
        deployments = list(enumerate(cfg.deployments))
        prometheus, rules = cfg.prometheus, cfg.rules
    else:
        parts = _parts(data, base_dir)
        deployments = parts.deployments
        prometheus, rules = parts.prometheus, parts.rules
        whole: list[tuple[str, str]] = []
        _whole_file_checks(
            parts.names,
            parts.sources,
            parts.receiver_names,
            parts.interval,
            parts.window,
            parts.scrape,
            parts.prometheus,
            whole,
            prometheus_given=parts.prometheus_given,
        )
        problems += [p for p in whole if p not in problems]  # Config's own run of them, when it got that far
    sized = [(i, d) for i, d in deployments if str(i) not in unsized]
    problems += [p for p in semantic if p not in problems]  # the schema's own GPU check, when it got that far
    problems += (
        platform_problems(raw_deployments if isinstance(raw_deployments, list) else [])
        + _capacity_problems(sized, base_dir)
        + _file_problems(deployments, base_dir)
        + _prometheus_problems(prometheus)
        + _plugin_problems(rules)
    )
    if problems or cfg is None:
        raise ConfigError(problems, source)
    return cfg


@dataclasses.dataclass(frozen=True)
class _Parts:
    """The parts of a file whose schema failed, each validated alone (None, or left out, where it fails too)."""

    names: list[object]
    sources: list[object]
    receiver_names: list[object]
    interval: float | None
    window: float | None
    scrape: ScrapeConfig | None
    prometheus: PrometheusConfig | None
    prometheus_given: bool
    rules: RulesConfig | None
    deployments: list[tuple[int, Deployment]]


def _parts(data: Mapping[str, Any], base_dir: Path | None) -> _Parts:
    """Validate each part of ``data`` alone (:class:`_Parts`): the later checks of :func:`parse_config` then run on
    what is valid when another part is not."""
    context = {"base_dir": base_dir}

    def alone(model: type[_M], value: Any) -> _M | None:
        try:
            return model.model_validate(value, context=context)
        except (ValidationError, ConfigError):
            return None

    def duration(key: str) -> float | None:
        try:
            return parse_duration(data.get(key, Config.model_fields[key].default))
        except ValueError:
            return None

    raw_deps = data.get("deployments")
    deps = raw_deps if isinstance(raw_deps, list) else []
    raw_receivers = data.get("receivers")
    receivers = raw_receivers if isinstance(raw_receivers, list) else []
    deployments = []
    for i, raw in enumerate(deps):
        dep = alone(Deployment, raw) if isinstance(raw, Mapping) else None
        if dep is not None:
            deployments.append((i, dep))
    raw_prometheus = data.get("prometheus")
    return _Parts(
        names=[d.get("name") if isinstance(d, Mapping) else None for d in deps],
        sources=[d.get("source") if isinstance(d, Mapping) else None for d in deps],
        receiver_names=[r.get("name") if isinstance(r, Mapping) else None for r in receivers],
        interval=duration("scrape_interval"),
        window=duration("evaluation_window"),
        scrape=alone(ScrapeConfig, data.get("scrape", {})),
        prometheus=None if raw_prometheus is None else alone(PrometheusConfig, raw_prometheus),
        prometheus_given=raw_prometheus is not None,
        rules=alone(RulesConfig, data.get("rules", {})),
        deployments=deployments,
    )


_M = TypeVar("_M", bound=BaseModel)


_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
"""An HTTP field name (RFC 9110 token)."""


def _prometheus_problems(pc: PrometheusConfig | None) -> list[tuple[str, str]]:
    """What the ``prometheus`` section's fields mean together: one kind of auth, a URL without user-info or
    query, a CA only for https, headers HTTP can send."""
    if pc is None:
        return []
    problems: list[tuple[str, str]] = []
    if pc.bearer_token_file is not None and (pc.username is not None or pc.password_file is not None):
        problems.append(("prometheus.bearer_token_file", "give either bearer_token_file or username/password_file"))
    elif (pc.username is None) != (pc.password_file is None):
        missing = "password_file" if pc.username is not None else "username"
        problems.append((f"prometheus.{missing}", "basic auth needs both username and password_file"))
    parts = urlsplit(pc.url)
    if parts.username is not None or parts.password is not None:
        problems.append(("prometheus.url", "must not carry user-info; use username/password_file"))
    if parts.query or parts.fragment:
        problems.append(("prometheus.url", "must not have a query string or fragment"))
    if pc.ca_file is not None and parts.scheme != "https":
        problems.append(("prometheus.ca_file", "a CA file is only used with an https:// url"))
    if pc.username is not None and not _sendable(pc.username):
        problems.append(("prometheus.username", "must be printable Latin-1 text on one line"))
    for name, value in pc.headers.items():
        where = f"prometheus.headers.{name!r}" if not _HEADER_NAME.match(name) else f"prometheus.headers.{name}"
        if not _HEADER_NAME.match(name):
            problems.append((where, "not a valid HTTP header name"))
        elif name.lower() == "authorization" and (pc.bearer_token_file or pc.username):
            problems.append((where, "conflicts with bearer_token_file / username: give one way to authenticate"))
        elif not _sendable(value):
            problems.append((where, "the value must be printable Latin-1 text on one line"))
    return problems


def _sendable(text: str) -> bool:
    """True when ``text`` can go in an HTTP header as is: Latin-1, no control characters (CR, LF, NUL …)."""
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return False
    return all(ch == "\t" or (" " <= ch <= "~") or ord(ch) >= 0xA0 for ch in text)


def _plugin_problems(rules: RulesConfig | None) -> list[tuple[str, str]]:
    """``rules.plugins.<name>`` settings for a plugin that is not installed would be silently unused."""
    if rules is None or not rules.plugins:
        return []
    installed = sorted({ep.name for ep in entry_points(group=RULE_PLUGIN_GROUP)})
    return [
        (
            f"rules.plugins.{name}",
            f"no rule plugin named {name!r} is installed (entry points {RULE_PLUGIN_GROUP!r}: "
            + (", ".join(installed) if installed else "none")
            + ")",
        )
        for name in rules.plugins
        if name not in installed
    ]


class _CollectingLoader(_UniqueKeyLoader):
    """:class:`_UniqueKeyLoader` that records a repeated key as a problem and reads on (the later value wins, as
    plain PyYAML's), so check-config reports it with the file's other errors instead of stopping there."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.repeated: list[tuple[str, str]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        try:
            return super().construct_mapping(node, deep=deep)
        except yaml.constructor.ConstructorError as exc:
            if not (exc.problem or "").startswith("duplicate key"):
                raise
            self.repeated.append(yaml_problem(exc))
            return yaml.SafeLoader.construct_mapping(self, node, deep=deep)


_PATH_PART = re.compile(r"\.?([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")


def line_of(root: yaml.Node | None, path: str) -> int | None:
    """The 1-based line a problem's ``path`` (``deployments[1].slo.ttft_seconds``) is on in the file whose node tree
    is ``root`` (PyYAML's ``compose``; ``start_mark.line`` is 0-based): the key's line, or where the path leaves the
    file (a required field that is missing), the line of the deepest part that is there. None for a path that
    names no part of the file (``line 3, column 5``, ``(file)``)."""
    if root is None or not isinstance(root, yaml.MappingNode):
        return None
    node: yaml.Node = root
    line: int | None = None
    pos = 0
    while pos < len(path):
        m = _PATH_PART.match(path, pos)
        if m is None:
            break
        pos = m.end()
        key, index = m.group(1), m.group(2)
        if key is not None and isinstance(node, yaml.MappingNode):
            found = [(k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key]
            if not found:
                break
            key_node, node = found[-1]
            line = key_node.start_mark.line + 1
        elif index is not None and isinstance(node, yaml.SequenceNode) and int(index) < len(node.value):
            node = node.value[int(index)]
            line = node.start_mark.line + 1
        else:
            break
    return line


def replica_history_warnings(cfg: Config) -> list[str]:
    """A warning when evaluations cannot always hold the arrival-rate history a replica count needs
    (:func:`advisor.rules.replicas.arrival_history_withheld`, which reads a span at the scrapes' resolution:
    :func:`advisor.rules.replicas.spans_at_least`). ``evaluation_window`` holds ``⌊window ÷ scrape_interval⌋``
    scrapes at most phases (spanning one interval less) and one more when a scrape lands on the window's first
    instant; both must reach ``rules.replicas.min_history`` over :data:`~advisor.rules.replicas.MIN_ARRIVAL_SCRAPES`
    scrapes. Where neither does, the replica advice and the lead of ``advisor_desired_replicas`` are withheld on every
    cycle (breaker, 2026-12-04: ``min_history: 10m`` beside a 5m window, and a 2m scrape interval beside it, both
    passed as valid); where only the second does, they come and go with the scrapes' phase. Empty when every window
    can."""
    window, interval = cfg.evaluation_window, cfg.scrape_interval
    need = cfg.rules.replicas.min_history
    steps = math.floor(window / interval + 1e-9)

    def holds(scrapes: int) -> bool:
        return scrapes >= MIN_ARRIVAL_SCRAPES and spans_at_least((scrapes - 1) * interval, need, interval, window)

    if holds(steps):
        return []
    fix = "lengthen evaluation_window, scrape more often or lower min_history"
    if holds(steps + 1):
        return [
            f"replica counts will come and go: evaluation_window {window:g}s at scrape_interval {interval:g}s holds "
            f"{steps} scrape(s) spanning {(steps - 1) * interval:g}s on most cycles ({steps + 1} spanning "
            f"{steps * interval:g}s only when a scrape lands on the window's first instant), and a replica count "
            f"needs ≥ {need:g}s (rules.replicas.min_history) over ≥ {MIN_ARRIVAL_SCRAPES} scrapes: {fix}"
        ]
    return [
        f"no replica count can ever be proposed: evaluation_window {window:g}s at scrape_interval {interval:g}s "
        f"holds at most {steps + 1} scrape(s) spanning {steps * interval:g}s, and a replica count needs ≥ {need:g}s "
        f"(rules.replicas.min_history) over ≥ {MIN_ARRIVAL_SCRAPES} scrapes: {fix}"
    ]


def shared_targets(cfg: Config) -> list[str]:
    """Warnings, one per pair, for a target two deployments both scrape for the same model (``served_model``, else
    ``model``): the same engine counted twice, usually a copied block whose URL was not changed. Deployments that
    read different models of one multi-model page (each its own ``served_model``) are not warned about.

    Example: ``"deployments 'b' and 'a' both scrape http://10.0.0.5:8000/metrics for the same model: the same
    engine twice (change the URL, or set served_model on each if the page serves several models)"``.
    """
    from advisor.redact import endpoint_key, redact_url

    first: dict[tuple[str, str], str] = {}
    out: list[str] = []
    for d in cfg.deployments:
        model = (d.served_model or d.model).lower()
        for url in d.targets:
            key = (endpoint_key(url), model)
            other = first.setdefault(key, d.name)
            if other != d.name:
                out.append(
                    f"deployments {d.name!r} and {other!r} both scrape {redact_url(url)} for the same model: the same "
                    "engine twice (change the URL, or set served_model on each if the page serves several models)"
                )
    return out


def load_config(path: str | Path, text: str | None = None, base_dir: Path | None = None) -> Config:
    """Read and validate a YAML config file; every problem carries the line it is on (:func:`line_of`), problems
    in the order of the file.

    ``text``: the config's text already read (standard input or a pipe, :func:`advisor.files.read_stream_capped`);
    ``path`` then only names it in messages. ``base_dir``: the directory relative paths in it (model config.json,
    file_sd, secrets) resolve against; default the file's own directory.

    Raises:
        ConfigError: the file cannot be read, is not YAML, or has invalid fields (all of them listed).
    """
    p = Path(path)
    if text is None:
        try:
            text = read_text_capped(p)
        except OSError as exc:
            raise ConfigError([(FILE_PROBLEM, f"cannot read: {exc.strerror or exc}")], str(p)) from None
        except UnicodeDecodeError:
            raise ConfigError([(FILE_PROBLEM, "not UTF-8 text")], str(p)) from None
    try:
        loader = _CollectingLoader(text)  # PyYAML checks the characters here (ReaderError)
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_problem(exc, text)], str(p)) from None
    try:
        root = loader.get_single_node()
        data = None if root is None else loader.construct_document(root)
    except RecursionError:
        raise ConfigError([(FILE_PROBLEM, "not valid YAML: nested too deeply")], str(p)) from None
    except yaml.YAMLError as exc:
        raise ConfigError([yaml_problem(exc, text)], str(p)) from None
    finally:
        loader.dispose()
    problems = list(loader.repeated)
    try:
        cfg = parse_config(data, source=str(p), base_dir=base_dir or p.parent.resolve())
    except ConfigError as exc:
        problems += exc.problems
    if not problems:
        return cfg
    placed = sorted(
        ((_yaml_line(where) or line_of(root, where), where, _with_first_lines(msg, root)) for where, msg in problems),
        key=lambda t: t[0] if t[0] is not None else 0,
    )
    raise ConfigError(
        [(where, msg) for _, where, msg in placed],
        str(p),
        [None if where.startswith("line ") else line for line, where, _ in placed],
    )


FIRST_AT: Final = "first at"
"""How a problem that repeats an earlier part names that part (``first at deployments[0]``); :func:`load_config`
adds the part's line, as a duplicate YAML key says "first set on line N"."""

_FIRST_AT_PART: Final = re.compile(rf"{FIRST_AT} ((?:deployments|receivers)\[\d+\])$")


def _with_first_lines(message: str, root: yaml.Node | None) -> str:
    """``message`` with the earlier part it names (``first at deployments[0]``) placed on its line in the file:
    ``first at line 2 (deployments[0])``, the line of that part's ``name`` (:func:`line_of`); unchanged when the
    message names none or the line is not known."""
    m = _FIRST_AT_PART.search(message)
    line = None if m is None else line_of(root, m.group(1) + ".name")
    if m is None or line is None:
        return message
    return message[: m.start()] + f"{FIRST_AT} line {line} ({m.group(1)})"


def _yaml_line(where: str) -> int | None:
    """The line of a YAML error's ``line N, column M`` (:func:`yaml_problem`), for ordering; None otherwise."""
    m = re.match(r"line (\d+), column", where)
    return int(m.group(1)) if m else None
