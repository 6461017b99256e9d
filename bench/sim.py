"""How much faster than real time the simulator runs (issue 7, acceptance 4: goal ≥ 50×).

    .venv/bin/python bench/sim.py [--duration S] [--repeat N]

One replica of Llama-3.1-8B-Instruct on one H100-SXM at batch 64: ``max_num_seqs = 64`` and a Poisson arrival
rate (16 req/s of 1,500 ± 50 % prompt / 300 ± 100 % output tokens) that keeps all 64 slots busy with a queue
behind them. Prints simulated seconds per wall second (the best of ``--repeat`` runs), the mean running batch,
steps per second of wall time, and the same for a demo-like healthy load and the KV-saturated scenario.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

from advisor.capacity.hardware import get_gpu
from advisor.capacity.kv import CapacityInputs
from advisor.capacity.models import get_preset
from advisor.sim.engine import EngineConfig, engine_config
from advisor.sim.fleet import SimSummary, simulate
from advisor.sim.scenarios import DEMO_SCENARIOS
from advisor.sim.traffic import LognormalLengths, Poisson, TrafficProfile


def llama(max_num_seqs: int) -> EngineConfig:
    gpu = get_gpu("H100-SXM")
    inputs = CapacityInputs(
        model=get_preset("meta-llama/Llama-3.1-8B-Instruct"),
        gpu_memory_bytes=gpu.memory_bytes,
        max_model_len=8192,
        max_num_seqs=max_num_seqs,
    )
    return engine_config(inputs, gpu)


def timed(config: EngineConfig, profile: TrafficProfile, duration: float, repeat: int) -> tuple[float, SimSummary]:
    best = float("inf")
    summary = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        summary = simulate(config, profile, duration=duration, slo_ttft_seconds=2.5, slo_tpot_seconds=0.1, seed=1)
        best = min(best, time.perf_counter() - t0)
    assert summary is not None
    return best, summary


def report(label: str, wall: float, s: SimSummary) -> None:
    print(
        f"{label:<34} {s.duration_seconds / wall:8.0f}× real time  ({s.duration_seconds:g} s simulated in "
        f"{wall:.2f} s; mean batch {s.mean_running:.1f}; {s.steps / wall:,.0f} steps/s; "
        f"{s.output_tokens_per_second:,.0f} output tokens/s simulated)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="simulated seconds per run (600)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    batch64 = TrafficProfile(Poisson(16.0), LognormalLengths(1500, 0.5, 300, 1.0))
    wall, s = timed(llama(64), batch64, args.duration, args.repeat)
    report("Llama-3.1-8B, H100, batch 64", wall, s)
    verdict = "meets" if s.duration_seconds / wall >= 50 else "MISSES"
    print(f"  goal ≥ 50×: {verdict}")
    healthy, saturated = DEMO_SCENARIOS[0], DEMO_SCENARIOS[1]
    for sc in (healthy, saturated):
        wall, s = timed(sc.engine_config(), sc.traffic, args.duration, args.repeat)
        report(f"scenario {sc.name}", wall, s)
    wall, s = timed(replace(llama(256)), TrafficProfile(Poisson(16.0)), args.duration, args.repeat)
    report("Llama-3.1-8B, H100, 16 req/s, 256 seqs", wall, s)


if __name__ == "__main__":
    main()
