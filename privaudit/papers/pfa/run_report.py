"""What a finished PFA-family run reports: realised DP-SGD steps, each client's real ε, and ``privaudit train``'s rows.

The run's ledger holds one ``SubsampledGaussian(σ_m, q_m)`` event per private client and round with the steps it
took (:class:`~privaudit.fl.privacy.local_dp.LocalDP`); the algorithm's report (``HeterogeneousDP.report``) holds
the plan (budgets, calibration), participation (when and why training stopped) and uplink bytes. From both:

* :func:`realised_steps` — DP-SGD steps per client recorded in the ledger;
* :func:`client_privacy_of_run` — per client: claimed ε_m, σ_m, realised steps and the ε a real accountant gives
  for them (:func:`privaudit.papers.pfa.budget_calibration.client_privacy`);
* :func:`summary_rows` — the lines the family adds to ``privaudit train``'s summary.

Torch-free.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from privaudit.accounting.ledger import PrivacyLedger
from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.budget_calibration import (
    ClientCalibration,
    ClientPrivacy,
    client_privacy,
    summarise_privacy,
)


def realised_steps(ledger: PrivacyLedger) -> dict[int, int]:
    """DP-SGD steps per client recorded in ``ledger``."""
    steps: dict[int, int] = {}
    for event in ledger.events:
        steps[int(event.client_id)] = steps.get(int(event.client_id), 0) + event.count
    return steps


def client_privacy_of_run(calibrations: Sequence[ClientCalibration], ledger: PrivacyLedger, report: Mapping[str, Any],
                          accountant: str = "rdp", claimed: str = "preference") -> list[ClientPrivacy]:
    """Per client: claimed ε_m, σ_m, realised steps and real ε (``accountant``) of a finished run.

    ``claimed="preference"`` compares with each client's own budget (what the ledger keeps); ``"operating"``
    with the budget its noise was calibrated for (they differ for the Minimum/Maximum baselines).
    """
    if not calibrations:
        raise InvalidParameterError("this run trained without DP (np-fedavg): it has no per-client ε")
    if claimed == "preference":
        prefs = report["plan"]["budgets"]["epsilons"]
    elif claimed == "operating":
        prefs = None
    else:
        raise InvalidParameterError(f"claimed must be 'preference' or 'operating', got {claimed!r}")
    return client_privacy(calibrations, realised_steps(ledger), accountant, claimed=prefs)


def summary_rows(report: Mapping[str, Any], calibrations: Sequence[ClientCalibration], ledger: PrivacyLedger,
                 accountant: str = "rdp") -> dict[str, Any]:
    """A few lines for ``privaudit train``'s summary: stop, ε spent (max / mean, over budget), uplink reduction."""
    out: dict[str, Any] = {}
    stopped = (report.get("participation") or {}).get("stopped")
    out["stopped_at_round"] = None if stopped is None else stopped["round"]
    if stopped is not None:
        out["stop_reason"] = stopped["reason"]
    if calibrations:
        privacy = summarise_privacy(client_privacy_of_run(calibrations, ledger, report, accountant))
        out["max_epsilon_spent"] = privacy["max_epsilon"]
        out["mean_epsilon_spent"] = privacy["mean_epsilon"]
        out["clients_over_budget"] = len(privacy["over_budget"])
    communication = report.get("communication") or {}
    out["uplink_bytes"] = communication.get("total_bytes")
    out["uplink_reduction_private"] = communication.get("reduction_private")
    return out
