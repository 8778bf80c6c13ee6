"""Membership-inference attacks and canaries; they return score arrays (larger = member), never ε.

API summary (for the audit runner; turning scores into ε lower bounds is :mod:`privaudit.audit`'s job)::

    # results ---------------------------------------------------------------------------------------
    MembershipScores(in_scores, out_scores, meta)   frozen; float64 arrays; larger = member
        .as_pair() -> (in, out)    .summary() -> {auc, tpr_at_fpr{"0.001","0.01"}, n_in, n_out}
        .save_npz(path) / MembershipScores.load_npz(path)
    RoundObservations(rounds, per_round, meta)      white-box, one MembershipScores per round
        .pairs() -> [(in_t, out_t), ...]  (feed privaudit.audit.gdp_rounds_lower_bound / compose_mu)

    # record-level attacks on a trained model -------------------------------------------------------
    target = TargetModel.from_checkpoint(path, round=None)   # or TargetModel.from_result(result, dataset, train_spec)
    scores = run_membership_attack(target, "loss" | "confidence" | "entropy" | "modified-entropy" | "lira",
                                   options={...}, threat_model="final-model" | "client-releases",
                                   releases=releases_of(path), max_examples=None, seed=0)
    build_attack(name, **options).run(target, examples_from_dataset(dataset))   # the same, step by step
    LiRA options (LiRAConfig): shadows=16, mode="online"|"offline", variance="auto"|"per-example"|"fixed",
        executor="in-process"|"process"|"ray", workers, address, out_dir (resumable), seed
    write_membership_attack(out_dir, scores, title=..., config=...) -> (result.json, scores.npz)

    # canaries (insertion: privaudit.fl.canaries; scoring here) ------------------------------------
    score_input_canaries(target, InputCanaries, signal="loss") -> MembershipScores
    gradient_canary_observations(source, GradientCanaries, view="client"|"aggregate") -> RoundObservations
    summed_canary_scores(observations, canaries) -> MembershipScores            (per-canary design)
    canary_client_scores(source, CanaryClients, threat_model="final-model"|"all-iterates"|"iterate-sums") -> MembershipScores
    canary_client_sums(source, CanaryClients) -> np.ndarray  (Σ_t ⟨θ_t − θ_{t−1}, c_j⟩ per canary)
    null_cosine_pdf / _cdf / _sf / sample_null_cosines(count, d, rng)          analytic null, Var = 1/d
        source = checkpoint path | privaudit.fl.engine.recording.ReleaseRecorder | FederationReleases

    # Upcycled-FL output perturbation (Thm 6.2; audit points U2, U5) ---------------------------------------
    pair = neighbouring_clipped_models(model, start_state, client_data, worst_case_record(shape) | in_domain_record(shape),
                                       local=LocalTrainingConfig(...), clip=τ, prox=μ, seed=0)
        pair.displacement (‖ξ(ω') − ξ(ω)‖), pair.claimed_sensitivity (τ/|D|), pair.mu(std)
    output_perturbation_lr_test(pair, OutputPerturbationConfig(...), trials=1000, seed=0) -> MembershipScores
        meta["mu"] = exact μ of the pair; meta["claimed_mu"] = μ under Thm 6.2's sensitivity
    recover_clock_seeds(releases, clip=τ, std=s, references=...) -> ClockRecoveryReport   (ε = ∞ consequence)
    recover_from_releases(checkpoint | recorder) -> ClockRecoveryReport

Score conventions: every score is oriented "larger = member"; LOSS is −ℓ, entropy attacks use −H / −Mentr,
LiRA online is the log-likelihood ratio, offline −log Pr_OUT[Z > φ], canary-client scores are cosines,
gradient-canary scores are projections ⟨Δ, c⟩, the mechanism test is the exact log-likelihood ratio Λ.
Attack names: :data:`ATTACKS` (registry); :func:`available_attacks` lists them with one line each.
"""

from .base import MembershipAttack
from .client_canaries import canary_client_cosines, canary_client_scores, canary_client_sums
from .clock_recovery import (
    ClockRecoveryReport,
    SeedRecovery,
    clock_noise,
    recover_clock_seeds,
    recover_from_releases,
)
from .cosine_null import (
    null_cosine_cdf,
    null_cosine_logpdf,
    null_cosine_pdf,
    null_cosine_sf,
    null_cosine_variance,
    sample_null_cosines,
)
from .examples import MembershipExamples, client_examples, dataset_pool, examples_from_dataset
from .gradient_canaries import gradient_canary_observations, summed_canary_scores
from .input_canaries import score_input_canaries
from .lira import ShadowStatistics, lira_offline, lira_online, lira_scores
from .lira_attack import LiRAAttack, LiRAConfig
from .neighbouring_models import (
    NeighbouringClippedModels,
    in_domain_record,
    neighbouring_clipped_models,
    worst_case_record,
)
from .registry import ATTACKS, attack_options, available_attacks, build_attack
from .release_likelihood_ratio import output_perturbation_lr_test, release_log_ratio
from .releases import CheckpointReleases, FederationReleases, RecordedReleases, releases_of
from .run import THREAT_MODELS, membership_attack_data, run_membership_attack, write_membership_attack
from .scores import MembershipScores, RoundObservations, gaussian_separation
from .signals import SIGNALS, membership_signal
from .target import TargetModel, train_spec_from_dict
from .threshold_attacks import ConfidenceAttack, EntropyAttack, LossAttack, ModifiedEntropyAttack

__all__ = [
    "ATTACKS",
    "SIGNALS",
    "THREAT_MODELS",
    "CheckpointReleases",
    "ClockRecoveryReport",
    "ConfidenceAttack",
    "EntropyAttack",
    "FederationReleases",
    "LiRAAttack",
    "LiRAConfig",
    "LossAttack",
    "MembershipAttack",
    "MembershipExamples",
    "MembershipScores",
    "ModifiedEntropyAttack",
    "NeighbouringClippedModels",
    "RecordedReleases",
    "RoundObservations",
    "SeedRecovery",
    "ShadowStatistics",
    "TargetModel",
    "attack_options",
    "available_attacks",
    "build_attack",
    "canary_client_cosines",
    "canary_client_scores",
    "canary_client_sums",
    "client_examples",
    "clock_noise",
    "dataset_pool",
    "examples_from_dataset",
    "gaussian_separation",
    "gradient_canary_observations",
    "in_domain_record",
    "lira_offline",
    "lira_online",
    "lira_scores",
    "membership_attack_data",
    "membership_signal",
    "neighbouring_clipped_models",
    "null_cosine_cdf",
    "null_cosine_logpdf",
    "null_cosine_pdf",
    "null_cosine_sf",
    "null_cosine_variance",
    "output_perturbation_lr_test",
    "recover_clock_seeds",
    "recover_from_releases",
    "release_log_ratio",
    "releases_of",
    "run_membership_attack",
    "sample_null_cosines",
    "score_input_canaries",
    "summed_canary_scores",
    "train_spec_from_dict",
    "worst_case_record",
    "write_membership_attack",
]
