"""FedReg's privacy claim (Xu, Hong, Huang & Jiang, ICLR 2022, §4.5 / Table 4), as data: it states no ε.

Each :class:`~privaudit.audit.claims.Claim` quotes the paper (seed files are the paper texts the audit was
made from) and says which numbers the paper states and which privaudit chose, and why.
"""

from __future__ import annotations

from privaudit.audit.claims import Claim, Quote, chosen, stated

FEDREG_SEED = "002_ce947d6957998473.txt"


CLAIMS: tuple[Claim, ...] = (
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
        recipe="privaudit.papers.fedreg.recipe:mg_vs_dpsgd_psnr",
        default_trials=8,
        suites=(("default", 1), ("claims", 8)),
    ),
)
