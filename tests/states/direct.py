"""A field state's rules, run in-process on the state's own :class:`~advisor.rules.base.Evaluation` (issue 13).

``once --json`` shows what the lifecycle made of the rules' proposals. Until the lifecycle routes
``Proposal.withheld`` into the incident's ``withheld`` (helper "incidents"), a withheld proposal is not visible
there, so the field-state tests also assert on the rules' proposals directly: :func:`rule_proposals` parses the
state's config as the daemon does (:func:`advisor.config.parse_config`, :func:`advisor.service.deployment_context`,
:func:`advisor.service.build_rules`), reads each replica's two scrapes with the engine's adapter
(:func:`advisor.observe.observe`), builds the evaluation one second after the first scrape
(:func:`advisor.evaluate.evaluate_deployment`) and runs every rule's ``fires`` and, where it holds, ``propose``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from advisor.config import parse_config
from advisor.domain import TimedSnapshot
from advisor.evaluate import Quality, TargetView, evaluate_deployment
from advisor.observe import observe
from advisor.rules.base import Condition, Evaluation, Proposal
from advisor.service import build_rules, deployment_context
from tests.states.field import FieldState

T0 = 1_000_000.0
"""Unix time of each replica's first scrape; the second is one second later, as ``once --interval 1`` takes them."""


@dataclass(frozen=True)
class RuleRun:
    """One rule's reading of the state: its fire condition and, when it holds, its proposals."""

    rule: str
    fires: Condition
    proposals: tuple[Proposal, ...]


def rule_proposals(tmp_path: Path, state: FieldState) -> tuple[Evaluation, list[RuleRun]]:
    """The state's evaluation and every rule's fire condition and proposals (``propose`` only where it fires).

    Raises:
        AssertionError: a scrape does not parse as the state's engine.
    """
    for name, text in state.files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    urls = [f"http://127.0.0.1:{9000 + i}/metrics" for i in range(len(state.scrapes))]
    cfg = parse_config(
        {**state.extra_config, "deployments": [{**state.deployment, "targets": urls}]}, base_dir=tmp_path
    )
    dep = cfg.deployments[0]
    ctx = deployment_context(dep, tmp_path)
    views = []
    for url, pages in zip(urls, state.scrapes, strict=True):
        history = []
        for i, page in enumerate(pages):
            seen = observe(page, dep.engine, dep.served_model)
            assert seen.snapshot is not None, f"{state.id}: scrape {i} of {url}: {seen.error_message}"
            history.append(TimedSnapshot(url, T0 + i, seen.snapshot))
        views.append(TargetView(url, True, None, None, tuple(history)))
    dq = cfg.data_quality
    quality = Quality(1.0, dq.stale_after_intervals, dq.frozen_after, dq.capacity_model_error_bound)
    ev, _ = evaluate_deployment(ctx, views, T0 + 1, 3.0, quality)
    runs = []
    for rule in build_rules(cfg):
        cond = rule.fires(ev)
        props = tuple(rule.propose(ev)) if cond.holds else ()
        runs.append(RuleRun(rule.id, cond, props))
    return ev, runs


def withheld_of(runs: list[RuleRun]) -> list[tuple[str, str, str]]:
    """``(rule, dial, reason)`` of every withheld proposal of the rules that fire."""
    return [(r.rule, p.dial, p.withheld) for r in runs for p in r.proposals if p.withheld]


def suggested_of(runs: list[RuleRun]) -> list[Proposal]:
    """Every proposal of the rules that fire that is not withheld (what the lifecycle may suggest)."""
    return [p for r in runs for p in r.proposals if not p.withheld]


def brief_runs(runs: list[RuleRun]) -> str:
    """One line per firing rule, for assertion messages."""
    out: list[str] = []
    for r in runs:
        if r.fires.holds:
            props = ", ".join(f"{p.dial} {p.action}{' [withheld]' if p.withheld else ''}" for p in r.proposals)
            out.append(f"{r.rule}: {props or '-'}")
    return "; ".join(out) or "no rule fires"
