"""``promtool check rules`` and ``promtool test rules`` over ``rules/`` and ``tests/promrules/`` (skipped, with the
reason, where promtool is not installed: ``scripts/install-system-deps`` installs it)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from advisor.rulescmd import cmd_rules_generate

ROOT = Path(__file__).resolve().parents[2]
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian package prometheus; scripts/install-system-deps)"
)


def _promtool(*args: str | Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300)


@needs_promtool
def test_the_committed_rule_files_pass_promtool_check_rules() -> None:
    files = sorted((ROOT / "rules").glob("*.yml"))
    assert files, "rules/*.yml is empty: run capacity-advisor rules generate --config deploy/advisor.example.yaml"
    done = _promtool("check", "rules", *files)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_rule_unit_tests_pass_promtool_test_rules() -> None:
    files = sorted((ROOT / "tests" / "promrules").glob("*.yml"))
    assert len(files) >= 3
    done = _promtool("test", "rules", *files)
    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_rules_for_every_engine_and_option_pass_promtool_check_rules(tmp_path: Path) -> None:
    """The branches the example config does not reach: engine auto, SGLang, TGI, Dynamo with a served model,
    a target between buckets, a target needing an le regex, a target ratio too low for the fast burn."""
    config = tmp_path / "advisor.yaml"
    config.write_text(
        """
deployments:
  - {name: any, engine: auto, targets: ["http://127.0.0.1:1/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}}
  - {name: sg, engine: sglang, targets: ["http://127.0.0.1:2/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, served_model: m, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}}
  - {name: tg, engine: tgi, targets: ["http://127.0.0.1:3/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2, tpot_seconds: 0.05, target_ratio: 0.9}}
  - {name: dy, engine: dynamo, targets: ["http://127.0.0.1:4/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, served_model: Qwen/Qwen3-0.6B, slo: {ttft_seconds: 1, tpot_seconds: 2}}
  - {name: vl, engine: vllm, targets: ["http://127.0.0.1:5/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 1, tpot_seconds: 0.1, target_ratio: 0.99}}
  - {name: ll, engine: llamacpp, targets: ["http://127.0.0.1:6/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 1, tpot_seconds: 0.1}}
""",
        encoding="utf-8",
    )
    import argparse

    args = argparse.Namespace(config=str(config), out=str(tmp_path / "rules"), check=False)
    assert cmd_rules_generate(args) == 0
    files = sorted((tmp_path / "rules").glob("*.yml"))
    done = _promtool("check", "rules", *files)
    assert done.returncode == 0, done.stdout + done.stderr
    slo = (tmp_path / "rules" / "slo.rules.yml").read_text(encoding="utf-8")
    assert 'le=~"1[.]0|1"' in slo
    assert 'model=~"(?i)Qwen/Qwen3' in slo
