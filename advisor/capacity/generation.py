"""Which engine generation sizes a deployment: vLLM's V0 or V1 engine, or another engine's own accounting.

vLLM made V1 the default engine in 0.8.0 but kept V0 until 0.11.0, and from 0.8.0 to 0.10.x it chose between
them at start-up with ``EngineArgs._is_v1_supported_oracle`` (``vllm/engine/arg_utils.py``, called from
``create_engine_config``): a deployment the oracle refuses falls back to V0 and is sized by V0's profile
(``vllm/worker/worker.py`` ``determine_num_available_blocks``), whatever its version. The rules below are read
from the released wheels 0.8.0 … 0.11.0 (each check's first and last release named at its constant); only
the checks the plan's inputs can express are followed:

==============================================  ==============  ==========================================
oracle check (feature name it logs)             releases         kind
==============================================  ==============  ==========================================
``Compute Capability < 8.0``                    0.8.0–0.10.1.x  fallback (VLLM_USE_V1=1: refused)
``--kv-cache-dtype`` other than ``auto``        0.8.0–0.10.x    fallback (refused); which dtypes pass
                                                                depends on release, GPU and MLA
``--dtype`` other than float16/bfloat16         0.8.0–0.9.1     fallback (refused)
``--quantization bitsandbytes``                 0.8.0–0.8.2     fallback (refused)
``--quantization gguf``                         0.8.0–0.8.5     fallback (refused)
``--num-scheduler-steps`` other than 1          0.8.0–0.10.0    fallback (refused); 0.10.1 removed the flag
pipeline parallelism (``PP``)                   0.8.0–0.8.2     experimental: V0 unless VLLM_USE_V1=1
  … without ``--distributed-executor-backend``  0.8.3–0.9.0     fallback (refused) unless ``ray`` (0.9.0:
  ``ray``                                                       also ``mp``); the default backend assumed
non-CUDA platform (ROCm)                        0.8.x           experimental: V0 unless VLLM_USE_V1=1
==============================================  ==============  ==========================================

Checks not followed (the plan has no such input): LoRA (0.8.0–0.8.2 experimental), speculative decoding
methods other than ngram/EAGLE/MTP, ``--cpu-offload-gb`` (0.8.0–0.8.2), prompt adapters/embeds, guided
decoding backends, Mamba and encoder-decoder architectures, scheduler options, ``VLLM_ATTENTION_BACKEND``.
``VLLM_USE_V1`` (``vllm/envs.py``): unset → the oracle decides; ``0`` → V0 (before 0.11); ``1`` → V1,
refusing to start (``NotImplementedError`` in ``_raise_or_fallback``) on a "fallback" check and going on past
an "experimental" one. From 0.11.0 ``vllm/engine/llm_engine.py`` is V1's engine: no V0 exists, so every
GPU, a T4 included, runs V1 (0.10.2 already dropped the compute-capability check: vLLM PRs #23614 and
#24022, "Enable V1 for compute capability < 8.0").

Other engines (SGLang, TGI, TensorRT-LLM, llama.cpp) have one generation each, named after the engine.
Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from advisor.errors import CapacityError

__all__ = [
    "Accounting",
    "checked_version",
    "engine_accounting",
    "kv_cache_dtype_problems",
    "kv_cache_dtype_turn_problems",
    "parse_version",
    "vllm_accounting",
]

V1_DEFAULT_FROM: Final = (0, 8)
"""vLLM release from which V1 is the default engine (0.8.0; ``VLLM_USE_V1`` defaults to 1 in ``vllm/envs.py``)."""
V1_OPT_IN_FROM: Final = (0, 6, 4)
"""First vLLM release with a V1 engine to opt into: ``vllm/v1`` and ``VLLM_USE_V1`` arrived with vLLM PR #9289
("[V1] Implement vLLM V1 [1/N]", merged 2024-10-22, after 0.6.3.post1; released in 0.6.4, 2024-11-15). An earlier
release ignores the variable and runs V0."""
V0_REMOVED_IN: Final = (0, 11)
"""First vLLM release without a V0 engine (0.11.0: ``vllm/engine/llm_engine.py`` aliases V1's ``LLMEngine``)."""
CAPABILITY_CHECK_UNTIL: Final = (0, 10, 2)
"""The oracle's ``Compute Capability < 8.0`` fallback runs from 0.8.0 up to (not including) this release."""
MIN_V1_CAPABILITY: Final = (8, 0)
"""V1 before 0.10.2 needs Ampere or later (FlashAttention): ``get_device_capability().major < 8`` falls back."""
KV_ANY_DTYPE_FALLBACK_UNTIL: Final = (0, 8, 2)
"""0.8.0–0.8.1: any ``--kv-cache-dtype`` but ``auto`` falls back ("No Fp8 KV cache so far")."""
KV_ROCM_SUPPORTED_FROM: Final = (0, 9)
"""From 0.9.0 the oracle accepts every KV cache dtype on ROCm."""
KV_BLACKWELL_SUPPORTED_FROM: Final = (0, 10)
"""From 0.10.0 ``CudaPlatform.is_kv_cache_dtype_supported`` accepts every KV dtype on compute capability 10.0."""
KV_BACKEND_RULE_FROM: Final = (0, 10, 2)
"""From 0.10.2 the KV dtype check knows the attention backend: MLA models (FlashMLA/CUTLASS MLA) take any."""
DTYPE_CHECK_UNTIL: Final = (0, 9, 2)
"""0.8.0–0.9.1: a model dtype other than float16/bfloat16 falls back ("we only support FA")."""
BITSANDBYTES_FALLBACK_UNTIL: Final = (0, 8, 3)
"""0.8.0–0.8.2: ``bitsandbytes`` is in ``V1_UNSUPPORTED_QUANT``."""
GGUF_FALLBACK_UNTIL: Final = (0, 9)
"""0.8.0–0.8.5: ``gguf`` is in ``V1_UNSUPPORTED_QUANT``."""
MULTI_STEP_FALLBACK_UNTIL: Final = (0, 10, 1)
"""0.8.0–0.10.0: ``num_scheduler_steps != SchedulerConfig.num_scheduler_steps`` (1) falls back
(``_raise_or_fallback(feature_name="--num-scheduler-steps", recommend_to_remove=True)``, the oracle's first
scheduler check, ahead of the compute-capability one; the 0.8.0, 0.8.5.post1 and 0.10.0 wheels). 0.10.1 removed
V0 multi-step scheduling ("multi-step scheduling has been removed; corresponding arguments are no longer
supported", ``EngineArgs.add_cli_args`` in the 0.10.1.1 wheel): the flag is gone. Unsloth's ``fast_inference``
passes ``num_scheduler_steps=16`` (its vLLM config line prints it), which is why its 0.8.5-0.10.0 logs say
"Initializing a V0 LLM engine"."""
PP_EXPERIMENTAL_UNTIL: Final = (0, 8, 3)
"""0.8.0–0.8.2: pipeline parallelism is experimental on V1 (``_warn_or_fallback("PP")``)."""
PP_BACKEND_CHECK_UNTIL: Final = (0, 9, 1)
"""0.8.3–0.9.0: pipeline parallelism on V1 needs ``--distributed-executor-backend ray`` (0.9.0: or ``mp``);
the default (unset) backend falls back. 0.9.1 accepts the default."""
NON_CUDA_EXPERIMENTAL_UNTIL: Final = (0, 9)
"""0.8.x: V1 on a non-CUDA platform (ROCm) is experimental (``_warn_or_fallback(device_name)``)."""

_WHERE: Final = "engine/arg_utils.py _is_v1_supported_oracle"
_HALF_DTYPES: Final = ("float16", "bfloat16")


@dataclass(frozen=True)
class Accounting:
    """Whose memory accounting sizes a deployment, and why.

    Attributes:
        engine: the accounting engine (``vllm``, ``sglang``, ``tgi``, ``trtllm``, ``llamacpp``).
        generation: ``v0`` or ``v1`` for vLLM; the engine's own name for the others.
        version: the engine version the decision read (None: not given).
        reason: why, e.g. ``"V0: compute capability 7.5 < 8.0 (vLLM 0.8.5 falls back, engine/arg_utils.py
            _is_v1_supported_oracle)"``.
    """

    engine: str
    generation: str
    version: str | None
    reason: str

    @property
    def profile(self) -> str:
        """The overhead profile key this accounting sizes with (``vllm-v0``/``vllm-v1``; else the engine)."""
        return f"vllm-{self.generation}" if self.engine == "vllm" else self.engine

    def as_dict(self) -> dict[str, str | None]:
        """``{engine, generation, version, reason}``, as ``plan --json`` and the API print it."""
        return {"engine": self.engine, "generation": self.generation, "version": self.version, "reason": self.reason}


_VERSION = re.compile(
    r"^v?(\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?:a|b|c|rc|alpha|beta|pre|preview)\d*)?"
    r"(?:[-_.]?(?:post|rev|r)\d*)?"
    r"(?:[-_.]?dev\d*)?"
    r"(?:\+[a-z0-9]+(?:[-_.][a-z0-9]+)*)?$",
    re.IGNORECASE,
)
"""A release as PEP 440 spells it (https://peps.python.org/pep-0440/, optionally after a ``v`` tag prefix): the
numbers, then pre-release, post-release, dev and ``+local`` parts; anything else (``1e3``, ``0x10``) is no version."""


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """The numeric release of a version string (PEP 440 / vLLM tags): ``"0.6.6.post1"`` → ``(0, 6, 6)``,
    ``"v0.10.2"`` → ``(0, 10, 2)``, ``"0.7.3rc1"`` → ``(0, 7, 3)``, ``"0.7+cu118"`` → ``(0, 7)``; ``None`` for
    anything else (``"abc"``, ``"-1"``, ``"0,7,3"``).

    A source build without release tags (a shallow clone, a fork) reports setuptools-scm's fallback
    ``"0.1.devN+g<sha>"``, which names no release: ``None`` (unknown), not vLLM 0.1 (a published 2025 vLLM log
    prints ``vLLM API server version 0.1.dev7548+gbaba038``, vllm-project/vllm PR #20665).
    """
    if not text:
        return None
    text = text.strip()
    m = _VERSION.match(text)
    if m is None:
        return None
    release = tuple(int(part) for part in m.group(1).split("."))
    if release == SCM_FALLBACK_RELEASE and ".dev" in text[m.end(1) :]:
        return None
    return release


USE_V1_ENV: Final = "VLLM_USE_V1"
"""vLLM's engine switch (``vllm/envs.py`` 0.8-0.10: ``bool(int(os.getenv("VLLM_USE_V1", "1")))``, explicit when set):
``0`` forces V0, ``1`` V1; any other text is an error at vLLM's start (``int()``). ``use_v1`` of
:func:`vllm_accounting`."""

SCM_FALLBACK_RELEASE: Final = (0, 1)
"""The release setuptools-scm reports when it finds no tag (``0.1.devN``; ``setuptools_scm`` ``version.py``
``guess_next_version`` from its ``0.0`` default)."""


def checked_version(text: str) -> str:
    """``text`` stripped, when it names a release :func:`parse_version` reads (``0.7.3``, ``v0.10.2``,
    ``0.6.6.post1``, ``0.7.3rc1``): the check behind ``plan --engine-version`` and the config's and API's
    ``engine_version``.

    Raises:
        CapacityError: not a version, or setuptools-scm's ``0.1.devN`` of a source build without tags (which
            names no release).
    """
    if parse_version(text) is None:
        if text.strip().lower().lstrip("v").startswith("0.1.dev"):
            raise CapacityError(
                f"{text!r} names no release (setuptools-scm's 0.1.devN of a source build without tags): give the "
                "release it was built from, or leave the version out"
            )
        raise CapacityError(f"not a version like 0.7.3: {text!r}")
    return text.strip()


FP8_KV_TURING_REFUSED_FROM: Final = (0, 24)
"""From this vLLM release an fp8 KV cache does not start below compute capability 8.0: V1's FlashInfer backend needs
8.0 (``FlashInferBackend.supports_compute_capability``), which leaves Triton attention, and it refuses an fp8 cache
below 8.9 (vllm-project/vllm#47549 on a Quadro RTX 8000, 0.24; the floor kept by design, PR #47949 closed)."""
FP8_KV_MIN_CAPABILITY: Final = (8, 0)
"""The compute capability below which :data:`FP8_KV_TURING_REFUSED_FROM` applies."""
FP8_KV_TRITON_RELEASES: Final = ((0, 11), (0, 12))
"""vLLM releases ``[first, end)`` that serve an fp8 KV cache on compute capability 8.x with Triton attention by default:
0.11's ``get_attn_backend_cls`` (``vllm/platforms/cuda.py``; V0 removed, so no fallback engine) sends an fp8 cache on
any GPU that is not SM 9.0 to ``TRITON_ATTN``, whose fp8 cache store needs Triton's ``fp8e4nv``, SM 8.9 or newer:
below it the engine fails at start ("type fp8e4nv not supported in this architecture", vllm-project/vllm#26431, 2 ×
RTX 3090, vLLM 0.11.0). Before 0.11 the oracle sent such a cache back to V0, which serves it
(:func:`_kv_dtype_fallback`); later releases pick the backend from a priority list that validates each candidate
(vllm-project/vllm#24794), where FlashInfer serves an fp8 cache from 8.0: not established here, so not refused."""
FP8_KV_TRITON_MIN_CAPABILITY: Final = (8, 9)
"""The compute capability Triton's ``fp8e4nv`` needs (Ada, SM 8.9): :data:`FP8_KV_TRITON_RELEASES`."""
TRTLLM_FP8_MIN_CAPABILITY: Final = (8, 9)
"""TensorRT-LLM's FP8 (weights and KV cache) needs Ada, Hopper or newer: its support matrix lists no FP8 on Ampere
(SM80/86) or older (docs ``reference/support-matrix``, 0.18); Ampere's quantized cache is INT8."""


def kv_cache_dtype_problems(
    kv_cache_dtype: str, capability: tuple[int, int] | None, version: str | None, engine: str = "vllm"
) -> list[str]:
    """What the engine refuses for its KV cache dtype on a GPU of ``capability`` at ``version`` (None: the current
    release): on vLLM an ``fp8*`` cache below compute capability :data:`FP8_KV_MIN_CAPABILITY` from
    :data:`FP8_KV_TURING_REFUSED_FROM`; on TensorRT-LLM below :data:`TRTLLM_FP8_MIN_CAPABILITY`. An unknown GPU
    refuses nothing. One message per problem, naming the flag."""
    if capability is None or not kv_cache_dtype.strip().lower().startswith("fp8"):
        return []
    if engine == "trtllm":
        if capability >= TRTLLM_FP8_MIN_CAPABILITY:
            return []
        return [
            f"kv_cache_dtype {kv_cache_dtype} (kv_cache_config.dtype): TensorRT-LLM's FP8 needs compute capability "
            f"8.9 (Ada, Hopper or newer); this GPU is {_cc(capability)} (use the default cache, or INT8 on Ampere)"
        ]
    if engine != "vllm":
        return []
    v = parse_version(version)
    if v is not None and v < FP8_KV_TURING_REFUSED_FROM:
        return []
    if capability >= FP8_KV_MIN_CAPABILITY:
        return []
    return [
        f"kv_cache_dtype {kv_cache_dtype} (--kv-cache-dtype): below compute capability 8.0 (this GPU: "
        f"{_cc(capability)}) vLLM 0.24+ runs only Triton attention, which refuses an fp8 cache below 8.9 "
        "(vllm-project/vllm#47549); use --kv-cache-dtype auto"
    ]


def kv_cache_dtype_turn_problems(
    kv_cache_dtype: str, capability: tuple[int, int] | None, version: str | None, engine: str = "vllm"
) -> list[str]:
    """Why a turn *to* ``kv_cache_dtype`` would not start with the engine's default attention backend:
    :func:`kv_cache_dtype_problems`, and on vLLM releases :data:`FP8_KV_TRITON_RELEASES` an ``fp8*`` cache on compute
    capability 8.0 up to :data:`FP8_KV_TRITON_MIN_CAPABILITY` (Ampere: A100, A10, RTX 3090, RTX A6000), which their
    default Triton attention refuses. A deployment already running such a cache is not refused
    (:func:`kv_cache_dtype_problems`): it runs, so it selected a backend that serves it (FlashInfer through
    ``VLLM_ATTENTION_BACKEND``), which the advisor does not see; the turn is not proposed, since with the default
    backend it stops the engine from starting. An unknown GPU or an unstated version adds nothing."""
    problems = kv_cache_dtype_problems(kv_cache_dtype, capability, version, engine)
    if problems or engine != "vllm" or capability is None or not kv_cache_dtype.strip().lower().startswith("fp8"):
        return problems
    v = parse_version(version)
    first, end = FP8_KV_TRITON_RELEASES
    if v is None or not first <= v < end:
        return []
    if FP8_KV_MIN_CAPABILITY <= capability < FP8_KV_TRITON_MIN_CAPABILITY:
        return [
            f"kv_cache_dtype {kv_cache_dtype} (--kv-cache-dtype): on compute capability {_cc(capability)} vLLM 0.11 "
            "serves an fp8 cache with Triton attention, which needs 8.9 (fp8e4nv), so the engine fails at start "
            "(vllm-project/vllm#26431); only a FlashInfer backend chosen by hand serves it"
        ]
    return []


def _cc(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


def _kv_dtype_fallback(
    v: tuple[int, ...], kv_cache_dtype: str, capability: tuple[int, int] | None, platform: str | None, is_mla: bool
) -> bool:
    """Whether the oracle falls back for ``--kv-cache-dtype`` (not ``auto``) at release ``v``.

    0.8.0–0.8.1: always. 0.8.2–0.10.1: only an ``fp8*`` cache with FlashAttention 3's FP8 passes, i.e.
    compute capability 9.x (``attention/utils/fa_utils.py`` ``flash_attn_supports_fp8``), plus any dtype on
    ROCm from 0.9.0 and on capability 10.0 from 0.10.0 (``platforms/cuda.py`` ``is_kv_cache_dtype_supported``).
    0.10.2: MLA models pass (FlashMLA / CUTLASS MLA); others pass on 10.0, pass when not ``fp8*``, and need
    9.x for ``fp8*``. An unknown GPU is taken to support the dtype (the oracle cannot be evaluated).
    """
    if v < KV_ANY_DTYPE_FALLBACK_UNTIL:
        return True
    fp8 = kv_cache_dtype.startswith("fp8")
    if platform == "rocm":
        return v < KV_ROCM_SUPPORTED_FROM
    if platform is None or capability is None:
        return False
    if v >= KV_BACKEND_RULE_FROM:
        if is_mla or capability == (10, 0) or not fp8:
            return False
        return capability[0] != 9
    if v >= KV_BLACKWELL_SUPPORTED_FROM and capability == (10, 0):
        return False
    return not (fp8 and capability[0] == 9)


def vllm_accounting(
    version: str | None,
    *,
    compute_capability: tuple[int, int] | None = None,
    platform: str | None = None,
    kv_cache_dtype: str = "auto",
    dtype: str | None = None,
    quantization: str | None = None,
    is_mla: bool = False,
    pipeline_parallel_size: int = 1,
    use_v1: bool | None = None,
    num_scheduler_steps: int = 1,
) -> Accounting:
    """The vLLM engine generation a deployment runs, following ``_is_v1_supported_oracle`` (module docstring).

    Args:
        version: the vLLM version (``"0.8.5"``); None or unparsable → the current default (V1).
        compute_capability: the GPU's CUDA compute capability (``(7, 5)`` for a T4), None when unknown or not
            CUDA.
        platform: ``cuda``, ``rocm``, ``other`` (TPU, Neuron) or None (the GPU is unknown). With a capability
            given and no platform, ``cuda`` is meant.
        kv_cache_dtype: ``--kv-cache-dtype``.
        dtype: the model dtype vLLM serves with (resolved, ``bfloat16``), None when unknown.
        quantization: the weight quantization method (``--quantization`` or the checkpoint's).
        is_mla: the model uses multi-head latent attention (DeepSeek V2/V3).
        pipeline_parallel_size: ``--pipeline-parallel-size`` (the executor backend is taken as the default).
        use_v1: ``VLLM_USE_V1`` (None: unset).
        num_scheduler_steps: V0's ``--num-scheduler-steps`` (multi-step scheduling; 1 = off).

    Raises:
        CapacityError: ``VLLM_USE_V1=1`` with a feature the release refuses on V1 (vLLM raises
            ``NotImplementedError: VLLM_USE_V1=1 is not supported with …``); ``num_scheduler_steps`` other than 1
            from 0.10.1, which has no such argument (:data:`MULTI_STEP_FALLBACK_UNTIL`), or with no version (the
            current release) unless ``use_v1`` is False.

    >>> vllm_accounting("0.8.5", compute_capability=(7, 5)).reason
    'V0: compute capability 7.5 < 8.0 (vLLM 0.8.5 falls back to V0: engine/arg_utils.py _is_v1_supported_oracle)'
    >>> vllm_accounting("0.10.2", compute_capability=(7, 5)).generation
    'v1'
    """
    v = parse_version(version)
    if platform is None and compute_capability is not None:
        platform = "cuda"

    def acc(generation: str, reason: str) -> Accounting:
        return Accounting("vllm", generation, version, reason)

    if num_scheduler_steps != 1 and v is not None and v >= MULTI_STEP_FALLBACK_UNTIL:
        raise CapacityError(
            f"--num-scheduler-steps {num_scheduler_steps}: vLLM {version} has no multi-step scheduling (removed "
            "in 0.10.1, engine/arg_utils.py EngineArgs.add_cli_args)"
        )
    if num_scheduler_steps != 1 and v is None and use_v1 is not False:  # unset: the current release, which has none
        raise CapacityError(
            f"--num-scheduler-steps {num_scheduler_steps}: the current vLLM has no multi-step scheduling (removed in "
            "0.10.1); give --engine-version, the release that runs it (≤ 0.10.0)"
        )
    if v is None:
        if use_v1 is False:
            return acc("v0", "V0: VLLM_USE_V1=0 (version not given)")
        return acc("v1", "V1: version not given: the current default")
    if v >= V0_REMOVED_IN:
        note = "; VLLM_USE_V1=0 cannot select it" if use_v1 is False else ""
        return acc("v1", f"V1: vLLM {version} has no V0 engine (removed in 0.11.0{note})")
    if v < V1_DEFAULT_FROM:
        if use_v1 and v < V1_OPT_IN_FROM:
            return acc("v0", f"V0: vLLM {version} has no V1 engine (VLLM_USE_V1=1 is ignored before 0.6.4)")
        if use_v1:
            return acc("v1", f"V1: VLLM_USE_V1=1 (opt-in before 0.8; vLLM {version})")
        return acc("v0", f"V0: vLLM {version} < 0.8 (V1 became the default engine in 0.8.0)")
    if use_v1 is False:
        return acc("v0", f"V0: VLLM_USE_V1=0 (vLLM {version})")

    # (feature as the oracle logs it, why in words, refused under VLLM_USE_V1=1 or only experimental)
    checks: list[tuple[str, str, bool]] = []
    if num_scheduler_steps != 1:  # the oracle's scheduler checks come before the GPU's (0.8.0-0.10.0)
        steps = f"--num-scheduler-steps {num_scheduler_steps}"
        checks.append(("--num-scheduler-steps", f"{steps} (multi-step scheduling is V0's)", True))
    cap_text = f"compute capability {_cc(compute_capability)}" if compute_capability else ""
    below = compute_capability is not None and compute_capability < MIN_V1_CAPABILITY
    if platform == "cuda" and below and v < CAPABILITY_CHECK_UNTIL:
        checks.append(("Compute Capability < 8.0", f"{cap_text} < 8.0", True))
    if kv_cache_dtype != "auto" and _kv_dtype_fallback(v, kv_cache_dtype, compute_capability, platform, is_mla):
        on = f" on {cap_text}" if cap_text else (" on ROCm" if platform == "rocm" else "")
        checks.append(("--kv-cache-dtype", f"--kv-cache-dtype {kv_cache_dtype}{on}", True))
    if dtype is not None and dtype not in _HALF_DTYPES and v < DTYPE_CHECK_UNTIL:
        checks.append((f"--dtype {dtype}", f"--dtype {dtype} (V1 serves float16/bfloat16 only)", True))
    quant = (quantization or "").strip().lower()
    if (quant == "bitsandbytes" and v < BITSANDBYTES_FALLBACK_UNTIL) or (quant == "gguf" and v < GGUF_FALLBACK_UNTIL):
        checks.append((f"--quantization {quant}", f"--quantization {quant}", True))
    if pipeline_parallel_size > 1 and v < PP_BACKEND_CHECK_UNTIL:
        experimental = v < PP_EXPERIMENTAL_UNTIL
        backend = "" if experimental else " without --distributed-executor-backend ray"
        checks.append(("PP", f"pipeline parallelism{backend}", not experimental))
    if platform == "rocm" and v < NON_CUDA_EXPERIMENTAL_UNTIL:
        checks.append(("ROCm", "V1 on ROCm is experimental", False))

    for feature, why, refused in checks:
        if use_v1:
            if refused:
                raise CapacityError(
                    f"vLLM {version} refuses VLLM_USE_V1=1 with {why} ('VLLM_USE_V1=1 is not supported with "
                    f"{feature}', {_WHERE}); unset VLLM_USE_V1 to run V0"
                )
            continue  # experimental on V1: VLLM_USE_V1=1 goes on
        return acc("v0", f"V0: {why} (vLLM {version} falls back to V0: {_WHERE})")
    if use_v1:
        return acc("v1", f"V1: VLLM_USE_V1=1 (vLLM {version})")
    note = ""
    if platform is None and v < CAPABILITY_CHECK_UNTIL:
        note = " (the GPU's compute capability is unknown: below 8.0 it would fall back to V0)"
    elif platform == "cuda" and below:
        note = f" (from 0.10.2 V1 runs on {cap_text} too)"
    return acc("v1", f"V1: vLLM {version} ≥ 0.8 default{note}")


_ENGINE_RULES: Final = {
    "sglang": "SGLang's own accounting (python/sglang/srt/model_executor/model_runner.py profile_max_num_token)",
    "tgi": "TGI's own accounting (server/text_generation_server/models/flash_causal_lm.py FlashCausalLM.warmup)",
    "trtllm": "TensorRT-LLM's own accounting (tensorrt_llm/_torch/pyexecutor/_util.py KvCacheCreator)",
    "llamacpp": "llama.cpp's own accounting (--ctx-size cells, src/llama-kv-cache.cpp)",
}


def engine_accounting(engine: str, version: str | None) -> Accounting:
    """The accounting of an engine other than vLLM: one generation, named after the engine.

    >>> engine_accounting("sglang", "0.4.6").generation
    'sglang'
    """
    return Accounting(engine, engine, version, _ENGINE_RULES.get(engine, f"{engine}'s own accounting"))
