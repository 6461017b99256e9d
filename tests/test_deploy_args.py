"""Every command line the shipped deployment files give ``capacity-advisor`` parses as the CLI parses it: the
Kubernetes Deployment's ``args`` (with ``--log-format=json`` after ``run``, which exited 2 with "unrecognized
arguments" until 2026-12-07: breaker 28, a crash-looping pod), the systemd unit's ``ExecStart``/``ExecStartPre``,
the container's ``CMD`` and compose's ``command`` for the advisor image."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from advisor.cli import build_parser
from tests.conftest import REPO_ROOT

DEPLOY = REPO_ROOT / "deploy"


def _kubernetes() -> list[list[str]]:
    doc = yaml.safe_load((DEPLOY / "kubernetes" / "deployment.yaml").read_text())
    return [list(c["args"]) for c in doc["spec"]["template"]["spec"]["containers"] if "args" in c]


def _systemd() -> list[list[str]]:
    out = []
    for line in (DEPLOY / "systemd" / "capacity-advisor.service").read_text().splitlines():
        key, _, value = line.partition("=")
        if key in ("ExecStart", "ExecStartPre"):
            argv = shlex.split(value)
            assert Path(argv[0]).name == "capacity-advisor", line
            out.append(argv[1:])
    return out


def _container() -> list[list[str]]:
    lines = (DEPLOY / "container" / "Containerfile").read_text().splitlines()
    (cmd,) = [json.loads(x.removeprefix("CMD ")) for x in lines if x.startswith("CMD [")]
    return [cmd]


def _compose() -> list[list[str]]:
    doc = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return [
        list(svc["command"])
        for svc in doc["services"].values()
        if str(svc.get("image", "")).startswith("capacity-advisor") and svc.get("command", [""])[0] in ("run", "demo")
    ]


CASES = [
    (name, argv)
    for name, read in [
        ("kubernetes", _kubernetes),
        ("systemd", _systemd),
        ("container", _container),
        ("compose", _compose),
    ]
    for argv in read()
]


@pytest.mark.parametrize(("where", "argv"), CASES, ids=[f"{w}-{i}" for i, (w, _) in enumerate(CASES)])
def test_each_shipped_command_line_parses(where: str, argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    assert args.command == argv[0]


def test_the_kubernetes_deployment_logs_json_from_after_the_command() -> None:
    (argv,) = _kubernetes()
    args = build_parser().parse_args(argv)
    assert (args.command, args.log_format, args.log_level) == ("run", "json", "info")


def test_a_log_flag_after_the_command_overrides_the_one_before_and_leaves_the_other() -> None:
    args = build_parser().parse_args(
        ["--log-level", "debug", "--log-format", "json", "once", "--config", "c.yaml", "--log-level", "error"]
    )
    assert (args.log_level, args.log_format) == ("error", "json")


def test_the_log_flags_follow_a_nested_sub_command_too() -> None:
    # fresh-user walkthrough 2026-12-07: 'rules generate … --log-format json' exited 2 (unrecognized arguments)
    args = build_parser().parse_args(["rules", "generate", "--config", "c.yaml", "--log-format", "json"])
    assert (args.rules_command, args.log_format) == ("generate", "json")
