"""Bad input, round 2: each case is a clear error naming the file (and the flag, field or entry), never a Python
traceback, an internal class name or an exception's repr; a config.json whose numbers make no model is refused
rather than sized silently; an architecture the capacity pass does not know is sized, with a warning saying how.

A. an integer past Python's 4,300-digit conversion limit in a model config.json (``plan``, ``check-config``);
B. config.json nonsense: hidden size no multiple of the heads without ``head_dim``, repeated keys, a
   ``quantization_config`` without ``quant_method``, bitsandbytes 4- and 8-bit at once, an odd rotary ``head_dim``,
   ``rope_scaling.factor`` ≤ 0, an unknown ``architectures`` class;
C. ``simulate --trace`` / ``--lengths-csv`` files that are not UTF-8, not regular files, or empty;
D. a state file whose recommendations or notifying entries lack a field or have the wrong shape.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from advisor.capacity.models import ModelArch
from advisor.errors import CapacityError, StateError
from advisor.modelfile import resolve_model
from advisor.state import load_notifying, load_state
from tests.inprocess import CliRun, run_cli

TIMEOUT = 60

LLAMA: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
}
INTERNAL = ("Traceback", "KeyError", "TypeError", "ValueError", "EmpiricalLengths", "set_int_max_str_digits")


def _write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _model(tmp_path: Path, text: str, name: str = "config.json") -> Path:
    return _write(tmp_path / name, text)


def _llama(**changes: Any) -> dict[str, Any]:
    out = {**LLAMA, **changes}
    return {k: v for k, v in out.items() if v is not None}


def _refused(tmp_path: Path, config: dict[str, Any] | str, *words: str) -> str:
    text = config if isinstance(config, str) else json.dumps(config)
    path = _model(tmp_path, text)
    with pytest.raises(CapacityError) as info:
        resolve_model(str(path))
    message = str(info.value)
    for word in words:
        assert word in message, (word, message)
    for word in INTERNAL:
        assert word not in message, (word, message)
    return message


def _clean(r: CliRun) -> None:
    for word in INTERNAL:
        assert word not in r.stderr, (word, r.stderr[-2000:])


# --- A: an oversized integer ---------------------------------------------------------------------------------


BIG = "1" + "0" * 5000


def test_an_oversized_integer_names_the_file_the_key_and_the_problem(tmp_path: Path) -> None:
    message = _refused(tmp_path, '{"num_hidden_layers": ' + BIG + "}", "config.json", "num_hidden_layers")
    assert "not valid JSON" in message and "too large" in message


def test_an_oversized_integer_in_a_list_or_alone_is_refused_too(tmp_path: Path) -> None:
    _refused(tmp_path, '{"mlp_only_layers": [1, ' + BIG + "]}", "config.json", "mlp_only_layers", "too large")
    _refused(tmp_path, BIG, "config.json", "too large")


def test_plan_with_an_oversized_integer_is_one_line_naming_the_file(tmp_path: Path) -> None:
    path = _model(tmp_path, '{"num_hidden_layers": ' + BIG + "}", "m.json")
    r = run_cli("plan", "--model", str(path), "--gpu", "H100-SXM", "--max-model-len", "8192", timeout=TIMEOUT)
    assert r.returncode == 2 and r.stdout == ""
    assert "m.json" in r.stderr and "num_hidden_layers" in r.stderr and "too large" in r.stderr
    _clean(r)


def test_check_config_attaches_the_deployment_field_and_line(tmp_path: Path) -> None:
    _model(tmp_path, '{"num_hidden_layers": ' + BIG + "}", "m.json")
    cfg = _write(
        tmp_path / "advisor.yaml",
        """deployments:
  - name: chat
    engine: vllm
    targets: ["http://127.0.0.1:18001/metrics"]
    model: ./m.json
    gpu: H100-SXM
    max_model_len: 8192
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.95}
""",
    )
    r = run_cli("check-config", str(cfg), timeout=TIMEOUT)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "line 5: deployments[0].model" in out and "m.json" in out and "too large" in out, out
    _clean(r)


# --- B: config.json nonsense -----------------------------------------------------------------------------------


def test_hidden_size_no_multiple_of_the_heads_without_head_dim_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, _llama(hidden_size=4100), "hidden_size", "num_attention_heads", "4100", "head_dim")


def test_hidden_size_no_multiple_of_the_heads_with_head_dim_stated_loads(tmp_path: Path) -> None:
    """GLM-4.7 (hidden 5120, 96 heads, head_dim 128) and Qwen3.5-27B (5120, 24, 256) state head_dim: valid."""
    path = _model(tmp_path, json.dumps(_llama(hidden_size=5120, num_attention_heads=96, head_dim=128)))
    assert resolve_model(str(path)).head_dim == 128


def test_a_repeated_key_is_refused_naming_it(tmp_path: Path) -> None:
    text = json.dumps(LLAMA)[:-1] + ', "num_hidden_layers": 2}'
    message = _refused(tmp_path, text, "config.json", "'num_hidden_layers'")
    assert "repeat" in message


def test_a_repeated_key_in_a_nested_object_is_refused(tmp_path: Path) -> None:
    text = json.dumps(_llama(rope_scaling={"factor": 8.0}))
    text = text.replace('"factor": 8.0', '"factor": 8.0, "factor": 2.0')
    _refused(tmp_path, text, "'factor'", "repeat")


def test_a_quantization_config_without_quant_method_is_refused(tmp_path: Path) -> None:
    for qc in ({"bits": 4}, {}, {"quant_method": ""}, {"quant_method": None, "bits": 4}):
        _refused(tmp_path, _llama(quantization_config=qc), "quantization_config.quant_method")


def test_a_legacy_bitsandbytes_config_without_quant_method_reads_as_bitsandbytes(tmp_path: Path) -> None:
    """transformers (before quant_method was written) saved BitsAndBytesConfig without it; AutoHfQuantizer still
    takes ``load_in_4bit``/``load_in_8bit`` true as bitsandbytes. Sized as such, not as bf16 weights."""
    path = _model(tmp_path, json.dumps(_llama(quantization_config={"load_in_4bit": True})))
    arch = resolve_model(str(path))
    assert arch.checkpoint_quantization == "bitsandbytes"
    assert arch.checkpoint_weight_bits == pytest.approx(4.5)


def test_bitsandbytes_4bit_and_8bit_at_once_are_refused(tmp_path: Path) -> None:
    for qc in (
        {"quant_method": "bitsandbytes", "load_in_4bit": True, "load_in_8bit": True},
        {"load_in_4bit": True, "load_in_8bit": True},
    ):
        _refused(tmp_path, _llama(quantization_config=qc), "load_in_4bit", "load_in_8bit")


@pytest.mark.parametrize("head_dim", [7, 1, 129])
def test_an_odd_head_dim_is_refused_where_rotary_embeddings_apply(tmp_path: Path, head_dim: int) -> None:
    _refused(tmp_path, _llama(head_dim=head_dim), "head_dim", str(head_dim))


def test_an_odd_head_dim_from_hidden_over_heads_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, _llama(hidden_size=224, num_attention_heads=32, num_key_value_heads=8), "head_dim", "7")


@pytest.mark.parametrize("head_dim", [64, 80, 96, 112, 120, 128, 192, 256])
def test_head_dims_real_models_use_load(tmp_path: Path, head_dim: int) -> None:
    path = _model(tmp_path, json.dumps(_llama(head_dim=head_dim)))
    assert resolve_model(str(path)).head_dim == head_dim


def test_an_odd_head_dim_without_rotary_embeddings_loads() -> None:
    """GPT-2 has learned absolute positions, no rotary embedding: its head size need not be even."""
    config = {"model_type": "gpt2", "n_embd": 63, "n_head": 9, "n_layer": 2, "vocab_size": 100, "n_positions": 64}
    assert ModelArch.from_hf_config(config, "tiny-gpt2").head_dim == 7


@pytest.mark.parametrize("factor", [0, -4, 0.0, "8", True, float("nan")])
def test_a_rope_scaling_factor_that_is_no_positive_number_is_refused(tmp_path: Path, factor: Any) -> None:
    config = _llama(rope_scaling={"rope_type": "yarn", "factor": factor})
    path = _model(tmp_path, json.dumps(config))
    with pytest.raises(CapacityError, match=r"rope_scaling\.factor"):
        resolve_model(str(path))


def test_rope_scaling_that_is_no_object_is_refused(tmp_path: Path) -> None:
    _refused(tmp_path, _llama(rope_scaling="yarn"), "rope_scaling", "JSON object")


def test_real_rope_scaling_loads(tmp_path: Path) -> None:
    for rope in (
        {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0},
        {"type": "yarn", "factor": 40},
        {"rope_type": "default", "factor": None},
        None,
    ):
        path = _model(tmp_path, json.dumps({**LLAMA, "rope_scaling": rope}))
        assert resolve_model(str(path)).num_layers == 32


def _plan(path: Path, *flags: str) -> CliRun:
    return run_cli(
        "plan", "--model", str(path), "--gpu", "H100-SXM", "--max-model-len", "8192", *flags, timeout=TIMEOUT
    )


def test_an_unknown_architecture_is_planned_with_a_warning_on_stderr(tmp_path: Path) -> None:
    config = _llama(architectures=["FrobnicatorForCausalLM"], model_type="frob")
    path = _model(tmp_path, json.dumps(config))
    r = _plan(path, "--json")
    assert r.returncode == 0, r.stderr
    json.loads(r.stdout)  # stdout stays one JSON document
    assert "FrobnicatorForCausalLM" in r.stderr and "dense decoder" in r.stderr, r.stderr
    _clean(r)
    # the warning is logged once per process and file (the daemon resolves the model at every reload): another file
    text = _plan(_model(tmp_path, json.dumps(config), "frob.json"))
    assert text.returncode == 0
    assert "FrobnicatorForCausalLM" in text.stderr and "FrobnicatorForCausalLM" not in text.stdout


def test_a_known_architecture_plans_without_that_warning(tmp_path: Path) -> None:
    r = _plan(_model(tmp_path, json.dumps(LLAMA)), "--json")
    assert r.returncode == 0, r.stderr
    assert "dense decoder" not in r.stderr and "LlamaForCausalLM" not in r.stderr


# --- C: simulate's traffic files -------------------------------------------------------------------------------


@pytest.fixture
def sim_config(tmp_path: Path) -> Path:
    return _write(
        tmp_path / "advisor.yaml",
        """deployments:
  - name: chat-8b
    engine: vllm
    targets: ["http://10.0.0.5:8000/metrics"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    max_model_len: 8192
    slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.95}
""",
    )


def _simulate_refused(config: Path, flag: str, path: Path, *words: str) -> str:
    r = run_cli("simulate", "--config", str(config), "--duration", "5", flag, str(path), timeout=TIMEOUT)
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    _clean(r)
    line = r.stderr.strip().splitlines()[-1]
    assert f"{flag} {path}" in line, line
    for word in words:
        assert word in line, (word, line)
    return line


@pytest.mark.parametrize("flag", ["--trace", "--lengths-csv"])
def test_a_traffic_file_that_is_not_utf8_names_the_flag_and_file(sim_config: Path, tmp_path: Path, flag: str) -> None:
    path = _write(tmp_path / "bin.csv", b"\xff\xfe0,100,10\n")
    _simulate_refused(sim_config, flag, path, "not UTF-8 text")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("flag", ["--trace", "--lengths-csv"])
def test_a_traffic_file_that_is_a_fifo_names_the_flag_and_file(sim_config: Path, tmp_path: Path, flag: str) -> None:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    _simulate_refused(sim_config, flag, path, "not a regular file")


@pytest.mark.parametrize("flag", ["--trace", "--lengths-csv"])
def test_a_missing_traffic_file_names_the_flag_and_file(sim_config: Path, tmp_path: Path, flag: str) -> None:
    _simulate_refused(sim_config, flag, tmp_path / "absent.csv", "No such file")


def test_an_empty_lengths_csv_names_the_flag_and_file(sim_config: Path, tmp_path: Path) -> None:
    _simulate_refused(sim_config, "--lengths-csv", _write(tmp_path / "empty.csv", ""), "no rows")


def test_an_empty_trace_names_the_flag_and_file(sim_config: Path, tmp_path: Path) -> None:
    _simulate_refused(sim_config, "--trace", _write(tmp_path / "empty.csv", "# nothing\n"), "no requests")


def test_a_bad_trace_line_names_the_flag_file_and_line(sim_config: Path, tmp_path: Path) -> None:
    path = _write(tmp_path / "t.csv", "0,100,10\n1,abc,10\n")
    _simulate_refused(sim_config, "--trace", path, "line 2", "prompt_tokens")


def test_a_bad_lengths_line_names_the_flag_file_and_line(sim_config: Path, tmp_path: Path) -> None:
    path = _write(tmp_path / "l.csv", "100,10\n200,abc\n")
    _simulate_refused(sim_config, "--lengths-csv", path, "line 2")


# --- D: the state file -------------------------------------------------------------------------------------------


def _record(**changes: Any) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "id": "rec-1",
        "deployment": "chat",
        "rule": "kv_pressure",
        "dial": "max_num_seqs",
        "action": "decrease",
        "current": 256,
        "suggested": 128,
        "flag": "--max-num-seqs",
        "severity": "warning",
        "confidence": 0.8,
        "summary": "s",
        "description": "d",
        "runbook": "r",
        "opened_at": "2026-01-01T00:00:00Z",
        "opened_at_seconds": 1767225600.0,
        "predicted_effect": {},
        "evidence": {},
    }
    rec.update(changes)
    return {k: v for k, v in rec.items() if v is not None}


def _state(tmp_path: Path, recommendations: list[Any], notifying: list[Any] | None = None) -> Path:
    doc: dict[str, Any] = {"version": 1, "saved_at": 0, "recommendations": recommendations}
    if notifying is not None:
        doc["notifying"] = notifying
    return _write(tmp_path / "state.json", json.dumps(doc))


def _state_refused(path: Path, *words: str, notifying: bool = False) -> str:
    before = path.read_bytes()
    with pytest.raises(StateError) as info:
        (load_notifying if notifying else load_state)(path)
    message = str(info.value)
    assert str(path) in message, message
    for word in words:
        assert word in message, (word, message)
    for word in (*INTERNAL, "KeyError(", "string indices"):
        assert word not in message, (word, message)
    assert path.read_bytes() == before  # nothing lost: the file is left as it was
    return message


def test_a_valid_state_file_loads(tmp_path: Path) -> None:
    assert [r.id for r in load_state(_state(tmp_path, [_record(), _record(id="rec-2")]))] == ["rec-1", "rec-2"]


def test_a_recommendation_missing_a_field_is_named(tmp_path: Path) -> None:
    path = _state(
        tmp_path, [_record(), _record(id="rec-2"), _record(id="rec-3", opened_at=None, opened_at_seconds=None)]
    )
    _state_refused(path, "recommendation 3", "rec-3", "missing field 'opened_at'")


def test_a_recommendation_that_is_not_an_object_is_named(tmp_path: Path) -> None:
    _state_refused(_state(tmp_path, [_record(), "oops"]), "recommendation 2", "not a JSON object")


def test_a_recommendation_field_of_the_wrong_type_is_named(tmp_path: Path) -> None:
    _state_refused(_state(tmp_path, [_record(confidence="high")]), "recommendation 1", "'confidence'", "high")
    _state_refused(_state(tmp_path, [_record(predicted_effect=5)]), "recommendation 1", "'predicted_effect'")
    _state_refused(_state(tmp_path, [_record(rank="first")]), "recommendation 1", "'rank'")
    _state_refused(_state(tmp_path, [_record(alternatives=[1])]), "recommendation 1", "'alternatives'")


def test_recommendations_that_are_not_a_list_are_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "state.json", json.dumps({"version": 1, "recommendations": {"a": 1}}))
    _state_refused(path, "recommendations", "list")


def test_a_notifying_entry_missing_a_field_is_named(tmp_path: Path) -> None:
    path = _state(tmp_path, [], [{"recommendation": _record()}])
    _state_refused(path, "notifying entry 1", "missing field 'kind'", notifying=True)
    path = _state(tmp_path, [], [{"kind": "opened", "recommendation": _record(id=None)}])
    _state_refused(path, "notifying entry 1", "missing field 'id'", notifying=True)
    path = _state(tmp_path, [], ["opened"])
    _state_refused(path, "notifying entry 1", "not a JSON object", notifying=True)


def test_a_number_too_large_in_the_state_file_is_named(tmp_path: Path) -> None:
    path = _state(tmp_path, [_record(confidence=10**400)])
    _state_refused(path, "recommendation 1", "'confidence'", "too large")
    path = _write(tmp_path / "state.json", '{"version": 1, "recommendations": [], "x": ' + "9" * 5000 + "}")
    _state_refused(path, "not valid JSON", "too large")


def test_recommendations_null_is_refused_not_read_as_none(tmp_path: Path) -> None:
    path = _write(tmp_path / "state.json", json.dumps({"version": 1, "recommendations": None}))
    _state_refused(path, "'recommendations' must be a list", "null")
