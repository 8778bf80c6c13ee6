"""The accounting check: every release of the run has a ledger event, for every client it concerns, with its steps.

The ledger is the guarantee: a release without an event has no DP guarantee (ε = ∞), however much noise it carried
(privaudit's rule, :mod:`privaudit.accounting.ledger`). Per round r of the run (exact; no α is spent):

* **releases** — the global model changed (θ_r ≠ θ_(r−1) on the checked tensors) or clients trained: the round must
  have an event;
* **participation** — each client that trained in round r (``metrics[r].clients``, or whose release is recorded)
  must be covered: by a client-level (``server``) event of the round, or by an event charged to it (record level);
* **steps** — a record-level event counts the DP-SGD steps of the round; where the run records the clients' local
  training (epochs E, batch size B) and partition sizes n_k, a client's steps are at least E·⌈n_k/B⌉ (E·n_k/B under
  Poisson sampling, rounded down): fewer is under-counting.

Events the ledger already marks invalid, and no-guarantee events (ε = ∞), are accounted truthfully: listed, not failed.
The no-guarantee events an earlier ``privaudit check`` added (their note starts with :data:`ADDED`) are read as absent,
so checking a run twice gives the same result.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from privaudit.accounting.ledger import SERVER
from privaudit.accounting.mechanisms import SubsampledGaussian
from privaudit.check.base import MARK, CheckResult, Status, SubTest
from privaudit.check.record import RunRecord, flat
from privaudit.errors import PrivauditError

NAME = "accounting"
NULL = "every release has a ledger event for every client it concerns, with all its steps"
#: The note of the no-guarantee events a failed accounting check adds (:mod:`privaudit.check.marking`).
ADDED = f"{MARK} {NAME}"


def partition_sizes(record: RunRecord) -> dict[int, int] | None:
    """client → number of training records, from a recorded run's partition file (None when not recorded)."""
    partition = record.manifest.get("dataset", {}).get("partition") if isinstance(record.manifest.get("dataset"), dict) else None
    if not isinstance(partition, dict) or not isinstance(partition.get("file"), str):
        return None
    from privaudit.fl.engine.checkpoint import read_tensor_file

    try:
        tensors = read_tensor_file(record.path, partition["file"], record.manifest)
    except PrivauditError:
        return None
    return {int(k.split("/", 1)[1]): int(v.numel()) for k, v in tensors.items() if k.startswith("client/")}


def _local(record: RunRecord) -> Mapping[str, Any] | None:
    local = record.manifest.get("config", {}).get("local") if isinstance(record.manifest.get("config"), dict) else None
    if isinstance(local, dict) and isinstance(local.get("epochs"), int) and isinstance(local.get("batch_size"), int):
        return local
    return None


class AccountingCheck:
    """The accounting check (module docstring)."""

    name = NAME

    def statistical(self, record: RunRecord) -> bool:
        """Whether it takes a share of α on ``record``: an exact comparison: no share of α."""
        return False

    def missing(self, record: RunRecord) -> tuple[str, ...]:
        return () if record.rounds > 0 else ("at least one recorded round",)

    def run(self, record: RunRecord, level: float = 0.0) -> CheckResult:
        if record.rounds <= 0:
            return CheckResult(self.name, Status.NOT_RUN, "the run recorded no round", needs=self.missing(record))
        events_by_round: dict[int, list] = {}
        for event in record.ledger.events:
            if not event.has_guarantee and event.note.startswith(ADDED):
                continue  # a no-guarantee event an earlier check added: read as absent (the same result twice)
            events_by_round.setdefault(event.round, []).append(event)
        unaccounted: list[tuple[int, list[int] | None, str]] = []
        notes: list[str] = []
        under: list[str] = []
        local = _local(record)
        sizes = partition_sizes(record) if local else None
        for round_ in range(1, record.rounds + 1):
            events = events_by_round.get(round_, [])
            trained = set(record.sampled(round_) or [])
            releases = record.releases(round_) if record.releases_recorded else None
            trained |= set(releases or {})
            changed = not np.array_equal(flat(record.global_model(round_ - 1), record.names),
                                         flat(record.global_model(round_), record.names))
            if not events:
                if changed or trained:
                    what = "the global model changed" if changed else f"{len(trained)} client(s) trained"
                    unaccounted.append((round_, sorted(trained) or None, f"round {round_}: {what} with no privacy event"))
                continue
            charged = {e.client_id for e in events}
            if SERVER in charged:
                continue
            missing = sorted(k for k in trained if str(k) not in charged)
            if missing:
                unaccounted.append((round_, missing, f"round {round_}: client(s) {missing[:5]} trained with no event charged"))
            if local and sizes:
                under += self._steps(round_, events, local, sizes)
        invalid = sum(1 for e in record.ledger.events if not e.valid)
        none = sum(1 for e in record.ledger.events if not e.has_guarantee)
        if invalid:
            notes.append(f"{invalid} event(s) the ledger already marks invalid (no guarantee is stated for their clients)")
        if none:
            notes.append(f"{none} event(s) with no DP guarantee (ε = ∞), accounted as such")
        beyond = sorted({e.round for e in record.ledger.events if e.round > record.rounds})
        if beyond:
            notes.append(f"events in round(s) {beyond[:5]} beyond the {record.rounds} recorded (over-accounting, harmless)")
        needs = () if (local and sizes) or not record.declared.record_level else (
            "each client's local training (epochs, batch size) and partition size, to count DP-SGD steps",)
        tests = (
            SubTest("releases and participation", NULL, float(len(unaccounted)), None, 0.0, bool(unaccounted),
                    unaccounted[0][2] if unaccounted else f"{record.rounds} round(s) covered"),
            SubTest("steps", "record-level events count every local step", float(len(under)), None, 0.0, bool(under),
                    under[0] if under else ("steps not checkable" if needs else "every event counts its client's steps")),
        )
        details = {"unaccounted": [{"round": r, "clients": c} for r, c, _ in unaccounted], "notes": notes}
        assumptions = ("a round whose global model changed, or in which clients trained, released something",
                       "a client-level (server) event covers every client of its round")
        rounds = tuple(sorted({r for r, _, _ in unaccounted}))
        if unaccounted or under:
            first = unaccounted[0][2] if unaccounted else under[0]
            count = len(unaccounted) + len(under)
            reason = f"{first} (ε = ∞ for what it released)" if unaccounted else first
            if count > 1:
                reason += f"; {count - 1} more"
            return CheckResult(self.name, Status.FAILED, reason, NULL, float(count), None, 0.0, assumptions, needs, tests,
                               rounds, details=details)
        return CheckResult(self.name, Status.PASSED, f"every one of {record.rounds} round(s) is in the ledger"
                           + (f" ({'; '.join(notes)})" if notes else ""), NULL, 0.0, None, 0.0, assumptions, needs, tests,
                           details=details)

    @staticmethod
    def _steps(round_: int, events, local: Mapping[str, Any], sizes: Mapping[int, int]) -> list[str]:
        out = []
        epochs, batch = int(local["epochs"]), int(local["batch_size"])
        counted: dict[str, int] = {}
        rates: dict[str, float] = {}
        for event in events:
            if not event.has_guarantee or not event.client_id.isdigit() or int(event.client_id) not in sizes:
                continue
            counted[event.client_id] = counted.get(event.client_id, 0) + event.count
            if isinstance(event.mechanism, SubsampledGaussian):
                rates[event.client_id] = event.mechanism.sample_rate
        for client, count in sorted(counted.items()):
            n = sizes[int(client)]
            rate = rates.get(client, 1.0)
            poisson_steps = rate < 1 and abs(rate - min(1.0, batch / n)) <= 1e-6
            expected = math.floor(epochs / rate + 1e-9) if poisson_steps else epochs * math.ceil(n / batch)
            if count < expected:
                out.append(f"round {round_}: client {client}'s events count {count} step(s); {epochs} epoch(s) of "
                           f"batches of {batch} over its {n} records take {expected}")
        return out
