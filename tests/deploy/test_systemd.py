"""The systemd unit passes `systemd-analyze verify` (offline, on a copy whose ExecStart points at this checkout's
console script, since verify needs the binary to exist) and keeps its hardening."""

from __future__ import annotations

import configparser
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.deploy.conftest import DEPLOY, need_binary

UNIT = DEPLOY / "systemd" / "capacity-advisor.service"
INSTALLED = "/usr/local/bin/capacity-advisor"


def console_script() -> str:
    path = Path(sys.executable).parent / "capacity-advisor"
    found = str(path) if path.exists() else shutil.which("capacity-advisor")
    if not found:
        pytest.skip("the capacity-advisor console script is not installed (pip install -e .)")
    return found


def verify(tmp_path: Path, text: str) -> subprocess.CompletedProcess[str]:
    tool = need_binary("systemd-analyze")
    unit = tmp_path / UNIT.name
    unit.write_text(text)
    return subprocess.run([tool, "verify", str(unit)], capture_output=True, text=True, timeout=60)


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    r = verify(tmp_path, UNIT.read_text().replace(INSTALLED, console_script()))
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), r.stdout + r.stderr


def test_verify_would_catch_an_unknown_directive(tmp_path: Path) -> None:
    text = UNIT.read_text().replace(INSTALLED, console_script()).replace("UMask=0077", "UMask=0077\nUmaskk=0077")
    r = verify(tmp_path, text)
    assert "Unknown key" in r.stdout + r.stderr


def test_the_unit_exposure_is_at_most_2_of_10(tmp_path: Path) -> None:
    tool = need_binary("systemd-analyze")
    unit = tmp_path / UNIT.name
    unit.write_text(UNIT.read_text().replace(INSTALLED, console_script()))
    r = subprocess.run(
        [tool, "security", "--offline=yes", "--threshold=20", str(unit)], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr


def test_the_unit_runs_hardened_with_a_state_directory_and_reloads_on_sighup() -> None:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    svc = parser["Service"]
    assert svc["DynamicUser"] == "yes"
    assert svc["ProtectSystem"] == "strict"
    assert svc["NoNewPrivileges"] == "yes"
    assert svc["StateDirectory"] == "capacity-advisor"
    assert svc["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert svc["ExecStart"].startswith(f"{INSTALLED} run --config /etc/capacity-advisor/config.yaml")


def test_the_unit_leaves_room_for_the_connection_cap_and_the_descriptor_reserve() -> None:
    from advisor.server import DEFAULT_MAX_CONNECTIONS, FD_RESERVE

    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(UNIT.read_text())
    limit = parser["Service"]["LimitNOFILE"]
    soft = int(limit.split(":", 1)[0])
    assert soft >= 4 * (DEFAULT_MAX_CONNECTIONS + FD_RESERVE)
