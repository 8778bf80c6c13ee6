"""Spec of ``privatefl`` (001): the personalised transformation with no DP, LDP, CDP or DDP, and its options.

``privaudit train --algorithm privatefl --privacy ldp|cdp|ddp ...`` runs
:func:`privaudit.papers.privatefl.experiment.run_train_spec` (the spec's ``runner``): the privacy mode is
PrivateFL's own (it calibrates its noise from the run's rounds, client sampling and data), not one of the
generic privatizers. Defaults are the paper's (001 Table 3, MNIST): one local epoch, batch 64, no momentum,
learning rate 1e-1 (LDP, DDP, none) or 5e-3 (CDP), (ε, δ) given by ``--epsilon``/``--delta``; the
reference code's behaviour is a named value (``--cdp-variant reference``, ``--participation expected``).

Torch-free: the runner and the builder import the training modules when called.
"""

from __future__ import annotations

from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.registry import AlgorithmSpec
from privaudit.fl.engine.options import Option

EPSILON = Option("epsilon", float, "PrivateFL: the claimed ε the noise is calibrated for (--privacy ldp|cdp|ddp)")
DELTA = Option("delta", float, "PrivateFL: δ of the claimed guarantee (default 1e-3, the reference code's fixed value)")
PARTICIPATION = Option("participation", str, "PrivateFL-LDP: steps σ_i is calibrated for: every-round (default, conservative) or expected (E·R·sr epochs, the reference code)", ("every-round", "expected"))
BUDGET_POLICY = Option("budget_policy", str, "PrivateFL-LDP: a client whose next round would exceed ε is excluded (default), the run stops, or the overrun is recorded", ("exclude", "stop", "record"))
CDP_VARIANT = Option("cdp_variant", str, "PrivateFL-CDP: paper (Alg. 1, default), reference (per-tensor median clipping) or dp-fedavg (fixed clip, Poisson clients)", ("paper", "reference", "dp-fedavg"))
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
CLIP_CAP = Option("clip_cap", float, "PrivateFL-CDP reference: cap of the per-tensor median clip norms (default 10, the reference code's)")

OPTIONS = (EPSILON, DELTA, PARTICIPATION, BUDGET_POLICY, CDP_VARIANT, BITS, CLIP_NORM, NOISE_MULTIPLIER, TRANSFORM, TRANSFORM_ALPHA,
           TRANSFORM_BETA, TRANSFORM_LR, CLIP_QUANTILE, DP_ACCOUNTANT, LDP_SAMPLE_RATE, SIGNAL_BOUND, CLIP_CAP)


def _privatefl(**options: Any):
    """The bare algorithm (no privacy, no transformation options): what ``make_algorithm("privatefl")`` gives."""
    if options:
        raise InvalidParameterError(
            f"option --{sorted(options)[0].replace('_', '-')} is run by `privaudit train --algorithm privatefl` "
            "(privaudit.papers.privatefl.algorithm.train_privatefl), not by the generic algorithm builder")
    from privaudit.papers.privatefl.algorithm import PrivateFL

    return PrivateFL()


def local_defaults(privacy: str) -> dict[str, Any]:
    """001 Table 3 (MNIST): one local epoch, batch 64, no momentum, lr 1e-1 (LDP) / 5e-3 (CDP)."""
    return {"local_epochs": 1, "batch_size": 64, "momentum": 0.0, "lr": 5e-3 if str(privacy).strip().lower() == "cdp" else 0.1}


SPECS = (
    AlgorithmSpec(
        "privatefl",
        "PrivateFL: personalised α⊙x+β kept on each client, under --privacy none|ldp|cdp|ddp (Yang et al. 2023)",
        OPTIONS,
        _privatefl,
    ),
)

#: ``privaudit train`` runs these algorithms with their own entry point and local-training defaults.
RUNNERS = {"privatefl": "privaudit.papers.privatefl.experiment:run_train_spec"}
LOCAL_DEFAULTS = {"privatefl": local_defaults}
SUMMARY_ROWS = {"privatefl": "privaudit.papers.privatefl.experiment:summary_rows"}
