"""Tier 1's line reader (``_read``) agrees with ``prometheus_client`` on the lines it takes, and refuses the rest.

A kept line is split at its last space and taken on two look-ups: its series text in the series cache (checked
on its first sight) and its value text among those this read has checked; else it is matched whole (a timestamp,
a new series or value); else it is refused, and tier 2 or ``prometheus_client`` decides. The lines come from the
scan's runs of kept lines (``blocks_from`` above the page size) or from a family read directly
(``blocks_from=0``: every sample of the family is wanted, so ``_kept_blocks`` hands its lines over without the
scan's regex). Each case is parsed three times (new series, then cached series) on both paths.
"""

from __future__ import annotations

import pytest

from advisor.domain import Sample
from advisor.errors import ParseError
from advisor.sources import selective_parser
from advisor.sources.exposition import parse_exposition_full
from advisor.sources.selective_parser import Unrecognized
from tests.sources.test_selective_parser import assert_same

PATHS = {"scanned": 10**12, "direct": 0}
"""``blocks_from`` for each path: the whole page scanned, or cut into families (``k``'s read directly)."""


def keep_k(name: str) -> bool:
    """Module level, so its plan is remembered across parses (the warm path)."""
    return name in ("k", "other")


def page(lines: str) -> str:
    """``lines`` as family ``k`` (a gauge) between two families ``keep_k`` rejects (dropped on the direct path)."""
    return f"# HELP r h\n# TYPE r gauge\nr 1\n# HELP k h\n# TYPE k gauge\n{lines}\n# TYPE s gauge\ns 2\n"


def ours(text: str, blocks_from: int) -> dict[str, list[Sample]]:
    """``parse_exposition`` with a chosen ``blocks_from``."""
    try:
        return selective_parser.parse_selected(text, keep_k, blocks_from=blocks_from)
    except Unrecognized:
        return parse_exposition_full(text, keep_k)


def read_on_tier_1(text: str, blocks_from: int) -> bool:
    """Whether tier 1 places every line of ``text`` with ``keep_k``'s remembered plan (no line back to learn, no
    ``Unrecognized``)."""
    plan = selective_parser._PLANS[keep_k]
    pieces = selective_parser._kept_blocks(text, plan) if len(text) >= blocks_from else None
    if blocks_from == 0:
        assert pieces is not None and any(body >= 0 for _, body, _ in pieces), "k is read directly"
    try:
        _, unknown = selective_parser._scan(text, plan, pieces)
    except Unrecognized:
        return False
    return unknown == []


READ_ON_TIER_1 = [
    'k{a="} 1"} 2',  # "} " and a number in a label value: the series ends at the last space
    'k{a="q\\"} x"} 2.5',  # an escaped quote, then "} "
    'k{a="x y z",b=" "} 3',  # spaces in label values
    'k{a="# {b=\\"c\\"} 1"} 4',  # an exemplar's text in a label value
    'k{a="1"} 5 1700000000000',  # a timestamp: matched whole, never a cache hit
    "k 6 -5",
    'k{a="n"} NaN\nk{a="p"} +Inf\nk{a="m"} -Inf\nk{a="i"} inf\nk{a="z"} -0.0',
    'k{a="big"} ' + "9" * 400,  # an int beyond float range stays an int
    'k{a="huge"} ' + "9" * 5000,  # more digits than int() converts: prometheus_client's float(), inf
    'k{a="f"} 1e400\nk{a="e"} 1E-3\nk{a="d"} .5',
    'k{a="d"} 1\nk{a="d"} 2',  # a repeated series: both samples
    'k{a="1"} 1\nk{a="1"} 1.0\nk{a="1"} +1\nk{a="1"} 1',  # one number, three texts: int, float, int
    "k 1\n\nk 2",  # a blank line
    'k{} 1\nk{a="1",} 2',  # an empty label block, a trailing comma
    'k 1\nother{a="1"} 2\nk 3',  # a sample of another (wanted) family ends k's: it stands alone
    "k 1\nr 2\nk 3",  # one keep rejects, among k's lines: not read as a sample
]

REFUSED_ON_TIER_1 = [
    'k{a="1"} 1\r',  # a CR line end
    'k{a="1"} 1 # {t="x"} 0.5',  # an exemplar
    'k{a="1"}\t1',  # a tab as separator
    'k{a="1"}  1',  # two spaces
    'k{a="1"} 1 ',  # a trailing space
    ' k{a="1"} 1',  # a leading space
    'k{a="1"}',  # no value
    'k{a="1"} 1_0',  # an underscore: prometheus_client refuses the value
    "k 0x10",  # float() refuses it
    'k{a="1"} \u0661',  # an Arabic-Indic digit: int() takes it, tier 1 reads ASCII numbers only
    'k{a="1"} 1\u00a0',  # a no-break space after the value: prometheus_client strips it (int 1)
    'k{a="1"} \t1',  # a tab before the value
    'k{a="1",a="2"} 1',  # duplicate label names: an error
    "k 1\n  # HELP k other help",  # an indented HELP: a comment line to prometheus_client once stripped
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("lines", READ_ON_TIER_1)
def test_lines_read_on_tier_1_agree_with_prometheus_client(lines: str, path: str) -> None:
    text = page(lines)
    want = parse_exposition_full(text, keep_k)
    for _ in range(3):  # new series and value texts, then cached series
        assert_same(ours(text, PATHS[path]), want)
        assert read_on_tier_1(text, PATHS[path])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("lines", REFUSED_ON_TIER_1)
def test_lines_refused_on_tier_1_still_agree_with_prometheus_client(lines: str, path: str) -> None:
    text = page(lines)
    try:
        want = parse_exposition_full(text, keep_k)
    except ParseError:
        want = None
    for _ in range(3):
        if want is None:  # prometheus_client refuses the page: so does ours (parse_exposition then raises)
            with pytest.raises(Unrecognized):
                selective_parser.parse_selected(text, keep_k, blocks_from=PATHS[path])
        else:
            assert_same(ours(text, PATHS[path]), want)
        assert not read_on_tier_1(text, PATHS[path])


def test_a_value_text_is_checked_in_each_read_not_trusted_from_the_series_cache() -> None:
    """A series seen before with a valid value, then with a value text float() takes but prometheus_client
    refuses (``1_0``): refused."""
    good, bad = page('k{a="1"} 10'), page('k{a="1"} 1_0')
    with pytest.raises(ParseError):
        parse_exposition_full(bad, keep_k)
    for path in PATHS.values():
        assert ours(good, path)["k"][0].value == 10
        with pytest.raises(Unrecognized):
            selective_parser.parse_selected(bad, keep_k, blocks_from=path)


def test_a_crlf_page_is_refused_on_tier_1_and_agrees() -> None:
    text = page('k{a="1"} 1\nk{a="} 2"} 2.5').replace("\n", "\r\n")
    want = parse_exposition_full(text, keep_k)
    for path in PATHS.values():
        assert_same(ours(text, path), want)
        assert not read_on_tier_1(text, 10**12)
