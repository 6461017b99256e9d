"""Issue 19: ``inspect`` and ``once`` say why, against stand-in HTTP servers on loopback.

* a stale, frozen or unavailable state prints its reason once, not one "not evaluated" line per rule;
* a config ``model`` other than the engine's own model label is one line naming both (before: only a large
  ``model_drift``);
* ``inspect host:port/metrics`` assumes http://;
* a page that is no engine's (a DCGM exporter's, a page with none of the families the advisor reads) is named as
  such, not as a failed scrape.

The DCGM page is written from the exporter's documented fields and labels: ``etc/default-counters.csv``
(https://github.com/NVIDIA/dcgm-exporter/blob/main/etc/default-counters.csv: ``DCGM_FI_DEV_SM_CLOCK``,
``DCGM_FI_DEV_GPU_TEMP``, ``DCGM_FI_DEV_POWER_USAGE``, ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_DEV_FB_USED``, with their
help texts) and the README's sample output (https://github.com/NVIDIA/dcgm-exporter#quickstart: labels ``gpu``,
``UUID``, written ``{gpu="0", UUID="GPU-…"}`` with a space after the comma).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from advisor.inspect import model_label_note
from tests.conftest import reply
from tests.inprocess import run_cli

Start = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]

DCGM_PAGE = """\
# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"} 1410
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"} 41
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"} 312.5
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"} 97
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0", UUID="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52"} 71000
"""

NODE_PAGE = "# HELP node_load1 1m load average.\n# TYPE node_load1 gauge\nnode_load1 0.5\n"
"""A page with none of the families any engine exports (node_exporter's ``node_load1``)."""


def _vllm_page(model: str, running: int = 0) -> str:
    """A vLLM page (families of ``vllm/v1/metrics/loggers.py``) serving ``model``; the token counters never move."""
    labels = f'engine="0",model_name="{model}"'
    return (
        f"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{{{labels}}} {running}.0\n"
        f"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{{{labels}}} 0.0\n"
        f"# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{{{labels}}} 1000.0\n"
        f"# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{{labels}}} 2000.0\n"
    )


def _serve(http_server: Start, page: str) -> str:
    return http_server(lambda h: reply(h, 200, page.encode())) + "/metrics"


def _once(tmp_path: Path, url: str, model: str = "llama-3.1-8b", extra: str = "") -> str:
    cfg = tmp_path / "advisor.yaml"
    cfg.write_text(
        "deployments:\n"
        "  - name: box\n"
        f"    model: {model}\n"
        "    gpu: H100-SXM\n"
        "    max_model_len: 8192\n"
        "    slo: {ttft_seconds: 1, tpot_seconds: 0.1}\n"
        f'    targets: ["{url}"]\n' + extra
    )
    r = run_cli("once", "--config", str(cfg), "--interval", "0.3")
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_once_on_a_dcgm_page_says_why_once_not_a_line_per_rule(http_server: Start, tmp_path: Path) -> None:
    out = _once(tmp_path, _serve(http_server, DCGM_PAGE))
    lines = out.splitlines()
    assert lines[0].startswith("== box (auto) — unavailable: ") and "GPU telemetry (DCGM exporter)" in lines[0]
    assert out.count("GPU telemetry (DCGM exporter)") == 1, out  # the target's DOWN line would repeat it
    assert "not evaluated: data is" not in out, out
    (said,) = [ln for ln in lines if "not evaluated" in ln]  # one line, whatever the number of built-in rules
    assert re.fullmatch(r"   (\d+) rules not evaluated: the data is unavailable", said), said
    assert int(said.split()[0]) > 1


def test_once_on_a_frozen_engine_gives_the_reason_on_its_state_line(http_server: Start, tmp_path: Path) -> None:
    """3 requests running, token counters still between the two scrapes: frozen (``stale``)."""
    out = _once(tmp_path, _serve(http_server, _vllm_page("meta-llama/Llama-3.1-8B-Instruct", running=3)))
    first = out.splitlines()[0]
    assert first.startswith("== box (vllm) — stale: ") and "frozen: 3 requests running" in first, out
    assert "not evaluated: data is" not in out
    assert sum("not evaluated" in ln for ln in out.splitlines()) == 1


def test_once_names_both_models_when_the_engine_serves_another(http_server: Start, tmp_path: Path) -> None:
    out = _once(tmp_path, _serve(http_server, _vllm_page("Qwen/Qwen2.5-0.5B")))
    assert (
        "   warning: model 'llama-3.1-8b' in the config, but the engine serves 'Qwen/Qwen2.5-0.5B'; the capacity "
        "pass sizes the config's model: set model: to what the engine serves"
    ) in out.splitlines(), out


def test_once_is_silent_when_the_label_is_the_configured_model_by_another_name(
    http_server: Start, tmp_path: Path
) -> None:
    out = _once(tmp_path, _serve(http_server, _vllm_page("meta-llama/Llama-3.1-8B-Instruct")))
    assert "warning: model" not in out


@pytest.mark.parametrize(
    ("configured", "label", "served_model", "says"),
    [
        ("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", None, None),  # the preset's alias
        ("llama-3.1-8b", "Llama-3.1-8B-Instruct", None, None),  # the repo name without its owner
        ("llama-3.1-8b", None, None, None),  # no label: nothing to compare
        ("llama-3.1-8b", "chat", "chat", None),  # declared alias
        ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-0.5B", None, "but the engine serves 'Qwen/Qwen2.5-0.5B'"),
        ("llama-3.1-8b", "chat", None, "if 'chat' is a --served-model-name alias, set served_model: 'chat'"),
        ("./config.json", "org/model", None, None),  # a config.json path: the label is not comparable
    ],
)
def test_model_label_note(configured: str, label: str | None, served_model: str | None, says: str | None) -> None:
    note = model_label_note(configured, label, served_model)
    if says is None:
        assert note is None
    else:
        assert note is not None and says in note and repr(configured) in note


def test_inspect_names_a_dcgm_page_as_no_engine_once(http_server: Start) -> None:
    r = run_cli("inspect", _serve(http_server, DCGM_PAGE), "--interval", "0.2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1] == (
        "  not read: unrecognized — GPU telemetry (DCGM exporter), not an inference engine; metric-name prefixes "
        "seen: DCGM_FI_"
    ), r.stdout
    assert "scrape failed" not in r.stdout and "unknown\n" not in r.stdout.replace("engine unknown", ""), r.stdout


def test_inspect_names_a_page_without_engine_families(http_server: Start) -> None:
    r = run_cli("inspect", _serve(http_server, NODE_PAGE), "--interval", "0.2")
    assert "  not read: unrecognized — no known engine's metrics; metric-name prefixes seen: node_" in r.stdout
    assert "scrape failed" not in r.stdout and "parse_error" not in r.stdout


def test_inspect_host_port_metrics_assumes_http(http_server: Start) -> None:
    url = _serve(http_server, _vllm_page("meta-llama/Llama-3.1-8B-Instruct"))
    r = run_cli("inspect", url.removeprefix("http://"), "--interval", "0.2")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"target {url}: engine vllm, state fresh"), r.stdout
