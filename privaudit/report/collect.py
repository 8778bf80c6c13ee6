"""Gather result files for a report: explicit files must be privaudit results; directories are scanned.

A named file that is missing, unreadable or not a privaudit result is an error (one line, exit 2 on the
CLI). A named file may also be a report's merged ``results.json``: its results are read back, with the list
of files its report skipped, so a report re-renders from its own merged JSON. Inside a directory, ``*.json``
files that are not privaudit results (checkpoint manifests, trial logs) are skipped and counted, so a report
over an audit directory "just works"; a merged ``results.json`` found there is read only when the directory
holds no individual result files (a report written inside the audit directory it summarises must not count
its results twice, and a report's own output directory must render again).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from privaudit.errors import InvalidParameterError
from privaudit.report.results import RESULT_SCHEMA, Result, is_merged, read_merged, read_result


@dataclass
class Collection:
    results: list[Result] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def by_kind(self) -> dict[str, list[Result]]:
        grouped: dict[str, list[Result]] = {}
        for res in self.results:
            grouped.setdefault(res.kind, []).append(res)
        return grouped

    def add_merged(self, path: Path) -> None:
        results, skipped = read_merged(path)
        self.results += results
        self.skipped += skipped


def _classify(path: Path) -> str:
    """``"result"`` (``"schema": RESULT_SCHEMA`` at the top level), ``"merged"`` (a report's results.json) or ``"other"``."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
        if RESULT_SCHEMA.encode() not in head:
            return "other"
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return "other"
    if isinstance(data, dict) and data.get("schema") == RESULT_SCHEMA:
        return "result"
    return "merged" if is_merged(data) else "other"


def _collect_directory(path: Path, out: Collection, seen: set[Path]) -> None:
    candidates = sorted(p for p in path.rglob("*.json") if p.is_file())
    merged: list[Path] = []
    found = 0
    for candidate in candidates:
        if candidate.resolve() in seen:
            continue
        kind = _classify(candidate)
        if kind == "result":
            out.results.append(read_result(candidate))
            seen.add(candidate.resolve())
            found += 1
        elif kind == "merged":
            merged.append(candidate)
        else:
            out.skipped.append(str(candidate))
    if found == 0 and merged:
        for candidate in merged:
            out.add_merged(candidate)
            seen.add(candidate.resolve())
        return
    out.skipped += [str(m) for m in merged]
    if found == 0:
        raise InvalidParameterError(f"{path}: no privaudit result files in this directory")


def collect(inputs: list[str | Path]) -> Collection:
    """Read every result named or found under ``inputs`` (sorted, de-duplicated)."""
    if not inputs:
        raise InvalidParameterError("give at least one result file or directory")
    out = Collection()
    seen: set[Path] = set()
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            _collect_directory(path, out, seen)
        elif path.exists():
            if path.resolve() in seen:
                continue
            if _classify(path) == "merged":
                out.add_merged(path)
            else:
                out.results.append(read_result(path))
            seen.add(path.resolve())
        else:
            raise InvalidParameterError(f"{path}: no such file or directory")
    return out
