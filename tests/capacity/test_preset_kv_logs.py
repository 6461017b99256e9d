"""Every bundled preset says which published engine start-up logs its KV figures are checked against (issue 16:
"Presets added elsewhere are checked against a published start-up log, or marked unsupported for KV").

``kv_logs`` in advisor/data/models.json must be present on every preset (a preset added later has to decide) and
must equal the sources of the truth-table cases (tests/capacity/truth/*.yaml) that are planned with that preset:
adding a case without naming it on the preset, or naming a log no case holds, fails here. A preset with no log
is planned with a line saying its figures are unchecked.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from advisor.capacity.data import read_data
from advisor.capacity.models import get_preset, preset_kv_logs
from advisor.errors import CapacityError
from tests.capacity.truthtable import stated_or_inferred
from tests.inprocess import run_cli

TRUTH = Path(__file__).resolve().parent / "truth"
ENTRIES = json.loads(read_data("models.json"))["models"]


@functools.cache
def _cases_by_preset() -> dict[str, set[str]]:
    """Preset id → sources of the complete truth cases planned with it (a case with its own config.json is not);
    read once (the truth files are ~1 s of YAML a read, and every preset's test asks)."""
    out: dict[str, set[str]] = defaultdict(set)
    for path in sorted(TRUTH.glob("*.yaml")):
        if path.stem.endswith("_incomplete"):
            continue
        for case in yaml.safe_load(path.read_text(encoding="utf-8")):
            if stated_or_inferred(case, "model_config"):
                continue
            try:
                preset = get_preset(str(stated_or_inferred(case, "model")))
            except CapacityError:
                continue
            out[preset.name].add(case["source"])
    return out


@pytest.mark.parametrize("entry", ENTRIES, ids=[e["id"] for e in ENTRIES])
def test_every_preset_names_the_logs_it_is_checked_against(entry: dict[str, object]) -> None:
    assert "kv_logs" in entry, f"{entry['id']}: add kv_logs (the truth-table logs of this preset, or [])"
    assert set(entry["kv_logs"]) == _cases_by_preset().get(str(entry["id"]), set())  # type: ignore[arg-type]


def test_some_presets_are_checked_and_the_rest_say_they_are_not() -> None:
    checked = [e["id"] for e in ENTRIES if e["kv_logs"]]
    assert "meta-llama/Llama-3.1-8B-Instruct" in checked and "Qwen/Qwen3-8B" in checked
    assert preset_kv_logs("mistralai/Mistral-7B-Instruct-v0.3") == ()
    assert preset_kv_logs("tests/fixtures/hf_configs/gpt2.json") is None  # not a preset: not applicable


def test_plan_says_when_a_presets_kv_figures_are_unchecked() -> None:
    base = ("plan", "--gpu", "a100-80gb", "--max-model-len", "8192")
    unchecked = run_cli(*base, "--model", "mistralai/Mistral-7B-Instruct-v0.3")
    assert unchecked.returncode == 0, unchecked.stderr
    assert "no published start-up log of this preset yet" in unchecked.stdout
    checked = run_cli(*base, "--model", "Qwen/Qwen3-8B", "--json")
    assert json.loads(checked.stdout)["kv_checked_against_logs"] == sorted(_cases_by_preset()["Qwen/Qwen3-8B"])
    gpt2 = str(Path(__file__).resolve().parents[1] / "fixtures/hf_configs/gpt2.json")
    config = run_cli("plan", "--gpu", "a100-80gb", "--max-model-len", "1024", "--model", gpt2)
    assert config.returncode == 0, config.stderr
    assert "KV checked against" not in config.stdout
