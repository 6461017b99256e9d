"""Issue 13, notifications operators can route, through the real daemon (``capacity-advisor run`` in a
subprocess) against a stand-in vLLM on loopback and a real webhook receiver:

* ``--web.external-url`` reaches every body's ``externalURL`` and every alert's ``generatorURL`` (the
  deployment's section of the status page);
* ``runbook_base_url`` in the config replaces the runbook's default prefix;
* the alerts one cycle opens for a deployment arrive in one POST (grouped by deployment);
* the receiver's first answer is a 503: the retry carries the same alerts and keys, and
  ``advisor_notifications_total`` counts it as ``resent`` while ``sent`` counts each transition once.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from advisor.cli import external_url_arg, main
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import REPO_ROOT, Receiver

RAMP = (
    Phase("idle", 2, 0.05, 2, 0, 1.0, 1000, 200, 0, 0.1, 0.02),
    Phase("saturated", 5, 0.99, 50, 40, 2.0, 1000, 200, 2.0, 0.4, 0.04),
    Phase("recovered", 10_000, 0.3, 20, 0, 2.0, 1000, 200, 0, 0.1, 0.02),
)
EXTERNAL = "https://advisor.example.internal/capacity"
WIKI = "https://wiki.example.internal/ops/advisor-runbook"


@pytest.fixture
def standin() -> Iterator[StandInServer]:
    srv = StandInServer(StandInEngine(phases=RAMP, speed=1.0, num_gpu_blocks=1000))
    srv.start_background()
    yield srv
    srv.shutdown()
    srv.server_close()


def _metric(url: str, name: str, **labels: str) -> float | None:
    text = requests.get(url + "/metrics", timeout=5).text
    for line in text.splitlines():
        named = line.startswith(name + "{") or line.startswith(name + " ")
        if named and all(f'{k}="{v}"' in line for k, v in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


def _transitions(bodies: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(a["fingerprint"], a["status"]) for b in bodies for a in b["alerts"]}


@pytest.mark.integration
def test_the_daemon_links_back_batches_per_cycle_and_counts_resends_apart(
    standin: StandInServer, webhook_receiver: Receiver, tmp_path: Path
) -> None:
    webhook_receiver.script = [503]  # the first POST fails; its retry is a re-send
    cfg = {
        "scrape_interval": "0.5s",
        "evaluation_window": "2s",
        "runbook_base_url": WIKI,
        "deployments": [
            {
                "name": "chat-8b",
                "engine": "vllm",
                "targets": [standin.url()],
                "model": "meta-llama/Llama-3.1-8B-Instruct",
                "gpu": "H100-SXM",
                "max_model_len": 8192,
                "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1, "target_ratio": 0.5},
            }
        ],
        "receivers": [{"name": "ops", "url": webhook_receiver.url, "backoff_seconds": "0.1s"}],
        "rules": {"kv_saturation": {"for": "1s"}, "resolve_for": "1s"},
    }
    path = tmp_path / "advisor.yaml"
    path.write_text(yaml.safe_dump(cfg))
    argv = [sys.executable, "-m", "advisor.cli", "run", "--config", str(path), "--listen", "127.0.0.1:0"]
    proc = subprocess.Popen(
        [*argv, "--web.external-url", EXTERNAL],
        cwd=REPO_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        url = None
        while url is None:
            line = proc.stderr.readline()
            assert line, "the daemon exited"
            m = re.search(r"serving (http://\S+)/metrics", line)
            url = m.group(1) if m else None

        def opened_and_resolved(bodies: list[dict[str, Any]]) -> bool:
            seen = _transitions(bodies)
            return any((f, "resolved") in seen for f, s in seen if s == "firing")

        assert webhook_receiver.wait_for(opened_and_resolved, timeout=40), webhook_receiver.bodies
        with webhook_receiver.lock:
            bodies = list(webhook_receiver.bodies)
            codes = list(webhook_receiver.codes)
        assert codes[0] == 503
        for b in bodies:
            assert b["externalURL"] == EXTERNAL
            assert b["groupLabels"] == {"deployment": "chat-8b"}
            for a in b["alerts"]:
                assert a["generatorURL"] == f"{EXTERNAL}/#dep-chat-8b"
                assert a["annotations"]["runbook_url"].startswith(WIKI + "#")
        # the alerts opened in one cycle (same startsAt) came in one POST, not one POST each
        posts_per_cycle: dict[str, set[int]] = {}
        for i, b in enumerate(bodies):
            for a in b["alerts"]:
                if a["status"] == "firing":
                    posts_per_cycle.setdefault(a["startsAt"], set()).add(i)
        assert posts_per_cycle and all(len(p) == 1 for p in posts_per_cycle.values()), posts_per_cycle

        # each transition counted sent once; the first batch's retry counted resent, as many as it carried
        first_batch = len(bodies[0]["alerts"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            sent = _metric(url, "advisor_notifications_total", receiver="ops", outcome="sent")
            with webhook_receiver.lock:
                delivered = _transitions(webhook_receiver.bodies)
            if sent == len(delivered):
                break
            time.sleep(0.2)
        assert sent == len(delivered)
        assert _metric(url, "advisor_notifications_total", receiver="ops", outcome="resent") == first_batch
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_the_external_url_defaults_to_the_hostname_and_the_listen_port() -> None:
    assert external_url_arg(None, "127.0.0.1:9188") == f"http://{socket.gethostname()}:9188/"
    assert external_url_arg(None, ":9090") == f"http://{socket.gethostname()}:9090/"
    assert external_url_arg("https://advisor.example/x/", "127.0.0.1:9188") == "https://advisor.example/x/"
    with pytest.raises(ValueError, match=r"--web\.external-url must be an http"):
        external_url_arg("advisor.example:9188", "127.0.0.1:9188")


def test_run_refuses_an_external_url_that_is_not_a_url(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "advisor.yaml"
    dep = {"name": "a", "targets": ["http://127.0.0.1:9/metrics"], "model": "meta-llama/Llama-3.1-8B-Instruct"}
    dep |= {"gpu": "H100-SXM", "max_model_len": 8192, "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1}}
    path.write_text(yaml.safe_dump({"deployments": [dep]}))
    assert main(["run", "--config", str(path), "--web.external-url", "ftp://advisor.example/"]) == 2
    assert "--web.external-url must be an http" in capsys.readouterr().err


def test_the_runbook_base_url_must_be_a_url() -> None:
    from advisor.config import parse_config
    from advisor.errors import ConfigError

    dep = {"name": "a", "targets": ["http://127.0.0.1:9/metrics"], "model": "meta-llama/Llama-3.1-8B-Instruct"}
    dep |= {"gpu": "H100-SXM", "max_model_len": 8192, "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1}}
    assert parse_config({"deployments": [dep], "runbook_base_url": WIKI}).runbook_base_url == WIKI
    with pytest.raises(ConfigError, match="runbook_base_url"):
        parse_config({"deployments": [dep], "runbook_base_url": "wiki/runbook"})
