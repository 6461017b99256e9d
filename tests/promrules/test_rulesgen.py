"""The rule generator: committed files regenerate byte for byte, the YAML says what the values say, names
follow the conventions, bucket boundaries are checked and reported."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
import yaml

from advisor import conventions as c
from advisor import conventions_rules as r
from advisor.rulescmd import add_rules_parser, cmd_rules_generate, rules_input
from advisor.rulesgen import (
    ENGINE_BUCKETS,
    DeploymentSLO,
    RulesInput,
    auto_bound,
    choose_bound,
    generate,
    le_matcher,
    le_spellings,
    render,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "deploy" / "advisor.example.yaml"


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="capacity-advisor")
    add_rules_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    rc: int = args.func(args)
    return rc


def _slo(**kw: object) -> DeploymentSLO:
    base: dict[str, object] = {
        "name": "d",
        "engine": "vllm",
        "ttft_seconds": 2.5,
        "tpot_seconds": 0.1,
        "target_ratio": 0.95,
    }
    base.update(kw)
    return DeploymentSLO(**base)  # type: ignore[arg-type]


def test_regenerating_from_the_example_config_leaves_no_difference_from_the_committed_rules(tmp_path: Path) -> None:
    assert _run(["rules", "generate", "--config", str(EXAMPLE), "--out", str(tmp_path)]) == 0
    for name in r.GENERATED_FILES:
        committed = ROOT / "rules" / name
        assert committed.exists(), f"rules/{name} is not committed"
        assert (tmp_path / name).read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), (
            f"rules/{name} differs from what deploy/advisor.example.yaml generates: run "
            "capacity-advisor rules generate --config deploy/advisor.example.yaml"
        )


def test_check_mode_passes_on_the_committed_rules_and_fails_on_a_changed_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(["rules", "generate", "--config", str(EXAMPLE), "--out", str(ROOT / "rules"), "--check"]) == 0
    assert _run(["rules", "generate", "--config", str(EXAMPLE), "--out", str(tmp_path)]) == 0
    (tmp_path / r.FILE_SLO).write_text("groups: []\n", encoding="utf-8")
    capsys.readouterr()
    assert _run(["rules", "generate", "--config", str(EXAMPLE), "--out", str(tmp_path), "--check"]) == 1
    assert r.FILE_SLO in capsys.readouterr().err


def test_an_invalid_config_is_an_error_before_anything_is_written(tmp_path: Path) -> None:
    from advisor.errors import ConfigError

    bad = tmp_path / "bad.yaml"
    bad.write_text("deployments: []\n", encoding="utf-8")
    with pytest.raises(ConfigError):
        cmd_rules_generate(argparse.Namespace(config=str(bad), out=str(tmp_path / "out"), check=False))
    assert not (tmp_path / "out").exists()


def test_the_rendered_yaml_reads_back_as_the_generated_values() -> None:
    generated = generate(rules_input(EXAMPLE))
    for f in generated.files:
        assert yaml.safe_load(render(f)) == f.as_dict()


def _all_rules() -> list[dict[str, object]]:
    generated = generate(rules_input(EXAMPLE))
    return [rule for f in generated.files for g in f.as_dict()["groups"] for rule in g["rules"]]  # type: ignore[attr-defined]


def test_recording_rules_are_named_level_metric_operations() -> None:
    records = [str(x["record"]) for x in _all_rules() if "record" in x]
    assert records
    for name in records:
        assert re.fullmatch(r"deployment:llm_[a-z0-9_]+:[a-z0-9_]+", name), name
    assert {r.KV_CACHE_USAGE, r.REQUESTS_RUNNING, r.REQUESTS_WAITING, r.goodput("5m")} <= set(records)
    assert {r.ttft_quantile(0.9), r.tpot_quantile(0.9)} == {
        "deployment:llm_ttft_seconds:p90_rate5m",
        "deployment:llm_tpot_seconds:p90_rate5m",
    }


def test_every_alert_has_the_prefix_a_severity_and_the_three_annotations() -> None:
    alerts = [x for x in _all_rules() if "alert" in x]
    assert {a["alert"] for a in alerts} == set(r.ALERTS)
    for a in alerts:
        assert str(a["alert"]).startswith(r.ALERT_PREFIX)
        labels = a["labels"]
        annotations = a["annotations"]
        assert isinstance(labels, dict) and isinstance(annotations, dict)
        assert labels[c.LABEL_SEVERITY] in c.SEVERITIES
        assert set(annotations) == {"summary", "description", "runbook_url"}
        assert annotations["runbook_url"] == r.runbook_url(str(a["alert"]))


def test_every_alert_has_a_runbook_section_with_its_anchor() -> None:
    runbook = (ROOT / "rules" / "runbook.md").read_text(encoding="utf-8")
    headings = {line[3:].strip().lower() for line in runbook.splitlines() if line.startswith("## ")}
    for alert in r.ALERTS:
        assert r.runbook_anchor(alert) in headings, f"rules/runbook.md has no '## {alert}' section"


@pytest.mark.parametrize(
    ("target", "bounds", "le", "exact"),
    [
        (2.5, ENGINE_BUCKETS["vllm"].ttft, 2.5, True),
        (3.0, ENGINE_BUCKETS["vllm"].ttft, 2.5, False),
        (3.75, (2.5, 5.0), 2.5, False),  # the largest bound below: a stricter SLO
        (4.9, (2.5, 5.0), 2.5, False),  # not the nearer 5.0: 4.95 s would count as within 4.9 s
        (2.0, ENGINE_BUCKETS["vllm"].ttft, 1.0, False),  # what engine auto counts vLLM's TTFT 2 s at
        (0.05, (0.1, 0.2), 0.1, False),  # below every bound: the smallest
        (0.001, (0.0, 0.1, 0.2), 0.1, False),  # never le=0 (Dynamo's first bound): it counts no request within
        (3000.0, ENGINE_BUCKETS["vllm"].ttft, 2560.0, False),
        (0.1, ENGINE_BUCKETS["vllm"].tpot, 0.1, True),
        (2.5, ENGINE_BUCKETS["sglang"].ttft, 2.0, False),
        (1.0, ENGINE_BUCKETS["sglang"].ttft, 1.0, True),
    ],
)
def test_a_target_uses_its_bucket_bound_or_the_nearest_one_reported(
    target: float, bounds: tuple[float, ...], le: float, exact: bool
) -> None:
    choice = choose_bound(target, bounds, "TTFT", "vllm")
    assert (choice.le, choice.exact) == (le, exact)
    assert (choice.note is None) == exact


def test_unknown_buckets_use_the_target_as_given_and_say_so() -> None:
    choice = choose_bound(2.5, (), "TTFT", "auto")
    assert choice.le == 2.5
    assert choice.note is not None and "unknown" in choice.note


@pytest.mark.parametrize(
    ("value", "spellings", "matcher"),
    [
        (2.5, ("2.5",), ("le", "=", "2.5")),
        (1.0, ("1.0", "1"), ("le", "=~", "1[.]0|1")),
        (10.0, ("10.0", "10"), ("le", "=~", "10[.]0|10")),
        (2560.0, ("2560.0", "2560"), ("le", "=~", "2560[.]0|2560")),
        (1e6, ("1e+06", "1000000", "1000000.0"), ("le", "=~", "1e[+]06|1000000|1000000[.]0")),
    ],
)
def test_a_bound_is_matched_in_every_spelling_clients_write(
    value: float, spellings: tuple[str, ...], matcher: tuple[str, str, str]
) -> None:
    assert le_spellings(value) == spellings
    assert le_matcher(value) == matcher


def test_a_target_between_buckets_is_reported_on_stderr_and_in_the_file() -> None:
    generated = generate(RulesInput((_slo(engine="sglang", ttft_seconds=2.5),)))
    assert any("between the buckets 2 and 4" in w for w in generated.warnings)
    slo = render(next(f for f in generated.files if f.name == r.FILE_SLO))
    assert "use le=2 instead" in slo
    assert 'le="2"' not in slo and 'le=~"2[.]0|2"' in slo


def test_engines_without_histograms_get_no_slo_rules_and_a_warning() -> None:
    generated = generate(RulesInput((_slo(engine="llamacpp"), _slo(name="t", engine="triton-trtllm"))))
    assert len([w for w in generated.warnings if "histogram" in w]) == 2
    slo = next(f for f in generated.files if f.name == r.FILE_SLO)
    assert all(not g.rules for g in slo.groups)


def test_tgi_goodput_counts_the_tpot_target_only() -> None:
    generated = generate(RulesInput((_slo(engine="tgi", tpot_seconds=0.1),)))
    slo = next(f for f in generated.files if f.name == r.FILE_SLO)
    records = {x.record for x in slo.groups[0].rules}
    assert r.ttft_within_target("5m") not in records
    goodput = next(x for x in slo.groups[0].rules if x.record == r.goodput("5m"))
    assert goodput.expr == f'{r.tpot_within_target("5m")}{{deployment="d"}}'


def test_a_target_ratio_too_low_for_the_fast_burn_is_reported() -> None:
    generated = generate(RulesInput((_slo(target_ratio=0.9),)))
    assert any("can never fire" in w and "1h/5m" in w for w in generated.warnings)
    assert not any("6h/30m" in w for w in generated.warnings)  # 6 × 0.1 = 0.6 < 1


def test_a_burn_rate_pair_that_can_never_fire_is_not_written_and_the_others_are() -> None:
    """Issue 19: with target_ratio 0.9 the budget is 0.1, and the SRE workbook's 1h/5m pair at 14.4× needs an
    error ratio of 14.4 × 0.1 = 1.44 > 1: not written, said in the warning and the file's header; 6h/30m (0.6),
    1d/2h (0.3) and 3d/6h (0.1) are written."""
    generated = generate(RulesInput((_slo(target_ratio=0.9), _slo(name="ok", target_ratio=0.95))))
    slo = next(f for f in generated.files if f.name == r.FILE_SLO)
    pairs = [(a.labels["deployment"], a.labels[r.LABEL_LONG_WINDOW]) for a in slo.groups[1].rules]
    assert pairs == [("d", "6h"), ("d", "1d"), ("d", "3d"), ("ok", "1h"), ("ok", "6h"), ("ok", "1d"), ("ok", "3d")]
    (never,) = [w for w in generated.warnings if "can never fire" in w]
    assert never.startswith("deployment 'd': 1h/5m:") and "1.44" in never and "not written" in never
    text = render(slo)
    header = text[: text.index("groups:")]
    assert f"# - {never}" in header.splitlines()
    assert "1.44" not in text[text.index("groups:") :]


@pytest.mark.parametrize(
    ("engine", "target", "le"),
    [
        ("vllm", 3.0, 2.5),  # vLLM's TTFT buckets jump 2.5 → 5
        ("vllm", 2.5, 2.5),
        ("sglang", 3.0, 2.0),  # 2 → 4
        ("dynamo", 3.0, 2.2),  # 2.2 → 4.7
        ("vllm", 0.0005, 0.001),  # below every bound: the smallest
    ],
)
def test_engine_auto_counts_each_engine_at_its_largest_bound_not_above_the_target(
    engine: str, target: float, le: float
) -> None:
    assert auto_bound(target, ENGINE_BUCKETS[engine].ttft) == le


def test_an_auto_deployment_never_matches_a_target_that_is_no_engines_bound() -> None:
    """Issue 19: engine auto with TTFT 3 s matched le=~"3[.]0|3", which no vLLM histogram has (2.5 → 5): the
    alert found no data. Now each engine's bound below the target is matched, in the shared chain and in a
    served-model deployment's own chain."""
    deps = (
        _slo(name="a", engine="auto", ttft_seconds=3.0, tpot_seconds=0.08),
        _slo(name="m", engine="auto", ttft_seconds=3.0, tpot_seconds=0.08, served_model="x"),
    )
    generated = generate(RulesInput(deps))
    text = render(next(f for f in generated.files if f.name == r.FILE_SLO))
    body = text[text.index("groups:") :]
    assert 'le=~"3[.]0|3"' not in body and 'le="3"' not in body
    assert 'vllm:time_to_first_token_seconds_bucket{deployment=~"a",le=~"2[.]5"}' in body
    assert 'sglang:time_to_first_token_seconds_bucket{deployment=~"a",priority="",le=~"2[.]0|2"}' in body
    assert 'vllm:time_to_first_token_seconds_bucket{deployment="m",model_name="x",le="2.5"}' in body
    assert 'vllm:request_time_per_output_token_seconds_bucket{deployment="m",model_name="x",le="0.075"}' in body
    (auto,) = [w for w in generated.warnings if "engine auto" in w]
    assert "'a' TTFT 3 s at le=2.5 (vllm, trtllm), 2 (sglang), 2.2 (dynamo)" in auto


def test_the_served_model_selects_the_engine_model_label() -> None:
    generated = generate(
        RulesInput((_slo(engine="vllm", served_model="m-1"), _slo(name="q", engine="dynamo", served_model="Qwen/Q")))
    )
    slo = render(next(f for f in generated.files if f.name == r.FILE_SLO))
    assert 'vllm:time_to_first_token_seconds_count{deployment="d",model_name="m-1"}' in slo
    assert 'dynamo_frontend_time_to_first_token_seconds_count{deployment="q",model=~"(?i)Qwen/Q"}' in slo


def test_the_not_evaluating_alert_waits_at_least_four_scrape_intervals() -> None:
    slow = generate(RulesInput((_slo(),), scrape_interval_seconds=60.0))
    advisor = next(f for f in slow.files if f.name == r.FILE_ADVISOR)
    expr = next(x.expr for x in advisor.groups[0].rules if x.alert == r.ALERT_NOT_EVALUATING)
    assert expr == f"time() - ({c.CYCLE_LAST_SUCCESS_TIMESTAMP} > 0 or {c.LAST_EVALUATION_TIMESTAMP}) > 240"


def test_the_drift_alert_uses_the_configured_bound() -> None:
    generated = generate(RulesInput((_slo(),), capacity_model_error_bound=0.25))
    advisor = next(f for f in generated.files if f.name == r.FILE_ADVISOR)
    expr = next(x.expr for x in advisor.groups[0].rules if x.alert == r.ALERT_CAPACITY_MODEL_DRIFT)
    assert expr == f"abs({c.CAPACITY_MODEL_ERROR_RATIO}) > 0.25"


def _slo_bytes(deployments: tuple[DeploymentSLO, ...]) -> int:
    generated = generate(RulesInput(deployments))
    return len(render(next(f for f in generated.files if f.name == r.FILE_SLO)).encode())


def _autos(n: int) -> tuple[DeploymentSLO, ...]:
    return tuple(_slo(name=f"auto-{i}", engine="auto", ttft_seconds=(2.5, 1.0)[i % 2]) for i in range(n))


def test_auto_deployments_share_one_or_chain_so_the_slo_file_stays_small() -> None:
    """Issue 19: six auto deployments made a 310 KB slo.rules.yml (each with its own ``or`` chain over every
    engine's names: the sixth added 51.6 KB). The chains are now written once: 136 KB for six, and each further
    auto deployment adds its own rules and alerts only (14.5 KB)."""
    six = _slo_bytes(_autos(6))
    assert six < 150_000, six
    assert six - _slo_bytes(_autos(5)) < 16_000


def test_each_warning_is_printed_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 19: auto deployments' unknown buckets are one warning naming them all (before: two per deployment),
    and no warning line repeats, on stderr or in the file header."""
    generated = generate(RulesInput((*_autos(4), _slo(name="s", engine="sglang"), _slo(name="s2", engine="sglang"))))
    auto = [w for w in generated.warnings if "engine auto" in w]
    assert len(auto) == 1
    assert all(f"'auto-{i}' TPOT 0.1 s at le=" in auto[0] for i in range(4))
    assert len(set(generated.warnings)) == len(generated.warnings)
    slo = render(next(f for f in generated.files if f.name == r.FILE_SLO))
    header = [line for line in slo.splitlines() if line.startswith("# - ")]
    slo_warnings = [w for w in generated.warnings if "ScaledObject" not in w]  # the manifests' go in their header
    assert len(header) == len(set(header)) == len(slo_warnings)

    config = tmp_path / "advisor.yaml"
    config.write_text(
        "deployments:\n"
        + "".join(
            f"  - {{name: a{i}, engine: auto, targets: ['http://127.0.0.1:{i + 1}/metrics'], "
            "model: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM, max_model_len: 8192, "
            "slo: {ttft_seconds: 2.5, tpot_seconds: 0.1}, autoscaling: {max_replica_count: 4}}\n"
            for i in range(3)
        ),
        encoding="utf-8",
    )
    capsys.readouterr()
    assert _run(["rules", "generate", "--config", str(config), "--out", str(tmp_path / "out")]) == 0
    lines = [x for x in capsys.readouterr().err.splitlines() if "warning" in x]
    assert len(lines) == 1 and "'a0', 'a1', 'a2'" in lines[0]


def test_check_config_prints_every_warning_rules_generate_prints_once_and_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 19: check-config said "valid" with no warning while rules generate on the same file warned of targets
    between buckets (TTFT 3 s → le 2.5, TPOT 0.08 → le 0.075 on vLLM) and of a 1h/5m pair that can never fire
    (14.4 × (1 − 0.9) = 1.44 ≥ 1). check-config now prints the same lines, each once, and still exits 0."""
    from advisor.cli import main

    config = tmp_path / "advisor.yaml"
    config.write_text(
        "deployments:\n"
        "  - {name: qwen-14b, engine: vllm, targets: ['http://127.0.0.1:1/metrics'], "
        "model: meta-llama/Llama-3.1-8B-Instruct, gpu: H100-SXM, max_model_len: 8192, "
        "slo: {ttft_seconds: 3, tpot_seconds: 0.08, target_ratio: 0.9}}\n",
        encoding="utf-8",
    )
    capsys.readouterr()
    assert main(["check-config", str(config)]) == 0
    checked = capsys.readouterr()
    assert "valid" in checked.out
    assert _run(["rules", "generate", "--config", str(config), "--out", str(tmp_path / "out")]) == 0
    generated = [x for x in capsys.readouterr().err.splitlines() if "warning:" in x]
    warned = [x for x in checked.err.splitlines() if "warning:" in x]
    assert warned == generated and len(set(warned)) == len(warned)
    text = "\n".join(warned)
    assert "TTFT target 3 s is between the buckets 2.5 and 5" in text and "use le=2.5 instead" in text
    assert "TPOT target 0.08 s is between the buckets 0.075 and 0.1" in text and "le=0.075" in text
    assert "1h/5m: burn rate 14.4× a budget of 0.1 needs an error ratio of 1.44 ≥ 1" in text


def test_every_builtin_rule_has_a_runbook_section_its_recommendations_link_to() -> None:
    # fresh-user walkthrough 2026-12-07: host_or_buy's recommendations linked to '#host-or-buy', which had no section
    from advisor.config import RulesConfig
    from advisor.rules.registry import builtin_rules

    runbook = (ROOT / "rules" / "runbook.md").read_text(encoding="utf-8")
    headings = {line[3:].strip().lower() for line in runbook.splitlines() if line.startswith("## ")}
    missing = [rule.id for rule in builtin_rules(RulesConfig()) if rule.id.replace("_", "-") not in headings]
    assert not missing, f"rules/runbook.md has no section for {missing}"
