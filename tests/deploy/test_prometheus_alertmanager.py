"""Prometheus and Alertmanager configs: checked by their own tools (promtool, amtool), and the conventions the rules
and dashboards rely on asserted (every engine job labels its targets with `deployment`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.conftest import DEPLOY, REPO, need_binary

PROMETHEUS_CONFIGS = [DEPLOY / "prometheus" / "prometheus.yml", DEPLOY / "compose" / "prometheus.yml"]
ALERTMANAGER_CONFIGS = [DEPLOY / "alertmanager" / "alertmanager.yml", DEPLOY / "compose" / "alertmanager.yml"]


@pytest.mark.parametrize("path", PROMETHEUS_CONFIGS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_promtool_accepts_the_prometheus_config(path: Path) -> None:
    promtool = need_binary("promtool")
    r = subprocess.run([promtool, "check", "config", str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("path", ALERTMANAGER_CONFIGS, ids=lambda p: str(p.relative_to(DEPLOY)))
def test_amtool_accepts_the_alertmanager_config(path: Path) -> None:
    amtool = need_binary("amtool")
    r = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_rule_files_are_the_repositorys_rules() -> None:
    cfg = yaml.safe_load(PROMETHEUS_CONFIGS[0].read_text())
    assert cfg["rule_files"] == ["../../rules/*.yml"]
    assert (PROMETHEUS_CONFIGS[0].parent / "../../rules").resolve() == (REPO / "rules").resolve()
    assert cfg["alerting"]["alertmanagers"][0]["static_configs"][0]["targets"]


def test_every_engine_job_attaches_the_deployment_label_and_the_advisor_is_scraped() -> None:
    cfg = yaml.safe_load(PROMETHEUS_CONFIGS[0].read_text())
    jobs = {j["job_name"]: j for j in cfg["scrape_configs"]}
    assert "capacity-advisor" in jobs
    for name, job in jobs.items():
        if name == "capacity-advisor":
            continue
        for group in job.get("static_configs", []):
            assert group["labels"]["deployment"], name
        if "file_sd_configs" in job:  # targets without the label are dropped
            assert any(
                r.get("source_labels") == ["deployment"] and r["action"] == "drop" for r in job["relabel_configs"]
            )


def test_advisor_alerts_go_to_the_webhook_and_to_slack_with_secrets_read_from_files() -> None:
    cfg = yaml.safe_load(ALERTMANAGER_CONFIGS[0].read_text())
    receivers = {r["name"]: r for r in cfg["receivers"]}
    slack = receivers["slack"]["slack_configs"][0]
    assert slack["api_url_file"].startswith("/etc/alertmanager/secrets/") and "api_url" not in slack
    hook = receivers["ops-webhook"]["webhook_configs"][0]
    assert hook["http_config"]["authorization"]["credentials_file"].startswith("/etc/alertmanager/secrets/")
    routed = {r["receiver"] for r in cfg["route"]["routes"] if any("CapacityAdvisor" in m for m in r["matchers"])}
    assert routed == {"ops-webhook", "slack"}
    assert cfg["route"]["routes"][0]["continue"] is True


def test_the_alert_names_routed_are_those_the_rules_define() -> None:
    names = set()
    for path in (REPO / "rules").glob("*.yml"):
        data = yaml.safe_load(path.read_text()) or {}
        for g in data.get("groups", []):
            names |= {r["alert"] for r in g["rules"] if "alert" in r}
    if not names:
        pytest.skip("rules/ defines no alert yet")
    assert all(n.startswith("CapacityAdvisor") for n in names), sorted(names)
