"""Gather result files for a report: explicit files must be privaudit results; directories are scanned.

A named file that is missing, unreadable or not a privaudit result is an error (one line, exit 2 on the
CLI). Inside a directory, ``*.json`` files that are not privaudit results (checkpoint manifests, trial
logs) are skipped and counted, so a report over an audit directory "just works".
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from privaudit.errors import InvalidParameterError
from privaudit.report.results import RESULT_SCHEMA, Result, read_result


@dataclass
class Collection:
    results: list[Result] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def by_kind(self) -> dict[str, list[Result]]:
        grouped: dict[str, list[Result]] = {}
        for res in self.results:
            grouped.setdefault(res.kind, []).append(res)
        return grouped


def _looks_like_result(path: Path) -> bool:
    """A privaudit result has ``"schema": RESULT_SCHEMA`` at its top level.

    A report's merged ``results.json`` holds results one level down and is skipped, so a report written
    inside the audit directory it summarises does not count its results twice on the next run.
    """
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
        if RESULT_SCHEMA.encode() not in head:
            return False
        data = json.loads(path.read_text())
        return isinstance(data, dict) and data.get("schema") == RESULT_SCHEMA
    except (OSError, ValueError):
        return False


def collect(inputs: list[str | Path]) -> Collection:
    """Read every result named or found under ``inputs`` (sorted, de-duplicated)."""
    if not inputs:
        raise InvalidParameterError("give at least one result file or directory")
    out = Collection()
    seen: set[Path] = set()
    for item in inputs:
        path = Path(item)
        if path.is_dir():
            candidates = sorted(p for p in path.rglob("*.json") if p.is_file())
            found = 0
            for candidate in candidates:
                if candidate.resolve() in seen:
                    continue
                if _looks_like_result(candidate):
                    out.results.append(read_result(candidate))
                    seen.add(candidate.resolve())
                    found += 1
                else:
                    out.skipped.append(str(candidate))
            if found == 0:
                raise InvalidParameterError(f"{path}: no privaudit result files in this directory")
        elif path.exists():
            if path.resolve() not in seen:
                out.results.append(read_result(path))
                seen.add(path.resolve())
        else:
            raise InvalidParameterError(f"{path}: no such file or directory")
    return out
