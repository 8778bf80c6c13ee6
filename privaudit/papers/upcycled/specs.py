"""What Upcycled-FL plugs into ``privaudit train``: the ``upcycled-X`` wrapper and the paper's two privatizers.

Every base algorithm X is also available as ``upcycled-X`` (:class:`~privaudit.papers.upcycled.algorithm.Upcycled`
around X, 000 §4 / 003 §5 Alg. 1), taking X's options plus ``--upcycle u`` or ``--lam λ``. ``--privacy
output-perturbation --clip 10 --noise 1.0 [--noise-std sigma|sigma-squared] [--noise-rng seeded|clock-ms]
[--sensitivity paper|clip-diameter]`` is Thm 6.2's mechanism (:class:`~privaudit.fl.privacy.perturbation.OutputPerturbation`,
its events citing the theorem) and ``--privacy objective-perturbation --alpha 10 [--objective-noise paper|reference]
[--noise-rng ...] [--objective-solver sgd|exact] [--grad-tol 1e-6]`` Thm 6.3's
(:class:`~privaudit.papers.upcycled.objective_perturbation.ObjectivePerturbation`). Defaults are the paper's; the
reference code's behaviour is the named alternative. Torch-free: the (torch) modules are imported when a mechanism or
an ``upcycled-X`` is built.
"""

from __future__ import annotations

from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.spec_types import WrapperSpec
from privaudit.fl.engine.options import Option
from privaudit.fl.privacy.registry import CLIP, NOISE, PrivacySpec

UPCYCLE = Option("upcycle", float, "Upcycled-FL coefficient u of ω̄^{2m} = ω̄^{2m−1} + u(ω̄^{2m−1} − ω̄^{2m−2}) (default 0.3)")
LAM = Option("lam", float, "Upcycled-FL λ_m: sets u = μ/(μ+λ) with the base algorithm's μ (FedProx)")


def _summary(base: str) -> str:
    return f"Upcycled-FL around {base}: odd rounds are {base}'s, even rounds server-only extrapolation"


def _wrap(algorithm: Any, upcycle: float | None = None, lam: float | None = None) -> Any:
    """Upcycled(algorithm) with u given directly (default 0.3, the reference code's ``--upcycled_param``) or from λ."""
    if upcycle is not None and lam is not None:
        raise InvalidParameterError("give either --upcycle u or --lam λ, not both")
    # torch: imported here, not at the top, to keep it out of the CLI's start-up (this module lists the flags)
    from privaudit.papers.upcycled.algorithm import Upcycled

    return Upcycled(algorithm, u=0.3 if upcycle is None else upcycle, lam=lam)


#: Upcycled-X's even rounds send the clients nothing: Flower hosts it whenever it hosts X.
WRAPPER = WrapperSpec("upcycled", _summary, (UPCYCLE, LAM), _wrap, hostable=True)


NOISE_STD = Option("noise_std", str, "output perturbation: noise std convention (paper: sigma; reference code: sigma-squared)", ("sigma", "sigma-squared"))
NOISE_RNG = Option("noise_rng", str, "noise generator: seeded (default) or clock-ms (the reference code's clock seed, ≤ 1000 draws)", ("seeded", "clock-ms"))
SENSITIVITY = Option("sensitivity", str, "output perturbation: recorded sensitivity, paper (τ/|D_i|) or clip-diameter (2τ)", ("paper", "clip-diameter"))
ALPHA = Option("alpha", float, "objective perturbation: α of the noise density ∝ exp(−α‖n‖)")
OBJECTIVE_NOISE = Option("objective_noise", str, "objective perturbation: noise law, paper or reference", ("paper", "reference"))
OBJECTIVE_SOLVER = Option("objective_solver", str, "objective perturbation: local solver, sgd or exact (L-BFGS, Thm 6.3's setting)", ("sgd", "exact"))
GRAD_TOL = Option("grad_tol", float, "objective perturbation with the exact solver: gradient-norm tolerance (default 1e-6)")

#: The result the output-perturbation events cite for the sensitivity τ/|D_i| (003 Thm 6.2's proof, App. E).
SENSITIVITY_SOURCE = "Upcycled-FL Thm 6.2 (000 Thm 5.2)"


def _output_perturbation(algorithm, clip=None, noise=None, noise_std="sigma", noise_rng="seeded", sensitivity="paper"):
    if clip is None or noise is None:
        raise InvalidParameterError("output perturbation needs --clip τ and --noise σ")
    # torch: the privatizer is imported when it is built, never at the CLI's start-up
    from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig

    config = OutputPerturbationConfig(clip=clip, sigma=noise, noise_std=noise_std, rng=noise_rng, sensitivity=sensitivity)
    return OutputPerturbation(algorithm, config, sensitivity_source=SENSITIVITY_SOURCE)


def _objective_perturbation(algorithm, alpha=None, objective_noise="paper", noise_rng="seeded", objective_solver="sgd", grad_tol=1e-6):
    if alpha is None:
        raise InvalidParameterError("objective perturbation needs --alpha α")
    # torch: see _output_perturbation
    from privaudit.papers.upcycled.objective_perturbation import (
        ObjectivePerturbation,
        ObjectivePerturbationConfig,
    )

    config = ObjectivePerturbationConfig(alpha=alpha, noise_law=objective_noise, rng=noise_rng, solver=objective_solver, grad_tol=grad_tol)
    return ObjectivePerturbation(algorithm, config)


OUTPUT_PERTURBATION = PrivacySpec("output-perturbation", "clip the local model to τ and add Gaussian noise (Upcycled-FL Thm 6.2)",
                                  (CLIP, NOISE, NOISE_STD, NOISE_RNG, SENSITIVITY), _output_perturbation)
OBJECTIVE_PERTURBATION = PrivacySpec(
    "objective-perturbation", "add ⟨n, ω⟩ with density ∝ exp(−α‖n‖) to the local objective (Upcycled-FL Thm 6.3)",
    (ALPHA, OBJECTIVE_NOISE, NOISE_RNG, OBJECTIVE_SOLVER, GRAD_TOL), _objective_perturbation)
