"""A deployment's ``model``, resolved without the config machinery: a preset id, or a path to a Hugging Face
``config.json``.

Kept apart from :mod:`advisor.config` (pydantic, YAML) so that ``capacity-advisor plan`` and ``simulate`` read a
model without importing them; :mod:`advisor.config` re-exports :func:`resolve_model`.
"""

from __future__ import annotations

import json
from pathlib import Path

from advisor.capacity.models import ModelArch, get_preset
from advisor.errors import CapacityError
from advisor.files import read_text_capped

__all__ = ["resolve_model"]


def resolve_model(model: str, base_dir: Path | None = None) -> ModelArch:
    """Resolve a deployment's ``model``: a preset id, or a path to a Hugging Face ``config.json``
    (relative paths are taken from ``base_dir``, the config file's folder).

    Raises:
        CapacityError: the preset is unknown and no such file exists, or the file is not a usable config.
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
            data = json.loads(read_text_capped(path))
        except RecursionError:
            raise CapacityError(f"model config {str(path)!r} is nested too deeply to be a config.json") from None
        except OSError as exc:
            raise CapacityError(f"cannot read model config {str(path)!r}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise CapacityError(f"model config {str(path)!r} is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise CapacityError(f"model config {str(path)!r} is not JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(data, dict):
            raise CapacityError(f"model config {str(path)!r} must be a JSON object")
        return ModelArch.from_hf_config(data, name=str(data.get("_name_or_path") or path.parent.name))
    return get_preset(model)
