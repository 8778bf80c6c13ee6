"""Result files: the one JSON envelope every privaudit command writes and ``privaudit report`` renders.

::

    {"schema": "privaudit.result/1",
     "kind": "claim-audit" | "ledger" | "epsilon-curve" | "membership-attack" | "inversion" | "training" | ...,
     "title": "one line",
     "data": {...kind-specific, see KINDS and evidence_pages()...},
     "config": {...the exact inputs that produced it...},
     "provenance": {"privaudit": "0.1.0", "python": "3.11.7", "platform": "...", "created": "ISO-8601 UTC",
                    "command": "privaudit ...", "seed": 0, "packages": {"numpy": "...", "torch": "..."}},
     "inputs": {"name": "path relative to this file", ...}}

``command`` is the program that wrote the result as it was started (``privaudit train …``, ``python my_loop.py …``,
``flwr-serverapp …``), every secret-looking value redacted (:mod:`privaudit.report.command_line`); a command given
explicitly is redacted too.

Figures are not embedded in result files; the report layer draws them from ``data``. ``inputs`` (optional)
declares the other files a result is rendered with — another result it is joined with, or a figure the run drew
that the numbers cannot redraw (a reconstruction grid); each kind may require some (:func:`required_inputs`).
Reading validates the envelope, the kind's required keys and declared input names, so a foreign or truncated
file is one clear error; :meth:`Result.input_path` makes a declared input that is missing one clear error too.

A report's merged ``results.json`` (:data:`MERGED_SCHEMA`) holds several results, each with the ``source`` it
was read from; :func:`read_merged` reads it back (files written before the merged schema was named are
recognised by their ``"privaudit"`` and ``"results"`` keys).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import sys
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from privaudit import __version__, plugins
from privaudit.errors import InvalidParameterError
from privaudit.output_folder import write_file
from privaudit.plugins import EvidencePageRef
from privaudit.report.command_line import current_command, redact_text

RESULT_SCHEMA = "privaudit.result/1"

#: Known kinds and the keys their ``data`` must contain (others are allowed). Documented in README. The evidence
#: kinds (one per committed page under ``reports/``) are declared by the papers: :func:`evidence_pages`.
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
    # privaudit check RUN: each check's status, p-value, level, reason, assumptions and needs (schemas/check.schema.json)
    "check": ("schema", "alpha", "outcome", "checks"),
}


def evidence_pages() -> dict[str, EvidencePageRef]:
    """The evidence kinds the registered papers declare (:attr:`privaudit.plugins.Paper.evidence_pages`), by kind.

    One committed page per kind (rendered by :mod:`privaudit.report.evidence`); each declares the keys its result's
    ``data`` must contain and the inputs it must declare. A kind declared twice, or one that redefines a
    :data:`KINDS` entry, is one clear error.
    """
    pages: dict[str, EvidencePageRef] = {}
    for paper in plugins.papers():
        for page in paper.evidence_pages:
            if page.kind in pages or page.kind in KINDS:
                raise InvalidParameterError(f"paper {paper.key!r} declares the result kind {page.kind!r}, which is "
                                            "already a known kind")
            pages[page.kind] = page
    return pages


def required_keys(kind: str) -> tuple[str, ...] | None:
    """The keys a ``kind`` result's ``data`` must contain (:data:`KINDS`, else the paper's declaration); ``None`` for
    an unknown kind."""
    if kind in KINDS:
        return KINDS[kind]
    page = evidence_pages().get(kind)
    return None if page is None else page.data_keys


def required_inputs(kind: str) -> tuple[str, ...]:
    """The inputs a ``kind`` result must declare by name (an evidence kind's, as its paper declares them)."""
    page = None if kind in KINDS else evidence_pages().get(kind)
    return () if page is None else page.inputs


#: The schema of a report's merged ``results.json`` (:func:`merged_dict`).
MERGED_SCHEMA = "privaudit.report/1"

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
        "command": redact_text(command) if command is not None else current_command(),
        "seed": seed,
        "packages": packages,
    }
    if extra:
        out.update(extra)
    return out


def _redacted(prov: dict[str, Any]) -> dict[str, Any]:
    """Provenance as written: its command redacted again, so a result read from an older file never carries a secret
    into a merged ``results.json`` or a report."""
    command = prov.get("command") if isinstance(prov, dict) else None
    return {**prov, "command": redact_text(command)} if isinstance(command, str) else prov


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
    #: declared inputs: name → path relative to the result file's directory (absolute paths are kept as they are)
    inputs: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = {
            "schema": RESULT_SCHEMA,
            "kind": self.kind,
            "title": self.title,
            "data": _jsonable(self.data),
            "config": _jsonable(self.config),
            "provenance": _jsonable(_redacted(self.provenance)),
        }
        if self.inputs:
            out["inputs"] = dict(self.inputs)
        return out

    def input_path(self, name: str) -> Path:
        """The declared input ``name``, resolved against the result file's directory; missing → one clear error."""
        if name not in self.inputs:
            raise InvalidParameterError(f"{self.source or self.kind}: the result declares no input {name!r} "
                                        f"(declared: {', '.join(sorted(self.inputs)) or 'none'})")
        return self._resolve(name, check=True)

    def missing_inputs(self) -> list[str]:
        """``name = path`` for every declared input whose file does not exist."""
        return [f"{name} = {self._resolve(name, check=False)}" for name in self.inputs
                if not self._resolve(name, check=False).is_file()]

    def _resolve(self, name: str, check: bool) -> Path:
        path = Path(self.inputs[name])
        if not path.is_absolute() and self.source is not None:
            path = Path(os.path.normpath(self.source.parent / path))
        if check and not path.is_file():
            raise InvalidParameterError(f"{self.source or self.kind}: declared input {name!r} is missing: no file {path}")
        return path


def make_result(kind: str, title: str, data: dict[str, Any], config: dict[str, Any] | None = None, *,
                command: str | None = None, seed: int | None = None, inputs: dict[str, str] | None = None,
                extra: dict[str, Any] | None = None) -> Result:
    """A result with this machine's provenance (``extra`` adds to it, e.g. where recovered numbers came from)."""
    _check_kind(kind, data, origin="result")
    _check_inputs(kind, inputs or {}, origin="result")
    return Result(kind, title, data, config or {}, provenance(command, seed, extra), inputs=dict(inputs or {}))


def write_result(path: str | Path, result: Result) -> Path:
    """Write ``result`` as pretty JSON (parent directories created; atomically, and a failure names the file:
    :func:`privaudit.output_folder.write_file`); returns the path."""
    return write_file(path, json.dumps(result.to_dict(), indent=1, ensure_ascii=False, allow_nan=False) + "\n")


def _check_kind(kind: str, data: Any, origin: str) -> None:
    if not isinstance(data, dict):
        raise InvalidParameterError(f"{origin}: 'data' must be an object")
    required = required_keys(kind)
    if required is None:
        return  # unknown kinds are allowed (newer privaudit versions); the report lists them as such
    missing = [k for k in required if k not in data]
    if missing:
        raise InvalidParameterError(f"{origin}: a '{kind}' result lacks {', '.join(missing)}")


def _check_inputs(kind: str, inputs: Any, origin: str) -> None:
    if not isinstance(inputs, dict) or not all(isinstance(k, str) and isinstance(v, str) and v for k, v in inputs.items()):
        raise InvalidParameterError(f"{origin}: 'inputs' must map names to file paths")
    missing = [name for name in required_inputs(kind) if name not in inputs]
    if missing:
        raise InvalidParameterError(f"{origin}: a '{kind}' result must declare its input(s) {', '.join(missing)}")


def _load_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise InvalidParameterError(f"{path}: no such file") from None
    except OSError as exc:
        raise InvalidParameterError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"{path}: not a JSON file ({exc})") from None


def read_result(path: str | Path) -> Result:
    """Read and validate a result file; any problem is one :class:`InvalidParameterError` line."""
    path = Path(path)
    return _from_dict(_load_json(path), origin=str(path), source=path)


def _from_dict(raw: Any, origin: str, source: Path | None) -> Result:
    if not isinstance(raw, dict) or raw.get("schema") != RESULT_SCHEMA:
        raise InvalidParameterError(f"{origin}: not a privaudit result (expected schema {RESULT_SCHEMA!r})")
    kind = raw.get("kind")
    if not isinstance(kind, str) or not kind:
        raise InvalidParameterError(f"{origin}: result has no 'kind'")
    data = raw.get("data")
    _check_kind(kind, data, origin=origin)
    inputs = raw.get("inputs") or {}
    _check_inputs(kind, inputs, origin=origin)
    return Result(kind, str(raw.get("title", kind)), _restore(data), _restore(raw.get("config") or {}),
                  raw.get("provenance") or {}, source=source, inputs=dict(inputs))


# ------------------------------------------------------------------------------------------------
# a report's merged results.json
# ------------------------------------------------------------------------------------------------
def merged_dict(results: list[Result], skipped: list[str]) -> dict[str, Any]:
    """The merged ``results.json`` of a report: every result with the ``source`` it was read from, and what was skipped."""
    return {"schema": MERGED_SCHEMA, "privaudit": __version__,
            "results": [{"source": None if r.source is None else str(r.source), **r.to_dict()} for r in results],
            "skipped": list(skipped)}


def is_merged(raw: Any) -> bool:
    """A report's merged results (also those written before :data:`MERGED_SCHEMA` existed)."""
    if not isinstance(raw, dict):
        return False
    if raw.get("schema") == MERGED_SCHEMA:
        return True
    return "schema" not in raw and "privaudit" in raw and isinstance(raw.get("results"), list)


def read_merged(path: str | Path) -> tuple[list[Result], list[str]]:
    """The results of a report's merged ``results.json`` and the files its report skipped; bad input → one clear error.

    Each result keeps the ``source`` recorded in the file (so that a report rendered from it again writes the same
    merged file); a declared input is resolved against that source's directory.
    """
    path = Path(path)
    raw = _load_json(path)
    if not is_merged(raw):
        raise InvalidParameterError(f"{path}: not a privaudit report's merged results (expected schema {MERGED_SCHEMA!r})")
    results = []
    for index, item in enumerate(raw["results"]):
        if not isinstance(item, dict):
            raise InvalidParameterError(f"{path}: results[{index}] is not an object")
        source = item.get("source")
        results.append(_from_dict(item, origin=f"{path}: results[{index}]",
                                  source=Path(source) if isinstance(source, str) and source else None))
    skipped = raw.get("skipped") or []
    if not isinstance(skipped, list) or not all(isinstance(s, str) for s in skipped):
        raise InvalidParameterError(f"{path}: 'skipped' must be a list of file names")
    return results, list(skipped)
