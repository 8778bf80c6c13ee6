"""Specs of the seven base algorithms of Upcycled-FL's Table 1 (003 §7.2), with their options and defaults.

Torch-free: each builder imports its (torch) algorithm module when called, so listing algorithms and building the
CLI's flags never imports torch. Defaults follow the Upcycled-FL reference
code (osu-srml/Upcycled-FL@4dd7400:train.py) unless an option says otherwise.
"""

from __future__ import annotations

from privaudit.fl.algorithms.spec_types import AlgorithmSpec
from privaudit.fl.engine.options import Option

MU = Option("mu", float, "FedProx proximal coefficient μ (default 0.01)")
SERVER_LR = Option("server_lr", float, "server learning rate (FedAvgM 1.0, SCAFFOLD 1.0, FedYogi 0.1)")
SERVER_MOMENTUM = Option("server_momentum", float, "FedAvgM server momentum β (default 0.3)")
FEDDYN_ALPHA = Option("feddyn_alpha", float, "FedDyn regularisation α (default 0.01)")
PFEDME_LAMBDA = Option("pfedme_lambda", float, "pFedMe Moreau-envelope λ (default 15)")
PFEDME_K = Option("pfedme_k", int, "pFedMe inner steps K per mini-batch (default 5)")
PERSONAL_LR = Option("personal_lr", float, "pFedMe personalised learning rate (default 0.1)")
PFEDME_BETA = Option("pfedme_beta", float, "pFedMe server mixing β (default 1)")
YOGI_BETA1 = Option("yogi_beta1", float, "FedYogi β₁ (default 0.9)")
YOGI_BETA2 = Option("yogi_beta2", float, "FedYogi β₂ (default 0.99)")
YOGI_TAU = Option("yogi_tau", float, "FedYogi adaptivity τ (default 1e-3)")


def _fedavg():
    from privaudit.fl.algorithms.fedavg import FedAvg

    return FedAvg()


def _fedprox(mu: float = 0.01):
    from privaudit.fl.algorithms.fedprox import FedProx

    return FedProx(mu=mu)


def _fedavgm(server_momentum: float = 0.3, server_lr: float = 1.0):
    from privaudit.fl.algorithms.fedavgm import FedAvgM

    return FedAvgM(server_momentum=server_momentum, server_lr=server_lr)


def _scaffold(server_lr: float = 1.0):
    from privaudit.fl.algorithms.scaffold import Scaffold

    return Scaffold(server_lr=server_lr)


def _feddyn(feddyn_alpha: float = 0.01):
    from privaudit.fl.algorithms.feddyn import FedDyn

    return FedDyn(alpha=feddyn_alpha)


def _pfedme(pfedme_lambda: float = 15.0, pfedme_k: int = 5, personal_lr: float = 0.1, pfedme_beta: float = 1.0):
    from privaudit.fl.algorithms.pfedme import PFedMe

    return PFedMe(lam=pfedme_lambda, inner_steps=pfedme_k, personal_lr=personal_lr, beta=pfedme_beta)


def _fedyogi(server_lr: float = 0.1, yogi_beta1: float = 0.9, yogi_beta2: float = 0.99, yogi_tau: float = 1e-3):
    from privaudit.fl.algorithms.fedyogi import FedYogi

    return FedYogi(server_lr=server_lr, beta1=yogi_beta1, beta2=yogi_beta2, tau=yogi_tau)


SPECS = (
    AlgorithmSpec("fedavg", "FedAvg: example-weighted average of local SGD models (McMahan et al. 2017)", (), _fedavg),
    AlgorithmSpec("fedprox", "FedProx: local objective + (μ/2)‖ω − ω̄‖² (Li et al. 2020)", (MU,), _fedprox),
    AlgorithmSpec("fedavgm", "FedAvgM: server momentum on the averaged update (Hsu et al. 2019)", (SERVER_MOMENTUM, SERVER_LR), _fedavgm),
    AlgorithmSpec("scaffold", "SCAFFOLD: control-variate corrected local steps (Karimireddy et al. 2020)", (SERVER_LR,), _scaffold),
    AlgorithmSpec("feddyn", "FedDyn: dynamic linear + proximal regularisation (Acar et al. 2021)", (FEDDYN_ALPHA,), _feddyn),
    AlgorithmSpec(
        "pfedme",
        "pFedMe: personalised models via Moreau envelopes (T Dinh et al. 2020)",
        (PFEDME_LAMBDA, PFEDME_K, PERSONAL_LR, PFEDME_BETA),
        _pfedme,
    ),
    AlgorithmSpec(
        "fedyogi", "FedYogi: adaptive server optimiser (Reddi et al. 2021)", (SERVER_LR, YOGI_BETA1, YOGI_BETA2, YOGI_TAU), _fedyogi
    ),
)
