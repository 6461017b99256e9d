"""Each deployment's latency model, calibrated on its own engine's TPOT and TTFT once per evaluation window (issue
17 part 3). Pure: the caller passes the evaluation (its ``now`` is the clock).

:class:`OnlineCalibration` holds one :class:`~advisor.capacity.calibration.LatencyFit` per deployment. The tracker
hands it every evaluation (:meth:`OnlineCalibration.apply`); once per evaluation window (never on overlapping
windows, so each update is a new measurement, as the filter assumes) it reads the window
(:func:`window_observation`), computes the one-step-ahead errors of the model it holds and updates the decode and
prefill factors (:func:`advisor.capacity.calibration.calibrate`, a robust scalar Kalman filter with the published
calibration as its prior). Every evaluation carries the current fit as ``Evaluation.latency``: the rules compute
their latency and throughput effects with it (:func:`advisor.rules.common.latency_model`), the exporter exports
its errors and factors, and a fit whose error is beyond its bound lowers every recommendation's confidence
(:func:`advisor.rules.common.latency_quality`).

The fit is kept per deployment while its engine, GPU, model, tensor-parallel degree, weight quantization and KV
dtype stay (efficiency is a property of those); a change of any of them starts again from the prior.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Final

from advisor.capacity.calibration import LatencyFit, LatencyModel, calibrate
from advisor.errors import CapacityError
from advisor.rules.base import DeploymentContext, Evaluation
from advisor.rules.observation import MIN_REQUESTS, window_observation
from advisor.rules.replicas import spans_at_least

__all__ = ["MIN_COVERED_FRACTION", "MIN_COVERED_SECONDS", "MIN_REQUESTS", "OnlineCalibration", "window_observation"]

MIN_COVERED_FRACTION: Final = 0.5
"""Least share of the evaluation window the scrapes must cover before it updates the model (the first window after
a start holds a few seconds; its rates are a moment's)."""
MIN_COVERED_SECONDS: Final = 30.0
"""Least time the scrapes must cover before a window updates the model, whatever the window: ``once`` evaluates a
window of two scrapes seconds apart, whose histogram means are a handful of requests caught mid-flight; whether it
updated then hung on scheduling (a loaded host let it through one run in ten), and a fit from it lowered every
recommendation's confidence. Half a minute holds tens of requests at the rates the daemon advises on."""


def _key(ctx: DeploymentContext) -> tuple[Any, ...]:
    """What a fit belongs to: engine, GPU, model, TP, weight quantization, KV dtype, and the prior's factors."""
    i = ctx.inputs
    return (
        ctx.engine,
        ctx.perf_assumptions,
        ctx.gpu.name if ctx.gpu is not None else None,
        i.model.name,
        i.tensor_parallel_size,
        i.quantization,
        i.kv_cache_dtype,
    )


@dataclass
class _State:
    key: tuple[Any, ...]
    fit: LatencyFit


class OnlineCalibration:
    """One latency fit per deployment, updated once per evaluation window. Not thread-safe: one loop owns it.

    Args:
        bound: ``|error|`` beyond which a fit lowers confidence (default
            :data:`advisor.capacity.calibration.MODEL_ERROR_BOUND`).
    """

    def __init__(self, bound: float | None = None) -> None:
        self.bound = bound
        self._states: dict[str, _State] = {}

    def fit(self, deployment: str) -> LatencyFit | None:
        """The deployment's current fit, ``None`` before its first evaluation."""
        st = self._states.get(deployment)
        return None if st is None else st.fit

    def apply(self, deployment: str, ev: Evaluation, window_seconds: float, interval_seconds: float) -> Evaluation:
        """``ev`` with its deployment's fit (``Evaluation.latency``), updated first when a window has passed since
        the last update (``window_seconds`` less half a scrape interval ``interval_seconds``, as ticks drift), the
        data are fresh, the scrapes cover ≥ :data:`MIN_COVERED_FRACTION` of the window and at least
        :data:`MIN_COVERED_SECONDS` at the scrapes' resolution (:func:`advisor.rules.replicas.spans_at_least`: a
        30 s window of 2 s scrapes covers 28 s on most cycles), and it measured TPOT or
        prefill (:func:`window_observation`)."""
        key = _key(ev.ctx)
        st = self._states.get(deployment)
        if st is None or st.key != key:
            model = LatencyModel.prior(ev.ctx.engine, ev.ctx.perf_assumptions)
            fit = LatencyFit(model) if self.bound is None else LatencyFit(model, bound=self.bound)
            st = self._states[deployment] = _State(key, fit)
        last = st.fit.updated_at
        due = last is None or ev.now - last >= window_seconds - interval_seconds / 2 or ev.now < last
        s = ev.stats
        # at the scrapes' resolution: a 30 s window of 2 s scrapes covers 28 s on most cycles (spans_at_least)
        need = max(MIN_COVERED_FRACTION * window_seconds, MIN_COVERED_SECONDS)
        covered = s is not None and spans_at_least(s.covered_seconds, need, interval_seconds, window_seconds)
        if due and ev.state == "fresh" and covered:
            st.fit = self._update(st.fit, ev)
        if window_seconds < MIN_COVERED_SECONDS and st.fit.never_because is None:  # a walkthrough's 5 s demo window
            st.fit = dataclasses.replace(
                st.fit,
                never_because=(
                    f"the evaluation window ({window_seconds:g}s) is shorter than the {MIN_COVERED_SECONDS:g}s of "
                    "scrapes a calibration window needs (evaluation_window)"
                ),
            )
        return dataclasses.replace(ev, latency=st.fit)

    @staticmethod
    def _update(fit: LatencyFit, ev: Evaluation) -> LatencyFit:
        gpu = ev.ctx.gpu
        obs = window_observation(ev)
        if gpu is None or obs is None:
            return fit
        if obs.tpot_seconds is None and obs.prefill_seconds is None and obs.ttft_seconds is None:
            return fit
        try:
            step = calibrate(fit.model, ev.ctx.inputs, gpu, obs, decode=not ev.speculation_runs())
        except (CapacityError, ValueError):
            return fit
        return dataclasses.replace(
            fit,
            model=step.model,
            tpot_error_ratio=step.tpot_error_ratio,
            ttft_error_ratio=step.ttft_error_ratio,
            windows=fit.windows + 1,
            updated_at=ev.now,
        )

    def forget(self, keep: Collection[str]) -> None:
        """Drop the fits of deployments not in ``keep`` (a reload removed them)."""
        for name in [n for n in self._states if n not in keep]:
            del self._states[name]
