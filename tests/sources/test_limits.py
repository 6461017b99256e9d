"""``scrape.sample_limit`` and ``scrape.label_limit`` (issue 14), as Prometheus's scrape config has them: the sample
count is taken on the raw body and stops in the window that passes the limit; a limit of 0 is no limit."""

from __future__ import annotations

from collections.abc import Callable
from http.server import BaseHTTPRequestHandler

import pytest
import requests
from hypothesis import given
from hypothesis import strategies as st

from advisor.config import parse_config
from advisor.domain import Sample
from advisor.errors import ConfigError
from advisor.observe import observe
from advisor.sources.limits import check_page, count_samples, over_label_limit
from advisor.sources.scrape import scrape
from tests.conftest import reply

Serve = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]


@pytest.mark.parametrize(
    ("body", "samples"),
    [
        (b"", 0),
        (b"x 1", 1),
        (b"x 1\n", 1),
        (b'# HELP x h\n# TYPE x gauge\nx 1\nx{a="b"} 2\n', 2),
        (b"# only a comment", 0),
        (b"x 1\n# c\ny 2", 2),
    ],
)
def test_samples_are_the_lines_that_are_not_comments(body: bytes, samples: int) -> None:
    assert count_samples(body) == (samples, len(body))


def test_the_count_stops_in_the_first_mebibyte_window_past_the_limit() -> None:
    line = b'x{a="%07d"} 1\n'
    body = b"# TYPE x gauge\n" + b"".join(line % i for i in range(600_000))  # ~9 MiB
    counted, read = count_samples(body, stop_above=50_000)
    assert counted > 50_000 and read < len(body) // 2
    assert count_samples(body) == (600_000, len(body))


def test_a_comment_that_starts_a_window_is_still_a_comment() -> None:
    # the "\n#" pairs straddle every 1 MiB boundary somewhere: the count must be the same as a plain one
    body = b"".join(b"# c\n" if i % 2 else b"x 1\n" for i in range(700_000))
    assert count_samples(body)[0] == sum(1 for ln in body.splitlines() if not ln.startswith(b"#"))


def test_check_page_names_the_limit_the_count_and_the_limit_and_0_is_no_limit() -> None:
    body = b"x 1\n" * 11
    assert check_page(body, 10) == "sample_limit exceeded: 11 samples; sample_limit is 10"
    assert check_page(body, 11) is None
    assert check_page(body, 0) is None


@given(
    lines=st.lists(st.sampled_from([b"x 1", b"# c", b"", b"#", b'y{a="b"} 2', b" z 3"]), max_size=40),
    trailing=st.booleans(),
    limit=st.integers(min_value=0, max_value=45),
)
def test_check_page_refuses_exactly_the_pages_with_more_sample_lines_than_the_limit(
    lines: list[bytes], trailing: bool, limit: int
) -> None:
    # the reference: every line of the body that does not start with "#" (blank ones included), as counted by
    # splitting on "\n" by hand; the shortcuts (no more bytes, or fewer newlines, than the limit) must agree
    body = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    parts = body.split(b"\n")
    if body.endswith(b"\n"):
        parts.pop()
    samples = sum(1 for ln in parts if not ln.startswith(b"#")) if body else 0
    got = check_page(body, limit)
    if limit == 0 or samples <= limit:
        assert got is None
    else:
        assert got == f"sample_limit exceeded: {samples:,} samples; sample_limit is {limit:,}"


def test_a_page_of_blank_lines_is_counted_line_by_line_not_skipped_by_its_size() -> None:
    # 12 bytes, 12 lines: one byte per line, the least a line holds — the size shortcut must not pass it
    assert check_page(b"\n" * 12, 11) == "sample_limit exceeded: 12 samples; sample_limit is 11"
    assert check_page(b"\n" * 12, 12) is None


def test_label_limit_counts_the_labels_of_each_series_read() -> None:
    wide = {"x": [Sample("x", {"a": "1"}, 1.0), Sample("x", {f"l{i}": "v" for i in range(5)}, 2.0)]}
    assert over_label_limit(wide, 4) == ("x", 5)
    assert over_label_limit(wide, 5) is None
    assert over_label_limit(wide, 0) is None


def test_observe_fails_a_series_over_label_limit_with_reason_sample_limit() -> None:
    labels = ",".join(f'l{i}="v"' for i in range(9))
    page = f'vllm:num_requests_running{{model_name="m",{labels}}} 1\nvllm:num_requests_waiting{{model_name="m"}} 0\n'
    seen = observe(page, "vllm", label_limit=8)
    assert seen.error_reason == "sample_limit"
    assert (
        seen.error_message == "label_limit exceeded: series vllm:num_requests_running has 10 labels; label_limit is 8"
    )
    assert observe(page, "vllm", label_limit=10).ok
    assert observe(page, "vllm").ok  # 0: no limit


def test_a_scrape_over_sample_limit_fails_with_reason_sample_limit(http_server: Serve) -> None:
    url = http_server(lambda h: reply(h, 200, b"# TYPE x gauge\n" + b"x 1\n" * 101)) + "/metrics"
    with requests.Session() as session:
        over = scrape(url, session, sample_limit=100)
        under = scrape(url, session, sample_limit=101)
        unlimited = scrape(url, session, sample_limit=0)
    assert not over.ok and over.error_reason == "sample_limit" and over.text is None and over.status_code == 200
    assert over.error_message == "sample_limit exceeded: 101 samples; sample_limit is 100"
    assert under.ok and unlimited.ok


def _config(scrape: dict[str, object]) -> dict[str, object]:
    return {
        "scrape": scrape,
        "deployments": [
            {
                "name": "d",
                "targets": ["http://127.0.0.1:9/metrics"],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 1, "tpot_seconds": 0.1},
            }
        ],
    }


def test_the_limits_default_as_documented_and_0_turns_them_off() -> None:
    assert (parse_config(_config({})).scrape.sample_limit, parse_config(_config({})).scrape.label_limit) == (50_000, 64)
    off = parse_config(_config({"sample_limit": 0, "label_limit": 0})).scrape
    assert (off.sample_limit, off.label_limit) == (0, 0)


def test_a_bad_limit_is_an_error_naming_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(_config({"sample_limit": -1, "label_limit": "many"}))
    text = str(err.value)
    assert "scrape.sample_limit" in text and "scrape.label_limit" in text
