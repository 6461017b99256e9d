"""Whether the model an engine labels its series with is the config's ``model``: the one decision.

The capacity pass sizes the config's ``model``. An engine serving another model makes every figure the pass gives
wrong, so ``once``'s warning line (:func:`advisor.inspect.model_label_note`), the rule ``model_drift`` and the
rules that predict from the capacity pass all read this one comparison (:func:`compare_model_label`).

The engine's label is vLLM's and TensorRT-LLM's ``model_name``, Triton's ``model``, … (each adapter's
``model_labels``; the snapshot's ``model``). It is whatever the engine was started with: a Hugging Face id, a local
path (``/models/llama-3.1-8b``, a Hugging Face cache directory ``…/models--meta-llama--Llama-3.1-8B-Instruct/
snapshots/<hash>``) or a ``--served-model-name`` alias (vLLM docs, "Engine arguments":
https://docs.vllm.ai/en/latest/configuration/engine_args.html#-served-model-name). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from advisor.capacity.models import ModelArch, get_preset
from advisor.errors import CapacityError

_HF_CACHE_DIR = re.compile(r"^models--([^/]+?)--(.+)$")
"""A Hugging Face hub cache directory name: ``models--{owner}--{name}`` (huggingface_hub's cache layout,
https://huggingface.co/docs/huggingface_hub/guides/manage-cache#understand-caching)."""


@dataclass(frozen=True, slots=True)
class ModelLabelMismatch:
    """The engine's model label is not the config's ``model``.

    Attributes:
        configured: the config's ``model`` as written.
        label: the engine's model label as it reported it.
        preset: the bundled preset the label names (after reading a path's last directory), ``None`` when it
            names none — it may then be a ``--served-model-name`` alias of the configured model, which cannot be
            told apart: only a mismatch with a ``preset`` is :attr:`definite`, or one beside a replica serving the
            configured model.
        beside: ``(targets labelled ``label``, targets answering)`` when other targets of the same deployment label
            their series with the configured model itself: then ``label`` is no alias of it (one deployment's
            targets are replicas of one model) and the mismatch is :attr:`definite` whatever ``preset`` says
            (breaker 28: a 72B replica pasted into an 8B deployment was summed in without a word).
    """

    configured: str
    label: str
    preset: str | None
    beside: tuple[int, int] | None = None

    @property
    def definite(self) -> bool:
        """The label names another known model (not an alias the advisor cannot tell from the configured one), or
        sits beside replicas serving the configured one."""
        return self.preset is not None or self.beside is not None

    def note(self) -> str:
        """One line naming both, and the config field to set.

        Example: ``model 'llama-3.1-8b' in the config, but the engine serves 'Qwen/Qwen2.5-0.5B'; the capacity pass
        sizes the config's model: set model: to what the engine serves``.
        """
        if self.beside is not None:
            some, answering = self.beside
            return (
                f"{some} of {answering} targets serve {self.label!r}, the others the config's {self.configured!r}: a "
                "deployment's targets are replicas of one model, and the pass sums theirs as one — remove those "
                "targets or give them their own deployment"
            )
        if self.preset is not None:
            known = "" if self.preset.casefold() == self.label.casefold() else f" (the preset {self.preset})"
            return (
                f"model {self.configured!r} in the config, but the engine serves {self.label!r}{known}; the capacity "
                "pass sizes the config's model: set model: to what the engine serves"
            )
        return (
            f"model {self.configured!r} in the config, but the engine's model label is {self.label!r}: if the engine "
            f"serves another model, set model: to it; if {self.label!r} is a --served-model-name alias, set "
            f"served_model: {self.label!r}"
        )


def label_preset(label: str) -> str | None:
    """The preset (:func:`advisor.capacity.models.get_preset` name) an engine's model label names, else ``None``.

    A label that is a path is read by its Hugging Face cache directory (``models--owner--name`` → ``owner/name``),
    else by its last directory (``/models/llama-3.1-8b`` → ``llama-3.1-8b``).

    Example: ``"/models/Llama-3.1-8B-Instruct"`` → ``"meta-llama/Llama-3.1-8B-Instruct"``; ``"chat"`` → ``None``.
    """
    candidates = [label]
    if label.startswith(("/", ".", "~")) or label.count("/") > 1:
        parts = [p for p in label.replace("\\", "/").split("/") if p and p not in {".", ".."}]
        cached = [m for m in map(_HF_CACHE_DIR.match, parts) if m is not None]
        candidates = [f"{m.group(1)}/{m.group(2)}" for m in cached] + parts[-1:]
    for name in candidates:
        try:
            return get_preset(name).name
        except CapacityError:
            continue
    return None


def compare_model_label(configured: str, label: str | None, served_model: str | None) -> ModelLabelMismatch | None:
    """The mismatch between the config's ``model`` and the engine's model ``label``, or ``None`` when they are the
    same model or cannot be compared.

    Same model: the label equals ``model`` or ``served_model`` ignoring case, or both name the same preset (an
    alias, the repo name without its owner, a path whose last directory or cache directory names it:
    :func:`label_preset`). Not compared: no label, or ``model`` given as a path to a config.json (the label is
    whatever path or id the engine was started with). A label naming no preset is returned with ``preset``
    ``None`` (not :attr:`~ModelLabelMismatch.definite`).

    Example: ``("Qwen/Qwen2.5-14B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", None)`` → a definite mismatch;
    ``("llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", None)`` → ``None``.
    """
    if label is None or configured.endswith(".json") or configured.startswith((".", "/", "~")):
        return None
    folded = label.casefold()
    if folded in {configured.casefold(), *(() if served_model is None else (served_model.casefold(),))}:
        return None
    try:
        mine: ModelArch | None = get_preset(configured)
    except CapacityError:
        mine = None
    theirs = label_preset(label)
    if mine is not None and theirs == mine.name:
        return None
    if mine is not None and theirs is not None and same_shapes(mine, get_preset(theirs)):
        # e.g. "llama3-8b" (the Meta-Llama-3-8B preset's alias) on a Llama-3.1-8B config: a --served-model-name
        # alias or the other checkpoint, the pass sizes both alike — not told apart, so not a definite mismatch
        theirs = None
    return ModelLabelMismatch(configured, label, theirs)


def same_shapes(a: ModelArch, b: ModelArch) -> bool:
    """Whether the capacity pass sizes ``a`` and ``b`` alike: every field equal but the name, the source and the
    trained context length (``max_position_embeddings``: an instruct and a base checkpoint, Llama 3 and 3.1 8B).

    Example: ``meta-llama/Meta-Llama-3-8B`` and ``meta-llama/Llama-3.1-8B-Instruct`` → ``True``.
    """
    return (
        replace(
            b,
            name=a.name,
            source=a.source,
            max_position_embeddings=a.max_position_embeddings,
            derived_max_model_len=a.derived_max_model_len,
        )
        == a
    )
