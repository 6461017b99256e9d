"""Redaction of secrets in URLs before they reach logs, labels, the API or the status page.

Receiver and target URLs can carry credentials (``https://user:token@host/``) or tokens in the path
or query (Slack incoming webhooks, ``?api_key=``). As Alertmanager's notifiers do, nothing but the
scheme, host and port of a secret URL is ever shown.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from collections.abc import Iterable
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

REDACTED: Final = "<redacted>"
"""The one placeholder that stands for a secret in messages, logs and reprs."""

_AUTH_HEADER_RE: Final = re.compile(r"\b(Basic|Bearer)\s+[A-Za-z0-9._~+/=-]{4,}", re.IGNORECASE)
_USERINFO_RE: Final = re.compile(r"(://)[^\s/?#@\"'<>]+@")
"""User-info of any URL quoted in a text (``https://user:token@host``)."""
MIN_SECRET_CHARS: Final = 4
"""A query value or user name shorter than this is not scrubbed on its own (``?page=2`` would blank every ``2``);
it is still scrubbed as part of the whole query string."""
_QUERY_RE: Final = re.compile(r"(?<=[^\s?])\?(?=[^\s=?#\"'<>&]+=)[^\s#\"'<>]*")
"""A query string of ``name=value`` pairs after a URL or a request path (``/hook?token=…``), in any text."""


def url_secrets(url: str) -> tuple[str, ...]:
    """The parts of ``url`` that are secrets: userinfo (and its Basic-auth base64 form), user name and password (as
    written and percent-decoded, as they are sent), query, each query value of at least :data:`MIN_SECRET_CHARS`
    characters (as sent and decoded: a body may echo the key alone, ``invalid apikey S3CRET``) and fragment. ``()``
    for an unparseable URL.

    >>> url_secrets("http://alice:pw@h/m?token=x&key=hunter2")
    ('token=x&key=hunter2', 'pw', 'hunter2', 'alice:pw', 'alice', 'YWxpY2U6cHc=')
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return ()
    # requests sends the user and password percent-decoded (requests.utils.get_auth_from_url): a body may echo them so
    secrets = [parts.query, parts.fragment, parts.password or "", unquote(parts.password or "")]
    for _, value in parse_qsl(parts.query, keep_blank_values=True):
        if len(value) >= MIN_SECRET_CHARS:
            secrets.append(value)
    for raw in parts.query.split("&"):
        value = raw.partition("=")[2]
        if len(value) >= MIN_SECRET_CHARS and value not in secrets:
            secrets.append(value)
    if "@" in parts.netloc:
        userinfo = parts.netloc.rsplit("@", 1)[0]
        secrets.append(userinfo)
        if parts.username and len(parts.username) >= MIN_SECRET_CHARS:
            secrets.append(parts.username)
        if parts.username and len(unquote(parts.username)) >= MIN_SECRET_CHARS:
            secrets.append(unquote(parts.username))
        # a body that echoes the request headers carries the credentials base64-encoded (Basic auth)
        secrets.append(base64.b64encode(unquote(userinfo).encode()).decode())
    return tuple(dict.fromkeys(s for s in secrets if s))


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret (longest first), every ``Basic``/``Bearer`` credential, and the user-info and
    ``name=value`` query string of every URL or request path it quotes replaced by :data:`REDACTED`: an error body
    may echo a URL or a credential the caller never knew (a proxy's upstream, another client's token).

    >>> scrub("echo Bearer abcdefgh12 and token=x", ["token=x"])
    'echo Bearer <redacted> and <redacted>'
    >>> scrub("denied https://bob:pw@relay/hook?token=t0 for GET /x?api_key=k1&a=b")
    'denied https://<redacted>@relay/hook?<redacted> for GET /x?<redacted>'
    """
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    text = _USERINFO_RE.sub(rf"\1{REDACTED}@", text)
    text = _QUERY_RE.sub(f"?{REDACTED}", text)
    return _AUTH_HEADER_RE.sub(rf"\1 {REDACTED}", text)


_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
"""C0/C1 control characters (ESC, BEL, CR, LF, …) and the Unicode line/paragraph separators."""

OUTSIDE_TEXT_CHARS: Final = 300
"""Default bound on how much outside text (an error body, a parser's complaint) a message quotes, characters."""


def escape_controls(text: str) -> str:
    r"""``text`` with every control character written as a Python escape (``\x1b``, ``\n``): terminal escapes
    and line breaks from outside never reach a terminal or forge a log line.

    >>> escape_controls("a\x1b]0;pwned\x07\nb")
    'a\\x1b]0;pwned\\x07\\nb'
    """
    return _CONTROL_RE.sub(lambda m: repr(m.group())[1:-1], text)


def outside_text(text: str, secrets: Iterable[str] = (), limit: int = OUTSIDE_TEXT_CHARS) -> str:
    r"""Text that came from outside (a page body, a parser's complaint quoting it, an error body) made safe to
    quote in a message: secrets scrubbed (:func:`scrub`), control characters escaped (:func:`escape_controls`)
    and the result cut to ``limit`` characters (ending in ``…`` when cut).

    >>> outside_text("<html>GET /x?api_key=k Basic YWRtaW46aHVudGVyMg==\x1b[2J</html>")
    '<html>GET /x?<redacted> Basic <redacted>\\x1b[2J</html>'
    """
    text = escape_controls(scrub(text, secrets))
    if len(text) > limit:
        text = text[: max(limit - 1, 0)] + "…"
    return text


def target_message(url: str, message: str | None) -> str | None:
    r"""A target's error message (which may quote its page: a parser's complaint, a model label) made safe to show
    beside it: the URL's secrets (:func:`url_secrets`) and any credential scrubbed (:func:`scrub`), control
    characters escaped. ``None`` stays ``None``.

    >>> target_message("http://h/m?apikey=S3CRET", 'Invalid labels: "invalid apikey S3CRET"\nforged')
    'Invalid labels: "invalid apikey <redacted>"\\nforged'
    """
    return None if message is None else escape_controls(scrub(message, url_secrets(url)))


def redact_url(url: str) -> str:
    """Drop user-info, the query string and the fragment; keep scheme, host, port and path.

    >>> redact_url("http://u:p@h:9/metrics?token=x")
    'http://h:9/metrics'

    Unparseable input, and input with no ``//`` authority (a scheme-less ``user:pw@host/path``, where
    ``urlsplit`` takes ``user`` for the scheme), keeps what lies between the last ``@`` and the first ``?`` or
    ``#``.

    >>> redact_url("admin:pw@127.0.0.1:9/metrics?token=x")
    '127.0.0.1:9/metrics'
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        parts = None
    if parts is None or not parts.netloc:
        cut = url.split("?", 1)[0].split("#", 1)[0]
        return cut.rsplit("@", 1)[-1]
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


_INET_PART: Final = re.compile(r"0x[0-9a-f]+|[0-9]+")
"""One part of a dotted IPv4 address as ``inet_aton`` reads it (lower-cased)."""


def _inet_aton(host: str) -> int | None:
    """``host`` read as the C library's ``inet_aton`` reads an IPv4 address (what the resolver sends to): one to four
    dot-separated numbers, decimal, octal (``0``-led) or hex (``0x``), the last filling the bytes left (``127.1`` is
    127.0.0.1, ``2130706433`` too); ``None`` when it is not one."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    values: list[int] = []
    for part in parts:
        low = part.lower()
        if _INET_PART.fullmatch(low) is None:
            return None
        try:
            values.append(
                int(low, 16) if low.startswith("0x") else int(low, 8) if len(low) > 1 and low[0] == "0" else int(low)
            )
        except ValueError:  # an 8 or 9 in an octal part
            return None
    last_bits = 8 * (5 - len(values))
    if any(v > 255 for v in values[:-1]) or values[-1] >> last_bits:
        return None
    address = 0
    for v in values[:-1]:
        address = (address << 8) | v
    return (address << last_bits) | values[-1]


def _ip_text(host: str) -> str:
    """An IP address host in one spelling (``0:0:0:0:0:0:0:1`` → ``::1``, ``127.1`` → ``127.0.0.1``, as the
    resolver reads them; an IPv4-mapped IPv6 address, ``::ffff:127.0.0.1``, as its IPv4 address: a dual-stack
    socket reaches the same engine through either, RFC 4291 §2.5.5.2); any other host unchanged."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        return (mapped or ip).compressed
    if host and host[0].isdigit():
        address = _inet_aton(host)
        if address is not None:
            return str(ipaddress.IPv4Address(address))
    return host


def _plain_path(path: str) -> str:
    """A URL path as a server routes it: percent-escapes of unreserved characters decoded (``/metric%73`` is
    ``/metrics``: RFC 3986 §6.2.2.2), ``.`` and ``..`` segments removed (§5.2.4, as ``requests`` sends them), trailing
    slashes dropped."""
    path = _UNRESERVED_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), path)
    out: list[str] = []
    for segment in path.split("/"):
        if segment == "..":
            if len(out) > 1:
                out.pop()
        elif segment != ".":
            out.append(segment)
    return "/".join(out).rstrip("/")


_UNRESERVED_ESCAPE: Final = re.compile(r"%(2[DdEe]|3[0-9]|[46][1-9A-Fa-f]|[57][0-9Aa]|5[Ff]|7[Ee])")
"""A percent-escape of an unreserved character (letters, digits, ``-``, ``.``, ``_``, ``~``): the same URL decoded."""


def endpoint_key(url: str) -> str:
    """The engine a target URL reaches, for telling two targets apart: :func:`redact_url`'s form (no credentials, no
    query) with the scheme and host lower-cased, an IP address in one spelling, the scheme's default port written
    out, the path as a server routes it (unreserved escapes decoded, dot segments removed) and trailing slashes
    dropped. Two URLs with the same key are one target to the advisor, which labels each by that form: ``/metrics``
    and ``/metrics/`` are one page (vLLM's FastAPI ``Mount("/metrics")`` answers both), and listing both counts one
    engine twice.

    >>> endpoint_key("HTTP://Engine-0:80/metrics/")
    'http://engine-0:80/metrics'
    >>> endpoint_key("https://u:p@h/metrics?x=1") == endpoint_key("https://h:443/metrics")
    True
    >>> endpoint_key("http://127.1:9/a/../metric%73") == endpoint_key("http://127.0.0.1:9/./metrics")
    True
    >>> endpoint_key("http://[0:0:0:0:0:0:0:1]:9/metrics")
    'http://[::1]:9/metrics'
    """
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port
    except ValueError:
        return redact_url(url)
    if not parts.netloc:
        return redact_url(url)
    scheme = parts.scheme.lower()
    port = port if port is not None else _DEFAULT_PORTS.get(scheme)
    host = _ip_text(host)
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return urlunsplit((scheme, netloc, _plain_path(parts.path), "", ""))


def redact_secret_url(url: str) -> str:
    """For URLs that are secrets as a whole (webhook receivers): scheme, host and port only.

    >>> redact_secret_url("https://hooks.slack.com/services/T0/B0/XXXX")
    'https://hooks.slack.com/<redacted>'
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "<unparseable url>"
    netloc = f"[{host}]" if ":" in host else host
    if port is not None:
        netloc += f":{port}"
    return f"{parts.scheme}://{netloc}/{REDACTED}"


class _Urllib3RequestLineFilter:
    """Replaces the request target in urllib3's debug line (``"POST /path?query HTTP/1.1"``) with
    ``<redacted>``: paths and queries of webhook URLs are secrets."""

    def filter(self, record: object) -> bool:
        import logging

        if isinstance(record, logging.LogRecord) and isinstance(record.args, tuple) and len(record.args) >= 5:
            args = list(record.args)
            if isinstance(args[4], str) and args[4].startswith("/"):
                args[4] = REDACTED
                record.args = tuple(args)
        return True


_FILTER = _Urllib3RequestLineFilter()


def install_urllib3_redaction() -> None:
    """Attach the request-line filter to urllib3's connection-pool logger (idempotent)."""
    import logging

    logger = logging.getLogger("urllib3.connectionpool")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
