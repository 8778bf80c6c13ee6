"""The canary clients of a recorded run, stored beside its checkpoint (``canary-clients.json``).

A loop recorded with :class:`privaudit.interop.FederationRecorder` that added canary clients
(:class:`privaudit.interop.LoopCanaries`) keeps in its checkpoint folder what scoring needs and nothing more: the
canaries are regenerated from (dimension, count, seed, orthonormal) by
:func:`~privaudit.fl.canaries.clients.make_canary_clients`, and the stored membership bits, client ids and update
norm are checked against the regenerated ones, so a file edited by hand (or written by another version) is refused
instead of scored against the wrong directions. Directions are not stored (m × d floats).
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.errors import CheckpointError
from privaudit.fl.canaries.clients import CanaryClients, make_canary_clients

CANARY_FILE = "canary-clients.json"
FORMAT = "privaudit-canary-clients/1"


def canary_record(canaries: CanaryClients, *, orthonormal: bool, participations: dict[int, int] | None = None) -> dict[str, Any]:
    """The JSON-able record of ``canaries`` (made by ``make_canary_clients(..., orthonormal=orthonormal)``)."""
    return {"format": FORMAT, "dimension": canaries.dimension, "count": canaries.count, "seed": canaries.seed,
            "orthonormal": bool(orthonormal), "update_norm": canaries.update_norm,
            "inserted": [bool(b) for b in canaries.inserted], "client_ids": list(canaries.client_ids),
            "participations": {str(k): int(v) for k, v in (participations or {}).items()}}


def write_canary_clients(folder: str | Path, record: dict[str, Any]) -> Path:
    """Write ``record`` (:func:`canary_record`) into the checkpoint ``folder``; returns the file."""
    path = Path(folder) / CANARY_FILE
    if not path.parent.is_dir():
        raise CheckpointError(f"{path.parent} is not a folder: record the run first, then save its canary clients")
    path.write_text(json.dumps(record, indent=1))
    return path


def read_canary_clients(folder: str | Path) -> tuple[CanaryClients, dict[str, Any]] | None:
    """The canaries a recorded run stored (regenerated and checked) and the raw record; ``None`` when it has none."""
    path = Path(folder) / CANARY_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        if record.get("format") != FORMAT:
            raise CheckpointError(f"{path} is not a {FORMAT} file")
        canaries = make_canary_clients(int(record["dimension"]), int(record["count"]), seed=int(record["seed"]),
                                       update_norm=record.get("update_norm"), orthonormal=bool(record["orthonormal"]))
        canaries = replace(canaries, client_ids=tuple(int(c) for c in record["client_ids"]))
        stored = np.asarray(record["inserted"], dtype=bool)
    except (KeyError, TypeError, ValueError) as error:
        raise CheckpointError(f"{path} is not a readable canary-client record: {error}") from None
    if stored.shape != canaries.inserted.shape or not np.array_equal(stored, canaries.inserted):
        raise CheckpointError(f"{path}: the stored membership bits differ from those its seed regenerates; the file "
                              "was changed after the run, or written by another version")
    return canaries, record
