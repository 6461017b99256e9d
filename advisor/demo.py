"""``capacity-advisor demo``: the daemon — the same code path as ``run`` — against a small simulated fleet
on loopback, ten times faster than real time. No engine, no GPU, no network.

The fleet (:mod:`advisor.sim`, each replica serving vLLM's own ``/metrics`` format):

=====================  ===========================================================================
``demo-chat-8b``       Llama-3.1-8B on one H100 at gpu-memory-utilization 0.5, long prompts; its
                       traffic alternates a light phase (0.3 req/s for 200 simulated s) and a burst
                       (3 req/s for 150 s): idle → busy → KV pool saturated (requests waiting,
                       preemptions rising) → recovered, every 35 s of real time
``healthy``            light Poisson traffic on one replica: nothing to say
``kv-saturated``       bursty long requests on a small pool, all the time
``over-provisioned``   three replicas for a trickle of traffic
=====================  ===========================================================================

Each recommendation opening or resolving is printed as one line (what, why, the numbers, the dial and the
engine flag).
"""

from __future__ import annotations

import logging
from typing import Any

from advisor.config import Config, parse_config
from advisor.console import transition_printer
from advisor.exporter import make_registry
from advisor.logfmt import fit
from advisor.scheduler import run_daemon
from advisor.service import Service
from advisor.sim.scenarios import DEMO_SCENARIOS, Scenario
from advisor.sim.server import start_fleet
from advisor.sim.traffic import LognormalLengths, OnOff, TrafficProfile

log = logging.getLogger(__name__)

DEMO_DEPLOYMENT = "demo-chat-8b"

RAMP = DEMO_SCENARIOS[1].replace(
    name=DEMO_DEPLOYMENT,
    traffic=TrafficProfile(
        OnOff(rate_on=0.3, rate_off=3.0, on_seconds=200, off_seconds=150),
        LognormalLengths(6000, 0.25, 600, 0.5, max_prompt_tokens=7500),
    ),
    description="gpu-memory-utilization 0.5: light, then a burst that saturates the KV pool, then light again",
)
"""The scripted ramp: simulated seconds 0–200 light, 200–350 a burst, repeating."""

FLEET: tuple[Scenario, ...] = (RAMP, *DEMO_SCENARIOS)


def demo_config(deployments: list[dict[str, Any]]) -> Config:
    """The demo's config: every deployment checked every second over a 5 s window, short for-durations."""
    data: dict[str, Any] = {
        "scrape_interval": "1s",
        "evaluation_window": "5s",
        "deployments": deployments,
        "rules": {
            "cooldown": "5s",
            # a clear seen at two evaluations 1 s apart (10 simulated s; 20 at --speed 20, whose ramp is light for
            # ~10 s and whose window holds the burst for 5 of them: a 3 s hold outlasted the rest)
            "resolve_for": "1s",
            # the fleet runs on a 10× clock: the 5 s window's 4 s between its oldest and newest scrape (1 s apart)
            # are 40 simulated s, an arrival rate's history
            # and its scale-up / scale-down windows (HPA behavior's, defaults 60 s / 300 s) are 20 / 100 simulated s:
            # a need must last two cycles after the first (a one-cycle spike never scales) and a rise is held 10
            # cycles after the need ends — within the ramp's 15 s burst and 20 s light phase, which the defaults
            # (60 and 300 cycles) would outlast
            "replicas": {"min_history": "4s", "scale_up_window": "2s", "scale_down_window": "10s"},
            "kv_saturation": {"for": "3s", "usage_threshold": 0.9, "resolve_below": 0.8},
            "goodput": {"for": "3s", "min_requests": 5},
            "queue_growth": {"for": "3s"},
            "admission_thrash": {"for": "3s"},
            "pool_context": {"for": "3s"},
            "over_provisioned": {"for": "30s"},  # longer than the ramp's 20 s light phase
            "speculative_decoding": {"for": "10s"},
            "kv_budget": {"for": "3s"},
            "weights_crowd": {"for": "10s"},
            "model_drift": {"for": "10s"},
        },
    }
    return parse_config(data, source="demo")


def run_demo(listen: str, duration: float, speed: float = 10.0, compact: bool = False) -> int:
    """Start the simulated fleet and the daemon; print URLs and each recommendation transition.

    ``duration`` seconds (0 = until SIGINT/SIGTERM); ``compact`` (``--compact``): every line printed under 160
    characters (:func:`advisor.console.compact_transition`, :func:`advisor.logfmt.fit`). Returns the exit code.
    """

    def say(line: str) -> None:
        print(fit(line) if compact else line, flush=True)

    fleet = start_fleet(FLEET, speed=speed)
    try:
        cfg = demo_config([s.deployment_fields(fleet.urls(s.name)) for s in FLEET])
        registry, collector, metrics = make_registry()
        svc = Service(cfg, collector, metrics, on_transition=transition_printer(compact))

        def announce(url: str) -> None:
            svc.external_url = url.rstrip("/") + "/"  # notifications link back to this advisor's page
            say(f"capacity-advisor demo: a simulated fleet at {speed:g}× real time")
            for s in FLEET:
                say(f"  engine {s.name:<18} {', '.join(fleet.urls(s.name))}  ({s.description})")
            say(f"  advisor metrics: {url}/metrics")
            say(f"  status page:     {url}/")
            say(f"  recommendations: {url}/api/v1/recommendations  (each with its alternatives and withheld turns)")
            say("  (Ctrl-C to stop)" if not duration else f"  (stops after {duration:g}s; Ctrl-C to stop sooner)")

        code = run_daemon(svc, registry, listen, duration_seconds=duration or None, on_listening=announce)
        if svc.result is not None:  # the daemon ran: say how it ended, so a clean finish reads as one
            still_open = svc.lifecycle.open_recommendations()
            say(
                f"capacity-advisor demo: stopped; {len(still_open)} recommendation(s) were open "
                f"({', '.join(sorted({r.deployment for r in still_open})) or 'none'})"
            )
        return code
    finally:
        fleet.stop()
