"""Request and response shapes of ``/api/v1``, and the OpenAPI 3.1 document built from them.

Requests are validated with pydantic (unknown fields are errors, so a typo is reported rather than
ignored); :func:`validation_details` turns pydantic's errors into ``{"path", "message"}`` pairs with
dotted field paths. Response models exist for the document (JSON Schema 2020-12, as OpenAPI 3.1 uses);
the server builds responses from the domain objects' ``as_dict``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.json_schema import models_json_schema

from advisor import __version__
from advisor.engines import catalog
from advisor.rules.turns import FIELD_FOR_DIAL

MAX_BODY_BYTES = 1024 * 1024
"""Largest request body accepted (1 MiB); larger ones are answered 413."""

MAX_SNOOZE_SECONDS = 90 * 86400.0
"""Longest snooze (90 days): past that, acknowledge instead (until the recommendation resolves)."""

DURATION_PATTERN = r"^\s*(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?\s*$"
"""A Prometheus-style duration (the document's pattern; :func:`parse_snooze_duration` checks the rest)."""
_DURATION_RE = re.compile(r"^(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
_UNITS = (7 * 86400, 86400, 3600, 60, 1, 0.001)

REC_ID_PATTERN = r"^[0-9a-f]{16}$"


UNKNOWN_DEPLOYMENT: Final = "the deployment parameter names no configured deployment"
"""The 404 of a ``deployment`` filter that names nothing the advisor knows (the error lists what is configured)."""


def parse_snooze_duration(text: str) -> float:
    """A Prometheus-style duration (``30m``, ``1h``, ``1h30m``, ``2d``, ``1w``) → seconds.

    Raises:
        ValueError: anything else, zero, or longer than :data:`MAX_SNOOZE_SECONDS`.
    """
    m = _DURATION_RE.match(text.strip())
    if not text.strip() or m is None or not any(m.groups()):
        raise ValueError(f"invalid duration {text!r}: use a duration like '30m', '1h', '1h30m', '2d' or '1w'")
    seconds = sum(int(g) * unit for g, unit in zip(m.groups(), _UNITS, strict=True) if g)
    if seconds <= 0:
        raise ValueError("duration must be positive")
    if seconds > MAX_SNOOZE_SECONDS:
        raise ValueError(f"duration must be at most {MAX_SNOOZE_SECONDS / 86400:g}d; acknowledge instead")
    return float(seconds)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- requests ---------------------------------------------------------------------------------------


class PlanDeployment(_Strict):
    """A deployment to size: the same fields as a config file's deployment (without targets or SLO).

    ``model`` must be a preset id: the API never reads a file or fetches anything for it. Values are strict, as
    JSON types them (pydantic strict mode, https://docs.pydantic.dev/latest/concepts/strict_mode/): a boolean is
    not a number and ``"8192"`` is not an integer (an integer is a number where a float is asked).
    """

    model_config = ConfigDict(extra="forbid", strict=True)

    model: str = Field(min_length=1, max_length=200, description="model preset id (see `capacity-advisor catalog`)")
    gpu: str | None = Field(default=None, max_length=100, description="GPU catalog name, e.g. H100-SXM")
    gpu_memory_gib: float | None = Field(
        default=None, gt=0, le=16384, allow_inf_nan=False, description="GPU memory in GiB (overrides the catalog)"
    )
    tensor_parallel_size: int = Field(default=1, ge=1, le=64)
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1, allow_inf_nan=False)
    max_model_len: int = Field(ge=16, le=10_000_000, description="the longest request, tokens")
    dtype: str = Field(default="auto", max_length=32)
    quantization: str | None = Field(default=None, max_length=32)
    kv_cache_dtype: str = Field(default="auto", max_length=32)
    max_num_seqs: int | None = Field(default=None, ge=1, le=1_000_000, description="default: the engine's")
    max_num_batched_tokens: int | None = Field(default=None, ge=1, le=10_000_000)
    block_size: int | None = Field(default=None, ge=1, le=1024, description="default: 16 (64 for MLA models)")
    sampler: Literal["flashinfer", "torch"] | None = Field(
        default=None, description="vLLM's top-k/top-p sampler (default: the official image's)"
    )
    engine: str = Field(
        default="vllm",
        description="whose KV accounting sizes the deployment (as `plan --engine`)",
        json_schema_extra={"enum": list(catalog.engine_ids())},
    )
    num_gpu_blocks_override: int | None = Field(
        default=None, ge=1, le=1_000_000_000, strict=True, description="vLLM --num-gpu-blocks-override"
    )
    kv_cache_memory_bytes: int | None = Field(
        default=None, ge=1, le=16384 * 2**30, strict=True, description="vLLM --kv-cache-memory-bytes, per GPU"
    )
    data_parallel_size: int = Field(default=1, ge=1, le=1024, strict=True, description="data-parallel ranks")
    enable_expert_parallel: bool = Field(default=False, strict=True)
    gpu_memory_used_by_others_gib: float = Field(
        default=0.0, ge=0, le=16384, allow_inf_nan=False, description="GiB other processes hold on each GPU"
    )
    mem_fraction_static: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False, description="SGLang")
    cuda_memory_fraction: float | None = Field(default=None, gt=0, le=1, allow_inf_nan=False, description="TGI")
    free_gpu_memory_fraction: float | None = Field(
        default=None, gt=0, le=1, allow_inf_nan=False, description="TensorRT-LLM kv_cache_config"
    )
    max_tokens: int | None = Field(
        default=None, ge=1, le=1_000_000_000, strict=True, description="TensorRT-LLM kv_cache_config.max_tokens"
    )
    ctx_size: int | None = Field(default=None, ge=1, le=100_000_000, strict=True, description="llama.cpp --ctx-size")
    parallel: int | None = Field(default=None, ge=1, le=65_536, strict=True, description="llama.cpp --parallel")
    kv_unified: bool = Field(default=False, strict=True, description="llama.cpp --kv-unified")
    engine_version: str | None = Field(
        default=None,
        max_length=64,
        description="the engine's version, e.g. 0.6.6: vLLM's V0/V1 accounting and its release's rules; SGLang's "
        "default mem_fraction_static; TGI's block size (default: the current release's rules)",
        examples=["0.6.6", "0.11.2"],
    )
    pipeline_parallel_size: int = Field(default=1, ge=1, le=1024, strict=True, description="vLLM PP stages")
    enforce_eager: bool = Field(default=False, strict=True, description="vLLM --enforce-eager")
    enable_chunked_prefill: bool | None = Field(
        default=None, strict=True, description="vLLM --[no-]enable-chunked-prefill (default: the engine's rule)"
    )
    enable_prefix_caching: bool | None = Field(
        default=None, strict=True, description="vLLM --[no-]enable-prefix-caching (default: the engine's rule)"
    )
    vllm_use_v1: bool | None = Field(
        default=None, strict=True, description="vLLM VLLM_USE_V1 on 0.8-0.10 (default: the engine's own rule)"
    )
    cpu_offload_gb: float = Field(
        default=0.0, ge=0, le=16384, allow_inf_nan=False, description="vLLM --cpu-offload-gb, GiB per GPU"
    )
    speculative_config: dict[str, Any] | None = Field(
        default=None, description="vLLM --speculative-config as an object, e.g. {method: eagle, ...}"
    )

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, engine: str) -> str:
        """An engine id of the catalog (:func:`advisor.engines.catalog.engine_ids`)."""
        if engine not in catalog.engine_ids():
            raise ValueError(f"unknown engine {engine!r}; known engines: {', '.join(catalog.engine_ids())}")
        return engine

    @field_validator("engine_version")
    @classmethod
    def _known_version(cls, value: str | None) -> str | None:
        from advisor.config import engine_version_field

        return engine_version_field(value)

    @field_validator("speculative_config", mode="before")
    @classmethod
    def _known_speculation(cls, value: Any) -> Any:
        from advisor.config import speculative_config_field

        return speculative_config_field(value)

    @field_validator("model")
    @classmethod
    def _preset_only(cls, model: str) -> str:
        if model.endswith(".json") or model.startswith((".", "/", "~")):
            raise ValueError("the API takes a model preset id only, never a path (use `capacity-advisor plan`)")
        return model

    @model_validator(mode="after")
    def _gpu_given(self) -> PlanDeployment:
        if self.gpu is None and self.gpu_memory_gib is None:
            raise ValueError("set gpu (a catalog name) or gpu_memory_gib")
        return self

    @model_validator(mode="after")
    def _engine_keys(self) -> PlanDeployment:
        """A key another engine reads is refused, as in a config file (:data:`advisor.config.ENGINE_KEYS`)."""
        from advisor.config import engine_key_error

        problem = engine_key_error(self, self.engine)
        if problem is not None:
            raise ValueError(problem)
        return self


_INT_DIALS = frozenset(
    {"tensor_parallel_size", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "kv_cache_memory_bytes"}
)
_INT_LIMITS = {
    "kv_cache_memory_bytes": 16384 * 2**30,  # as PlanDeployment.kv_cache_memory_bytes
    "tensor_parallel_size": 64,
    "max_model_len": 10_000_000,
    "max_num_seqs": 1_000_000,
    "max_num_batched_tokens": 10_000_000,
}

DialName = Literal[
    "kv_cache_dtype",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "weight_quantization",
    "tensor_parallel_size",
    "max_model_len",
    "max_num_seqs",
    "max_num_batched_tokens",
]
assert set(get_args(DialName)) == set(FIELD_FOR_DIAL), "DialName must list the dials the capacity pass models"


class DialTurn(_Strict):
    """One dial set to a value: integers for sizes (``kv_cache_memory_bytes`` in bytes per GPU, vLLM only), a
    fraction for ``gpu_memory_utilization``, a name for
    ``kv_cache_dtype`` and ``weight_quantization`` (``null`` = the checkpoint's own)."""

    dial: DialName
    value: int | float | str | None = Field(description="the dial's new value")

    @field_validator("value", mode="before")
    @classmethod
    def _no_booleans(cls, v: object) -> object:
        """JSON ``true``/``false`` is no dial value (pydantic would read it as 1/0 before the checks below)."""
        if isinstance(v, bool):
            raise ValueError("a dial value is a number, a name or null, not true/false")
        return v

    @model_validator(mode="after")
    def _value_fits_dial(self) -> DialTurn:
        v = self.value
        if self.dial in _INT_DIALS:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= _INT_LIMITS[self.dial]:
                raise ValueError(f"{self.dial} takes an integer from 1 to {_INT_LIMITS[self.dial]:,}")
        elif self.dial == "gpu_memory_utilization":
            if (
                isinstance(v, bool)
                or not isinstance(v, int | float)
                or not math.isfinite(float(v))
                or not 0 < float(v) <= 1
            ):
                raise ValueError("gpu_memory_utilization takes a number in (0, 1]")
            self.value = float(v)
        elif self.dial == "kv_cache_dtype":
            if not isinstance(v, str) or not 0 < len(v) <= 32:
                raise ValueError("kv_cache_dtype takes a name such as auto, fp8, fp8_e4m3 or fp8_e5m2")
        elif v is not None and (not isinstance(v, str) or not 0 < len(v) <= 32):
            raise ValueError("weight_quantization takes a method name (fp8, awq, gptq, …) or null")
        return self


class PlanRequest(_Strict):
    """``POST /api/v1/plan``: a deployment, and optionally one dial turned."""

    deployment: PlanDeployment
    turn: DialTurn | None = None

    @model_validator(mode="after")
    def _turn_on_its_engine(self) -> PlanRequest:
        """A turn of a dial only some engines read (``kv_cache_memory_bytes``: vLLM) is refused on another engine,
        as the deployment's own key would be (:data:`advisor.config.ENGINE_KEYS`)."""
        from advisor.config import ENGINE_KEYS

        if self.turn is not None:
            engines = ENGINE_KEYS.get(self.turn.dial)
            if engines is not None and self.deployment.engine not in engines:
                shown = ", ".join(e for e in engines if e != "auto")
                raise ValueError(
                    f"turn.dial {self.turn.dial}: a setting of {shown}, not of engine {self.deployment.engine}"
                )
        return self


class SnoozeRequest(_Strict):
    """``POST /api/v1/recommendations/{id}/snooze``."""

    duration: str = Field(
        max_length=32,
        pattern=DURATION_PATTERN,
        description="how long notifications stay silent: 30m, 1h, 1h30m, 2d, 1w (more than 0, at most 90d)",
        examples=["1h", "30m", "2d"],
    )
    reason: str = Field(min_length=1, max_length=1000, pattern=r"\S", description="why, for the next operator")

    @field_validator("duration")
    @classmethod
    def _check_duration(cls, v: str) -> str:
        parse_snooze_duration(v)
        return v

    @field_validator("reason")
    @classmethod
    def _check_reason(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("reason must not be blank")
        return v


class AckRequest(_Strict):
    """``POST /api/v1/recommendations/{id}/ack``: silence notifications until the recommendation resolves."""

    reason: str = Field(min_length=1, max_length=1000, pattern=r"\S", description="why, for the next operator")

    @field_validator("reason")
    @classmethod
    def _check_reason(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("reason must not be blank")
        return v


# --- responses (for the document) --------------------------------------------------------------------


class ErrorDetail(BaseModel):
    path: str = Field(description="dotted path of the offending field ('' for the whole body)")
    message: str


class Error(BaseModel):
    """Every error answer: a message, the status, and for invalid bodies one detail per field."""

    error: str
    status: int
    details: list[ErrorDetail] = Field(default_factory=list)


class Suppression(BaseModel):
    """A snooze or acknowledgement: notifications about the recommendation are silenced."""

    id: str
    kind: Literal["snooze", "ack"]
    reason: str
    created_at: str
    created_at_seconds: float
    until: str | None
    until_seconds: float | None
    by: str | None = Field(description="the basic-auth user who set it, when auth is on")
    deployment: str


class Alternative(BaseModel):
    """A turn of the incident other than the suggested one, in rank order (issue 13)."""

    rule: str
    dial: str
    action: str
    current: Any
    suggested: Any
    flag: str | None = Field(description="the change in the deployment's platform's terms; null: not offered there")
    predicted_effect: dict[str, dict[str, Any]]
    confidence: float
    why_rank: str = Field(description="why it ranks where it does (adds no GPU; closes the gap; lowest risk …)")
    sufficient: bool | None = Field(
        default=None, description="the turn alone closes the gap (null: a record written before this was kept)"
    )
    flag_unavailable_reason: str | None = Field(
        default=None, description="why the platform offers no flag for this dial (only when flag is null)"
    )


class WithheldTurn(BaseModel):
    """A turn a rule's own evidence contradicts, or whose rule another superseded: never suggested."""

    rule: str
    dial: str
    reason: str = Field(description="the measurement that falsified it, in numbers, or 'superseded by <rule>: …'")


class Recommendation(BaseModel):
    """One incident (one per deployment and problem) with every field (``status`` open or resolved): ``rule``,
    ``dial`` … describe the suggested turn, ``alternatives`` the others ranked, ``withheld`` the contradicted ones.
    """

    id: str
    status: Literal["open", "resolved"]
    deployment: str
    rule: str
    dial: str
    action: str
    current: Any
    suggested: Any
    flag: str | None = Field(
        description="the change in the deployment's platform's terms (advisor.platforms); null when the platform "
        "does not offer the dial, with the reason in evidence.flag_unavailable_reason"
    )
    severity: str
    confidence: float
    summary: str
    description: str
    runbook: str
    opened_at: str
    opened_at_seconds: float
    resolved_at: str | None
    rank: int
    predicted_effect: dict[str, dict[str, Any]]
    evidence: dict[str, Any]
    problem: str = Field(description="the problem the incident is about (saturation, stalled, or a rule's own id)")
    alternatives: list[Alternative] = Field(description="the other turns, best first")
    withheld: list[WithheldTurn] = Field(description="turns never suggested, with the reason")
    updated_at: str | None = Field(description="when the suggested turn or value last changed (RFC 3339)")
    updated_at_seconds: float | None = Field(description="the same, unix seconds")
    suppression: Suppression | None


class TargetStatus(BaseModel):
    target: str = Field(description="the URL without credentials, query or fragment")
    up: bool
    state: str
    state_reason: str
    error_reason: str | None
    error: str | None


class RuleStatus(BaseModel):
    rule: str
    state: str
    reason: str


class Deployment(BaseModel):
    name: str
    engine: str
    state: Literal["fresh", "stale", "unavailable"]
    state_reason: str
    snapshot: dict[str, Any]
    capacity: dict[str, Any]
    concurrency_ceiling: float | None
    targets: list[TargetStatus]
    rules: list[RuleStatus]
    recommendations: list[Recommendation]


class DeploymentList(BaseModel):
    evaluated_at: str | None = Field(description="when the last cycle finished (null before the first)")
    deployments: list[Deployment]


class RecommendationList(BaseModel):
    evaluated_at: str | None
    recommendations: list[Recommendation] = Field(description="open ones first (best-ranked first), then resolved")


class Effect(BaseModel):
    before: Any
    after: Any


class PlanResponse(BaseModel):
    """The capacity pass before (and after the turn): the numbers ``capacity-advisor plan --json`` prints."""

    before: dict[str, Any] = Field(
        description="the capacity pass as `plan --json` prints it: each term of the memory accounting per GPU "
        "(weights_bytes_per_gpu, activation_peak_bytes_per_gpu, cuda_graph_bytes_per_gpu, non_torch_bytes_per_gpu, "
        "kv_pool_bytes_per_gpu; null = a term the engine's rule does not have) and `accounting`, an object "
        "{engine, generation, version, reason} saying whose accounting sized the pool and why"
    )
    turn: DialTurn | None
    after: dict[str, Any] | None = Field(description="null without a turn, or when the turned deployment cannot run")
    after_error: str | None = Field(description="why the turned deployment cannot run")
    effect: dict[str, Effect] = Field(description="the headline numbers before → after")


class SuppressionResponse(BaseModel):
    recommendation: Recommendation


# --- errors -------------------------------------------------------------------------------------------


def validation_details(exc: ValidationError) -> list[dict[str, str]]:
    """pydantic errors → ``[{"path": "deployment.max_model_len", "message": "…"}]``."""
    out = []
    for e in exc.errors(include_url=False):
        path = ".".join(str(p) for p in e["loc"] if p not in ("function-after",))
        msg = str(e["msg"]).removeprefix("Value error, ")
        out.append({"path": path, "message": msg})
    return out


# --- the document ---------------------------------------------------------------------------------------

_REF = "#/components/schemas/{model}"


def _json(schema_name: str) -> dict[str, Any]:
    return {"application/json": {"schema": {"$ref": _REF.format(model=schema_name)}}}


def _err(description: str) -> dict[str, Any]:
    return {"description": description, "content": _json("Error")}


def openapi_document(write_needs_auth: bool = False, basic_auth: bool = False) -> dict[str, Any]:
    """The OpenAPI 3.1 document for ``/api/v1`` (``basic_auth``: every operation needs HTTP basic auth)."""
    _, defs = models_json_schema(
        [
            (m, "validation" if m in (PlanRequest, SnoozeRequest, AckRequest) else "serialization")
            for m in (
                PlanRequest,
                SnoozeRequest,
                AckRequest,
                Error,
                DeploymentList,
                RecommendationList,
                PlanResponse,
                SuppressionResponse,
                Recommendation,
            )
        ],
        ref_template=_REF,
    )
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    common = {
        "400": _err("the request is malformed; `details` names each invalid field"),
        "401": _err("basic auth is configured and the credentials are missing or wrong"),
    }
    rec_id = {
        "name": "id",
        "in": "path",
        "required": True,
        "description": "recommendation id (16 hex digits)",
        "schema": {"type": "string", "pattern": REC_ID_PATTERN},
    }
    dep_filter = {
        "name": "deployment",
        "in": "query",
        "required": False,
        "description": "only this deployment's",
        "schema": {"type": "string"},
    }

    def post(summary: str, req: str, resp: str, extra: dict[str, Any], params: list[Any]) -> dict[str, Any]:
        return {
            "summary": summary,
            "parameters": params,
            "requestBody": {"required": True, "content": _json(req)},
            "responses": {
                "200": {"description": "OK", "content": _json(resp)},
                **common,
                **extra,
                "408": _err("the body did not arrive within the server's body deadline; the connection is closed"),
                "413": _err("the body is larger than 1 MiB"),
                "415": _err("the body is not application/json"),
            },
        }

    write_extra = {
        "403": _err(
            "write endpoints need basic auth or a loopback listen address; a request with an Origin (a browser's) "
            "also needs this advisor's own Origin or the status page's CSRF token (header X-CSRF-Token)"
        ),
        "404": _err("no open or recently resolved recommendation has this id"),
        "409": _err("the recommendation has already resolved"),
    }
    doc: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "capacity-advisor API",
            "version": __version__,
            "description": (
                "Read the advisor's deployments and recommendations, size a deployment with the capacity pass, "
                "and snooze or acknowledge a recommendation so it stops notifying. The API never makes the "
                "advisor fetch a URL. Errors are JSON: {error, status, details}."
                + (" Write endpoints need basic auth or a loopback listen address." if write_needs_auth else "")
            ),
        },
        "paths": {
            "/api/v1/deployments": {
                "get": {
                    "summary": "Every deployment after the last cycle",
                    "parameters": [dep_filter],
                    "responses": {
                        "200": {"description": "OK", "content": _json("DeploymentList")},
                        **common,
                        "404": _err(UNKNOWN_DEPLOYMENT),
                    },
                }
            },
            "/api/v1/recommendations": {
                "get": {
                    "summary": "Open and recently resolved recommendations, with every field",
                    "parameters": [
                        dep_filter,
                        {
                            "name": "status",
                            "in": "query",
                            "required": False,
                            "description": "only open or only resolved ones",
                            "schema": {"type": "string", "enum": ["open", "resolved"]},
                        },
                    ],
                    "responses": {
                        "200": {"description": "OK", "content": _json("RecommendationList")},
                        **common,
                        "404": _err(UNKNOWN_DEPLOYMENT + " nor any recently resolved recommendation's"),
                    },
                }
            },
            "/api/v1/recommendations/{id}": {
                "get": {
                    "summary": "One recommendation",
                    "parameters": [rec_id],
                    "responses": {
                        "200": {"description": "OK", "content": _json("Recommendation")},
                        **common,
                        "404": _err("no open or recently resolved recommendation has this id"),
                    },
                }
            },
            "/api/v1/recommendations/{id}/snooze": {
                "post": post(
                    "Silence a recommendation's notifications for a while",
                    "SnoozeRequest",
                    "SuppressionResponse",
                    write_extra,
                    [rec_id],
                )
            },
            "/api/v1/recommendations/{id}/ack": {
                "post": post(
                    "Silence a recommendation's notifications until it resolves",
                    "AckRequest",
                    "SuppressionResponse",
                    write_extra,
                    [rec_id],
                )
            },
            "/api/v1/plan": {
                "post": post(
                    "The capacity pass for a deployment, before and after one dial turn (read-only)",
                    "PlanRequest",
                    "PlanResponse",
                    {},
                    [],
                )
            },
            "/api/v1/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {
                        "200": {"description": "OK", "content": {"application/json": {"schema": {"type": "object"}}}},
                        **common,
                    },
                }
            },
        },
        "components": {"schemas": schemas},
    }
    if basic_auth:
        doc["components"]["securitySchemes"] = {"basic": {"type": "http", "scheme": "basic"}}
        doc["security"] = [{"basic": []}]
    return doc
