"""White-box gradient-canary audit of a trained federation (``privaudit audit --checkpoint DIR --gradient-canaries K``).

Nasr et al. 2023 ("Tight auditing of differentially private machine learning") audit DP training as a white-box
adversary who inserts *gradient canaries* and observes every step; each step gives its own μ-GDP lower bound and,
when every step is a Gaussian mechanism with fresh noise, the Gaussian trade-off curves compose exactly:
G_{μ₁} ⊗ … ⊗ G_{μ_T} = G_{√(Σ μ_t²)} (Dong, Roth & Su 2022, Cor. 3.3).

Here the checkpoint's recipe (its manifest's ``train_spec``) is re-trained once with K gradient canaries carried by
one client (:mod:`privaudit.fl.canaries.gradients`): in every training round t each canary j enters that client's
model, before its privatizer, with an independent fair coin b_{t,j}, as C·c_j. The directions c_j are a random
*orthonormal* frame (Haar), so the privatizer's isotropic Gaussian noise projects to K independent N(0, s²)
observations per round and the canaries do not leak into each other's projections; K ≤ d is therefore required.
Every round's releases are recorded and scored (:func:`attacks.membership.gradient_canary_observations`) and two
estimators turn them into ε lower bounds, each at α/2:

* ``gdp-composed`` — μ_t bounded per round at α/(2T), composed √(Σ μ_t²) (:func:`gdp_rounds_lower_bound`); valid
  only under the per-run conditions of :func:`composition_validity`. An invalid one is reported and never decides.
* ``gdp-best-round`` — the largest per-round μ_t bound, each at α/(2T) (Bonferroni over the T rounds); valid with no
  composition assumption, since any one round's release is a post-processing of the whole transcript, but, like every
  GDP bound, only when a round is a Gaussian shift of the canary (:mod:`privaudit.stats.routes`): seeded output
  perturbation seen in the client's own release or a full-participation aggregate.

Both treat a round's K canaries as independent trials, which holds when the release is linear in the canaries. Where
clipping bound (the rescaling depends on how many canaries are in), or where a round is not a Gaussian shift (clock-
seeded noise, objective perturbation, a subsampled aggregate), they are reported but do not decide; instead
``one-run-best-round`` — each round a one-run audit (Steinke, Nasr & Jagielski 2023), valid for any mechanism and
needing no independence between canaries, Bonferroni over rounds, at α/2 — decides.

The canary magnitude C defaults to the L2 sensitivity Δ the checkpoint's ledger records for the canary client's
Gaussian releases, so a round with noise std σ is at most Δ/σ-GDP for the canary *if the accounting holds*: the audit
tests exactly the ledger's claim. A gradient canary is an adversarial update of norm C (the white-box threat model of
Nasr et al. 2023), not a natural record: a bound here says what the mechanism leaks about such an update.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.accounting.mechanisms import Gaussian
from privaudit.audit.verdict import decide
from privaudit.audit.workflows.checkpoint_claim import (
    CheckpointAuditOptions,
    CheckpointAuditOutcome,
    CheckpointClaim,
    checkpoint_claim,
    training_recipe,
)
from privaudit.checks import finite_positive, integer_at_least
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.checkpoint import TrainedFederation
from privaudit.stats.claim_power import ClaimPower
from privaudit.stats.estimates import LowerBound
from privaudit.stats.gdp import mu_to_epsilon
from privaudit.stats.gdp_composition import (
    BEST_ROUND_VALIDITY,
    COMPOSITION_INVALID_WHEN,
    COMPOSITION_VALID_WHEN,
    gdp_best_round_lower_bound,
    gdp_rounds_lower_bound,
)
from privaudit.stats.metrics import attack_metrics
from privaudit.stats.one_run_rounds import ONE_RUN_ROUND_VALIDITY, one_run_best_round_lower_bound

VIEWS = ("client", "aggregate")
RESULT_FILE = "gradient-canaries.json"
THREAT_MODEL = (
    "gradient canaries audit the mechanism against an adversarial update of L2 norm C added to one client's model "
    "before its privatizer, observed white-box in every round (Nasr et al. 2023 threat model); they do not measure "
    "what a natural training record leaks"
)


# ------------------------------------------------------------------------------------------------
# when the composed bound may be used, decided per run
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CompositionValidity:
    """Whether ``gdp-composed`` is a valid bound for this run, with every condition checked and why."""

    valid: bool
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def reasons(self) -> list[str]:
        return [c["why"] for c in self.checks.values() if not c["holds"]]

    @property
    def statement(self) -> str:
        if self.valid:
            return ("gdp-composed is valid for this run: every round is a Gaussian mechanism with fresh seeded noise on "
                    "the canary client's release, the client took part in every training round, and each per-round μ "
                    "bound was computed at α/T (Nasr et al. 2023; Dong, Roth & Su 2022 Cor. 3.3)")
        return ("gdp-composed is NOT valid for this run, so it is reported but does not enter the verdict: "
                + "; ".join(self.reasons))

    def to_dict(self) -> dict[str, Any]:
        return {"valid": self.valid, "statement": self.statement, "reasons": self.reasons, "checks": self.checks,
                "valid_when": COMPOSITION_VALID_WHEN, "invalid_when": COMPOSITION_INVALID_WHEN}


def composition_validity(privacy: dict[str, Any] | None, view: str, clients_per_round: float,
                         rounds_without_client: Sequence[int]) -> CompositionValidity:
    """Decide whether √(Σ μ_t²) (Dong, Roth & Su 2022, Cor. 3.3) applies to this run's per-round observations.

    (a) the privatizer is output perturbation (clip, then fresh Gaussian noise on the released model every round)
    drawing from the run's seeded streams — not ``rng=clock-ms``, whose clock-seeded noise repeats across rounds
    and clients; (b) the canary client took part in every training round; (c) the view is the client's own release,
    or the aggregate under full participation (the aggregate of a client sample is a mixture, not a Gaussian shift).
    """
    mechanism = (privacy or {}).get("mechanism")
    if mechanism is None:
        a = (False, "the run has no privacy mechanism: a round is no Gaussian mechanism, so its observations need "
                    "not follow a Gaussian trade-off curve and the μ_t do not compose")
    elif mechanism != "output-perturbation":
        a = (False, f"the run's mechanism is {mechanism}, not a Gaussian release with fresh noise each round "
                    "(objective perturbation perturbs the objective; DP-SGD subsamples records, a Gaussian mixture)")
    elif str(privacy.get("rng", "seeded")) != "seeded":
        a = (False, f"the output-perturbation noise is drawn with rng={privacy.get('rng')}: clock-seeded noise repeats "
                    "across rounds and clients drawn in the same millisecond, so rounds are not independent")
    else:
        a = (True, "output perturbation: Gaussian noise, fresh from the run's seeded streams every round")
    missing = [int(r) for r in rounds_without_client]
    if missing:
        b = (False, f"the canary client was not sampled in iteration(s) {missing} (clients_per_round = "
                    f"{clients_per_round:g}): the run subsamples clients, so a round's release is a Gaussian mixture over "
                    "who was drawn (amplification), not the fixed Gaussian shift that √(Σ μ_t²) composes")
    else:
        b = (True, "the canary client took part in every training round")
    if view == "client":
        c = (True, "client view: each round observes the canary client's own release")
    elif float(clients_per_round) >= 1.0:
        c = (True, "aggregate view under full participation: each round's aggregate is a Gaussian shift of the canary")
    else:
        c = (False, f"aggregate view with client subsampling (clients_per_round = {clients_per_round:g}): the "
                    "aggregate's weights and noise depend on which clients were drawn, so a round is a mixture")
    checks = {name: {"holds": holds, "why": why} for name, (holds, why) in
              (("mechanism", a), ("participation", b), ("view", c))}
    checks["mechanism"]["privacy"] = privacy
    checks["participation"]["rounds_without_client"] = missing
    checks["participation"]["clients_per_round"] = float(clients_per_round)
    checks["view"]["view"] = view
    return CompositionValidity(all(c["holds"] for c in checks.values()), checks)


# ------------------------------------------------------------------------------------------------
# the audit: options → target (what the checkpoint gives) → observations (one re-training) → bounds → result
# ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GradientCanaryOptions(CheckpointAuditOptions):
    """How a gradient-canary audit is run: K canaries carried by ``client``.

    ``view``: ``client`` observes the canary client's release each round, ``aggregate`` only the global model.
    ``magnitude`` defaults to the ledger's L2 sensitivity for ``client``.
    """

    canaries: int
    view: str = "client"
    magnitude: float | None = None
    client: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        integer_at_least("the number of gradient canaries", self.canaries, 2)
        if self.view not in VIEWS:
            raise InvalidParameterError(f"unknown canary view {self.view!r}; use client or aggregate")
        if self.magnitude is not None:
            finite_positive("the canary magnitude", self.magnitude)
        integer_at_least("the canary client", self.client, 0)


@dataclass(frozen=True)
class GradientCanaryAudit(CheckpointAuditOutcome):
    canaries: int = 0
    view: str = "client"
    magnitude: float = 0.0
    composition: CompositionValidity | None = None

    def bound(self, estimator: str) -> LowerBound:
        return next(b for b in self.bounds if b.estimator == estimator)


def _gaussian_events(events, client: int | None) -> list:
    """The Gaussian releases the ledger charges to ``client`` (every client's with ``None``)."""
    return [e for e in events if isinstance(e.mechanism, Gaussian) and (client is None or e.client_id == str(client))]


def _default_magnitude(gaussians, events, checkpoint: Path, client: int) -> float:
    if not gaussians:
        others = sorted({e.client_id for e in _gaussian_events(events, None)}, key=lambda c: (len(c), c))
        why = (f"it was never sampled in that run; clients with one: "
               f"{', '.join(others[:8])}{' …' if len(others) > 8 else ''}" if others
               else "no privacy, or a mechanism other than a Gaussian release")
        raise InvalidParameterError(
            f"{checkpoint}'s ledger records no Gaussian release for client {client} ({why}), so there is no "
            "sensitivity to size the canaries by; give --canary-magnitude C")
    return max(float(e.mechanism.sensitivity) for e in gaussians)


def _orthonormal_directions(count: int, dimension: int, seed: int) -> np.ndarray:
    """``count`` orthonormal rows in R^dimension, Haar-distributed (QR of a Gaussian matrix with sign fix, Mezzadri 2007)."""
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x0A7]))
    q, r = np.linalg.qr(rng.standard_normal((dimension, count)))
    return (q * np.sign(np.diag(r))).T.copy()


def _recorder(client: int, keep_client: bool):
    """A ReleaseRecorder that keeps only the canary client's releases (and its pre-clip norms)."""
    # torch (the engine's recording): only when the audit trains; privaudit.audit itself stays torch-free
    from privaudit.fl.engine.recording import ReleaseRecorder

    class CanaryClientRecorder(ReleaseRecorder):
        def __init__(self) -> None:
            super().__init__(client_releases=keep_client)
            self.norms: dict[int, float] = {}

        def on_round_end(self, round, state, results, metrics) -> None:
            mine = [r for r in results if int(r.client_id) == client]
            super().on_round_end(round, state, mine, metrics)
            for r in mine:
                if "norm_before_clip" in r.info:
                    self.norms[int(round)] = float(r.info["norm_before_clip"])

    return CanaryClientRecorder()


@dataclass(frozen=True)
class _Target:
    """What the checkpoint gives the audit: its recipe, the claim, the canary client's Gaussian releases, C and d."""

    checkpoint: Path
    spec: Any
    claim: CheckpointClaim
    gaussians: list
    magnitude: float
    magnitude_source: str
    dimension: int
    training_rounds: int

    @property
    def ledger_rounds(self) -> list[tuple[float, float]]:
        """(sensitivity, noise multiplier) of each of the canary client's Gaussian releases."""
        return [(float(e.mechanism.sensitivity), float(e.mechanism.noise_multiplier)) for e in self.gaussians]


def _target(checkpoint: Path, options: GradientCanaryOptions) -> _Target:
    """Read and check everything the audit needs from the checkpoint, before any training."""
    # torch (tensor arithmetic of the engine): only when a checkpoint is read
    from privaudit.fl.engine import params as P

    federation = TrainedFederation(checkpoint)
    spec = training_recipe(checkpoint, "gradient-canary audit")
    num_clients = (federation.manifest.get("dataset") or {}).get("num_clients")
    if isinstance(num_clients, int) and options.client >= num_clients:
        raise InvalidParameterError(f"canary client {options.client} is not one of the run's {num_clients} clients")
    claim = checkpoint_claim(checkpoint, options.delta, options.accountant, options.claimed_epsilon)
    gaussians = _gaussian_events(claim.events, options.client)
    if options.magnitude is None:
        magnitude = _default_magnitude(gaussians, claim.events, checkpoint, options.client)
        source = f"the ledger's per-release L2 sensitivity Δ of client {options.client}"
    else:
        magnitude, source = float(options.magnitude), "--canary-magnitude"
    dimension = P.num_scalars(federation.global_state(0))
    if options.canaries > dimension:
        raise InvalidParameterError(
            f"{options.canaries} gradient canaries exceed the model's {dimension} scalars: the audit uses mutually "
            f"orthogonal directions (so the noise projects to independent observations), and R^{dimension} holds at "
            f"most {dimension}; use at most {dimension} canaries")
    training_rounds = sum(1 for m in federation.manifest["metrics"] if m.get("trained"))
    if training_rounds < 1:
        raise InvalidParameterError(f"{checkpoint} trained no client in any round, so there is nothing to audit")
    return _Target(checkpoint, spec, claim, gaussians, float(magnitude), source, dimension, training_rounds)


@dataclass(frozen=True)
class _Observed:
    """One re-training with the canaries: the per-round observations and what decides which bounds are valid."""

    observations: Any
    absent: list[int]
    clipped: list[int]
    validity: CompositionValidity

    @property
    def independent(self) -> str:
        return ("independent trials" if not self.clipped
                else f"NOT independent trials: clipping bound in iteration(s) {self.clipped}")

    @property
    def gaussian_rounds(self) -> bool:
        """A single round's GDP bound speaks about ε only when a round is a Gaussian shift of the canary."""
        return self.validity.checks["mechanism"]["holds"] and self.validity.checks["view"]["holds"]


def _observe(target: _Target, options: GradientCanaryOptions, progress: bool) -> _Observed:
    """Re-train the recipe once with the canaries (each in w.p. ½ every round) and record every round's release."""
    # torch (attacks, the canary engine): only when the audit trains
    from attacks.membership import gradient_canary_observations
    from attacks.membership.releases import find_privacy
    from attacks.membership.target import load_training_data
    from privaudit.fl.canaries.compose import run_spec_on_dataset, with_canaries
    from privaudit.fl.canaries.gradients import GradientCanaryInsertion, make_gradient_canaries

    client = options.client
    drawn = make_gradient_canaries(target.dimension, options.canaries, magnitude=target.magnitude, client=client,
                                   rounds=range(1, target.training_rounds + 1), membership="per-round", seed=options.seed)
    drawn = replace(drawn, directions=_orthonormal_directions(options.canaries, target.dimension, options.seed),
                    kind="random-orthonormal")
    dataset = load_training_data(target.spec)
    if client >= dataset.num_clients:
        raise InvalidParameterError(f"canary client {client} is not one of the run's {dataset.num_clients} clients")
    recorder = _recorder(client, keep_client=options.view == "client")
    algorithm = with_canaries(target.spec, [lambda inner: GradientCanaryInsertion(inner, drawn)])
    result = run_spec_on_dataset(target.spec, dataset, algorithm=algorithm, observers=[recorder], progress=progress)
    observations = gradient_canary_observations(recorder, drawn, view=options.view)
    if not observations.pairs():
        raise InvalidParameterError(f"with {options.canaries} canaries no round had canaries on both sides; use more canaries")
    absent = [m.round for m in result.history if m.trained and client not in m.clients]
    privacy = find_privacy(result.info.algorithm)
    validity = composition_validity(privacy, options.view, target.spec.clients_per_round, absent)
    # Treating a round's K canaries as K independent trials needs the release to be linear in the canaries (isotropic
    # noise on orthonormal directions). Clipping rescales the whole model by a factor that depends on how many
    # canaries are in, which couples the trials; then the GDP bounds are only reported and the one-run bound decides.
    clipped = sorted(r for r, norm in recorder.norms.items()
                     if privacy and privacy.get("clip") is not None and norm > float(privacy["clip"]))
    return _Observed(observations, absent, clipped, validity)


def _bounds(observed: _Observed, claim: CheckpointClaim, options: GradientCanaryOptions) -> list[LowerBound]:
    """``gdp-composed``, ``gdp-best-round`` and, where rounds are coupled or not Gaussian, ``one-run-best-round``;
    each at α/2 and each marked ``valid`` or not for this run (only valid ones decide)."""
    pairs = observed.observations.pairs()
    complete = observed.observations.complete_rounds()
    power = ClaimPower(claim.epsilon, trials=options.power_trials, seed=options.seed, attack_optimal=options.attack_optimal)
    common = {"significance": options.significance / 2, "delta": claim.delta, "claim": power}
    clipped, independent = bool(observed.clipped), observed.independent
    composed = gdp_rounds_lower_bound(pairs, **common)
    composed = replace(composed, details={**composed.details, "valid": observed.validity.valid and not clipped,
                                          "validity": observed.validity.statement, "canaries_per_round": independent})
    best = gdp_best_round_lower_bound(pairs, **common)
    best = replace(best, details={**best.details, "valid": observed.gaussian_rounds and not clipped,
                                  "canaries_per_round": independent, "gaussian_rounds": observed.gaussian_rounds,
                                  "best_round": complete[best.details["best_round_index"]]})
    bounds = [composed, best]
    if clipped or not observed.gaussian_rounds:
        # coupled or non-Gaussian rounds still give a valid bound through the one-run analysis, which needs neither
        # independence between a round's canaries nor a Gaussian curve
        coupled = one_run_best_round_lower_bound(pairs, **common)
        bounds.append(replace(coupled, details={**coupled.details, "valid": True, "canaries_per_round": independent,
                                                "best_round": complete[coupled.details["best_round_index"]]}))
    return bounds


def _per_round_table(observations, composed: LowerBound, best: LowerBound, expected_mu: float | None) -> list[dict]:
    # torch (attacks.membership): only when the scores are computed
    from attacks.membership.scores import gaussian_separation

    complete = observations.complete_rounds()
    mu_composed = dict(zip(complete, composed.details["composition"]["per_round"], strict=True))
    mu_best = dict(zip(complete, best.details["per_round_mu_lb"], strict=True))
    rows = []
    for r, scores in zip(observations.rounds, observations.per_round, strict=True):
        row = {"iteration": r, "training_round": scores.meta.get("training_round"), "n_in": scores.n_in,
               "n_out": scores.n_out, "mu_lb": mu_composed.get(r), "mu_lb_best_round": mu_best.get(r)}
        if scores.n_in >= 2 and scores.n_out >= 2:
            row["mean_in"] = float(np.mean(scores.in_scores))
            row["mean_out"] = float(np.mean(scores.out_scores))
            row["separation"] = gaussian_separation(scores)
        if expected_mu is not None:
            row["mechanism_mu"] = expected_mu
        rows.append(row)
    return rows


def _mechanism_mu(target: _Target, observed: _Observed, options: GradientCanaryOptions) -> float | None:
    """C/σ: the privatizer's own per-round μ for this canary (client view only)."""
    noise_std = observed.observations.meta.get("noise_std")
    return target.magnitude / noise_std if (noise_std and options.view == "client") else None


def _details(target: _Target, observed: _Observed, options: GradientCanaryOptions,
             bounds: list[LowerBound], deciding: list[LowerBound]) -> dict[str, Any]:
    claim, observations = target.claim, observed.observations
    complete = observations.complete_rounds()
    mechanism_mu = _mechanism_mu(target, observed, options)
    ledger_rounds = target.ledger_rounds
    ledger_mu = math.sqrt(math.fsum((s / n) ** 2 for s, n in ledger_rounds)) if ledger_rounds else None
    client_epsilon = None
    if claim.from_ledger and str(options.client) in claim.recorded.per_client:
        client_epsilon = claim.recorded.per_client[str(options.client)].epsilon
    return {
        "train_spec": target.spec.to_dict(),
        "canary_client": options.client,
        "dimension": target.dimension,
        "directions": "random orthonormal frame (Haar), one per canary",
        "membership": "per-round: each canary in w.p. ½ independently in every training round",
        "magnitude": {"value": target.magnitude, "source": target.magnitude_source,
                      "ledger_sensitivities": sorted({s for s, _ in ledger_rounds})},
        "training_rounds": target.training_rounds,
        "observed_rounds": list(observations.rounds),
        "complete_rounds": list(complete),
        "rounds_without_client": observed.absent,
        "rounds_clipped": observed.clipped,
        "per_round": _per_round_table(observations, bounds[0], bounds[1], mechanism_mu),
        "noise_std": observations.meta.get("noise_std"),
        "mechanism_mu": None if mechanism_mu is None else {
            "per_round": mechanism_mu, "composed": mechanism_mu * math.sqrt(len(complete)),
            "epsilon": mu_to_epsilon(mechanism_mu * math.sqrt(len(complete)), claim.delta),
            "meaning": "C/σ per round (if clipping does not bind), composed over the audited rounds: what an audit "
                       "with unlimited canaries would find for this canary"},
        "ledger_mu": None if ledger_mu is None else {
            "composed": ledger_mu, "epsilon": mu_to_epsilon(ledger_mu, claim.delta), "releases": len(ledger_rounds),
            "meaning": f"√(Σ (Δ/σ)²) over client {options.client}'s Gaussian ledger events: the exact GDP ε the ledger implies"},
        "canary_client_epsilon": client_epsilon,
        "recorded_ledger": claim.recorded_dict(),
        "claim_source": claim.source,
        "deciding_estimators": [b.estimator for b in deciding],
        "composition": observed.validity.to_dict(),
    }


def _notes(target: _Target, observed: _Observed, options: GradientCanaryOptions, client_epsilon: float | None) -> list[str]:
    magnitude, client, claimed = target.magnitude, options.client, target.claim.epsilon
    observations = observed.observations
    notes = [
        f"Threat model: {THREAT_MODEL}. Here C = {magnitude:g} ({target.magnitude_source}), client {client}, "
        f"{options.view} view.",
        observed.validity.statement + ".",
        f"gdp-best-round is {BEST_ROUND_VALIDITY}.",
        "Both bounds are μ-GDP lower bounds converted to ε at δ; they refute an (ε, δ) claim exactly when the claimed "
        "mechanism's privacy profile is Gaussian (output perturbation's Gaussian releases without subsampling; Dong, "
        "Roth & Su 2022, Cor. 2.13).",
        f"The {options.canaries} canaries use mutually orthonormal random directions in R^{target.dimension}, so each "
        "round's isotropic noise projects to independent observations and the per-round tests treat the canaries as "
        "independent trials.",
    ]
    if target.magnitude_source == "--canary-magnitude" and target.gaussians:
        notes.append(f"The ledger's own sensitivity for client {client} is {max(s for s, _ in target.ledger_rounds):g}; "
                     f"with C = {magnitude:g} the audit tests a canary of a different norm than the ledger accounts for.")
    if client_epsilon is not None and not math.isclose(client_epsilon, claimed, rel_tol=1e-9):
        notes.append(f"The claim is the federation's largest per-client ε ({claimed:.4g}); the canary client {client}'s "
                     f"own ledger ε is {client_epsilon:.4g}.")
    if observed.clipped:
        notes.append(f"Clipping bound for the canary client in iteration(s) {observed.clipped}: the model was rescaled by a "
                     "factor that depends on how many canaries were in, so a round's canaries are no longer independent "
                     "trials; the GDP bounds are reported but do not decide, and one-run-best-round (at α/2) decides "
                     f"instead: it is {ONE_RUN_ROUND_VALIDITY}.")
    dropped = len(observations.rounds) - len(observations.complete_rounds())
    if dropped:
        notes.append(f"{dropped} observed round(s) had canaries on one side only and were left out (which depends on the "
                     "membership bits alone).")
    return notes


def run_gradient_canary_audit(checkpoint: str | Path, options: GradientCanaryOptions, *,
                              progress: bool = True) -> GradientCanaryAudit:
    """Re-train the checkpoint's recipe once with gradient canaries and bound ε per round and composed.

    See the module docstring (Nasr et al. 2023; Dong, Roth & Su 2022 Cor. 3.3). The result's :meth:`data` is a
    ``claim-audit`` result (the CLI writes it to ``<out>/gradient-canaries.json``).
    """
    started = time.perf_counter()
    checkpoint = Path(checkpoint)
    target = _target(checkpoint, options)
    observed = _observe(target, options, progress)
    bounds = _bounds(observed, target.claim, options)
    deciding = [b for b in (bounds[1], bounds[0], *bounds[2:]) if b.details["valid"]]
    # the ledger never certifies its own claim (checkpoint_claim's module docstring): the attack decides
    verdict = decide(target.claim.epsilon, target.claim.delta, deciding, [])
    pooled = observed.observations.pooled()

    metrics = attack_metrics(pooled.in_scores, pooled.out_scores, n_resamples=200, seed=options.seed).to_dict()
    metrics.pop("roc", None)
    details = _details(target, observed, options, bounds, deciding)
    view = "client release" if options.view == "client" else "aggregate"
    attack = {"name": "gradient canaries, per-round membership (Nasr et al. 2023)",
              "threat_model": f"white-box: every round's {view}; " + THREAT_MODEL,
              "canaries": options.canaries, "magnitude": target.magnitude, "view": options.view, "metrics": metrics}
    return GradientCanaryAudit(
        claim_id=f"checkpoint:{checkpoint.name}:gradient-canaries", where=f"white-box gradient-canary audit of {checkpoint}",
        claim=target.claim, bounds=bounds, verdict=verdict, attack=attack, details=details,
        notes=_notes(target, observed, options, details["canary_client_epsilon"]),
        seconds=time.perf_counter() - started, canaries=options.canaries, view=options.view,
        magnitude=target.magnitude, composition=observed.validity)
