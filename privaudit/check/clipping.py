"""The clipping check: every recorded release lies within its declared sensitivity (per client, per round).

Where the run declares that the clients clip (Flower's ``DifferentialPrivacyClientSideFixedClipping`` with
``fixedclipping_mod``; ``--clipped-at client``), the release w_k a client sent in round r must satisfy
‖w_k − θ_(r−1)‖₂ ≤ C over all checked tensors (the FlatClip of McMahan et al. 2018, the one clip the declared
sensitivity C rests on). The comparison is exact up to float rounding: a float32 release w = fl(θ + clip(Δ)) differs
from θ + clip(Δ) by at most 2⁻²⁴·|w| per coordinate, so a norm above C(1 + 10⁻⁶) + 2⁻²²·(‖θ‖ + C) cannot be a
clipped update. No α is spent. Each tensor's own norm is listed for the largest release (which tensor grew).

Where the server clips (privaudit's central DP, Flower's server-side wrapper, and by default the recorder), the
releases are recorded as sent, before the server clips them: nothing to compare here, and the noise check tests the
aggregate against the clipped mean instead (an aggregate built from unclipped updates shows as its "no clipping"
deviation).
"""

from __future__ import annotations

import math

import numpy as np

from privaudit.check.base import CheckResult, Status, SubTest, not_run
from privaudit.check.declared import ClipSite
from privaudit.check.record import NEEDS_RELEASES, RunRecord, flat

NAME = "clipping"
NULL = "every release a client sent is within the declared clip C of the model it started from"


def tolerance(clip: float, start_norm: float) -> float:
    """The largest norm a clipped float32 release can show (module docstring)."""
    return clip * (1 + 1e-6) + 2.0**-22 * (start_norm + clip)


class ClippingCheck:
    """The clipping check (module docstring)."""

    name = NAME

    def statistical(self, record: RunRecord) -> bool:
        """Whether it takes a share of α on ``record``: an exact comparison: no share of α."""
        return False

    def missing(self, record: RunRecord) -> tuple[str, ...]:
        if not record.declared.central:
            return ("a client-level release with a clip C (the ledger declares none: record-level noise is checked through "
                    "the randomness of the clients' own releases)",)
        client_side = {r: d for r, d in record.declared.central.items() if d.clipped_at is ClipSite.CLIENT and d.clip}
        if not client_side:
            return ("releases clipped by the clients (the run declares server-side clipping: the noise check tests the "
                    "aggregate against the clipped mean; pass --clipped-at client if the clients clip)",)
        if not record.releases_recorded:
            return (NEEDS_RELEASES,)
        return ()

    def run(self, record: RunRecord, level: float = 0.0) -> CheckResult:
        needs = self.missing(record)
        if needs:
            return not_run(self.name, needs[0], needs)
        violations: list[tuple[float, int, int, float, dict[str, float]]] = []
        largest: tuple[float, int, int] = (0.0, 0, -1)
        checked = 0
        for round_, release in sorted(record.declared.central.items()):
            if release.clipped_at is not ClipSite.CLIENT or not release.clip:
                continue
            previous = record.global_model(round_ - 1)
            start = flat(previous, record.names)
            start_norm = float(np.linalg.norm(start))
            for client, state in sorted((record.releases(round_) or {}).items()):
                update = flat(state, record.names) - start
                norm = float(np.linalg.norm(update))
                checked += 1
                ratio = norm / release.clip
                if ratio > largest[0]:
                    largest = (ratio, round_, client)
                if not math.isfinite(norm) or norm > tolerance(release.clip, start_norm):
                    parts = {n: float(np.linalg.norm(state[n] - previous[n])) for n in record.names}
                    violations.append((ratio, round_, client, norm, parts))
        if checked == 0:
            return not_run(self.name, "no client release was recorded in a client-clipped round", (NEEDS_RELEASES,))
        assumptions = ("the clients clip their whole update to C (one global clip over the checked tensors), as declared",
                       "float32 rounding allowance 2⁻²²·(‖θ‖ + C) + 10⁻⁶·C")
        if violations:
            ratio, round_, client, norm, parts = max(violations)
            worst = max(parts, key=lambda n: parts[n])
            rounds = tuple(sorted({v[1] for v in violations}))
            reason = (f"{len(violations)} of {checked} release(s) exceed the clip: client {client} in round {round_} sent an "
                      f"update of norm {norm:.4g} = {ratio:.4g} × C (largest tensor {worst}: {parts[worst]:.4g})")
            test = SubTest("norm ≤ C", NULL, ratio, None, 0.0, True, reason)
            return CheckResult(self.name, Status.FAILED, reason, NULL, ratio, None, 0.0, assumptions, (), (test,), rounds,
                               details={"violations": len(violations), "checked": checked,
                                        "per_tensor_norms": parts})
        ratio, round_, client = largest
        test = SubTest("norm ≤ C", NULL, ratio, None, 0.0, False, f"largest: client {client} in round {round_}, {ratio:.6g} × C")
        return CheckResult(self.name, Status.PASSED, f"all {checked} release(s) within C (largest {ratio:.6g} × C)", NULL,
                           ratio, None, 0.0, assumptions, (), (test,), details={"checked": checked})
