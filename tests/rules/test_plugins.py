"""Third-party rules through the ``advisor.rules`` entry-point group, and the template module.

Each test installs a throw-away distribution: a folder on ``sys.path`` with ``acme_rules-0.1.dist-info``
(``METADATA`` + ``entry_points.txt``) and the plugin module beside it, which ``importlib.metadata`` discovers.
"""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from advisor.rules import registry
from advisor.rules.base import Rule
from advisor.rules.lifecycle import Lifecycle
from advisor.rules.template import TemplateRule, make_rule
from tests.rules.helpers import ev

MODULE = "acme_advisor_rules"

PLUGIN_SOURCE = textwrap.dedent(
    """
    from advisor.rules.base import Condition, Proposal


    class LongQueue:
        id = "acme_long_queue"
        supersedes = ()

        def __init__(self, limit):
            self.limit = limit

        def for_seconds(self):
            return 0.0

        def fires(self, ev):
            w = ev.stats.requests_waiting if ev.stats else None
            return Condition(None if w is None else w > self.limit, f"{w} waiting")

        def clears(self, ev):
            w = ev.stats.requests_waiting if ev.stats else None
            return Condition(None if w is None else w == 0, f"{w} waiting")

        def propose(self, ev):
            return [
                Proposal(self.id, "replicas", "increase", ev.ctx.replicas, ev.ctx.replicas + 1, "scale", "warning",
                         0.5, "acme: long queue", "acme: long queue", {"replicas": {"before": 1, "after": 2}}, {},
                         score=1.0)
            ]


    def make_rule(settings):
        return LongQueue(float(settings.get("limit", 100)))


    def make_raising(settings):
        raise RuntimeError("acme factory exploded")


    class Incomplete:
        id = "acme_incomplete"

        def fires(self, ev):
            return None


    def make_incomplete(settings):
        return Incomplete()


    class NoId(LongQueue):
        id = ""


    def make_no_id(settings):
        return NoId(1)
    """
)


def _install(root: Path, entry_points: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    dist = root / "acme_rules-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rules\nVersion: 0.1\n")
    lines = "\n".join(f"{name} = {target}" for name, target in entry_points.items())
    (dist / "entry_points.txt").write_text(f"[advisor.rules]\n{lines}\n")
    (root / f"{MODULE}.py").write_text(PLUGIN_SOURCE)
    monkeypatch.syspath_prepend(str(root))  # also invalidates the import caches


@pytest.fixture
def clean_module() -> Iterator[None]:
    yield
    sys.modules.pop(MODULE, None)


def _ours(rules: list[Rule]) -> list[Rule]:
    return [r for r in rules if r.id.startswith("acme_") or r.id == "template_waiting"]


def _problems(problems: list[str]) -> list[str]:
    return [p for p in problems if "acme" in p or "tmpl" in p]


@pytest.mark.usefixtures("clean_module")
def test_a_registered_plugin_is_loaded_with_its_settings_and_evaluated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install(tmp_path, {"acme_long_queue": f"{MODULE}:make_rule"}, monkeypatch)
    rules, problems = registry.load_plugins({"acme_long_queue": {"limit": 5}})
    assert _problems(problems) == []
    (rule,) = _ours(rules)
    assert rule.id == "acme_long_queue"
    lc = Lifecycle([rule])
    assert lc.evaluate(ev(now=0, requests_waiting=5)) == []  # 5 is not over the configured limit of 5
    (opened,) = lc.evaluate(ev(now=1, requests_waiting=6))
    assert (opened.kind, opened.recommendation.rule, opened.recommendation.dial) == (
        "opened",
        "acme_long_queue",
        "replicas",
    )
    (resolved,) = lc.evaluate(ev(now=2, requests_waiting=0))
    assert resolved.kind == "resolved"


@pytest.mark.usefixtures("clean_module")
@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("acme_no_such_module:make_rule", "ModuleNotFoundError"),
        (f"{MODULE}:no_such_factory", "AttributeError"),
        (f"{MODULE}:make_raising", "RuntimeError: acme factory exploded"),
        (f"{MODULE}:make_incomplete", "missing supersedes, for_seconds, clears, propose"),
        (f"{MODULE}:make_no_id", "id must be a non-empty string"),
    ],
    ids=[
        "an import error is reported and skipped",
        "a missing factory is reported and skipped",
        "a factory that raises is reported and skipped",
        "an object missing protocol members is reported and skipped",
        "an empty id is reported and skipped",
    ],
)
def test_a_broken_plugin_is_reported_and_skipped_never_fatal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    _install(tmp_path, {"acme_broken": target, "acme_good": f"{MODULE}:make_rule"}, monkeypatch)
    rules, problems = registry.load_plugins({})
    # the good plugin beside it still loads
    assert [r.id for r in _ours(rules)] == ["acme_long_queue"]
    (problem,) = _problems(problems)
    assert problem.startswith("rule plugin 'acme_broken'")
    assert target in problem and "skipped" in problem
    assert message in problem


def test_the_template_satisfies_the_rule_protocol() -> None:
    rule = make_rule({})
    for member in registry._REQUIRED:
        assert hasattr(rule, member), member
    typed: Rule = rule  # mypy checks the structural match
    assert isinstance(typed.id, str) and typed.id
    assert typed.supersedes == ()
    assert typed.for_seconds() == 60
    # fires above max_waiting, clears below half of it (hysteresis), cannot tell without the gauge
    assert typed.fires(ev(requests_waiting=101)).holds is True
    assert typed.fires(ev(requests_waiting=100)).holds is False
    assert typed.clears(ev(requests_waiting=50)).holds is False
    assert typed.clears(ev(requests_waiting=49)).holds is True
    assert typed.fires(ev()).holds is None
    assert typed.propose(ev(requests_waiting=101)) == []


def test_the_template_reads_its_settings() -> None:
    rule = make_rule({"max_waiting": 10, "for_seconds": 5})
    assert isinstance(rule, TemplateRule)
    assert (rule.max_waiting, rule.for_seconds()) == (10.0, 5.0)


@pytest.mark.usefixtures("clean_module")
def test_the_template_loads_as_an_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _install(tmp_path, {"tmpl": "advisor.rules.template:make_rule"}, monkeypatch)
    rules, problems = registry.load_plugins({"tmpl": {"max_waiting": 3}})
    assert _problems(problems) == []
    (rule,) = _ours(rules)
    assert rule.fires(ev(requests_waiting=4)).holds is True
