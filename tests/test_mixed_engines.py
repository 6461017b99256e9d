"""``engine: auto`` on a deployment whose targets serve different engines (breaker 15).

The daemon keeps the first engine it detects for a deployment; a target serving another engine was then reported
``unrecognized`` with the hint "set engine: sglang or auto" — where ``engine`` already was ``auto``. It says now
that the targets mix engines, and what to do. Two real loopback servers, the daemon's own scrape path.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from advisor.config import parse_config
from advisor.exporter import make_registry
from advisor.service import Service
from tests.conftest import reply

FIXTURES = Path(__file__).parent / "fixtures"
VLLM = (FIXTURES / "vllm" / "dp-two-ranks.prom").read_bytes()
SGLANG = (FIXTURES / "sglang" / "dp2-tp2-priority-underscore.prom").read_bytes()

Start = Callable[[Callable[[BaseHTTPRequestHandler], None]], str]


def _service(urls: list[str]) -> Service:
    """The daemon over one ``engine: auto`` deployment of ``urls``."""
    dep = {
        "name": "auto",
        "engine": "auto",
        "targets": urls,
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    _, collector, metrics = make_registry()
    return Service(parse_config({"deployments": [dep]}), collector, metrics)


def test_targets_of_two_engines_under_engine_auto_say_they_mix_engines(http_server: Start) -> None:
    urls = [http_server(lambda h, b=body: reply(h, 200, b)) + "/metrics" for body in (VLLM, SGLANG)]
    svc = _service(urls)
    try:
        for _ in range(3):  # the first cycle adopts an engine, the next ones read the other target against it
            svc.scrape_once()
        targets = svc.evaluate_once().deployments[0].as_dict()["targets"]
    finally:
        svc.close()
    down = [t for t in targets if not t["up"]]
    assert len(down) == 1 and down[0]["error_reason"] == "unrecognized", targets
    message = down[0]["error"]
    adopted = "vllm" if down[0]["target"] == urls[1] else "sglang"
    other = "sglang" if adopted == "vllm" else "vllm"
    assert re.search(rf"looks like {other}\b.*detected as {adopted} on another of its targets", message), message
    assert "give this one a deployment of its own" in message, message
    assert f"if every target's engine changed, set engine: {other}" in message, message


def test_one_target_whose_engine_changed_under_engine_auto_says_so(http_server: Start) -> None:
    """Breaker 16: one target, vLLM then SGLang behind the same URL: the page was said to come from "another of its
    targets" (there is none). It says the engine behind this target changed, and how to detect it again."""
    page = {"body": VLLM}
    url = http_server(lambda h: reply(h, 200, page["body"])) + "/metrics"
    svc = _service([url])
    try:
        svc.scrape_once()
        page["body"] = SGLANG
        svc.scrape_once()
        (target,) = svc.evaluate_once().deployments[0].as_dict()["targets"]
    finally:
        svc.close()
    assert not target["up"] and target["error_reason"] == "unrecognized", target
    message = target["error"]
    assert "looks like sglang" in message and "detected as vllm on this target earlier" in message, message
    assert "another of its targets" not in message and "set engine: sglang" in message, message


def test_a_reload_that_replaces_the_target_an_engine_was_detected_on_detects_again(
    http_server: Start, tmp_path: Path
) -> None:
    """Breaker 17: engine: auto kept the engine it detected across a reload that replaced every target, so the new
    target's SGLang page was refused until a restart ("…on another of its targets: give this target a deployment of
    its own"). A reload whose targets no longer hold the one the engine was detected on detects again."""
    import yaml

    from advisor.config import load_config

    vllm = http_server(lambda h: reply(h, 200, VLLM)) + "/metrics"
    sglang = http_server(lambda h: reply(h, 200, SGLANG)) + "/metrics"
    dep = {
        "name": "auto",
        "engine": "auto",
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "gpu": "H100-SXM",
        "max_model_len": 8192,
        "slo": {"ttft_seconds": 2.5, "tpot_seconds": 0.1},
    }
    path = tmp_path / "advisor.yaml"
    path.write_text(yaml.safe_dump({"deployments": [dict(dep, targets=[vllm])]}))
    _, collector, metrics = make_registry()
    svc = Service(load_config(path), collector, metrics, base_dir=tmp_path)
    try:
        svc.scrape_once()
        path.write_text(yaml.safe_dump({"deployments": [dict(dep, targets=[sglang + "/"])]}))
        ok, message = svc.reload(path)
        assert ok, message
        svc.scrape_once()
        svc.scrape_once()
        result = svc.evaluate_once().deployments[0].as_dict()
    finally:
        svc.close()
    (target,) = result["targets"]
    assert target["up"], target
    assert result["engine"] == "sglang", result["engine"]
