"""Issue 15, acceptance 4: the fast simulator equals the pre-speed-up code path for the same seed.

The fast :class:`~advisor.sim.engine.Replica` and the kept :class:`~advisor.sim.engine.ReferenceReplica` run the
same fleet; every request's timestamps and counters, every replica's running totals, every series each replica
serves on ``/metrics`` (at several instants, not only at the end) and :func:`~advisor.sim.fleet.simulate`'s summary
must agree within 1e-9 relative. Configurations cover batch sizes, arrival rates, preemption-heavy and
long-context runs, a small token budget, prefill without chunking, prefix caching, speculative decoding (always on
and disabled by batch size), truncation and rejection, several replicas under both routers, the demo scenarios,
and random small engines (hypothesis).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from advisor.capacity.hardware import get_gpu
from advisor.capacity.perf import PerfAssumptions
from advisor.sim.engine import (
    EngineConfig,
    PrefixCaching,
    ReferenceReplica,
    Replica,
    ReplicaObserver,
    SimRequest,
    Speculative,
    engine_config,
)
from advisor.sim.exposition import SGLangCollector, VLLMCollector, render
from advisor.sim.fleet import Fleet, Router, simulate
from advisor.sim.metrics import SGLangMetrics, VLLMMetrics
from advisor.sim.scenarios import DEMO_SCENARIOS
from advisor.sim.traffic import Arrival, GammaGaps, LognormalLengths, OnOff, Poisson, TrafficProfile
from tests.sim.conftest import llama_engine, llama_inputs

REL = 1e-9
MODEL = llama_engine().model_name

REQUEST_FIELDS = (
    "id",
    "arrival",
    "prompt_tokens",
    "output_tokens",
    "generated",
    "computed",
    "blocks",
    "shared_blocks",
    "cached_tokens",
    "first_scheduled",
    "first_token",
    "last_token",
    "finished",
    "itl_max",
    "preemptions",
    "finish_reason",
)
REPLICA_FIELDS = (
    "now",
    "steps",
    "busy_seconds",
    "preemptions",
    "prompt_tokens_computed",
    "generation_tokens",
    "finished",
    "rejected",
    "peak_usage",
    "usage_seconds",
    "running_seconds",
    "free_blocks",
    "num_running",
    "num_waiting",
    "kv_usage",
)


def close(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= REL * max(abs(a), abs(b))
    return a == b


def assert_same(ref: Any, fast: Any, where: str = "") -> None:
    """``ref`` and ``fast`` equal, floats within 1e-9 relative (dicts and lists element by element)."""
    if isinstance(ref, dict):
        assert isinstance(fast, dict) and ref.keys() == fast.keys(), where
        for k in ref:
            assert_same(ref[k], fast[k], f"{where}.{k}")
    elif isinstance(ref, list | tuple):
        assert isinstance(fast, list | tuple) and len(ref) == len(fast), f"{where}: {len(ref)} vs {len(fast)}"
        for i, (x, y) in enumerate(zip(ref, fast, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    else:
        assert close(ref, fast), f"{where}: reference {ref!r}, fast {fast!r}"


def samples(text: bytes) -> dict[str, float]:
    """Every sample line of an exposition, series → value."""
    out: dict[str, float] = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


class Trace:
    """Every observer call, in order, with what it was given (a :class:`~advisor.sim.engine.ReplicaObserver`)."""

    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def on_admitted(self, req: SimRequest, now: float, queried_tokens: int, hit_tokens: int) -> None:
        self.events.append(("admitted", req.id, now, queried_tokens, hit_tokens))

    def on_step(self, now: float, tokens: int, prefill_tokens: int, decode_tokens: int) -> None:
        self.events.append(("step", now, tokens, prefill_tokens, decode_tokens))

    def on_itl(self, seconds: float, count: int) -> None:
        self.events.append(("itl", seconds, count))

    def on_first_token(self, req: SimRequest, now: float) -> None:
        self.events.append(("first_token", req.id, now))

    def on_preempted(self, req: SimRequest, now: float) -> None:
        self.events.append(("preempted", req.id, now, req.generated))

    def on_finished(self, req: SimRequest, now: float) -> None:
        self.events.append(("finished", req.id, now, req.generated, req.finish_reason))

    def on_spec(self, drafts: int, draft_tokens: int, accepted_tokens: int, accepted_per_pos: Sequence[int]) -> None:
        self.events.append(("spec", drafts, draft_tokens, accepted_tokens, list(accepted_per_pos)))


def run(
    config: EngineConfig,
    profile: TrafficProfile,
    *,
    reference: bool,
    duration: float,
    seed: int = 1,
    replicas: int = 1,
    router: Router = "least-loaded",
    sglang: bool = False,
    scrapes: int = 7,
) -> dict[str, Any]:
    """Run a fleet, scraping every replica's ``/metrics`` ``scrapes`` times, then drain; everything observable."""
    metrics: list[VLLMMetrics | SGLangMetrics] = []
    traces: list[Trace] = []

    def observers(i: int) -> list[ReplicaObserver]:
        spec = config.speculative
        m = SGLangMetrics() if sglang else VLLMMetrics(config.max_model_len, spec.num_speculative_tokens if spec else 0)
        metrics.append(m)
        traces.append(Trace())
        return [m, traces[-1]]

    fleet = Fleet(
        config, profile, replicas=replicas, router=router, seed=seed, observers=observers, reference=reference
    )
    assert all(isinstance(r, ReferenceReplica if reference else Replica) for r in fleet.replicas)
    assert reference or all(type(r) is Replica for r in fleet.replicas)
    collectors = [
        SGLangCollector(r, m) if isinstance(m, SGLangMetrics) else VLLMCollector(r, m, created=1.7e9)
        for r, m in zip(fleet.replicas, metrics, strict=True)
    ]
    pages = []
    for k in range(1, scrapes + 1):
        fleet.advance(duration * k / scrapes)
        pages.append([samples(render(c)) for c in collectors])
        pages.append([{f: getattr(r, f) for f in REPLICA_FIELDS} for r in fleet.replicas])
    fleet.advance(duration * 3, arrivals=False)
    return {
        "pages": pages,
        "requests": [[getattr(q, f) for f in REQUEST_FIELDS] for q in fleet.requests],
        "replicas": [{f: getattr(r, f) for f in REPLICA_FIELDS} for r in fleet.replicas],
        "final": [samples(render(c)) for c in collectors],
        "observed": [t.events for t in traces],
    }


def assert_paths_agree(config: EngineConfig, profile: TrafficProfile, **kw: Any) -> dict[str, Any]:
    ref = run(config, profile, reference=True, **kw)
    fast = run(config, profile, reference=False, **kw)
    assert_same(ref, fast)
    return ref


def chat(rate: float) -> TrafficProfile:
    return TrafficProfile(Poisson(rate), LognormalLengths(1500, 0.5, 300, 1.0))


def long_requests(rate: float) -> TrafficProfile:
    return TrafficProfile(GammaGaps(rate, 1.0), LognormalLengths(6000, 0.2, 600, 0.3, max_prompt_tokens=7500))


CASES: dict[str, tuple[EngineConfig, TrafficProfile, dict[str, Any]]] = {
    "batch-64-saturated": (llama_engine(max_num_seqs=64), chat(16.0), {}),
    "batch-8": (llama_engine(max_num_seqs=8), chat(4.0), {}),
    "batch-256-light": (llama_engine(), chat(1.0), {}),
    "batch-256-overloaded": (llama_engine(), chat(40.0), {}),
    "preemption-heavy": (llama_engine(gpu_memory_utilization=0.5), long_requests(4.0), {}),
    "long-context": (
        llama_engine(max_model_len=32768, max_num_seqs=64),
        TrafficProfile(Poisson(1.0), LognormalLengths(20000, 0.3, 500, 0.8, max_prompt_tokens=32000)),
        {},
    ),
    "small-token-budget": (llama_engine(max_num_batched_tokens=512), chat(6.0), {}),
    "no-chunked-prefill": (dataclasses.replace(llama_engine(), chunked_prefill=False), chat(8.0), {}),
    "prefix-caching": (dataclasses.replace(llama_engine(), prefix_caching=PrefixCaching(0.6)), chat(10.0), {}),
    "speculative": (dataclasses.replace(llama_engine(), speculative=Speculative()), chat(4.0), {}),
    "speculative-off-above-8": (
        dataclasses.replace(llama_engine(), speculative=Speculative(disable_by_batch_size=8)),
        chat(6.0),
        {},
    ),
    "truncated-and-rejected": (
        llama_engine(max_model_len=2048),
        TrafficProfile(Poisson(4.0), LognormalLengths(1500, 0.6, 400, 1.0)),
        {},
    ),
    "step-and-request-overheads": (
        dataclasses.replace(
            llama_engine(),
            cost=dataclasses.replace(llama_engine().cost, overhead_seconds=0.002),
            request_overhead_seconds=0.03,
        ),
        chat(8.0),
        {"replicas": 2},
    ),
    "three-replicas-round-robin": (llama_engine(max_num_seqs=32), chat(12.0), {"replicas": 3, "router": "round-robin"}),
    "three-replicas-least-loaded": (llama_engine(max_num_seqs=32), chat(12.0), {"replicas": 3}),
    "calibrated-prior-overheads": (  # the fitted factors: a per-step and a per-request overhead, KV-read efficiency
        engine_config(
            llama_inputs(max_num_seqs=64),
            get_gpu("H100-SXM"),
            model_name=MODEL,
            assumptions=PerfAssumptions(
                memory_bandwidth_efficiency=0.64,
                kv_bandwidth_efficiency=0.53,
                compute_efficiency=0.44,
                step_overhead_seconds=0.0036,
                prefill_overhead_seconds=0.047,
            ),
        ),
        chat(12.0),
        {"replicas": 2},
    ),
    "serial-attention-per-seq-overhead": (  # issue 17 part 2's terms: attention after the GEMMs, CPU per sequence
        engine_config(
            llama_inputs(max_num_seqs=64),
            get_gpu("H100-SXM"),
            model_name=MODEL,
            assumptions=PerfAssumptions(
                attention_serial_fraction=1.0,
                step_overhead_per_seq_seconds=40e-6,
                allreduce_hop_latency_seconds=1e-6,
                prefill_overhead_seconds=0.02,
            ),
        ),
        chat(12.0),
        {"replicas": 2},
    ),
    "on-off-sglang": (
        llama_engine(max_num_seqs=64),
        TrafficProfile(OnOff(20.0, 0.5, 10.0, 10.0), LognormalLengths(1500, 0.5, 300, 1.0)),
        {"sglang": True},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("seed", [1, 2])
def test_the_fast_path_equals_the_reference_path(name: str, seed: int) -> None:
    config, profile, kw = CASES[name]
    ref = assert_paths_agree(config, profile, duration=40.0, seed=seed, **kw)
    assert ref["replicas"][0]["steps"] > 0


def test_the_cases_exercise_what_they_are_named_for() -> None:
    heavy = run(*CASES["preemption-heavy"][:2], reference=True, duration=40.0)
    assert heavy["replicas"][0]["preemptions"] > 0
    truncated = run(*CASES["truncated-and-rejected"][:2], reference=True, duration=40.0)
    assert truncated["replicas"][0]["rejected"] > 0
    assert any(q[REQUEST_FIELDS.index("finish_reason")] == "length" for q in truncated["requests"])
    spec = run(*CASES["speculative-off-above-8"][:2], reference=True, duration=40.0)
    assert spec["final"][0]['vllm:spec_decode_num_drafts_total{engine="0",model_name="' + MODEL + '"}'] > 0


@pytest.mark.parametrize("scenario", DEMO_SCENARIOS, ids=lambda s: s.name)
def test_the_demo_scenarios_serve_the_same_pages(scenario: Any) -> None:
    assert_paths_agree(
        scenario.engine_config(),
        scenario.traffic,
        duration=120.0,
        seed=scenario.seed,
        replicas=scenario.replicas,
        router=scenario.router,
        sglang=scenario.engine_format == "sglang",
    )


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_simulate_summaries_agree(seed: int) -> None:
    config, profile = llama_engine(max_num_seqs=64), chat(16.0)
    kw: dict[str, Any] = {"duration": 60.0, "slo_ttft_seconds": 2.5, "slo_tpot_seconds": 0.1, "seed": seed}
    ref = simulate(config, profile, reference=True, warmup=5.0, **kw)
    fast = simulate(config, profile, reference=False, warmup=5.0, **kw)
    assert_same(ref.as_dict(), fast.as_dict())
    assert ref.steps > 1000 and ref.mean_running > 60


@st.composite
def small_engines(draw: st.DrawFn) -> tuple[EngineConfig, TrafficProfile, int]:
    base = llama_engine()
    block_size = draw(st.sampled_from([1, 4, 16]))
    max_model_len = draw(st.integers(32, 2048))
    spec = draw(
        st.none()
        | st.builds(
            Speculative,
            num_speculative_tokens=st.integers(1, 4),
            acceptance_rate=st.floats(0.0, 0.95),
            disable_by_batch_size=st.none() | st.integers(1, 8),
        )
    )
    config = dataclasses.replace(
        base,
        kv_cache_blocks=draw(st.integers(2, 600)),
        block_size=block_size,
        max_num_seqs=draw(st.integers(1, 40)),
        max_num_batched_tokens=draw(st.integers(1, 2048)),
        max_model_len=max_model_len,
        chunked_prefill=draw(st.booleans()),
        prefix_caching=draw(st.none() | st.builds(PrefixCaching, st.floats(0.0, 0.9))),
        speculative=spec,
    )
    lengths = LognormalLengths(
        draw(st.floats(1.0, max_model_len / 2)),
        draw(st.floats(0.0, 1.5)),
        draw(st.floats(1.0, 300.0)),
        draw(st.floats(0.0, 1.5)),
    )
    return config, TrafficProfile(Poisson(draw(st.floats(0.5, 60.0))), lengths), draw(st.integers(0, 2**32))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_engines())
def test_random_small_engines_agree(case: tuple[EngineConfig, TrafficProfile, int]) -> None:
    config, profile, seed = case
    assert_paths_agree(config, profile, duration=8.0, seed=seed, scrapes=3)


def drive(kind: type[ReferenceReplica], config: EngineConfig, reqs: list[tuple[float, int, int]]) -> dict[str, Any]:
    """Requests (arrival, prompt, output) added to one replica by hand, reading ``running`` from ``on_step``."""
    replica = kind(config, seed=5)
    trace = Trace()
    held: list[list[tuple[int, int, int, int]]] = []

    class Watch(Trace):
        def on_step(self, now: float, tokens: int, prefill_tokens: int, decode_tokens: int) -> None:
            held.append([(q.id, q.blocks, q.computed, q.generated) for q in replica.running])

    replica.observers += [trace, Watch()]
    requests = [SimRequest(i, t, p, o) for i, (t, p, o) in enumerate(reqs)]
    for q in requests:
        replica.run_until(q.arrival)
        replica.add(q)
    replica.run_until(1e9)
    return {
        "requests": [[getattr(q, f) for f in REQUEST_FIELDS] for q in requests],
        "replica": {f: getattr(replica, f) for f in REPLICA_FIELDS},
        "observed": trace.events,
        "held": held,
    }


@pytest.mark.parametrize(
    ("config", "reqs"),
    [
        # two requests that cannot share the pool: preemption by recompute, the newest first
        (dataclasses.replace(llama_engine(), kv_cache_blocks=101), [(0.0, 600, 500), (0.0, 600, 500)]),
        # outputs of 0 and 1 tokens, a long prefill chunked behind a small budget, several finishing at once
        (
            dataclasses.replace(llama_engine(), max_num_batched_tokens=64, block_size=4),
            [
                (0.0, 250, 3),
                (0.0, 100, 0),
                (0.0, 10, 1),
                (0.0, 10, 0),
                (0.01, 7, 3),
                (0.01, 7, 4),
                (0.02, 300, 40),
                (0.5, 5, 2),
            ],
        ),
        # speculation switched off above 2 running sequences: requests leave and join the cohort
        (
            dataclasses.replace(llama_engine(), speculative=Speculative(acceptance_rate=0.8, disable_by_batch_size=2)),
            [(0.0, 100, 60), (0.0, 90, 20), (0.0, 80, 45), (0.05, 70, 30), (0.3, 60, 90)],
        ),
    ],
    ids=["preemption", "tiny-outputs-small-budget", "speculation-toggles"],
)
def test_a_replica_driven_by_hand_equals_the_reference(
    config: EngineConfig, reqs: list[tuple[float, int, int]]
) -> None:
    ref = drive(ReferenceReplica, config, reqs)
    fast = drive(Replica, config, reqs)
    assert_same(ref, fast)


def test_lognormal_lengths_draw_what_they_drew_before_the_speed_up() -> None:
    import random

    lengths = LognormalLengths(1500, 0.5, 300, 0.0)
    a, b = random.Random(3), random.Random(3)
    for _ in range(200):
        sigma2 = math.log1p(0.5 * 0.5)
        p = round(a.lognormvariate(math.log(1500) - sigma2 / 2, math.sqrt(sigma2)))
        assert lengths.draw(b) == (max(1, p), 300)


def test_the_calibrated_step_is_the_prior_s_divided_by_the_factors() -> None:
    """Issue 17 part 4: the simulator's step model with a deployment's calibrated factors
    (:meth:`StepCost.scaled`): memory terms ÷ r_d, compute terms ÷ r_p. Hand arithmetic: a decode step of 16
    sequences at 1,000 tokens of context is memory-bound (weights + KV), so with r_d = 0.5 it takes twice the
    prior's; a prefill of 4,096 tokens alone is compute-bound, so with r_p = 2 it takes half (less the KV it writes,
    which is memory and below the compute time either way)."""
    prior = llama_engine().cost
    cal = prior.scaled(0.5, 2.0)
    decode = (16, 16, 16 * 1000, 16 * 1000.0)
    assert cal.seconds(*decode) == pytest.approx(2 * prior.seconds(*decode), rel=1e-12)
    prefill = (4096, 1, 4096, 4096 * 4097 / 2)
    assert cal.seconds(*prefill) == pytest.approx(prior.seconds(*prefill) / 2, rel=1e-12)
    with pytest.raises(ValueError, match="decode_ratio"):
        prior.scaled(0.0, 1.0)


def test_the_request_overhead_adds_to_ttft_not_to_the_queue_time() -> None:
    """A request alone: its TTFT is the overhead (before the engine's queue) plus its prefill step; its queue time,
    as vLLM measures it from the engine core's queueing, is 0."""
    base = llama_engine()
    config = dataclasses.replace(base, request_overhead_seconds=0.05)
    one = TrafficProfile(trace=(Arrival(1.0, 1000, 2),))
    fleet_a, fleet_b = Fleet(base, one), Fleet(config, one)
    fleet_a.advance(10.0)
    fleet_b.advance(10.0)
    (a,), (b,) = fleet_a.requests, fleet_b.requests
    assert b.ttft == pytest.approx(a.ttft + 0.05, abs=1e-12)
    assert a.queue_time == b.queue_time == 0.0
    assert b.tpot == pytest.approx(a.tpot, abs=1e-12)
