"""The advisor's exception tree.

::

    AdvisorError
     ├── ConfigError            a configuration file or value is invalid (carries every problem)
     ├── CapacityError          the capacity pass cannot be computed (model does not fit, bad input)
     │    └── UnknownModelError   no preset and no readable config.json for a model id
     │    └── UnknownGPUError     a GPU name not in the catalog
     ├── ParseError             an exposition could not be parsed
     └── StateError             the state file is unreadable or of another version

Sources never raise into the loop: a failed scrape becomes a recorded error with a reason.
"""

from __future__ import annotations

from collections.abc import Sequence


class AdvisorError(Exception):
    """Base of every error the advisor raises on purpose."""


FILE_PROBLEM = "(file)"  # no typing import here: `capacity-advisor --help` imports this module (test_lazy_cli)
"""The path :class:`ConfigError` gives a problem of the whole file (unreadable, not UTF-8, not YAML), not of a field."""


class ConfigError(AdvisorError):
    """Invalid configuration. ``problems`` lists ``(path, message)`` for every invalid field; ``lines`` holds, for
    each, the 1-based line of the file it is on (None when unknown: data not read from a file, or a path the file
    does not spell), shown as ``line N: path: message``."""

    def __init__(
        self,
        problems: Sequence[tuple[str, str]],
        source: str = "config",
        lines: Sequence[int | None] | None = None,
    ) -> None:
        self.problems = list(problems)
        self.source = source
        self.lines: list[int | None] = list(lines) if lines is not None else [None] * len(self.problems)
        if len(self.lines) != len(self.problems):
            raise ValueError("ConfigError: one line (or None) per problem")
        text = "\n".join(
            f"  {'' if line is None else f'line {line}: '}{path}: {msg}"
            for (path, msg), line in zip(self.problems, self.lines, strict=True)
        )
        # unreadable, not text, not YAML: no field to fix (a walkthrough read "1 invalid field(s)" for a missing file)
        whole_file = all(path == FILE_PROBLEM or msg.startswith("not valid YAML") for path, msg in self.problems)
        head = "the file cannot be used" if whole_file else f"{len(self.problems)} invalid field(s)"
        super().__init__(f"{source}: {head}\n{text}")


class CapacityError(AdvisorError):
    """The capacity pass cannot be computed for these inputs."""


class UnknownNameError(CapacityError):
    """A name the capacity pass has no figure for: a ``kv_cache_dtype``, a weight ``quantization``, a llama.cpp cache
    type (the message lists the known ones). Bad input, not a deployment that cannot run: ``POST /api/v1/plan``
    answers a turn to such a name 400, as it answers the deployment's own field."""


class WontStartError(CapacityError):
    """The inputs are valid but the engine refuses to start with them: the weights (with what other processes
    hold) leave no room, or no KV cache is left. ``plan`` exits 3 on it (not 2, invalid input) and looks for the
    smallest change that fits.

    ``problem`` is what is wrong alone; ``remedy`` the directions to look in where no fix was computed (the
    message is ``problem; remedy``). ``plan`` and ``POST /api/v1/plan`` say ``problem`` with the fixes actually
    found instead (:func:`advisor.capacity.fixes.verdict`), never ``remedy``: it names directions, not changes
    known to fit."""

    def __init__(self, problem: str, remedy: str = "") -> None:
        super().__init__(f"{problem}; {remedy}" if remedy else problem)
        self.problem = problem
        self.remedy = remedy


class UnknownModelError(CapacityError):
    """A model id with no preset and no readable config.json."""


class UnknownGPUError(CapacityError):
    """A GPU name that is not in the catalog (and no memory override was given)."""


class ParseError(AdvisorError):
    """An exposition could not be parsed."""


class StateError(AdvisorError):
    """The state file is unreadable or was written by another version."""
