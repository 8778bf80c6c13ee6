"""Attack scores computed elsewhere: read ``{"in": [...], "out": [...]}`` from JSON or an ``.npz`` with arrays ``in``/``out``.

The one input boundary of ``privaudit audit --scores FILE``. The sides may also be named ``in_scores``/``out_scores``,
as in the ``membership-scores.npz`` that ``privaudit attack membership`` writes
(:meth:`attacks.membership.scores.MembershipScores.save_npz`), so an attack's scores are audited as they are. The
scores become one :class:`~privaudit.stats.scores.AuditScores`, validated once there. Every problem is one
:class:`~privaudit.errors.InvalidParameterError` sentence (a missing file, bad JSON or encoding, a missing or
non-numeric side, NaN or ±inf); NumPy files are read with ``allow_pickle=False``, so no object is ever unpickled.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.stats.scores import AuditScores

SIDES = ("in", "out")
#: The other spelling of each side (the arrays of ``membership-scores.npz``), read when the side itself is absent.
SIDE_ALIASES = {"in": "in_scores", "out": "out_scores"}


def _from_json(path: Path) -> dict[str, object]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise InvalidParameterError(f"{path} is not UTF-8 text; give JSON {{\"in\": [...], \"out\": [...]}} or an .npz") from None
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise InvalidParameterError(f"{path} must hold a JSON object {{\"in\": [...], \"out\": [...]}}, got {type(data).__name__}")
    return data


def _from_npz(path: Path) -> dict[str, object]:
    try:
        with np.load(path, allow_pickle=False) as archive:
            return {name: np.array(archive[name]) for name in archive.files if name in (*SIDES, *SIDE_ALIASES.values())}
    except (ValueError, OSError, zipfile.BadZipFile) as exc:
        raise InvalidParameterError(f"{path} is not a readable .npz of numeric arrays 'in' and 'out' ({exc})") from None


def read_scores(path: str | Path) -> AuditScores:
    """The in/out scores of ``path`` (``.npz`` by suffix, JSON otherwise), validated (larger = "member")."""
    path = Path(path)
    if not path.is_file():
        raise InvalidParameterError(f"score file {path} does not exist or is not a file")
    data = _from_npz(path) if path.suffix.lower() == ".npz" else _from_json(path)
    data = {**{side: data[alias] for side, alias in SIDE_ALIASES.items() if side not in data and alias in data}, **data}
    missing = [side for side in SIDES if side not in data]
    if missing:
        raise InvalidParameterError(f"{path} lacks the score list(s) {', '.join(repr(m) for m in missing)}; "
                                    "it needs 'in' (members) and 'out' (non-members)")
    return AuditScores.of(data["in"], data["out"])
