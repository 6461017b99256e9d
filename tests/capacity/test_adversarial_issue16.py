"""Issue 16, adversarial inputs to the capacity pass's new surface (speculative decoding, CPU offload, sampler,
engine versions, new GPUs and model families): each case vLLM itself refuses, or that cannot be planned, is a
one-line error naming the flag or key at fault (exit 2), never a silently computed plan."""

from __future__ import annotations

import json
import os
from unittest.mock import patch

import pytest

from tests.inprocess import CliRun, run_cli

LLAMA_8B = ["--model", "meta-llama/Llama-3.1-8B-Instruct", "--max-model-len", "8192"]


def _plan(*args: str, env: dict[str, str] | None = None) -> CliRun:
    """``capacity-advisor plan ARGS`` in-process, with ``env`` added to the environment."""
    with patch.dict(os.environ, env or {}):
        return run_cli("plan", *args)


def test_a_quantization_that_contradicts_the_checkpoints_own_is_refused() -> None:
    """DeepSeek-V3's config.json states ``quant_method: fp8``; vLLM's ``ModelConfig._verify_quantization`` raises
    "Quantization method specified in the model config (fp8) does not match the quantization method specified in
    the `quantization` argument (awq)" (vllm-project/vllm#19050 shows the same message for gguf). Planning it as
    AWQ halved the weights (85.2 → 44.6 GB per GPU) without a word."""
    r = _plan(
        "--model",
        "deepseek-ai/DeepSeek-V3",
        "--gpu",
        "h200",
        "--tp",
        "8",
        "--max-model-len",
        "8192",
        "--quantization",
        "awq",
    )
    assert r.returncode == 2, r.stdout
    assert "--quantization" in r.stderr and "'awq'" in r.stderr and "'fp8'" in r.stderr
    # the checkpoint's own method, or its Marlin kernel name, stays accepted
    assert (
        _plan(
            "--model",
            "deepseek-ai/DeepSeek-V3",
            "--gpu",
            "h200",
            "--tp",
            "8",
            "--max-model-len",
            "8192",
            "--quantization",
            "fp8",
        ).returncode
        == 0
    )
    assert (
        _plan(
            "--model", "openai/gpt-oss-20b", "--gpu", "h100-sxm", "--max-model-len", "8192", "--quantization", "awq"
        ).returncode
        == 2
    )


def test_a_draft_tensor_parallel_size_other_than_1_or_the_targets_is_refused() -> None:
    """vLLM ``vllm/config/speculative.py`` ``_verify_and_get_draft_tp``: "speculative_draft_tensor_parallel_size=3
    cannot be other value than 1 or target model tensor_parallel_size". TP=3 of a TP=2 target was planned."""
    for tp, draft_tp in (("2", 3), ("1", 2)):
        spec = json.dumps({"method": "eagle", "draft_tensor_parallel_size": draft_tp})
        r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--tp", tp, "--speculative-config", spec)
        assert r.returncode == 2, r.stdout
        assert "draft_tensor_parallel_size" in r.stderr and str(draft_tp) in r.stderr
    for tp, draft_tp in (("4", 1), ("2", 2)):  # the two values vLLM takes
        spec = json.dumps({"method": "eagle", "draft_tensor_parallel_size": draft_tp})
        assert _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--tp", tp, "--speculative-config", spec).returncode == 0


def test_mxfp4_awq_and_bfloat16_below_their_compute_capability_are_refused() -> None:
    """vLLM's quantization gate (``vllm/config/vllm.py`` ``_get_quantization_config``): MXFP4 needs capability 8.0
    (``Mxfp4Config.get_min_capability`` 80; vllm-project/vllm#23203 asks for 7.5), AWQ 7.5 (``AWQConfig`` 75); its
    worker refuses ``--dtype bfloat16`` below 8.0 ("Bfloat16 is only supported on GPUs with compute capability of at
    least 8.0"). gpt-oss-20b on a V100 32GB (7.0) was planned at 45 sequences."""
    cases = [
        (("--model", "openai/gpt-oss-20b", "--gpu", "v100-32gb"), "mxfp4", "7.0"),
        (("--model", "openai/gpt-oss-120b", "--gpu", "t4", "--tp", "8"), "mxfp4", "7.5"),
        (("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "v100-16gb", "--quantization", "awq"), "awq", "7.0"),
        (("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "t4", "--dtype", "bfloat16"), "--dtype", "7.5"),
        (("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "gtx1080", "--dtype", "bfloat16"), "--dtype", "6.1"),
    ]
    for args, named, capability in cases:
        r = _plan(*args, "--max-model-len", "4096")
        assert r.returncode == 2, (args, r.stdout)
        assert named in r.stderr and capability in r.stderr, r.stderr
    for args in (
        ("--model", "openai/gpt-oss-20b", "--gpu", "a100-80gb"),  # 8.0: loads (Marlin MXFP4)
        ("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "t4", "--quantization", "awq"),  # 7.5: AWQ loads
        ("--model", "Qwen/Qwen2.5-0.5B", "--gpu", "t4"),  # auto: vLLM falls back to float16, same width
        ("--model", "Qwen/Qwen2.5-0.5B", "--gpu-memory-gib", "14.4", "--dtype", "bfloat16"),  # part unknown
    ):
        r = _plan(*args, "--max-model-len", "4096")
        assert r.returncode == 0, (args, r.stderr)


def test_a_cpu_offload_larger_than_the_offloadable_weights_is_said() -> None:
    """vLLM takes any ``--cpu-offload-gb`` ≥ 0 and offloads decoder-layer parameters until the budget is reached
    (``UVAOffloader._maybe_offload_to_cpu``); 100 GiB of an 8B model moves all 32 layers, 32 × 436,224,000 B =
    13,959,168,000 B = 13.00 GiB, and the embedding and LM head stay. The plan now says the flag asked for more."""
    r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--cpu-offload-gb", "100", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cpu_offload_bytes_per_gpu"] == 32 * 436_224_000
    assert "--cpu-offload-gb 100 exceeds the 13.00 GiB" in r.stderr
    quiet = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--cpu-offload-gb", "4")
    assert quiet.returncode == 0 and "exceeds" not in quiet.stderr


def test_engine_versions_that_are_no_release_are_refused_by_name() -> None:
    """``1e3`` and ``0x10`` are no PEP 440 version (https://peps.python.org/pep-0440/): ``1e3`` was read as vLLM 1
    ("vLLM 1e3 has no V0 engine") and ``0x10`` as vLLM 0 (V0). ``0.1.dev5+gabc`` is setuptools-scm's fallback of a
    build without tags: the error says so. PEP 440 forms still parse."""
    for engine in ("vllm", "sglang"):
        for text in ("1e3", "0x10", "latest", "", "0.7.3-foo"):
            r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--engine", engine, "--engine-version", text)
            assert r.returncode == 2, (engine, text, r.stdout)
            assert "--engine-version" in r.stderr and repr(text) in r.stderr
        r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--engine", engine, "--engine-version", "0.1.dev5+gabc")
        assert r.returncode == 2 and "names no release" in r.stderr
        for text in ("v0.10.2", "0.7.3rc1", "99.0", "0.6.6.post1", "0.11.0+582e4e37.nv25.11"):
            r = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--engine", engine, "--engine-version", text)
            assert r.returncode == 0, (engine, text, r.stderr)


def test_the_config_refuses_sampler_on_an_engine_that_has_no_such_setting() -> None:
    """``sampler`` is vLLM's top-k/top-p warm-up (``VLLM_USE_FLASHINFER_SAMPLER``); ``plan`` drops ``--sampler``
    for other engines with a note, and the config refuses ``cpu_offload_gb`` for SGLang, but took ``sampler:
    torch`` on an SGLang deployment as valid and ignored it."""
    from advisor.config import parse_config
    from advisor.errors import ConfigError

    dep = {
        "name": "a",
        "targets": ["http://x:8000/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 1, "tpot_seconds": 0.1},
        "sampler": "torch",
    }
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [{**dep, "engine": "sglang"}]})
    assert "sampler: a setting of vllm" in str(err.value)
    parse_config({"deployments": [{**dep, "engine": "vllm"}]})


def test_the_api_plan_has_the_keys_plan_json_prints() -> None:
    """``POST /api/v1/plan`` promises the numbers ``plan --json`` prints; it lacked ``cpu_offload_bytes_per_gpu`` and
    ``draft_weights_bytes_per_gpu`` (tests/http/test_api.py compares the two through a running daemon)."""
    from advisor.api_models import PlanRequest
    from advisor.server import plan

    r = _plan("--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192", "--json")
    want = json.loads(r.stdout)
    body = plan(
        PlanRequest.model_validate(
            {
                "deployment": {"model": "meta-llama/Llama-3.1-8B-Instruct", "gpu": "H100-SXM", "max_model_len": 8192},
                "turn": {"dial": "kv_cache_dtype", "value": "fp8"},
            }
        )
    )
    assert body["before"] == want
    assert set(body["after"]) == set(want)
    assert (body["before"]["cpu_offload_bytes_per_gpu"], body["before"]["draft_weights_bytes_per_gpu"]) == (0, 0)


def test_the_flashinfer_sampler_where_flashinfer_does_not_run() -> None:
    """vLLM's ``TopKTopPSampler.__init__`` takes the FlashInfer branch on CUDA only (an AMD MI300X sorts whatever
    VLLM_USE_FLASHINFER_SAMPLER says), and from 0.21 refuses it on a CUDA GPU outside 7.5-12.1 ("FlashInfer does not
    support compute capability 7.0"). Both were planned with FlashInfer's smaller warm-up: on the MI300X the explicit
    flag and the 0.10 default gave 166,987,061,985 B of pool, 3.28 GB more than its sorting sampler leaves."""
    mi300x = [*LLAMA_8B, "--gpu", "mi300x", "--json"]
    torch = json.loads(_plan(*mi300x, "--sampler", "torch").stdout)["kv_pool_bytes_per_gpu"]
    r = _plan(*mi300x, "--sampler", "flashinfer")
    assert r.returncode == 0 and "--sampler flashinfer does not apply" in r.stderr
    assert json.loads(r.stdout)["kv_pool_bytes_per_gpu"] == torch
    default_010 = json.loads(_plan(*mi300x, "--engine-version", "0.10.0").stdout)["kv_pool_bytes_per_gpu"]
    assert (
        default_010
        == json.loads(_plan(*mi300x, "--engine-version", "0.10.0", "--sampler", "torch").stdout)[
            "kv_pool_bytes_per_gpu"
        ]
    )
    r = _plan(
        "--model", "Qwen/Qwen2.5-0.5B", "--gpu", "v100-16gb", "--max-model-len", "8192", "--sampler", "flashinfer"
    )
    assert r.returncode == 2 and "--sampler" in r.stderr and "7.0" in r.stderr
    h100 = _plan(*LLAMA_8B, "--gpu", "h100-sxm", "--sampler", "flashinfer")
    assert h100.returncode == 0 and "does not apply" not in h100.stderr


def test_vllm_use_v1_in_the_environment_is_read_like_the_other_vllm_variables() -> None:
    """``plan`` reads VLLM_CUDA_MEM_ALIGN_KV_CACHE, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS and
    VLLM_ALLOW_LONG_MAX_MODEL_LEN from the environment as vLLM does, but ignored VLLM_USE_V1=0: vLLM 0.8.5 then runs
    V0 (``envs.py``; the --vllm-use-v1 help calls the flag that variable). A value vLLM's ``int()`` rejects is an
    error naming the variable; the flag wins over the environment."""
    args = (*LLAMA_8B, "--gpu", "h100-sxm", "--engine-version", "0.8.5", "--json")
    r = _plan(*args, env={"VLLM_USE_V1": "0"})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["accounting"]["generation"] == "v0"
    r = _plan(*args, "--vllm-use-v1", "1", env={"VLLM_USE_V1": "0"})
    assert json.loads(r.stdout)["accounting"]["generation"] == "v1"
    r = _plan(*args, env={"VLLM_USE_V1": "yes"})
    assert r.returncode == 2 and "VLLM_USE_V1='yes'" in r.stderr
