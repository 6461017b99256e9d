"""Webhook sender: POSTs the Alertmanager-shaped body, retrying 5xx and connection errors with
exponential backoff, never 4xx (the receiver rejected the body; retrying cannot help — as
Alertmanager's ``notify.RetryStage`` treats them). The URL is a secret: logs and errors show only its
scheme, host and port.

Delivery runs on one worker thread per receiver, in order, so a slow receiver never blocks the
evaluation loop. ``flush`` waits for the queue to drain (used at shutdown).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from advisor.redact import install_urllib3_redaction, redact_secret_url

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    """What happened to one notification: ``sent``, ``failed`` (4xx or out of attempts)."""

    outcome: str
    attempts: int
    status_code: int | None
    error: str | None


class WebhookSender:
    """Delivers JSON bodies to one webhook URL in order, on its own thread."""

    def __init__(
        self,
        name: str,
        url: str,
        timeout_seconds: float = 10.0,
        max_attempts: int = 5,
        backoff_seconds: float = 1.0,
        on_outcome: Callable[[str, DeliveryOutcome], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``on_outcome(receiver_name, outcome)`` is called after each notification settles."""
        install_urllib3_redaction()
        self.name = name
        self._url = url
        self.safe_url = redact_secret_url(url)
        self.timeout = timeout_seconds
        self.max_attempts = max_attempts
        self.backoff = backoff_seconds
        self._on_outcome = on_outcome
        self._sleep = sleep
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._session = requests.Session()
        self._thread = threading.Thread(target=self._run, name=f"webhook-{name}", daemon=True)
        self._thread.start()

    def submit(self, body: dict[str, Any]) -> None:
        """Queue a body for delivery (returns at once)."""
        self._queue.put(body)

    def flush(self, timeout: float = 30.0) -> bool:
        """Wait until every queued body settled; ``False`` if ``timeout`` seconds passed first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._queue.unfinished_tasks == 0:
                return True
            time.sleep(0.02)
        return self._queue.unfinished_tasks == 0

    def close(self, timeout: float = 30.0) -> None:
        """Flush, then stop the worker."""
        self.flush(timeout)
        self._queue.put(None)
        self._thread.join(timeout=5)
        self._session.close()

    def _run(self) -> None:
        while True:
            body = self._queue.get()
            try:
                if body is None:
                    return
                outcome = self.deliver(body)
                if self._on_outcome is not None:
                    self._on_outcome(self.name, outcome)
            except Exception:  # a sender must never die: log and go on with the next body
                log.exception("webhook %s: unexpected error delivering to %s", self.name, self.safe_url)
            finally:
                self._queue.task_done()

    def deliver(self, body: dict[str, Any]) -> DeliveryOutcome:
        """POST ``body`` with retries; blocking. Returns the outcome (never raises for HTTP trouble)."""
        data = json.dumps(body).encode()
        status: int | None = None
        error: str | None = None
        for attempt in range(1, self.max_attempts + 1):
            try:
                resp = self._session.post(
                    self._url, data=data, headers={"Content-Type": "application/json"}, timeout=self.timeout
                )
                status = resp.status_code
                if 200 <= status < 300:
                    log.info("webhook %s: delivered %s to %s", self.name, body.get("status"), self.safe_url)
                    return DeliveryOutcome("sent", attempt, status, None)
                snippet = resp.text[:200]
                error = f"HTTP {status}: {snippet}"
                if 400 <= status < 500:
                    log.warning(
                        "webhook %s: %s rejected the notification (%s); not retrying", self.name, self.safe_url, error
                    )
                    return DeliveryOutcome("failed", attempt, status, error)
            except requests.RequestException as exc:
                status = None
                error = type(exc).__name__
            if attempt < self.max_attempts:
                delay = self.backoff * (2 ** (attempt - 1))
                log.warning(
                    "webhook %s: attempt %d to %s failed (%s); retrying in %.1fs",
                    self.name,
                    attempt,
                    self.safe_url,
                    error,
                    delay,
                )
                self._sleep(delay)
        log.error(
            "webhook %s: giving up on %s after %d attempts (%s)", self.name, self.safe_url, self.max_attempts, error
        )
        return DeliveryOutcome("failed", self.max_attempts, status, error)
