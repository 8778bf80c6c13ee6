"""A failed check marks the ledger: the events it concerns become invalid with its reason, and releases without an
event get a no-guarantee event.

:func:`marked_ledger` returns the ledger as ``privaudit check`` leaves it: for a failed noise, randomness, clipping or
sampling check, the client-level events of the rounds it names are (or the record-level events it names) marked ``valid=False`` with the check's one-line
reason (prefixed :data:`~privaudit.check.base.MARK`), so ``compute-epsilon --checkpoint`` states no guarantee for their
subject and says why (:class:`~privaudit.accounting.ledger.LedgerSummary`); for a failed accounting check, each
unaccounted release gets a :meth:`~privaudit.accounting.ledger.PrivacyEvent.no_guarantee` event (ε = ∞). Marking twice
adds nothing (a note already there is not repeated, an added event is not added again).

:func:`write_marks` writes that ledger into the checkpoint's ``manifest.json`` (atomically, its content hash
recomputed; the tensor files and their hashes are untouched) with a ``checked`` section naming the failed checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from privaudit import __version__
from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.check.base import MARK, CheckResult
from privaudit.fl.engine.checkpoint import MANIFEST, manifest_digest
from privaudit.output_folder import write_file

#: Checks whose failure invalidates the client-level events of the rounds they name.
_EVENT_CHECKS = ("noise", "randomness", "clipping", "sampling")


def _note(result: CheckResult) -> str:
    return f"{MARK} {result.name}: {result.reason}"


def _joined(existing: str, note: str) -> str:
    if note in existing:
        return existing
    return "; ".join(n for n in (existing, note) if n)


def marked_ledger(ledger: PrivacyLedger, results: Sequence[CheckResult],
                  central_events: Mapping[int, int]) -> tuple[PrivacyLedger, list[str]]:
    """(the marked ledger, one line per change); ``central_events``: round → index of its client-level model event."""
    events = list(ledger.events)
    changes: list[str] = []
    for result in results:
        if not result.failed:
            continue
        note = _note(result)
        if result.name in _EVENT_CHECKS:
            indices = result.events or tuple(central_events[r] for r in (result.rounds or sorted(central_events))
                                             if r in central_events)
            touched = []
            for index in indices:
                event = events[index]
                updated = replace(event, valid=False, note=_joined(event.note, note))
                if updated != event:
                    events[index] = updated
                    touched.append(event.round)
            if touched:
                changes.append(f"{result.name}: {len(touched)} event(s) marked invalid (rounds {_rounds(sorted(set(touched)))})")
        elif result.name == "accounting":
            added = 0
            existing = {(e.client_id, e.round, e.note) for e in events}
            for entry in result.details.get("unaccounted", []):
                clients = entry.get("clients") or [SERVER]
                for client in clients:
                    event = replace(PrivacyEvent.no_guarantee(client, int(entry["round"]), result.reason), note=note)
                    if (event.client_id, event.round, event.note) not in existing:
                        events.append(event)
                        existing.add((event.client_id, event.round, event.note))
                        added += 1
            if added:
                changes.append(f"accounting: {added} no-guarantee event(s) added (ε = ∞)")
    marked = PrivacyLedger(neighbouring=ledger.neighbouring, events=events, budgets=dict(ledger.budgets))
    return marked, changes


def _rounds(rounds: Sequence[int]) -> str:
    rounds = sorted(rounds)
    return ", ".join(map(str, rounds[:6])) + (f", … ({len(rounds)} in all)" if len(rounds) > 6 else "")


def write_marks(root: str | Path, manifest: Mapping[str, Any], ledger: PrivacyLedger, results: Sequence[CheckResult]) -> Path:
    """Write ``ledger`` (and a ``checked`` section) into the checkpoint at ``root``; returns the manifest's path."""
    updated: dict[str, Any] = json.loads(json.dumps(manifest, ensure_ascii=False))
    updated["ledger"] = ledger.to_dict()
    updated["checked"] = {"by": f"privaudit {__version__} check",
                          "failed": [r.name for r in results if r.failed],
                          "reasons": {r.name: r.reason for r in results if r.failed}}
    updated.pop("manifest_sha256", None)
    updated["manifest_sha256"] = manifest_digest(updated)
    return write_file(Path(root) / MANIFEST, json.dumps(updated, indent=1, ensure_ascii=False))
