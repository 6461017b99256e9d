"""Rule modules: pure functions of an evaluation that recognize a state and propose dial turns.

* :mod:`~advisor.rules.base` — the :class:`~advisor.rules.base.Rule` protocol and its inputs/outputs.
* :mod:`~advisor.rules.lifecycle` — for-durations, hysteresis, opening and resolving.
* :mod:`~advisor.rules.kv_saturation`, :mod:`~advisor.rules.goodput` — the rules.
* :mod:`~advisor.rules.flags` — the engine flag for each dial.
  The flag is restated in the deployment's platform's terms once, in :func:`advisor.rules.lifecycle.localized`
  (:mod:`advisor.platforms`).
"""
