"""Loose input is refused naming the field or flag: booleans for numbers, an empty served_model, a --listen
port of non-ASCII digits; and a GPU others fill is said to fit nothing (never "utilization at most 0.00")."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from advisor.config import parse_config
from advisor.errors import ConfigError
from advisor.server import parse_listen

BASE: dict[str, Any] = {
    "deployments": [
        {
            "name": "d",
            "engine": "vllm",
            "targets": ["http://127.0.0.1:9/metrics"],
            "model": "meta-llama/Llama-3.1-8B-Instruct",
            "gpu": "H100-SXM",
            "max_model_len": 8192,
            "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
        }
    ]
}


def _problems(top: dict[str, Any] | None = None, **keys: Any) -> list[tuple[str, str]]:
    data = copy.deepcopy(BASE)
    data.update(top or {})
    data["deployments"][0].update(keys)
    with pytest.raises(ConfigError) as err:
        parse_config(data)
    return err.value.problems


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("gpu_memory_used_by_others_gib", True),
        ("gpu_memory_utilization", True),
        ("tensor_parallel_size", True),
        ("max_model_len", False),
        ("gpu_memory_gib", True),
    ],
)
def test_a_boolean_where_a_number_belongs_is_refused_naming_the_field(key: str, value: bool) -> None:
    problems = _problems(**{key: value})
    assert (f"deployments[0].{key}", f"must be a number, not the boolean {str(value).lower()}") in problems


def test_a_boolean_duration_is_refused_and_boolean_fields_still_take_booleans() -> None:
    assert ("scrape_interval", "must be a number, not the boolean true") in _problems({"scrape_interval": True})
    data = copy.deepcopy(BASE)
    data["deployments"][0]["speculative_decoding"] = True
    assert parse_config(data).deployments[0].speculative_decoding is True


def test_an_empty_served_model_is_refused_naming_the_field() -> None:
    assert "deployments[0].served_model" in [p for p, _ in _problems(served_model="")]


@pytest.mark.parametrize("listen", ["127.0.0.1:²", "127.0.0.1:٩١٨٨", "127.0.0.1:", "127.0.0.1:70000", "9188"])
def test_a_listen_address_with_a_bad_port_gets_the_host_port_message(listen: str) -> None:
    with pytest.raises(ValueError, match=r"^--listen must be HOST:PORT \(e\.g\. 127\.0\.0\.1:9188\)"):
        parse_listen(listen)
    assert parse_listen("[::1]:9188") == ("::1", 9188)


def test_a_gpu_that_others_fill_says_nothing_fits_never_utilization_0_00() -> None:
    # H100-SXM: 79.15 GiB; others hold 79 GiB, leaving 0.15 GiB: less than the Llama-3.1-8B weights alone
    [(path, message)] = _problems(gpu_memory_used_by_others_gib=79)
    assert path == "deployments[0]"
    assert "nothing fits beside them" in message and "0.00" not in message
    # room left for a smaller budget: the advice names the highest utilization that is free
    [(_, message)] = _problems(gpu_memory_used_by_others_gib=10)
    assert "lower gpu_memory_utilization to at most 0.87" in message


@pytest.mark.parametrize(
    ("top", "keys", "path"),
    [
        ({"rules": {"host_or_buy": {"max_usage": "0.3"}}}, {}, "rules.host_or_buy.max_usage"),
        ({"rules": {"kv_budget": {"max_restarts": "2"}}}, {}, "rules.kv_budget.max_restarts"),
        ({}, {"max_model_len": "8192"}, "deployments[0].max_model_len"),
    ],
)
def test_a_number_in_quotes_is_refused_naming_the_field(top: dict[str, Any], keys: dict[str, Any], path: str) -> None:
    """Issue 19: ``max_usage: '0.3'`` was read as 0.3 (pydantic's lax mode) while strict fields refused it; every
    number is now strict. Durations still take text (``for: 3d``)."""
    problems = _problems(top, **keys)
    assert [p for p, _ in problems] == [path], problems
    assert "not the string" in problems[0][1]


def test_a_duration_still_takes_text() -> None:
    data = copy.deepcopy(BASE)
    data["rules"] = {"host_or_buy": {"for": "3d", "max_usage": 0.3}}
    assert parse_config(data).rules.host_or_buy.for_ == 3 * 86400


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "1e9",
            "must be a number, not the string '1e9': YAML 1.1 reads an exponent without a dot as text; write 1.0e9",
        ),
        ("8192", "must be a number, not the string '8192': write it without quotes"),
        ("fast", "must be a number, not the string 'fast'"),
    ],
)
def test_text_where_a_number_belongs_says_how_to_write_it(value: str, message: str) -> None:
    """Breaker, 2026-12-03: an unquoted ``1e9`` (which PyYAML reads as text: YAML 1.1's float needs a dot) was
    told "write it without quotes", and so was ``fast``."""
    [(path, said)] = _problems(max_model_len=value)
    assert path == "deployments[0].max_model_len" and said.startswith(message), said
    if value == "fast":
        assert "quotes" not in said


@pytest.mark.parametrize(("value", "kind"), [([1, 2], "a list"), (3, "a number"), ("on", "text")])
def test_a_section_given_as_another_kind_names_its_keys(value: object, kind: str) -> None:
    """Breaker, 2026-12-03: ``autoscaling: [1, 2]`` got pydantic's "Input should be a valid dictionary or instance
    of AutoscalingConfig"."""
    [(path, said)] = _problems(autoscaling=value)
    assert path == "deployments[0].autoscaling"
    assert (
        said.startswith("must be a mapping (keys: ") and said.endswith(f"), not {kind}") and "max_replica_count" in said
    )


def test_a_name_off_the_pattern_quotes_the_name() -> None:
    [(path, said)] = _problems(name="bad name!")
    assert path == "deployments[0].name"
    assert said == "'bad name!' does not match the pattern ^[A-Za-z0-9][A-Za-z0-9_.-]*$"


def test_pydantics_own_words_are_replaced_by_what_to_write() -> None:
    """Breaker and walkthrough, 2026-12-04: "List should have at least 1 item after validation, not 0", "Input
    should be a valid string" for ``engine_version: 99``, "Field required" for a missing ``slo`` with no word of
    its keys, ``ttft`` with no did-you-mean, and ``ttft_seconds: 2.5s`` told only "not the string"."""
    empty = copy.deepcopy(BASE)
    empty["deployments"] = []
    with pytest.raises(ConfigError) as err:
        parse_config(empty)
    assert err.value.problems == [("deployments", "needs at least 1 entry, got 0")]
    assert (
        "deployments[0].engine_version",
        "must be text, not a number: put it in quotes as written (YAML read a number)",
    ) in _problems(engine_version=99)
    no_slo = copy.deepcopy(BASE)
    del no_slo["deployments"][0]["slo"]
    with pytest.raises(ConfigError) as err:
        parse_config(no_slo)
    assert ("deployments[0].slo", "required: a mapping with ttft_seconds, tpot_seconds") in err.value.problems
    assert ("deployments[0].slo.ttft", "unknown key; did you mean 'ttft_seconds'?") in _problems(
        slo={"ttft": 3, "tpot_seconds": 0.1}
    )
    said = dict(_problems(slo={"ttft_seconds": "2.5s", "tpot_seconds": 0.1}))["deployments[0].slo.ttft_seconds"]
    assert said == "must be a number, not the string '2.5s': this field takes seconds as a plain number (2.5)"


def test_a_number_where_text_is_wanted_is_never_echoed_since_the_field_may_be_a_secret(tmp_path: Path) -> None:
    """Breaker 20: a numeric ``bearer_token``, ``hmac_secret`` or Prometheus header value was printed whole ("must be
    text, not the number 98765432123") by check-config, the reload log and the status page's failed-reload banner.
    The message says what to do without the value."""
    from tests.inprocess import run_cli

    cfg = copy.deepcopy(BASE)
    cfg["receivers"] = [
        {"name": "ops", "type": "webhook", "url": "http://127.0.0.1:9/hook", "bearer_token": 98765432123,
         "hmac_secret": 55554444333}
    ]  # fmt: skip
    cfg["prometheus"] = {"url": "http://127.0.0.1:9/", "headers": {"X-Api-Key": 1234567890}}
    path = tmp_path / "advisor.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    r = run_cli("check-config", str(path))
    out = r.stdout + r.stderr
    assert r.returncode == 2
    for secret in ("98765432123", "55554444333", "1234567890"):
        assert secret not in out, out
    for where in ("receivers[0].bearer_token", "receivers[0].hmac_secret", "prometheus.headers.X-Api-Key"):
        assert f"{where}: must be text, not a number" in out, out
