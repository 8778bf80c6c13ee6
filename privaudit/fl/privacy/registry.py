"""Privacy mechanism name → how to wrap an algorithm with it, from named options (torch-free).

``--privacy dp-sgd --clip 1 --noise 0.5`` (local DP-SGD, :class:`privaudit.fl.privacy.local_dp.LocalDP`),
``--privacy output-perturbation --clip 10 --noise 1.0 [--noise-std sigma|sigma-squared] [--noise-rng
seeded|clock-ms] [--sensitivity paper|clip-diameter]`` and ``--privacy objective-perturbation --alpha 10
[--objective-noise paper|reference] [--noise-rng ...] [--objective-solver sgd|exact] [--grad-tol 1e-6]``.
Defaults are the paper's behaviour; the reference code's is the named alternative (architecture
"faithfulness switches").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.options import Option, reject_unused, take_options

CLIP = Option("clip", float, "clipping norm: τ of the released local model (output perturbation), per-example C (dp-sgd)")
NOISE = Option("noise", float, "noise parameter σ: output perturbation std σ (σ² with --noise-std sigma-squared); dp-sgd noise multiplier")
NOISE_STD = Option("noise_std", str, "output perturbation: noise std convention (paper: sigma; reference code: sigma-squared)", ("sigma", "sigma-squared"))
NOISE_RNG = Option("noise_rng", str, "noise generator: seeded (default) or clock-ms (the reference code's clock seed, ≤ 1000 draws)", ("seeded", "clock-ms"))
SENSITIVITY = Option("sensitivity", str, "output perturbation: recorded sensitivity, paper (τ/|D_i|) or clip-diameter (2τ)", ("paper", "clip-diameter"))
ALPHA = Option("alpha", float, "objective perturbation: α of the noise density ∝ exp(−α‖n‖)")
OBJECTIVE_NOISE = Option("objective_noise", str, "objective perturbation: noise law, paper or reference", ("paper", "reference"))
OBJECTIVE_SOLVER = Option("objective_solver", str, "objective perturbation: local solver, sgd or exact (L-BFGS, Thm 6.3's setting)", ("sgd", "exact"))
GRAD_TOL = Option("grad_tol", float, "objective perturbation with the exact solver: gradient-norm tolerance (default 1e-6)")


@dataclass(frozen=True)
class PrivacySpec:
    name: str
    summary: str
    options: tuple[Option, ...]
    build: Callable[..., Any]  # build(algorithm, **options) -> wrapped algorithm


def _output_perturbation(algorithm, clip=None, noise=None, noise_std="sigma", noise_rng="seeded", sensitivity="paper"):
    if clip is None or noise is None:
        raise InvalidParameterError("output perturbation needs --clip τ and --noise σ")
    from privaudit.fl.privacy.perturbation import OutputPerturbation, OutputPerturbationConfig

    config = OutputPerturbationConfig(clip=clip, sigma=noise, noise_std=noise_std, rng=noise_rng, sensitivity=sensitivity)
    return OutputPerturbation(algorithm, config)


def _objective_perturbation(algorithm, alpha=None, objective_noise="paper", noise_rng="seeded", objective_solver="sgd", grad_tol=1e-6):
    if alpha is None:
        raise InvalidParameterError("objective perturbation needs --alpha α")
    from privaudit.fl.privacy.perturbation import ObjectivePerturbation, ObjectivePerturbationConfig

    config = ObjectivePerturbationConfig(alpha=alpha, noise_law=objective_noise, rng=noise_rng, solver=objective_solver, grad_tol=grad_tol)
    return ObjectivePerturbation(algorithm, config)


def _dp_sgd(algorithm, clip=None, noise=None):
    if clip is None or noise is None:
        raise InvalidParameterError("dp-sgd needs --clip C and --noise σ")
    if not getattr(algorithm, "dp_sgd_compatible", True):
        raise InvalidParameterError(
            f"--privacy dp-sgd replaces the local solver, and {algorithm.name}'s local step has no DP-SGD form (use fedavg or fedprox)"
        )
    from privaudit.fl.privacy.local_dp import LocalDP, LocalDPConfig

    # FedSGD's clients take full-batch steps, so its DP-SGD samples every record (q = 1), one noisy step per epoch
    sample_rate = 1.0 if getattr(algorithm, "full_batch_dp_sgd", False) else None
    return LocalDP(algorithm, LocalDPConfig(noise_multiplier=noise, clip_norm=clip, sample_rate=sample_rate))


def _no_privacy(algorithm):
    from privaudit.fl.privacy.perturbation import NoPrivacy

    return NoPrivacy(algorithm)


PRIVACY_SPECS: dict[str, PrivacySpec] = {
    spec.name: spec
    for spec in (
        PrivacySpec("none", "no privatizer: clients release their local models as trained (ledger: no DP guarantee, ε = ∞)",
                    (), _no_privacy),
        PrivacySpec(
            "output-perturbation",
            "clip the local model to τ and add Gaussian noise (Upcycled-FL Thm 6.2)",
            (CLIP, NOISE, NOISE_STD, NOISE_RNG, SENSITIVITY),
            _output_perturbation,
        ),
        PrivacySpec(
            "objective-perturbation",
            "add ⟨n, ω⟩ with density ∝ exp(−α‖n‖) to the local objective (Upcycled-FL Thm 6.3)",
            (ALPHA, OBJECTIVE_NOISE, NOISE_RNG, OBJECTIVE_SOLVER, GRAD_TOL),
            _objective_perturbation,
        ),
        PrivacySpec(
            "dp-sgd",
            "local DP-SGD in every client (Abadi et al. 2016; Poisson rate batch/|D_i|, clip C, noise σ), ε from the ledger",
            (CLIP, NOISE),
            _dp_sgd,
        ),
    )
}


def privacy_option_owners() -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for name, spec in PRIVACY_SPECS.items():
        for option in spec.options:
            owners.setdefault(option.name, []).append(name)
    return owners


def all_privacy_options() -> list[Option]:
    seen: dict[str, Option] = {}
    for spec in PRIVACY_SPECS.values():
        for option in spec.options:
            seen.setdefault(option.name, option)
    return list(seen.values())


def privatize(algorithm, name: str | None, options: Mapping[str, Any] | None = None, **kwargs: Any):
    """Wrap ``algorithm`` with privacy mechanism ``name`` (``None``/``"none"``: unchanged)."""
    given = {**(options or {}), **kwargs}
    key = "none" if name is None else str(name).strip().lower()
    spec = PRIVACY_SPECS.get(key)
    if spec is None:
        raise InvalidParameterError(f"unknown privacy mechanism {name!r}; known: {', '.join(PRIVACY_SPECS)}")
    reject_unused(given, [o.name for o in spec.options], f"privacy mechanism {key}", privacy_option_owners())
    return spec.build(algorithm, **take_options(given, spec.options))
