"""parse_exposition: samples keyed by sample name, filtered by keep, garbage → ParseError."""

from __future__ import annotations

import contextlib
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from advisor.errors import ParseError
from advisor.sources.exposition import parse_exposition

TEXT = """\
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
# TYPE vllm:num_preemptions_created gauge
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e+09
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.9
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} NaN
process_start_time_seconds 1.7e+09
"""


def test_samples_are_keyed_by_sample_name_not_family_name() -> None:
    out = parse_exposition(TEXT)
    assert set(out) == {
        "vllm:num_preemptions_total",
        "vllm:num_preemptions_created",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_to_first_token_seconds_count",
        "vllm:time_to_first_token_seconds_sum",
        "vllm:kv_cache_usage_perc",
        "process_start_time_seconds",
    }
    (preempt,) = out["vllm:num_preemptions_total"]
    assert preempt.labels == {"engine": "0", "model_name": "m"}
    assert preempt.value == 3.0
    assert [s.labels["le"] for s in out["vllm:time_to_first_token_seconds_bucket"]] == ["0.5", "+Inf"]


def test_keep_skips_the_samples_it_rejects() -> None:
    out = parse_exposition(TEXT, keep=lambda name: not name.endswith("_created") and name.startswith("vllm:"))
    assert "vllm:num_preemptions_created" not in out
    assert "process_start_time_seconds" not in out
    assert "vllm:num_preemptions_total" in out


def test_nan_values_are_kept_as_nan() -> None:
    (usage,) = parse_exposition(TEXT)["vllm:kv_cache_usage_perc"]
    assert math.isnan(usage.value)


def test_an_empty_body_has_no_samples() -> None:
    assert parse_exposition("") == {}


@pytest.mark.parametrize(
    "garbage",
    [
        "<html><body>502 Bad Gateway</body></html>\n",
        '{"status": "ok"}\n',
        "\x00\x01\x02\x03binary",
        'vllm:x{engine="0" 1\n',
        "vllm:x one\n",
    ],
    ids=["html", "json", "binary", "unclosed-labels", "non-numeric-value"],
)
def test_garbage_raises_parse_error_with_a_short_reason(garbage: str) -> None:
    with pytest.raises(ParseError) as err:
        parse_exposition(garbage)
    assert str(err.value).startswith("not Prometheus text format")
    assert len(str(err.value)) < 260


@given(st.text(max_size=200))
def test_any_text_parses_or_raises_parse_error(text: str) -> None:
    with contextlib.suppress(ParseError):
        parse_exposition(text)
