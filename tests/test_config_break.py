"""Issue 17, adversarial config files: keys that do nothing in the engine are refused by name, not shown as part
of the accounting."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from advisor.config import parse_config
from advisor.errors import ConfigError
from tests.test_config import GOOD


def _with(**keys: Any) -> dict[str, Any]:
    data = copy.deepcopy(GOOD)
    data["deployments"][0].update(keys)
    return data


@pytest.mark.parametrize(
    ("key", "value"),
    [("max_loras", 4), ("max_lora_rank", 64), ("lora_dtype", "float16"), ("fully_sharded_loras", True)],
)
def test_a_lora_dial_without_enable_lora_is_refused_naming_it(key: str, value: object) -> None:
    """vLLM builds no ``LoRAConfig`` without ``--enable-lora`` (``EngineArgs.create_engine_config``: ``LoRAConfig(…)
    if self.enable_lora else None``): ``max_loras: 4`` alone sized nothing, yet ``check-config`` printed the pool
    as "vllm's accounting with max_loras 4"."""
    with pytest.raises(ConfigError) as exc:
        parse_config(_with(**{key: value}))
    (_path, message), *_ = exc.value.problems
    assert key in message and "enable_lora" in message
    parse_config(_with(**{key: value, "enable_lora": True}))  # with the switch: accepted
