"""Privacy mechanism name → how to wrap an algorithm with it, from named options (torch-free).

One vocabulary for ``--privacy`` on every algorithm that it makes sense for. The core's mechanisms
(:data:`CORE_PRIVACY_SPECS`):

* ``dp-sgd`` ``--clip C --noise σ`` — record-level DP-SGD in every client
  (:class:`privaudit.fl.privacy.local_dp.LocalDP`);
* ``cdp`` ``--clip C --noise σ [--central-variant dp-fedavg|paper|reference]`` — client-level central DP at a
  trusted server (:class:`privaudit.fl.privacy.central_dp.CentralDP`): DP-FedAvg by default; the median variants
  (001 Alg. 1 as printed, ``paper``, or as its code runs it, ``reference``) are faithfulness switches that the paper's
  package provides (:func:`privaudit.fl.privacy.central_dp.central_dp`);
* ``ddp`` ``--clip C --noise z [--modulus-bits b]`` — distributed DP, Skellam noise under simulated secure
  aggregation (:class:`privaudit.fl.privacy.distributed_dp.DistributedDP`);
* ``none`` — no privatizer: each release recorded as non-private.

Each registered paper adds the mechanisms it defines or names (:attr:`privaudit.plugins.Paper.privacy`, a
:class:`PrivacySpec` each: e.g. output and objective perturbation, an alias of DP-SGD under the paper's own name).
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
from functools import cache
from typing import Any

from privaudit import plugins
from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.capabilities import LocalStepForm, ServerStepForm
from privaudit.fl.engine.options import Option, reject_unused, take_options

CLIP = Option("clip", float, "clipping norm: τ of the released local model (output perturbation), per-example C (dp-sgd), "
                             "per-client-update C (cdp, ddp)")
NOISE = Option("noise", float, "noise parameter σ: output perturbation std σ (σ² with --noise-std sigma-squared); noise multiplier "
                               "of dp-sgd, cdp (std σC on the sum of clipped updates) and ddp (target z)")
CENTRAL_VARIANT = Option("central_variant", str, "cdp: dp-fedavg (fixed clip C, default), paper (001 Alg. 1 as printed: "
                                                 "median-norm noise) or reference (001's code: per-tensor median clips)",
                         ("dp-fedavg", "paper", "reference"))
MODULUS_BITS = Option("modulus_bits", int, "ddp: bit width b of the secure-aggregation modulus 2^b (default 16)")


@dataclass(frozen=True)
class PrivacySpec:
    """A ``--privacy`` mechanism: its name, a one-line summary, its options and ``build(algorithm, **options)``."""

    name: str
    summary: str
    options: tuple[Option, ...]
    build: Callable[..., Any]  # build(algorithm, **options) -> wrapped algorithm


def dp_sgd(algorithm, clip=None, noise=None):
    """Record-level DP-SGD in every client (Abadi et al. 2016), refused for a local step without a DP-SGD form."""
    if clip is None or noise is None:
        raise InvalidParameterError("dp-sgd needs --clip C and --noise σ")
    step = LocalStepForm.of(algorithm)
    if not step.dp_sgd_compatible:
        raise InvalidParameterError(
            f"--privacy dp-sgd (ldp) replaces the local solver, and {algorithm.name}'s local step has no DP-SGD form (use fedavg or fedprox)"
        )
    # torch: the privatizer modules are imported when a mechanism is built, never at the CLI's start-up
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
    # torch: see dp_sgd
    from privaudit.fl.privacy.central_dp import CentralDPConfig, central_dp

    config = CentralDPConfig(variant=central_variant, noise_multiplier=noise, clip_norm=1.0 if clip is None else clip,
                             assumptions=("noise multiplier given directly (--noise); the client sampling is the federation's",))
    return central_dp(algorithm, config)


def _distributed_dp(algorithm, clip=None, noise=None, modulus_bits=16):
    _require_server_dp(algorithm, "ddp")
    if clip is None or noise is None:
        raise InvalidParameterError("ddp needs --clip C (the clip norm of each client's update) and --noise z")
    # torch: see dp_sgd
    from privaudit.fl.privacy.distributed_dp import DistributedDP, DistributedDPConfig

    config = DistributedDPConfig(noise_multiplier=noise, clip_norm=clip, bits=modulus_bits,
                                 assumptions=("noise multiplier z given directly (--noise); K is the federation's max(⌊qN⌋, 1)",))
    return DistributedDP(algorithm, config)


def _no_privacy(algorithm):
    # torch: see dp_sgd
    from privaudit.fl.privacy.perturbation import NoPrivacy

    return NoPrivacy(algorithm)


#: The core's mechanisms; the papers' are added by :func:`privacy_specs`.
CORE_PRIVACY_SPECS: tuple[PrivacySpec, ...] = (
    PrivacySpec("none", "no privatizer: clients release their local models as trained (ledger: no DP guarantee, ε = ∞)",
                (), _no_privacy),
    PrivacySpec(
        "dp-sgd",
        "local DP-SGD in every client (Abadi et al. 2016; Poisson rate batch/|D_i|, clip C, noise σ), ε from the ledger",
        (CLIP, NOISE),
        dp_sgd,
    ),
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
        "(Agarwal, Kairouz & Liu 2021; 001 Alg. 3); one Skellam server event per round",
        (CLIP, NOISE, MODULUS_BITS),
        _distributed_dp,
    ),
)


@cache
def privacy_specs() -> dict[str, PrivacySpec]:
    """Every ``--privacy`` mechanism by name: the core's, then each registered paper's (paper-key order)."""
    specs = {spec.name: spec for spec in CORE_PRIVACY_SPECS}
    for name, (paper, ref) in plugins.collected("privacy").items():
        spec = ref.load()
        if name in specs or not isinstance(spec, PrivacySpec) or spec.name != name:
            raise InvalidParameterError(f"paper {paper.key!r} registers privacy mechanism {name!r} ({ref.target}): the name "
                                        "is taken or the value is not a PrivacySpec of that name")
        specs[name] = spec
    return specs


def privacy_option_owners() -> dict[str, list[str]]:
    owners: dict[str, list[str]] = {}
    for name, spec in privacy_specs().items():
        for option in spec.options:
            owners.setdefault(option.name, []).append(name)
    return owners


def all_privacy_options() -> list[Option]:
    seen: dict[str, Option] = {}
    for spec in privacy_specs().values():
        for option in spec.options:
            seen.setdefault(option.name, option)
    return list(seen.values())


def privatize(algorithm, name: str | None, options: Mapping[str, Any] | None = None, **kwargs: Any):
    """Wrap ``algorithm`` with privacy mechanism ``name`` (``None``/``"none"``: unchanged)."""
    given = {**(options or {}), **kwargs}
    key = "none" if name is None else str(name).strip().lower()
    specs = privacy_specs()
    spec = specs.get(key)
    if spec is None:
        raise InvalidParameterError(f"unknown privacy mechanism {name!r}; known: {', '.join(specs)}")
    reject_unused(given, [o.name for o in spec.options], f"privacy mechanism {key}", privacy_option_owners())
    return spec.build(algorithm, **take_options(given, spec.options))
