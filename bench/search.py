"""How long ``plan --search`` takes here (goal: under 2 s), for the acceptance case of issue 3.

    .venv/bin/python bench/search.py [--repeat N]

Times :func:`advisor.capacity.search.search_deployments` in-process (the package tables already loaded after
the first run, which is reported separately) and the whole command line once as a subprocess.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from advisor.capacity.models import get_preset
from advisor.capacity.queueing import SLO, Workload
from advisor.capacity.search import search_deployments

ARGS = [
    *("plan", "--search", "--model", "meta-llama/Llama-3.1-70B-Instruct", "--arrival-rate", "5"),
    *("--prompt-tokens", "2000", "--output-tokens", "500", "--ttft", "2.5", "--tpot", "0.05"),
    *("--target-ratio", "0.9", "--cloud", "aws"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat
    model = get_preset("meta-llama/Llama-3.1-70B-Instruct")
    workload = Workload(arrival_rate=5, prompt_tokens=2000, output_tokens=500)
    slo = SLO(ttft_seconds=2.5, tpot_seconds=0.05, target_ratio=0.9)
    times = []
    result = None
    for _ in range(max(1, repeat)):
        start = time.perf_counter()
        result = search_deployments(model, workload, slo, cloud="aws")
        times.append(time.perf_counter() - start)
    assert result is not None
    print(
        f"search_deployments (AWS, Llama-3.1-70B, 5 req/s): first {times[0]:.3f} s, "
        f"median of {len(times)} {statistics.median(times):.3f} s; {result.configurations} configurations, "
        f"{result.evaluated} evaluated, {result.pruned} pruned; cheapest "
        f"{result.feasible[0].instance.name if result.feasible else '-'} "
        f"${result.feasible[0].hourly_cost_usd if result.feasible else float('nan'):.2f}/h"
    )
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "advisor.cli", *ARGS], capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    print(f"capacity-advisor {' '.join(ARGS[:2])} … (subprocess, exit {proc.returncode}): {wall:.3f} s wall")
    print("goal: under 2 s —", "met" if max(times[0], wall) < 2.0 else "NOT met")


if __name__ == "__main__":
    main()
