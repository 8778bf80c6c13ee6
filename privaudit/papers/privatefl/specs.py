"""Spec of ``privatefl`` (001): the personalised transformation with no DP, LDP, CDP or DDP, and its options.

``privaudit train --algorithm privatefl --privacy ldp|cdp|ddp ...`` builds
:class:`privaudit.papers.privatefl.calibrated.CalibratedPrivateFL`: the privacy mode is PrivateFL's own (the spec's
``privacy_modes``; it calibrates its noise from the run's rounds, client sampling and data when the run starts),
not one of the generic privatizers. Defaults are the paper's (001 Table 3, MNIST): one local epoch, batch 64, no momentum,
learning rate 1e-1 (LDP, DDP, none) or 5e-3 (CDP), (ε, δ) given by ``--epsilon``/``--delta``; the
reference code's behaviour is a named value (``--cdp-variant reference``, ``--participation expected``, ``--ldp-rate loader``,
``--personal-layers reference``). ``--privacy cdp`` alone runs the paper's Alg. 1; the evidence page's CDP rows are the
reference variant's.

``LDP`` registers PrivateFL's name for DP-SGD as ``--privacy ldp`` on any algorithm. Torch-free: the builder imports
the training modules when called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from privaudit.accounting.mechanisms import Sampling
from privaudit.fl.algorithms.spec_types import AlgorithmSpec
from privaudit.fl.engine.options import Option
from privaudit.fl.privacy.registry import CLIP, NOISE, PrivacySpec, dp_sgd

EPSILON = Option("epsilon", float, "PrivateFL: the claimed ε the noise is calibrated for (--privacy ldp|cdp|ddp)")
DELTA = Option("delta", float, "PrivateFL: δ of the claimed guarantee (default 1e-3, the reference code's fixed value)")
PARTICIPATION = Option("participation", str, "PrivateFL-LDP: steps σ_i is calibrated for: every-round (default, conservative) or expected (E·R·sr epochs, the reference code)", ("every-round", "expected"))
BUDGET_POLICY = Option("budget_policy", str, "PrivateFL-LDP: a client whose next round would exceed ε is excluded (default), the run stops, or the overrun is recorded", ("exclude", "stop", "record"))
CDP_VARIANT = Option("cdp_variant", str, "PrivateFL-CDP: paper (Alg. 1, the default of --privacy cdp), reference (the reference code's "
                     "per-tensor median clipping, which the evidence page reports; default lr 0.1, its driver's) or dp-fedavg "
                     "(fixed clip, Poisson clients)", ("paper", "reference", "dp-fedavg"))
BITS = Option("bits", int, "PrivateFL-DDP: bit width b of the secure-aggregation modulus 2^b (default 16)")
CLIP_NORM = Option("clip_norm", float, "PrivateFL: clip norm C (LDP per-example, default 2.0; dp-fedavg and DDP per-update, default 1.0)")
NOISE_MULTIPLIER = Option("noise_multiplier", float, "PrivateFL: use this noise multiplier instead of calibrating one for --epsilon")
TRANSFORM = Option("transform", str, "PrivateFL: transformation (001 Table 1): linear (default), sigmoid, tanh, relu, square, conv2d, none (FedAvg baseline)", ("linear", "sigmoid", "tanh", "relu", "square", "conv2d", "none"))
TRANSFORM_ALPHA = Option("transform_alpha", str, "PrivateFL: free dimensions of α (001 Table 2): channel (default), pixel, fixed", ("channel", "pixel", "fixed"))
TRANSFORM_BETA = Option("transform_beta", str, "PrivateFL: free dimensions of β (001 Table 2): pixel (default), channel, zero", ("pixel", "channel", "zero"))
TRANSFORM_LR = Option("transform_lr", float, "PrivateFL: learning rate of the transformation (the reference code's --flr; default: --lr)")
CLIP_QUANTILE = Option("clip_quantile", float, "PrivateFL-CDP dp-fedavg: private adaptive clipping to this quantile of the update norms (Andrew et al. 2021)")
DP_ACCOUNTANT = Option("dp_accountant", str, "PrivateFL: accountant for calibration and budget pre-checks (default rdp, as opacus)", ("rdp", "prv", "pld"))
LDP_SAMPLE_RATE = Option("ldp_sample_rate", float, "PrivateFL-LDP: Poisson rate q of DP-SGD (default batch size / |D_i|)")
SIGNAL_BOUND = Option("signal_bound", float, "PrivateFL-DDP: signal bound m (standard deviations the modular range holds; default from the dimension)")
LDP_RATE = Option("ldp_rate", str, "PrivateFL-LDP: Poisson rate q_i of DP-SGD from the client's size: batch (default, B/|D_i|) or loader "
                  "(1/⌈|D_i|/B⌉ = 1/len(DataLoader), what the reference code's opacus uses)", ("batch", "loader"))
PERSONAL_LAYERS = Option("personal_layers", str, "PrivateFL: parameters each client keeps: transform (default) or reference (also every "
                         "'norm' / 'bn' / 'downsample.1' parameter, as the reference code's *_IN models)", ("transform", "reference"))
CLIP_CAP = Option("clip_cap", float, "PrivateFL-CDP reference: cap of the per-tensor median clip norms (default 10, the reference code's)")
CLIP_LR = Option("clip_lr", float, "PrivateFL-CDP dp-fedavg adaptive clipping: step η_C of the clip-norm update (default 0.2)")
BIT_NOISE = Option("bit_noise", float, "PrivateFL-CDP dp-fedavg adaptive clipping: noise σ_b of the clipped-count query (default from σ)")

OPTIONS = (EPSILON, DELTA, PARTICIPATION, BUDGET_POLICY, CDP_VARIANT, BITS, CLIP_NORM, NOISE_MULTIPLIER, TRANSFORM, TRANSFORM_ALPHA,
           TRANSFORM_BETA, TRANSFORM_LR, CLIP_QUANTILE, CLIP_LR, BIT_NOISE, DP_ACCOUNTANT, LDP_SAMPLE_RATE, SIGNAL_BOUND, CLIP_CAP, LDP_RATE, PERSONAL_LAYERS)

#: ``--privacy`` modes PrivateFL runs itself (calibrated for the claimed ε from the run).
PRIVACY_MODES = ("none", "ldp", "cdp", "ddp")


def _privatefl(privacy: str = "none", **options: Any):
    """PrivateFL under its privacy mode ``privacy`` with ``options`` (flag names), calibrated when the run starts."""
    # torch: the algorithm's module is imported when it is built, never at the CLI's start-up (this module lists the flags)
    from privaudit.papers.privatefl.calibrated import CalibratedPrivateFL

    return CalibratedPrivateFL.from_options(privacy, options)


def train_defaults(privacy: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """001 Table 3 (MNIST): one local epoch, batch 64, no momentum, lr 1e-1 (LDP, DDP, none) / 5e-3 (CDP); the paper's
    data (20 clients × 2 classes with shares p ~ U(0.4, 0.6)) and model (``privatefl-dnn`` under the transformation),
    trained client by client; DP-FedAvg's accounting needs Poisson client sampling.

    ``--privacy cdp`` runs the paper's Alg. 1 (``--cdp-variant paper``) unless a variant is named. With
    ``--cdp-variant reference`` the default lr is 0.1: the reference driver (BHui97/PrivateFL@0ff71d6:FedAverage.py) passes
    its ``LEARNING_RATE_DIS = 1e-1`` as ``disc_lr`` to every user, overriding ``CDPUser``'s own default 5e-3."""
    variant = str(options.get("cdp_variant", "paper")).strip().lower()
    dp_fedavg = privacy == "cdp" and variant == "dp-fedavg"
    cdp_lr = 0.1 if variant == "reference" else 5e-3
    return {"local_epochs": 1, "batch_size": 64, "momentum": 0.0, "lr": cdp_lr if privacy == "cdp" else 0.1,
            "model": "privatefl-dnn", "num_clients": 20, "partition": "classes:2:paper", "execution": "sequential",
            "sampling": (Sampling.POISSON if dp_fedavg else Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT).value}


SPECS = (
    AlgorithmSpec(
        "privatefl",
        "PrivateFL: personalised α⊙x+β kept on each client, under --privacy none|ldp|cdp|ddp (Yang et al. 2023)",
        OPTIONS,
        _privatefl,
        train_defaults=train_defaults,
        privacy_modes=PRIVACY_MODES,
    ),
)


#: ``--privacy ldp`` on any algorithm: DP-SGD under PrivateFL's name for it (001 §3.3, "LDP").
LDP = PrivacySpec("ldp", "alias of dp-sgd: record-level DP-SGD in every client, PrivateFL's \"LDP\" (001 §3.3)", (CLIP, NOISE), dp_sgd)
