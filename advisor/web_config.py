"""``--web.config.file``: TLS and basic auth for everything the advisor serves, in the Prometheus
exporter-toolkit format (``prometheus/exporter-toolkit``, ``docs/web-configuration.md``)::

    tls_server_config:
      cert_file: server.crt        # relative paths are taken from the web config file's folder
      key_file: server.key
      client_auth_type: NoClientCert   # or RequireAndVerifyClientCert / VerifyClientCertIfGiven
      client_ca_file: ca.crt           # needed with the two above
      min_version: TLS12               # TLS10 … TLS13
    basic_auth_users:
      alice: $2y$10$…                  # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':\\n')

As the exporter toolkit does, the file is re-read when it changes (its modification time, looked at on
each request), so certificates can be rotated without a restart. A re-read fails closed: a file that is
unreadable, invalid or empty, or that would switch TLS or basic auth off, is refused and the running
configuration kept (TLS and basic auth stay on), with the reason logged and counted
(:attr:`WebConfigSource.reload_failures`); turning them off takes a restart. Passwords are checked with
bcrypt, one check at a time (as the exporter toolkit's ``bcryptMtx`` in ``web/handler.go``), so clients
with wrong passwords cost at most one core; a successful check is cached for :data:`AUTH_CACHE_SECONDS`
(keyed by a SHA-256 of user, hash and password; at most :data:`AUTH_CACHE_SIZE` entries, failures never
stored, so they cannot push a scraper's entry out) so a scraper does not pay bcrypt's cost on every
request, and an unknown user is checked against a dummy hash so response time does not reveal which
users exist.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
import os
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from advisor.config import load_yaml, yaml_problem
from advisor.errors import ConfigError
from advisor.files import read_text_capped

log = logging.getLogger(__name__)

_CLIENT_AUTH = {
    "NoClientCert": ssl.CERT_NONE,
    "RequestClientCert": ssl.CERT_NONE,
    "RequireAnyClientCert": None,  # not expressible with the ssl module: refused with a reason
    "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
    "RequireAndVerifyClientCert": ssl.CERT_REQUIRED,
}
_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
_TLS_KEYS = {"cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"}
_TOP_KEYS = {"tls_server_config", "basic_auth_users", "http_server_config"}
AUTH_CACHE_SECONDS = 60.0
"""Seconds a successful basic-auth check is remembered (a scraper every 15 s pays bcrypt once a minute)."""
AUTH_CACHE_SIZE = 256
"""Successful checks remembered at most (the oldest is forgotten first)."""
_DUMMY_HASH = b"$2b$10$dEnr9XHkGa3M0ZerE7dfoO0NQC8LszqX/qmPhnIUo/IBgGmQBfOyG"


@dataclass(frozen=True)
class WebConfig:
    """A loaded web config: an SSL context (``None``: plain HTTP) and bcrypt hashes by user."""

    ssl_context: ssl.SSLContext | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def basic_auth(self) -> bool:
        """Whether every request needs basic auth."""
        return bool(self.users)


def _bcrypt() -> Any:
    try:
        import bcrypt
    except ImportError:  # pragma: no cover - the dependency is declared
        raise ConfigError(
            [("basic_auth_users", "checking bcrypt hashes needs the bcrypt package (pip install bcrypt)")]
        ) from None
    return bcrypt


def load_web_config(path: str | Path) -> WebConfig:
    """Read and check a web config file; relative file names are taken from its folder.

    Raises:
        ConfigError: naming every problem found (unreadable file, unknown key, bad hash, certificate that
            does not load).
    """
    p = Path(path)
    try:
        data = load_yaml(read_text_capped(p))
    except OSError as exc:
        raise ConfigError([("web.config.file", f"cannot read {str(p)!r}: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError:
        raise ConfigError([("web.config.file", f"{str(p)!r} is not UTF-8 text")]) from None
    except RecursionError:
        raise ConfigError([("web.config.file", f"{str(p)!r} is not YAML: nested too deeply")]) from None
    except yaml.YAMLError as exc:
        where, problem = yaml_problem(exc)
        raise ConfigError([("web.config.file", f"{str(p)!r} {where}: {problem}")]) from None
    if data is None:
        return WebConfig()
    if not isinstance(data, dict):
        raise ConfigError([("web.config.file", "must be a mapping with tls_server_config and/or basic_auth_users")])
    problems: list[tuple[str, str]] = [
        (str(k), f"unknown key; known: {', '.join(sorted(_TOP_KEYS))}") for k in data if k not in _TOP_KEYS
    ]
    base = p.parent
    ctx = _tls(data.get("tls_server_config"), base, problems)
    users = _users(data.get("basic_auth_users"), problems)
    headers = _headers(data.get("http_server_config"), problems)
    if problems:
        raise ConfigError(problems)
    return WebConfig(ctx, users, headers)


def _file(base: Path, name: Any, where: str, problems: list[tuple[str, str]]) -> Path | None:
    if not isinstance(name, str) or not name:
        problems.append((where, "must be a file name"))
        return None
    f = Path(name).expanduser()
    f = f if f.is_absolute() else base / f
    if not f.is_file():
        problems.append((where, f"no such file: {str(f)!r}"))
        return None
    return f


def _tls(tls: Any, base: Path, problems: list[tuple[str, str]]) -> ssl.SSLContext | None:
    if tls is None:
        return None
    if not isinstance(tls, dict):
        problems.append(("tls_server_config", "must be a mapping with cert_file and key_file"))
        return None
    for k in tls:
        if k not in _TLS_KEYS:
            problems.append(
                (f"tls_server_config.{k}", f"unknown or unsupported key; known: {', '.join(sorted(_TLS_KEYS))}")
            )
    if "cert_file" not in tls or "key_file" not in tls:
        problems.append(("tls_server_config", "needs both cert_file and key_file"))
        return None
    cert = _file(base, tls["cert_file"], "tls_server_config.cert_file", problems)
    key = _file(base, tls["key_file"], "tls_server_config.key_file", problems)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    for k, attr in (("min_version", "minimum_version"), ("max_version", "maximum_version")):
        if k in tls:
            v = _TLS_VERSIONS.get(str(tls[k]))
            if v is None:
                problems.append((f"tls_server_config.{k}", f"one of {', '.join(_TLS_VERSIONS)}"))
            else:
                setattr(ctx, attr, v)
    auth = str(tls.get("client_auth_type", "NoClientCert"))
    if auth not in _CLIENT_AUTH:
        problems.append(("tls_server_config.client_auth_type", f"one of {', '.join(_CLIENT_AUTH)}"))
    elif _CLIENT_AUTH[auth] is None:
        problems.append(
            ("tls_server_config.client_auth_type", f"{auth} is not supported; use RequireAndVerifyClientCert")
        )
    else:
        mode = _CLIENT_AUTH[auth]
        assert mode is not None
        if mode != ssl.CERT_NONE:
            ca = _file(base, tls.get("client_ca_file"), "tls_server_config.client_ca_file", problems)
            if ca is not None:
                try:
                    ctx.load_verify_locations(cafile=str(ca))
                except (ssl.SSLError, OSError) as exc:
                    problems.append(("tls_server_config.client_ca_file", f"does not load: {exc}"))
            ctx.verify_mode = mode
    if cert is not None and key is not None:
        try:
            ctx.load_cert_chain(str(cert), str(key))
        except (ssl.SSLError, OSError) as exc:
            problems.append(("tls_server_config", f"certificate and key do not load together: {exc}"))
    return ctx


def _users(users: Any, problems: list[tuple[str, str]]) -> dict[str, bytes]:
    if users is None:
        return {}
    if not isinstance(users, dict):
        problems.append(("basic_auth_users", "must map user names to bcrypt hashes"))
        return {}
    out: dict[str, bytes] = {}
    for user, h in users.items():
        where = f"basic_auth_users.{user}"
        if not isinstance(user, str) or not user or ":" in user:
            problems.append((where, "a user name must be a non-empty string without ':'"))
            continue
        if not isinstance(h, str) or not h.startswith(("$2a$", "$2b$", "$2y$")) or len(h) != 60:
            problems.append((where, "must be a bcrypt hash ($2y$…, 60 characters), never a plain password"))
            continue
        out[user] = h.encode()
    if out:
        _bcrypt()
    return out


def _headers(cfg: Any, problems: list[tuple[str, str]]) -> dict[str, str]:
    if cfg is None:
        return {}
    if not isinstance(cfg, dict):
        problems.append(("http_server_config", "must be a mapping"))
        return {}
    out: dict[str, str] = {}
    for k, v in cfg.items():
        if k == "headers" and isinstance(v, dict):
            for name, value in v.items():
                if not isinstance(name, str) or not isinstance(value, str) or "\n" in name + value:
                    problems.append((f"http_server_config.headers.{name}", "must be a single-line string"))
                else:
                    out[name] = value
        else:
            problems.append((f"http_server_config.{k}", "unsupported; only headers is"))
    return out


class WebConfigSource:
    """The current :class:`WebConfig` of a file, re-read when its modification time changes.

    Raises (constructor):
        ConfigError: the file does not load at start (the daemon should then refuse to start).
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = None if path is None else Path(path)
        self._lock = threading.Lock()
        self._mtime = self._stat()
        self._current = WebConfig() if self.path is None else load_web_config(self.path)
        self._auth_cache: OrderedDict[bytes, float] = OrderedDict()
        self._bcrypt_lock = threading.Lock()
        self.reload_failures = 0
        """Re-reads refused since start (the running configuration was kept)."""
        self.last_reload_ok = True
        """Whether the last re-read was taken (True before any)."""

    def _stat(self) -> float | None:
        if self.path is None:
            return None
        try:
            return os.stat(self.path).st_mtime_ns / 1e9
        except OSError:
            return None

    def current(self) -> WebConfig:
        """The configuration in force (re-read first if the file changed; kept if the change is invalid)."""
        if self.path is None:
            return self._current
        mtime = self._stat()
        with self._lock:
            if mtime != self._mtime:
                self._mtime = mtime
                try:
                    if mtime is None:  # removed (or moved aside while it is rewritten): seen once, kept
                        raise ConfigError(
                            [("web.config.file", f"{str(self.path)!r} is gone")], source="web.config.file"
                        )
                    new = load_web_config(self.path)
                    _no_lowering(self._current, new, self.path)
                except ConfigError as exc:
                    self.reload_failures += 1
                    self.last_reload_ok = False
                    log.error(
                        "web config %s changed but is refused; keeping the running one (TLS %s, basic auth %s): %s",
                        self.path,
                        "on" if self._current.ssl_context is not None else "off",
                        "on" if self._current.basic_auth else "off",
                        exc,
                    )
                else:
                    self._current = new
                    self.last_reload_ok = True
                    self._auth_cache.clear()
                    log.info("web config %s reloaded", self.path)
            return self._current

    def check_basic_auth(self, cfg: WebConfig, header: str | None) -> str | None:
        """The user name when ``header`` (an ``Authorization`` value) carries valid credentials, else None."""
        if not header or header[:6].lower() != "basic ":
            return None
        try:
            raw = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return None
        user, sep, password = raw.partition(":")
        if not sep:
            return None
        known = cfg.users.get(user)
        h = known if known is not None else _DUMMY_HASH
        key = hashlib.sha256(b"\x00".join((user.encode(), h, password.encode()))).digest()
        now = time.monotonic()
        with self._lock:
            until = self._auth_cache.get(key)
            ok = until is not None and now < until
        if not ok:
            with self._bcrypt_lock:  # one bcrypt check at a time
                try:
                    ok = bool(_bcrypt().checkpw(password.encode(), h)) and known is not None
                except ValueError:
                    ok = False
            if ok:
                with self._lock:
                    self._auth_cache[key] = time.monotonic() + AUTH_CACHE_SECONDS
                    self._auth_cache.move_to_end(key)
                    while len(self._auth_cache) > AUTH_CACHE_SIZE:
                        self._auth_cache.popitem(last=False)
        return user if ok and hmac.compare_digest(h, cfg.users.get(user, b"")) else None


def _no_lowering(running: WebConfig, new: WebConfig, path: Path) -> None:
    """Refuse a re-read that would lower security: TLS or basic auth on now, off in ``new`` (an emptied or
    truncated file loads as "no TLS, no auth"). The exporter toolkit fails closed the same way: its TLS
    handshakes and auth checks fail while the file does not give them.

    Raises:
        ConfigError: naming what would be switched off.
    """
    off: list[tuple[str, str]] = []
    if running.ssl_context is not None and new.ssl_context is None:
        off.append(("tls_server_config", "TLS is on and the file no longer configures it"))
    if running.basic_auth and not new.basic_auth:
        off.append(("basic_auth_users", "basic auth is on and the file no longer lists a user"))
    if off:
        empty = " (the file is empty)" if new == WebConfig() else ""
        raise ConfigError(
            [
                (k, f"{why}{empty}; a re-read never switches TLS or auth off: restart the advisor to do it")
                for k, why in off
            ],
            source="web.config.file",
        )
