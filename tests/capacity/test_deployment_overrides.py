"""What the operator fixes is what the model uses: ``num_gpu_blocks_override`` (vLLM
``--num-gpu-blocks-override``) in the capacity pass, the deployment config (the daemon's context) and ``plan``.

vLLM replaces the block count its memory profile yields with the override (``vllm/v1/core/kv_cache_utils.py``
``may_override_num_blocks``: "Overriding num_gpu_blocks=X with num_gpu_blocks_override=N"), so the pool is
N × block_size tokens whatever the GPU memory: the expected figures below are that product, by hand.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from advisor.assembly import deployment_context
from advisor.capacity.kv import CapacityInputs, capacity_pass
from advisor.capacity.models import get_preset
from advisor.config import parse_config
from advisor.errors import CapacityError, ConfigError, WontStartError
from tests.inprocess import CliRun, run_cli

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


def _plan(*args: str) -> CliRun:
    return run_cli("plan", "--model", LLAMA, *args)


@pytest.mark.parametrize("blocks", [512, 2000, 30_000])
def test_the_pool_is_exactly_the_override_below_and_above_the_profiled_pool(blocks: int) -> None:
    # the profile of this deployment yields ~27,700 blocks: 30,000 (58.6 GiB beside ~15 GiB of weights on 79.15) is
    # above it, and vLLM still allocates 30,000
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


def test_an_override_the_gpu_cannot_hold_is_refused_not_planned() -> None:
    """Breaker 31: 100,000 blocks of 16 tokens × 131,072 B = 195.31 GiB of KV cache on a 79.15 GiB H100 printed
    ``feasible: true`` and 1,600,000 tokens, exit 0 (a warning on stderr only); vLLM allocates the overridden count at
    start-up and fails. Now refused as a fixed ``--kv-cache-memory-gib`` beyond the GPU is (exit 3), the fix the
    count the 0.9 budget profiles — which fits beside the weights."""
    r = _plan("--gpu", "H100-SXM", "--max-model-len", "8192", "--num-gpu-blocks-override", "100000", "--json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert out["feasible"] is False
    assert "num_gpu_blocks_override 100,000 needs 195.31 GiB" in out["reason"]
    fix = next(f for f in out["fixes"] if f["flag"] == "--num-gpu-blocks-override")
    profiled = json.loads(_plan("--gpu", "H100-SXM", "--max-model-len", "8192", "--json").stdout)
    assert fix["value"] == profiled["kv_cache_blocks"]
    assert fix["value"] * 16 * LLAMA_KV_BYTES_PER_TOKEN + profiled["weights_bytes_per_gpu"] <= H100_BYTES
    with pytest.raises(WontStartError, match="cannot be allocated"):
        capacity_pass(
            CapacityInputs(
                model=get_preset(LLAMA), gpu_memory_bytes=H100_BYTES, max_model_len=8192, num_gpu_blocks_override=40_000
            )
        )
    # too few blocks for one request still gets the smallest count that holds one: 8,192 ÷ 16
    small = json.loads(
        _plan("--gpu", "H100-SXM", "--max-model-len", "8192", "--num-gpu-blocks-override", "10", "--json").stdout
    )
    assert [f["value"] for f in small["fixes"] if f["flag"] == "--num-gpu-blocks-override"] == [512]


@pytest.mark.parametrize("bad", ["0", "-5", "1.5", "many"])
def test_plan_refuses_a_bad_override_naming_the_flag(bad: str) -> None:
    r = _plan("--gpu", "H100-SXM", "--max-model-len", "8192", "--num-gpu-blocks-override", bad)
    assert r.returncode == 2
    assert "--num-gpu-blocks-override" in r.stderr


# --- data parallelism: per rank × ranks, a request fits one rank ------------------------------------------------


def _llama(**kw: Any) -> CapacityInputs:
    return CapacityInputs(model=get_preset(LLAMA), gpu_memory_bytes=H100_BYTES, max_model_len=8192, **kw)


def test_data_parallel_ranks_add_their_pools_and_ceilings() -> None:
    one = capacity_pass(_llama())
    two = capacity_pass(_llama(data_parallel_size=2))
    assert (two.kv_cache_blocks, two.kv_cache_tokens) == (2 * one.kv_cache_blocks, 2 * one.kv_cache_tokens)
    assert two.max_concurrency == pytest.approx(2 * one.max_concurrency)
    assert two.kv_cache_blocks_per_rank == one.kv_cache_blocks
    assert two.weights_bytes_per_gpu == one.weights_bytes_per_gpu  # a dense model is whole on every rank


def test_a_request_larger_than_one_rank_does_not_fit_however_many_ranks() -> None:
    # 100 blocks × 16 = 1,600 tokens per rank; an 8,192-token request needs 512 blocks: 100/512 of one
    four = capacity_pass(_llama(num_gpu_blocks_override=100, data_parallel_size=4))
    assert four.kv_cache_tokens == 4 * 1600
    assert four.max_concurrency == pytest.approx(100 / 512)
    assert not four.fits_one_full_length_request
    assert four.concurrency_at(1000) == pytest.approx(4 * 100 / 63)  # 63 blocks each, on every rank
    assert four.concurrency_at(3200) == pytest.approx(100 / 200)  # a 3,200-token context fits no rank


def test_expert_parallel_spreads_the_experts_over_every_data_parallel_gpu() -> None:
    moe = get_preset("Qwen/Qwen3-30B-A3B")
    base = CapacityInputs(model=moe, gpu_memory_bytes=H100_BYTES, max_model_len=8192, enable_expert_parallel=True)
    dp4 = CapacityInputs(
        model=moe, gpu_memory_bytes=H100_BYTES, max_model_len=8192, enable_expert_parallel=True, data_parallel_size=4
    )
    experts_bf16 = moe.expert_weight_parameters() * 2
    saved = capacity_pass(base).weights_bytes_per_gpu - capacity_pass(dp4).weights_bytes_per_gpu
    assert saved == pytest.approx(experts_bf16 * 3 / 4, abs=2)  # each GPU keeps a quarter of the experts


# --- memory other processes hold, as each engine accounts for it ------------------------------------------------

OTHERS = 10 * GIB


def _tokens(engine: str, others: int = 0, **spec: Any) -> int:
    """The pool as the daemon sizes it (engine defaults resolved by the one mapping)."""
    from advisor.capacity.deployment import DeploymentSpec, deployment_inputs

    inputs = deployment_inputs(
        DeploymentSpec(
            engine=engine,
            model=get_preset(LLAMA),
            gpu_memory_bytes=H100_BYTES,
            max_model_len=8192,
            gpu_memory_used_by_others_bytes=others,
            **spec,
        )
    )
    return capacity_pass(inputs).kv_cache_tokens


def test_sglang_loses_its_fraction_of_what_others_hold() -> None:
    # free_before_load shrinks by 10 GiB; the pool by mem_fraction_static of it: SGLang's (newest) default on
    # a 79.15 GiB H100 is round((81,050 − (512 + 1.5 × 8192 + 2 × 256 + 1024/8)) MiB ÷ 81,050 MiB, 3) = 0.834
    lost = _tokens("sglang") - _tokens("sglang", OTHERS)
    assert lost == pytest.approx(0.834 * OTHERS / LLAMA_KV_BYTES_PER_TOKEN, abs=1)


def test_tgi_loses_what_others_hold_less_its_wiggle_room() -> None:
    lost = _tokens("tgi") - _tokens("tgi", OTHERS)
    assert lost == pytest.approx(0.95 * OTHERS / LLAMA_KV_BYTES_PER_TOKEN, abs=1)


def test_trtllm_loses_its_free_fraction_of_what_others_hold() -> None:
    lost = _tokens("trtllm") - _tokens("trtllm", OTHERS)
    assert lost == pytest.approx(0.9 * OTHERS / LLAMA_KV_BYTES_PER_TOKEN, abs=32)  # whole 32-token blocks


def test_vllm_keeps_its_budget_while_it_is_free_and_refuses_to_start_when_not() -> None:
    assert _tokens("vllm", 5 * GIB) == _tokens("vllm")  # 79.15 − 5 GiB free ≥ 0.9 × 79.15 requested
    with pytest.raises(CapacityError, match=r"other processes hold 10\.00 GiB.*at most 0\.87"):
        _tokens("vllm", OTHERS)  # (79.15 − 10) ÷ 79.15 = 0.874 of the GPU is free


def test_trtllm_max_tokens_caps_the_pool_in_whole_blocks() -> None:
    assert _tokens("trtllm", max_tokens=100_000) == 100_000  # ceil(100,000 ÷ 32) = 3,125 blocks
    assert _tokens("trtllm", max_tokens=100_001) == 3126 * 32
    assert _tokens("trtllm", max_tokens=10**9) == _tokens("trtllm")  # above the fraction: the fraction binds


@pytest.mark.parametrize(
    ("ctx", "parallel", "unified", "cells", "concurrency"),
    [
        (8192, 4, False, 8192, 0.0),  # 2,048-token slots: an 8,192-token request fits none
        (8192, 4, True, 8192, 1.0),  # one shared context: one full-length request at a time
        (32768, 4, False, 32768, 4.0),
        (9000, 4, False, 9216, 0.0),  # padded up to a multiple of 256: 2,304-token slots
    ],
)
def test_llamacpp_slots_share_or_split_the_context(
    ctx: int, parallel: int, unified: bool, cells: int, concurrency: float
) -> None:
    from advisor.capacity.kv import EngineSettings

    settings = EngineSettings(ctx_size=ctx, parallel=parallel, kv_unified=unified)
    r = capacity_pass(_llama(engine="llamacpp", engine_settings=settings))
    assert (r.kv_cache_tokens, r.max_concurrency) == (cells, concurrency)


# --- the deployment keys: validated by name, refused where the engine does not read them ---------------------


@pytest.mark.parametrize(
    ("keys", "path"),
    [
        ({"data_parallel_size": 0}, "deployments[0].data_parallel_size"),
        ({"gpu_memory_used_by_others_gib": -1}, "deployments[0].gpu_memory_used_by_others_gib"),
        ({"kv_cache_memory_bytes": 0}, "deployments[0].kv_cache_memory_bytes"),
        ({"engine": "trtllm", "kv_cache_config": {"max_tokens": 0}}, "deployments[0].kv_cache_config.max_tokens"),
        ({"engine": "llamacpp", "parallel": "4"}, "deployments[0].parallel"),
        ({"mem_fraction_static": 1.5, "engine": "sglang"}, "deployments[0].mem_fraction_static"),
    ],
)
def test_a_bad_deployment_key_is_an_error_naming_it(keys: dict[str, Any], path: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config(**keys))
    assert path in [p for p, _ in err.value.problems], err.value.problems


@pytest.mark.parametrize(
    ("keys", "says"),
    [
        ({"ctx_size": 8192}, "ctx_size: a setting of llamacpp, not of engine vllm"),
        ({"engine": "sglang", "num_gpu_blocks_override": 100}, "num_gpu_blocks_override: a setting of vllm"),
        ({"engine": "llamacpp", "ctx_size": 2, "parallel": 4}, "cannot give each of 4 slots one"),
        ({"data_parallel_size": 2, "gpu_count": 1}, "gpu_count 1 is less than tensor_parallel_size 1 x"),
        ({"gpu_memory_used_by_others_gib": 10}, "other processes hold 10.00 GiB"),
    ],
)
def test_a_key_that_does_not_fit_the_deployment_is_refused(keys: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config(**keys))
    assert any(says in msg for _, msg in err.value.problems), err.value.problems


def test_the_daemon_reads_every_engine_key() -> None:
    cases: list[tuple[dict[str, Any], int]] = [
        ({"engine": "llamacpp", "ctx_size": 16384, "parallel": 2}, 16384),
        ({"engine": "trtllm", "kv_cache_config": {"max_tokens": 64000}}, 64000),
        ({"kv_cache_memory_bytes": 10 * GIB}, 10 * GIB // (16 * LLAMA_KV_BYTES_PER_TOKEN) * 16),
    ]
    for keys, tokens in cases:
        ctx = deployment_context(parse_config(_config(**keys)).deployments[0])
        assert ctx.capacity.kv_cache_tokens == tokens, keys
    dp = deployment_context(parse_config(_config(data_parallel_size=2)).deployments[0])
    one = deployment_context(parse_config(_config()).deployments[0])
    assert dp.capacity.kv_cache_tokens == 2 * one.capacity.kv_cache_tokens
    sglang = deployment_context(parse_config(_config(engine="sglang", mem_fraction_static=0.5)).deployments[0])
    # 0.5 × (79.15 − 0.5 CUDA context) GiB free before loading − 14.99 GiB of weights = 24.33 GiB of 128 KiB tokens
    assert sglang.capacity.kv_cache_tokens == pytest.approx((0.5 * (79.15 - 0.5) - 14.99) * GIB / 131072, rel=0.002)


def test_plan_takes_every_new_flag() -> None:
    base = ("--gpu", "H100-SXM", "--max-model-len", "8192", "--json")
    one = json.loads(_plan(*base).stdout)
    dp = json.loads(_plan(*base, "--dp", "2").stdout)
    assert dp["kv_cache_tokens"] == 2 * one["kv_cache_tokens"] and dp["data_parallel_size"] == 2
    trt = json.loads(_plan(*base, "--engine", "trtllm", "--max-tokens", "64000").stdout)
    assert trt["kv_cache_tokens"] == 64000
    unified = json.loads(
        _plan(*base, "--engine", "llamacpp", "--ctx-size", "8192", "--parallel", "4", "--kv-unified").stdout
    )
    assert unified["max_concurrency"] == 1.0
    kvb = json.loads(_plan(*base, "--kv-cache-memory-bytes", str(10 * GIB)).stdout)
    assert kvb["kv_cache_tokens"] == 10 * GIB // (16 * LLAMA_KV_BYTES_PER_TOKEN) * 16
    # 0 is a measurement of none (breaker 31: refused as "must be a positive number"): the plan without the flag
    none_held = _plan(*base, "--gpu-memory-used-by-others-gib", "0")
    assert none_held.returncode == 0 and json.loads(none_held.stdout)["kv_cache_tokens"] == one["kv_cache_tokens"]
    shared = _plan(*base, "--gpu-memory-used-by-others-gib", "10")
    assert shared.returncode == 3 and "other processes hold 10.00 GiB" in shared.stderr
    sglang_shared = json.loads(_plan(*base, "--engine", "sglang", "--gpu-memory-used-by-others-gib", "10").stdout)
    sglang = json.loads(_plan(*base, "--engine", "sglang").stdout)
    assert sglang["kv_cache_tokens"] - sglang_shared["kv_cache_tokens"] == pytest.approx(
        0.834 * 10 * GIB / LLAMA_KV_BYTES_PER_TOKEN, abs=1
    )  # the newest default fraction on the H100 (test_sglang_loses_its_fraction_of_what_others_hold)


def test_check_config_says_how_each_deployment_is_sized(tmp_path: Path) -> None:
    import yaml

    data = _config(engine="sglang")
    data["deployments"].append({**_config(data_parallel_size=2)["deployments"][0], "name": "dp"})
    f = tmp_path / "advisor.yaml"
    f.write_text(yaml.safe_dump(data), encoding="utf-8")
    r = run_cli("check-config", str(f))
    assert r.returncode == 0, r.stderr
    lines = {ln.split(":", 1)[0].strip(): ln for ln in r.stdout.splitlines()[1:]}
    assert "414,558 KV tokens per target" in lines["chat-8b"]  # 0.834 × (79.15 − 0.5) GiB − 14.99 GiB (issue 16)
    assert "(sglang's accounting;" in lines["chat-8b"] and "mem-fraction-static" in lines["chat-8b"]
    assert "over 2 ranks" in lines["dp"] and "(vllm's accounting with data_parallel_size 2;" in lines["dp"]
