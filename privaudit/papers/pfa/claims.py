"""PFA's privacy claim (heterogeneous per-client DP, §4.4 Theorems 1–2, §5.2.1), as data.

Each :class:`~privaudit.audit.claims.Claim` quotes the paper (seed files are the paper texts the audit was
made from) and says which numbers the paper states and which privaudit chose, and why.
"""

from __future__ import annotations

from privaudit.audit.claims import Claim, Quote, chosen, stated

PFA_SEED = "004_d5201f9987646520.txt"


CLAIMS: tuple[Claim, ...] = (
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
        spec_points=("F1", "F2", "F3", "F7"),
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
        recipe="privaudit.papers.pfa.recipe:heterogeneous_calibration",
        default_trials=20,
        suites=(("default", 5), ("claims", 10)),
    ),
)
