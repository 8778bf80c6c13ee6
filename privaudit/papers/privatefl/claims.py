"""PrivateFL's privacy claims (Yang, Hui, Yuan, Gong & Cao, USENIX Security 2023, §3.3 and Table 9), as data.

Each :class:`~privaudit.audit.claims.Claim` quotes the paper (seed files are the paper texts the audit was
made from) and says which numbers the paper states and which privaudit chose, and why.
"""

from __future__ import annotations

from privaudit.audit.claims import Claim, Quote, chosen, stated

PRIVATEFL_SEED = "001_da864522ec6b6fa7.txt"


CLAIMS: tuple[Claim, ...] = (
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
        recipe="privaudit.papers.privatefl.recipe:central_dp",
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
        recipe="privaudit.papers.privatefl.recipe:ldp_participation",
        default_trials=20,
        suites=(("default", 5), ("claims", 10)),
    ),
)
