"""Which clients may train in a round: PFA's budget pre-check, uniform K-of-M sampling, and the stop rule.

PFA's "budget accountant" (004 §4.2) does a *pre-check* at the beginning of every round ("if a client has
sufficient privacy budget to participate in the current round") and an *update* after it. Here:

* the update is the privacy ledger: every DP-SGD step a client takes is a recorded event
  (:class:`~privaudit.fl.privacy.local_dp.LocalDP`), so the realised number of steps per client is known exactly;
* :class:`BudgetGate` is the pre-check: a client may train in the next round only if its recorded steps
  plus the next round's steps stay within its budget. With ``rdp``/``prv`` calibration the check composes
  the recorded events and the next round with that accountant; with the reference calibration it uses the
  reference code's own "budget accountant" (the closed form inverted), which admits exactly T* steps;
* :class:`BudgetedSampler` draws K of the clients that pass the pre-check uniformly at random (the paper's
  "random subset of K clients") and **stops training when fewer than K candidates remain**, as the reference
  code does (``sample_clients``: training stops if fewer than m candidates) — the paper does not describe the
  stop, and T* = K·T/M is only an expectation (audit point F2), so the stop round and the exhausted clients are
  recorded and reported.

A sample without a public client (the projecting algorithms need one): with ``require_public`` the sample is
redrawn up to :data:`RESAMPLE_TRIES` times; with ``stop_without_public`` as well, training stops for good when the
draws held none, as the reference code does (``sample_clients`` returns an empty list, main.py breaks out of its loop).
The reference redraws while a counter of 50 is positive and returns nothing once it reaches 0, so a public client found
only on the 50th redraw is discarded too: it stops unless one of its first 50 draws (the first and 49 redraws) holds a
public client, which is what ``stop_without_public`` does.

``policy="record"`` skips the pre-check (every client is a candidate in every round): a client sampled more
often than planned then *exceeds* its ε_m — not silently: the ledger shows it (``over_budget``).

:func:`participation_trial` simulates that sampling without training (the claim's participation reading, audit
point F2).

Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import numpy as np

from privaudit.accounting.accountants import get_accountant
from privaudit.accounting.ledger import PrivacyLedger
from privaudit.errors import InvalidParameterError
from privaudit.papers.pfa.budget_calibration import (
    CalibrationMethod,
    ClientCalibration,
    reference_spent_epsilon,
)

#: Re-draws of a round's sample when the reference policy insists on a public client (reference: 50 tries).
RESAMPLE_TRIES = 50


class PrecheckPolicy(str, Enum):
    EXCLUDE = "exclude"  # the paper: a client whose next round would exceed its budget is not a candidate
    RECORD = "record"  # no pre-check: overruns happen and are recorded in the ledger

    @classmethod
    def parse(cls, value: str | PrecheckPolicy) -> PrecheckPolicy:
        if isinstance(value, PrecheckPolicy):
            return value
        key = str(value).strip().lower()
        for member in cls:
            if member.value == key:
                return member
        raise InvalidParameterError(f"unknown budget policy {value!r}; use 'exclude' or 'record'")


def recorded_steps(ledger: PrivacyLedger, client_id: int) -> int:
    """DP-SGD steps the ledger holds for ``client_id`` (the sum of its events' counts)."""
    return sum(e.count for e in ledger.events_for(client_id))


class BudgetGate:
    """The pre-check: would one more round of ``steps_per_round`` steps keep client m within ε_m?

    ε_m is the budget the client's noise was calibrated for (its *operating* budget; for PFA's Minimum and
    Maximum baselines that is min/max ε, not the client's own preference, which the ledger keeps).
    """

    def __init__(self, calibrations: Sequence[ClientCalibration], ledger: PrivacyLedger) -> None:
        self.calibrations = {c.client_id: c for c in calibrations}
        self.ledger = ledger
        self._memo: dict[tuple[int, int], bool] = {}

    def allows(self, client_id: int) -> bool:
        """004 §4.2's pre-check: may ``client_id`` train one more round within its ε_m? Its recorded steps plus one round's,
        composed by the calibration's accountant (or the reference's inverted closed form)."""
        c = self.calibrations[int(client_id)]
        done = recorded_steps(self.ledger, client_id)
        key = (int(client_id), done)
        if key in self._memo:
            return self._memo[key]
        if c.method == CalibrationMethod.REFERENCE.value:
            eps = reference_spent_epsilon(c, done + c.steps_per_round)
        else:
            composition = self.ledger.composition_for(client_id, extra=[(c.mechanism, c.steps_per_round)])
            eps = float(get_accountant(c.method).epsilon(composition, c.delta).epsilon)
        allowed = eps <= c.epsilon * (1 + 1e-9)
        self._memo[key] = allowed
        return allowed


@dataclass(frozen=True)
class RoundParticipation:
    """What the sampler decided in one training round."""

    round: int
    candidates: int
    sampled: tuple[int, ...]
    public: tuple[int, ...]
    private: tuple[int, ...]
    exhausted: tuple[int, ...]
    resamples: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "candidates": self.candidates, "sampled": list(self.sampled), "public": list(self.public),
                "private": list(self.private), "exhausted": list(self.exhausted), "resamples": self.resamples}


@dataclass
class StopRecord:
    round: int
    candidates: int
    needed: int
    exhausted: tuple[int, ...]
    #: > 0: the stop came from that many draws without a public client (the reference's rule), not from the budgets
    draws_without_public: int = 0

    @property
    def reason(self) -> str:
        if self.draws_without_public:
            return (f"training stopped in round {self.round}: {self.draws_without_public} draws of {self.needed} clients "
                    "held no public client (the reference code's stop rule)")
        return (f"training stopped before round {self.round}: only {self.candidates} client(s) pass the budget pre-check, "
                f"fewer than the {self.needed} sampled per round ({len(self.exhausted)} client(s) have spent their budget)")

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "candidates": self.candidates, "needed": self.needed,
                "exhausted": list(self.exhausted), "reason": self.reason}


Splitter = Callable[[Sequence[int]], tuple[tuple[int, ...], tuple[int, ...]]]


@dataclass
class BudgetedSampler:
    """K of the pre-check candidates per round; stops when fewer than K remain.

    ``split`` divides a list of client ids into (public, private); ``require_public`` re-draws a sample
    without a public client up to 50 times (the reference code's projection methods) and ``stop_without_public``
    stops training when 50 draws held none (the reference's rule; module docstring); ``public_only`` trains
    only the public clients of each sample (the public-only FedAvg baseline: private clients spend nothing).
    """

    num_clients: int
    per_round: int
    gate: BudgetGate | None
    split: Splitter
    policy: PrecheckPolicy = PrecheckPolicy.EXCLUDE
    require_public: bool = False
    public_only: bool = False
    stop_without_public: bool = False
    rounds: list[RoundParticipation] = field(default_factory=list)
    stopped: StopRecord | None = None
    _pending: tuple[int, list[int], list[int]] | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.per_round <= self.num_clients:
            raise InvalidParameterError(f"cannot sample {self.per_round} of {self.num_clients} clients per round")
        self.policy = PrecheckPolicy.parse(self.policy)

    def candidates(self) -> tuple[list[int], list[int]]:
        """(clients that pass the pre-check, clients that do not)."""
        if self.gate is None or self.policy is PrecheckPolicy.RECORD:
            return list(range(self.num_clients)), []
        ok, exhausted = [], []
        for client in range(self.num_clients):
            (ok if self.gate.allows(client) else exhausted).append(client)
        return ok, exhausted

    def can_train(self, round_: int) -> bool:
        """Whether round ``round_`` trains clients (False from the stop round on)."""
        if self.stopped is not None:
            return False
        if self._pending is not None and self._pending[0] == round_:
            return True
        ok, exhausted = self.candidates()
        if len(ok) < self.per_round:
            self.stopped = StopRecord(round_, len(ok), self.per_round, tuple(exhausted))
            return False
        self._pending = (round_, ok, exhausted)
        return True

    def sample(self, round_: int, rng: np.random.Generator) -> list[int]:
        """K clients drawn uniformly without replacement among this round's candidates."""
        if (self._pending is None or self._pending[0] != round_) and not self.can_train(round_):
            return []
        assert self._pending is not None
        _, ok, exhausted = self._pending
        self._pending = None
        pool = np.asarray(ok, dtype=np.int64)
        tries = 0
        last_try = RESAMPLE_TRIES - 1 if self.stop_without_public else RESAMPLE_TRIES
        while True:
            chosen = sorted(int(c) for c in rng.choice(pool, size=self.per_round, replace=False))
            public, private = self.split(chosen)
            if public or not self.require_public or tries >= last_try:
                break
            tries += 1
        if self.stop_without_public and not public:
            self.stopped = StopRecord(round_, len(ok), self.per_round, tuple(exhausted), draws_without_public=tries + 1)
            return []
        self.rounds.append(RoundParticipation(round_, len(ok), tuple(chosen), tuple(public), tuple(private), tuple(exhausted), tries))
        return sorted(public) if self.public_only else chosen

    def roles(self, round_: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """(public, private) of the sample of ``round_`` (empty if the round did not sample)."""
        for record in reversed(self.rounds):
            if record.round == round_:
                return record.public, record.private
        return (), ()

    def report(self) -> dict[str, Any]:
        counts = np.zeros(self.num_clients, dtype=np.int64)
        for record in self.rounds:
            trained = record.public if self.public_only else record.sampled
            for c in trained:
                counts[c] += 1
        return {
            "per_round": self.per_round,
            "policy": self.policy.value,
            "rounds_sampled": len(self.rounds),
            "participation_per_client": counts.tolist(),
            "stopped": None if self.stopped is None else self.stopped.to_dict(),
            "rounds_without_public": [r.round for r in self.rounds if not r.public],
        }


def participation_trial(spec: dict[str, Any], seed: int) -> dict[str, Any]:
    """Audit point F2: one simulated run of the reference's ``server.sample_clients`` (a random permutation of the
    clients still under budget, the first ``int(sample_ratio·N)`` of them) without the cap (the paper's description,
    004 §4.2) and with the reference pre-check cap; training stops once fewer than that many clients remain."""
    n, rounds = int(spec["num_clients"]), int(spec["rounds"])
    per_round = int(spec["sample_ratio"] * n)
    cap = int(spec["cap_participations"])
    rng = np.random.default_rng(int(seed))
    uncapped = np.zeros(n, dtype=np.int64)
    for _ in range(rounds):
        uncapped[rng.permutation(n)[:per_round]] += 1
    capped = np.zeros(n, dtype=np.int64)
    stopped_at = None
    for r in range(1, rounds + 1):
        candidates = np.flatnonzero(capped < cap)
        if len(candidates) < per_round:
            stopped_at = r
            break
        capped[rng.permutation(candidates)[:per_round]] += 1
    return {"uncapped_counts": uncapped.tolist(), "capped_counts": capped.tolist(),
            "capped_stop_round": stopped_at, "rounds_run_with_cap": (stopped_at - 1) if stopped_at else rounds}
