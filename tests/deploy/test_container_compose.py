"""The Containerfile and compose file, checked without a container engine: structure, the files they reference,
and hadolint-like rules (non-root, pinned bases, HEALTHCHECK, exec-form commands). The compose stack's simulated
engines are started for real (on loopback) and what they write is checked against the advisor's config loader."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

from advisor.config import load_config
from tests.deploy.conftest import DEPLOY, REPO

CONTAINERFILE = DEPLOY / "container" / "Containerfile"
COMPOSE = DEPLOY / "compose.yaml"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", CONTAINERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            op, _, rest = line.partition(" ")
            out.append((op.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    ins = instructions()
    last_from = max(i for i, (op, _) in enumerate(ins) if op == "FROM")
    return ins[last_from:]


def test_the_image_runs_as_a_non_root_user() -> None:
    users = [arg for op, arg in final_stage() if op == "USER"]
    assert users, "no USER in the final stage"
    assert users[-1].split(":")[0] not in ("root", "0")
    ops = [op for op, _ in final_stage()]
    assert ops.index("USER") < ops.index("ENTRYPOINT")


def test_the_bases_are_pinned_and_fully_qualified() -> None:
    for op, arg in instructions():
        if op == "FROM":
            image = arg.split()[0]
            assert ":" in image.split("/")[-1] and not image.endswith(":latest"), image
            assert image.startswith("docker.io/"), f"{image}: give the registry (podman asks otherwise)"


def test_the_image_has_a_healthcheck_on_healthz_and_exec_form_commands() -> None:
    ops = dict(final_stage())
    assert "/healthz" in ops["HEALTHCHECK"]
    for op in ("ENTRYPOINT", "CMD"):
        assert json.loads(ops[op]), op  # exec form: signals reach the daemon, no shell in between
    assert json.loads(ops["ENTRYPOINT"]) == ["capacity-advisor"]
    assert "0.0.0.0:9188" in json.loads(ops["CMD"])
    assert ops["EXPOSE"] == "9188"


def test_no_add_and_every_copied_path_exists() -> None:
    for op, arg in instructions():
        assert op != "ADD", "use COPY (ADD fetches URLs and unpacks archives)"
        if op == "COPY" and not arg.startswith("--from"):
            *sources, _ = arg.split()
            for s in sources:
                assert (REPO / s).exists(), s


def test_the_compose_file_references_what_exists() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {"engines", "advisor", "prometheus", "alertmanager"} <= set(services)
    declared = set(compose.get("volumes") or {})
    for name, svc in services.items():
        assert svc.get("read_only") is True, f"{name}: read_only root filesystem"
        if "image" in svc and "build" not in svc and not svc["image"].startswith("capacity-advisor:"):
            assert not svc["image"].endswith(":latest") and ":" in svc["image"], name
        if "build" in svc:
            ctx = (COMPOSE.parent / svc["build"]["context"]).resolve()
            assert (ctx / svc["build"]["dockerfile"]).exists(), name
        for dep in svc.get("depends_on") or []:
            assert dep in services, f"{name} depends on unknown {dep}"
        for vol in svc.get("volumes") or []:
            source = vol.split(":")[0]
            if source.startswith((".", "/")):
                assert (COMPOSE.parent / source).exists(), f"{name}: {source} does not exist"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"


def test_compose_prometheus_and_alertmanager_point_at_the_compose_services() -> None:
    compose = yaml.safe_load(COMPOSE.read_text())
    prom = yaml.safe_load((DEPLOY / "compose" / "prometheus.yml").read_text())
    am = yaml.safe_load((DEPLOY / "compose" / "alertmanager.yml").read_text())
    hosts = {t.split(":")[0] for j in prom["scrape_configs"] for g in j.get("static_configs", []) for t in g["targets"]}
    hosts |= {t.split(":")[0] for g in prom["alerting"]["alertmanagers"] for t in g["static_configs"][0]["targets"]}
    assert hosts <= set(compose["services"])
    assert am["receivers"][0]["webhook_configs"][0]["url"].startswith("http://engines:")
    mounted = " ".join(compose["services"]["prometheus"]["volumes"])
    assert "/srv/llm-capacity-advisor/rules" in mounted  # ../../rules/*.yml from the config's folder
    grafana = " ".join(compose["services"]["grafana"]["volumes"])
    assert "./grafana/dashboards" in grafana and "./grafana/provisioning" in grafana


@pytest.mark.integration
def test_the_simulated_engines_write_a_config_the_advisor_accepts_and_serve_metrics(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            str(DEPLOY / "compose" / "sim_engines.py"),
            "--out",
            str(tmp_path),
            "--host",
            "127.0.0.1",
            "--webhook-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "advisor.yaml").exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "no advisor.yaml after 30 s"
            time.sleep(0.1)
        cfg = load_config(tmp_path / "advisor.yaml")
        groups = json.loads((tmp_path / "engines.json").read_text())
        assert [g["labels"]["deployment"] for g in groups] == [d.name for d in cfg.deployments]
        url = f"http://{groups[0]['targets'][0]}/metrics"
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert b"vllm:num_requests_running" in resp.read()
    finally:
        proc.terminate()
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()  # never left running into the next test (a leaked process fails that one instead)
            proc.communicate()
            raise
    assert proc.returncode == 0, err
