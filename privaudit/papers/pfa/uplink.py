"""Uplink accounting: bytes each client uploads per round, cumulative totals, PFA+'s reduction (004 §4.5).

The paper counts a model of p parameters as p·F bits with F = 32 (float32). A client uploading its full
update sends 4·p bytes; a PFA+ "private" client uploads, for every projected block (tensor), the k'
coefficients Vᵀ(Δx − c) against the previous round's subspace — 4·Σ_blocks k' bytes ("each private client
only requires uplink bandwidth with 2kF bits in each round" for the two tensors of logistic regression).

:class:`UplinkLedger` records what was uploaded per (round, client) and its kind (``full`` or
``projected``), and reports cumulative bytes by client role and the reduction for private clients:
1 − (bytes the private clients uploaded) / (bytes they would have uploaded in full).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

#: Bytes of one float32 number (the paper's F = 32 bits).
FLOAT32_BYTES = 4


def full_update_bytes(num_parameters: int) -> int:
    """Bytes of a full float32 update of ``num_parameters`` numbers."""
    return FLOAT32_BYTES * int(num_parameters)


def projected_update_bytes(dims_per_block: list[int] | tuple[int, ...]) -> int:
    """Bytes of PFA+'s projected upload: k' float32 coefficients per block."""
    return FLOAT32_BYTES * sum(int(d) for d in dims_per_block)


@dataclass(frozen=True)
class Upload:
    round: int
    client_id: int
    role: str  # "public" or "private" (or "all" for algorithms without roles)
    kind: str  # "full" or "projected"
    bytes: int
    full_bytes: int


@dataclass
class UplinkLedger:
    """Per-client, per-round uploads of one run."""

    uploads: list[Upload] = field(default_factory=list)

    def record(self, round: int, client_id: int, role: str, kind: str, nbytes: int, full_bytes: int) -> None:
        self.uploads.append(Upload(int(round), int(client_id), str(role), str(kind), int(nbytes), int(full_bytes)))

    def per_round(self) -> dict[int, dict[int, int]]:
        """round → {client: bytes}."""
        out: dict[int, dict[int, int]] = defaultdict(dict)
        for u in self.uploads:
            out[u.round][u.client_id] = out[u.round].get(u.client_id, 0) + u.bytes
        return dict(out)

    def cumulative(self, role: str | None = None) -> list[tuple[int, int]]:
        """(round, cumulative bytes up to and including that round), for one role or all clients."""
        totals: dict[int, int] = defaultdict(int)
        for u in self.uploads:
            if role is None or u.role == role:
                totals[u.round] += u.bytes
        running, out = 0, []
        for round_ in sorted(totals):
            running += totals[round_]
            out.append((round_, running))
        return out

    def total(self, role: str | None = None) -> int:
        return sum(u.bytes for u in self.uploads if role is None or u.role == role)

    def total_full(self, role: str | None = None) -> int:
        """What the same uploads would have cost in full."""
        return sum(u.full_bytes for u in self.uploads if role is None or u.role == role)

    def reduction(self, role: str | None = "private") -> float | None:
        """1 − uploaded/full for ``role`` (``None`` if that role uploaded nothing)."""
        full = self.total_full(role)
        return None if full == 0 else 1.0 - self.total(role) / full

    def summary(self) -> dict[str, Any]:
        roles = sorted({u.role for u in self.uploads})
        return {
            "bytes_per_float": FLOAT32_BYTES,
            "total_bytes": self.total(),
            "total_bytes_if_full": self.total_full(),
            "by_role": {
                role: {
                    "bytes": self.total(role),
                    "bytes_if_full": self.total_full(role),
                    "uploads": sum(1 for u in self.uploads if u.role == role),
                    "projected_uploads": sum(1 for u in self.uploads if u.role == role and u.kind == "projected"),
                    "reduction": self.reduction(role),
                }
                for role in roles
            },
            "reduction_private": self.reduction("private"),
            "reduction_all": self.reduction(None),
        }

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary(), "per_round": {str(r): {str(c): b for c, b in v.items()} for r, v in self.per_round().items()}}
