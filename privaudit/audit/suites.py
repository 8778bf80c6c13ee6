"""Named suites of claims with small default trial counts (``privaudit audit --suite default``).

A suite is the list of (claim id, trials) registered under its name. Each claim declares the suites it
belongs to in its ``suites`` field (``privaudit.audit.claims``), so a capability that lands later adds
its part by listing its claim there; :func:`register` adds entries from elsewhere (a plug-in, a test).

``default`` is what ``make demo`` runs: every claim at a size that finishes within minutes on 2 cores.
"""

from __future__ import annotations

from dataclasses import dataclass

from privaudit.audit.claims import all_claims, get_claim
from privaudit.errors import InvalidParameterError


@dataclass(frozen=True)
class SuiteEntry:
    claim_id: str
    trials: int


_EXTRA: dict[str, list[SuiteEntry]] = {}


def register(suite: str, claim_id: str, trials: int) -> None:
    """Add ``claim_id`` with ``trials`` per reading to ``suite`` (created if new)."""
    get_claim(claim_id)
    if isinstance(trials, bool) or int(trials) < 1:
        raise InvalidParameterError(f"a suite entry needs at least one trial, got {trials!r}")
    _EXTRA.setdefault(str(suite), []).append(SuiteEntry(claim_id, int(trials)))


def suites() -> dict[str, list[SuiteEntry]]:
    """Every suite by name, claims in registry order (then registered extras)."""
    out: dict[str, list[SuiteEntry]] = {}
    for claim in all_claims():
        for name, trials in claim.suites:
            out.setdefault(name, []).append(SuiteEntry(claim.claim_id, int(trials)))
    for name, entries in _EXTRA.items():
        current = out.setdefault(name, [])
        known = {e.claim_id for e in current}
        current.extend(e for e in entries if e.claim_id not in known)
    return out


def get_suite(name: str) -> list[SuiteEntry]:
    available = suites()
    entries = available.get(str(name).strip())
    if entries is None:
        raise InvalidParameterError(f"unknown suite {name!r}; known suites: {', '.join(sorted(available)) or 'none'}")
    return entries
