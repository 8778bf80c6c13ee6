"""Check what a run declares against what it recorded, and probe a mechanism in isolation.

``privaudit check RUN`` (:func:`~privaudit.check.run.run_check`) reads any privaudit checkpoint — ``privaudit train``,
a loop recorded with :class:`~privaudit.interop.FederationRecorder`, opacus, Flower's audit tap — and runs, where the
recorded data allows, one check per family (each a :class:`~privaudit.check.base.Check`, one module each):

* :mod:`~privaudit.check.clipping` — every release a clipping client sent lies within its clip;
* :mod:`~privaudit.check.noise` — the residual of each aggregate against the clipped mean of the recorded releases has
  the declared law (std, per-tensor scale, Gaussian shape, once), with a certified ε lower bound where it is smaller;
* :mod:`~privaudit.check.randomness` — no noise repeated across rounds, none drawn from a small seed space;
* :mod:`~privaudit.check.sampling` — the clients observed training fit the declared client sampling;
* :mod:`~privaudit.check.accounting` — every release has its ledger event, for every client, with its steps.

:mod:`~privaudit.check.probe` calls a privatizer or aggregation function on crafted neighbouring inputs many times
and tests its outputs against the declared mechanism. A failed check marks the ledger's events invalid
(:mod:`~privaudit.check.marking`).
"""

from privaudit.check.base import Check, CheckResult, Status
from privaudit.check.run import CheckReport, CheckRequest, check_run, run_check

__all__ = ["Check", "CheckReport", "CheckRequest", "CheckResult", "Status", "check_run", "run_check"]
