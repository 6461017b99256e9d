"""A deployment's ``model``, resolved without the config machinery: a preset id, or a path to a Hugging Face
``config.json``.

Kept apart from :mod:`advisor.config` (pydantic, YAML) so that ``capacity-advisor plan`` and ``simulate`` read a
model without importing them; :mod:`advisor.config` re-exports :func:`resolve_model`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from advisor.capacity.models import ModelArch, get_preset, unknown_architecture_warning
from advisor.errors import CapacityError
from advisor.files import read_text_capped

__all__ = ["resolve_model"]

MAX_INTEGER_DIGITS: Final = 4000
"""Digits of the longest integer a model config.json may write: below Python's 4,300-digit limit on converting a
string to an int (``sys.get_int_max_str_digits``), far above any shape (every count the capacity pass reads is
refused past 2**53, 16 digits, naming its key)."""


class _NotAConfigError(Exception):
    """Why the text of a config.json is no usable JSON object (raised from :func:`_parse`'s hooks)."""


class _TooLarge:
    """An integer of more than :data:`MAX_INTEGER_DIGITS` digits, kept unconverted until the object holding it
    (whose key names it) is built."""

    def __init__(self, digits: int) -> None:
        self.digits = digits


def _integer(text: str) -> int | _TooLarge:
    digits = len(text.lstrip("-"))
    return _TooLarge(digits) if digits > MAX_INTEGER_DIGITS else int(text)


def _too_large(value: Any) -> _TooLarge | None:
    """The first :class:`_TooLarge` in ``value`` or the lists in it (objects were checked when built)."""
    if isinstance(value, _TooLarge):
        return value
    if isinstance(value, list):
        for item in value:
            found = _too_large(item)
            if found is not None:
                return found
    return None


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a repeated key (``json`` keeps the last silently; the YAML config refuses it too)
    and an integer too large to convert (:data:`MAX_INTEGER_DIGITS`), naming the key."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _NotAConfigError(f"the key {key!r} repeats in one object (JSON would keep only the last value)")
        big = _too_large(value)
        if big is not None:
            raise _NotAConfigError(f"not valid JSON: the number of key {key!r} is too large ({big.digits:,} digits)")
        out[key] = value
    return out


def _parse(text: str) -> Any:
    """``text`` parsed as a config.json.

    Raises:
        _NotAConfigError: a repeated key or an integer of more than :data:`MAX_INTEGER_DIGITS` digits.
        json.JSONDecodeError: not JSON.
        RecursionError: nested too deeply.
    """
    data = json.loads(text, parse_int=_integer, object_pairs_hook=_object)
    big = _too_large(data)
    if big is not None:
        raise _NotAConfigError(f"not valid JSON: a number is too large ({big.digits:,} digits)")
    return data


_WARNED: set[tuple[str, str]] = set()
"""(config.json path, architecture) pairs already warned about in this process (the daemon resolves the model of a
deployment at every reload)."""


def _warn_unknown_architecture(arch: ModelArch, path: Path) -> None:
    """Log :func:`~advisor.capacity.models.unknown_architecture_warning` (logger ``advisor.modelfile``, on stderr
    through the CLI's handler) once per process for each file and architecture."""
    message = unknown_architecture_warning(arch)
    key = (str(path), arch.architecture)
    if message is None or key in _WARNED:
        return
    _WARNED.add(key)
    import logging

    logging.getLogger(__name__).warning("model config %r: %s", str(path), message)


def resolve_model(model: str, base_dir: Path | None = None) -> ModelArch:
    """Resolve a deployment's ``model``: a preset id, or a path to a Hugging Face ``config.json``
    (relative paths are taken from ``base_dir``, the config file's folder).

    A config.json whose ``architectures`` class the capacity pass does not know is sized as the dense decoder its
    keys describe, with a warning logged once (:func:`~advisor.capacity.models.unknown_architecture_warning`).

    Raises:
        CapacityError: the preset is unknown and no such file exists, or the file is not a usable config: not
            readable, not UTF-8, not JSON, an integer too large to read (more than :data:`MAX_INTEGER_DIGITS`
            digits), a key repeated within an object, not an object, or values
            :meth:`~advisor.capacity.models.ModelArch.from_hf_config` refuses. The message names the file (and
            the key where one is at fault).
    """
    looks_like_path = model.endswith(".json") or model.startswith((".", "/", "~"))
    if looks_like_path:
        try:
            path = Path(model).expanduser()
        except RuntimeError:
            raise CapacityError(f"cannot expand the home folder in model path {model!r}") from None
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        try:
            data = _parse(read_text_capped(path))
        except RecursionError:
            raise CapacityError(f"model config {str(path)!r} is nested too deeply to be a config.json") from None
        except OSError as exc:
            raise CapacityError(f"cannot read model config {str(path)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CapacityError(f"model config {str(path)!r} is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise CapacityError(f"model config {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}") from None
        except _NotAConfigError as exc:
            raise CapacityError(f"model config {str(path)!r}: {exc}") from None
        except ValueError as exc:  # any other conversion json refuses: say what, never a bare ValueError
            raise CapacityError(f"model config {str(path)!r} is not valid JSON: {str(exc)[:200]}") from None
        if not isinstance(data, dict):
            raise CapacityError(f"model config {str(path)!r} must be a JSON object")
        name = str(data.get("_name_or_path") or path.parent.name)
        arch = ModelArch.from_hf_config(data, name=name, source=str(path))
        _warn_unknown_architecture(arch, path)
        return arch
    return get_preset(model)
