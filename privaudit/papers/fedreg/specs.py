"""Specs of the FedReg paper's algorithms (Xu et al., ICLR 2022): ``fedreg``, ``fedreg-mg``, ``fedcurv``, ``sgd``.

Torch-free: each builder imports its algorithm module when called. Defaults: γ = 0.5, η_s = 0.1 (the paper's
CIFAR-10 values; MNIST uses γ 0.3–0.4, η_s 0.2), E = 10 FGSM steps, η_p = 0.01·η_s, FGSM clamped to the
data range (the reference code does not clamp: ``--fgsm-clamp none``), FedCurv λ = 1e-4 (MNIST/EMNIST).
FedAvg with local DP-SGD is ``--algorithm fedavg --privacy dp-sgd --noise σ --clip C`` (FedProx likewise, its proximal
term kept); the paper's "DPSGD" (full-batch DP-SGD) is ``--algorithm sgd --privacy dp-sgd --local-epochs 1``.
FedCurv runs under ``--privacy dp-sgd`` too ("FedCurv+DPSGD"), but its clients release their Fisher diagonals without
noise, so each such round is also recorded as a release with no DP guarantee (ε = ∞).
"""

from __future__ import annotations

from privaudit.fl.algorithms.spec_types import AlgorithmSpec
from privaudit.fl.engine.options import Option

FEDREG_GAMMA = Option("fedreg_gamma", float, "FedReg γ of θ_γ = γθ + (1−γ)θ^{(t−1)} (eq. 11; default 0.5)")
FEDREG_ETA_S = Option("fedreg_eta_s", float, "FedReg FGSM step η_s of the pseudo data (default 0.1)")
FEDREG_ETA_P = Option("fedreg_eta_p", float, "FedReg FGSM step η_p of the perturbed data (default 0.01·η_s)")
FGSM_STEPS = Option("fgsm_steps", int, "FedReg FGSM steps E (default 10)")
FGSM_CLAMP = Option("fgsm_clamp", str, "FedReg FGSM clamp: data-range (default) or none (the reference code, audit R6)", ("data-range", "none"))
FEDCURV_LAMBDA = Option("fedcurv_lambda", float, "FedCurv EWC weight λ (default 1e-4)")

FEDREG_OPTIONS = (FEDREG_GAMMA, FEDREG_ETA_S, FEDREG_ETA_P, FGSM_STEPS, FGSM_CLAMP)


def _fedreg_builder(modified_gradient: bool):
    def build(fedreg_gamma: float = 0.5, fedreg_eta_s: float = 0.1, fedreg_eta_p: float | None = None, fgsm_steps: int = 10,
              fgsm_clamp: str = "data-range"):
        # torch: the algorithm's module is imported when it is built, never at the CLI's start-up (this module lists the flags)
        from privaudit.papers.fedreg.algorithm import FedReg, FedRegConfig

        return FedReg(FedRegConfig(gamma=fedreg_gamma, eta_s=fedreg_eta_s, eta_p=fedreg_eta_p, fgsm_steps=fgsm_steps,
                                   modified_gradient=modified_gradient, fgsm_clamp=fgsm_clamp))

    return build


def _fedcurv(fedcurv_lambda: float = 1e-4):
    # torch: see build above
    from privaudit.fl.algorithms.fedcurv import FedCurv

    return FedCurv(lam=fedcurv_lambda)


def _sgd():
    # torch: see build above
    from privaudit.fl.algorithms.fedsgd import FedSGD

    return FedSGD()


SPECS = (
    AlgorithmSpec("fedreg", "FedReg: local steps regularised by FGSM pseudo/perturbed data, eq. 10–11 (Xu et al. 2022); no DP guarantee",
                  FEDREG_OPTIONS, _fedreg_builder(False)),
    AlgorithmSpec("fedreg-mg", "FedReg with modified gradients (eq. 12), the paper's privacy variant; no DP guarantee",
                  FEDREG_OPTIONS, _fedreg_builder(True)),
    AlgorithmSpec("fedcurv", "FedCurv: EWC penalty from the other clients' Fisher diagonals (Shoham et al. 2019)", (FEDCURV_LAMBDA,), _fedcurv),
    AlgorithmSpec("sgd", "SGD/FedSGD: one full-batch gradient step per client and round, then FedAvg (FedReg's SGD baseline)", (), _sgd),
)
