"""The status page rendered from hand-built cycle results with known severities and target states: the order by
need, the "needs attention" list, "1 of 2 targets down", the configuration the advisor assumed, the drift from
the engine, alternatives and withheld turns, the failed-reload banner, the forms and their CSRF token, and that
operator- and target-controlled text is escaped and its URLs redacted."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from advisor.acks import Ack
from advisor.deployment_view import DeploymentView
from advisor.domain import Recommendation
from advisor.evaluate import TargetView, engine_view
from advisor.results import CycleResult, DeploymentResult
from advisor.rules.lifecycle import RuleStatus
from advisor.status_page import render_status_page
from tests.factories import context, evaluation


def rec(dep: str, severity: str, rec_id: str, **kw: Any) -> Recommendation:
    fields: dict[str, Any] = {
        "id": rec_id,
        "deployment": dep,
        "rule": "kv_saturation",
        "dial": "replicas",
        "action": "raise",
        "current": 1,
        "suggested": 3,
        "flag": "--replicas 3",
        "severity": severity,
        "confidence": 0.8,
        "summary": f"{dep} KV pool saturated",
        "description": "KV usage 99% for 5 min",
        "runbook": "https://example.org/runbook#kv_saturation",
        "opened_at": 1000.0,
        "predicted_effect": {"max_concurrency": {"before": 10, "after": 30}},
        "evidence": {"kv_cache_usage_ratio": 0.99},
        "problem": "saturation",
    }
    fields.update(kw)
    return Recommendation(**fields)


def dep(
    name: str,
    *recs: Recommendation,
    state: str = "fresh",
    up: tuple[bool, ...] = (True,),
    ctx_overrides: dict[str, Any] | None = None,
    **ev: Any,
) -> DeploymentResult:
    ctx = dataclasses.replace(context(**(ctx_overrides or {})), name=name)
    e = dataclasses.replace(evaluation(state=state, ctx=ctx), **ev)
    targets = tuple(
        TargetView(
            f"http://{name}-{i}.internal:8000/metrics", u, None if u else "timeout", None if u else "timed out", ()
        )
        for i, u in enumerate(up)
    )
    return DeploymentResult(
        name=name,
        engine="vllm",
        state=state,
        evaluation=e,
        snapshot=empty_view(ctx, len(up)),
        capacity=ctx.capacity,
        targets=targets,
        recommendations=recs,
        rule_statuses=(RuleStatus("kv_saturation", name, "firing" if recs else "inactive", "usage 0.99 > 0.95"),),
        target_states=tuple((state if u else "unavailable", "" if u else "timed out") for u in up),
    )


def empty_view(ctx: Any, replicas: int) -> DeploymentView:
    """A deployment view with nothing reported (the page reads the evaluation and the recommendations)."""
    return DeploymentView(
        reported=engine_view([], None, replicas, "ok"),
        kv_cache_capacity_tokens_predicted=ctx.capacity.kv_cache_tokens,
        capacity_model_error_ratio=None,
        goodput_ratio=None,
        goodput_ratio_bounds=(None, None),
        goodput_tokens_per_second=None,
        ttft_within_target_ratio=None,
        tpot_within_target_ratio=None,
        max_model_len=ctx.capacity.max_model_len,
        max_model_len_ceiling_requests=None,
        pool_usage={},
    )


def no_ack(_rid: str) -> Ack | None:
    return None


def fleet() -> list[DeploymentResult]:
    """Seven deployments, given in name order, which is not the order of need."""
    return [
        dep("a-quiet"),
        dep("b-info", rec("b-info", "info", "b1")),
        dep("c-warn", rec("c-warn", "warning", "c1")),
        dep("d-crit", rec("d-crit", "warning", "d2"), rec("d-crit", "critical", "d1")),
        dep("e-down", state="unavailable", up=(False, False)),
        dep("f-halfdown", up=(True, False)),
        dep("g-stale", state="stale"),
    ]


def section(page: str, ident: str) -> str:
    start = page.index(f"<section id='{ident}'>")
    return page[start : page.index("</section>", start)]


def test_deployments_are_ordered_by_need_in_the_overview_and_the_sections() -> None:
    page = render_status_page(CycleResult(2000.0, tuple(fleet())), [], no_ack)
    expected = ["d-crit", "e-down", "c-warn", "f-halfdown", "g-stale", "b-info", "a-quiet"]
    overview = page[page.index("<table id='overview'>") :]
    overview = overview[: overview.index("</table>")]
    assert re.findall(r"<tr><td><a href='#dep-([^']+)'>", overview) == expected
    assert re.findall(r"<section id='dep-([^']+)'>", page) == expected
    # the critical incident of d-crit comes before its warning
    assert page.index("id='rec-d1'") < page.index("id='rec-d2'")


def test_the_needs_attention_list_is_above_the_overview_and_holds_critical_warning_and_unhealthy() -> None:
    page = render_status_page(CycleResult(2000.0, tuple(fleet())), [], no_ack)
    attention = section(page, "needs-attention")
    assert page.index("<section id='needs-attention'>") < page.index("<table id='overview'>")
    assert re.findall(r"data-deployment='([^']+)'", attention) == [
        "d-crit",
        "e-down",
        "c-warn",
        "f-halfdown",
        "g-stale",
    ]
    assert "1 of 2 targets down" in attention and "2 of 2 targets down" in attention
    assert "href='#rec-d1'" in attention and "href='#rec-c1'" in attention
    assert "b1" not in attention  # info only: in the overview, not in the list


def test_replicas_down_show_in_the_overview() -> None:
    page = render_status_page(CycleResult(2000.0, tuple(fleet())), [], no_ack)
    row = re.search(r"<tr><td><a href='#dep-f-halfdown'>.*?</tr>", page)
    assert row is not None and "<td class='targets'>1 of 2 targets down</td>" in row.group(0)
    row = re.search(r"<tr><td><a href='#dep-a-quiet'>.*?</tr>", page)
    assert row is not None and "<td class='targets'>1 of 1 target up</td>" in row.group(0)


def test_nothing_needs_attention_when_all_is_well() -> None:
    page = render_status_page(CycleResult(2000.0, (dep("a-quiet"),)), [], no_ack)
    assert "Nothing needs attention." in section(page, "needs-attention")


def test_rules_that_could_not_run_are_named_beside_nothing_needs_attention() -> None:
    """Breaker 19: with goodput unknown (no TTFT histogram) and nothing firing, the page said only "Nothing needs
    attention." — silence read as health. The rules that could not run are named, with their deployment; rules
    not run because the data is stale or unavailable are not (the deployment's state already says so)."""
    blind = dataclasses.replace(
        dep("llama"),
        rule_statuses=(
            RuleStatus("kv_saturation", "llama", "inactive", "usage 0.40 < 0.95"),
            RuleStatus("goodput", "llama", "unknown", "could not run: no TTFT histogram on the page"),
        ),
    )
    stale = dataclasses.replace(
        dep("old", state="stale"),
        rule_statuses=(RuleStatus("goodput", "old", "unknown", "not evaluated: data is stale"),),
    )
    page = render_status_page(CycleResult(2000.0, (blind, dep("a-quiet"))), [], no_ack)
    attention = section(page, "needs-attention")
    assert "Nothing needs attention." in attention
    assert "<a href='#dep-llama'>llama</a>: goodput" in attention
    assert "a-quiet" not in attention
    page = render_status_page(CycleResult(2000.0, (stale,)), [], no_ack)
    assert "id='blind'" not in section(page, "needs-attention")


def test_each_deployment_shows_the_configuration_the_advisor_assumed() -> None:
    d = dep(
        "big",
        ctx_overrides={"tensor_parallel_size": 2, "max_model_len": 16384, "gpu_memory_utilization": 0.85},
    )
    page = render_status_page(CycleResult(2000.0, (d,)), [], no_ack)
    table = section(page, "dep-big")
    assert "<tr><th>model</th><td>meta-llama/Llama-3.1-8B-Instruct</td></tr>" in table
    assert "<tr><th>GPU</th><td>NVIDIA H100 SXM</td></tr>" in table
    assert "<tr><th>tensor parallel (TP)</th><td>2</td></tr>" in table
    assert "<tr><th>max-model-len</th><td>16,384</td></tr>" in table
    assert "<tr><th>budget (gpu_memory_utilization)</th><td>0.85</td></tr>" in table


def test_a_tensorrt_llm_deployment_shows_its_free_memory_fraction_as_the_budget() -> None:
    """Breaker 21: beside a turn "gpu_memory_utilization 0.5 → 0.9" on a Triton TensorRT-LLM deployment
    (``kv_cache_config.free_gpu_memory_fraction: 0.5``) the page showed "budget (gpu_memory_utilization) 0.90", a
    value TensorRT-LLM never reads: it shows the fraction the turn starts from, named as the engine names it."""
    from advisor.capacity.inputs import EngineSettings

    trt = {"engine": "trtllm", "engine_settings": EngineSettings(free_gpu_memory_fraction=0.5)}
    table = section(render_status_page(CycleResult(2000.0, (dep("trt", ctx_overrides=trt),)), [], no_ack), "dep-trt")
    assert "<tr><th>budget (kv_cache_free_gpu_memory_fraction)</th><td>0.50</td></tr>" in table, table


def test_the_drift_from_the_engine_reads_as_a_signed_percentage_and_warns_beyond_the_bound() -> None:
    far = dep("far", capacity_model_error_ratio=8.9, kv_capacity_tokens=50_000.0, kv_capacity_source="engine")
    near = dep("near", capacity_model_error_ratio=-0.05, kv_capacity_tokens=50_000.0, kv_capacity_source="engine")
    blind = dep("blind", capacity_model_error_ratio=None, kv_capacity_tokens=None, kv_capacity_source="model")
    page = render_status_page(CycleResult(2000.0, (far, near, blind)), [], no_ack, drift_bound=0.15)
    assert "+890% vs engine" in section(page, "dep-far")
    assert "engine reports 50,000" in section(page, "dep-far")
    assert "beyond the ±15% bound" in section(page, "dep-far")
    assert "-5.0% vs engine" in section(page, "dep-near") and "beyond" not in section(page, "dep-near")
    assert "Capacity model vs engine: unknown" in section(page, "dep-blind")


def test_alternatives_and_withheld_turns_show_with_their_reasons() -> None:
    r = rec(
        "chat",
        "warning",
        "x1",
        alternatives=(
            {
                "rule": "kv_saturation",
                "dial": "kv_cache_dtype",
                "action": "set",
                "current": "auto",
                "suggested": "fp8",
                "flag": "--kv-cache-dtype fp8",
                "predicted_effect": {"kv_cache_tokens": {"before": 100_000, "after": 200_000}},
                "confidence": 0.6,
                "why_rank": "adds no GPU; riskier than gpu_memory_utilization",
            },
        ),
        withheld=(
            {"rule": "pool_context", "dial": "max_model_len", "reason": "observed prompts p99 900 tokens ≪ 8192"},
        ),
    )
    s = section(render_status_page(CycleResult(2000.0, (dep("chat", r),)), [], no_ack), "dep-chat")
    assert "Suggested — kv_saturation: <b>raise replicas 1 → 3</b>" in s
    alt = s[s.index("<table class='alternatives'>") :]
    assert "set kv_cache_dtype auto → fp8" in alt and "--kv-cache-dtype fp8" in alt
    assert "kv cache tokens 100,000 → 200,000" in alt
    assert "adds no GPU; riskier than gpu_memory_utilization" in alt
    wh = s[s.index("<table class='withheld'>") :]
    assert "<td>pool_context</td><td>max_model_len</td><td>observed prompts p99 900 tokens ≪ 8192</td>" in wh
    assert "<table class='rules'>" in s and "usage 0.99 &gt; 0.95" in s


def test_a_failed_reload_shows_a_banner_until_a_reload_succeeds() -> None:
    res = CycleResult(2000.0, (dep("chat"),))
    failed = (False, "deployments[0].gpu: unknown GPU 'H900' (see https://bob:hunter2@wiki/x?token=abc)", 1500.0)
    page = render_status_page(res, [], no_ack, last_reload=failed)
    banner = page[page.index("<div class='banner' id='reload-failed'") :]
    banner = banner[: banner.index("</div>")]
    assert "Config reload failed" in banner and "unknown GPU &#x27;H900&#x27;" in banner
    assert "1970-01-01T00:25:00Z" in banner
    assert "hunter2" not in page and "token=abc" not in page
    assert page.index("id='reload-failed'") < page.index("id='needs-attention'")
    assert "reload-failed" not in render_status_page(res, [], no_ack, last_reload=(True, "reloaded", 1600.0))
    assert "reload-failed" not in render_status_page(res, [], no_ack)


def test_forms_carry_the_csrf_token_and_are_left_out_when_writes_are_refused() -> None:
    res = CycleResult(2000.0, (dep("chat", rec("chat", "critical", "id/1")),))
    page = render_status_page(res, [], no_ack, csrf_token="tok123")
    forms = re.findall(r"<form class='act (\w+)' method='post' action='([^']+)'>(.*?)</form>", page)
    assert [(kind, action) for kind, action, _ in forms] == [
        ("ack", "/api/v1/recommendations/id%2F1/ack"),
        ("snooze", "/api/v1/recommendations/id%2F1/snooze"),
    ]
    assert all("<input type='hidden' name='csrf_token' value='tok123'>" in body for _, _, body in forms)
    assert "name='duration'" in forms[1][2]
    off = render_status_page(res, [], no_ack, csrf_token=None)
    assert "<form" not in off and "Acknowledge and snooze are off" in off


def test_who_acknowledged_and_when_is_shown() -> None:
    res = CycleResult(2000.0, (dep("chat", rec("chat", "critical", "r1")),))
    ack = Ack("r1", "ack", "on it", 1800.0, None, "alice", "chat")
    page = render_status_page(res, [], lambda rid: ack if rid == "r1" else None)
    assert "acknowledged by alice at 1970-01-01T00:30:00Z: on it" in section(page, "dep-chat")
    assert "acknowledged by alice" in section(page, "needs-attention")


def test_operator_and_target_text_is_escaped_and_urls_redacted() -> None:
    evil = "x<script>alert(1)</script>"
    r = rec(
        evil,
        "critical",
        "e1",
        summary="<img src=x onerror=alert(2)>",
        description="target https://u:secretpw@10.0.0.1:8000/metrics?token=t0 is slow",
        withheld=({"rule": "r", "dial": "d", "reason": "<b>bold</b>"},),
    )
    d = dataclasses.replace(dep("safe", r), name=evil)
    page = render_status_page(CycleResult(2000.0, (d,)), [], no_ack, csrf_token="t'><script>")
    assert "<script>" not in page and "<img" not in page and "<b>bold</b>" not in page
    assert "x&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "secretpw" not in page and "token=t0" not in page
    assert "10.0.0.1:8000" in page  # the host stays, for the operator


def test_runbook_links_go_to_the_configured_runbook_base_url() -> None:
    # issue 13 ("the runbook base URL is configurable for internal wikis"): the page links the operator's wiki,
    # as the notifications' runbook_url does, not the default runbook on GitHub
    default = "https://github.com/llm-capacity-advisor/llm-capacity-advisor/blob/main/rules/runbook.md"
    r = rec("d-crit", "critical", "d1", runbook=f"{default}#kv-saturation")
    page = render_status_page(
        CycleResult(2000.0, (dep("d-crit", r),)), [], no_ack, runbook_base_url="https://wiki.example/runbook"
    )
    assert "<a href='https://wiki.example/runbook#kv-saturation'>runbook</a>" in page
    assert default not in page
    # left unset, the default stays
    assert f"<a href='{default}#kv-saturation'>runbook</a>" in render_status_page(
        CycleResult(2000.0, (dep("d-crit", r),)), [], no_ack
    )


def test_no_weight_quantization_reads_as_none_not_unknown() -> None:
    # seen on the demo's kv-saturated deployment (quantization: null): "set weight_quantization unknown → fp8"
    alt = {
        "rule": "kv_saturation",
        "dial": "weight_quantization",
        "action": "set",
        "current": None,
        "suggested": "fp8",
        "flag": "--quantization fp8",
        "predicted_effect": {},
        "confidence": 0.75,
        "why_rank": "adds no GPU; highest stated risk (weight quantization)",
    }
    r = rec("d-crit", "critical", "d1", alternatives=(alt,))
    page = render_status_page(CycleResult(2000.0, (dep("d-crit", r),)), [], no_ack)
    assert "set weight_quantization none → fp8" in page
    assert "weight_quantization unknown" not in page


def test_the_ceiling_beside_running_says_it_is_at_max_model_len() -> None:
    """Walkthrough (2026-12-07): "running / ceiling 30 / 23.3" read as more running than the engine can hold; the
    ceiling is the sequences of max-model-len the pool holds (``advisor_concurrency_ceiling``), and requests shorter
    than that run above it. The column says which ceiling it is."""
    page = render_status_page(CycleResult(2000.0, (dep("a-quiet"),)), [], no_ack)
    assert "<th>running / ceiling at max-model-len</th>" in section(page, "dep-a-quiet")
