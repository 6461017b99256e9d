"""The selective parser agrees with prometheus-client: on every real capture and on generated expositions.

"Agrees" = :func:`parse_exposition` (fast path) returns exactly what :func:`parse_exposition_full`
(``prometheus_client`` alone) returns: same names in the same order, same labels, values equal with the same
type (``int`` vs ``float``), NaN where NaN — for ``keep=None`` and for a selective ``keep``.
"""

from __future__ import annotations

import copy
import json
import math
import pickle
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.domain import Sample
from advisor.engines import detect_engine, get_adapter
from advisor.errors import ParseError
from advisor.sources import selective_parser
from advisor.sources.exposition import parse_exposition, parse_exposition_full

SHARED_METRICS = Path(__file__).resolve().parents[2].parent / "shared" / "engine-metrics"


def assert_same(fast: dict[str, list[Sample]], full: dict[str, list[Sample]]) -> None:
    assert list(fast) == list(full)
    for name in full:
        assert len(fast[name]) == len(full[name]), name
        for a, b in zip(fast[name], full[name], strict=True):
            assert (a.name, dict(a.labels)) == (b.name, dict(b.labels))
            assert type(a.value) is type(b.value), (a, b)
            assert a.value == b.value or (math.isnan(a.value) and math.isnan(b.value)), (a, b)


def captures() -> list[Path]:
    return sorted(SHARED_METRICS.glob("*.prom")) if SHARED_METRICS.is_dir() else []


@pytest.mark.conformance
@pytest.mark.parametrize("path", captures(), ids=lambda p: p.name)
def test_every_capture_parses_exactly_as_prometheus_client(path: Path) -> None:
    text = path.read_text()
    assert_same(selective_parser.parse_selected(text, None), parse_exposition_full(text))
    assert_same(selective_parser._tier2(text, None), parse_exposition_full(text))
    engine = detect_engine(parse_exposition_full(text))
    if engine is not None and engine != "dcgm":
        keep = get_adapter(engine).wants
        assert_same(parse_exposition(text, keep), parse_exposition_full(text, keep))


def test_shared_captures_present_or_skip() -> None:
    if not SHARED_METRICS.is_dir():
        pytest.skip(f"../shared/engine-metrics absent: {SHARED_METRICS} is not a directory")
    assert captures()


# --- generated expositions ---------------------------------------------------------------------------

names = st.from_regex(r"[a-zA-Z_:][a-zA-Z0-9_:]{0,12}", fullmatch=True)
label_names = st.from_regex(r"[a-zA-Z][a-zA-Z0-9_]{0,6}", fullmatch=True)
label_values = st.text(alphabet=st.sampled_from(list('ab ,={}"\\\n#é')), max_size=8)
numbers = st.one_of(
    st.sampled_from(["0", "1", "-3", "+7", "1.0", "2.5e+06", "1e-3", "NaN", "+Inf", "-Inf", "Nan", "inf", ".5"]),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)
timestamps = st.sampled_from(["", " 1700000000000", " -5", " 1.5"])


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def sample_lines(draw: st.DrawFn, name: str) -> str:
    labels = draw(st.dictionaries(label_names, label_values, max_size=3))
    body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    trailing = draw(st.sampled_from(["", ","])) if body else ""
    label_part = f"{{{body}{trailing}}}" if labels or draw(st.booleans()) else ""
    exemplar = draw(st.sampled_from(["", ' # {trace_id="abc"} 0.5', " # {} 1 1700000000.1"]))
    ws_before, ws_after = draw(st.sampled_from([("", ""), ("", "\r"), ("  ", ""), ("\t", " ")]))
    return f"{ws_before}{name}{label_part} {draw(numbers)}{exemplar}{draw(timestamps)}{ws_after}"


@st.composite
def expositions(draw: st.DrawFn) -> str:
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 6))):
        family = draw(names)
        typ = draw(st.sampled_from(["counter", "gauge", "histogram", "summary", "untyped", None]))
        if draw(st.booleans()):
            lines.append(f'# HELP {family} some "help" text \\n here')
        if typ is not None:
            lines.append(f"# TYPE {family} {typ}")
        suffixes = {"histogram": ["_bucket", "_count", "_sum"], "summary": ["", "_count", "_sum"]}.get(typ or "", [""])
        if typ == "counter":
            suffixes = ["", "_total", "_created"]
        for _ in range(draw(st.integers(0, 4))):
            lines.append(draw(sample_lines(family + draw(st.sampled_from(suffixes)))))
        lines.extend(draw(st.lists(st.sampled_from(["", "# a comment", "#", "# EOF", "# UNIT x seconds"]), max_size=2)))
    draw(st.randoms()).shuffle(lines) if draw(st.booleans()) else None  # unsorted families
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\n\n"]))


@settings(max_examples=200, deadline=None)
@given(expositions(), st.sampled_from([None, "even", "prefix"]))
def test_generated_expositions_parse_exactly_as_prometheus_client(text: str, keep_kind: str | None) -> None:
    def keep(name: str) -> bool:
        return len(name) % 2 == 0 if keep_kind == "even" else name[:1] in "abcxyz_"

    chosen = None if keep_kind is None else keep
    try:
        want = parse_exposition_full(text, chosen)
    except ParseError:
        with pytest.raises(ParseError):
            parse_exposition(text, chosen)
        return
    assert_same(parse_exposition(text, chosen), want)


def test_counters_without_total_are_renamed_like_prometheus_client_while_in_their_family() -> None:
    text = "# TYPE tgi_request_count counter\ntgi_request_count 7\ntgi_queue_size 2\ntgi_request_count 8\n"
    out = parse_exposition(text)
    assert [s.name for s in out["tgi_request_count_total"]] == ["tgi_request_count_total"]
    assert out["tgi_request_count"][0].value == 8  # after the family ended: a lone untyped sample
    assert_same(out, parse_exposition_full(text))


def test_escapes_values_and_timestamps() -> None:
    text = 'x{a="q\\"\\\\\\n",b="\\t"} 5 1700000000000\ny NaN\nz{} +Inf\n'
    out = parse_exposition(text)
    assert out["x"][0].labels == {"a": 'q"\\\n', "b": "\\t"} and out["x"][0].value == 5
    assert type(out["x"][0].value) is int
    assert math.isnan(out["y"][0].value) and out["z"][0].value == math.inf
    assert_same(out, parse_exposition_full(text))


def test_skipped_families_are_never_turned_into_samples() -> None:
    text = '# TYPE a gauge\na 1\n# TYPE b gauge\nb{x="1"} 2\n'
    assert list(parse_exposition(text, keep=lambda n: n == "b")) == ["b"]


# --- family state: re-typed families, counters without _total, warm and cold plans --------------------

POOL = ["a", "a_total", "a_bucket", "a_count", "a_sum", "a_created", "b", ":", ":_bucket", "_total", "ab"]
TYPES = ["counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "gaugehistogram", "foo"]


@st.composite
def family_soup(draw: st.DrawFn) -> str:
    """Random HELP/TYPE/sample lines over a few colliding names: exercises prometheus_client's family state
    (re-typing after samples, counters renaming their samples, a family ended by another name)."""
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["help", "type", "type", "sample", "sample", "sample", "comment", "blank"]))
        name = draw(st.sampled_from(POOL))
        if kind == "help":
            lines.append(f"# HELP {name} help")
        elif kind == "type":
            lines.append(f"# TYPE {name} {draw(st.sampled_from(TYPES))}")
        elif kind == "sample":
            lines.append(draw(sample_lines(name)))
        elif kind == "comment":
            lines.append(draw(st.sampled_from(["# a comment", "#", "# EOF"])))
        else:
            lines.append("")
    return "\n".join(lines) + "\n"


def shared_keep(name: str) -> bool:
    """One module-level predicate: its plan is learned once and reused by every example (a warm plan)."""
    return not name.endswith("_created")


def check_agrees(text: str, keep: Callable[[str], bool] | None) -> None:
    try:
        want = parse_exposition_full(text, keep)
    except ParseError:
        with pytest.raises(ParseError):
            parse_exposition(text, keep)
        return
    assert_same(parse_exposition(text, keep), want)
    assert_same(parse_exposition(text, keep), want)  # again, with what the first call learned


@settings(max_examples=300, deadline=None)
@given(st.one_of(family_soup(), expositions()), st.sampled_from(["none", "shared", "fresh"]))
def test_family_state_and_plans_agree_with_prometheus_client(text: str, keep_kind: str) -> None:
    def fresh(name: str) -> bool:
        return len(name) % 2 == 1

    keep = {"none": None, "shared": shared_keep, "fresh": fresh}[keep_kind]
    check_agrees(text, keep)


@pytest.mark.parametrize(
    "text",
    [
        "# TYPE : histogram\n:_bucket 0\n# TYPE : counter\n",  # re-typed: prometheus_client renames the bucket
        "# HELP x h\nx 1\n# TYPE x counter\nx 2\n",  # samples before the TYPE are renamed too
        "# TYPE x counter\nx 1\n# TYPE x gauge\nx 2\n",  # re-typed after samples: none renamed
        "# TYPE x counter\nx 1\n\n# comment\n# HELP x h\nx 2\ny 3\nx 4\n",  # 1, 2 renamed; 4 after y is not
        "# TYPE x counter\nx_total 1\nx 2\n",  # x_total ends the family
        "# TYPE x gauge\n# TYPE x counter\nx 1\n",
        "# TYPE x counter\n# TYPE x counter\nx 1\n# TYPE x counter\nx 2\n# HELP x h\nx 3\n",
        "# HELP x h\n" + "# c\n" * 20 + "# TYPE x counter\nx 1\n",  # a long preamble: tier 2
        "# TYPE x counter\n# HELP y h\nx 1\n",
        "# TYPE x foo\nx 1\n",  # not a metric type: an error
        "# TYPE _total counter\n_total 1\n",  # a family named "": an error
        "# TYPE x_total counter\nx_total 1\n",
        'x{a="1",a="2"} 1\n',  # duplicate label names: an error
        'x{a="1",b="2",a="3"} 1\n',
        'x{a="1",b="2",c="3",a="4"} 1\n',
        'x{a="1",a="2",} 1\n',
        'x{a="k=v,w",b="}{",c="=\\",\\"=",d="e"} 1\n',  # separators inside values, escaped quotes
        'x{a="1",b="2",c="3",d="4",e="5",f="6",g="7"} 12.0\n',
        "x 12.0\nx 12\nx -0.0\nx 1234567890123456.0\nx 123456789012345.0\nx 007.0\nx +5.0\nx 1e3\n",
        "x " + "9" * 5000 + "\nx " + "9" * 400 + ".0\n",  # int() refuses > 4300 digits; float() takes them
    ],
)
def test_edge_cases_agree_with_prometheus_client(text: str) -> None:
    for keep in (None, shared_keep, lambda name: name.startswith("x")):
        check_agrees(text, keep)


def test_a_counter_in_one_exposition_and_a_gauge_in_another_share_one_keep() -> None:
    def keep(name: str) -> bool:
        return True

    counter = "# TYPE tgi_request_count counter\ntgi_request_count 7\n"
    gauge = "# TYPE tgi_request_count gauge\ntgi_request_count 7\n"
    for text in (counter, gauge, counter, gauge):
        check_agrees(text, keep)


def test_an_unhashable_keep_still_works() -> None:
    class Keep:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, name: str) -> bool:
            return name == "b"

    check_agrees("# TYPE a gauge\na 1\n# TYPE b counter\nb 2\n", Keep())


def test_the_fast_path_reads_every_capture_in_one_scan() -> None:
    """After the first scrape (which learns the names), one scan places every line: no second scan, no
    line-by-line tier, no prometheus_client — the path the benchmark measures."""
    assert selective_parser._BLANK_OK
    for path in captures():
        text = path.read_text()
        engine = detect_engine(parse_exposition_full(text))
        keep = get_adapter(engine).wants if engine not in (None, "dcgm") else shared_keep
        parse_exposition(text, keep)
        plan = selective_parser._PLANS[keep]
        out, unknown = selective_parser._scan(text if text.endswith("\n") else text + "\n", plan)
        assert unknown == [], (path.name, unknown[:3])
        assert_same(out, parse_exposition_full(text, keep))


def test_renamed_counters_are_read_on_the_fast_path() -> None:
    text = '# HELP c h\n# TYPE c counter\nc{a="1"} 7\nc{a="2"} 8\ng 1\n'
    keep = shared_keep
    parse_exposition(text, keep)
    out, unknown = selective_parser._scan(text, selective_parser._PLANS[keep])
    assert unknown == []
    assert [(s.name, s.value) for s in out["c_total"]] == [("c_total", 7), ("c_total", 8)]


# --- the series cache: second parses, new values, shared labels --------------------------------------------

series_label_values = st.lists(st.sampled_from([*'ab ,={}"\\\n#', "# ", "} ", "\\", "é"]), max_size=6).map("".join)
values = st.one_of(numbers, st.sampled_from(["NaN", "+Inf", "-Inf", "0.0", "300.0", "1.7960301503625555e+09"]))


@st.composite
def series_pages(draw: st.DrawFn) -> tuple[list[tuple[str, str]], list[str], list[str]]:
    """Kept series ``(name, label block)`` (escaped quotes, commas, braces, spaces, ``# `` in values; repeated
    series), and two value lists for them (timestamps on some lines)."""
    series: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(1, 8))):
        name = draw(st.sampled_from(["kept_a", "kept_b_bucket", "kept_c_total", "dropped"]))
        labels = draw(st.dictionaries(label_names, series_label_values, max_size=4))
        body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
        series.append((name, f"{{{body}}}" if labels or draw(st.booleans()) else ""))
    series += draw(st.lists(st.sampled_from(series), max_size=3))  # repeated series
    first = [draw(values) + draw(timestamps) for _ in series]
    second = [draw(values) + draw(timestamps) for _ in series]
    return series, first, second


def render(series: list[tuple[str, str]], values_: list[str]) -> str:
    return "".join(f"{name}{labels} {value}\n" for (name, labels), value in zip(series, values_, strict=True))


def keep_kept(name: str) -> bool:
    return name.startswith("kept_")


@settings(max_examples=300, deadline=None)
@given(series_pages(), st.sampled_from([keep_kept, None]))
def test_a_second_parse_and_new_values_of_the_same_series_agree_with_prometheus_client(
    page: tuple[list[tuple[str, str]], list[str], list[str]], keep: Callable[[str], bool] | None
) -> None:
    series, first, second = page
    for text in (render(series, first), render(series, first), render(series, second), render(series, first)):
        check_agrees(text, keep)


def test_labels_of_cached_series_cannot_be_changed_and_a_later_parse_is_unchanged() -> None:
    text = '# TYPE kept_a gauge\nkept_a{engine="0",model_name="m"} 1.0\nkept_a{engine="1",model_name="m"} 2.0\n'
    first = parse_exposition(text, keep_kept)
    labels = first["kept_a"][0].labels
    for mutate in (
        lambda d: d.__setitem__("engine", "9"),
        lambda d: d.__delitem__("engine"),
        lambda d: d.pop("engine"),
        lambda d: d.popitem(),
        lambda d: d.setdefault("x", "1"),
        lambda d: d.update(engine="9"),
        lambda d: d.clear(),
        lambda d: d.__ior__({"engine": "9"}),
    ):
        with pytest.raises(TypeError):
            mutate(labels)
    copied = dict(labels)
    copied["engine"] = "9"  # a copy is a plain dict
    assert parse_exposition(text, keep_kept) == first == parse_exposition_full(text, keep_kept)
    assert first["kept_a"][0].labels == {"engine": "0", "model_name": "m"}


def test_cached_labels_copy_pickle_and_serialize_as_plain_dicts() -> None:
    labels = parse_exposition('kept_a{engine="0"} 1\n', keep_kept)["kept_a"][0].labels
    assert isinstance(labels, selective_parser.FrozenLabels)
    for copied in (copy.copy(labels), copy.deepcopy(labels), pickle.loads(pickle.dumps(labels))):
        assert type(copied) is dict and copied == {"engine": "0"}
    assert json.dumps(labels) == '{"engine": "0"}'


def test_the_series_cache_stays_within_its_bounds_and_exact_while_it_rotates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selective_parser, "SERIES_CACHE_ENTRIES", 5)
    monkeypatch.setattr(selective_parser, "SERIES_CACHE", selective_parser._SeriesCache())
    cache = selective_parser.SERIES_CACHE
    text = "".join(f'kept_a{{engine="{r}",model_name="m"}} {r}.5\n' for r in range(12))
    for _ in range(3):
        check_agrees(text, keep_kept)
        assert len(cache.young) <= 5 and len(cache.old) <= 5
    monkeypatch.setattr(selective_parser, "SERIES_CACHE_BYTES", 2_000)
    cache.clear()
    for _ in range(2):
        check_agrees(text, keep_kept)
        assert cache.young_bytes <= 2_000


@pytest.mark.parametrize("length", [600, 5_000])
def test_a_very_long_metric_name_parses_as_prometheus_client_parses_it(length: int) -> None:
    """Breaker 24: a page line ``vllm:000…`` with a 600-character name raised RecursionError in the plan's name trie
    (a regex group nested per character), so ``inspect`` printed a 3,000-line traceback and ``run`` logged one on
    every scrape of that target. Such a name goes to tier 2 and parses as ``prometheus_client`` parses it, the
    engine's own families beside it kept; the same page twice (the plan cached) as well."""
    long_name = "vllm:" + "0" * length
    text = f'vllm:num_requests_running{{model_name="m"}} 3.0\n{long_name} 1\nvllm:num_requests_waiting 2.0\n'
    keep = get_adapter("vllm").wants
    for _ in range(2):
        assert_same(parse_exposition(text, keep), parse_exposition_full(text, keep))
        assert_same(parse_exposition(text, None), parse_exposition_full(text, None))
    assert [s.value for s in parse_exposition(text, keep)["vllm:num_requests_running"]] == [3.0]
