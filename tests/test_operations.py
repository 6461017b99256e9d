"""Running for months: SIGHUP reload, file_sd targets, sharding, structured logs."""

from __future__ import annotations

import json
import logging
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

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
        proc.send_signal(signal.SIGUSR1)  # breaker 24: the default action ended the daemon with no line
        time.sleep(0.5)
        assert proc.poll() is None and _metric(url, "advisor_requests_running", deployment="a") == 10.0
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
        assert "received SIGUSR1: ignored (SIGHUP reloads the config, SIGTERM stops)" in err
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


def test_the_stop_handlers_are_in_place_before_the_serving_line(engine: StandInServer) -> None:
    """A supervisor may send SIGTERM the moment it reads the "serving" line (CI caught the daemon killed by it,
    exit -15, when the handlers were installed after the announcement)."""
    from advisor.scheduler import run_daemon

    cfg = parse_config(
        yaml.safe_load(
            "scrape_interval: 1s\nevaluation_window: 5s\ndeployments:" + DEP.format(name="a", url=engine.url())
        )
    )
    registry, collector, metrics = make_registry()
    seen: list[object] = []
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    stop = threading.Event()

    def announced(_url: str) -> None:
        seen.extend(signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT))
        stop.set()

    try:
        assert (
            run_daemon(
                Service(cfg, collector, metrics), registry, "127.0.0.1:0", on_listening=announced, stop_event=stop
            )
            == 0
        )
    finally:
        for s, h in before.items():
            signal.signal(s, h)
    assert len(seen) == 2
    assert all(callable(h) and h not in (signal.SIG_DFL, signal.default_int_handler) for h in seen), seen


def test_a_bad_file_sd_file_is_a_config_error_and_a_bad_change_keeps_the_targets(
    engine: StandInServer, tmp_path: Path
) -> None:
    from advisor.errors import ConfigError

    hostport = engine.url().removeprefix("http://").removesuffix("/metrics")
    sd = tmp_path / "targets.json"
    dep = {
        "name": "fleet",
        "file_sd": [str(sd)],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    for bad, where in [
        ('[{"targets": ["h:1"], "labels": [1]}]', "[0].labels"),
        ('[{"targets": [5]}]', "[0].targets[0]"),
        ('{"targets": []}', ""),
    ]:
        sd.write_text(bad)
        with pytest.raises(ConfigError) as err:
            parse_config({"deployments": [dep]})
        assert str(sd) in err.value.problems[0][0] and where in err.value.problems[0][0]
    sd.write_text(json.dumps([{"targets": [hostport]}]))
    _, collector, metrics = make_registry()
    svc = Service(
        parse_config({"scrape_interval": "1s", "evaluation_window": "5s", "deployments": [dep]}), collector, metrics
    )
    try:
        svc.run_once()
        time.sleep(0.05)
        sd.write_bytes(b"\xff\xfe garbage")
        (d,) = svc.run_once().deployments
        assert [t.url for t in d.targets] == [f"http://{hostport}/metrics"]  # the old targets stay
        assert d.targets[0].up
    finally:
        svc.close()


def test_the_daemon_refuses_a_state_file_in_a_missing_folder_at_start(tmp_path: Path) -> None:
    from advisor.errors import ConfigError

    dep = {
        "name": "a",
        "targets": ["http://127.0.0.1:9/metrics"],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    # check-config accepts it (the path may exist where the daemon runs); the daemon refuses to start
    cfg = parse_config({"deployments": [dep], "state_file": str(tmp_path / "no" / "such" / "state.json")})
    _, collector, metrics = make_registry()
    with pytest.raises(ConfigError) as err:
        Service(cfg, collector, metrics)
    assert err.value.problems[0][0] == "state_file" and "does not exist" in err.value.problems[0][1]


def test_a_hostile_prometheus_answer_fails_only_its_own_deployment(
    engine: StandInServer, http_server: Any, tmp_path: Path
) -> None:
    from tests.conftest import reply

    deep = ("[" * 100_000 + "]" * 100_000).encode()
    prom = http_server(lambda h: reply(h, 200, deep, "application/json"))
    common = {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    cfg = parse_config(
        {
            "scrape_interval": "1s",
            "evaluation_window": "5s",
            "prometheus": {"url": prom},
            "deployments": [
                {"name": "via-prom", "source": "prometheus", "selector": 'job="x"', **common},
                {"name": "direct", "targets": [engine.url()], **common},
            ],
        }
    )
    _, collector, metrics = make_registry()
    svc = Service(cfg, collector, metrics)
    try:
        result = svc.run_once()
    finally:
        svc.close()
    via, direct = (d.as_dict() for d in result.deployments)
    assert direct["state"] == "fresh" and direct["snapshot"]["requests_running"] == 10
    assert via["state"] == "unavailable"
    assert via["targets"][0]["error_reason"] == "parse_error"


def test_a_reload_with_a_value_yaml_cannot_build_keeps_the_running_config(
    engine: StandInServer, tmp_path: Path
) -> None:
    """`state_file: 2020-13-45` (an impossible date) or `!!bool maybe` used to end the daemon on SIGHUP."""
    cfg_path = tmp_path / "advisor.yaml"
    good = "scrape_interval: 1s\nevaluation_window: 5s\ndeployments:" + DEP.format(name="a", url=engine.url())
    cfg_path.write_text(good)
    registry, collector, metrics = make_registry()
    svc = Service(parse_config(yaml.safe_load(good)), collector, metrics, base_dir=tmp_path)
    try:
        for bad in ("state_file: 2020-13-45\n", "state_file: !!bool maybe\n", "outbox_dir: !!set [a]\n"):
            cfg_path.write_text(good + bad)
            ok, message = svc.reload(cfg_path)
            assert not ok and "line 10" in message, message  # after 3 + the 6 lines of DEP
            assert registry.get_sample_value("advisor_config_last_reload_successful") == 0.0
            assert [d.spec.name for d in svc.deployments] == ["a"]
        cfg_path.write_text(good)
        assert svc.reload(cfg_path)[0]
        assert registry.get_sample_value("advisor_config_last_reload_successful") == 1.0
    finally:
        svc.close()


def test_one_broken_file_sd_never_costs_another_deployment_its_cycle(engine: StandInServer, tmp_path: Path) -> None:
    hostport = engine.url().removeprefix("http://").removesuffix("/metrics")
    sd = tmp_path / "targets.yaml"
    sd.write_text(f"- targets: ['{hostport}']\n")
    fleet = {
        "name": "fleet",
        "file_sd": [str(sd)],
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    other = dict(fleet, name="other", targets=[engine.url()])
    del other["file_sd"]
    _, collector, metrics = make_registry()
    svc = Service(
        parse_config({"scrape_interval": "1s", "evaluation_window": "5s", "deployments": [fleet, other]}),
        collector,
        metrics,
    )
    try:
        svc.run_once()
        time.sleep(0.05)
        sd.write_text("- targets: !!timestamp x\n")
        result = svc.run_once()
        assert {d.name: d.targets[0].up for d in result.deployments} == {"fleet": True, "other": True}
        # growing discovery grows the worker pool: three more targets, one worker each
        time.sleep(0.05)
        sd.write_text(f"- targets: ['{hostport}', '127.0.0.1:1', '127.0.0.1:2', '127.0.0.1:3']\n")
        svc.run_once()
        assert svc._pool_size == 5  # 4 file_sd targets + 1 static
    finally:
        svc.close()


def test_a_target_that_never_came_up_is_logged_once_not_every_cycle(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    dead = "http://127.0.0.1:9/metrics"
    _, collector, metrics = make_registry()
    svc = Service(
        parse_config(
            {
                "scrape_interval": "1s",
                "evaluation_window": "5s",
                "deployments": [yaml.safe_load(DEP.format(name="a", url=dead))[0]],
            }
        ),
        collector,
        metrics,
    )
    try:
        with caplog.at_level(logging.DEBUG, logger="advisor.service"):
            for _ in range(3):
                svc.run_once()
    finally:
        svc.close()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "scrape failed" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
