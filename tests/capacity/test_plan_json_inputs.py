"""``plan --json``'s ``inputs`` name the batch cap the capacity pass took: it moves the pool (vLLM's sampler warm-up
is sized by ``--max-num-seqs``), and a fresh user (2026-12-06) saw ``kv_cache_tokens`` change with ``--max-num-seqs
256`` while nothing in the JSON said which cap the default run had assumed (the table said "1024 (the engine's default
here)")."""

from __future__ import annotations

import json

from tests.inprocess import run_cli

ARGS = ["plan", "--model", "meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100", "--max-model-len", "8192", "--json"]


def test_the_json_says_which_batch_cap_sized_the_pool() -> None:
    default = json.loads(run_cli(*ARGS).stdout)
    given = json.loads(run_cli(*ARGS, "--max-num-seqs", "256").stdout)
    assert given["inputs"]["max_num_seqs"] == 256 and given["inputs"]["max_num_seqs_given"] is True
    assert default["inputs"]["max_num_seqs_given"] is False
    table = run_cli(*ARGS[:-1]).stdout
    (row,) = [line for line in table.splitlines() if line.startswith("max-num-seqs")]
    assert row.split()[1] == str(default["inputs"]["max_num_seqs"])  # the JSON and the table agree
    assert default["inputs"]["max_num_seqs"] != 256
    assert default["kv_cache_tokens"] != given["kv_cache_tokens"]  # the cap moves the pool
