"""Receiver configuration: one validated pydantic model per receiver, defaults in one place.

A receiver reads like this in the config file::

    receivers:
      - {name: ops, type: webhook, url: "http://127.0.0.1:9099/hook", hmac_secret_file: /etc/advisor/hmac}
      - {name: chat, type: slack, url_env: SLACK_WEBHOOK_URL, rate_limit_per_minute: 20}
      - {name: am, type: alertmanager, url: "http://alertmanager:9093", resend_interval: 1m}

Secrets — the URL (Slack and many webhooks carry their token in it), the HMAC key and a bearer token — are given
inline, from a file (``*_file``, trailing white space stripped, as Alertmanager's ``url_file`` and
``credentials_file``) or from an environment variable (``*_env``). They are never shown: the model's repr omits
them, validation errors never echo them (``hide_input_in_errors``), and everything else shows a URL only through
:func:`advisor.redact.redact_secret_url`.

Relative ``*_file`` paths are taken from ``base_dir`` (the config file's folder), passed either as pydantic
validation context ``{"base_dir": Path}`` or to the ``resolved_*`` methods.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, ValidationInfo, model_validator
from pydantic import field_validator as _field_validator

from advisor.files import read_text_capped
from advisor.notify.payload import DEFAULT_GROUP_BY, GROUPABLE_LABELS

if TYPE_CHECKING:
    from advisor.notify.notifier import MetricsCallback, Notifier


def _duration(value: object) -> float:
    # Imported when called, not at import time: advisor.config imports this module.
    from advisor.config import parse_duration

    return parse_duration(value)


Duration = Annotated[float, BeforeValidator(_duration)]

RECEIVER_TYPES = ("webhook", "slack", "alertmanager")


def _check_secret_url(url: str, where: str) -> str:
    from advisor.config import check_http_url

    try:
        check_http_url(url)
    except ValueError:
        raise ValueError(
            f"{where} must be an http(s) URL with a host and a valid port (value of length {len(url)} not shown: "
            "receiver URLs are secrets)"
        ) from None
    return url


def read_secret(
    value: str | None, file: str | None, env: str | None, what: str, base_dir: Path | None = None
) -> str | None:
    """The secret given inline, in a file or in an environment variable (at most one is set), or ``None``.

    Raises:
        ValueError: the file is unreadable or empty, or the variable is unset or empty. The message names the
            file or the variable, never the secret.
    """
    if value is not None:
        return value
    if file is not None:
        path = Path(file).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            text = read_text_capped(path, 64 * 1024).strip()
        except OSError as exc:
            raise ValueError(f"{what}_file: cannot read {str(path)!r}: {exc.strerror or type(exc).__name__}") from None
        except UnicodeDecodeError:
            raise ValueError(f"{what}_file: {str(path)!r} is not UTF-8 text") from None
        if not text:
            raise ValueError(f"{what}_file: {str(path)!r} is empty")
        return text
    if env is not None:
        text = os.environ.get(env, "").strip()
        if not text:
            raise ValueError(f"{what}_env: environment variable {env!r} is not set or empty")
        return text
    return None


class ReceiverConfig(BaseModel):
    """One notification receiver: where it is, how its secrets are found, and how delivery behaves.

    Delivery (the outbox, :mod:`advisor.notify.outbox`): every accepted notification is kept until the receiver
    acknowledges it with a 2xx, in order; 5xx, 429, connection errors and timeouts are retried with exponential
    backoff (``backoff_seconds`` doubling up to ``max_backoff_seconds``, each wait jittered to 50–100 %); any
    other answer (4xx, 3xx) fails the notification at once with the response body in the error. A notification
    not delivered within ``retention`` is dropped and counted.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, hide_input_in_errors=True)

    name: str = Field(min_length=1, max_length=128, description="unique; labels the advisor's notification metrics")
    type: Literal["webhook", "slack", "alertmanager"] = Field(
        default="webhook",
        description=(
            "webhook: Alertmanager-v4-shaped JSON (optionally HMAC-signed); slack: an incoming webhook with Block "
            "Kit blocks; alertmanager: Alertmanager's API v2 (url is its base URL; alerts go to /api/v2/alerts)"
        ),
    )
    url: str | None = Field(default=None, repr=False, description="secret: never logged in full")
    url_file: str | None = Field(default=None, description="a file holding the URL (relative to the config file)")
    url_env: str | None = Field(default=None, description="an environment variable holding the URL")
    hmac_secret: SecretStr | None = Field(
        default=None,
        repr=False,
        description="webhook only: sign each body; header X-Advisor-Signature: sha256=<hex HMAC-SHA256 of the body>",
    )
    hmac_secret_file: str | None = None
    hmac_secret_env: str | None = None
    bearer_token: SecretStr | None = Field(
        default=None, repr=False, description="sent as Authorization: Bearer <token>"
    )
    bearer_token_file: str | None = None
    bearer_token_env: str | None = None
    send_resolved: bool = Field(default=True, description="also notify when a recommendation resolves")
    group_by: tuple[str, ...] = Field(
        default=DEFAULT_GROUP_BY,
        description="webhook: the alerts of one cycle whose labels named here agree go in one POST (one body, "
        "as Alertmanager's group_by); labels: " + ", ".join(GROUPABLE_LABELS),
    )
    timeout_seconds: Duration = Field(
        default=10.0,
        description="one deadline over the whole HTTP request: connecting, sending, status line, headers and body",
    )
    max_attempts: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="give up on a notification (counted failed) after this many attempts; default: keep trying "
        "until retention expires",
    )
    backoff_seconds: Duration = Field(default=1.0, description="first retry delay; doubles per attempt")
    max_backoff_seconds: Duration = Field(default=60.0, description="retry delays never exceed this")
    rate_limit_per_minute: float | None = Field(
        default=None,
        gt=0,
        le=60_000,
        description="at most this many requests per minute (a token bucket of that many); excess waits, "
        "never dropped; default unlimited",
    )
    retention: Duration = Field(
        default=86_400.0, description="a notification not delivered within this long is dropped and counted"
    )
    resend_interval: Duration = Field(
        default=60.0,
        description="alertmanager: active alerts are re-sent this often with endsAt = the last evaluation cycle + "
        "4 × max(this, the cycle gap) (Prometheus's --rules.alert.resend-delay); webhook: a firing alert's endsAt is "
        "its cycle + 4 × this (the body is not re-sent); slack: unused (a message is never repeated, has no endsAt)",
    )

    @_field_validator("url")
    @classmethod
    def _check_url(cls, url: str | None) -> str | None:
        return None if url is None else _check_secret_url(url, "url")

    @model_validator(mode="after")
    def _check_sources(self, info: ValidationInfo) -> ReceiverConfig:
        given = [f for f in ("url", "url_file", "url_env") if getattr(self, f) is not None]
        if len(given) != 1:
            raise ValueError(f"set exactly one of url, url_file, url_env (got {', '.join(given) or 'none'})")
        for what in ("hmac_secret", "bearer_token"):
            given = [f for f in (what, f"{what}_file", f"{what}_env") if getattr(self, f) is not None]
            if len(given) > 1:
                raise ValueError(f"set at most one of {what}, {what}_file, {what}_env (got {', '.join(given)})")
        unknown = [g for g in self.group_by if g not in GROUPABLE_LABELS]
        if unknown or len(set(self.group_by)) != len(self.group_by) or not self.group_by:
            raise ValueError(
                f"group_by must name distinct alert labels among {', '.join(GROUPABLE_LABELS)} "
                f"(got {list(self.group_by)})"
            )
        if self.type != "webhook" and self.has_hmac:
            raise ValueError(f"hmac_secret applies to type webhook only, not {self.type}")
        if self.backoff_seconds > self.max_backoff_seconds:
            raise ValueError(
                f"backoff_seconds ({self.backoff_seconds:g}) must not exceed max_backoff_seconds "
                f"({self.max_backoff_seconds:g})"
            )
        ctx = info.context if isinstance(info.context, dict) else {}
        base_dir = ctx.get("base_dir")
        base = Path(base_dir) if isinstance(base_dir, str | Path) else None
        # Secrets from files and variables are read now, so check-config reports a missing one.
        self.resolved_url(base)
        self.resolved_hmac_secret(base)
        self.resolved_bearer_token(base)
        return self

    @property
    def has_hmac(self) -> bool:
        """Whether a signing key is configured (in any of its three forms)."""
        return any(x is not None for x in (self.hmac_secret, self.hmac_secret_file, self.hmac_secret_env))

    def resolved_url(self, base_dir: Path | None = None) -> str:
        """The receiver URL from ``url``, ``url_file`` or ``url_env``.

        Raises:
            ValueError: the file or variable is missing or does not hold a valid URL (never echoed).
        """
        url = read_secret(self.url, self.url_file, self.url_env, "url", base_dir)
        if url is None:  # pragma: no cover - excluded by validation
            raise ValueError("set exactly one of url, url_file, url_env")
        where = "url" if self.url is not None else ("url_file" if self.url_file is not None else "url_env")
        return _check_secret_url(url, where)

    def resolved_hmac_secret(self, base_dir: Path | None = None) -> bytes | None:
        """The HMAC key as UTF-8 bytes, or ``None`` when signing is off."""
        inline = self.hmac_secret.get_secret_value() if self.hmac_secret is not None else None
        secret = read_secret(inline, self.hmac_secret_file, self.hmac_secret_env, "hmac_secret", base_dir)
        return secret.encode() if secret is not None else None

    def resolved_bearer_token(self, base_dir: Path | None = None) -> str | None:
        """The bearer token, or ``None``."""
        inline = self.bearer_token.get_secret_value() if self.bearer_token is not None else None
        token = read_secret(inline, self.bearer_token_file, self.bearer_token_env, "bearer_token", base_dir)
        if token is not None and any(ch.isspace() for ch in token):
            raise ValueError("bearer_token must not contain white space")
        return token


def build_notifier(
    receivers: list[ReceiverConfig],
    outbox_dir: Path | None,
    metrics_callback: MetricsCallback | None = None,
    **kwargs: Any,
) -> Notifier:
    """Build the :class:`~advisor.notify.notifier.Notifier` for these receivers (see
    :func:`advisor.notify.notifier.build_notifier`, which this forwards to)."""
    from advisor.notify.notifier import build_notifier as _build

    return _build(receivers, outbox_dir, metrics_callback, **kwargs)
