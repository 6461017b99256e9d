"""What the operator fixes is what the model uses: ``num_gpu_blocks_override`` (vLLM
``--num-gpu-blocks-override``) in the capacity pass, the deployment config (the daemon's context) and ``plan``.

vLLM replaces the block count its memory profile yields with the override (``vllm/v1/core/kv_cache_utils.py``
``may_override_num_blocks``: "Overriding num_gpu_blocks=X with num_gpu_blocks_override=N"), so the pool is
N × block_size tokens whatever the GPU memory: the expected figures below are that product, by hand.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from typing import Any

import pytest

from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import get_preset
from advisor.config import parse_config
from advisor.errors import CapacityError, ConfigError
from advisor.service import deployment_context
from tests.conftest import REPO_ROOT

GIB = 1 << 30
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
LLAMA_KV_BYTES_PER_TOKEN = 2 * 32 * 8 * 128 * 2  # K and V × layers × KV heads × head_dim × bf16
H100_BYTES = int(79.15 * GIB)

BASE: dict[str, Any] = {
    "deployments": [
        {
            "name": "chat-8b",
            "engine": "vllm",
            "targets": ["http://127.0.0.1:8000/metrics"],
            "model": LLAMA,
            "gpu": "H100-SXM",
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
        }
    ]
}


def _config(**keys: Any) -> dict[str, Any]:
    data = copy.deepcopy(BASE)
    data["deployments"][0].update(keys)
    return data


def _plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor.cli", "plan", "--model", LLAMA, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )


@pytest.mark.parametrize("blocks", [512, 2000, 40_000])
def test_the_pool_is_exactly_the_override_below_and_above_the_profiled_pool(blocks: int) -> None:
    # the profile of this deployment yields ~28,000 blocks: 40,000 is above it, and vLLM still allocates 40,000
    inputs = CapacityInputs(
        model=get_preset(LLAMA), gpu_memory_bytes=H100_BYTES, max_model_len=8192, num_gpu_blocks_override=blocks
    )
    r = capacity_pass(inputs)
    assert r.kv_cache_blocks == blocks
    assert r.kv_cache_tokens == blocks * 16
    assert r.kv_pool_bytes_per_gpu == blocks * 16 * LLAMA_KV_BYTES_PER_TOKEN
    assert r.max_concurrency == pytest.approx(blocks / (8192 / 16))


def test_the_override_wins_over_the_kv_memory_and_follows_the_block_size() -> None:
    inputs = CapacityInputs(
        model=get_preset(LLAMA),
        gpu_memory_bytes=H100_BYTES,
        max_model_len=8192,
        block_size=32,
        kv_cache_memory_bytes=10 * GIB,
        num_gpu_blocks_override=1000,
    )
    assert capacity_pass(inputs).kv_cache_tokens == 32_000


@pytest.mark.parametrize("bad", [0, -3, True])
def test_the_pass_refuses_a_block_count_that_is_not_a_positive_integer(bad: Any) -> None:
    with pytest.raises(CapacityError, match="num_gpu_blocks_override"):
        CapacityInputs(model=get_preset(LLAMA), gpu_memory_bytes=H100_BYTES, num_gpu_blocks_override=bad)


def test_the_daemon_models_the_operators_pool() -> None:
    cfg = parse_config(_config(num_gpu_blocks_override=2000))
    ctx = deployment_context(cfg.deployments[0])
    assert ctx.capacity.kv_cache_tokens == 32_000
    assert ctx.capacity.kv_cache_blocks == 2000


@pytest.mark.parametrize("bad", [0, -1, 1.5, "512", True, 2_000_000_000])
def test_a_bad_override_is_a_config_error_naming_the_field(bad: Any) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config(num_gpu_blocks_override=bad))
    paths = [path for path, _ in err.value.problems]
    assert "deployments[0].num_gpu_blocks_override" in paths, err.value.problems


def test_plan_takes_the_override() -> None:
    r = _plan("--gpu", "H100-SXM", "--max-model-len", "8192", "--num-gpu-blocks-override", "2000", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert (out["kv_cache_blocks"], out["kv_cache_tokens"]) == (2000, 32_000)
    text = _plan("--gpu", "H100-SXM", "--max-model-len", "8192", "--num-gpu-blocks-override", "2000")
    assert "fixed by --num-gpu-blocks-override 2000" in text.stdout


@pytest.mark.parametrize("bad", ["0", "-5", "1.5", "many"])
def test_plan_refuses_a_bad_override_naming_the_flag(bad: str) -> None:
    r = _plan("--gpu", "H100-SXM", "--max-model-len", "8192", "--num-gpu-blocks-override", bad)
    assert r.returncode == 2
    assert "--num-gpu-blocks-override" in r.stderr
