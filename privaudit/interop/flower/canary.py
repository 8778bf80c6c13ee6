"""Canary audit of a Flower app: a client mod inserts update-space canaries; one re-run of the app bounds ε.

The one-run audit of Steinke, Nasr & Jagielski (NeurIPS 2023) needs m canaries, each included with an independent
fair coin, one training run, and a score per canary. For an app privaudit did not train, the canaries enter through
Flower's own extension point, a client mod, so the user's code changes by one list entry::

    ClientApp(..., mods=[tap_mod, CanaryMod(...)])      # after any clipping mod: the canary must pass through it

:class:`CanaryMod` adds, to the model that one chosen client (partition ``client``) returns in every round it trains,
C·Σ_{j: b_j = 1} c_j — m orthonormal directions c_j over the model's floating-point tensors (Gaussian draws of
:func:`privaudit.fl.canaries.gradients.make_gradient_canaries` orthonormalised, so m ≤ the model's size; one coin
b_j per canary for the whole run: the ``per-canary`` design). The canary enters *before* the privatizer: Flower's server-side clipping clips the
client's update with its canaries, as the engine's :class:`~privaudit.fl.canaries.gradients.GradientCanaryInsertion`
does. The mod is stateless across processes (directions and coins derive from its seed and the model's size), so it
runs unchanged in any Ray actor.

:func:`run_flower_canary_audit` builds the app with the mod (the user's ``build(out, mods)`` returns a
:class:`~privaudit.interop.flower.simulation.FlowerApp` whose ServerApp records through an
:class:`~privaudit.interop.flower.tap.AuditTap`), runs it once, reads the recorded global models and scores canary j
as s_j = Σ_t ⟨θ_t − θ_{t−1}, c_j⟩ = ⟨θ_T − θ_0, c_j⟩ over **all** rounds (white-box: every global model observed).
Not over the rounds the canary client was sampled in only: which clients the server sampled is not part of what the
DP wrapper releases, and the claim's ε is amplified by exactly that secrecy (q = m/N), so a score that knew it would
be an attacker outside the claim and could "refute" a correct mechanism. The bounds are the existing one-run routes (:mod:`privaudit.audit.workflows.checkpoint_one_run`):
``one-run`` and ``one-run-fdp`` (Gaussian ledger) or ``one-run-fdp-box``, each at α/2, with their ceiling and power;
the claim is the recorded ledger's largest ε at δ unless given.

Threat model, as for :mod:`privaudit.audit.workflows.gradient_canaries`: an adversarial update of norm C added to one
client's model before its privatizer (Nasr et al. 2023). Including canary j changes that client's contribution, a
*replacement*, but a bounded one: ‖c_j‖ = C, and clipping to the C-ball is non-expansive, so the clipped contributions
with and without the canary, and each of them and "no contribution", lie within C of one another — the distances of
the add/remove pair the ledger accounts (for fixed-size sampling the ledger already charges the 2C displacement). By
advanced joint convexity (Balle, Barthe & Gaboardi 2018, Thm 2) the canary's pair is then no easier to tell apart
than the accounted one, so a lower bound above the client-level ε refutes it; no group-privacy factor 2 applies.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from flwr.app import ArrayRecord, MessageType

from privaudit.audit.workflows.checkpoint_claim import CheckpointAuditOptions, checkpoint_claim
from privaudit.audit.workflows.checkpoint_one_run import OneRunAudit, bound_one_run
from privaudit.checks import integer_at_least
from privaudit.errors import InvalidParameterError
from privaudit.fl.canaries.gradients import make_gradient_canaries
from privaudit.fl.engine import params as P
from privaudit.fl.engine.checkpoint import TrainedFederation
from privaudit.interop.flower.simulation import FlowerApp

THREAT_MODEL = ("update-space canaries: an adversarial update of L2 norm C added by a Flower client mod to one client's "
                "model before the privatizer, every global model observed (Nasr et al. 2023 threat model)")


def _float_keys(state) -> list[str]:
    """The canary coordinates: the floating-point tensors, in sorted name order (the same on every node and reader)."""
    return sorted(k for k, v in state.items() if torch.is_floating_point(v))


def flatten_floats(state) -> torch.Tensor:
    return torch.cat([state[k].detach().reshape(-1).double() for k in _float_keys(state)])


class CanaryMod:
    """Flower client mod: ``count`` update-space canaries carried by partition ``client`` (see the module docstring).

    ``magnitude`` C may be left ``None`` and set by :meth:`configure` before the run (the audit sets it to the DP
    wrapper's clip norm).
    """

    def __init__(self, count: int, *, client: int = 0, magnitude: float | None = None, seed: int = 0) -> None:
        integer_at_least("the number of canaries", count, 2)
        integer_at_least("the canary client", client, 0)
        self.count, self.client, self.seed = int(count), int(client), int(seed)
        self.magnitude: float | None = None
        if magnitude is not None:
            self.configure(magnitude)
        self._drawn: dict[int, Any] = {}

    def configure(self, magnitude: float) -> None:
        if not (isinstance(magnitude, int | float) and math.isfinite(magnitude) and magnitude > 0):
            raise InvalidParameterError(f"the canary magnitude C must be a positive number, got {magnitude!r}")
        self.magnitude = float(magnitude)
        self._drawn = {}

    def canaries(self, dimension: int):
        """The :class:`~privaudit.fl.canaries.gradients.GradientCanaries` for a model of ``dimension`` float scalars."""
        if self.magnitude is None:
            raise InvalidParameterError("the canary mod has no magnitude C: give magnitude= or call configure(C)")
        if dimension not in self._drawn:
            if self.count > dimension:
                raise InvalidParameterError(f"{self.count} orthonormal canaries need a model of at least {self.count} "
                                            f"scalars, this one has {dimension}")
            drawn = make_gradient_canaries(dimension, self.count, magnitude=self.magnitude, client=self.client,
                                           rounds=(1,), kind="random", membership="per-canary", seed=self.seed)
            # orthonormal rows (QR of the Gaussian draws, signs fixed: Haar, Mezzadri 2007), so isotropic noise projects
            # to independent coordinates and one canary's shift does not leak into another's score
            q, r = np.linalg.qr(drawn.directions.T)
            self._drawn[dimension] = replace(drawn, directions=(q * np.sign(np.diag(r))).T.copy())
        return self._drawn[dimension]

    def __call__(self, message, context, call_next):
        reply = call_next(message, context)
        if message.metadata.message_type.split(".")[0] != MessageType.TRAIN or reply.has_error():
            return reply
        if int(context.node_config.get("partition-id", -1)) != self.client:
            return reply
        records = dict(reply.content.array_records)
        if len(records) != 1:
            raise InvalidParameterError("the canary mod needs a train reply with exactly one ArrayRecord (the model)")
        (name, arrays), = records.items()
        state = arrays.to_torch_state_dict()
        keys = _float_keys(state)
        canaries = self.canaries(sum(state[k].numel() for k in keys))
        vector = canaries.vector(1)
        if vector is not None:
            shift = P.unflatten(torch.from_numpy(vector), {k: state[k] for k in keys})
            state = {k: (v + shift[k].to(v.dtype)) if k in shift else v for k, v in state.items()}
        reply.content[name] = ArrayRecord(state)
        return reply


@dataclass(frozen=True, kw_only=True)
class FlowerCanaryOptions(CheckpointAuditOptions):
    """m canaries carried by partition ``client`` with magnitude C (default: the app's DP clip norm)."""

    canaries: int = 64
    client: int = 0
    magnitude: float | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        integer_at_least("the number of canaries", self.canaries, 2)
        integer_at_least("the canary client", self.client, 0)
        if self.magnitude is not None and not (math.isfinite(self.magnitude) and self.magnitude > 0):
            raise InvalidParameterError(f"the canary magnitude C must be a positive number, got {self.magnitude}")


def canary_scores(checkpoint: Path, mod: CanaryMod) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(scores s_j, the coins b_j, the rounds the canary client trained in) from a recorded checkpoint.

    s_j sums over every round (module docstring): the rounds the client was sampled in are returned for the report
    only and never enter a score.
    """
    federation = TrainedFederation(checkpoint)
    rounds = [int(m["round"]) for m in federation.manifest["metrics"] if mod.client in (m.get("clients") or [])]
    first = flatten_floats(federation.global_state(0))
    canaries = mod.canaries(int(first.numel()))
    directions = torch.from_numpy(canaries.directions)
    last = flatten_floats(federation.global_state(federation.rounds))
    scores = directions @ (last - first)  # Σ_t ⟨θ_t − θ_(t−1), c_j⟩ over all t, telescoped
    return scores.numpy(), canaries.inserted[0].copy(), rounds


def run_flower_canary_audit(build: Callable[[Path, Sequence], Any], out: str | Path, options: FlowerCanaryOptions, *,
                            quiet: bool = True):
    """Re-run a Flower app with a :class:`CanaryMod` and bound ε in one run (see the module docstring).

    ``build(out, mods)`` returns the app (a :class:`~privaudit.interop.flower.simulation.FlowerApp` with its
    :class:`~privaudit.interop.flower.tap.AuditTap` as ``tap``) with ``mods`` appended to its ClientApp's mods and
    its tap recording into ``out``. Returns a :class:`~privaudit.audit.workflows.checkpoint_one_run.OneRunAudit`.
    """
    if not isinstance(options, FlowerCanaryOptions):
        raise InvalidParameterError("run_flower_canary_audit needs FlowerCanaryOptions")
    started = time.perf_counter()
    out = Path(out)
    mod = CanaryMod(options.canaries, client=options.client, seed=options.seed)
    app = build(out, [mod])
    if not isinstance(app, FlowerApp) or app.tap is None:
        raise InvalidParameterError("the app's build function must return a FlowerApp whose tap (AuditTap) records the run")
    tap = app.tap
    if app.num_supernodes <= options.client:
        raise InvalidParameterError(f"canary client {options.client} is not one of the app's {app.num_supernodes} nodes")
    magnitude = options.magnitude if options.magnitude is not None else (tap.dp.clipping_norm if tap.dp is not None else None)
    if magnitude is None:
        raise InvalidParameterError("the app has no Flower DP wrapper to take the canary magnitude from: give magnitude=C")
    mod.configure(magnitude)
    app.run(quiet=quiet)
    checkpoint = Path(tap.recorder.path)
    scores, inserted, rounds = canary_scores(checkpoint, mod)
    if not rounds:
        raise InvalidParameterError(f"canary client {options.client} was never sampled, so no canary was released; "
                                    "run more rounds or sample more clients")
    in_s, out_s = scores[inserted], scores[~inserted]
    if len(in_s) == 0 or len(out_s) == 0:
        raise InvalidParameterError(f"with {options.canaries} canaries no canary landed on one side; use more canaries")
    claim = checkpoint_claim(checkpoint, options.delta, options.accountant, options.claimed_epsilon)
    bounds, verdict, metrics, family, family_reason, routes = bound_one_run(checkpoint, claim, in_s, out_s, options)
    notes: list[str] = []
    details = {"canary_client": options.client, "magnitude": magnitude, "rounds_with_canaries": rounds,
               "mechanism_family": family.value, "mechanism_family_reason": family_reason, "routes": list(routes),
               "design": "bernoulli: each canary inserted with probability ½, one coin for the whole run",
               "neighbouring": "one canary's coin moves the canary client's update by ‖c_j‖ = C before the server clips it, "
                               "and by at most C after (projection onto the C-ball is non-expansive): the shift of adding "
                               "or removing one client's clipped update, so the client-level claim ε is what the bound "
                               "is compared with (a bound above ε refutes it; no 2ε replacement factor applies)",
               "recorded_ledger": claim.recorded_dict(), "claim_source": claim.source, "checkpoint": str(checkpoint),
               "score": "s_j = Σ_t ⟨θ_t − θ_(t−1), c_j⟩ = ⟨θ_T − θ_0, c_j⟩ over all rounds (the sampled rounds are not "
                        "released, so the score does not use them)"}
    inserted_count = int(inserted.sum())
    attack = {"name": "update-space canaries inserted by a Flower client mod, one run (Steinke, Nasr & Jagielski 2023)",
              "threat_model": THREAT_MODEL, "canaries": options.canaries, "inserted": inserted_count, "metrics": metrics}
    return OneRunAudit(claim_id=f"flower:{checkpoint.name}", where=f"one-run canary audit of the Flower app recorded in {checkpoint}",
                       claim=claim, bounds=bounds, verdict=verdict, attack=attack, details=details, notes=notes,
                       seconds=time.perf_counter() - started, canaries=options.canaries, inserted=inserted_count)
