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
    done = _promtool("check", "rules", "--lint-fatal", *files)
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
    done = _promtool("check", "rules", "--lint-fatal", *files)
    assert done.returncode == 0, done.stdout + done.stderr
    slo = (tmp_path / "rules" / "slo.rules.yml").read_text(encoding="utf-8")
    assert 'le=~"1[.]0|1"' in slo
    assert 'model=~"(?i)Qwen/Qwen3' in slo


SIX = """
deployments:
  - {name: a1, engine: auto, targets: ["http://127.0.0.1:1/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}}
  - {name: a2, engine: auto, targets: ["http://127.0.0.1:2/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 1, tpot_seconds: 0.05}}
  - {name: a3.x, engine: auto, targets: ["http://127.0.0.1:3/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}}
  - {name: v1, engine: vllm, targets: ["http://127.0.0.1:4/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}}
  - {name: s1, engine: sglang, targets: ["http://127.0.0.1:5/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}}
  - {name: t1, engine: tgi, targets: ["http://127.0.0.1:6/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2, tpot_seconds: 0.05}}
"""


def _generate(tmp_path: Path, text: str) -> Path:
    import argparse

    config = tmp_path / "advisor.yaml"
    config.write_text(text, encoding="utf-8")
    out = tmp_path / "rules"
    assert cmd_rules_generate(argparse.Namespace(config=str(config), out=str(out), check=False)) == 0
    return out


@needs_promtool
def test_six_deployments_mixing_engines_and_auto_pass_promtool_lint_fatal(tmp_path: Path) -> None:
    """Issue 19: three auto deployments beside vLLM, SGLang and TGI ones. Before, every deployment's goodput
    rules and burn-rate alerts had the same name and labels in one group: "lint error 25 duplicate rule(s)"."""
    files = sorted(_generate(tmp_path, SIX).glob("*.yml"))
    done = _promtool("check", "rules", "--lint-fatal", *files)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "duplicate" not in done.stdout + done.stderr


AUTO_TEST = """
rule_files: [rules/slo.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # a1 runs vLLM (targets TTFT 2.5 s, TPOT 0.1 s): per minute 100 requests, 60 with TTFT <= 2.5 s,
      # 80 with TPOT <= 0.1 s; its le="1.0" bucket (a2's target) must not count for it
      - series: 'vllm:time_to_first_token_seconds_bucket{deployment="a1",le="2.5"}'
        values: '0+60x30'
      - series: 'vllm:time_to_first_token_seconds_bucket{deployment="a1",le="1.0"}'
        values: '0+10x30'
      - series: 'vllm:time_to_first_token_seconds_count{deployment="a1"}'
        values: '0+100x30'
      - series: 'vllm:request_time_per_output_token_seconds_bucket{deployment="a1",le="0.1"}'
        values: '0+80x30'
      - series: 'vllm:request_time_per_output_token_seconds_count{deployment="a1"}'
        values: '0+100x30'
      # a2 runs SGLang at TP 2 (targets TTFT 1 s, TPOT 0.05 s): both ranks repeat one value (max, not sum);
      # per minute 40 requests, 30 with TTFT <= 1 s, 20 with TPOT <= 0.04 s (SGLang's bound below 0.05: its TPOT
      # buckets go 0.04 → 0.06, sglang.py), 35 with TPOT <= 0.06 s (above the target: not counted)
      - series: 'sglang:time_to_first_token_seconds_bucket{deployment="a2",tp_rank="0",le="1.0"}'
        values: '0+30x30'
      - series: 'sglang:time_to_first_token_seconds_bucket{deployment="a2",tp_rank="1",le="1.0"}'
        values: '0+30x30'
      - series: 'sglang:time_to_first_token_seconds_count{deployment="a2",tp_rank="0"}'
        values: '0+40x30'
      - series: 'sglang:time_to_first_token_seconds_count{deployment="a2",tp_rank="1"}'
        values: '0+40x30'
      - series: 'sglang:request_time_per_output_token_seconds_bucket{deployment="a2",tp_rank="0",le="0.04"}'
        values: '0+20x30'
      - series: 'sglang:request_time_per_output_token_seconds_bucket{deployment="a2",tp_rank="0",le="0.06"}'
        values: '0+35x30'
      - series: 'sglang:request_time_per_output_token_seconds_count{deployment="a2",tp_rank="0"}'
        values: '0+40x30'
    promql_expr_test:
      # hand-computed: a1 60/100 = 0.6, 80/100 = 0.8, goodput 0.48; a2 30/40 = 0.75, 20/40 = 0.5, goodput 0.375
      - expr: round(deployment:llm_ttft_within_target:ratio_rate5m, 0.000001)
        eval_time: 10m
        exp_samples:
          - {labels: '{deployment="a1"}', value: 0.6}
          - {labels: '{deployment="a2"}', value: 0.75}
      - expr: round(deployment:llm_tpot_within_target:ratio_rate1h, 0.000001)
        eval_time: 30m
        exp_samples:
          - {labels: '{deployment="a1"}', value: 0.8}
          - {labels: '{deployment="a2"}', value: 0.5}
      - expr: round(deployment:llm_goodput:ratio_rate5m, 0.000001)
        eval_time: 10m
        exp_samples:
          - {labels: '{deployment="a1"}', value: 0.48}
          - {labels: '{deployment="a2"}', value: 0.375}
"""


@needs_promtool
def test_auto_deployments_read_their_own_engine_and_bound_from_the_shared_chains(tmp_path: Path) -> None:
    """Two auto deployments on different engines and targets: each goodput from its own engine's names and its
    own bound only (hand arithmetic in AUTO_TEST)."""
    _generate(
        tmp_path,
        """
deployments:
  - {name: a1, engine: auto, targets: ["http://127.0.0.1:1/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}}
  - {name: a2, engine: auto, targets: ["http://127.0.0.1:2/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 1, tpot_seconds: 0.05}}
""",
    )
    (tmp_path / "auto_test.yml").write_text(AUTO_TEST, encoding="utf-8")
    done = subprocess.run(
        [str(PROMTOOL), "test", "rules", "auto_test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


BETWEEN_TEST = """
rule_files: [rules/slo.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # b1 runs vLLM, targets TTFT 3 s and TPOT 0.08 s: vLLM has no 3 s or 0.08 s bucket (2.5 → 5, 0.075 → 0.1).
      # Per minute 100 requests: 60 with TTFT <= 2.5 s, 90 <= 5 s; 70 with TPOT <= 0.075 s, 95 <= 0.1 s
      - series: 'vllm:time_to_first_token_seconds_bucket{deployment="b1",le="2.5"}'
        values: '0+60x30'
      - series: 'vllm:time_to_first_token_seconds_bucket{deployment="b1",le="5.0"}'
        values: '0+90x30'
      - series: 'vllm:time_to_first_token_seconds_count{deployment="b1"}'
        values: '0+100x30'
      - series: 'vllm:request_time_per_output_token_seconds_bucket{deployment="b1",le="0.075"}'
        values: '0+70x30'
      - series: 'vllm:request_time_per_output_token_seconds_bucket{deployment="b1",le="0.1"}'
        values: '0+95x30'
      - series: 'vllm:request_time_per_output_token_seconds_count{deployment="b1"}'
        values: '0+100x30'
      # b2 runs SGLang with the same targets (TTFT 2 → 4; TPOT 0.08 is a bound). Per minute 40 requests: 30 with
      # TTFT <= 2 s, 36 <= 4 s; 20 with TPOT <= 0.08 s
      - series: 'sglang:time_to_first_token_seconds_bucket{deployment="b2",le="2"}'
        values: '0+30x30'
      - series: 'sglang:time_to_first_token_seconds_bucket{deployment="b2",le="4"}'
        values: '0+36x30'
      - series: 'sglang:time_to_first_token_seconds_count{deployment="b2"}'
        values: '0+40x30'
      - series: 'sglang:request_time_per_output_token_seconds_bucket{deployment="b2",le="0.08"}'
        values: '0+20x30'
      - series: 'sglang:request_time_per_output_token_seconds_count{deployment="b2"}'
        values: '0+40x30'
    promql_expr_test:
      # hand-computed: b1 TTFT 60/100 = 0.6, TPOT 70/100 = 0.7, goodput 0.42; b2 30/40 = 0.75, 20/40 = 0.5, 0.375
      - expr: round(deployment:llm_ttft_within_target:ratio_rate5m, 0.000001)
        eval_time: 10m
        exp_samples:
          - {labels: '{deployment="b1"}', value: 0.6}
          - {labels: '{deployment="b2"}', value: 0.75}
      - expr: round(deployment:llm_goodput:ratio_rate5m, 0.000001)
        eval_time: 10m
        exp_samples:
          - {labels: '{deployment="b1"}', value: 0.42}
          - {labels: '{deployment="b2"}', value: 0.375}
"""


@needs_promtool
def test_auto_deployments_with_targets_between_buckets_read_each_engines_bound_below(tmp_path: Path) -> None:
    """Issue 19: with engine auto a 3 s TTFT target matched le=~"3[.]0|3", which vLLM never writes (2.5 → 5), so
    the goodput rules found no data. Each engine's largest bound at or below the target is read (hand arithmetic
    in BETWEEN_TEST), and the files pass promtool's lint."""
    out = _generate(
        tmp_path,
        """
deployments:
  - {name: b1, engine: auto, targets: ["http://127.0.0.1:1/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 3, tpot_seconds: 0.08}}
  - {name: b2, engine: auto, targets: ["http://127.0.0.1:2/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 3, tpot_seconds: 0.08}}
""",
    )
    done = _promtool("check", "rules", "--lint-fatal", *sorted(out.glob("*.yml")))
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "between_test.yml").write_text(BETWEEN_TEST, encoding="utf-8")
    done = subprocess.run(
        [str(PROMTOOL), "test", "rules", "between_test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr


NINETY_TEST = """
rule_files: [rules/slo.rules.yml]
evaluation_interval: 1m
group_eval_order: [capacity-advisor-goodput, capacity-advisor-slo-alerts]
tests:
  # t9: target_ratio 0.9, budget 0.1. Every request misses both targets from t=0 (error ratio 1). Thresholds:
  # 6h/30m 6 × 0.1 = 0.6 (for 15m), 1d/2h 0.3 (for 1h), 3d/6h 0.1 (for 3h); 1h/5m would need 1.44 and is not
  # written. Conditions are true from 1m (rates need two samples): 6h/30m fires at 16m, 1d/2h at 61m.
  # (A line break in a double-quoted YAML string folds into one space.)
  - interval: 1m
    input_series:
      - series: 'vllm:time_to_first_token_seconds_bucket{deployment="t9",le="2.5"}'
        values: '0x120'
      - series: 'vllm:time_to_first_token_seconds_count{deployment="t9"}'
        values: '0+100x120'
      - series: 'vllm:request_time_per_output_token_seconds_bucket{deployment="t9",le="0.1"}'
        values: '0x120'
      - series: 'vllm:request_time_per_output_token_seconds_count{deployment="t9"}'
        values: '0+100x120'
    alert_rule_test:
      - eval_time: 15m
        alertname: CapacityAdvisorGoodputBudgetBurn
        exp_alerts: []
      - eval_time: 61m
        alertname: CapacityAdvisorGoodputBudgetBurn
        exp_alerts:
          - exp_labels: {deployment: t9, severity: critical, long_window: "6h", short_window: "30m", burn_rate: "6"}
            exp_annotations:
              summary: "Deployment t9 is burning its goodput error budget 6× too fast."
              description: "100% of the requests of t9 over the last 6h had TTFT > 2.5 s or TPOT > 0.1 s
                (estimated from the engine's histograms), and the last 30m is as bad. The SLO allows 10%
                (target 90% over 30d); at this rate the budget lasts 5 days."
              runbook_url: "https://github.com/llm-capacity-advisor/llm-capacity-advisor/blob/main/rules/runbook.md#capacityadvisorgoodputbudgetburn"
          - exp_labels: {deployment: t9, severity: warning, long_window: "1d", short_window: "2h", burn_rate: "3"}
            exp_annotations:
              summary: "Deployment t9 is burning its goodput error budget 3× too fast."
              description: "100% of the requests of t9 over the last 1d had TTFT > 2.5 s or TPOT > 0.1 s
                (estimated from the engine's histograms), and the last 2h is as bad. The SLO allows 10%
                (target 90% over 30d); at this rate the budget lasts 10 days."
              runbook_url: "https://github.com/llm-capacity-advisor/llm-capacity-advisor/blob/main/rules/runbook.md#capacityadvisorgoodputbudgetburn"
"""


@needs_promtool
def test_a_target_ratio_of_0_9_writes_the_three_pairs_that_can_fire_and_they_fire(tmp_path: Path) -> None:
    """Issue 19: with target_ratio 0.9 the 14.4× pair (1h/5m) can never fire and is not written; the other pairs
    are, pass promtool's lint, and fire on an error ratio of 1 at their for-durations (NINETY_TEST)."""
    out = _generate(
        tmp_path,
        """
deployments:
  - {name: t9, engine: vllm, targets: ["http://127.0.0.1:1/metrics"], model: meta-llama/Llama-3.1-8B-Instruct,
     gpu: H100-SXM, max_model_len: 8192, slo: {ttft_seconds: 2.5, tpot_seconds: 0.1, target_ratio: 0.9}}
""",
    )
    text = (out / "slo.rules.yml").read_text(encoding="utf-8")
    assert 'long_window: "1h"' not in text and "long_window: 1h" not in text
    done = _promtool("check", "rules", "--lint-fatal", *sorted(out.glob("*.yml")))
    assert done.returncode == 0, done.stdout + done.stderr
    (tmp_path / "ninety_test.yml").write_text(NINETY_TEST, encoding="utf-8")
    done = subprocess.run(
        [str(PROMTOOL), "test", "rules", "ninety_test.yml"], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
