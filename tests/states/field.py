"""Field states: an operator's public report, replayed as the engine of that version exposes it.

A :class:`FieldState` is one row of the field-state table (issue 12, acceptance 1). It names its source (an
issue, PR or forum thread), the engine version, the deployment as the report describes it, and each replica's
two scrapes (the text that engine version serves on ``/metrics``: metric names checked in the engine's
source). :func:`run_field_state` serves the scrapes on loopback, writes the config, runs ``capacity-advisor
check-config`` and ``once --interval 1 --json`` in this process through the console script's entry point
(:func:`tests.inprocess.run_cli`: :func:`advisor.cli.main` with argv, stdout and stderr captured) and returns the
one deployment object.

Then :func:`check_field_state` asserts what the row states: snapshot values, the pools and ranks named, the
deployment state and reason, the advice that must come (first, or anywhere) and the advice that must never
come. The rows are written from the reports, independently of the adapters and rule modules.

Rows live in ``tests/states/test_field_*.py``, one file per class of error; every file builds a list of
``FieldState`` and parametrizes :func:`check_field_state` over it. :func:`run_field_states` runs a module's
states a few at a time (each ``once`` spends most of its second waiting between its two scrapes) before the
module's tests read each result; the numbered round modules (:func:`round_tests`) run all theirs in one pool at the
first one's fixture (:func:`shared_runs`). A state whose harness failed fails its own test.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.inprocess import run_cli
from tests.states import TwoScrapeServer

REPO_ROOT = Path(__file__).resolve().parents[2]

Rec = dict[str, Any]
Advice = tuple[str, str | None]
"""``(dial, action)``; ``action`` ``None`` matches any action on that dial."""


@dataclass
class FieldState:
    """One field state.

    Attributes:
        id: short test id (``vllm-triton-two-models``).
        source: URL of the public report the state is built from (issue, PR, forum thread).
        engine_version: the engine version whose exposition the scrapes reproduce (``vLLM 0.10.1``).
        deployment: the deployment config as the report implies (``targets`` are filled in).
        scrapes: per replica, its two scrapes (first, second), one second apart.
        files: extra files next to the config (``config.json`` for a model, ``file_sd`` …).
        extra_config: top-level config keys besides ``deployments`` (``rules``, ``data_quality`` …).
        snapshot: snapshot key → expected value (floats compared at 2 % relative; ``None`` means unknown).
        state: expected deployment state (``fresh``, ``stale``, ``unavailable``); ``None`` skips the check.
        state_reason_contains: substrings the snapshot's ``state_reason`` must contain.
        named: substrings that must appear in the deployment's JSON (pools, ranks, models, prefixes named).
        must_first: the advice that must come first (``None``: no requirement).
        must_propose: advice that must appear somewhere.
        must_never: advice that must never appear.
        no_advice: when true, no recommendation at all may be open.
        extra_check: a further check on the deployment object.
    """

    id: str
    source: str
    engine_version: str
    deployment: dict[str, Any]
    scrapes: list[tuple[str, str]]
    files: dict[str, str] = field(default_factory=dict)
    extra_config: dict[str, Any] = field(default_factory=dict)
    snapshot: dict[str, Any] = field(default_factory=dict)
    state: str | None = "fresh"
    state_reason_contains: Sequence[str] = ()
    named: Sequence[str] = ()
    must_first: Advice | None = None
    must_propose: Sequence[Advice] = ()
    must_never: Sequence[Advice] = ()
    no_advice: bool = False
    extra_check: Callable[[dict[str, Any]], None] | None = None


def run_field_state(tmp_path: Path, state: FieldState) -> dict[str, Any]:
    """Serve the state's scrapes, run ``check-config`` and ``once --json``; return the deployment object.

    Raises:
        AssertionError: the harness failed (config invalid, ``once`` failed, a target not scraped twice).
    """
    assert state.source.startswith("https://"), f"{state.id}: a field state names its public source"
    return run_once_on(tmp_path, state.deployment, state.scrapes, state.files, state.extra_config)


class FieldStateRuns:
    """``once --json``'s deployment object per state (:func:`run_field_states`); ``runs[state]`` returns it, or
    raises what that state's harness raised."""

    def __init__(self, futures: Mapping[str, Future[dict[str, Any]]]) -> None:
        self._futures = dict(futures)

    def __getitem__(self, state: FieldState) -> dict[str, Any]:
        return self._futures[state.id].result()


SHARED_WORKERS = 10
"""Field states of the round modules run at once (:func:`shared_runs`): each run spends ~1 s waiting between its
two scrapes and ~0.12 s of CPU (measured: the 79 round modules, 274 states, took 109 s one module at a time for 34 s
of CPU), so ten keep one process's CPU busy without a run's second scrape waiting long for it."""

ROUND_MODULE = re.compile(r"(^|/)tests/states/test_field_round\d+[a-z]?\.py$")
"""The round modules (:func:`round_tests`), by path: ``tests/conftest.py`` hands them to one test worker together,
so that their states run in one pool (:func:`shared_runs`) instead of each module's waiting in turn."""

_ROUNDS: dict[str, Sequence[FieldState]] = {}
"""Every imported round module's states by module name, registered by :func:`round_tests` at import."""
_SHARED: dict[tuple[str, str], Future[dict[str, Any]]] = {}
"""The runs of :func:`shared_runs` by (module name, state id); empty until they ran."""


def shared_runs(session: pytest.Session, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Run, the first time a round module asks (once per process), :func:`run_field_state` for every state of
    the registered round modules that have a test in ``session.items`` (the run's selection, in its order),
    :data:`SHARED_WORKERS` at a time; return when all have ended.

    All within the first module's fixture, not beside the tests: the runs print through
    :func:`tests.inprocess.run_cli`'s routes on ``sys.stdout``, which pytest's capture replaces at each test's
    start."""
    if _SHARED:
        return
    selected = dict.fromkeys(item.module.__name__ for item in session.items if isinstance(item, pytest.Function))
    with ThreadPoolExecutor(max_workers=SHARED_WORKERS, thread_name_prefix="field-state") as pool:
        for module in selected:
            for s in _ROUNDS.get(module, ()):
                _SHARED[(module, s.id)] = pool.submit(run_field_state, tmp_path_factory.mktemp(s.id), s)


def with_xfails(states: Sequence[FieldState], xfail: Mapping[str, str]) -> list[Any]:
    """``states`` as ``pytest.param`` values, each whose id is in ``xfail`` marked ``xfail(strict=True)`` with that
    reason (why the advisor is wrong there: the test passes only while it still fails)."""
    return [
        pytest.param(s, marks=pytest.mark.xfail(strict=True, reason=xfail[s.id])) if s.id in xfail else s
        for s in states
    ]


def run_field_states(
    tmp_path_factory: pytest.TempPathFactory, states: Sequence[FieldState], workers: int = 6
) -> FieldStateRuns:
    """:func:`run_field_state` for every state, ``workers`` at a time (each in its own directory and on its own
    loopback servers), all finished before this returns.

    A few at a time, not all: the runs share this process's CPU, and each must take its two scrapes about one
    second apart (``once --interval 1``; a frozen engine is told over at most 1.5 intervals). Six: a run spends most
    of its second waiting between its scrapes, so six fill a round file's states in one or two waves.
    """
    ids = [s.id for s in states]
    assert len(set(ids)) == len(ids), f"harness: duplicate state ids {ids}"
    dirs = {s.id: tmp_path_factory.mktemp(s.id) for s in states}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="field-state") as pool:
        futures = {s.id: pool.submit(run_field_state, dirs[s.id], s) for s in states}
    return FieldStateRuns(futures)


def round_tests(
    states: Sequence[FieldState], xfails: Mapping[str, str]
) -> tuple[Callable[..., FieldStateRuns], Callable[..., None]]:
    """A round file's module fixture ``once`` (:func:`shared_runs`: this module's ``states`` run beside every other
    selected round module's) and its test ``test_field_state``, parametrized over ``states`` with ``xfails``
    applied (:func:`with_xfails`), each waiting for its own state's run (``once[state]``); a round file binds both at
    module level:
    ``once, test_field_state = round_tests(STATES, XFAIL)`` (the calling module's name keys its states)."""

    caller = sys._getframe(1).f_globals
    module = caller["__name__"]
    ids = [s.id for s in states]
    assert len(set(ids)) == len(ids), f"harness: duplicate state ids {ids}"
    shared = bool(ROUND_MODULE.search(Path(caller["__file__"]).as_posix()))
    if shared:
        _ROUNDS[module] = states

    @pytest.fixture(scope="module", name="once")
    def once(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> FieldStateRuns:
        if not shared:  # a module the test workers may not hand out with the rounds: its states alone
            return run_field_states(tmp_path_factory, states)
        shared_runs(request.session, tmp_path_factory)
        return FieldStateRuns({s.id: _SHARED[(module, s.id)] for s in states})

    @pytest.mark.parametrize("state", with_xfails(states, xfails), ids=ids)
    def test_field_state(once: FieldStateRuns, state: FieldState) -> None:
        check_field_state(once[state], state)

    return once, test_field_state


def run_once_on(
    tmp_path: Path,
    deployment: Mapping[str, Any],
    scrapes: Sequence[tuple[str, str]],
    files: Mapping[str, str] | None = None,
    extra_config: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Serve each replica's two scrapes on loopback, write the config (``targets`` filled in) and its extra
    files, run ``check-config`` then ``once --interval 1 --json`` (:func:`tests.inprocess.run_cli`); return the
    one deployment object.

    Raises:
        AssertionError: the harness failed (config invalid, ``once`` failed, a target not scraped twice).
    """
    servers = [TwoScrapeServer(a, b) for a, b in scrapes]
    try:
        for name, text in (files or {}).items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text, encoding="utf-8")
        dep = {**deployment, "targets": [s.url for s in servers]}
        cfg = {**(extra_config or {}), "deployments": [dep]}
        cfg_path = tmp_path / "advisor.yaml"
        cfg_path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
        check = run_cli("check-config", str(cfg_path))
        assert check.returncode == 0, f"harness: config invalid:\n{check.stdout}\n{check.stderr}"
        proc = run_cli("once", "--config", str(cfg_path), "--interval", "1", "--json")
        assert proc.returncode == 0, f"once failed ({proc.returncode}):\n{proc.stderr}"
        out = json.loads(proc.stdout)
        for s in servers:
            assert s.hits >= 2, f"harness: target scraped {s.hits} times, expected 2"
    finally:
        for s in servers:
            s.stop()
    deps = out["deployments"]
    assert len(deps) == 1, deps
    result: dict[str, Any] = deps[0]
    return result


def brief(recs: Sequence[Rec]) -> str:
    """One line per recommendation, for assertion messages."""
    return "; ".join(
        f"{r.get('rule')}:{r.get('dial')} {r.get('action')} {r.get('current')!r}→{r.get('suggested')!r}" for r in recs
    )


def matching(recs: Sequence[Rec], advice: Advice) -> list[Rec]:
    """The recommendations (and their ``alternatives``, where present) that turn this dial this way."""
    dial, action = advice
    out: list[Rec] = []
    for r in recs:
        for cand in [r, *(r.get("alternatives") or [])]:
            if cand.get("dial") == dial and (action is None or cand.get("action") == action):
                out.append(cand)
    return out


def _close(got: Any, expected: Any) -> bool:
    if expected is None or got is None:
        return got is expected
    if isinstance(expected, bool | str):
        return bool(got == expected)
    if isinstance(expected, int | float):
        return isinstance(got, int | float) and got == pytest.approx(expected, rel=0.02, abs=1e-6)
    if isinstance(expected, Mapping):
        return isinstance(got, Mapping) and all(_close(got.get(k), v) for k, v in expected.items())
    return bool(got == expected)


def check_field_state(result: dict[str, Any], state: FieldState) -> None:
    """Assert every expectation the state declares against ``once --json``'s deployment object."""
    snap = result.get("snapshot") or {}
    if state.state is not None:
        assert result.get("state") == state.state, (
            f"{state.id}: deployment {result.get('state')} ({snap.get('state_reason')}), expected {state.state}"
        )
    reason = str(snap.get("state_reason") or "")
    for part in state.state_reason_contains:
        assert part in reason, f"{state.id}: state_reason {reason!r} lacks {part!r}"
    for key, expected in state.snapshot.items():
        assert _close(snap.get(key), expected), f"{state.id}: snapshot {key} = {snap.get(key)!r}, expected {expected!r}"
    text = json.dumps(result)
    for name in state.named:
        assert name in text, f"{state.id}: {name!r} not named anywhere in the deployment's JSON"
    recs: list[Rec] = list(result.get("recommendations") or [])
    if state.no_advice:
        assert not recs, f"{state.id}: advice given where none is right: {brief(recs)}"
    if state.must_first is not None:
        assert recs, f"{state.id}: no advice; expected {state.must_first} first. rules: {result.get('rules')}"
        first = recs[0]
        dial, action = state.must_first
        assert first.get("dial") == dial and (action is None or first.get("action") == action), (
            f"{state.id}: first advice {brief(recs[:1])}, expected {state.must_first}; all: {brief(recs)}"
        )
    for advice in state.must_propose:
        assert matching(recs, advice), f"{state.id}: {advice} not proposed; got {brief(recs)}"
    for advice in state.must_never:
        hits = matching(recs, advice)
        assert not hits, f"{state.id}: wrong advice {advice}: {brief(hits)}"
    if state.extra_check is not None:
        state.extra_check(result)


def number(value: Any) -> float:
    """A recommendation's ``current``/``suggested`` as a number (it may be printed as a string)."""
    if isinstance(value, bool):
        raise AssertionError(f"not a number: {value!r}")
    if isinstance(value, int | float):
        return float(value)
    m = re.search(r"-?\d[\d,_]*(?:\.\d+)?", str(value))
    assert m, f"no number in {value!r}"
    return float(m.group(0).replace(",", "").replace("_", ""))
