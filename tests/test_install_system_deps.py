"""``scripts/install-system-deps`` (issue 19): Debian's ``prometheus``, ``prometheus-alertmanager`` and
``victoria-metrics`` packages enable system-wide services (:9090, :9093, :8428); the script disables each one it
installed, since the tests start their own on free loopback ports.

The script runs for real under bash with a PATH of stand-in commands: ``apt-get`` (records its arguments and
"installs" each package by writing its commands, the way the Debian package provides them), ``systemctl`` and ``id``
(root) record or answer; nothing on the machine is touched.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "install-system-deps"
PROVIDES = {
    "prometheus": ["prometheus", "promtool"],
    "prometheus-alertmanager": ["prometheus-alertmanager"],
    "victoria-metrics": ["victoria-metrics"],
    "chromium": ["chromium"],
    "systemd": ["systemd-analyze"],
    "nodejs": ["node"],
    "npm": ["npm"],
    "g++": ["c++"],
    "make": ["make"],
    "cmake": ["cmake"],
}
"""Each Debian package the script may install → the commands it provides (packages.debian.org file lists)."""


def _stub(path: Path, body: str) -> None:
    path.write_text("#!/bin/bash\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _run(tmp_path: Path, have: list[str]) -> tuple[subprocess.CompletedProcess[str], list[str], list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls"
    for tool in ("bash", "grep", "head", "cat", "chmod", "dpkg-query"):
        real = shutil.which(tool)
        if real is not None:
            (bin_dir / tool).symlink_to(real)
    _stub(bin_dir / "id", "echo 0")
    _stub(bin_dir / "systemctl", f'echo "systemctl $*" >> {log}')
    provides = "\n".join(f'    {pkg}) cmds="{" ".join(cmds)}" ;;' for pkg, cmds in PROVIDES.items())
    _stub(
        bin_dir / "apt-get",
        f"""echo "apt-get $*" >> {log}
for a in "$@"; do
  cmds=""
  case "$a" in
{provides}
  esac
  for c in $cmds; do printf '#!/bin/bash\\necho "%s 1.0"\\n' "$c" > {bin_dir}/$c; chmod +x {bin_dir}/$c; done
done""",
    )
    for pkg in have:
        for cmd in PROVIDES[pkg]:
            _stub(bin_dir / cmd, f'echo "{cmd} 1.0"')
    env = {"PATH": str(bin_dir), "HOME": str(tmp_path)}
    proc = subprocess.run(
        [str(bin_dir / "bash"), str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60, check=False
    )
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, [c for c in calls if c.startswith("systemctl")], [c for c in calls if c.startswith("apt-get")]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash absent")
def test_every_service_the_packages_enable_is_disabled_after_install(tmp_path: Path) -> None:
    proc, systemctl, apt = _run(tmp_path, have=[])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert any("install" in a and "prometheus-alertmanager" in a for a in apt), apt
    disabled = {c.split()[-1] for c in systemctl if c.split()[1] == "disable"}
    assert disabled == {"prometheus.service", "prometheus-alertmanager.service", "victoria-metrics.service"}, systemctl


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash absent")
def test_a_service_already_installed_before_the_script_is_left_as_the_operator_set_it(tmp_path: Path) -> None:
    """Only what the script itself installed is disabled: a Prometheus the host already ran stays as it was."""
    proc, systemctl, _ = _run(tmp_path, have=["prometheus", "prometheus-alertmanager"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    disabled = {c.split()[-1] for c in systemctl if c.split()[1] == "disable"}
    assert disabled == {"victoria-metrics.service"}, systemctl


def test_nothing_is_installed_or_disabled_when_every_tool_is_present(tmp_path: Path) -> None:
    proc, systemctl, apt = _run(tmp_path, have=list(PROVIDES))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert apt == [] and systemctl == []
    assert "already installed" in proc.stdout
    assert os.path.exists(SCRIPT)
