"""Block-level skipping (issue 15) agrees with ``prometheus_client`` on valid expositions, for any keep set.

The selective parser drops whole families ``keep`` rejects before scanning (``_kept_blocks``, on pages of
``BLOCKS_FROM`` characters or more; forced here with ``blocks_from=0``). Property: for random valid expositions —
families with and without HELP/TYPE, label escapes, NaN/±Inf, histograms, summaries, counters with and without
``_total``, untyped samples, comments, blank lines, repeated series — and a random keep set, the result equals
``prometheus_client``'s samples filtered by that keep set (same names in the same order, labels, values and types).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from advisor.domain import Sample
from advisor.errors import ParseError
from advisor.sources import selective_parser
from advisor.sources.exposition import parse_exposition, parse_exposition_full
from advisor.sources.selective_parser import Unrecognized


def ours(text: str, keep: Callable[[str], bool] | None) -> dict[str, list[Sample]]:
    """``parse_exposition`` with block skipping on at any size (its fallback included)."""
    try:
        return selective_parser.parse_selected(text, keep, blocks_from=0)
    except Unrecognized:
        return parse_exposition_full(text, keep)


def assert_same(fast: dict[str, list[Sample]], full: dict[str, list[Sample]]) -> None:
    assert list(fast) == list(full)
    for name in full:
        assert len(fast[name]) == len(full[name]), name
        for a, b in zip(fast[name], full[name], strict=True):
            assert (a.name, dict(a.labels)) == (b.name, dict(b.labels))
            assert type(a.value) is type(b.value), (a, b)
            assert a.value == b.value or (math.isnan(a.value) and math.isnan(b.value)), (a, b)


# --- valid expositions ------------------------------------------------------------------------------------

FAMILIES = ["a", "a_total", "b", "vllm:x", "vllm:x_total", "c:d", "e_seconds", "f"]
"""Family names that collide on purpose: ``a`` and ``a_total``, ``vllm:x`` and ``vllm:x_total``."""
label_names = st.sampled_from(["engine", "le", "model_name", "quantile", "k", "reason"])
label_values = st.text(alphabet=st.sampled_from(list('ab0 ,={}"\\\n#é:/.')), max_size=6)
numbers = st.sampled_from(["0", "1", "-3", "1.0", "2.5e+06", "1e-3", "NaN", "+Inf", "-Inf", "12.0", "7"])


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@st.composite
def series(draw: st.DrawFn, name: str, extra: dict[str, str] | None = None) -> str:
    labels = draw(st.dictionaries(label_names, label_values, max_size=3))
    labels.update(extra or {})
    body = ",".join(f'{k}="{escape(v)}"' for k, v in labels.items())
    labelled = f"{{{body}}}" if body else draw(st.sampled_from(["", "{}"]))
    stamp = draw(st.sampled_from(["", "", " 1700000000000"]))
    return f"{name}{labelled} {draw(numbers)}{stamp}"


@st.composite
def family(draw: st.DrawFn, name: str) -> list[str]:
    """One family as an exporter writes it: optional HELP, optional TYPE, then its samples (maybe repeated)."""
    typ = draw(st.sampled_from(["counter", "gauge", "histogram", "summary", "untyped", None]))
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append(f"# HELP {name} Some help, with \\\\ and \\n escapes.")
    if typ is not None:
        lines.append(f"# TYPE {name} {typ}")
    for _ in range(draw(st.integers(0, 3))):
        if typ == "histogram":
            extra = {"engine": draw(st.sampled_from(["0", "1"]))}
            for le in ("0.1", "1.0", "+Inf"):
                lines.append(draw(series(f"{name}_bucket", {**extra, "le": le})))
            lines.append(draw(series(f"{name}_sum", extra)))
            lines.append(draw(series(f"{name}_count", extra)))
        elif typ == "summary":
            lines.append(draw(series(name, {"quantile": "0.5"})))
            lines.append(draw(series(f"{name}_sum")))
            lines.append(draw(series(f"{name}_count")))
        else:
            lines.append(draw(series(name)))
    if lines and draw(st.booleans()):  # a repeated series: prometheus_client keeps both
        lines.append(lines[-1])
    for _ in range(draw(st.integers(0, 1))):
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, draw(st.sampled_from(["", "# a comment", "# EOF"])))
    return lines


@st.composite
def expositions(draw: st.DrawFn) -> str:
    names = draw(st.lists(st.sampled_from(FAMILIES), unique=True, max_size=6))
    lines = [line for name in names for line in draw(family(name))]
    if draw(st.integers(0, 4)) == 0:  # untyped samples between families
        lines.insert(draw(st.integers(0, len(lines))), draw(series("lone")))
    return "\n".join(lines) + draw(st.sampled_from(["\n", "", "\n\n"]))


ALL_NAMES = sorted(
    {f + s for f in [*FAMILIES, "lone"] for s in ("", "_total", "_bucket", "_count", "_sum")}
)  # every final sample name the generator can produce


@settings(max_examples=300, deadline=None)
@given(expositions(), st.sets(st.sampled_from(ALL_NAMES)))
def test_any_keep_set_agrees_with_prometheus_client(text: str, wanted: set[str]) -> None:
    def keep(name: str) -> bool:
        return name in wanted

    assert_same(ours(text, keep), parse_exposition_full(text, keep))


@settings(max_examples=150, deadline=None)
@given(expositions(), st.sets(st.sampled_from(ALL_NAMES)), st.randoms())
def test_interleaved_families_agree_with_prometheus_client(text: str, wanted: set[str], rnd: random.Random) -> None:
    lines = text.splitlines()
    rnd.shuffle(lines)  # families interleaved, headers after samples, re-typed: the exact path decides
    shuffled = "\n".join(lines) + "\n"
    try:
        want = parse_exposition_full(shuffled, wanted.__contains__)
    except ParseError:  # a shuffle can make invalid text (a histogram's samples before its TYPE, …)
        return
    assert_same(ours(shuffled, wanted.__contains__), want)


# --- the blocks are really dropped ------------------------------------------------------------------------


def kept_text(text: str, pieces: list[selective_parser._Piece] | None) -> str:
    """What ``_kept_blocks`` leaves of ``text``: its pieces, headers included (all of ``text`` for ``None``)."""
    return text if pieces is None else "".join(text[start:end] for start, _, end in pieces)


PAGE = (
    "# HELP kept_gauge g\n# TYPE kept_gauge gauge\n"
    'kept_gauge{engine="0"} 1.0\nkept_gauge{engine="1"} 2.0\n'
    "# HELP big_hist h\n# TYPE big_hist histogram\n"
    + "".join(f'big_hist_bucket{{le="{le}",engine="{e}"}} 3\n' for e in range(50) for le in ("1", "+Inf"))
    + "big_hist_sum 3\nbig_hist_count 3\n"
    "# TYPE tail counter\ntail 4\n"
)


def test_a_rejected_family_is_dropped_whole_and_the_rest_parses_the_same() -> None:
    def keep(name: str) -> bool:
        return name in ("kept_gauge", "tail_total")

    plan = selective_parser._Plan(keep, {}, frozenset(), frozenset())
    pieces = selective_parser._kept_blocks(PAGE, plan)
    assert kept_text(PAGE, pieces) == PAGE[: PAGE.index("# HELP big_hist")] + "# TYPE tail counter\ntail 4\n"
    gauge_lines = PAGE.index("kept_gauge{")
    assert pieces == [
        (0, gauge_lines, PAGE.index("# HELP big_hist")),  # every sample wanted: read directly
        (PAGE.index("# TYPE tail"), -1, len(PAGE)),  # a counter renaming its samples: scanned
    ]
    assert_same(ours(PAGE, keep), parse_exposition_full(PAGE, keep))
    assert [s.name for s in ours(PAGE, keep)["tail_total"]] == ["tail_total"]


def test_a_family_with_a_stray_sample_is_not_dropped() -> None:
    # prometheus_client ends big_hist at "kept_gauge 9" and yields it alone: the block must be read
    page = PAGE.replace("big_hist_sum 3\n", "kept_gauge 9\nbig_hist_sum 3\n")

    def keep(name: str) -> bool:
        return name == "kept_gauge"

    plan = selective_parser._Plan(keep, {}, frozenset(), frozenset())
    assert "kept_gauge 9" in kept_text(page, selective_parser._kept_blocks(page, plan))
    assert [s.value for s in ours(page, keep)["kept_gauge"]] == [1.0, 2.0, 9]


def test_unusual_headers_scan_the_whole_page() -> None:
    plan = selective_parser._Plan(lambda name: False, {}, frozenset(), frozenset())
    for page in (
        PAGE + "# TYPE big_hist histogram\nbig_hist_count 1\n",  # a family in two places
        PAGE.replace("# TYPE tail counter", "#\tTYPE tail counter"),  # a TYPE line prometheus_client reads
        PAGE.replace("# TYPE tail counter", "# TYPE tail countr"),  # not a metric type: prometheus_client errs
    ):
        assert selective_parser._kept_blocks(page, plan) is None


def test_large_pages_take_the_block_path_by_default() -> None:
    big = "".join(
        PAGE.replace("big_hist", f"big_hist{i}").replace("kept_gauge", f"g{i}").replace("tail", f"t{i}")
        for i in range(260)
    )
    assert len(big) >= selective_parser.BLOCKS_FROM

    def keep(name: str) -> bool:
        return name.startswith("g")

    plan = selective_parser._Plan(keep, {}, frozenset(), frozenset())
    assert len(kept_text(big, selective_parser._kept_blocks(big, plan))) < len(big) / 10
    assert_same(parse_exposition(big, keep), parse_exposition_full(big, keep))


def test_a_label_value_beginning_with_a_comma_among_four_labels() -> None:
    # found by the property above: the four-label fast path split c="," at its opening quote ({"c=": ""})
    for text in ('x{a="1",b="2",c=",",d="4"} 1\n', 'x{a=",x",b=",",c="3=",d="=,"} 1\n'):
        assert_same(parse_exposition(text), parse_exposition_full(text))
