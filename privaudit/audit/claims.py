"""The claims registry: each privacy claim of the seed papers, as data.

A :class:`Claim` records where the claim is made (paper, seed file, theorem/figure), what it says, the
mechanism and its parameters, the claimed (ε, δ), the assumptions it rests on, the spec's audit points,
and the *recipe* that builds its readings (``"module:function"``, imported only when the claim is run, so
listing claims stays torch-free). A recipe has the signature::

    recipe(claim: Claim, trials: int) -> Sequence[Reading | PendingPart]      # privaudit.audit.plan

Claims whose training code has not landed are listed as ``pending`` with the reason (their
``requires`` modules are missing); they are never faked. Suites (``privaudit.audit.suites``) take their
members from each claim's ``suites`` entries.

Sources: spec ``seed_code.md`` §0 (findings table), §1.4–1.6 (Upcycled-FL U1–U10), §2.4–2.5 (PrivateFL
P1–P10), §3.2–3.3 (FedReg R1–R6), §4.1–4.3 (PFA F1–F6).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from privaudit.audit.plan import PendingPart, Reading, Requirement, missing
from privaudit.errors import InvalidParameterError

UPCYCLED_SEED = "003_a806a4129da32579.txt"  # TMLR 2024 (Thm 6.2/6.3, Fig. 3/4); 000_885f491b4e5299dd.txt is the ICLR draft
PRIVATEFL_SEED = "001_da864522ec6b6fa7.txt"
FEDREG_SEED = "002_ce947d6957998473.txt"
PFA_SEED = "004_d5201f9987646520.txt"

FEDREG_TRAINING = Requirement("privaudit.fl.algorithms.fedreg", "FedReg training with modified gradients (issue 5)")


@dataclass(frozen=True)
class Claim:
    """One privacy claim of a paper (see the module docstring)."""

    claim_id: str
    paper: str
    seed_file: str
    where: str
    statement: str
    mechanism: str
    epsilon: float
    delta: float
    parameters: tuple[tuple[str, Any], ...]
    assumptions: tuple[str, ...]
    spec_points: tuple[str, ...]
    recipe: str
    requires: tuple[Requirement, ...] = ()
    default_trials: int = 200
    suites: tuple[tuple[str, int], ...] = ()

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.parameters)

    def recipe_function(self) -> Callable[[Claim, int], Sequence[Reading | PendingPart]]:
        module, _, name = self.recipe.partition(":")
        return getattr(importlib.import_module(module), name)

    def pending_reason(self) -> str | None:
        absent = missing(self.requires)
        return "; ".join(r.reason() for r in absent) if absent else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim_id,
            "paper": self.paper,
            "seed_file": self.seed_file,
            "where": self.where,
            "statement": self.statement,
            "mechanism": self.mechanism,
            "claimed": {"epsilon": self.epsilon, "delta": self.delta},
            "parameters": dict(self.parameters),
            "assumptions": list(self.assumptions),
            "spec_points": list(self.spec_points),
        }


CLAIMS: tuple[Claim, ...] = (
    Claim(
        claim_id="upcycled-thm6.2-fig3",
        paper="Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu, TMLR 2024)",
        seed_file=UPCYCLED_SEED,
        where="Theorem 6.2 / Fig. 3 (Syn(iid), output perturbation)",
        statement="Private Upcycled-FedProx (σ = 0.8, 40 perturbed rounds) is (1.40, 1e-3)-DP per client, "
                  "stronger than private FedProx (σ = 1, 80 rounds: ε̄ = 1.59)",
        mechanism="output perturbation: clip the local model to norm τ, release it plus N(0, σ²I), in every odd round",
        epsilon=1.40,
        delta=1e-3,
        parameters=(
            ("sigma", 0.8), ("rounds", 40), ("clip", 10.0), ("mean_client_size", 224.2),
            ("baseline_sigma", 1.0), ("baseline_rounds", 80), ("baseline_epsilon", 1.59),
            ("client_size", 225), ("dataset", "synthetic:iid"), ("dim", 20), ("num_classes", 2), ("data_seed", 0),
            ("local_epochs", 10), ("batch_size", 32), ("lr", 0.07), ("momentum", 0.5), ("prox_mu", 0.1),
            ("worst_case_norm", 5000.0),
        ),
        assumptions=(
            "sensitivity τ/|D_i|: the clipped model is an average of per-example terms bounded by τ (add-one neighbours)",
            "noise std σ, drawn from a proper random generator",
            "ε̄ is ε at the mean client size 224.2 (train + test), not the largest per-client ε",
        ),
        spec_points=("U1", "U2", "U3", "U4", "U5", "U8"),
        recipe="privaudit.audit.recipes.upcycled:output_perturbation",
        default_trials=500,
        suites=(("default", 150), ("claims", 1000)),
    ),
    Claim(
        claim_id="upcycled-thm6.3-fig4",
        paper="Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu, TMLR 2024)",
        seed_file=UPCYCLED_SEED,
        where="Theorem 6.3 / Fig. 4 (Syn(iid), objective perturbation)",
        statement="Private Upcycled-FedProx with objective perturbation (α = 20, μ = 0.5, 40 perturbed rounds) "
                  "is 7.25-DP per client (FedProx, α = 10, 80 rounds: 7.36)",
        mechanism="objective perturbation: each client releases argmin F_i(ω) + (μ/2)‖ω − ω̄‖² + ⟨n, ω⟩, "
                  "n with density ∝ exp(−α‖n‖)",
        epsilon=7.25,
        delta=0.0,
        parameters=(
            ("alpha", 20.0), ("mu", 0.5), ("rounds", 40), ("u1", 1.0), ("u2", 0.25), ("mean_client_size", 224.2),
            ("baseline_alpha", 10.0), ("baseline_rounds", 80), ("baseline_epsilon", 7.36),
            ("client_size", 225), ("dataset", "synthetic:iid"), ("dim", 20), ("num_classes", 2), ("data_seed", 0),
            ("reference_lr", 1e-3), ("local_epochs", 10), ("batch_size", 32), ("momentum", 0.5),
            ("worst_case_norm", 5000.0),
        ),
        assumptions=(
            "GLM loss with ‖∇F̂‖ < u₁, |F̂''| ≤ u₂ ≤ 0.5|D_i|μ and ‖x‖ ≤ 1",
            "the exact minimiser of the perturbed, strongly convex (μ > 0) objective is released",
            "noise density ∝ exp(−α‖n‖) in d = number of parameters",
        ),
        spec_points=("U4", "U6"),
        recipe="privaudit.audit.recipes.upcycled:objective_perturbation",
        default_trials=500,
        suites=(("default", 60), ("claims", 300)),
    ),
    Claim(
        claim_id="privatefl-cdp-eps8",
        paper="PrivateFL (Yang, Hui, Yuan, Gong & Cao, USENIX Security 2023)",
        seed_file=PRIVATEFL_SEED,
        where="Table 3 / Alg. 1 (CDP), reference FedServer.agg_updates",
        statement="PrivateFL with central DP is (8, 1e-3)-DP at client level (noise multiplier from opacus' "
                  "get_noise_multiplier for the given rounds and sample rate)",
        mechanism="server clips each client's update and adds Gaussian noise; the reference code clips and noises "
                  "every tensor separately at the unprivatised median of the clients' tensor norms",
        epsilon=8.0,
        delta=1e-3,
        parameters=(
            ("settings", (
                ("mnist-dnn", "MNIST 3-layer DNN (privatefl-dnn), 150 rounds, all 100 clients per round", "privatefl-dnn", 150, 1.0, None),
                ("cifar10-resnet18", "CIFAR-10 resnet18_IN, 60 rounds, all clients per round: 22 aggregated tensors "
                 "(20 convolutions + fc weight and bias; norm layers are personal)", None, 60, 1.0, 22),
            )),
            ("median_levels", (1.0, 0.5, 0.1)),
            ("canary_run", (("dataset", "mnist5k"), ("num_clients", 20), ("rounds", 5), ("clients_per_round", 1.0))),
            ("canaries_per_run", 30),
        ),
        assumptions=(
            "one clip bound over the whole update (the calibration treats the release as one Gaussian mechanism)",
            "the clip bound does not depend on the data",
            "Poisson client sampling at rate sr (the calibration's assumption)",
        ),
        spec_points=("P1", "P2", "P3"),
        recipe="privaudit.audit.recipes.privatefl:central_dp",
        default_trials=1,
        suites=(("default", 1), ("claims", 20)),
    ),
    Claim(
        claim_id="privatefl-ldp-participation",
        paper="PrivateFL (Yang, Hui, Yuan, Gong & Cao, USENIX Security 2023)",
        seed_file=PRIVATEFL_SEED,
        where="Table 3 (LDP, FMNIST: 100 clients, sr 0.3, 150 rounds); reference FedAverage.py / FedUser.py",
        statement="Every client's extended local model is (8, 1e-3)-DP (record level, DP-SGD via opacus)",
        mechanism="local DP-SGD (Poisson batches, per-sample clip, noise σ) for one epoch per participation; σ "
                  "calibrated for E·R·sr epochs (expected participation); the run stops once max ε > 8",
        epsilon=8.0,
        delta=1e-3,
        parameters=(
            ("num_clients", 100), ("sample_rate", 0.3), ("rounds", 150), ("epochs", 1), ("client_size", 600),
            ("batch_size", 64),
            ("trained_run", (("dataset", "mnist5k"), ("num_clients", 10), ("classes_per_client", 2),
                             ("clients_per_round", 0.3), ("max_rounds", 20))),
        ),
        assumptions=(
            "each client participates in E·R·sr rounds (its expected participation)",
            "the reported rounds are the rounds run",
        ),
        spec_points=("P4", "P6"),
        recipe="privaudit.audit.recipes.privatefl:ldp_participation",
        default_trials=20,
        suites=(("default", 5), ("claims", 10)),
    ),
    Claim(
        claim_id="pfa-heterogeneous-calibration",
        paper="PFA (Liu, Lou, Xiong, Liu & Meng, PVLDB 15(4) 2022)",
        seed_file=PFA_SEED,
        where="Theorems 1–2; reference dpsgd_utils.compute_noise_multiplier and budgets_accountant",
        statement="Client m is (ε_m, δ)-DP with the calibrated σ_m over T* = KT/M local steps; PFA is (max ε_m, δ)-DP",
        mechanism="local DP-SGD with per-client noise σ_m = 10·q·sqrt(T·log₁₀(1/δ))/ε_m (reference calibration), "
                  "clients sampled uniformly (K of M per round)",
        epsilon=10.0,
        delta=1e-5,
        parameters=(
            ("budgets", "mixgauss1"), ("rounds", 100), ("local_steps", 100), ("sample_ratio", 0.8),
            ("settings", (
                ("paper", "paper setting: 1,200 records and batch 8 per client, 20 clients", 1200, 8, 20),
                ("code-defaults", "reference code defaults: 2,000 records (60000 // 30) and batch 4, 30 clients", 2000, 4, 30),
            )),
            ("budget_seed", 10),
            ("trained_run", (("budgets", "reference-mixgauss1"), ("num_clients", 10), ("local_steps", 20),
                             ("max_rounds", 10))),
        ),
        assumptions=(
            "the closed form σ = c₂·q·sqrt(T*·log(1/δ))/ε yields (ε_m, δ)-DP (Thm 1; 'proof follows DPSGD')",
            "each client runs at most T* = KT/M local steps (Thm 2)",
            "batches are Poisson-sampled at rate q = B/N_m",
        ),
        spec_points=("F1", "F2", "F3"),
        recipe="privaudit.audit.recipes.pfa:heterogeneous_calibration",
        default_trials=20,
        suites=(("default", 5), ("claims", 10)),
    ),
    Claim(
        claim_id="fedreg-dpsgd-baselines",
        paper="FedReg (Xu, Hong, Huang & Jiang, ICLR 2022)",
        seed_file=FEDREG_SEED,
        where="Table 4 / App. B.4 (DP-SGD comparison points at 'similar PSNR')",
        statement="The DP-SGD baselines FedReg+MG is compared with are differentially private (the paper states no "
                  "ε; audited against ε ≤ 10 at δ = 1e-5, the largest ε usually called private)",
        mechanism="DP-SGD with clip C = 1 and noise multiplier σ on one client's full-batch local steps",
        epsilon=10.0,
        delta=1e-5,
        parameters=(
            ("settings", (
                ("emnist", "EMNIST: σ = 0.01, 20 full-batch local steps", 0.01, 20),
                ("cifar10", "CIFAR-10: σ = 0.05, 30 full-batch local steps", 0.05, 30),
                ("ct", "COVID-CT: σ = 0.001, 1 local step", 0.001, 1),
            )),
            ("clip", 1.0),
            ("membership_run", (("dataset", "mnist5k"), ("client_size", 64), ("data_seed", 0), ("model", "pfa-lr"),
                                ("init_seed", 0), ("lr", 0.5), ("auditor_seed", 7))),
        ),
        assumptions=("the noise multipliers give a meaningful DP guarantee",),
        spec_points=("R1", "R2"),
        recipe="privaudit.audit.recipes.fedreg:dpsgd_baselines",
        default_trials=1,
        suites=(("default", 1), ("claims", 5)),
    ),
    Claim(
        claim_id="fedreg-mg-membership",
        paper="FedReg (Xu, Hong, Huang & Jiang, ICLR 2022)",
        seed_file=FEDREG_SEED,
        where="§3.3 eq. (12) (modified gradients) / Table 4",
        statement="FedReg with modified gradients (MG) protects the clients' data (an empirical PSNR statement; "
                  "no DP guarantee is given — audited against a meaningful one, ε ≤ 1 at δ = 1e-5: a noiseless "
                  "release cannot be refuted beyond ≈ ln N by N multi-run trials, whatever the attack)",
        mechanism="FedReg local steps with the data gradient's component along the uniform-label pseudo-data "
                  "gradient removed; no noise",
        epsilon=1.0,
        delta=1e-5,
        parameters=(("model", "fedreg-cnn"), ("canary", "mislabelled record"),
                    ("membership_run", (("dataset", "mnist5k"), ("client_size", 64), ("data_seed", 0), ("model", "pfa-lr"),
                                        ("init_seed", 0), ("lr", 0.1), ("steps", 10), ("auditor_seed", 7)))),
        assumptions=("removing one gradient direction hides the membership of a record",),
        spec_points=("R1", "R3", "R4"),
        recipe="privaudit.audit.recipes.fedreg:mg_membership",
        requires=(FEDREG_TRAINING,),
        default_trials=200,
        suites=(("default", 40), ("claims", 200)),
    ),
)

_BY_ID = {claim.claim_id: claim for claim in CLAIMS}


def claim_ids() -> list[str]:
    return [claim.claim_id for claim in CLAIMS]


def get_claim(claim_id: str) -> Claim:
    """The registered claim with this id; an unknown id is one clear error that lists the known ones."""
    claim = _BY_ID.get(str(claim_id).strip())
    if claim is None:
        raise InvalidParameterError(f"unknown claim {claim_id!r}; known claims: {', '.join(claim_ids())}")
    return claim


@dataclass(frozen=True)
class ClaimStatus:
    """``ready`` (with any parts still pending) or ``pending`` (with the reason)."""

    claim: Claim
    status: str
    reason: str
    pending_parts: tuple[PendingPart, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim_id": self.claim.claim_id,
            "paper": self.claim.paper,
            "where": self.claim.where,
            "statement": self.claim.statement,
            "claimed": {"epsilon": self.claim.epsilon, "delta": self.claim.delta},
            "status": self.status,
            "reason": self.reason,
            "pending_parts": [p.to_dict() for p in self.pending_parts],
        }


def claim_status(claim: Claim) -> ClaimStatus:
    """Whether ``claim`` can run now; building its readings is cheap (no training happens here)."""
    reason = claim.pending_reason()
    if reason is not None:
        return ClaimStatus(claim, "pending", reason)
    parts = tuple(p for p in claim.recipe_function()(claim, 1) if isinstance(p, PendingPart))
    note = "all parts run" if not parts else "parts pending: " + "; ".join(f"{p.part_id} ({p.reason})" for p in parts)
    return ClaimStatus(claim, "ready", note, parts)


def list_claims() -> list[ClaimStatus]:
    return [claim_status(claim) for claim in CLAIMS]
