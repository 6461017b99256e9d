"""What speculative decoding returns at a batch, from its measured acceptance and the roofline's step costs.

A speculative round verifies ``k`` draft tokens per sequence in one forward pass of the target model and yields
``1 + accepted`` tokens per sequence (the accepted prefix and one token the target model samples itself). Against
plain decoding, one token per sequence per step, the round pays off when::

    speedup(k) = (1 + Σ_{i<k} p_i) × step(B) ÷ verify(B, k + 1)  >  1

where ``p_i`` is the share of drafts whose token at position ``i`` was accepted (so ``1 + Σ p_i`` is the mean
acceptance length; Leviathan, Kalman & Matias, "Fast Inference from Transformers via Speculative Decoding", ICML
2023, §3.4: the expected tokens per step against the cost of scoring ``k + 1`` tokens), ``step`` the plain decode
step and ``verify`` the verification step (:meth:`advisor.capacity.perf.DecodeStepModel.verify`), both at batch ``B``.

While decode is bound by reading the weights (small batches), ``verify(B, k + 1) ≈ step(B)`` and any acceptance
pays; once the batch makes the step compute-bound, scoring ``k + 1`` tokens costs up to ``k + 1`` times the plain
step and only a high acceptance pays (the "speculation is slower at high batch" reports, e.g.
vllm-project/vllm#19254). The draft's own cost and fixed per-round overheads (a draft model, CUDA graphs not
captured for the verify shapes) are not in ``verify``: the speedup here is an upper bound, and a value below 1
means speculation loses whatever the draft costs. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from advisor.capacity.perf import DecodeStepModel


def speculative_speedup(
    step: DecodeStepModel, batch: float, acceptance_length: float, draft_length: float, draft_share: float = 1.0
) -> float:
    """Upper bound on speculation's speedup over plain decoding at ``batch`` sequences (module docstring):
    ``acceptance_length × step(batch) ÷ step.verify(batch, draft_length + 1)`` when every sequence drafts; when only
    a share ``s`` of the sequence-steps carry a draft (an n-gram finds no match for the others, which decode one
    token as usual), ``(1 + s·(acceptance_length − 1)) × step(batch) ÷ step.verify(batch, 1 + s·draft_length)``.

    Args:
        step: the plain decode step (seconds, :func:`advisor.capacity.perf.decode_step_model`).
        batch: sequences decoding together on one engine (≥ 1).
        acceptance_length: tokens a drafted round yields per sequence, the bonus token included (≥ 1; vLLM's
            "Mean acceptance length").
        draft_length: draft tokens verified per drafted sequence per round (``num_speculative_tokens``, ≥ 0).
        draft_share: the share of sequence-steps that carry a draft (0–1].

    Raises:
        ValueError: a batch below 1, an acceptance length below 1, a negative draft length, a share outside (0, 1].
    """
    if not batch >= 1 or not acceptance_length >= 1 or not draft_length >= 0 or not 0 < draft_share <= 1:
        raise ValueError(
            "need batch ≥ 1, acceptance_length ≥ 1, draft_length ≥ 0, 0 < draft_share ≤ 1; got "
            f"{batch}, {acceptance_length}, {draft_length}, {draft_share}"
        )
    tokens = 1.0 + draft_share * (acceptance_length - 1.0)
    return tokens * step(batch) / step.verify(batch, 1.0 + draft_share * draft_length)


@dataclass(frozen=True, slots=True)
class DraftLengthChoice:
    """The draft length the measured acceptance and the roofline favour.

    Attributes:
        current: the draft length running (``k``) and its speedup bound.
        best: the draft length with the highest speedup bound among 0 … ``k`` (0 = no speculation, speedup 1.0).
        speedups: the speedup bound at each draft length 0 … ``k`` (index = draft length).
    """

    current: tuple[int, float]
    best: tuple[int, float]
    speedups: tuple[float, ...]


def best_draft_length(
    step: DecodeStepModel,
    batch: float,
    position_acceptance: Sequence[float],
    draft_length: int,
    draft_share: float = 1.0,
) -> DraftLengthChoice:
    """Speedup bound at every draft length up to the running one, from the acceptance measured at each position.

    A draft shortened to ``j`` tokens keeps positions ``0 … j − 1`` and their acceptance (a token is accepted only
    when every earlier one was, so the first ``j`` positions' outcomes do not depend on the later ones):
    ``speedup(j) = (1 + Σ_{i<j} p_i) × step(B) ÷ verify(B, j + 1)``, ``speedup(0) = 1``.

    Args:
        position_acceptance: ``p_i`` for ``i = 0 … draft_length − 1`` (0–1; a shorter sequence is padded with 0:
            positions no draft reached accepted nothing).
        draft_length: the running ``k`` (≥ 1).
        draft_share: the share of sequence-steps that carry a draft (:func:`speculative_speedup`).

    Raises:
        ValueError: ``draft_length`` < 1, a batch below 1, an acceptance outside 0–1.
    """
    if draft_length < 1:
        raise ValueError(f"draft_length must be ≥ 1, got {draft_length}")
    p = [*position_acceptance[:draft_length], *[0.0] * max(0, draft_length - len(position_acceptance))]
    if any(not 0.0 <= x <= 1.0 for x in p):
        raise ValueError(f"position acceptance must be within 0–1, got {list(position_acceptance)}")
    speedups = [1.0]
    accepted = 0.0
    for j in range(1, draft_length + 1):
        accepted += p[j - 1]
        speedups.append(speculative_speedup(step, batch, 1.0 + accepted, j, draft_share))
    best = max(range(draft_length + 1), key=lambda j: (speedups[j], -j))
    return DraftLengthChoice((draft_length, speedups[draft_length]), (best, speedups[best]), tuple(speedups))
