"""The Prometheus source without a Prometheus: selector parsing, the matrix → histories reshaping (hand-written
and generated API JSON), and the HTTP client against loopback servers returning canned API answers."""

from __future__ import annotations

import base64
import contextlib
import json
import math
import socket
import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from advisor.conventions import (
    REASON_CONNECTION_REFUSED,
    REASON_HTTP_STATUS,
    REASON_PARSE_ERROR,
    REASON_TIMEOUT,
    REASON_TOO_LARGE,
    SCRAPE_ERROR_REASONS,
)
from advisor.engines import ENGINES, detect_engine, get_adapter
from advisor.errors import ParseError
from advisor.sources.exposition import parse_exposition
from advisor.sources.prometheus import (
    SCRAPE_TIME,
    SCRAPE_TIME_MARK,
    PrometheusSource,
    PromHistory,
    groups_from_federation,
    histories_from_matrix,
    same_scrape,
    to_timed_snapshots,
)
from advisor.sources.promql import (
    LabelMatcher,
    match_selector,
    names_regex,
    parse_selector,
    re2_escape,
    validate_selector,
    vector_selector,
)

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PROM_FIXTURES = FIXTURES / "prometheus"
Serve = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]
TOKEN = "s3cr3t-t0ken-value"
USER, PASSWORD = "alice", "pa55word-xyz"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
SECRETS = (TOKEN, PASSWORD, BASIC)


# --- PromQL selectors ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ('job="vllm"', 'job="vllm"'),
        ('{job="vllm", namespace=~"prod|canary",}', 'job="vllm",namespace=~"prod|canary"'),
        ("  pod!~'chat-.*' ,  team != `a\\b` ", 'pod!~"chat-.*",team!="a\\\\b"'),
        ('job="a\\"b\\n\\x41\\u00e9"', 'job="a\\"b\\nAé"'),
        ('job="a} or vector(1) or {x=\\"y"', 'job="a} or vector(1) or {x=\\"y"'),
    ],
)
def test_a_valid_selector_is_parsed_and_rendered_back_canonically(text: str, canonical: str) -> None:
    assert validate_selector(text) == canonical
    assert validate_selector(canonical) == canonical


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("", "no label matcher"),
        ("{}", "no label matcher"),
        ("job=vllm", "expected a quoted value after job="),
        ('job=="vllm"', "expected a quoted value after job="),
        ('job~"vllm"', "expected one of = != =~ !~ after job"),
        ('1job="x"', "expected a label name"),
        ('job="vllm" namespace="x"', "expected ',' between matchers"),
        ('job="vllm"} or vector(1) {x="y"', "expected ',' between matchers"),
        ('job="vllm', "unterminated string"),
        ('job="\\q"', "unknown escape \\q"),
        ('{job="vllm"', "without a closing"),
        ('__name__="up"', "__name__ is not allowed"),
    ],
)
def test_an_invalid_selector_is_a_value_error_saying_where_and_what(text: str, complaint: str) -> None:
    with pytest.raises(ValueError, match="selector") as info:
        parse_selector(text)
    assert complaint in str(info.value)


def test_metric_names_become_an_escaped_sorted_alternation_and_invalid_names_are_refused() -> None:
    assert names_regex(["vllm:num_requests_running", "up", "up"]) == "up|vllm:num_requests_running"
    assert re2_escape("a.b*c|d(e)[f]{g}^$+?\\") == "a\\.b\\*c\\|d\\(e\\)\\[f\\]\\{g\\}\\^\\$\\+\\?\\\\"
    with pytest.raises(ValueError, match="not valid metric names"):
        names_regex(["vllm:ok", "bad.name"])
    with pytest.raises(ValueError, match="no metric names"):
        names_regex([])
    matchers = parse_selector('job="vllm"')
    assert vector_selector(matchers, ["vllm:b", "up"]) == '{__name__=~"up|vllm:b",job="vllm"}'
    assert match_selector((LabelMatcher("ns", "=~", ".*"),)) == '{__name__=~".+",ns=~".*"}'


# --- matrix → histories (pure) --------------------------------------------------------------------------------


def _lagging_matrix(with_scrape_times: bool) -> dict[str, Any]:
    """A store scraping every 4 s read with ``step`` 1 s, as Prometheus 2.42 and VictoriaMetrics answer it (the
    shape measured against both): each point repeats the newest raw scrape at or before it; the
    ``timestamp(up)`` series (renamed :data:`SCRAPE_TIME`, marked) holds that scrape's own time."""
    times = [1700000000 + k for k in range(8)]
    scrapes = [1699999999.5 + 4 * ((t - 1699999999.5) // 4) for t in times]  # raw scrapes at …99.5, …03.5
    target = {"instance": "10.0.0.5:8000", "job": "vllm"}
    result: list[dict[str, Any]] = [
        {"metric": {"__name__": "up", **target}, "values": [[t, "1"] for t in times]},
        {
            "metric": {"__name__": "vllm:generation_tokens_total", **target, "engine": "0", "model_name": "m"},
            "values": [[t, repr(10.0 * s)] for t, s in zip(times, scrapes, strict=True)],
        },
    ]
    if with_scrape_times:
        mark, value = SCRAPE_TIME_MARK
        result.append(
            {
                "metric": {"__name__": SCRAPE_TIME, mark: value, **target},
                "values": [[t, f"{s:.3f}"] for t, s in zip(times, scrapes, strict=True)],
            }
        )
    return {"resultType": "matrix", "result": result}


def test_a_point_showing_the_same_raw_scrape_as_the_one_before_it_is_dropped() -> None:
    """Points re-reading one scrape (the store's scrape slower than ``step``) would read as flat counters — a
    stall; kept: the first point showing each scrape, with that scrape's time. Without scrape times (a store
    without ``up``, a stand-in) every point is kept, as before."""
    (g,) = histories_from_matrix(_lagging_matrix(True)).groups
    assert [t for t, _ in g.points] == [1699999999.5, 1700000003.5]  # stamped with the scrape's time
    assert g.scraped == (1699999999.5, 1700000003.5)
    assert [p["vllm:generation_tokens_total"][0].value for _, p in g.points] == [16999999995.0, 17000000035.0]
    assert "advisor_series" not in g.dropped_labels  # the marked series is no engine series
    assert len(g.up) == 8  # up stays per evaluation time
    (plain,) = histories_from_matrix(_lagging_matrix(False)).groups
    assert len(plain.points) == 8 and plain.scraped == () and math.isnan(plain.scrape_of(0))
    assert same_scrape(1700000003.5, float("1700000003.500")) and not same_scrape(math.nan, math.nan)
    (fed,) = groups_from_federation(
        'up{instance="a",job="j"} 1 1700000003500\nvllm:num_requests_running{instance="a",job="j"} 2 1700000003500\n'
    ).groups
    assert fed.scraped == (1700000003.5,) and same_scrape(fed.scrape_of(0), g.scraped[-1])  # /federate: raw time


def test_a_hand_written_matrix_reads_into_the_snapshot_of_the_same_exposition() -> None:
    """Target labels (from ``up``: job, instance, namespace, pod) are dropped, engine labels kept; ``le="1"``
    is the bound ``1.0``; ``NaN``/``+Inf`` strings are floats; a target whose ``up`` is 0 has no points."""
    payload = json.loads((PROM_FIXTURES / "vllm-query-range.json").read_text())
    shaped = histories_from_matrix(payload["data"])
    assert [g.target for g in shaped.groups] == ["10.0.0.5:8000", "10.0.0.6:8000"]
    a, b = shaped.groups
    assert b.points == () and b.up == ((1700000000.0, 0.0), (1700000015.0, 0.0))
    assert a.dropped_labels == {"job", "instance", "namespace", "pod"}
    assert [t for t, _ in a.points] == [1700000000.0, 1700000015.0]
    expo = a.points[1][1]
    assert dict(expo["vllm:cache_config_info"][0].labels) == {
        "block_size": "16",
        "cache_dtype": "auto",
        "engine": "0",
        "gpu_memory_utilization": "0.9",
        "num_gpu_blocks": "27000",
    }
    assert math.isinf(a.points[0][1]["vllm:prompt_tokens_total"][0].value)
    assert math.isnan(expo["vllm:prompt_tokens_total"][0].value)

    adapter = get_adapter("vllm")
    direct = parse_exposition((PROM_FIXTURES / "vllm-a-at-1700000015.prom").read_text(), keep=adapter.wants)
    assert adapter.snapshot(expo) == adapter.snapshot(direct)
    snap = adapter.snapshot(expo)
    assert snap.ttft is not None and snap.ttft.bounds() == (0.1, 1.0, math.inf)
    assert snap.requests_running == 7.0 and snap.prompt_tokens_total is None

    timed = to_timed_snapshots(a, adapter)
    assert [(t.target, t.timestamp) for t in timed] == [
        ("10.0.0.5:8000", 1700000000.0),
        ("10.0.0.5:8000", 1700000015.0),
    ]
    assert to_timed_snapshots(b, adapter) == []


def _go_float(v: float) -> str:
    """A float as the Prometheus API writes it (Go ``strconv.FormatFloat(v, 'f', -1, 64)``)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return format(Decimal(repr(v)), "f")


def as_matrix(points: list[tuple[float, str]], target: dict[str, str]) -> dict[str, Any]:
    """What Prometheus returns for expositions scraped from one target at the given times."""
    series: dict[tuple[tuple[str, str], ...], list[list[Any]]] = {}
    for t, text in points:
        for name, samples in parse_exposition(text).items():
            for s in samples:
                labels = {**s.labels, **target, "__name__": name}
                series.setdefault(tuple(sorted(labels.items())), []).append([t, _go_float(s.value)])
    up = tuple(sorted({**target, "__name__": "up"}.items()))
    series[up] = [[t, "1"] for t, _ in points]
    result = [{"metric": dict(k), "values": v} for k, v in sorted(series.items())]
    return {"resultType": "matrix", "result": result}


ENGINE_FIXTURES = sorted(p for d in ENGINES if (FIXTURES / d).is_dir() for p in (FIXTURES / d).glob("*.prom"))


@pytest.mark.parametrize("path", ENGINE_FIXTURES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_engine_fixture_reads_the_same_through_the_prometheus_api(path: Path) -> None:
    """Each golden exposition, stored by Prometheus (target labels added, series re-ordered by labels, values as
    API strings), gives the same snapshot for every model as the direct parse."""
    engine = path.parent.name
    adapter = get_adapter(engine)
    text = path.read_text()
    direct = parse_exposition(text, keep=adapter.wants)
    target = {"job": engine, "instance": "10.1.2.3:8000", "namespace": "prod", "pod": "p-0"}
    shaped = histories_from_matrix(as_matrix([(1700000000.0, text)], target))
    assert [g.target for g in shaped.groups] == ["10.1.2.3:8000"]
    ((_, expo),) = shaped.groups[0].points
    kept = {k: v for k, v in expo.items() if adapter.wants(k)}
    assert sorted(adapter.models(kept)) == sorted(adapter.models(direct))
    models: list[str | None] = [*adapter.models(direct)] or [None]
    for model in models:
        assert repr(adapter.snapshot(kept, model)) == repr(adapter.snapshot(direct, model)), model


def _series(name: str, values: list[list[Any]], **labels: str) -> dict[str, Any]:
    return {"metric": {"__name__": name, **labels}, "values": values}


def test_without_an_up_series_job_and_instance_are_dropped_and_exported_labels_get_their_names_back() -> None:
    data = {
        "resultType": "matrix",
        "result": [
            _series(
                "llamacpp:requests_processing", [[10, "2"]], job="llama", instance="h:1", exported_job="engine-job"
            ),
            _series("llamacpp:requests_deferred", [[10, "1"]], job="llama", instance="h:1", zone="eu"),
        ],
    }
    (g,) = histories_from_matrix(data).groups
    expo = g.points[0][1]
    assert dict(expo["llamacpp:requests_processing"][0].labels) == {"job": "engine-job"}
    assert dict(expo["llamacpp:requests_deferred"][0].labels) == {"zone": "eu"}
    assert g.up == () and g.dropped_labels == {"job", "instance"}


def test_grouping_by_other_labels_names_targets_by_their_pairs_and_extra_labels_can_be_dropped() -> None:
    data = {
        "resultType": "matrix",
        "result": [
            _series("tgi_queue_size", [[5, "3"]], pod="a", cluster="c1", replica="r1"),
            _series("tgi_queue_size", [[5, "4"]], pod="b", cluster="c1", replica="r1"),
        ],
    }
    shaped = histories_from_matrix(data, group_by=("cluster", "pod"), drop_labels=("replica",))
    assert [g.target for g in shaped.groups] == ["cluster=c1,pod=a", "cluster=c1,pod=b"]
    assert [dict(g.points[0][1]["tgi_queue_size"][0].labels) for g in shaped.groups] == [{}, {}]


def test_duplicate_series_are_read_once_and_native_histograms_skipped_each_with_a_warning() -> None:
    data = {
        "resultType": "matrix",
        "result": [
            _series("up", [[1, "1"]], job="a", instance="h:1"),
            _series("up", [[1, "1"]], job="b", instance="h:1"),
            _series("tgi_queue_size", [[1, "3"]], job="a", instance="h:1"),
            _series("tgi_queue_size", [[1, "3"]], job="b", instance="h:1"),
            {"metric": {"__name__": "tgi_request_duration", "instance": "h:1"}, "histograms": [[1, {"count": "1"}]]},
        ],
    }
    shaped = histories_from_matrix(data)
    (g,) = shaped.groups
    assert len(g.points[0][1]["tgi_queue_size"]) == 1
    assert any("native-histogram" in w for w in shaped.warnings)
    assert any("h:1: 1 series repeated" in w for w in shaped.warnings)


@pytest.mark.parametrize(
    ("data", "complaint"),
    [
        ([], "not an object"),
        ({"resultType": "vector", "result": []}, "expected a matrix"),
        ({"resultType": "matrix", "result": {}}, "not a list"),
        ({"resultType": "matrix", "result": [{"metric": {"job": "x"}, "values": []}]}, "no __name__"),
        ({"resultType": "matrix", "result": [{"metric": {"__name__": "x", "a": 1}, "values": []}]}, "string labels"),
        ({"resultType": "matrix", "result": [_series("x", [[1, "abc"]])]}, "not a number"),
        ({"resultType": "matrix", "result": [_series("x", [[1]])]}, "pair"),
        ({"resultType": "matrix", "result": [_series("x", [["NaN", "1"]])]}, "time is not finite"),
        ({"resultType": "matrix", "result": [{"metric": {"__name__": "x"}}]}, "no 'values'"),
    ],
)
def test_a_malformed_matrix_is_a_parse_error_saying_where(data: Any, complaint: str) -> None:
    with pytest.raises(ParseError) as info:
        histories_from_matrix(data)
    assert complaint in str(info.value)


# --- HTTP against canned API answers --------------------------------------------------------------------------

MATRIX_OK = json.loads((PROM_FIXTURES / "vllm-query-range.json").read_text())


class Recorder:
    """A canned API: records each request (method, path, query/form fields, headers) and answers in turn."""

    def __init__(self, answers: list[tuple[int, bytes, dict[str, str]]]) -> None:
        self.answers = answers
        self.requests: list[dict[str, Any]] = []

    def __call__(self, h: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        form = h.rfile.read(length).decode() if length else ""
        self.requests.append(
            {
                "method": h.command,
                "path": parts.path,
                "query": parse_qs(parts.query),
                "form": parse_qs(form),
                "headers": dict(h.headers),
            }
        )
        status, body, headers = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if headers.get("X-Echo-Auth"):
            body = body.replace(b"ECHO", (h.headers.get("Authorization") or "").encode())
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(body)


def answer(status: int, payload: Any, **headers: str) -> tuple[int, bytes, dict[str, str]]:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return status, body, headers


def api_error(error_type: str, error: str) -> dict[str, str]:
    return {"status": "error", "errorType": error_type, "error": error}


class _Handler(BaseHTTPRequestHandler):
    handle_fn: Callable[[BaseHTTPRequestHandler], None]

    def do_GET(self) -> None:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            type(self).handle_fn(self)

    def do_POST(self) -> None:
        self.do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[Serve]:
    """Loopback servers (port 0, GET and POST) that stop quickly: ``api_server(handler) -> base URL``."""
    servers: list[ThreadingHTTPServer] = []

    def start(handle: Callable[[BaseHTTPRequestHandler], None]) -> str:
        handler = type("H", (_Handler,), {"handle_fn": staticmethod(handle)})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture
def source_for(api_server: Serve) -> Iterator[Callable[..., tuple[PrometheusSource, Recorder]]]:
    made: list[PrometheusSource] = []

    def make(*answers: tuple[int, bytes, dict[str, str]], **kw: Any) -> tuple[PrometheusSource, Recorder]:
        rec = Recorder(list(answers))
        src = PrometheusSource(api_server(rec), **kw)
        made.append(src)
        return src, rec

    yield make
    for s in made:
        s.close()


def history(src: PrometheusSource, wanted: Any = frozenset({"vllm:num_requests_running"})) -> PromHistory:
    return src.history('job="vllm"', wanted, 1700000000, 1700000015, 15)


def assert_failed(h: PromHistory, reason: str, *fragments: str) -> None:
    assert not h.ok and h.groups == ()
    assert h.error_reason == reason and reason in SCRAPE_ERROR_REASONS
    assert h.error_message is not None
    for fragment in fragments:
        assert fragment in h.error_message, h.error_message
    for secret in SECRETS:
        assert secret not in h.error_message


def test_one_post_to_query_range_carries_the_selector_the_names_up_and_the_range(source_for: Any) -> None:
    src, rec = source_for(answer(200, MATRIX_OK))
    h = history(src, frozenset({"vllm:num_requests_running", "vllm:kv_cache_usage_perc"}))
    assert h.ok and h.queries == 1 and src.queries_made == 1
    assert [g.target for g in h.groups] == ["10.0.0.5:8000", "10.0.0.6:8000"]
    (req,) = rec.requests
    assert (req["method"], req["path"]) == ("POST", "/api/v1/query_range")
    assert req["form"]["query"] == [
        '{__name__=~"up|vllm:kv_cache_usage_perc|vllm:num_requests_running",job="vllm"} or label_replace(label_replace('
        'timestamp({__name__=~"up",job="vllm"}), "__name__", "advisor_scrape_timestamp_seconds", "", ""), '
        '"advisor_series", "scrape_time", "", "")'
    ]  # the engine series and up, and each point's raw scrape time (SCRAPE_TIME)
    assert h.query == req["form"]["query"][0]
    assert (req["form"]["start"], req["form"]["end"], req["form"]["step"]) == (
        ["1700000000.0"],
        ["1700000015.0"],
        ["15.0"],
    )
    assert req["form"]["timeout"] == ["30.0"]


def test_a_predicate_lists_the_names_first_and_fetches_only_those_it_accepts(source_for: Any) -> None:
    names = {"status": "success", "data": ["up", "vllm:num_requests_running", "vllm:num_requests_running_created"]}
    src, rec = source_for(answer(200, names), answer(200, MATRIX_OK))
    h = history(src, get_adapter("vllm").wants)
    assert h.ok and h.queries == 2 and src.queries_made == 2
    listing, query = rec.requests
    assert (listing["method"], listing["path"]) == ("GET", "/api/v1/label/__name__/values")
    assert listing["query"]["match[]"] == ['{__name__=~".+",job="vllm"}']
    assert query["form"]["query"][0].startswith('{__name__=~"up|vllm:num_requests_running",job="vllm"} or ')


def test_no_wanted_name_means_no_query_and_an_empty_ok_history(source_for: Any) -> None:
    names = {"status": "success", "data": ["up", "go_goroutines"]}
    src, rec = source_for(answer(200, names))
    h = history(src, get_adapter("vllm").wants)
    assert h.ok and h.groups == () and h.queries == 1 and len(rec.requests) == 1
    assert "no wanted metric" in h.warnings[0]
    assert history(src, frozenset()).queries == 0


def test_metric_names_feed_engine_detection(source_for: Any) -> None:
    names = {"status": "success", "data": ["up", "sglang:num_running_reqs", "sglang:token_usage"]}
    src, rec = source_for(answer(200, names))
    listed = src.metric_names('namespace="prod"', 1700000000, 1700000300)
    assert listed.ok and detect_engine(listed.names) == "sglang"
    assert rec.requests[0]["query"]["start"] == ["1700000000.0"]


@pytest.mark.parametrize(
    ("reply", "reason", "fragments"),
    [
        (answer(200, api_error("bad_data", "weird")), REASON_HTTP_STATUS, ("Prometheus error bad_data: weird",)),
        (
            answer(400, api_error("bad_data", 'invalid parameter "query": 1:15: parse error')),
            REASON_HTTP_STATUS,
            ("HTTP 400: Prometheus error bad_data: invalid parameter",),
        ),
        (
            answer(422, api_error("execution", "query processing would load too many samples")),
            REASON_HTTP_STATUS,
            ("HTTP 422", "execution", "too many samples"),
        ),
        (
            answer(503, api_error("timeout", "query timed out in expression evaluation")),
            REASON_TIMEOUT,
            ("HTTP 503", "Prometheus error timeout"),
        ),
        (answer(503, b"<html><body>upstream overloaded</body></html>"), REASON_HTTP_STATUS, ("HTTP 503", "overloaded")),
        (answer(200, b"\x00\x01garbage{"), REASON_PARSE_ERROR, ("not JSON",)),
        (answer(200, [1, 2]), REASON_PARSE_ERROR, ("JSON list, not an object",)),
        (answer(200, {"status": "success"}), REASON_PARSE_ERROR, ("no usable data",)),
        (
            answer(200, {"status": "success", "data": {"resultType": "vector", "result": []}}),
            REASON_PARSE_ERROR,
            ("expected a matrix",),
        ),
        (answer(302, b"", Location="http://elsewhere.example/x?token=abc"), REASON_HTTP_STATUS, ("redirect",)),
    ],
    ids=[
        "status-error-200",
        "400-bad-data",
        "422-execution",
        "503-timeout",
        "503-html",
        "garbage",
        "json-list",
        "no-data",
        "vector",
        "redirect",
    ],
)
def test_api_failures_come_back_as_reasons_with_the_apis_own_words(
    source_for: Any, reply: tuple[int, bytes, dict[str, str]], reason: str, fragments: tuple[str, ...]
) -> None:
    src, _ = source_for(reply, bearer_token=TOKEN)
    h = history(src)
    assert_failed(h, reason, *fragments)
    assert "token=abc" not in (h.error_message or "")
    assert src.queries_made == 1


def test_a_silent_server_is_a_timeout(api_server: Serve) -> None:
    def slow(h: BaseHTTPRequestHandler) -> None:
        time.sleep(1.5)

    with PrometheusSource(api_server(slow), read_timeout=0.3) as src:
        began = time.monotonic()
        h = history(src)
    assert_failed(h, REASON_TIMEOUT, "read timeout 0.3s")
    assert time.monotonic() - began < 1.4


def test_a_refused_connection_and_an_oversized_answer_are_classified(source_for: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with PrometheusSource(f"http://127.0.0.1:{port}") as src:
        assert_failed(history(src), REASON_CONNECTION_REFUSED, "connection refused")
        assert not src.metric_names('job="x"').ok
    big, _ = source_for(answer(200, MATRIX_OK), max_bytes=100)
    assert_failed(history(big), REASON_TOO_LARGE, "cap of 100 bytes")


def test_bearer_and_basic_credentials_are_sent_and_never_shown(source_for: Any) -> None:
    echo = answer(
        401, b'{"status":"error","errorType":"unauthorized","error":"bad credentials ECHO"}', **{"X-Echo-Auth": "1"}
    )
    src, rec = source_for(answer(200, MATRIX_OK), echo, bearer_token=TOKEN, headers={"X-Scope-OrgID": "team-a"})
    assert history(src).ok
    assert rec.requests[0]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert rec.requests[0]["headers"]["X-Scope-OrgID"] == "team-a"
    assert_failed(history(src), REASON_HTTP_STATUS, "HTTP 401", "Bearer <redacted>")
    assert TOKEN not in repr(src)

    src, rec = source_for(answer(200, MATRIX_OK), echo, username=USER, password=PASSWORD)
    assert history(src).ok
    assert rec.requests[0]["headers"]["Authorization"] == f"Basic {BASIC}"
    assert_failed(history(src), REASON_HTTP_STATUS, "HTTP 401", "<redacted>")
    assert PASSWORD not in repr(src)


@pytest.mark.parametrize(
    ("kwargs", "complaint"),
    [
        ({"base_url": "ftp://h"}, "http:// or https://"),
        ({"base_url": f"http://{USER}:{PASSWORD}@h:9090"}, "must not carry user-info"),
        ({"base_url": "http://h:9090/?token=x"}, "query string"),
        ({"bearer_token": TOKEN, "username": USER, "password": PASSWORD}, "not both"),
        ({"username": USER}, "both username and password"),
        ({"bearer_token": f"{TOKEN}\nX-Injected: 1"}, "spans lines"),
        ({"ca_file": "/nonexistent/ca.pem"}, "ca_file"),
        ({"read_timeout": 0}, "read_timeout"),
        ({"max_bytes": 0}, "max_bytes"),
    ],
)
def test_bad_construction_is_a_value_error_without_secrets(kwargs: dict[str, Any], complaint: str) -> None:
    args = {"base_url": "http://127.0.0.1:9090", **kwargs}
    with pytest.raises(ValueError) as info:
        PrometheusSource(**args)
    assert complaint in str(info.value)
    for secret in SECRETS:
        assert secret not in str(info.value)


def test_a_ca_file_is_what_requests_verifies_against(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    src = PrometheusSource("https://127.0.0.1:1", ca_file=ca)
    assert src._verify == str(ca)
    src.close()


@pytest.mark.parametrize(
    ("call", "complaint"),
    [
        (lambda s: s.history("job=vllm", frozenset({"x"}), 0, 1, 1), "quoted value"),
        (lambda s: s.history('job="v"', frozenset({"x"}), 10, 1, 1), "before start"),
        (lambda s: s.history('job="v"', frozenset({"x"}), 0, 1, 0), "step must be > 0"),
        (lambda s: s.history('job="v"', frozenset({"x"}), 0, math.nan, 1), "finite"),
        (lambda s: s.history('job="v"', frozenset({"x"}), 0, 20_000, 1), "11000"),
        (lambda s: s.history('job="v"', "vllm:x", 0, 1, 1), "not one string"),
        (lambda s: s.history('job="v"', frozenset({"bad name"}), 0, 1, 1), "not valid metric names"),
        (lambda s: s.history('job="v"', frozenset({"x"}), 0, 1, 1, group_by=()), "group_by"),
        (lambda s: s.history('job="v"', frozenset({"x"}), 0, 1, 1, group_by=("a-b",)), "group_by"),
        (lambda s: s.metric_names('job="v"', 5, None), "both start and end"),
    ],
)
def test_caller_mistakes_raise_value_errors_before_any_request(
    call: Callable[[PrometheusSource], object], complaint: str
) -> None:
    with PrometheusSource("http://127.0.0.1:9") as src:
        with pytest.raises(ValueError) as info:
            call(src)
        assert complaint in str(info.value)
        assert src.queries_made == 0


def test_history_group_lookup_by_target(source_for: Any) -> None:
    src, _ = source_for(answer(200, MATRIX_OK))
    h = history(src)
    assert h.group("10.0.0.5:8000") is h.groups[0]
    assert h.group("nope") is None
