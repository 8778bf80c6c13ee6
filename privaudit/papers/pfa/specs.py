"""Specs of the PFA family (004): ``pfa``, ``pfa-plus``, ``weiavg``, ``fedavg-hdp``, ``public-only``, ``minimum``,
``maximum``, ``np-fedavg`` — heterogeneous per-client budgets with local DP-SGD, and their options.

Torch-free: the builder imports :mod:`privaudit.papers.pfa.algorithm` when called. Every option defaults to the
paper's behaviour; reference-code behaviour is a named value (``--noise-calibration reference``,
``--projection reference --eigensolver reference-lanczos``, ``--split topk --public-clients ⌊0.1M⌋ --split-scope population``,
``--no-public stop``, ``--local-step-rule exact``, ``--model-init keras``, ``--budgets reference-mixgauss1``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privaudit.fl.algorithms.spec_types import AlgorithmSpec
from privaudit.fl.engine.options import Option

BUDGETS = Option("budgets", str, "per-client ε: mixgauss1..4, uniform, gauss, pareto (004 Table 1), reference-*, constant:<ε> or file:<path> (default mixgauss1)")
BUDGET_SEED = Option("budget_seed", int, "seed of the budget draw (default: the run's --seed)")
NONPOSITIVE = Option("nonpositive_budgets", str, "a drawn ε ≤ 0 is redrawn (default) or rejected", ("redraw", "reject"))
BUDGET_PARAMETER = Option("budget_parameter", str, "read N(μ, x) as variance x (paper, default for Table 1 names) or std x (reference files)", ("variance", "std"))
BUDGET_DELTA = Option("budget_delta", float, "δ of every client's budget (default 1e-5, the reference code's)")
DP_CLIP = Option("dp_clip", float, "DP-SGD per-example clipping norm C (default 1.0, the reference code's)")
CALIBRATION = Option("noise_calibration", str, "σ_m from ε_m: rdp (default) or prv accountant, or the reference closed form σ = 10q√(T·log₁₀(1/δ))/ε", ("rdp", "prv", "reference"))
PLANNED = Option("planned_steps", str, "steps σ_m is calibrated for: expected (T* = KRτ/M, the paper) or every-round (Rτ)", ("expected", "every-round"))
LOCAL_STEPS = Option("local_steps", int, "local DP-SGD steps τ per round, realised as whole Poisson epochs of ⌈1/q⌉ steps (default 100; replaces --local-epochs)")
LOCAL_STEP_RULE = Option("local_step_rule", str, "τ as whole Poisson epochs (epochs, default) or exactly τ DP-SGD steps per round "
                         "(exact, the reference code's count)", ("epochs", "exact"))
PRECHECK = Option("precheck", str, "budget pre-check: exclude clients whose next round exceeds ε_m (default) or record overruns", ("exclude", "record"))
SPLIT = Option("split", str, "public/private division: gmm (default), kmeans or topk", ("gmm", "kmeans", "topk"))
PUBLIC_CLIENTS = Option("public_clients", int, "number of public clients for --split topk")
SPLIT_SCOPE = Option("split_scope", str, "divide all clients once, each sampled client keeps its group (population, default) or re-cluster every sample (round)", ("population", "round"))
PROJECTION = Option("projection", str, "PFA subspace: paper (top-k eigenvectors of Δx̄_pub Δx̄_pubᵀ) or reference (centred per tensor)", ("paper", "reference"))
PROJECTION_DIMS = Option("projection_dims", int, "projection dimension k ≥ 1 (default 1)")
PROJECTION_SCOPE = Option("projection_scope", str, "project each tensor (default) or the whole flattened model", ("tensor", "model"))
EIGENSOLVER = Option("eigensolver", str, "top-k eigenvectors by lanczos (default), power iteration, dense eigh (small models only), "
                     "or reference-lanczos: the reference code's solver with its defects (audit point F7)", ("lanczos", "power", "dense", "reference-lanczos"))
LANCZOS_ITER = Option("lanczos_iter", int, "Lanczos / power iterations (default 256, the reference code's --lanczos_iter; privaudit's lanczos "
                      "stops at breakdown, ≤ rank + 1 steps, while the reference solver runs all 256 and loses orthogonality: F7)")
NO_PUBLIC = Option("no_public", str, "a PFA round without public clients: weiavg (default), resample (redraw up to 50 times, "
                   "then WeiAvg) or stop (redraw; training stops after 50 draws without one, as the reference code)", ("weiavg", "resample", "stop"))

MODEL_INIT = Option("model_init", str, "the CNN's initialisation: torch (default, PyTorch's layer defaults) or keras (the reference "
                    "CNN's glorot-uniform kernels and zero biases)", ("torch", "keras"))

COMMON = (BUDGETS, BUDGET_SEED, NONPOSITIVE, BUDGET_PARAMETER, BUDGET_DELTA, LOCAL_STEPS, SPLIT, PUBLIC_CLIENTS, SPLIT_SCOPE, MODEL_INIT, LOCAL_STEP_RULE)
PRIVATE = (DP_CLIP, CALIBRATION, PLANNED, PRECHECK)
PROJECTING = (PROJECTION, PROJECTION_DIMS, PROJECTION_SCOPE, EIGENSOLVER, LANCZOS_ITER, NO_PUBLIC)

#: CLI option name → flat option name of PFASettings (privaudit.papers.pfa.settings.OPTION_GROUPS).
_FIELDS = {
    "budgets": "budgets",
    "budget_seed": "budget_seed",
    "nonpositive_budgets": "nonpositive",
    "budget_parameter": "second_parameter",
    "budget_delta": "delta",
    "dp_clip": "clip_norm",
    "noise_calibration": "calibration",
    "planned_steps": "planned",
    "local_steps": "local_steps",
    "precheck": "budget_policy",
    "split": "split",
    "public_clients": "public_clients",
    "split_scope": "split_scope",
    "projection": "projection",
    "projection_dims": "projection_dims",
    "projection_scope": "projection_scope",
    "eigensolver": "eigensolver",
    "lanczos_iter": "lanczos_iterations",
    "no_public": "no_public",
    "model_init": "model_init",
    "local_step_rule": "local_step_rule",
}


def _builder(name: str):
    def build(**options):
        # torch: the algorithm's module is imported when it is built, never at the CLI's start-up (this module lists the flags)
        from privaudit.papers.pfa.algorithm import build as build_family

        return build_family(name, **{_FIELDS[k]: v for k, v in options.items()})

    return build


_SUMMARIES = {
    "pfa": ("PFA: private updates projected on the top-k subspace of the public updates (Liu et al. 2022, Alg. 2/3)", PRIVATE + PROJECTING),
    "pfa-plus": ("PFA+: private clients upload k numbers per tensor against the previous round's subspace (Alg. 4/5)", PRIVATE + PROJECTING),
    "weiavg": ("WeiAvg: ε-weighted average of heterogeneously private updates (PFA Alg. 1)", PRIVATE),
    "fedavg-hdp": ("FedAvg of local DP-SGD updates with heterogeneous per-client budgets (PFA baseline)", PRIVATE),
    "public-only": ("FedAvg over the public clients of each sample only; private clients never train (audit baseline, audit point F4)", PRIVATE),
    "minimum": ("FedAvg with every client at min ε_m (PFA baseline 'Minimum')", PRIVATE),
    "maximum": ("FedAvg with every client at max ε_m (PFA baseline 'Maximum'; exceeds the private clients' budgets)", PRIVATE),
    "np-fedavg": ("non-private FedAvg with τ local SGD steps (PFA baseline 'NP-FedAvg')", ()),
}

def train_defaults(privacy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """004 §5.1 B = 8; the reference code's plain SGD (``DPGradientDescentGaussianOptimizer``), ``--lr 0.1`` and its
    MNIST logistic regression (``pfa-lr``).

    ``--local-epochs`` does not apply: the PFA family runs ``--local-steps`` τ (default 100).
    """
    return {"batch_size": 8, "momentum": 0.0, "lr": 0.1, "model": "pfa-lr"}


SPECS = tuple(AlgorithmSpec(name, summary, COMMON + extra, _builder(name), train_defaults=train_defaults)
              for name, (summary, extra) in _SUMMARIES.items())

#: The family's algorithm names.
NAMES = tuple(_SUMMARIES)
