"""Privacy mechanism name → how to wrap an algorithm with it, from named options (torch-free).

One vocabulary for ``--privacy`` on every algorithm that it makes sense for:

* ``dp-sgd`` (alias ``ldp``, PrivateFL's name for it) ``--clip C --noise σ`` — record-level DP-SGD in every client
  (:class:`privaudit.fl.privacy.local_dp.LocalDP`);
* ``cdp`` ``--clip C --noise σ [--central-variant dp-fedavg|paper|reference]`` — client-level central DP at a
  trusted server (:class:`privaudit.fl.privacy.central_dp.CentralDP`): DP-FedAvg by default, PrivateFL's Alg. 1
  as printed (``paper``) or as its code runs it (``reference``) as faithfulness switches;
* ``ddp`` ``--clip C --noise z [--modulus-bits b]`` — distributed DP, Skellam noise under simulated secure
  aggregation (:class:`privaudit.fl.privacy.distributed_dp.DistributedDP`);
* ``output-perturbation --clip 10 --noise 1.0 [--noise-std sigma|sigma-squared] [--noise-rng seeded|clock-ms]
  [--sensitivity paper|clip-diameter]`` and ``objective-perturbation --alpha 10 [--objective-noise
  paper|reference] [--noise-rng ...] [--objective-solver sgd|exact] [--grad-tol 1e-6]`` (Upcycled-FL Thm 6.2/6.3).

Defaults are the paper's behaviour; the reference code's is the named alternative (architecture "faithfulness
switches"). A combination that makes no sense is refused here, before any data is loaded, from the capabilities the
algorithm declares (:mod:`privaudit.fl.engine.capabilities`): :class:`~privaudit.fl.engine.capabilities.LocalStepForm`
(its local step has a DP-SGD form, or takes full batches) and :class:`~privaudit.fl.engine.capabilities.ServerStepForm`
(its server step is post-processing of the clients' mean update, so ``cdp``/``ddp`` may privatise that update; an
algorithm that declares nothing is refused).

The privatizer modules import torch; this one does not (the CLI builds its flags from it at start-up), so each
builder imports its privatizer's module when it is called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.capabilities import LocalStepForm, ServerStepForm
from privaudit.fl.engine.options import Option, reject_unused, take_options

CLIP = Option("clip", float, "clipping norm: τ of the released local model (output perturbation), per-example C (dp-sgd), "
                             "per-client-update C (cdp, ddp)")
NOISE = Option("noise", float, "noise parameter σ: output perturbation std σ (σ² with --noise-std sigma-squared); noise multiplier "
                               "of dp-sgd, cdp (std σC on the sum of clipped updates) and ddp (target z)")
CENTRAL_VARIANT = Option("central_variant", str, "cdp: dp-fedavg (fixed clip C, default), paper (PrivateFL Alg. 1 as printed: "
                                                 "median-norm noise) or reference (PrivateFL code: per-tensor median clips)",
                         ("dp-fedavg", "paper", "reference"))
MODULUS_BITS = Option("modulus_bits", int, "ddp: bit width b of the secure-aggregation modulus 2^b (default 16)")
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
    step = LocalStepForm.of(algorithm)
    if not step.dp_sgd_compatible:
        raise InvalidParameterError(
            f"--privacy dp-sgd (ldp) replaces the local solver, and {algorithm.name}'s local step has no DP-SGD form (use fedavg or fedprox)"
        )
    from privaudit.fl.privacy.local_dp import LocalDP, LocalDPConfig

    # FedSGD's clients take full-batch steps, so its DP-SGD samples every record (q = 1), one noisy step per epoch
    sample_rate = 1.0 if step.full_batch_dp_sgd else None
    return LocalDP(algorithm, LocalDPConfig(noise_multiplier=noise, clip_norm=clip, sample_rate=sample_rate))


def _require_server_dp(algorithm, key: str) -> None:
    """Refuse a server-side privatizer unless ``algorithm`` declares its server step post-processing of the mean update."""
    step = ServerStepForm.of(algorithm)
    if step.server_dp_compatible:
        return
    reason = step.server_dp_reason or (
        f"{algorithm.name} does not declare its server step post-processing of the clients' mean update (server_dp_compatible)")
    raise InvalidParameterError(f"--privacy {key} privatises the clients' mean update at the server, but {reason}")


def _central_dp(algorithm, clip=None, noise=None, central_variant="dp-fedavg"):
    _require_server_dp(algorithm, "cdp")
    if noise is None:
        raise InvalidParameterError("cdp needs --noise σ (the noise multiplier)")
    if central_variant == "dp-fedavg" and clip is None:
        raise InvalidParameterError("cdp needs --clip C (the clip norm of each client's update) and --noise σ")
    if central_variant != "dp-fedavg" and clip is not None:
        raise InvalidParameterError(f"--clip does not apply to cdp with --central-variant {central_variant}: its clip norms are "
                                    "medians of the clients' update norms")
    from privaudit.fl.privacy.central_dp import CentralDP, CentralDPConfig

    config = CentralDPConfig(variant=central_variant, noise_multiplier=noise, clip_norm=1.0 if clip is None else clip,
                             assumptions=("noise multiplier given directly (--noise); the client sampling is the federation's",))
    return CentralDP(algorithm, config)


def _distributed_dp(algorithm, clip=None, noise=None, modulus_bits=16):
    _require_server_dp(algorithm, "ddp")
    if clip is None or noise is None:
        raise InvalidParameterError("ddp needs --clip C (the clip norm of each client's update) and --noise z")
    from privaudit.fl.privacy.distributed_dp import DistributedDP, DistributedDPConfig

    config = DistributedDPConfig(noise_multiplier=noise, clip_norm=clip, bits=modulus_bits,
                                 assumptions=("noise multiplier z given directly (--noise); K is the federation's max(⌊qN⌋, 1)",))
    return DistributedDP(algorithm, config)


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
        PrivacySpec("ldp", "alias of dp-sgd: record-level DP-SGD in every client, PrivateFL's \"LDP\" (001 §3.3)", (CLIP, NOISE), _dp_sgd),
        PrivacySpec(
            "cdp",
            "client-level central DP at a trusted server: clip each update to C, Gaussian noise σC on the sum, fixed "
            "denominator (DP-FedAvg, McMahan et al. 2018); one SubsampledGaussian(σ, q) server event per round",
            (CLIP, NOISE, CENTRAL_VARIANT),
            _central_dp,
        ),
        PrivacySpec(
            "ddp",
            "distributed DP: clipped updates with Skellam noise shares under simulated secure aggregation "
            "(Agarwal, Kairouz & Liu 2021; PrivateFL Alg. 3); one Skellam server event per round",
            (CLIP, NOISE, MODULUS_BITS),
            _distributed_dp,
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
