"""The claims registry: each privacy claim of the seed papers, as data.

A :class:`Claim` records where the claim is made (paper, seed file, theorem/figure), what it says, the
mechanism and its parameters, the claimed (ε, δ), the assumptions it rests on, the spec's audit points,
the paper's own words (:class:`Quote`: the verbatim sentence, table cell or formula, with its seed file and
section), where every number comes from (:class:`Number`: *stated* by the paper, with where, or *chosen* by
privaudit, with why — a δ the paper never gives is chosen, never passed off as the paper's), and the *recipe*
that builds its readings (``"module:function"``, imported only when the claim is run, so
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

UPCYCLED_DRAFT_SEED = "000_885f491b4e5299dd.txt"  # the ICLR draft of Upcycled-FL (Thm 5.2/5.3, Fig. 2)

FEDREG_TRAINING = Requirement("privaudit.fl.algorithms.fedreg", "FedReg training with modified gradients (issue 5)")

NUMBER_SOURCES = ("stated", "chosen")


@dataclass(frozen=True)
class Quote:
    """The paper's own words for a claim: a sentence, table cell or formula, where it is printed.

    ``text`` is verbatim except that formulas are transcribed from the paper's LaTeX into plain notation;
    ``seed_file`` names the paper text (``003_….txt``), ``where`` its section, theorem, table or caption.
    """

    text: str
    seed_file: str
    where: str

    def __post_init__(self) -> None:
        if not (self.text.strip() and self.seed_file.strip() and self.where.strip()):
            raise InvalidParameterError("a quote needs its text, seed file and where it is printed")

    @property
    def source(self) -> str:
        """Short citation: ``003 Fig. 3 caption``."""
        return f"{self.seed_file.split('_')[0]} {self.where}"

    def to_dict(self) -> dict[str, str]:
        return {"text": self.text, "seed_file": self.seed_file, "where": self.where, "source": self.source}


@dataclass(frozen=True)
class Number:
    """One number of a claim and where it comes from.

    ``source="stated"``: the paper prints it — ``where`` says where (seed file and section);
    ``source="chosen"``: the paper does not give it and privaudit picked it — ``reason`` says why (and
    ``where`` where the value was taken from, e.g. the reference code's default, if anywhere).
    """

    name: str
    value: Any
    source: str
    where: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        if self.source not in NUMBER_SOURCES:
            raise InvalidParameterError(f"a number's source is 'stated' or 'chosen', got {self.source!r}")
        if self.source == "stated" and not self.where.strip():
            raise InvalidParameterError(f"stated number {self.name!r} needs where the paper states it")
        if self.source == "chosen" and not self.reason.strip():
            raise InvalidParameterError(f"chosen number {self.name!r} needs the reason privaudit chose it")

    def text(self) -> str:
        """``δ = 0.001 (chosen: …)`` — one line for tables and the CLI."""
        value = f"{self.value:g}" if isinstance(self.value, float) else str(self.value)
        if self.source == "stated":
            return f"{self.name} = {value} ({self.where})"
        return f"{self.name} = {value} ({self.reason}{'; from ' + self.where if self.where else ''})"

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source, "where": self.where, "reason": self.reason}


def stated(name: str, value: Any, where: str) -> Number:
    """A number the paper prints, and where."""
    return Number(name, value, "stated", where=where)


def chosen(name: str, value: Any, reason: str, where: str = "") -> Number:
    """A number the paper does not give: privaudit's choice, and why (``where`` it was taken from, if anywhere)."""
    return Number(name, value, "chosen", where=where, reason=reason)


@dataclass(frozen=True)
class Claim:
    """One privacy claim of a paper (see the module docstring)."""

    claim_id: str
    paper: str
    seed_file: str
    where: str
    statement: str
    mechanism: str
    epsilon: float | None  # None: the paper states no ε (a comparison claim, privaudit.audit.comparison)
    delta: float | None
    parameters: tuple[tuple[str, Any], ...]
    assumptions: tuple[str, ...]
    spec_points: tuple[str, ...]
    recipe: str
    requires: tuple[Requirement, ...] = ()
    default_trials: int = 200
    suites: tuple[tuple[str, int], ...] = ()
    quotes: tuple[Quote, ...] = ()
    numbers: tuple[Number, ...] = ()
    #: "dp": an (ε, δ) claim (refuted / consistent / inconclusive); "comparison": a claim that states no ε, audited as
    #: stated by ``criterion`` (supported / not supported / inconclusive, privaudit.audit.comparison), ε and δ None.
    kind: str = "dp"
    criterion: str = ""

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.parameters)

    @property
    def quote(self) -> Quote | None:
        """The claim's first quote (the sentence or cell the claim rests on), or None if none is recorded."""
        return self.quotes[0] if self.quotes else None

    def number(self, name: str) -> Number | None:
        """The provenance of the number called ``name`` (``"epsilon"``, ``"delta"``, a parameter), if recorded."""
        return next((n for n in self.numbers if n.name == name), None)

    def provenance(self) -> dict[str, str]:
        """``{"epsilon": "stated", "delta": "chosen"}`` — "unrecorded" where the registry says nothing."""
        return {name: (n.source if (n := self.number(name)) is not None else "unrecorded") for name in ("epsilon", "delta")}

    def sources_dict(self) -> dict[str, Any]:
        """The claim's quotes and numbers, split into stated and chosen (for JSON and the report)."""
        return {
            "quotes": [q.to_dict() for q in self.quotes],
            "numbers": [n.to_dict() for n in self.numbers],
            "stated": [n.to_dict() for n in self.numbers if n.source == "stated"],
            "chosen": [n.to_dict() for n in self.numbers if n.source == "chosen"],
            "claimed_provenance": self.provenance(),
        }

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
            "claim_kind": self.kind,
            "criterion": self.criterion,
            "parameters": dict(self.parameters),
            "assumptions": list(self.assumptions),
            "spec_points": list(self.spec_points),
            **self.sources_dict(),
        }


CLAIMS: tuple[Claim, ...] = (
    Claim(
        claim_id="upcycled-thm6.2-fig3",
        paper="Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu, TMLR 2024)",
        seed_file=UPCYCLED_SEED,
        where="Theorem 6.2 / Fig. 3 (Syn(iid), output perturbation)",
        statement="Private Upcycled-FedProx (σ = 0.8) has ε̄ = 1.40 per client on Syn(iid), stronger privacy than "
                  "private FedProx (σ = 1: ε̄ = 1.59); Thm 6.2 gives ε for every δ and 003 states none — audited at "
                  "δ = 1e-3, the δ of the ICLR draft (000 Fig. 2)",
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
        quotes=(
            Quote("The noise parameter σ is 1.0 for all baselines, while σ of the Upcycled version is set to 0.8. Taking "
                  "the iid dataset as an example, ϵ̄ = 1.40 for the Upcycled version, which ensures stronger privacy than "
                  "the original method with ϵ̄ = 1.59.", UPCYCLED_SEED, "§7, Fig. 3 caption"),
            Quote("Equivalently, for any δ ∈ [0, 1], the algorithm is (ε, δ)-DP for agent i for "
                  "ε = 2·sqrt(Mτ²/(2σ²|D_i|²)·log(1/δ)) + Mτ²/(2σ²|D_i|²).", UPCYCLED_SEED, "§6, Theorem 6.2"),
            Quote("ε = 2·sqrt(Mτ²/(2σ²|D_i|²)·log(1/δ) + Mτ²/(2σ²|D_i|²)) — the ICLR draft's form, which gives 003's "
                  "1.40 / 1.59 at δ = 1e-3 (003's own form gives 1.373 / 1.562)", UPCYCLED_DRAFT_SEED, "§5, Theorem 5.2"),
            Quote("Comparison of Private Upcycled-FL and Private FedProx using objective perturbation ((a)(b)) and output "
                  "perturbation ((c)(d)) with δ = 0.001.", UPCYCLED_DRAFT_SEED, "§6, Fig. 2 caption"),
        ),
        numbers=(
            stated("epsilon", 1.40, "003 §7, Fig. 3 caption (ε̄, Syn(iid), Upcycled version)"),
            chosen("delta", 1e-3, "003 states no δ (neither Thm 6.2 nor Fig. 3); the ICLR draft states δ = 0.001, and the "
                   "draft's Thm 5.2 form at δ = 1e-3 reproduces 003's 1.40 / 1.59 exactly, so the printed numbers were "
                   "computed at this δ", where="000 §6, Fig. 2 caption"),
            stated("sigma", 0.8, "003 §7, Fig. 3 caption"),
            stated("baseline_sigma", 1.0, "003 §7, Fig. 3 caption"),
            stated("baseline_epsilon", 1.59, "003 §7, Fig. 3 caption"),
            chosen("rounds", 40, "003 does not state the private runs' iterations; M = 40 perturbed odd rounds of 80 "
                   "iterations (80 for FedProx) reproduce 1.40 / 1.59", where="reference README's privacy runs (80 iterations)"),
            chosen("clip", 10.0, "003 states no clipping threshold τ; τ = 10 reproduces 1.40 / 1.59",
                   where="reference README --clip 10"),
            chosen("mean_client_size", 224.2, "ε̄ is an average over devices (003 §7: results 'averaged outcomes over all "
                   "devices'); 224.2 = the mean train+test size of the Syn(iid) clients, the size at which the printed "
                   "numbers are reproduced", where="the reference Syn(iid) data files"),
            chosen("client_size", 225, "the audited client's size, the mean size rounded"),
        ),
        recipe="privaudit.audit.recipes.upcycled:output_perturbation",
        default_trials=500,
        suites=(("default", 150), ("claims", 1000)),
    ),
    Claim(
        claim_id="upcycled-thm6.3-fig4",
        paper="Upcycled-FL (Yin, Tan, Zhang, Khalili & Liu, TMLR 2024)",
        seed_file=UPCYCLED_SEED,
        where="Theorem 6.3 / Fig. 4 (Syn(iid), objective perturbation)",
        statement="Private Upcycled-FedProx with objective perturbation (α = 20, μ = 0.5) has ε̄ = 7.25, pure DP "
                  "(δ = 0), per client on Syn(iid), vs 7.36 for FedProx (α = 10)",
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
        quotes=(
            Quote("Under objective perturbation, noise parameter α is 10 for all baselines, while α of the Upcycled "
                  "version is set to 20 to ensure stronger privacy than the original versions. Taking the iid dataset as "
                  "an example, ϵ̄ associated with these noise parameters is 7.36 for FedProx and 7.25 for "
                  "Upcycled-FedProx (when μ = 0.5).", UPCYCLED_SEED, "§7, Fig. 4 caption"),
            Quote("Then the algorithm satisfies (ε, 0)-DP for agent i where "
                  "ε = Σ_{m=0}^{M} (2α_i^m u₁ μ + 2.8 u₂)/(|D_i| μ).", UPCYCLED_SEED, "§6, Theorem 6.3"),
        ),
        numbers=(
            stated("epsilon", 7.25, "003 §7, Fig. 4 caption (ε̄, Syn(iid), Upcycled-FedProx)"),
            stated("delta", 0.0, "003 §6, Theorem 6.3: (ε, 0)-DP"),
            stated("alpha", 20.0, "003 §7, Fig. 4 caption"),
            stated("mu", 0.5, "003 §7, Fig. 4 caption ('when μ = 0.5')"),
            stated("baseline_alpha", 10.0, "003 §7, Fig. 4 caption"),
            stated("baseline_epsilon", 7.36, "003 §7, Fig. 4 caption"),
            chosen("rounds", 40, "003 does not state the private runs' iterations; 80 iterations = 40 perturbed odd rounds, "
                   "as for Fig. 3", where="reference README's privacy runs"),
            chosen("u1", 1.0, "003 uses cross-entropy and states no u₁; the ICLR draft takes the log loss with u₁ = 1",
                   where="000 App. F.2"),
            chosen("u2", 0.25, "003 states no u₂; the ICLR draft's log loss has u₂ = 1/4", where="000 App. F.2"),
            chosen("mean_client_size", 224.2, "ε̄ is an average over devices (003 §7); the mean train+test size of the "
                   "Syn(iid) clients, as for Fig. 3", where="the reference Syn(iid) data files"),
            chosen("client_size", 225, "the audited client's size, the mean size rounded"),
        ),
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
        quotes=(
            Quote("Dataset | DP | architecture | # clients | # rounds | sample rate | (ϵ, δ) | η | batch size — "
                  "MNIST | LDP/CDP | 3-layer DNN | 100 | 150 | 1 | (8, 1e-3) | 1e-1/5e-3 | 64", PRIVATEFL_SEED,
                  "Table 3 (MNIST row)"),
            Quote("CIFAR-10 | LDP/CDP | ResNet | 100 | 150/60 | 1 | (8, 1e-3) | 1e-1/5e-4 | 64/16", PRIVATEFL_SEED,
                  "Table 3 (CIFAR-10 row)"),
            Quote("PRIVATEFL-CDP ensures the global model θ is differentially private via adding noise to the aggregation "
                  "using CDP, though the local models are not differentially private.", PRIVATEFL_SEED,
                  "§3.3, DP Guarantee"),
        ),
        numbers=(
            stated("epsilon", 8.0, "001 Table 3, (ϵ, δ) column; §5: 'set the default privacy budget (ϵ, δ) as (8, 1e-3)'"),
            stated("delta", 1e-3, "001 Table 3, (ϵ, δ) column"),
            stated("rounds (MNIST)", 150, "001 Table 3, # rounds"),
            stated("rounds (CIFAR-10, CDP)", 60, "001 Table 3, # rounds '150/60' (LDP/CDP)"),
            stated("sample rate", 1.0, "001 Table 3 (MNIST, CIFAR-10)"),
            chosen("unit", "client level", "001 says only that CDP makes 'the global model θ differentially private'; the "
                   "reference code calibrates σ at the clients' sampling rate with one step per round, i.e. client level",
                   where="reference FedServer / opacus get_noise_multiplier call"),
            chosen("aggregated tensors L", "3 (MNIST DNN), 22 (CIFAR-10 ResNet-18)", "architecture facts of the reference "
                   "models: the tensors the server clips one by one (norm layers stay personal)"),
        ),
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
        quotes=(
            Quote("Fashion-MNIST | LDP/CDP | 3-layer DNN | 100 | 150 | 0.3 | (8, 1e-3) | 1e-1/5e-3 | 64", PRIVATEFL_SEED,
                  "Table 3 (Fashion-MNIST row)"),
            Quote("PRIVATEFL-LDP ensures (ϵ, δ)-DP for each extended local model, which includes both transformation "
                  "layer and local model.", PRIVATEFL_SEED, "§3.3, DP Guarantee"),
        ),
        numbers=(
            stated("epsilon", 8.0, "001 Table 3, (ϵ, δ) column"),
            stated("delta", 1e-3, "001 Table 3, (ϵ, δ) column"),
            stated("num_clients", 100, "001 Table 3 (Fashion-MNIST)"),
            stated("sample_rate", 0.3, "001 Table 3 (Fashion-MNIST)"),
            stated("rounds", 150, "001 Table 3 (Fashion-MNIST)"),
            stated("batch_size", 64, "001 Table 3 (Fashion-MNIST)"),
            stated("epochs", 1, "001 §5: 'By default, we use one local training epoch'"),
            chosen("client_size", 600, "001 gives no per-client size; 60,000 Fashion-MNIST training images over 100 clients"),
        ),
        recipe="privaudit.audit.recipes.privatefl:ldp_participation",
        default_trials=20,
        suites=(("default", 5), ("claims", 10)),
    ),
    Claim(
        claim_id="pfa-heterogeneous-calibration",
        paper="PFA (Liu, Lou, Xiong, Liu & Meng, PVLDB 15(4) 2022)",
        seed_file=PFA_SEED,
        where="Theorems 1–2; reference dpsgd_utils.compute_noise_multiplier and budgets_accountant",
        statement="Client m is (ε_m, δ)-DP with the calibrated σ_m over T* = KT/M local steps; PFA is (max ε_m, δ)-DP "
                  "(max ε_m ≈ 10 in the paper's experiments; 004 gives no value of δ — audited at the reference code's 1e-5)",
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
        quotes=(
            Quote("For each client C_m ∈ C, given the sampling probability q = B/N_m and the total number of local SGD "
                  "steps T* = KT/M, for any ϵ < c₁q²T*, the local update satisfies (ϵ_m, δ_m)-differential privacy for "
                  "any δ_m > 0 if the noise scale σ_m ≥ c₂·q·sqrt(T*·log(1/δ))/ϵ", PFA_SEED, "§4.4 Privacy Analysis, Theorem 1"),
            Quote("The PFA algorithm in Alg. 2 satisfies {(ϵ_m, δ_m)}_{m∈[M]}-FL-HDP and (max_m ϵ_m, max_m δ_m)-DP.",
                  PFA_SEED, "§4.4 Privacy Analysis, Theorem 2"),
            Quote("In this section, we focus on two candidate privacy preference settings (i.e., MixGauss1 and MixGauss3), "
                  "both of which have the same level of maximal privacy preference 10.0, while the minimal privacy "
                  "preferences are around 0.1 and 1.0, respectively.", PFA_SEED, "§5.2.1"),
        ),
        numbers=(
            stated("epsilon", 10.0, "004 §5.2.1 ('maximal privacy preference 10.0'); Table 1: public component N(10.0, 0.1)"),
            chosen("delta", 1e-5, "004 gives no value of δ (Thm 1: 'for any δ_m > 0'; §5.1 sets none); privaudit audits "
                   "at the reference code's default", where="reference main.py --delta 1e-5"),
            stated("rounds", 100, "004 §5.1: 'up to T = 100 communication rounds'"),
            stated("local_steps", 100, "004 §5.1: 'local iterations τ = 100'"),
            stated("sample_ratio", 0.8, "004 §5.1: 'client sampling ratio K/M = 0.8'"),
            stated("records per client / batch (paper setting)", "1200 / 8", "004 §5.1: '1200 training examples', 'batch size B = 8'"),
            stated("clients (paper setting)", 20, "004 §5.1: M = 20, 30, 40 and 50"),
            chosen("budgets", "mixgauss1 (reference)", "the reference README runs --eps mixgauss1 everywhere; the code's "
                   "mixgauss1 is the paper's MixGauss2, 0.9·N(0.5, 0.01) + 0.1·N(10, 0.1); only the largest budget "
                   "(≈ 10, drawn) enters the claim", where="reference epsfiles / set_epsilons"),
            chosen("budget_seed", 10, "the reference code seeds its budget draws with np.random.seed(10)"),
            chosen("code defaults", "2000 records, batch 4, 30 clients", "the reference code's defaults "
                   "(60000 // 30, --client_batch_size 4), the implementation reading"),
        ),
        recipe="privaudit.audit.recipes.pfa:heterogeneous_calibration",
        default_trials=20,
        suites=(("default", 5), ("claims", 10)),
    ),
    Claim(
        claim_id="fedreg-mg-vs-dpsgd-psnr",
        paper="FedReg (Xu, Hong, Huang & Jiang, ICLR 2022)",
        seed_file=FEDREG_SEED,
        where="§4.5 / Table 4 / App. B.4 (FedReg with MG vs DP-SGD at similar PSNR)",
        statement="FedReg with modified gradients (MG) protects the clients' images as well as DP-SGD at the paper's "
                  "noise levels, as measured by the PSNR of images a gradient-inversion attack recovers (002 states no ε "
                  "anywhere: audited as this comparison, with MG's and DP-SGD's real ε reported as facts)",
        mechanism="FedReg local steps with the data gradient's component along the uniform-label pseudo-data gradient "
                  "removed (eq. 12), no noise; vs DP-SGD (clip C = 1, noise multiplier σ) on the same update",
        epsilon=None,
        delta=None,
        kind="comparison",
        criterion="FedReg+MG's inversion PSNR ≤ DP-SGD's + Δ (Δ = 1 dB) at each of the paper's σ, per image on "
                  "max(strongest attack run, data-only baseline), one-sided t-bounds at family-wise confidence 1 − α",
        parameters=(
            ("settings", (
                ("emnist", "EMNIST: σ = 0.01, 20 full-batch local steps (24 images, batch 24, 20 epochs)", 0.01, 20),
                ("cifar10", "CIFAR-10: σ = 0.05, 30 full-batch local steps (5 images, batch 5, 30 epochs)", 0.05, 30),
                ("ct", "COVID-CT: σ = 0.001, at least the 1 attacked step (client sizes not stated)", 0.001, 1),
            )),
            ("clip", 1.0),
            ("local", (("lr", 0.2), ("local_steps", 1))),
            ("fedreg", (("gamma", 0.4), ("pseudo_step", 0.03), ("fgsm_steps", 10))),
            ("dataset", "digits"),
            ("data_seed", 0),
            ("ig", (("model", "convnet"), ("iterations", 300))),
            ("analytic", (("model", "upcycled-mlp"),)),
            ("adaptive_from_images", 4),
            ("labels_known", False),
            ("margin_db", 1.0),
            ("psnr_cap", 100.0),
            ("delta", 1e-5),
        ),
        assumptions=(
            "PSNR of one attack's reconstruction measures how much an update reveals (the paper's measure)",
            "'similar' PSNR at the tuned DP-SGD noise level means a similar privacy protection level",
            "the attacker assumes plain FedAvg (the paper's attack is not adaptive to MG)",
        ),
        spec_points=("R1", "R2", "R4", "R5"),
        quotes=(
            Quote("To compare the impact of privacy protection on model performance, we tune the noise level in DPSGD to "
                  "generate images with similar quality as measured by PSNR (Hore & Ziou, 2010) and compare the "
                  "performance of the resultant models.", FEDREG_SEED, "§4.5"),
            Quote("It can be seen that the protection of private information with DP costs a large performance degradation "
                  "in the baseline methods, while the performance of FedReg with MG is degraded much less when maintaining "
                  "a similar privacy protection level.", FEDREG_SEED, "§4.5 (on Table 4)"),
            Quote("Under a comparable degree of privacy protection, the resultant model performance is compared between "
                  "FedReg with MG and the baseline methods with DPSGD (Abadi et al., 2016).", FEDREG_SEED, "§4.5"),
            Quote("In the baseline methods with DPSGD, C=1.0 and σ=0.01, and other hyper-parameters are the same as the "
                  "ones used in the corresponding baseline methods (without DPSGD).", FEDREG_SEED, "App. B.4, EMNIST"),
            Quote("To consider the worst case, in our attacking experiments, the parameters are only trained for one step "
                  "with each data point", FEDREG_SEED, "App. B.4"),
            Quote("Thus, we compute a modified gradient (MG) to enhance the protection of privacy as "
                  "g̃_γ(D_i) = g_γ(D_i) − v·g_γ(D_i^s'), v = g_γ(D_i)ᵀg_γ(D_i^s') / g_γ(D_i^s')ᵀg_γ(D_i^s')",
                  FEDREG_SEED, "§3.3, eq. (12)"),
        ),
        numbers=(
            stated("sigma (EMNIST)", 0.01, "002 App. B.4, EMNIST"),
            stated("sigma (CIFAR-10)", 0.05, "002 App. B.4, CIFAR-10"),
            stated("sigma (CT)", 0.001, "002 App. B.4, CT images"),
            stated("clip", 1.0, "002 App. B.4 (C = 1.0 for every dataset)"),
            stated("local_steps (attacked update)", 1, "002 App. B.4: 'only trained for one step with each data point'"),
            stated("DP-SGD steps per participation (EMNIST)", 20, "002 §4.1: 24 images per client; App. B.2: batch 24, "
                   "20 epochs — 20 full-batch steps"),
            stated("DP-SGD steps per participation (CIFAR-10)", 30, "002 §4.1: 5 images per client; App. B.2: batch 5, "
                   "30 epochs (uniform) — 30 full-batch steps"),
            chosen("DP-SGD steps per participation (CT)", 1, "002 gives no CT client sizes (App. B.2: 20 epochs, batch 10), "
                   "so only the one attacked step is certain: its ε is a lower bound on a participation's"),
            stated("lr", 0.2, "002 App. B.2 (EMNIST, all methods but SCAFFOLD); App. B.4: FedReg with MG keeps FedReg's lr"),
            stated("gamma", 0.4, "002 App. B.2, EMNIST FedReg; App. B.4: FedReg with MG keeps FedReg's γ"),
            stated("pseudo_step η_s", 0.03, "002 App. B.4, EMNIST FedReg with MG"),
            stated("fgsm_steps E", 10, "002 §3.1: 'we take η_p = 0.01η_s and E = 10'"),
            chosen("dataset", "digits", "scikit-learn's 8×8 digits ship with the package (EMNIST is not available "
                   "offline); grey digits like EMNIST, and small enough for adaptive inversion on a CPU — the FedReg "
                   "settings above are EMNIST's"),
            chosen("model", "convnet (IG), upcycled-mlp (analytic)", "a small CNN for Inverting Gradients (the paper's "
                   "EMNIST CNN needs 28×28 inputs) and an FC-first model, on which the closed-form attack is exact"),
            chosen("iterations", 300, "CPU budget; the paper uses 32,000 (App. B.4), so the IG numbers understate a "
                   "converged attack"),
            chosen("margin Δ", "1 dB", "002 gives no tolerance for 'similar quality as measured by PSNR'; 1 dB is well "
                   "below the image-to-image spread of every attack here and far below the tens of dB between an "
                   "undefended and a defended update"),
            chosen("data-only baseline", "mean of the dataset's other images", "an attacker can output it without the "
                   "update; a reconstruction below its PSNR reveals nothing more, so PSNR is floored there"),
            chosen("delta (for the ε facts)", 1e-5, "002 states no δ (nor ε); 1e-5 is below 1/n for every dataset of "
                   "the paper and the δ the previous registry used"),
            chosen("adaptive_from_images", 4, "the adaptive attacker costs ~10× an IG run: it runs from 4 images on "
                   "(claims suite), and without it 'supported' is not concluded"),
            chosen("psnr_cap", "100 dB", "an exact recovery scores +∞; above 100 dB only float rounding differs"),
        ),
        recipe="privaudit.audit.recipes.fedreg:mg_vs_dpsgd_psnr",
        default_trials=8,
        suites=(("default", 1), ("claims", 8)),
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
            **self.claim.sources_dict(),
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
