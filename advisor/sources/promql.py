"""PromQL text the Prometheus source sends: label-matcher lists checked and re-rendered, metric-name regexes.

PURE: standard library only. A deployment is chosen by a label-matcher list as an operator writes it in
PromQL (``job="vllm",namespace="prod"``); the source never pastes that text into a query. It parses it
into :class:`LabelMatcher` values and renders them again, so nothing but label matchers can reach the
server (``job="a"} or vector(1) or {x="`` is rejected, not sent).

Examples::

    parse_selector('job="vllm", namespace=~"prod|canary"')
        → (LabelMatcher("job", "=", "vllm"), LabelMatcher("namespace", "=~", "prod|canary"))
    parse_selector('{job="vllm",}')      → (LabelMatcher("job", "=", "vllm"),)   braces and a trailing comma
    parse_selector('job=vllm')           → ValueError: at 4: expected a quoted value after job=
    names_regex(["vllm:num_requests_running", "up"])  → 'up|vllm:num_requests_running'
    vector_selector(parse_selector('job="vllm"'), ["up", "vllm:x"])
        → '{__name__=~"up|vllm:x",job="vllm"}'

Strings follow PromQL (Go) syntax: double or single quotes with backslash escapes (``\\n``, ``\\"``,
``\\xhh``, ``\\uhhhh`` …), or back-quoted raw strings. Regex values are RE2, checked by the server (a bad one
comes back as an HTTP 400 ``bad_data``); the source does not try to emulate RE2.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

METRIC_NAME_RE: Final = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
"""A legacy (pre-UTF-8) Prometheus metric name; every engine's families are of this form."""

LABEL_NAME_RE: Final = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
"""A legacy Prometheus label name."""

MATCH_OPS: Final = ("=~", "!~", "!=", "=")
"""Label-matcher operators, longest first so ``=~`` is not read as ``=``."""

_SIMPLE_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    '"': '"',
    "'": "'",
}
_RE2_META: Final = frozenset("\\.+*?()|[]{}^$")


@dataclass(frozen=True, slots=True)
class LabelMatcher:
    """One PromQL label matcher: ``name op "value"``.

    Attributes:
        name: the label name (``job``).
        op: ``=``, ``!=``, ``=~`` or ``!~``.
        value: the decoded value (regexes for ``=~``/``!~``, fully anchored by Prometheus).
    """

    name: str
    op: str
    value: str

    def render(self) -> str:
        """The matcher as PromQL text, value double-quoted and escaped."""
        return f"{self.name}{self.op}{quote(self.value)}"


def quote(value: str) -> str:
    """A PromQL double-quoted string literal for ``value`` (``a"b`` → ``"a\\"b"``)."""
    out = ['"']
    for ch in value:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def parse_selector(text: str) -> tuple[LabelMatcher, ...]:
    """Parse a PromQL label-matcher list, with or without the surrounding braces.

    Args:
        text: ``job="vllm",namespace="prod"`` (whitespace and a trailing comma allowed).

    Returns:
        The matchers in the order written.

    Raises:
        ValueError: empty, not a matcher list, a bad label name, operator or string, or a ``__name__``
            matcher (metric names come from the engine adapter, the selector only picks targets). The
            message names the character position (from 1) and what was expected there.
    """
    if not isinstance(text, str):
        raise ValueError(f"selector must be a string, got {type(text).__name__}")
    s = text.strip()
    if s.startswith("{"):
        if not s.endswith("}"):
            raise ValueError(f"selector {text!r}: opening '{{' without a closing '}}'")
        s = s[1:-1]
    matchers: list[LabelMatcher] = []
    i, n = 0, len(s)

    def where() -> str:
        return f"selector {text!r} at {i + 1}"

    while True:
        while i < n and s[i].isspace():
            i += 1
        if i >= n:
            break
        m = LABEL_NAME_RE.match(s, i)
        if m is None:
            raise ValueError(f"{where()}: expected a label name such as job, found {s[i : i + 10]!r}")
        name = m.group(0)
        if name == "__name__":
            raise ValueError(
                f"{where()}: __name__ is not allowed; the selector picks targets and the engine adapter "
                "chooses the metric names"
            )
        i = m.end()
        while i < n and s[i].isspace():
            i += 1
        op = next((o for o in MATCH_OPS if s.startswith(o, i)), None)
        if op is None:
            raise ValueError(f"{where()}: expected one of = != =~ !~ after {name}")
        i += len(op)
        while i < n and s[i].isspace():
            i += 1
        if i >= n or s[i] not in "\"'`":
            raise ValueError(f"{where()}: expected a quoted value after {name}{op}")
        value, i = _read_string(s, i, text)
        matchers.append(LabelMatcher(name, op, value))
        while i < n and s[i].isspace():
            i += 1
        if i >= n:
            break
        if s[i] != ",":
            raise ValueError(f"{where()}: expected ',' between matchers, found {s[i]!r}")
        i += 1
    if not matchers:
        raise ValueError(f'selector {text!r} has no label matcher; name the deployment\'s targets, e.g. job="vllm"')
    return tuple(matchers)


def _read_string(s: str, i: int, text: str) -> tuple[str, int]:
    """Decode the PromQL string literal starting at ``s[i]``; return it and the index after it."""
    q = s[i]
    start = i
    i += 1
    if q == "`":
        end = s.find("`", i)
        if end < 0:
            raise ValueError(f"selector {text!r} at {start + 1}: unterminated `raw string`")
        return s[i:end], end + 1
    out: list[str] = []
    while i < len(s):
        ch = s[i]
        if ch == q:
            return "".join(out), i + 1
        if ch == "\n":
            break
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        if i + 1 >= len(s):
            break
        e = s[i + 1]
        if e in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[e])
            i += 2
            continue
        digits = {"x": 2, "u": 4, "U": 8}.get(e)
        if digits is not None:
            hexpart = s[i + 2 : i + 2 + digits]
            if len(hexpart) != digits or not all(c in "0123456789abcdefABCDEF" for c in hexpart):
                raise ValueError(f"selector {text!r} at {i + 1}: bad \\{e} escape")
            code = int(hexpart, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise ValueError(f"selector {text!r} at {i + 1}: \\{e}{hexpart} is not a character")
            out.append(chr(code))
            i += 2 + digits
            continue
        octal = s[i + 1 : i + 4]
        if len(octal) == 3 and all(c in "01234567" for c in octal) and int(octal, 8) < 256:
            out.append(chr(int(octal, 8)))
            i += 4
            continue
        raise ValueError(f"selector {text!r} at {i + 1}: unknown escape \\{e}")
    raise ValueError(f"selector {text!r} at {start + 1}: unterminated string")


def render_selector(matchers: Sequence[LabelMatcher]) -> str:
    """Matchers back to PromQL text, without braces (``job="vllm",namespace="prod"``)."""
    return ",".join(m.render() for m in matchers)


def validate_selector(text: str) -> str:
    """The canonical form of a selector (as :func:`render_selector` writes it); ``ValueError`` when invalid.

    Meant for configuration checks: call it where a deployment's ``selector`` is read so a bad one is
    reported with every other invalid field, before the loop starts.
    """
    return render_selector(parse_selector(text))


def re2_escape(literal: str) -> str:
    """Escape RE2 metacharacters so ``literal`` matches itself (``a.b`` → ``a\\.b``)."""
    return "".join("\\" + ch if ch in _RE2_META else ch for ch in literal)


def names_regex(names: Iterable[str]) -> str:
    """An RE2 alternation matching exactly ``names`` (sorted, de-duplicated, each escaped).

    Raises:
        ValueError: no names, or a name that is not a valid metric name.
    """
    unique = sorted(set(names))
    if not unique:
        raise ValueError("no metric names to select")
    bad = [n for n in unique if not METRIC_NAME_RE.fullmatch(n)]
    if bad:
        raise ValueError(f"not valid metric names: {bad[:5]}")
    return "|".join(re2_escape(n) for n in unique)


def vector_selector(matchers: Sequence[LabelMatcher], names: Iterable[str]) -> str:
    """``{__name__=~"<names>",<matchers>}``: every series of ``names`` on the selected targets."""
    rendered = [LabelMatcher("__name__", "=~", names_regex(names)).render()]
    rendered += [m.render() for m in matchers]
    return "{" + ",".join(rendered) + "}"


def match_selector(matchers: Sequence[LabelMatcher]) -> str:
    """``{__name__=~".+",<matchers>}`` for ``match[]`` parameters (series and label-value look-ups).

    The ``__name__`` matcher keeps the selector valid when every one of ``matchers`` matches the empty
    string (``namespace=~".*"``), which Prometheus rejects on its own.
    """
    return "{" + ",".join([LabelMatcher("__name__", "=~", ".+").render(), *(m.render() for m in matchers)]) + "}"
