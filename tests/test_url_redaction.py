"""A URL that fails validation is never echoed with its credentials or query (scheme-less ``user:pw@host`` too)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from advisor.config import check_http_url
from tests.conftest import REPO_ROOT

BAD_URLS = [
    "admin:SEKRITPW@127.0.0.1:18801/metrics?token=SEKRITQ",
    "user:SEKRITPW@127.0.0.1:18801/x?token=SEKRITQ",
    "http:/admin:SEKRITPW@127.0.0.1/metrics",
    "admin:SEKRITPW@host",
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "advisor.cli", *args], capture_output=True, text=True, timeout=60, cwd=REPO_ROOT
    )


@pytest.mark.parametrize("url", BAD_URLS)
def test_the_validation_error_names_the_url_without_its_credentials(url: str) -> None:
    with pytest.raises(ValueError, match="http") as err:
        check_http_url(url)
    assert "SEKRIT" not in str(err.value)


def test_check_config_and_inspect_never_print_the_password_of_a_scheme_less_target(tmp_path: Path) -> None:
    config = tmp_path / "advisor.yaml"
    config.write_text(
        "deployments:\n"
        "  - name: bad\n"
        "    engine: vllm\n"
        f'    targets: ["{BAD_URLS[0]}"]\n'
        "    model: meta-llama/Llama-3.1-8B-Instruct\n"
        "    gpu: H100-SXM\n"
        "    max_model_len: 8192\n"
    )
    r = _cli("check-config", str(config))
    assert r.returncode != 0
    assert "targets" in r.stdout + r.stderr and "127.0.0.1:18801/metrics" in r.stdout + r.stderr
    assert "SEKRIT" not in r.stdout + r.stderr
    r = _cli("inspect", BAD_URLS[1])
    assert r.returncode == 2
    assert "127.0.0.1:18801/x" in r.stderr and "SEKRIT" not in r.stdout + r.stderr


def test_a_receiver_path_word_is_not_scrubbed_from_its_own_error_text_but_a_token_is() -> None:
    """Breaker 24: a receiver at ``…/redirect`` had "redirect" scrubbed everywhere, so its 307 error read "the receiver
    <redacted>s to …, and <redacted>s are not followed". A path segment is a secret when it looks like a token (8+
    characters with a digit or both cases, or 16+), as Slack's ``/services/T0A1B2C3D/B4E5F6G7H/…`` segments do."""
    from advisor.notify.receivers import WebhookReceiver

    plain = WebhookReceiver("ops", "http://127.0.0.1:9/redirect").secrets()
    assert "redirect" not in plain
    slack = WebhookReceiver("ops", "https://hooks.example/services/T0A1B2C3D/B4E5F6G7H/abcdefghijklmnopqrstuvwx")
    secrets = slack.secrets()
    assert {"T0A1B2C3D", "B4E5F6G7H", "abcdefghijklmnopqrstuvwx"} <= set(secrets) and "services" not in secrets
