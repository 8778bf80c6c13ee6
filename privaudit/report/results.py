"""Result files: the one JSON envelope every privaudit command writes and ``privaudit report`` renders.

::

    {"schema": "privaudit.result/1",
     "kind": "claim-audit" | "ledger" | "epsilon-curve" | "membership-attack" | "inversion" | "training" | ...,
     "title": "one line",
     "data": {...kind-specific, see KINDS...},
     "config": {...the exact inputs that produced it...},
     "provenance": {"privaudit": "0.1.0", "python": "3.11.7", "platform": "...", "created": "ISO-8601 UTC",
                    "command": "privaudit ...", "seed": 0, "packages": {"numpy": "...", "torch": "..."}}}

Figures are not embedded in result files; the report layer draws them from ``data``. Reading validates the
envelope and the kind's required keys, so a foreign or truncated file is one clear error.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from privaudit import __version__
from privaudit.errors import InvalidParameterError

RESULT_SCHEMA = "privaudit.result/1"

#: Known kinds and the keys their ``data`` must contain (others are allowed). Documented in README.
KINDS: dict[str, tuple[str, ...]] = {
    # one claim checked: claimed (ε, δ), accountant ε (paper's / implementation's assumptions), ε lower bounds, verdict
    "claim-audit": ("claim_id", "claimed", "accountant", "lower_bounds", "verdict", "reason"),
    # per-client ε from a ledger (compute-epsilon --checkpoint, training runs)
    "ledger": ("accountant", "delta", "max_epsilon", "mean_epsilon", "per_client"),
    # ε after each round, per accountant: {"rounds": [...], "epsilon": {"prv": [...], "rdp": [...]}}
    "epsilon-curve": ("rounds", "epsilon", "delta"),
    # membership scores summarised: ROC curve, TPR at low FPR, AUC (+ bootstrap CIs)
    "membership-attack": ("attack", "roc", "auc", "tpr_at_fpr"),
    # gradient inversion: per-image PSNR/SSIM, label accuracy, the image grid file
    "inversion": ("attack", "defense", "psnr", "ssim"),
    # a training run: accuracy and loss per round
    "training": ("algorithm", "rounds", "accuracy"),
    # a table of any shape: {"columns": [...], "rows": [[...], ...]}
    "table": ("columns", "rows"),
}

_PACKAGES = ("numpy", "scipy", "torch", "opacus", "prv-accountant", "dp-accounting")


def provenance(command: str | None = None, seed: int | None = None, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Versions and context that make a result reproducible (no torch import: versions come from metadata)."""
    packages = {}
    for name in _PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    out = {
        "privaudit": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "created": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "command": command if command is not None else " ".join(["privaudit", *sys.argv[1:]]),
        "seed": seed,
        "packages": packages,
    }
    if extra:
        out.update(extra)
    return out


def _jsonable(value: Any) -> Any:
    """Infinities as the strings "inf"/"-inf" (JSON has none); NaN is refused — never a silent NaN."""
    if isinstance(value, float):
        if math.isnan(value):
            raise InvalidParameterError("refusing to write NaN into a result file")
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _jsonable(value.tolist())
    if hasattr(value, "to_dict"):
        return _jsonable(value.to_dict())
    return value


def _restore(value: Any) -> Any:
    if value == "inf":
        return math.inf
    if value == "-inf":
        return -math.inf
    if isinstance(value, dict):
        return {k: _restore(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_restore(v) for v in value]
    return value


@dataclass
class Result:
    kind: str
    title: str
    data: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    provenance: dict[str, Any] = field(default_factory=dict)
    source: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": RESULT_SCHEMA,
            "kind": self.kind,
            "title": self.title,
            "data": _jsonable(self.data),
            "config": _jsonable(self.config),
            "provenance": _jsonable(self.provenance),
        }


def make_result(kind: str, title: str, data: dict[str, Any], config: dict[str, Any] | None = None, *,
                command: str | None = None, seed: int | None = None) -> Result:
    _check_kind(kind, data, origin="result")
    return Result(kind, title, data, config or {}, provenance(command, seed))


def write_result(path: str | Path, result: Result) -> Path:
    """Write ``result`` as pretty JSON (parent directories created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    return path


def _check_kind(kind: str, data: Any, origin: str) -> None:
    if not isinstance(data, dict):
        raise InvalidParameterError(f"{origin}: 'data' must be an object")
    required = KINDS.get(kind)
    if required is None:
        return  # unknown kinds are allowed (newer privaudit versions); the report lists them as such
    missing = [k for k in required if k not in data]
    if missing:
        raise InvalidParameterError(f"{origin}: a '{kind}' result lacks {', '.join(missing)}")


def read_result(path: str | Path) -> Result:
    """Read and validate a result file; any problem is one :class:`InvalidParameterError` line."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidParameterError(f"{path}: no such file") from None
    except OSError as exc:
        raise InvalidParameterError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(raw, dict) or raw.get("schema") != RESULT_SCHEMA:
        raise InvalidParameterError(f"{path}: not a privaudit result (expected schema {RESULT_SCHEMA!r})")
    kind = raw.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidParameterError(f"{path}: result has no 'kind'")
    data = raw.get("data")
    _check_kind(kind, data, origin=str(path))
    return Result(kind, str(raw.get("title", kind)), _restore(data), _restore(raw.get("config") or {}),
                  raw.get("provenance") or {}, source=path)
