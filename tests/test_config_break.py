"""Issue 17, adversarial config files: keys that do nothing in the engine are refused by name, not shown as part
of the accounting."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.config import parse_config
from advisor.errors import ConfigError
from tests.test_config import GOOD


def _with(**keys: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    data["deployments"][0].update(keys)
    return data


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_loras", 4), ("max_lora_rank", 64), ("lora_dtype", "float16"), ("fully_sharded_loras", True)],
)
def test_a_lora_dial_without_enable_lora_is_refused_naming_it(key: str, value: object) -> None:
    """vLLM builds no ``LoRAConfig`` without ``--enable-lora`` (``EngineArgs.create_engine_config``: ``LoRAConfig(…)
    if self.enable_lora else None``): ``max_loras: 4`` alone sized nothing, yet ``check-config`` printed the pool
    as "vllm's accounting with max_loras 4"."""
    with pytest.raises(ConfigError) as exc:
        parse_config(_with(**{key: value}))
    (_path, message), *_ = exc.value.problems
    assert key in message and "enable_lora" in message
    parse_config(_with(**{key: value, "enable_lora": True}))  # with the switch: accepted


def test_llamacpp_parallel_and_max_num_seqs_that_disagree_are_a_config_error() -> None:
    """Breaker, 2026-12-05: ``parallel: 4`` beside ``max_num_seqs: 64`` was taken silently (parallel won); on llama.cpp
    both are ``--parallel``."""
    dep = {
        "name": "lc",
        "engine": "llamacpp",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    with pytest.raises(ConfigError, match=r"parallel: 4 slots contradicts max_num_seqs: 64"):
        parse_config({"deployments": [{**dep, "parallel": 4, "max_num_seqs": 64}]})
    assert parse_config({"deployments": [{**dep, "parallel": 4, "max_num_seqs": 4}]}).deployments[0].parallel == 4
    # walkthrough, 2026-12-07: gpu_memory_utilization 0.8 was taken on llama.cpp (no such budget), then shown as
    # "util 0.8" by simulate; refused by name, as plan refuses --gpu-memory-utilization there
    with pytest.raises(ConfigError, match=r"gpu_memory_utilization: 0.8 does nothing on llama.cpp"):
        parse_config({"deployments": [{**dep, "gpu_memory_utilization": 0.8}]})


@pytest.mark.parametrize(
    ("engine", "names"),
    [
        ("sglang", "SGLang, whose pool is sized by mem_fraction_static"),
        ("tgi", "TGI, whose pool is sized by cuda_memory_fraction"),
        ("trtllm", "TensorRT-LLM, whose pool is kv_cache_config.free_gpu_memory_fraction"),
        ("triton-trtllm", "TensorRT-LLM, whose pool is kv_cache_config.free_gpu_memory_fraction"),
    ],
)
def test_gpu_memory_utilization_on_an_engine_that_does_not_read_it_is_refused_naming_its_own_key(
    engine: str, names: str
) -> None:
    """Walkthrough, 2026-12-07: ``engine: sglang`` with ``gpu_memory_utilization: 0.95`` was accepted without a word,
    and the capacity pass used SGLang's default fraction (0.834): the operator's number was dropped. vLLM's default
    (0.9), stated or not, is accepted; the engine's own key carries the fraction."""
    dep = {
        "name": "d",
        "engine": engine,
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    with pytest.raises(ConfigError, match=rf"gpu_memory_utilization: 0.95 does nothing on {names}"):
        parse_config({"deployments": [{**dep, "gpu_memory_utilization": 0.95}]})
    assert parse_config({"deployments": [{**dep, "gpu_memory_utilization": 0.9}]}).deployments[0].engine == engine
    for ok in ("vllm", "dynamo", "auto"):
        parsed = parse_config({"deployments": [{**dep, "engine": ok, "gpu_memory_utilization": 0.95}]})
        assert parsed.deployments[0].gpu_memory_utilization == 0.95


def test_a_vllm_step_budget_below_its_batch_cap_is_refused_as_vllm_refuses_it() -> None:
    """Breaker 13: ``max_num_batched_tokens: 1`` beside ``max_num_seqs: 1024`` was valid, and plan said "MEETS the
    SLO"; vLLM's ``SchedulerConfig._verify_args`` raises "max_num_batched_tokens (1) must be greater than or equal to
    max_num_seqs (1024)". Equal is accepted, as vLLM accepts it."""
    with pytest.raises(ConfigError, match=r"max_num_batched_tokens 64 is below max_num_seqs 256: vLLM refuses"):
        parse_config(_with(engine="vllm", max_num_batched_tokens=64, max_num_seqs=256))
    assert parse_config(_with(engine="vllm", max_num_batched_tokens=256, max_num_seqs=256)).deployments[0]
    from tests.inprocess import run_cli

    base = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]
    r = run_cli(*base, "--max-num-batched-tokens", "64", "--max-num-seqs", "256")
    assert r.returncode == 2 and "vLLM refuses to start" in r.stderr, r.stderr
    assert run_cli(*base, "--max-num-batched-tokens", "256", "--max-num-seqs", "256").returncode == 0


def test_check_config_refuses_a_step_below_the_context_with_chunked_prefill_turned_off(tmp_path: Path) -> None:
    """Breaker 19: ``check-config`` said "valid" for ``max_num_batched_tokens: 2048``, ``enable_chunked_prefill:
    false`` at ``max_model_len: 8192`` on vLLM 0.11.2, which refuses to start ("max_num_batched_tokens … is smaller
    than max_model_len …"); it names the deployment and the check, and with chunking left on the config is valid."""
    from tests.inprocess import run_cli

    dep = {
        "name": "chat",
        "engine": "vllm",
        "engine_version": "0.11.2",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "max_num_batched_tokens": 2048,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    path = tmp_path / "advisor.yaml"
    path.write_text(yaml.safe_dump({"deployments": [{**dep, "enable_chunked_prefill": False}]}), encoding="utf-8")
    r = run_cli("check-config", str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    assert "deployments[0]" in r.stderr + r.stdout
    assert "max_num_batched_tokens 2048 is below max_model_len 8192 with chunked prefill off" in r.stderr + r.stdout
    path.write_text(yaml.safe_dump({"deployments": [dep]}), encoding="utf-8")
    assert run_cli("check-config", str(path)).returncode == 0


def test_a_missing_or_broken_file_is_not_called_an_invalid_field(tmp_path: Path) -> None:
    """A walkthrough (2026-12-07) read "nonexist.yaml: 1 invalid field(s) / (file): cannot read: No such file or
    directory": no field is wrong, the file is. A field problem keeps its count."""
    from tests.inprocess import run_cli

    missing = run_cli("check-config", str(tmp_path / "nonexist.yaml"))
    assert missing.returncode == 2
    assert "nonexist.yaml: the file cannot be used" in missing.stderr and "invalid field" not in missing.stderr
    assert "cannot read: No such file or directory" in missing.stderr
    broken = tmp_path / "broken.yaml"
    broken.write_text("deployments: [\n", encoding="utf-8")
    r = run_cli("check-config", str(broken))
    assert "broken.yaml: the file cannot be used" in r.stderr and "line 2, column 1: not valid YAML" in r.stderr
    fields = tmp_path / "fields.yaml"
    fields.write_text(yaml.safe_dump({"deployments": [{"name": "x"}]}), encoding="utf-8")
    assert "invalid field(s)" in run_cli("check-config", str(fields)).stderr


def test_an_empty_file_or_one_not_a_mapping_is_not_called_an_invalid_field(tmp_path: Path) -> None:
    """Breaker 21: an empty config file (or one of comments only) read "1 invalid field(s) / (top level): the file
    must be a YAML mapping" — no field is wrong, and "mapping" did not say the file was empty. It says so, and a
    list or a bare value is named as what it is."""
    from tests.inprocess import run_cli

    for name, text, says in (
        ("empty.yaml", "", "empty: no deployments"),
        ("comments.yaml", "# deployments to come\n\n", "empty: no deployments"),
        ("list.yaml", "- name: chat\n", "not a list"),
        ("scalar.yaml", "deployments\n", "not a single value"),
    ):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        r = run_cli("check-config", str(path))
        assert r.returncode == 2, (name, r.stderr)
        assert f"{name}: the file cannot be used" in r.stderr and says in r.stderr, (name, r.stderr)
        assert "invalid field" not in r.stderr and "Traceback" not in r.stderr


def test_a_symlink_loop_is_a_file_problem_not_a_traceback(tmp_path: Path) -> None:
    """Breaker 24: ``check-config loop1`` (loop1 → loop2 → loop1) printed a RuntimeError traceback from resolving the
    path; ``once``, ``run`` and ``simulate`` said "Too many levels of symbolic links"."""
    from tests.inprocess import run_cli

    (tmp_path / "loop2").symlink_to(tmp_path / "loop1")
    (tmp_path / "loop1").symlink_to(tmp_path / "loop2")
    r = run_cli("check-config", str(tmp_path / "loop1"))
    assert r.returncode == 2, r.stderr
    assert "the file cannot be used" in r.stderr and "symbolic links" in r.stderr
    assert "Traceback" not in r.stderr + r.stdout


def test_an_engine_key_the_engine_does_not_read_is_reported_beside_the_field_errors_once() -> None:
    """Walkthrough, 2026-12-07: a deployment with a bad name, no TTFT target and ``mem_fraction_static`` on vLLM was
    reported with the first two only; the engine key surfaced after they were fixed, though the README promises every
    invalid field at once. A deployment whose fields all validate gets the same line once, not twice."""
    dep = {
        "name": "-bad",
        "engine": "vllm",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "mem_fraction_static": 0.8,
        "slo": {"tpot_seconds": 0.1},
    }
    other = {
        **dep,
        "name": "sg",
        "engine": "sglang",
        "targets": ["http://127.0.0.1:8/metrics"],
        "slo": {"ttft_seconds": 1.0, "tpot_seconds": 0.1},
        "gpu_memory_utilization": 0.95,
    }
    del other["mem_fraction_static"]
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep, other]})
    problems = err.value.problems
    assert ("deployments[0]", "mem_fraction_static: a setting of sglang, not of engine vllm") in problems
    assert any(path == "deployments[0].name" for path, _ in problems)
    assert any(path == "deployments[0].slo.ttft_seconds" for path, _ in problems)
    budget = [m for path, m in problems if path == "deployments[1]"]
    assert budget == [
        "gpu_memory_utilization: 0.95 does nothing on SGLang, whose pool is sized by mem_fraction_static (give it as "
        "--mem-fraction-static runs)"
    ]


def test_the_step_budget_is_checked_against_the_batch_cap_the_engine_runs_by_default() -> None:
    """Breaker 26: ``max_num_batched_tokens: 64`` with ``max_num_seqs`` left out was valid ("max-num-seqs 1024 by
    default"), and ``plan --max-num-batched-tokens 64`` exited 0; vLLM checks the cap it runs, stated or not."""
    from advisor.config import load_config
    from tests.inprocess import run_cli

    text = (
        "deployments:\n  - name: d\n    engine: vllm\n    targets: ['http://127.0.0.1:9/metrics']\n"
        "    model: meta-llama/Llama-3.1-8B-Instruct\n    gpu: H100-SXM\n    max_model_len: 8192\n"
        "    max_num_batched_tokens: 64\n    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}\n"
    )
    with pytest.raises(ConfigError, match=r"max_num_batched_tokens 64 is below max_num_seqs \d+: vLLM refuses"):
        load_config("inline.yaml", text=text)
    base = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192"]
    r = run_cli(*base, "--max-num-batched-tokens", "64")
    assert r.returncode != 0 and "vLLM refuses to start" in r.stderr, r.stderr
