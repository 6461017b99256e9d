"""A selective parser for the Prometheus text format's sample lines, agreeing with ``prometheus_client``.

:func:`advisor.sources.exposition.parse_exposition` calls :func:`parse_selected` first and falls back to
``prometheus_client.parser.text_string_to_metric_families`` whenever it raises :class:`Unrecognized`. The
result must be *exactly* what the full parse gives (same sample names, labels, values, order), so this
module only accepts text whose every line it can prove ``prometheus_client`` would read the same way:

* **Tier 1** (the fleet path, ~10–25× the full parse): the whole text is checked by one strict regex in C
  (:data:`_TEXT_RE`: each line is blank, ``# HELP name …``, ``# TYPE name type``, another comment, or
  ``name{l="v",…} value [timestamp]`` with single spaces, no surrounding whitespace and no exemplar).
  Then the distinct sample names are collected, ``keep`` is asked once per name, and one regex built from
  the kept names (a trie, cached per name set) pulls out only the kept lines: rejected families are
  skipped by the regex engine without creating a Python object per line.
* **Tier 2** (exact line loop): text tier 1 does not accept — surrounding whitespace, ``\\r\\n``,
  exemplars (``… 1.0 # {trace_id="a"} 0.5``), or a counter ``# TYPE x counter`` whose name lacks
  ``_total`` (``prometheus_client`` renames such samples to ``x_total`` while they stay in their family,
  a state machine tier 1 does not run) — is walked line by line with the same checks, replaying
  ``prometheus_client``'s family state (``text_fd_to_metric_families``) to rename exactly the samples it
  renames.
* Anything else (quoted UTF-8 names, ``__name__`` labels, duplicate or reserved label names, tabs as
  separators, odd comments such as ``# HELP`` without a name, values ``float()`` rejects) raises
  :class:`Unrecognized`, and ``prometheus_client`` decides — including whether the text is an error.

One known difference, on invalid text only: in tier 1, a line of a family ``keep`` rejects is checked for
shape but not for duplicate label names (``x{a="1",a="2"} 1``), which ``prometheus_client`` rejects; the
kept lines are checked. Reserved ``__`` label names send the text to tier 2, which checks every line.

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
``# EOF``, ``# UNIT …``, blank lines     ignored
=====================================  ===============================================================
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Final

from advisor.domain import Sample


class Unrecognized(Exception):  # noqa: N818 - a signal to fall back, not an error the caller sees
    """The text has a construct this parser does not prove equivalent; use ``prometheus_client``."""


# --- grammar ---------------------------------------------------------------------------------------------
_NAME: Final = r"[a-zA-Z_:][a-zA-Z0-9_:]*+"
_LNAME: Final = r"[a-zA-Z_][a-zA-Z0-9_]*+"
_LVAL: Final = r'"[^"\\\n]*+(?:\\.[^"\\\n]*+)*+"'
_PAIR: Final = _LNAME + "=" + _LVAL
_BODY: Final = rf"(?:{_PAIR}(?:,{_PAIR})*+,?)?"
# What float()/int() accept in ASCII, minus underscores (prometheus_client rejects them).
_NUM: Final = (
    r"[+-]?(?:(?:[0-9]++\.?[0-9]*+|\.[0-9]++)(?:[eE][+-]?[0-9]++)?"
    r"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?|[nN][aA][nN])"
)
# A timestamp (or an exemplar's last token) is divided by 1000: keep integers short enough never to overflow.
_TS: Final = r"[+-]?(?:[0-9]{1,30}+(?:\.[0-9]*+)?(?:[eE][+-]?[0-9]++)?|\.[0-9]++(?:[eE][+-]?[0-9]++)?)"
_HELP: Final = rf"# HELP {_NAME}(?: [^\n]*+)?"
_TYPE: Final = rf"# TYPE {_NAME} [a-z]++"
_SEP: Final = r"[ \t\r\x0b\x0c]"  # prometheus_client splits comments on string.whitespace only
_OTHER_COMMENT: Final = rf'#[^ \t\r\x0b\x0c"\n]*+(?:{_SEP}++(?!(?:HELP|TYPE)(?:\s|\Z))[^\n]*+)?'

_TIER1_SAMPLE: Final = rf"{_NAME}(?:\{{{_BODY}\}})? {_NUM}(?: {_TS})?"
# Tier 1 refuses a counter whose name lacks _total (its samples get renamed: tier 2's business).
_TIER1_TYPE: Final = rf"# TYPE {_NAME} (?:(?<=_total )counter|(?!counter(?![a-z]))[a-z]++)"
_TIER1_LINE: Final = rf"(?:{_TIER1_SAMPLE}|{_HELP}|{_TIER1_TYPE}|{_OTHER_COMMENT})?"
_TEXT_RE: Final = re.compile(rf"{_TIER1_LINE}(?:\n{_TIER1_LINE})*+")
"""Tier 1: the whole text, every line strictly in the common form."""

_NAMES_RE: Final = re.compile(r"\n([a-zA-Z_:][a-zA-Z0-9_:]*+)(?=[{ ])[^\n]*+(?:\n\1(?=[{ ])[^\n]*+)*+")
"""The sample name of each run of sample lines sharing a name (run on ``"\\n" + text``)."""

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
_TYPE_WORD_RE: Final = re.compile(r"[a-z]++")


def parse_selected(text: str, keep: Callable[[str], bool] | None) -> dict[str, list[Sample]]:
    """Samples of ``text`` whose (final) name ``keep`` accepts, keyed by sample name, in exposition order.

    Args:
        text: Prometheus text format 0.0.4.
        keep: predicate on sample names, assumed pure (asked once per distinct name); ``None`` keeps all.

    Returns:
        Exactly what flattening ``text_string_to_metric_families(text)`` and filtering by ``keep`` gives.

    Raises:
        Unrecognized: the text is outside what this parser proves equivalent (see the module docstring).
    """
    if _TEXT_RE.fullmatch(text) is not None and "{__" not in text and ",__" not in text:
        return _tier1(text, keep)
    return _tier2(text, keep)


def _tier1(text: str, keep: Callable[[str], bool] | None) -> dict[str, list[Sample]]:
    """Kept lines only, pulled out by a regex of the kept names (the text is already validated).

    Example: ``keep`` accepts ``vllm:num_requests_running`` only::

        # TYPE vllm:num_requests_running gauge
        vllm:num_requests_running{engine="0",model_name="m"} 3.0
        vllm:num_requests_waiting{engine="0",model_name="m"} 1.0
        → {"vllm:num_requests_running": [Sample("vllm:num_requests_running",
                                                {"engine": "0", "model_name": "m"}, 3.0)]}
    """
    framed = "\n" + text + "\n"
    names = set(_NAMES_RE.findall(framed))
    kept = frozenset(names) if keep is None else frozenset([n for n in names if keep(n)])
    out: dict[str, list[Sample]] = {}
    if not kept:
        return out
    label_cache: dict[str, dict[str, str]] = {}
    for name, body, raw_value in _extractor(kept).findall(framed):
        sample = _sample(name, _labels(body, label_cache), _value(raw_value))
        bucket = out.get(name)
        if bucket is None:
            out[name] = [sample]
        else:
            bucket.append(sample)
    return out


@functools.lru_cache(maxsize=256)
def _extractor(names: frozenset[str]) -> re.Pattern[str]:
    """A regex matching, after a newline, exactly the sample lines of ``names``; groups: name, labels, value.

    Example: ``{"a_count", "a_sum"}`` → ``\\n(a_(?:count|sum))(?:\\{(…labels…)\\})? (…number…)``.
    """
    return re.compile(rf"\n({_trie(sorted(names))})(?:\{{([^\n]*)\}})? ({_NUM})(?: {_TS})?(?=\n)")


_Node = dict[str, "_Node"]


def _trie(names: list[str]) -> str:
    """A regex alternation of ``names`` factored by common prefixes (so each line costs one walk).

    Example: ``["ab", "abc", "ad"]`` → ``a(?:b(?:c)?|d)``.
    """
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
        return group + "?" if optional else group

    return emit(root)


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
                raise Unrecognized
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


_new_object: Final = object.__new__
_set_name: Final = Sample.name.__set__  # type: ignore[attr-defined, misc]
_set_labels: Final = Sample.labels.__set__  # type: ignore[attr-defined, misc]
_set_value: Final = Sample.value.__set__  # type: ignore[attr-defined, misc]


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
