"""A target's host must be a host name, an IPv4 address or a bracketed IPv6 literal: an unexpanded ``${VAR}`` (the
config does not expand environment variables) passed ``check-config`` and then failed every scrape as a DNS error
(breaker 28)."""

from __future__ import annotations

import pytest

from advisor.config import check_http_url, parse_config
from advisor.errors import ConfigError


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost:8000/metrics",
        "http://10.0.0.1/metrics",
        "http://[::1]:9100/metrics",
        "http://[fe80::1%25eth0]:8000/metrics",
        "https://vllm-0.vllm.llm.svc.cluster.local.:8000/metrics",
        "http://my_engine:8000/metrics",
        "http://user:secret@engine.example.com/metrics",
    ],
)
def test_host_names_and_addresses_are_accepted(url: str) -> None:
    assert check_http_url(url) == url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://${ENGINE_HOST}:8000/metrics", "'${ENGINE_HOST}'"),
        ("http://$ENGINE_HOST/metrics", "'$ENGINE_HOST'"),
        ("http://engine%20a:8000/metrics", "'engine%20a'"),
        ("http://-engine/metrics", "'-engine'"),
    ],
)
def test_a_host_that_is_no_host_name_is_refused_naming_it(url: str, shown: str) -> None:
    with pytest.raises(ValueError, match="is not a host name") as exc:
        check_http_url(url)
    assert shown in str(exc.value)
    assert ("does not expand environment variables" in str(exc.value)) == ("$" in url)


def test_check_config_names_the_target_with_the_unexpanded_variable() -> None:
    data = {"deployments": [{"name": "d", "engine": "vllm", "targets": ["http://${ENGINE_HOST}:8000/metrics"]}]}
    with pytest.raises(ConfigError, match=r"deployments\[0\]\.targets\[0\].*'\$\{ENGINE_HOST\}'"):
        parse_config(data, source="test")


@pytest.mark.parametrize(("given", "meant"), [("VLLM", "vllm"), ("SGLang", "sglang"), ("Auto", "auto")])
def test_an_engine_id_in_other_case_is_refused_with_the_id_it_means(given: str, meant: str) -> None:
    data = {"deployments": [{"name": "d", "engine": given, "targets": ["http://localhost:8000/metrics"]}]}
    with pytest.raises(ConfigError, match=f"did you mean '{meant}'"):
        parse_config(data, source="test")


def test_a_deployment_without_any_target_says_so_not_that_none_answered() -> None:
    # breaker 28: an empty file_sd file read "unavailable: no target answered", as if engines were down
    from advisor.evaluate import NO_TARGETS, Quality, deployment_state

    assert deployment_state([], 1_700_000_000.0, Quality(2.0)) == ("unavailable", NO_TARGETS)
