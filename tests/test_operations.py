"""Running for months: SIGHUP reload, file_sd targets, sharding, structured logs."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service, in_shard
from advisor.standin import Phase, StandInEngine, StandInServer
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.integration

CALM = Phase("calm", 10_000, 0.3, 10, 0, 2.0, 1000, 200, 0, 0.2, 0.03)

DEP = """
  - name: {name}
    targets: ["{url}"]
    model: meta-llama/Llama-3.1-8B-Instruct
    gpu: H100-SXM
    max_model_len: 8192
    slo: {{ttft_seconds: 2.5, tpot_seconds: 0.1}}
"""


@pytest.fixture
def engine() -> Iterator[StandInServer]:
    srv = StandInServer(StandInEngine(phases=(CALM,), speed=1.0, num_gpu_blocks=2000))
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


def test_sighup_reloads_a_valid_config_and_keeps_the_old_one_when_invalid(
    engine: StandInServer, tmp_path: Path
) -> None:
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text("scrape_interval: 1s\nevaluation_window: 5s\ndeployments:" + DEP.format(name="a", url=engine.url()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "advisor.cli", "run", "--config", str(cfg), "--listen", "127.0.0.1:0"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
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

        def wait_for(pred: object, timeout: float = 15) -> bool:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if pred():  # type: ignore[operator]
                    return True
                time.sleep(0.3)
            return False

        assert wait_for(lambda: _metric(url, "advisor_requests_running", deployment="a") == 10.0)
        cfg.write_text(
            "scrape_interval: 1s\nevaluation_window: 5s\ndeployments:"
            + DEP.format(name="a", url=engine.url())
            + DEP.format(name="b", url=engine.url())
        )
        proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: _metric(url, "advisor_requests_running", deployment="b") == 10.0)
        assert _metric(url, "advisor_config_last_reload_successful") == 1.0
        cfg.write_text("scrape_interval: soon\ndeployments: []\n")
        proc.send_signal(signal.SIGHUP)
        assert wait_for(lambda: _metric(url, "advisor_config_last_reload_successful") == 0.0)
        time.sleep(1.5)
        assert _metric(url, "advisor_requests_running", deployment="b") == 10.0  # the old config still runs
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=15) == 0
        err = proc.stderr.read()
        assert "config reload failed; keeping the running config" in err and "scrape_interval" in err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def test_file_sd_targets_follow_the_file(engine: StandInServer, tmp_path: Path) -> None:
    hostport = engine.url().removeprefix("http://").removesuffix("/metrics")
    sd = tmp_path / "targets.json"
    sd.write_text(json.dumps([{"targets": [hostport], "labels": {"env": "prod"}}]))
    cfg = parse_config(
        {
            "scrape_interval": "1s",
            "evaluation_window": "5s",
            "deployments": [
                {
                    "name": "fleet",
                    "file_sd": [str(sd)],
                    "model": "meta-llama/Llama-3.1-8B-Instruct",
                    "gpu": "H100-SXM",
                    "max_model_len": 8192,
                    "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
                }
            ],
        }
    )
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    try:
        res = svc.run_once()
        (d,) = res.deployments
        assert [t.url for t in d.targets] == [f"http://{hostport}/metrics"]
        assert d.snapshot["requests_running"] == 10
        time.sleep(0.05)  # a new mtime
        sd.write_text(json.dumps([{"targets": [hostport, "127.0.0.1:9"]}]))
        res = svc.run_once()
        (d,) = res.deployments
        assert [t.url for t in d.targets] == [f"http://{hostport}/metrics", "http://127.0.0.1:9/metrics"]
        assert [t.up for t in d.targets] == [True, False]
    finally:
        svc.close()


def test_shards_partition_the_deployments_stably() -> None:
    names = [f"dep-{i}" for i in range(60)]
    shards = [[n for n in names if in_shard(n, (i, 3))] for i in range(3)]
    assert sorted(n for shard in shards for n in shard) == sorted(names)  # every deployment in exactly one shard
    assert all(shards)  # none empty at 60 deployments
    assert shards == [[n for n in names if in_shard(n, (i, 3))] for i in range(3)]  # stable


def test_json_logs_carry_deployment_and_target(tmp_path: Path) -> None:
    cfg = tmp_path / "a.yaml"
    cfg.write_text("deployments:" + DEP.format(name="lonely", url="http://127.0.0.1:9/metrics"))
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "advisor.cli",
            "--log-format",
            "json",
            "once",
            "--config",
            str(cfg),
            "--interval",
            "0.2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stderr.splitlines() if line.strip()]
    failed = [x for x in lines if "scrape failed" in x["msg"]]
    assert failed and failed[0]["deployment"] == "lonely"
    assert failed[0]["target"] == "http://127.0.0.1:9/metrics"
    assert failed[0]["level"] == "warning"


def test_post_reload_needs_the_lifecycle_flag(engine: StandInServer, tmp_path: Path) -> None:
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text("scrape_interval: 1s\nevaluation_window: 5s\ndeployments:" + DEP.format(name="a", url=engine.url()))
    for flag, expect in (([], 403), (["--web.enable-lifecycle"], 200)):
        proc = subprocess.Popen(
            [sys.executable, "-m", "advisor.cli", "run", "--config", str(cfg), "--listen", "127.0.0.1:0", *flag],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
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
            r = requests.post(url + "/-/reload", timeout=10)
            assert r.status_code == expect, r.text
            if expect == 403:
                assert "--web.enable-lifecycle" in r.json()["error"]
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
