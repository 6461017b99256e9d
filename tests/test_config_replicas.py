"""``rules.replicas``: the stabilization windows and the drain term of the one replica number (issue 13)."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import generate_latest

from advisor.config import parse_config, stabilizer_from
from advisor.errors import ConfigError
from advisor.exporter import make_registry
from advisor.results import CycleResult
from advisor.rules.registry import builtin_rules

_DEP = {
    "name": "chat",
    "engine": "vllm",
    "targets": ["http://127.0.0.1:9/metrics"],
    "model": "meta-llama/Llama-3.1-8B-Instruct",
    "gpu": "H100-SXM",
    "max_model_len": 8192,
    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
}


def _cfg(replicas: dict[str, Any] | None = None) -> Any:
    rules: dict[str, Any] = {} if replicas is None else {"replicas": replicas}
    return parse_config({"deployments": [_DEP], "rules": rules}, source="test")


def test_defaults_are_hpa_like_windows_and_no_drain_term() -> None:
    r = _cfg().rules.replicas
    assert (r.scale_up_window, r.scale_down_window, r.drain_seconds) == (60.0, 300.0, None)
    st = stabilizer_from(r)
    assert (st.up_window, st.down_window) == (60.0, 300.0)


def test_durations_in_prometheus_form_and_zero_window() -> None:
    r = _cfg({"scale_up_window": "0", "scale_down_window": "10m", "drain_seconds": "2m"}).rules.replicas
    assert (r.scale_up_window, r.scale_down_window, r.drain_seconds) == (0.0, 600.0, 120.0)
    st = stabilizer_from(r)
    # a 0 s scale-up window follows the newest raw count at once
    st.observe("chat", 0.0, 5)
    st.observe("chat", 1.0, 3)
    assert st.value("chat", 1.0, current=1) == 3


@pytest.mark.parametrize(
    ("field", "value"),
    [("scale_up_window", "-5s"), ("scale_down_window", "soon"), ("drain_seconds", 0), ("drain_seconds", "0s")],
)
def test_bad_values_name_the_field(field: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"rules\.replicas\.{field}"):
        _cfg({field: value})


def test_unknown_key_is_an_error_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"rules\.replicas\.drain_secs"):
        _cfg({"drain_secs": "1m"})


def test_the_drain_term_reaches_every_rule_that_proposes_replicas() -> None:
    rules = {r.id: r for r in builtin_rules(_cfg({"drain_seconds": "90s"}).rules)}
    assert [vars(rules[i])["drain_seconds"] for i in ("queue_growth", "kv_saturation", "goodput_below_target")] == [
        90.0
    ] * 3


def test_recommended_value_help_says_the_replicas_value_is_stabilized() -> None:
    registry, collector, _ = make_registry()
    collector.publish(CycleResult(timestamp=1.0))
    page = generate_latest(registry).decode()
    (text,) = [line for line in page.splitlines() if line.startswith("# HELP advisor_recommended_value ")]
    assert "stabilized" in text and "60 s" in text and "300 s" in text and "rules.replicas" in text
    assert "for autoscalers" not in text


def test_rules_resolve_for_defaults_to_30_seconds_and_refuses_a_negative_hold() -> None:
    assert parse_config({"deployments": [_DEP]}, source="test").rules.resolve_for == 30.0
    assert parse_config({"deployments": [_DEP], "rules": {"resolve_for": "2m"}}, source="test").rules.resolve_for == 120
    with pytest.raises(ConfigError, match=r"rules\.resolve_for"):
        parse_config({"deployments": [_DEP], "rules": {"resolve_for": "-5s"}}, source="test")
