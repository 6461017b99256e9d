"""A selective parser for the Prometheus text format's sample lines, agreeing with ``prometheus_client``.

:func:`advisor.sources.exposition.parse_exposition` calls :func:`parse_selected` first and falls back to
``prometheus_client.parser.text_string_to_metric_families`` whenever it raises :class:`Unrecognized`. The
result must be *exactly* what the full parse gives (same sample names, labels, values, order), so this
module only accepts text whose every line it can prove ``prometheus_client`` would read the same way:

* **Blocks** (pages of :data:`BLOCKS_FROM` characters or more, with a ``keep``): the page is cut at its
  ``# HELP``/``# TYPE`` lines with ``str.find`` (in C), and every family whose samples ``keep`` all rejects is
  dropped unread once ``str.count`` has shown that each of its lines is a sample of that family; a family
  whose samples ``keep`` all wants (and which does not rename them: not a counter without ``_total``), with no
  comment among its lines, is read directly: its lines go to tier 1's line reader without the scan's regex
  (:func:`_kept_blocks`). Tier 1 scans what is left. A page with interleaved or re-typed families, or odd
  headers, is scanned whole.
* **Tier 1** (the fleet path, ≥10× the full parse on every capture): **one** ``findall`` of a regex built for
  the ``keep`` predicate (a :class:`_Plan`, cached per ``keep`` object, since an adapter's ``wants`` is asked
  about the same names at every scrape) walks the text in C (:func:`_line_scanner`). It returns each run of
  lines beginning with a name ``keep`` accepts and ``{`` or a space as one string, the rest of the lines
  unread; it consumes, producing nothing, the runs of lines beginning with a name ``keep`` rejects and ``{`` or
  a space (not read further), ``# HELP name …``, ``# TYPE name type`` (a type ``prometheus_client`` accepts),
  other comments and blank lines, so skipped families cost no Python at all; any other line comes back whole.
  The line reader (:func:`_read`) then takes each kept line only as, strictly, a sample
  (``name{l="v",…} value [timestamp]``, single spaces, no surrounding whitespace, no exemplar): split at its
  last space, its series text is looked up in :data:`SERIES_CACHE` (which parses and checks each distinct
  series once, process-wide) and its value text among those this read has already checked; a line that
  misses is checked whole by a regex, one that fails is refused. A ``# TYPE x counter`` whose name lacks
  ``_total`` makes the plan scan with another regex (:func:`_scanner`, :func:`_scan_rows`) that matches the
  whole family as one block (the lines ``prometheus_client`` keeps in that family, whose samples it renames
  ``x_total``); a sample ``x`` outside such a block is refused. A line of a name the plan has not seen yet
  comes back whole: ``keep`` is asked once, the plan is rebuilt (its regex is cached) and the text is scanned
  again — so the first scrape of a new exposition shape pays for two scans, later ones for one.
* **Tier 2** (exact line loop): text tier 1 does not accept — surrounding whitespace, ``\\r\\n``,
  exemplars (``… 1.0 # {trace_id="a"} 0.5``), a counter family tier 1's block does not cover — is walked
  line by line with the same checks, replaying ``prometheus_client``'s family state
  (``text_fd_to_metric_families``) to rename exactly the samples it renames.
* Anything else (quoted UTF-8 names, ``__`` label names, duplicate label names, tabs as separators, odd
  comments such as ``# HELP`` without a name, unknown metric types, values ``float()`` rejects) raises
  :class:`Unrecognized`, and ``prometheus_client`` decides — including whether the text is an error.

Known differences, on invalid text only: a sample line of a name ``keep`` rejects (in tier 1, or in a family
dropped as a block) is not read past its name, so what ``prometheus_client`` would reject there (a bad value,
duplicate label names ``x{a="1",a="2"} 1``) is not an error. The kept lines are always checked.

``keep`` must be a pure function of the sample name: its answers are remembered per ``keep`` object
(compared as dictionary keys: ``adapter.wants`` is the same key at every scrape).

What ``prometheus_client`` (0.20 → 0.26) does and this module mirrors:

=====================================  ===============================================================
input                                  sample
=====================================  ===============================================================
``x{a="q\\"\\\\\\n"} 1``                   labels ``{"a": 'q"\\\\' + "\\n"}`` (only ``\\\\``, ``\\"``, ``\\n`` unescape)
``x 5``                                 value ``5`` (an ``int``: ``int()`` is tried before ``float()``)
``x NaN`` / ``x +Inf`` / ``x 1e3``      ``nan`` / ``inf`` / ``1000.0``
``x 1 1700000000000``                   value ``1``; the timestamp is validated then dropped
``x 1 # {t="a"} 0.5 1.7e9``             value ``1``; the exemplar is dropped (its last token is checked)
``# TYPE x counter`` then ``x 3``       name ``x_total`` (counter samples get ``_total``)
``# TYPE x_total counter`` ``x_total``  name unchanged
``# TYPE x gauges``                     an error (``Invalid metric type``)
``# EOF``, ``# UNIT …``, blank lines     ignored
=====================================  ===============================================================
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
from collections.abc import Callable
from typing import Any, Final, NoReturn

from advisor.domain import Sample


class Unrecognized(Exception):  # noqa: N818 - a signal to fall back, not an error the caller sees
    """The text has a construct this parser does not prove equivalent; use ``prometheus_client``."""


# --- grammar ---------------------------------------------------------------------------------------------
_NAME: Final = r"[a-zA-Z_:][a-zA-Z0-9_:]*+"
_LNAME: Final = r"(?!__)[a-zA-Z_][a-zA-Z0-9_]*+"  # reserved __ names: prometheus_client decides
_LVAL: Final = r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
_PAIR: Final = _LNAME + "=" + _LVAL
_BODY: Final = rf"(?:{_PAIR}(?:,{_PAIR})*+,?)?+"
# What float()/int() accept in ASCII, minus underscores (prometheus_client rejects them).
_NUM: Final = (
    r"[+-]?(?:(?:[0-9]++\.?[0-9]*+|\.[0-9]++)(?:[eE][+-]?[0-9]++)?+"
    r"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?+|[nN][aA][nN])"
)
# A timestamp (or an exemplar's last token) is divided by 1000: keep integers short enough never to overflow.
_TS: Final = r"[+-]?(?:[0-9]{1,30}+(?:\.[0-9]*+)?+(?:[eE][+-]?[0-9]++)?+|\.[0-9]++(?:[eE][+-]?[0-9]++)?+)"
_SEP: Final = r"[ \t\r\x0b\x0c]"  # prometheus_client splits comments on string.whitespace only
_OTHER_COMMENT: Final = rf'#[^ \t\r\x0b\x0c"\n]*+(?:{_SEP}++(?!(?:HELP|TYPE)(?:\s|\Z))[^\n]*+)?+'
# Metric types prometheus_client's Metric accepts (anything else raises "Invalid metric type").
_TYPE_WORDS: Final = ("counter", "gauge", "histogram", "summary", "untyped", "unknown", "info", "stateset")
_TYPE_WORDS_RE: Final = "gaugehistogram|" + "|".join(_TYPE_WORDS)

# --- tier 1: lines of the one-pass scan, each with its "\n" ----------------------------------------------
_SAMPLE_TAIL: Final = rf"(?:\{{{_BODY}\}})?+ {_NUM}(?: {_TS})?+\n"
"""A sample line after its name."""
_COMMENT_LINE: Final = (
    # {not_counter}: the # HELP / # TYPE lines of a counter family whose samples get renamed belong to its block
    rf"#(?: HELP {{not_counter}}{_NAME}(?: [^\n]*+)?+\n"
    # a counter whose name lacks _total renames its samples: only a counter block takes it
    rf"| TYPE {{not_counter}}{_NAME} (?:(?<=[a-zA-Z0-9_:]_total )counter|{_TYPE_WORDS_RE.replace('|counter', '')})\n"
    rf"|{_OTHER_COMMENT[1:]}\n)"
)
_SERIES_LABELS: Final = rf"(?:\{{[^}}]{{0,1024}}+\}}|\{{{_BODY}\}})?"
"""A kept line's label block: read to its first ``}`` unchecked (``[^}]`` runs at C speed: a third of the time of
a validating read), else validated here (a ``}`` inside a value, or a block over 1,024 characters). The series
cache (:class:`_SeriesCache`) checks each distinct series text once, on its first sight, and what it has not
accepted is never a hit, so the unchecked form (which can run past a line's end in a malformed page, at most 1,024
characters) accepts exactly what :data:`_BODY` does. When the first form matches, the line's first ``}`` is
followed by its value and its end, so no other reading of the braces exists."""
_KEPT_TAIL: Final = rf" (?:([+-]?[0-9]++)|({_NUM}))(?: {_TS})?+\n"
"""A kept line after its series: the value (2 an integer, 3 another number) and an optional timestamp."""
_KEPT_LINE_RE: Final = re.compile(rf"({_NAME}(?:\{{{_BODY}\}})?) ({_NUM})(?: {_TS})?+")
"""A sample line (without its ``"\\n"``) as :func:`_read` checks one it has not seen: 1 the series, 2 the value."""
_NUM_CHARS: Final = "0123456789.+-eEiInNfFtTyYaA"
"""The characters of :data:`_NUM`'s texts. An ASCII text of these alone is one of them exactly when ``float()``
takes it (no underscores, no whitespace: those ``float()`` also takes), and an integer exactly when ``int()``
takes it."""
_OTHER: Final = (
    # 4 a counter block, or any other line (with its "\n"); 5 the counter of a block (see _scanner)
    r"((?=# (?:HELP|TYPE) (?P<cn>{counters})[ \n])"
    # the family's lines before its (last) # TYPE counter: no sample (prometheus_client would rename it too);
    # at most 16, so that a failed block costs bounded work
    rf"(?:(?:# HELP (?P=cn)(?: [^\n]*+)?+|# TYPE (?P=cn) (?:{_TYPE_WORDS_RE})|{_OTHER_COMMENT}|)\n){{0,16}}?"
    r"# TYPE (?P=cn) counter\n"
    # then everything prometheus_client keeps in the family, up to a line that ends it; a further # TYPE x
    # ends the block and fails it (re-typing: tier 2), so no line is scanned by two blocks
    rf"(?:(?:(?P=cn){_SAMPLE_TAIL[:-2]}|# HELP (?P=cn)(?: [^\n]*+)?+|{_OTHER_COMMENT}|)\n)*+"
    r"(?!# TYPE (?P=cn) )"
    r"|[^\n]++\n)"
)
_ROW_SIZE: Final = 5

_BLOCK_SAMPLE_RE: Final = re.compile(rf"^{_NAME}(?:\{{({_BODY})\}})? ({_NUM})(?: {_TS})?$", re.MULTILINE)
_STRICT_SAMPLE_RE: Final = re.compile(rf"({_NAME}){_SAMPLE_TAIL[:-2]}")
_COUNTER_TYPE_RE: Final = re.compile(rf"# TYPE ({_NAME}) counter")

# --- tier 2 ----------------------------------------------------------------------------------------------
_WS: Final = r"[^\S\n]*+"
_EXEMPLAR: Final = rf" # \{{(?:{_PAIR}(?:,{_PAIR})*+)?\}} {_NUM}"
_LINE_RE: Final = re.compile(
    rf"{_WS}(?:"
    rf"({_NAME})(?:\{{({_BODY})\}})? ({_NUM})(?:{_EXEMPLAR})?(?: {_TS})?"  # 1 name, 2 labels, 3 value
    rf"|# (HELP|TYPE) ({_NAME})(?: ([^\n]*+))?"  # 4 HELP/TYPE, 5 family, 6 rest (the type)
    rf"|{_OTHER_COMMENT}"
    rf")?{_WS}(?:\n|\Z)"
)
"""Tier 2: one line, with surrounding whitespace and exemplars allowed."""

_PAIR_RE: Final = re.compile(rf'({_LNAME})="([^"\\\n]*+(?:\\.[^"\\\n]*+)*+)"')
_ESCAPE_RE: Final = re.compile(r'\\[\\n"]')
_ESCAPES: Final = {"\\\\": "\\", "\\n": "\n", '\\"': '"'}
_TYPE_WORD_RE: Final = re.compile(_TYPE_WORDS_RE)

_MAX_NAMES: Final = 20_000
"""A plan stops learning names beyond this (a text of random names goes to tier 2, not into the cache)."""
_MAX_NAME_CHARS: Final = 200
"""A plan learns no name longer than this (the line goes to tier 2): :func:`_trie` nests a regex group per character
of a name, and its recursion, two frames a character, passed Python's limit at ~500 (breaker 24: a 600-character
``vllm:000…`` name raised RecursionError on every scrape). Engines' own names are under 80 characters."""
_MAX_PLANS: Final = 64
BLOCKS_FROM: Final = 1_000_000
"""Texts from this many characters on are cut into families first (:func:`_kept_blocks`). Walking the headers
costs about 2 µs per family in Python, and tier 1 skips a rejected line at C speed too, so cutting pays only on
large families. Interleaved with the whole-page scan on a quiet machine (``parse_selected`` with
``blocks_from=0`` against the whole page, 9 rounds, pages built as ``bench/parse.py`` builds them from the vLLM
0.33 capture), cutting took 2.1× the whole-page scan's time on the 62 KB capture (130 families), 1.4× at 0.19 MB
(4 DP ranks), 1.09× at 0.37 MB (8), 0.98× at 0.55 MB (12) and 0.87–0.90× from 0.72 to 1.07 MB (16–24); on pages
grown by one rejected family of LoRA series, 1.58× at 0.22 MB, 1.17× at 0.52 MB, 1.03× at 0.82 MB, 0.80× at
3.7 MB. From 1 MB on both kinds gain."""


def parse_selected(
    text: str, keep: Callable[[str], bool] | None, *, blocks_from: int = BLOCKS_FROM
) -> dict[str, list[Sample]]:
    """Samples of ``text`` whose (final) name ``keep`` accepts, keyed by sample name, in exposition order.

    Args:
        text: Prometheus text format 0.0.4.
        keep: predicate on sample names, assumed pure (asked once per distinct name and ``keep`` object,
            across calls); ``None`` keeps all.
        blocks_from: from this many characters on, families ``keep`` rejects whole are dropped before the
            scan and families it wants whole are read without it (:func:`_kept_blocks`); shorter texts are
            scanned whole.

    Returns:
        Exactly what flattening ``text_string_to_metric_families(text)`` and filtering by ``keep`` gives.

    Raises:
        Unrecognized: the text is outside what this parser proves equivalent (see the module docstring).
    """
    if not _BLANK_OK:
        raise Unrecognized
    framed = text if not text or text[-1] == "\n" else text + "\n"
    try:
        plan = _PLANS[keep]
    except (KeyError, TypeError):  # a new keep (or an unhashable one: learned per call)
        plan = _Plan(keep, {}, frozenset(), frozenset())
        _remember(keep, plan)  # its answers, even if the scan learns nothing (a page read in blocks)
    pieces = _kept_blocks(framed, plan) if keep is not None and len(framed) >= blocks_from else None
    out, unknown = _scan(framed, plan, pieces)
    if not unknown:
        return out
    for _ in range(2):  # learn the names the scan had not seen, scan again (once is the usual case)
        learned = plan.learn(unknown)
        if learned is None:
            break
        plan = learned
        _remember(keep, plan)
        out, unknown = _scan(framed, plan, pieces)
        if not unknown:
            return out
    return _tier2(text, keep)


class _Plan:
    """What tier 1 knows about one ``keep``: its answers, the sample names seen, and the scan built on them.

    Attributes:
        keep: the predicate (``None``: keep everything).
        decided: ``keep``'s answer per final sample name (shared by the successive plans of one ``keep``).
        raw: sample names seen on sample lines (not renamed by a counter family).
        counters: families seen as ``# TYPE x counter`` whose name lacks ``_total`` (samples renamed).
        blocks: :meth:`block`'s answers (shared by the successive plans of one ``keep``).
        lines: no ``counters``: the scan is :func:`_line_scanner`'s, read by :func:`_read` (else :func:`_scanner`'s,
            read by :func:`_scan_rows`).
        findall: the scan for these names.
    """

    __slots__ = ("blocks", "counters", "decided", "findall", "keep", "lines", "raw")

    def __init__(
        self,
        keep: Callable[[str], bool] | None,
        decided: dict[str, bool],
        raw: frozenset[str],
        counters: frozenset[str],
        blocks: dict[tuple[str, str], tuple[str, ...] | None] | None = None,
    ) -> None:
        self.keep = keep
        self.decided = decided
        self.blocks: dict[tuple[str, str], tuple[str, ...] | None] = {} if blocks is None else blocks
        self.raw = raw
        self.counters = counters
        kept: frozenset[str] | None = None
        rejected: frozenset[str] = frozenset()
        if keep is not None:
            plain = raw - counters
            kept = frozenset([n for n in plain if self.wants(n)])
            rejected = plain - kept
        self.lines = not counters
        scanner = _line_scanner(kept, rejected) if self.lines else _scanner(kept, rejected, counters)
        self.findall = scanner.findall

    def wants(self, final: str) -> bool:
        """``keep(final)``, asked once."""
        wanted = self.decided.get(final)
        if wanted is None:
            wanted = self.decided[final] = self.keep is None or self.keep(final)
        return wanted

    def learn(self, lines: list[str]) -> _Plan | None:
        """The plan that also knows the names on ``lines`` (lines the scan did not place), or ``None`` when a
        line is not a sample or counter ``# TYPE`` of a new name (then the text goes to tier 2).

        Example: ``["vllm:new_gauge 1", "# TYPE tgi_request_count counter"]`` → a plan whose scan keeps or
        skips ``vllm:new_gauge`` as ``keep`` says and reads ``tgi_request_count`` as a counter block.
        """
        raw = set(self.raw)
        counters = set(self.counters)
        for line in lines:
            sample = _STRICT_SAMPLE_RE.fullmatch(line)
            if sample is not None:
                name = sample.group(1)
                if self.keep is None or name in self.raw or name in self.counters or len(name) > _MAX_NAME_CHARS:
                    return None  # known: the line is outside what the scan proves (a renamed counter's sample)
                raw.add(name)
                continue
            counter = _COUNTER_TYPE_RE.fullmatch(line)
            if counter is None or counter.group(1).endswith("_total") or counter.group(1) in self.counters:
                return None
            if len(counter.group(1)) > _MAX_NAME_CHARS:
                return None
            counters.add(counter.group(1))
        if len(raw) > _MAX_NAMES:
            return None
        return _Plan(self.keep, self.decided, frozenset(raw), frozenset(counters), self.blocks)

    def block(self, family: str, typ: str) -> tuple[str, ...] | None:
        """How :func:`_kept_blocks` reads a block ``# TYPE family typ``: the line starts of its samples when
        ``keep`` rejects them all (the block is dropped if they account for every line); ``None`` when ``keep``
        wants them all and they keep their names (not a counter that renames them): the block's lines are read
        directly (:func:`_read`); else ``()``: the block is scanned.

        A sample is in the block's family when its name is one ``text_fd_to_metric_families`` allows
        (:func:`_allowed`); its final name gets ``_total`` in a counter family not named ``…_total``. Each
        allowed name ``n`` gives the line starts ``"\\n" + n + "{"`` and ``"\\n" + n + " "`` (``{`` ones first).

        Example: ``("vllm:iteration_tokens_total", "histogram")`` with ``keep`` rejecting its samples →
        ``("\\nvllm:iteration_tokens_total_count{", "\\nvllm:iteration_tokens_total_count ", …)`` (6 starts);
        with ``keep`` wanting its ``_bucket``, ``_count`` and ``_sum`` → ``None``; wanting only ``_sum`` → ``()``.
        """
        key = (family, typ)
        if key in self.blocks:
            return self.blocks[key]
        allowed = _allowed(family, typ)
        rename = typ == "counter" and not family.endswith("_total")
        wanted = [self.wants(name + "_total" if rename else name) for name in allowed]
        starts: tuple[str, ...] | None = ()
        if not any(wanted):
            starts = tuple(f"\n{name}{end}" for end in "{ " for name in allowed)  # labelled lines first
        elif all(wanted) and not rename:
            starts = None
        if len(self.blocks) < _MAX_NAMES:
            self.blocks[key] = starts
        return starts


_PLANS: dict[object, _Plan] = {}


def _remember(keep: object, plan: _Plan) -> None:
    """Cache ``plan`` for ``keep`` (unless ``keep`` is unhashable), forgetting the oldest beyond :data:`_MAX_PLANS`."""
    try:
        if keep not in _PLANS and len(_PLANS) >= _MAX_PLANS:
            with contextlib.suppress(KeyError, RuntimeError, StopIteration):  # another thread got there first
                del _PLANS[next(iter(_PLANS))]
        _PLANS[keep] = plan
    except TypeError:  # unhashable
        pass


_NAME_RE: Final = re.compile(_NAME)
_TYPES: Final = frozenset(_TYPE_WORDS) | {"gaugehistogram"}


_Piece = tuple[int, int, int]
"""A part of the text to read, ``(start, body, end)``: ``text[start:end]`` is scanned when ``body`` is ``-1``;
else it is a block whose sample lines, ``text[body:end]``, are read directly (``text[start:body]``: its
headers)."""


def _kept_blocks(text: str, plan: _Plan) -> list[_Piece] | None:
    """``text`` without the families whose every sample ``keep`` rejects, as pieces (:data:`_Piece`) in page
    order; or ``None`` to scan ``text`` whole.

    The page is cut at its ``# HELP``/``# TYPE`` lines (found with ``str.find``, in C) into blocks, one per
    family (:meth:`_Plan.block` says how each is read). A block is dropped, its lines unread, when ``keep``
    rejects every sample name its family allows and ``str.count`` (in C) proves that each of its lines begins
    with one of those names followed by ``{`` or a space — no comment, blank line, indented line or sample of
    another name in it (else the block is kept: such a sample ends the family in ``prometheus_client`` and
    stands alone). A block whose every sample ``keep`` wants, in a family that does not rename its samples,
    with no comment among its lines, is read directly: its lines are samples whose final name is the name
    they are written with (``prometheus_client`` renames only a counter family's samples; a sample of
    another name stands alone, under its own name) or blank lines, so :func:`_read` takes them one by one
    without the scan's regex (and refuses what is not such a line). What is left parses exactly as the whole
    page filtered by ``keep``: each kept block begins with the header of a family no other block names, so
    ``prometheus_client``'s family state is reset there as it is on the whole page.

    ``None`` (scan the whole text as before) for a page with no block to drop, or with anything unusual in
    its headers: a family named by two blocks (interleaved, re-typed after samples), a header
    ``prometheus_client`` would reject or read otherwise (not a metric type, a bad name, ``#\\tTYPE``
    written as another comment, a counter named ``_total``).

    The dropped lines are not validated: a malformed line of a family ``keep`` rejects is not an error here
    (``prometheus_client`` would refuse the page).

    Example (``keep`` wants only ``a``)::

        # TYPE a gauge\\na 1\\n# TYPE b histogram\\nb_bucket{le="+Inf"} 2\\nb_count 2\\nb_sum 3\\n
        → [(0, 15, 19)]: the lines of ``a`` (``"a 1\\n"``) read directly, the histogram dropped
    """
    find = text.find
    count = text.count
    block = plan.block
    pieces: list[_Piece] = []
    scan_from = 0  # the start of the text not yet placed in ``pieces``
    cut = False  # a block dropped or read directly
    families: set[str] = set()
    family = ""  # the open block: its family, type, first line, first line after its headers
    typ = ""
    start = body = -1
    clean = True  # no other comment in the open block's body
    at = find("#")
    end = len(text)
    while True:
        if at == -1:
            at = line_end = end
        elif at and text[at - 1] != "\n":
            at = find("#", at + 1)
            continue
        else:
            line_end = find("\n", at)  # the text ends with "\n"
        header = at != end and (text.startswith("# HELP ", at) or text.startswith("# TYPE ", at))
        if at == end or header:
            if header:
                name_end = find(" ", at + 7, line_end)
                name = text[at + 7 : line_end if name_end == -1 else name_end]
                if text[at + 2] == "T":
                    new_typ = text[name_end + 1 : line_end] if name_end != -1 else ""
                    if new_typ not in _TYPES or (new_typ == "counter" and name == "_total"):
                        return None  # prometheus_client decides (an error)
                else:
                    new_typ = ""
                if name == family and body == at:  # HELP then TYPE (or TYPE then HELP) of one family
                    typ = new_typ or typ
                    body = line_end + 1
                    at = find("#", body)
                    continue
            # close the open block
            if start >= 0 and body < at and clean:
                starts = block(family, typ or "untyped")
                if starts is None:  # read directly
                    if scan_from < start:
                        pieces.append((scan_from, -1, start))
                    pieces.append((start, body, at))
                    scan_from, cut = at, True
                elif starts:
                    lines = count("\n", body, at)
                    for line_start in starts:  # disjoint: each counts distinct lines
                        lines -= count(line_start, body - 1, at - 1)
                        if lines <= 0:
                            break
                    if lines == 0:  # dropped
                        if scan_from < start:
                            pieces.append((scan_from, -1, start))
                        scan_from, cut = at, True
            if not header:
                break
            if name in families or _NAME_RE.fullmatch(name) is None:
                return None  # a family in two places, or a header prometheus_client reads otherwise
            families.add(name)
            family, typ, start, body, clean = name, new_typ, at, line_end + 1, True
            at = find("#", body)
            continue
        words = text[at:line_end].split(None, 2)
        if len(words) > 1 and words[1] in ("HELP", "TYPE"):
            return None  # "#\tTYPE x gauge" is a TYPE line to prometheus_client
        if start >= 0:
            clean = False
        at = find("#", line_end)
    if not cut:
        return None
    if scan_from < end:
        pieces.append((scan_from, -1, end))
    return pieces


@functools.lru_cache(maxsize=128)
def _scanner(kept: frozenset[str] | None, rejected: frozenset[str], counters: frozenset[str]) -> re.Pattern[str]:
    """The tier-1 scan: a regex whose ``findall`` tiles the text line by line, with 5 groups per match.

    Alternatives, tried in order at each line start:

    1. a sample of a kept name (``None``: any name but ``counters``) → 1 the series (the name and its label
       block, exactly as written: the key of :class:`_SeriesCache`); the value: 2 an integer or 3 another
       number;
    2. a run of lines producing nothing: lines beginning with a ``rejected`` name and ``{`` or a space (the
       rest of the line unread: ``[^\\n]*+`` runs at C speed, a validating tail at a third of it), valid
       ``# HELP``/``# TYPE`` lines (not of ``counters``), other comments, blank lines → no group;
    3. a counter block: the ``# HELP x``/``# TYPE x …`` lines (``x`` in ``counters``, at most 16) up to a
       ``# TYPE x counter`` with no sample between, and every following line ``prometheus_client`` keeps in
       that family (samples ``x``, ``# HELP x``, other comments, blank lines), not followed by another
       ``# TYPE x …`` → 4 the block, 5 ``x``;
    4. any other line → 4 the line with its ``"\\n"`` (a new name to learn, or text tier 1 does not prove).

    Example (kept ``{"a"}``, rejected ``{"b"}``)::

        # TYPE a gauge\\n      → ("", "", "", "", "")                (alternative 2, with the next line)
        b 2\\n
        a{x="1"} 3\\n          → ('a{x="1"}', "3", "", "", "")
        c 4\\n                 → ("", "", "", "c 4\\n", "")           (learn "c")
    """
    if kept is None:
        name = f"(?!(?:{_trie(sorted(counters))})[{{ ]){_NAME}" if counters else _NAME
    else:
        name = _trie(sorted(kept))
    skip = [_trie(sorted(rejected)) + r"[{ ][^\n]*+\n"] if rejected else []
    counter_trie = _trie(sorted(counters))
    skip += [_COMMENT_LINE.replace("{not_counter}", f"(?!{counter_trie}[ \\n])" if counters else ""), r"\n"]
    other = _OTHER.replace("{counters}", counter_trie)
    pattern = re.compile(rf"({name}{_SERIES_LABELS}){_KEPT_TAIL}|(?:{'|'.join(skip)})++|{other}")
    assert pattern.groups == _ROW_SIZE
    return pattern


@functools.lru_cache(maxsize=128)
def _line_scanner(kept: frozenset[str] | None, rejected: frozenset[str]) -> re.Pattern[str]:
    """The tier-1 scan of a plan without ``counters``: a regex whose ``findall`` tiles the text, 2 groups per
    match.

    Alternatives, tried in order at each line start:

    1. a run of lines beginning with a kept name (``None``: any name) and ``{`` or a space, the rest of each line
       unread (``[^\\n]*+``, a fast loop in C) → 1 the run, each line with its ``"\\n"``; :func:`_read` takes its
       lines and refuses what is not a sample;
    2. a run of lines producing nothing: lines beginning with a ``rejected`` name and ``{`` or a space (not read
       further), valid ``# HELP``/``# TYPE`` lines (no ``# TYPE x counter`` whose ``x`` lacks ``_total``: that
       renames samples, and the plan must learn it), other comments, blank lines → no group;
    3. any other line → 2 the line with its ``"\\n"`` (a new name to learn, or text tier 1 does not prove).

    A run of kept lines is one match, so a family's lines cost one ``findall`` step, not one each: the 62 KB
    vLLM 0.33 capture scans in 134 µs against 152 µs for a match per line, the 1.5 MB of kept families of
    ``bench/parse.py``'s 96-rank page in 2.3 ms against 4.1 ms.

    Example (kept ``{"a"}``, rejected ``{"b"}``)::

        # TYPE a gauge\\n      → ("", "")                             (alternative 2, with the next line)
        b 2\\n
        a{x="1"} 3\\n          → ('a{x="1"} 3\\na 4\\n', "")
        a 4\\n
        c 4\\n                 → ("", "c 4\\n")                        (learn "c")
    """
    name = _NAME if kept is None else _trie(sorted(kept))
    skip = [_trie(sorted(rejected)) + r"[{ ][^\n]*+\n"] if rejected else []
    skip += [_COMMENT_LINE.replace("{not_counter}", ""), r"\n"]
    pattern = re.compile(rf"((?:{name}[{{ ][^\n]*+\n)++)|(?:{'|'.join(skip)})++|([^\n]++\n)")
    assert pattern.groups == 2
    return pattern


_Node = dict[str, "_Node"]


def _trie(names: list[str]) -> str:
    """A regex alternation of ``names`` factored by common prefixes (so each line costs one walk).

    Example: ``["ab", "abc", "ad"]`` → ``a(?:b(?:c)?|d)``; ``[]`` → ``(?!)`` (matches nothing).
    """
    if not names:
        return "(?!)"
    root: _Node = {}
    for name in names:
        node = root
        for ch in name:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: _Node) -> str:
        branches = [re.escape(ch) + emit(child) for ch, child in sorted(node.items()) if ch]
        optional = "" in node
        if len(branches) == 1 and not optional:
            return branches[0]
        if not branches:
            return ""
        group = "(?:" + "|".join(branches) + ")"
        return group + "?+" if optional else group  # possessive: a name is followed by "{" or " "

    return emit(root)


# --- the series cache ------------------------------------------------------------------------------------


class FrozenLabels(dict[str, str]):
    """The labels of a sample read through :data:`SERIES_CACHE`: one object for every sample of one series, in
    every parse and every target, so it cannot be changed.

    A ``dict`` (``==`` a plain dict of the same pairs, printed and JSON-encoded as one, ``dict(labels)`` copies
    it) whose mutating methods raise ``TypeError``: a caller that edits a sample's labels would otherwise edit
    every later sample of that series. ``copy.copy``, ``copy.deepcopy`` and ``pickle`` give plain dicts.
    (``dict.__setitem__(labels, …)`` still writes: never do that.)

    Example: ``FrozenLabels({"engine": "0"})["engine"] = "1"`` → ``TypeError``.
    """

    __slots__ = ()

    def _refuse(self) -> NoReturn:
        raise TypeError("parsed sample labels are shared and read-only: copy them with dict(labels)")

    def __setitem__(self, key: str, value: str) -> NoReturn:
        self._refuse()

    def __delitem__(self, key: str) -> NoReturn:
        self._refuse()

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        self._refuse()

    def clear(self) -> NoReturn:
        self._refuse()

    def pop(self, *args: Any) -> NoReturn:
        self._refuse()

    def popitem(self) -> NoReturn:
        self._refuse()

    def setdefault(self, *args: Any) -> NoReturn:
        self._refuse()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def __reduce__(self) -> tuple[type[dict[str, str]], tuple[dict[str, str]]]:
        return dict, (dict(self),)

    def __copy__(self) -> dict[str, str]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, object]) -> dict[str, str]:
        return dict(self)


_SERIES_RE: Final = re.compile(rf"({_NAME})(?:\{{({_BODY})\}})?")


def _parse_series(series: str) -> tuple[str, FrozenLabels]:
    """A kept line's series text, checked and read once: ``(name, labels)``, every string interned (the samples of
    one name share one name, the series of one model one ``model_name`` value).

    Example: ``'vllm:num_requests_running{engine="0",model_name="m"}'`` →
    ``("vllm:num_requests_running", FrozenLabels({"engine": "0", "model_name": "m"}))``.

    Raises:
        Unrecognized: not ``name{pairs}`` as :data:`_BODY` reads it (``prometheus_client`` decides), or
            duplicate or reserved (``__…``) label names.
    """
    match = _SERIES_RE.fullmatch(series)
    if match is None:
        raise Unrecognized
    name, body = match.groups()
    if not body:
        return sys.intern(name), FrozenLabels()
    intern = sys.intern
    pairs = _PAIR_RE.findall(body)
    keys = list(map(intern, [k for k, _ in pairs]))
    if "\\" in body:
        labels = FrozenLabels(zip(keys, [intern(_ESCAPE_RE.sub(_unescape, v)) for _, v in pairs], strict=True))
    else:
        labels = FrozenLabels(zip(keys, map(intern, [v for _, v in pairs]), strict=True))
    if len(labels) != len(pairs) or ("__" in body and any(k.startswith("__") for k in labels)):
        raise Unrecognized  # prometheus_client rejects duplicate names; reserved ones it reads otherwise
    return intern(name), labels


SERIES_CACHE_ENTRIES: Final = 32_768
"""Series one generation of :data:`SERIES_CACHE` holds at most (two generations: twice this)."""
SERIES_CACHE_BYTES: Final = 12 << 20
"""Bytes one generation holds at most, counted as :func:`_entry_bytes` does (two generations: 24 MiB at most).

Why 12 MiB: the issue-15 fleet goal is under 100 KB of PSS per target at 10,000 targets (1 GB); 24 MiB is 2.4 KB
of it per target. One generation must hold the largest page's kept series, or every scrape of it would rotate
the cache: ``bench/parse.py``'s 96-rank vLLM page keeps 12,577 samples of 12,577 series, at 650 bytes each by
:func:`_entry_bytes` (8.2 MB; 400 B measured with ``tracemalloc``, its label values being shared), so one
generation holds it with room for about 6,000 more series; the entry bound (32,768) is never the one reached by
such series, it bounds a cache of tiny ones. A fleet whose distinct kept series exceed this (about 100 distinct
deployments of 130 vLLM series at 4 DP ranks... see docs/performance.md) rotates generations: series seen again
within a generation still hit, the others are parsed again (as if there were no cache)."""
_ENTRY_OVERHEAD: Final = 56 + 48
"""Bytes of an entry beyond its key and label dict: the ``(name, labels)`` tuple (56) and its slot in the
generation's dict (about 48: 8 of index and 24 of entry at a load of at most two thirds)."""


def _entry_bytes(series: str, labels: FrozenLabels) -> int:
    """What caching ``series`` costs, an over-estimate: the key, the label dict, each label value as if it were not
    shared with other series (interned, it often is), and :data:`_ENTRY_OVERHEAD`."""
    size = sys.getsizeof
    return size(series) + size(labels) + sum(map(size, labels.values())) + _ENTRY_OVERHEAD


class _SeriesCache:
    """Process-wide: series text (a kept line's ``name{labels}``, exactly as written) → its ``(name, labels)``.

    Prometheus's scrape cache keys each line's series text to the series it parsed before, so the same series
    at the next scrape skips label parsing (``scrape/scrape.go``, ``scrapeCache``). Here the key is shared
    across targets too: replicas of one model serve identical series text. Only text that
    :func:`_parse_series` accepted is stored, so a hit is a series already checked (and a line the scan's
    regex matched but whose series is new is checked on its first sight).

    Two generations bound it (a clock-free approximation of least-recently-used): a miss looks in ``old``,
    then parses, and stores in ``young``; when ``young`` is full (:data:`SERIES_CACHE_ENTRIES`,
    :data:`SERIES_CACHE_BYTES`), it becomes ``old`` and the former ``old`` is dropped. A series seen in each
    generation stays; one not seen for a whole generation is forgotten. A hit costs one dict look-up.

    No lock: scrape threads share it, and every step is one dict operation or one assignment, each atomic under
    CPython's GIL. An :meth:`add` racing a rotation can at worst store its entry in the generation being dropped
    (the series is parsed again at its next sight) or count its bytes against the new generation (a bound
    overshot by one entry). A stored value is always the parse of its own key, so results stay exact. (The
    parser is in the pure layer, which imports no threading: ``pyproject.toml``'s import contracts.)

    Attributes:
        young: the current generation.
        old: the previous one (read, never written).
        young_bytes: ``young``'s size as :func:`_entry_bytes` counts it.
    """

    __slots__ = ("old", "young", "young_bytes")

    def __init__(self) -> None:
        self.young: dict[str, tuple[str, FrozenLabels]] = {}
        self.old: dict[str, tuple[str, FrozenLabels]] = {}
        self.young_bytes = 0

    def add(self, series: str) -> tuple[str, FrozenLabels]:
        """``series``' entry after a miss in ``young``: from ``old``, else parsed; stored in ``young``.

        Raises:
            Unrecognized: as :func:`_parse_series` (nothing is stored).
        """
        entry = self.old.get(series)
        if entry is None:
            entry = _parse_series(series)
        size = _entry_bytes(series, entry[1])
        if size > SERIES_CACHE_BYTES:
            return entry
        if len(self.young) >= SERIES_CACHE_ENTRIES or self.young_bytes + size > SERIES_CACHE_BYTES:
            self.old, self.young, self.young_bytes = self.young, {}, 0
        self.young[series] = entry
        self.young_bytes += size
        return entry

    def clear(self) -> None:
        """Forget every series."""
        self.old, self.young, self.young_bytes = {}, {}, 0


SERIES_CACHE: Final = _SeriesCache()
"""The process's series cache (:class:`_SeriesCache`), used by every tier-1 scan."""


_new_object: Final = object.__new__
_set_name: Final = Sample.name.__set__  # type: ignore[attr-defined, misc]
_set_labels: Final = Sample.labels.__set__  # type: ignore[attr-defined, misc]
_set_value: Final = Sample.value.__set__  # type: ignore[attr-defined, misc]


class _Blank:
    """A mutable twin of :class:`~advisor.domain.Sample` (the same slots, in the same order): filled by plain
    attribute stores, then turned into the ``Sample`` by ``__class__`` assignment — the same object the
    frozen dataclass's ``__init__`` makes, at a third of its cost (no ``object.__setattr__`` calls).
    :data:`_BLANK_OK` checks at import that the layouts agree."""

    __slots__ = ("name", "labels", "value")  # noqa: RUF023 - as Sample declares them
    name: str
    labels: dict[str, str]
    value: float


def _blank_ok() -> bool:
    """Whether a filled :class:`_Blank` becomes a ``Sample`` equal to the one ``Sample(...)`` builds."""
    if getattr(Sample, "__slots__", None) != _Blank.__slots__:
        return False
    probe = _Blank()
    probe.name, probe.labels, probe.value = "x", {"a": "b"}, 1.5
    try:
        probe.__class__ = Sample  # type: ignore[assignment]
    except TypeError:  # "object layout differs"
        return False
    made: object = probe
    return type(made) is Sample and made == Sample("x", {"a": "b"}, 1.5)


_BLANK_OK: Final = _blank_ok()
"""The twin works (else tier 1 is off and ``prometheus_client`` parses everything: slow, still exact)."""


def _scan(text: str, plan: _Plan, pieces: list[_Piece] | None = None) -> tuple[dict[str, list[Sample]], list[str]]:
    """One tier-1 read of ``text`` (every line ending in ``"\\n"``), or of its ``pieces`` (:func:`_kept_blocks`):
    the kept samples, and the lines the plan could not place (``[]`` when the samples are the answer; else the
    samples are not read). A plan without ``counters`` reads with :func:`_read`; one with ``counters`` scans the
    pieces, headers included, as one text (:func:`_scan_rows`).

    Raises:
        Unrecognized: as :func:`_read` and :func:`_scan_rows`.
    """
    if plan.lines:
        return _read(text, plan, pieces)
    if pieces is not None:
        text = "".join([text[start:end] for start, _, end in pieces])
    return _scan_rows(text, plan)


def _read(text: str, plan: _Plan, pieces: list[_Piece] | None) -> tuple[dict[str, list[Sample]], list[str]]:
    """:func:`_scan` for a plan without ``counters``: the samples whose name ``keep`` accepts, by name in page
    order, and the lines refused.

    The lines read are those of the runs of kept lines :func:`_line_scanner`'s regex finds in the text or in
    each piece to scan (lines of other names it skips, or returns to learn: then no sample is read), and those
    of the blocks read directly, in page order.

    Each line is split at its last space into a series text and a value text. The line is taken at the cost of
    two dictionary look-ups when the series text is in :data:`SERIES_CACHE` (which holds only series texts
    :func:`_parse_series` checked: ``name`` or ``name{pairs}`` exactly as :data:`_BODY` reads them) and the value
    text is one this call has checked (``values``: a text of :data:`_NUM_CHARS` that ``float()`` takes, converted
    once per distinct text as ``prometheus_client`` converts it — bucket counts repeat: the vLLM 0.33 capture has
    30 distinct texts among its 132 kept values). Then the line is exactly ``series + " " + value``, a sample line
    ``prometheus_client`` reads as the cached name and labels and that number. Any other line (a timestamp, a
    series or a value not seen yet) must match :data:`_KEPT_LINE_RE` whole (its series is then checked into the
    cache), or it is refused: an exemplar, ``\\r``, two spaces, an indented comment (the caller learns the line
    or hands the text to tier 2). Blank lines are skipped, as ``prometheus_client`` skips them. A sample of a
    name ``keep`` rejects (in a block read directly, a sample of another family) gives nothing.

    Example (``keep`` wants ``a``): the lines ``a{x="1"} 3.0``, ``a{x="2"} 3.0 1700000000000``, a blank line and
    ``a{x="3"} 3.0 # {t="1"} 1`` → ``({"a": [Sample("a", {"x": "1"}, 3.0), Sample("a", {"x": "2"}, 3.0)]},
    ['a{x="3"} 3.0 # {t="1"} 1'])``.

    Raises:
        Unrecognized: a new series' labels are outside what this module proves (duplicate or reserved label
            names).
    """
    lines: list[str] = []
    refused: list[str] = []
    if pieces is None:
        pieces = [(0, -1, len(text))]
    for start, body, end in pieces:
        if body >= 0:
            lines += text[body : end - 1].split("\n")  # without the last line's "\n"
            continue
        for run, other in plan.findall(text, start, end):
            if run:
                lines += run.split("\n")
                lines.pop()  # "": after the last line's "\n"
            elif other:
                refused.append(other[:-1])
    if refused or not lines:
        return {}, refused
    out: dict[str, list[Sample]] = {}
    cached = SERIES_CACHE.young.get
    values: dict[str, float] = {}
    checked = values.get
    last = ""
    samples: list[Sample] = []
    for line in lines:
        series, _, v = line.rpartition(" ")
        entry = cached(series)
        value = checked(v)
        if entry is None or value is None:
            if not line:  # a blank line
                continue
            if entry is None:
                strict = _KEPT_LINE_RE.fullmatch(line)
                if strict is None:
                    refused.append(line)
                    continue
                series, v = strict.groups()
                entry = cached(series)
                if entry is None:
                    entry = SERIES_CACHE.add(series)
                    cached = SERIES_CACHE.young.get  # add() may have started a new generation
                value = checked(v)
            if value is None:  # a value text not seen in this read: read as prometheus_client reads it
                if v.strip(_NUM_CHARS):  # a character no number has (whitespace, "_", other scripts' digits)
                    refused.append(line)
                    continue
                if v.isdigit():  # prometheus_client tries int() first
                    try:
                        value = int(v)
                    except ValueError:  # more digits than int() converts; prometheus_client then uses float()
                        value = float(v)
                else:
                    try:
                        value = float(v)
                    except ValueError:  # not a number
                        refused.append(line)
                        continue
                    if v[0] in "+-" and v[1:].isdigit():
                        with contextlib.suppress(ValueError):  # else float(), as above
                            value = int(v)
                values[v] = value
        name, labels = entry
        if name is not last:  # names are interned: a run of one name (histogram buckets) checks it once
            wanted = plan.decided.get(name)
            if wanted is None:
                wanted = plan.wants(name)
            if not wanted:  # a sample of another family, in a block read directly
                continue
            last = name
            known = out.get(name)
            if known is None:
                known = out[name] = []
            samples = known
        filling: _Blank = _new_object(_Blank)
        filling.name = name
        filling.labels = labels
        filling.value = value
        filling.__class__ = Sample  # type: ignore[assignment]
        samples.append(filling)  # type: ignore[arg-type]
    return out, refused


def _scan_rows(text: str, plan: _Plan) -> tuple[dict[str, list[Sample]], list[str]]:
    """One tier-1 scan of ``text`` (every line ending in ``"\\n"``) with :func:`_scanner`'s regex, for a plan with
    ``counters``: the kept samples, and the lines the plan could not place (``[]`` when the samples are the
    answer).

    A kept line costs a dictionary look-up of its series text in :data:`SERIES_CACHE` (name and labels, parsed
    and checked the first time that text was seen), the value's conversion and the ``Sample``.

    Raises:
        Unrecognized: a kept sample's labels are outside what this module proves (duplicate or reserved label
            names, a label block only ``prometheus_client`` reads).
    """
    out: dict[str, list[Sample]] = {}
    unknown: list[str] = []
    new, blank, sample_type = _new_object, _Blank, Sample
    cache = SERIES_CACHE
    cached = cache.young.get
    last = ""
    samples: list[Sample] = []
    for series, iv, fv, other, counter in plan.findall(text):
        if series:
            entry = cached(series)
            if entry is None:
                entry = cache.add(series)
                cached = cache.young.get  # add() may have started a new generation
            name, labels = entry
            value: float
            if iv:
                try:
                    value = int(iv)
                except ValueError:  # more digits than int() converts; prometheus_client then uses float()
                    value = float(iv)
            else:
                value = float(fv)
            filling: _Blank = new(blank)
            filling.name = name
            filling.labels = labels
            filling.value = value
            filling.__class__ = sample_type  # type: ignore[assignment]
            sample: Sample = filling  # type: ignore[assignment]
            if name is last:  # histogram buckets and other runs of one name (names are interned)
                samples.append(sample)
            else:
                last = name
                known = out.get(name)
                if known is None:
                    samples = out[name] = [sample]
                else:
                    samples = known
                    samples.append(sample)
        elif counter:
            final = counter + "_total"
            if plan.wants(final):
                bodies: dict[str, dict[str, str]] = {}
                renamed = [_sample(final, _labels(b, bodies), _value(v)) for b, v in _BLOCK_SAMPLE_RE.findall(other)]
                if renamed:
                    out.setdefault(final, []).extend(renamed)
                    last = ""
        elif other:
            unknown.append(other[:-1])
    return out, unknown


def _tier2(text: str, keep: Callable[[str], bool] | None) -> dict[str, list[Sample]]:
    """Line by line, replaying ``text_fd_to_metric_families``' family state to rename counter samples.

    State: the current family name, its type and its allowed sample names. A ``# HELP``/``# TYPE`` of another
    name starts a family; a sample whose name the family does not allow ends it (and stands alone, never
    renamed). Members of a ``counter`` family whose name lacks ``_total`` are renamed ``<name>_total``.

    Example::

        # TYPE tgi_request_count counter
        tgi_request_count 7          → Sample("tgi_request_count_total", {}, 7)
        tgi_queue_size 2             → Sample("tgi_queue_size", {}, 2)     (ends the family)
    """
    out: dict[str, list[Sample]] = {}
    decisions: dict[str, bool] = {}
    label_cache: dict[str, dict[str, str]] = {}
    family = ""
    allowed: tuple[str, ...] = ()
    rename = False
    family_has_samples = False
    pos = 0
    end = len(text)
    for m in _LINE_RE.finditer(text):
        if m.start() != pos:
            raise Unrecognized
        pos = m.end()
        name, body, raw_value, kind, candidate, rest = m.groups()
        if name is not None:
            if name in allowed:
                family_has_samples = True
                final = name + "_total" if rename else name
            else:
                family, allowed, rename, family_has_samples = "", (), False, False
                final = name
            labels = _labels(body, label_cache)  # every line's labels are checked, kept or not
            wanted = decisions.get(final)
            if wanted is None:
                wanted = decisions[final] = keep is None or keep(final)
            if wanted:
                out.setdefault(final, []).append(_sample(final, labels, _value(raw_value)))
        elif kind == "HELP":
            if candidate != family:
                family, allowed, rename, family_has_samples = candidate, (candidate,), False, False
        elif kind == "TYPE":
            typ = (rest or "").rstrip()
            if _TYPE_WORD_RE.fullmatch(typ) is None:
                raise Unrecognized  # prometheus_client: "Invalid metric type"
            if typ == "counter" and candidate == "_total":
                raise Unrecognized  # its family would be named "": prometheus_client rejects it
            if candidate != family:
                family, family_has_samples = candidate, False
            elif family_has_samples:
                raise Unrecognized  # re-typed after samples: prometheus_client renames them retroactively
            allowed = _allowed(family, typ)
            rename = typ == "counter" and not family.endswith("_total")
        if pos >= end:
            break
    if pos < end:
        raise Unrecognized
    return out


def _allowed(family: str, typ: str) -> tuple[str, ...]:
    """Sample names a family of this type may hold (``text_fd_to_metric_families``' ``allowed_names``).

    Example: ``("ttft", "histogram") → ("ttft_count", "ttft_sum", "ttft_bucket")``; a counter or a gauge
    allows only its own name.
    """
    if typ == "histogram":
        return (family + "_count", family + "_sum", family + "_bucket")
    if typ == "summary":
        return (family + "_count", family + "_sum", family)
    return (family,)


def _labels(body: str, cache: dict[str, dict[str, str]]) -> dict[str, str]:
    """Label set of ``name{body}``, unescaped; a fresh dict per sample (the parse of a body is cached).

    Example: ``engine="0",model_name="a\\"b"`` → ``{"engine": "0", "model_name": 'a"b'}``.

    Raises:
        Unrecognized: duplicate or reserved (``__…``) label names, which ``prometheus_client`` rejects.
    """
    if not body:
        return {}
    parsed = cache.get(body)
    if parsed is None:
        pairs = _PAIR_RE.findall(body)
        parsed = dict(pairs)
        if len(parsed) != len(pairs) or ("__" in body and any(k.startswith("__") for k in parsed)):
            raise Unrecognized
        if "\\" in body:
            parsed = {k: _ESCAPE_RE.sub(_unescape, v) if "\\" in v else v for k, v in parsed.items()}
        cache[body] = parsed
    return dict(parsed)


def _sample(name: str, labels: dict[str, str], value: float) -> Sample:
    """``Sample(name, labels, value)`` at half the cost: the frozen dataclass's ``__init__`` goes through
    ``object.__setattr__`` three times; its slot descriptors are set directly instead (same object)."""
    sample: Sample = _new_object(Sample)
    _set_name(sample, name)
    _set_labels(sample, labels)
    _set_value(sample, value)
    return sample


def _unescape(match: re.Match[str]) -> str:
    return _ESCAPES[match.group(0)]


def _value(token: str) -> float:
    """A sample value as ``prometheus_client`` reads it: ``int`` when ``int()`` accepts it, else ``float``.

    Example: ``"5" → 5``, ``"5.0" → 5.0``, ``"+Inf" → inf``, ``"NaN" → nan``.
    """
    if token.isdigit() or (token[0] in "+-" and token[1:].isdigit()):
        try:
            return int(token)
        except ValueError:  # more digits than int() converts; prometheus_client then uses float()
            return float(token)
    return float(token)
