"""Config validation: every invalid field reported at once with its path."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from advisor.config import load_config, parse_config, parse_duration
from advisor.errors import ConfigError
from tests.conftest import REPO_ROOT

GOOD = {
    "deployments": [
        {
            "name": "chat-8b",
            "engine": "vllm",
            "targets": ["http://127.0.0.1:8000/metrics"],
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "H100-SXM",
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.95},
        }
    ]
}


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("5m", 300.0), ("1h30m", 5400.0), ("250ms", 0.25), (30, 30.0), ("2.5", 2.5)],
)
def test_durations_parse_like_prometheus(text: object, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("bad", ["", "5 minutes", "-3s", "0s", "m", True])
def test_bad_durations_are_rejected(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(bad)


def test_the_shipped_example_is_valid() -> None:
    r = _cli("check-config", "deploy/advisor.example.yaml")
    assert r.returncode == 0, r.stderr
    assert "valid — 1 deployment(s), 2 target(s), 1 receiver(s)" in r.stdout
    assert len(r.stdout.strip().splitlines()) == 1


def test_three_wrong_fields_are_all_reported_with_their_paths(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        """
scrape_interval: soon
deployments:
  - name: chat-8b
    engine: vllm
    targets: ["http://127.0.0.1:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    gpu_memory_utilization: 1.5
    max_model_len: 8192
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 2}
"""
    )
    r = _cli("check-config", str(f))
    assert r.returncode == 2
    assert "3 invalid field(s)" in r.stderr
    assert "scrape_interval: invalid duration 'soon'" in r.stderr
    assert "deployments[0].gpu_memory_utilization:" in r.stderr
    assert "deployments[0].slo.target_ratio:" in r.stderr


def test_unknown_model_gpu_and_engine_are_named(tmp_path: Path) -> None:
    data = {"deployments": [dict(GOOD["deployments"][0], model="no/such-model", gpu="H9000")]}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    paths = [p for p, _ in err.value.problems]
    assert paths == ["deployments[0].model", "deployments[0].gpu"]
    data = {"deployments": [dict(GOOD["deployments"][0], engine="vllm2")]}
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    assert err.value.problems[0][0] == "deployments[0].engine"


def test_unknown_keys_and_missing_slo_are_errors() -> None:
    dep = dict(GOOD["deployments"][0], tensor_paralel_size=2)
    del dep["slo"]
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep]})
    paths = sorted(p for p, _ in err.value.problems)
    assert paths == ["deployments[0].slo", "deployments[0].tensor_paralel_size"]


def test_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("deployments:\n  - name: [unclosed\n")
    with pytest.raises(ConfigError) as err:
        load_config(f)
    assert err.value.problems[0][0].startswith("line ")


def test_duplicate_names_and_weights_that_do_not_fit() -> None:
    dep = GOOD["deployments"][0]
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [dep, dep]})
    assert "deployment names must be unique: chat-8b" in str(err.value)
    huge = dict(dep, model="meta-llama/Llama-3.1-70B-Instruct", gpu="L4")
    with pytest.raises(ConfigError) as err:
        parse_config({"deployments": [huge]})
    assert err.value.problems[0][0] == "deployments[0]"


def test_config_json_path_is_resolved_relative_to_the_file(tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "config.json").write_text(
        '{"hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 2,'
        ' "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048,'
        ' "torch_dtype": "bfloat16"}'
    )
    y = tmp_path / "a.yaml"
    y.write_text(
        "deployments:\n  - name: tiny\n    targets: ['http://127.0.0.1:1/metrics']\n    model: tiny/config.json\n"
        "    gpu_memory_gib: 1\n    max_model_len: 1024\n    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
    )
    cfg = load_config(y)
    assert cfg.deployments[0].model == "tiny/config.json"
