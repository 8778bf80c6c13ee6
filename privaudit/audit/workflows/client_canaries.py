"""White-box canary-client audit of a trained federation (``privaudit audit --checkpoint DIR --client-canaries m``).

Under client-level DP the unit of privacy is a whole client, so a canary must be a client of its own (Andrew,
Kairouz, Oh, Oprea, McMahan & Suriyakumar 2024, "One-shot empirical privacy estimation for federated learning",
ICLR 2024, §3): canary j is a fixed random direction c_j over the released model state, *inserted* as a client with a
fair coin b_j drawn once, and an inserted canary's update is c_j at (at least) the clip norm, so the server clips it
to exactly C. Inserted canaries are sampled by the run's own client sampling, clipped, noised and averaged like every
client — a canary the mechanism always included would audit a different, un-amplified mechanism.

Threat model: the adversary *controls* the canary clients' updates (their directions and norms; nothing else about
the run) and *sees* every released global model θ_0 … θ_T (all iterates, white-box). It does not see which clients
were sampled, nor any client's individual release. Score (:func:`attacks.membership.canary_client_sums`):
s_j = Σ_t ⟨θ_t − θ_{t−1}, c_j⟩. For DP-FedAvg with every client in every round, an inserted canary shifts each
round's projection by C/n and the noise projects onto orthonormal directions as independent N(0, σ²C²/n²): the
scores are those of T composed Gaussian mechanisms, μ = √T/σ (Dong, Roth & Su 2022, Cor. 3.3) — the mechanism's own
curve, which the Gaussian-curve one-run route tests.

Two sources of canaries:

* a run made by ``privaudit train`` — its recipe (the manifest's ``train_spec``) is re-trained once with m canary
  clients appended to its dataset (:func:`privaudit.fl.canaries.clients.add_canary_clients`, their updates set by
  :class:`~privaudit.fl.canaries.clients.CanaryClientInsertion` before the privatizer);
* a recorded run whose loop added canary clients itself (:class:`privaudit.interop.LoopCanaries`, a
  ``canary-clients.json`` beside the checkpoint): its recorded global models are scored, nothing is re-trained.

Bounds (:func:`privaudit.audit.workflows.checkpoint_one_run.bound_one_run`; each canary's coin is an independent fair
coin, the Bernoulli design these routes need): when the ledger's releases are Gaussian without subsampling, the
mechanism's own curve is G_μ and ``one-run-fdp`` (Mahloujifar, Melis & Chaudhuri 2024, the Gaussian curve) alone at α
tests it — chosen from the ledger before any score is seen; with client sampling, ``one-run-fdp-ledger`` alone at α
against the run's own curves (the ledger's T subsampled Gaussian releases with the noise scaled:
:class:`privaudit.stats.ledger_family.LedgerFamily`); otherwise ``one-run`` (Steinke, Nasr & Jagielski 2023) and
``one-run-fdp-box`` (any mechanism) at α/2 each. The fixed denominator q·N of a re-run (and of a loop that counts
its canaries in N) depends on how many canaries are in, but it scales every score alike and these routes read the
scores only through their order: the guesses are a post-processing of the un-normalised Gaussian sum.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.accounting.ledger import SERVER
from privaudit.accounting.mechanisms import Gaussian, SubsampledGaussian
from privaudit.audit.workflows.checkpoint_claim import (
    CheckpointAuditOptions,
    CheckpointAuditOutcome,
    CheckpointClaim,
    checkpoint_claim,
    training_recipe,
)
from privaudit.audit.workflows.checkpoint_one_run import bound_one_run
from privaudit.checks import integer_at_least
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.checkpoint import TrainedFederation, read_ledger
from privaudit.stats.gdp import mu_to_epsilon
from privaudit.stats.ledger_family import LedgerFamily

RESULT_FILE = "client-canaries.json"
THREAT_MODEL = (
    "the adversary controls the canary clients' updates (each canary a client whose whole update is its direction at "
    "the clip norm, present by a fair coin and then sampled like any client) and sees every released global model "
    "(all iterates, white-box); it sees neither the sampled set nor any client's own release"
)


@dataclass(frozen=True)
class ClientCanaryOptions(CheckpointAuditOptions):
    """How a canary-client audit is run: m canary clients (each inserted w.p. ½)."""

    canaries: int

    def __post_init__(self) -> None:
        super().__post_init__()
        integer_at_least("the number of canary clients", self.canaries, 2)


@dataclass(frozen=True)
class ClientCanaryAudit(CheckpointAuditOutcome):
    canaries: int = 0
    inserted: int = 0
    source: str = "re-run"
    #: the inserted and the unseen canaries' scores (not in :meth:`data`; for routes run on them afterwards)
    scores: tuple[np.ndarray, np.ndarray] = (np.zeros(0), np.zeros(0))


@dataclass(frozen=True)
class _Scored:
    """Scores of every canary, their coins, and how they came about."""

    scores: np.ndarray
    inserted: np.ndarray
    source: str  # "re-run" or "recorded"
    details: dict[str, Any]


def _participations(history, canary_ids: tuple[int, ...]) -> dict[str, Any]:
    ids = set(canary_ids)
    per_round = [sum(1 for c in m.clients if c in ids) for m in history if m.trained]
    return {"canary_clients_sampled_per_round": per_round, "inserted": len(ids)}


def _rerun(checkpoint: Path, options: ClientCanaryOptions, progress: bool) -> _Scored:
    """Re-train the checkpoint's recipe once with m canary clients; their summed projections."""
    # torch (the engine, attacks): only when the audit trains; privaudit.audit itself stays torch-free
    from attacks.membership import canary_client_sums
    from attacks.membership.target import load_training_data
    from privaudit.fl.canaries.clients import (
        CLIP_SCALE,
        CanaryClientInsertion,
        add_canary_clients,
        make_canary_clients,
    )
    from privaudit.fl.canaries.compose import run_spec_on_dataset, with_canaries
    from privaudit.fl.engine import params as P
    from privaudit.fl.engine.recording import ReleaseRecorder

    spec = training_recipe(checkpoint, "client-canary audit")
    clip = (spec.privacy_options or {}).get("clip")
    if spec.privacy in (None, "none") or clip is None:
        raise InvalidParameterError(f"{checkpoint} was trained with privacy {spec.privacy or 'none'} and no clip norm: "
                                    "canary clients audit client-level DP (e.g. --privacy cdp --clip C --noise σ)")
    dimension = P.num_scalars(TrainedFederation(checkpoint).global_state(0))
    orthonormal = options.canaries <= dimension
    drawn = make_canary_clients(dimension, options.canaries, seed=options.seed, update_norm=CLIP_SCALE * float(clip),
                                orthonormal=orthonormal)
    dataset = load_training_data(spec)
    grown, drawn = add_canary_clients(dataset, drawn)
    algorithm = with_canaries(spec, [lambda inner: CanaryClientInsertion(inner, drawn)])
    recorder = ReleaseRecorder(client_releases=False)
    result = run_spec_on_dataset(spec, grown, algorithm=algorithm, observers=[recorder], progress=progress)
    details = {"train_spec": spec.to_dict(), "real_clients": dataset.num_clients, "dimension": dimension,
               "update_norm": drawn.update_norm, "clip": float(clip), **_participations(result.history, drawn.client_ids)}
    return _Scored(canary_client_sums(recorder, drawn), drawn.inserted, "re-run",
                   {**details, "directions": _directions_text(orthonormal)})


def _recorded(checkpoint: Path, options: ClientCanaryOptions) -> _Scored | None:
    """The canary clients a recorded loop added (``canary-clients.json``), scored on its recorded global models."""
    from attacks.membership import canary_client_sums
    from privaudit.fl.canaries.client_file import CANARY_FILE, read_canary_clients

    found = read_canary_clients(checkpoint)
    if found is None:
        return None
    canaries, record = found
    if options.canaries != canaries.count:
        raise InvalidParameterError(f"{checkpoint} holds the {canaries.count} canary clients its loop added "
                                    f"({CANARY_FILE}); a recorded run is scored as it ran: give --client-canaries "
                                    f"{canaries.count}")
    details = {"dimension": canaries.dimension, "update_norm": canaries.update_norm, "directions":
               _directions_text(bool(record["orthonormal"])), "inserted": int(canaries.inserted.sum()),
               "canary_updates_given": sum(record.get("participations", {}).values()),
               "canary_file": CANARY_FILE}
    return _Scored(canary_client_sums(checkpoint, canaries), canaries.inserted, "recorded", details)


def _directions_text(orthonormal: bool) -> str:
    return ("random orthonormal frame (Haar; m ≤ d): the noise projects onto independent coordinates" if orthonormal
            else "independent uniform unit directions (m > d, so not orthogonal: canaries leak into each other's scores)")


def mechanism_mu(events) -> float | None:
    """√(Σ μ_e²) of the ledger's un-subsampled Gaussian releases, for the client (or server) with the largest one:
    the μ of G_μ an optimal canary attack would reach (None when some release is not such a Gaussian)."""
    per_client: dict[str, float] = {}
    for e in events:
        m = e.mechanism
        if isinstance(m, Gaussian):
            mu = m.sensitivity / m.noise_multiplier
        elif isinstance(m, SubsampledGaussian) and m.sample_rate >= 1.0:
            mu = 1.0 / m.noise_multiplier
        else:
            return None
        per_client[e.client_id] = per_client.get(e.client_id, 0.0) + e.count * mu * mu
    return math.sqrt(max(per_client.values())) if per_client else None


def own_curve_family(checkpoint: Path) -> LedgerFamily | None:
    """The run's own trade-off curves (:class:`~privaudit.stats.ledger_family.LedgerFamily`) from its ledger: the
    client-level releases (recorded for ``"server"``: every client, canary clients included, is released by the same
    subsampled Gaussian each round). None when some event is invalid or not a (subsampled) Gaussian release, or no
    release is subsampled (then the Gaussian curve is the run's own)."""
    ledger = read_ledger(checkpoint)
    events = ledger.events_for(SERVER)
    if not events or any(not e.valid or not isinstance(e.mechanism, (Gaussian, SubsampledGaussian)) for e in events):
        return None
    if not any(isinstance(e.mechanism, SubsampledGaussian) and e.mechanism.sample_rate < 1.0 for e in events):
        return None
    try:
        return LedgerFamily(ledger.composition_for(SERVER))
    except InvalidParameterError:
        return None


def _notes(scored: _Scored, claim: CheckpointClaim, family_reason: str) -> list[str]:
    notes = [f"Threat model: {THREAT_MODEL}.",
             f"Score: s_j = Σ_t ⟨θ_t − θ_(t−1), c_j⟩ over the {'re-trained' if scored.source == 're-run' else 'recorded'} "
             "global models; each canary inserted by its own fair coin (Bernoulli design).",
             f"Mechanism family from the ledger: {family_reason}."]
    if scored.source == "re-run":
        notes.append(f"The audited run is the recipe re-trained with {int(scored.inserted.sum())} canary clients added to "
                     f"its {scored.details['real_clients']} real ones: the same σ, sampling rate and clip, so the ledger "
                     "records the same events per round; the real clients' share of the mean shrinks accordingly.")
    return notes


def require_client_level(checkpoint: Path) -> None:
    """Canary clients audit client-level DP: a ledger of releases over whole clients (recorded for ``"server"``) and
    nothing else — record-level releases (DP-SGD in the clients) would leave a canary client's update un-noised."""
    ledger = read_ledger(checkpoint)
    others = sorted({e.client_id for e in ledger.events} - {SERVER})
    if others or not ledger.events_for(SERVER):
        shown = ", ".join(others[:3]) + (" …" if len(others) > 3 else "")
        raise InvalidParameterError(f"{checkpoint}: canary clients audit client-level DP (releases over whole clients, "
                                    f"recorded for 'server'); its ledger records releases of clients {shown or 'none'} "
                                    "(record-level DP): use --one-run or --gradient-canaries")


def run_client_canary_audit(checkpoint: str | Path, options: ClientCanaryOptions, *,
                            progress: bool = True) -> ClientCanaryAudit:
    """Score m canary clients of the checkpoint (recorded by its loop, or added to a re-run of its recipe) and bound ε
    in one run (see the module docstring). The result's :meth:`data` is a ``claim-audit`` result (the CLI writes it to
    ``<out>/client-canaries.json``)."""
    started = time.perf_counter()
    checkpoint = Path(checkpoint)
    require_client_level(checkpoint)
    claim = checkpoint_claim(checkpoint, options.delta, options.accountant, options.claimed_epsilon)
    scored = _recorded(checkpoint, options) or _rerun(checkpoint, options, progress)
    in_s, out_s = scored.scores[scored.inserted], scored.scores[~scored.inserted]
    if len(in_s) == 0 or len(out_s) == 0:
        raise InvalidParameterError(f"with {options.canaries} canary clients every coin fell on one side; use more canaries")
    bounds, verdict, metrics, family, family_reason, routes = bound_one_run(checkpoint, claim, in_s, out_s, options,
                                                                            gaussian_routes=("one-run-fdp",),
                                                                            ledger=own_curve_family(checkpoint))
    mu = mechanism_mu(claim.events)
    details = {**scored.details, "source": scored.source, "routes": list(routes), "mechanism_family": family.value,
               "mechanism_family_reason": family_reason, "score": "iterate-sums: Σ_t ⟨θ_t − θ_(t−1), c_j⟩",
               "design": "bernoulli: each canary client inserted independently with probability ½",
               "mechanism_mu": None if mu is None else {"composed": mu, "epsilon": mu_to_epsilon(mu, claim.delta),
                                                        "meaning": "√Σ(Δ/σ)² of the ledger's Gaussian releases: what "
                                                                   "unlimited canaries would find"},
               "recorded_ledger": claim.recorded_dict(), "claim_source": claim.source}
    attack = {"name": "canary clients, one run, all iterates (Andrew et al. 2024; Steinke, Nasr & Jagielski 2023)",
              "threat_model": "white-box: " + THREAT_MODEL, "canaries": options.canaries,
              "inserted": int(scored.inserted.sum()), "metrics": metrics}
    return ClientCanaryAudit(
        claim_id=f"checkpoint:{checkpoint.name}:client-canaries", where=f"canary-client audit of {checkpoint}",
        claim=claim, bounds=bounds, verdict=verdict, attack=attack, details=details,
        notes=_notes(scored, claim, family_reason), seconds=time.perf_counter() - started, canaries=options.canaries,
        inserted=int(scored.inserted.sum()), source=scored.source, scores=(in_s, out_s))
