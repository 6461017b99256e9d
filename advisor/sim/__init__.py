"""The engine simulator: a continuous-batching engine, step by step (pure core), and its ``/metrics`` edge.

Pure (no I/O, no clock, seeded ``random.Random``):

* :mod:`advisor.sim.engine` — one replica: paged KV blocks sized by the capacity pass, vLLM V1's admission and
  preemption rules, chunked prefill, prefix caching, speculative decoding, step times from the roofline;
  ``Replica`` (fast: decoding requests kept as a cohort) and ``ReferenceReplica`` (the original step loop, kept as
  its oracle; ``simulate(..., reference=True)``).
* :mod:`advisor.sim.fleet` — replicas behind a router (round-robin, least-loaded); :func:`simulate` and its
  summary (quantiles, goodput, tokens/s, KV usage, preemptions).
* :mod:`advisor.sim.traffic` — Poisson, Gamma, on/off and daily arrivals; lognormal or empirical lengths;
  replayed traces.
* :mod:`advisor.sim.metrics`, :mod:`advisor.sim.buckets` — what vLLM and SGLang count, in their buckets.
* :mod:`advisor.sim.scenarios` — named deployments with traffic (the demo fleet).

Edge: :mod:`advisor.sim.exposition` (prometheus-client rendering) and :mod:`advisor.sim.server` (HTTP, the
accelerated clock, :func:`advisor.sim.server.start_fleet`). ``docs/simulator.md`` describes the model.
"""

from advisor.sim.engine import (
    EngineConfig,
    PrefixCaching,
    ReferenceReplica,
    Replica,
    SimRequest,
    Speculative,
    StepCost,
    engine_config,
)
from advisor.sim.fleet import Fleet, SimSummary, simulate
from advisor.sim.scenarios import DEMO_SCENARIOS, Scenario
from advisor.sim.traffic import (
    Arrival,
    DailyCurve,
    EmpiricalLengths,
    GammaGaps,
    LinearRamp,
    LognormalLengths,
    OnOff,
    Poisson,
    TrafficProfile,
)

__all__ = [
    "DEMO_SCENARIOS",
    "Arrival",
    "DailyCurve",
    "EmpiricalLengths",
    "EngineConfig",
    "Fleet",
    "GammaGaps",
    "LinearRamp",
    "LognormalLengths",
    "OnOff",
    "Poisson",
    "PrefixCaching",
    "ReferenceReplica",
    "Replica",
    "Scenario",
    "SimRequest",
    "SimSummary",
    "Speculative",
    "StepCost",
    "TrafficProfile",
    "engine_config",
    "simulate",
]
