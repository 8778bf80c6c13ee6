"""Train PrivateFL (and its FedAvg baseline) under no DP, LDP, CDP or DDP, from one typed configuration.

:class:`PrivateFLConfig` + :func:`train_privatefl` is the Python API (the evidence script, the audit's claims and
trials describe their runs with it): a thin, typed layer over the one training entry point
:func:`~privaudit.fl.run.run_training` (:meth:`PrivateFLConfig.train_spec` is the run's
:class:`~privaudit.fl.run.TrainSpec`, what ``privaudit train --algorithm privatefl ...`` builds from its
flags). The data is N classes per client; the model the personalised transformation in front of
``privatefl-dnn`` (``transform="none"`` is the FedAvg baseline); the privacy mode is the algorithm's own
(:class:`~privaudit.papers.privatefl.calibrated.CalibratedPrivateFL`): when the run starts it calibrates the
noise for the claimed (ε, δ) with :func:`privacy_wrapper` and wraps
:class:`~privaudit.papers.privatefl.algorithm.PrivateFL` in the privacy mechanism. Calibration, as the paper and
its code compute it (001 §5; BHui97/PrivateFL@f686b6f:FedAverage.py):

* ``ldp`` — per client, σ_i for its Poisson rate q_i = B/|D_i| and its planned DP-SGD steps under the
  participation policy (:func:`~privaudit.fl.privacy.local_dp.calibrate_client_noise`); budgets (ε, δ) per client with
  the pre-check policy of :class:`~privaudit.fl.privacy.local_dp.LocalDP`; default clip C = 2 (the reference
  ``max_norm``).
* ``cdp`` — σ for R releases of a Gaussian subsampled at the client rate sr (the reference's
  ``get_noise_multiplier(ε, δ, sample_rate=sr, steps=R)``); with adaptive clipping the quantile queries are
  part of the composition.
* ``ddp`` — z such that R Skellam releases meet (ε, δ) (Agarwal et al. 2021 RDP).

The claimed ε is the target; the realised ε per client is what the run's ledger says (``result.ledger``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from privaudit.accounting.calibrate import calibrate_noise
from privaudit.accounting.mechanisms import Composition, Gaussian, Sampling, Skellam, SubsampledGaussian
from privaudit.data import load_dataset
from privaudit.errors import InvalidParameterError, NumericalFailure
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.seeding import seeded_torch_global
from privaudit.fl.privacy.central_dp import AdaptiveClipping, CDPVariant, CentralDPConfig
from privaudit.fl.privacy.distributed_dp import DistributedDP, DistributedDPConfig, ddp_scale
from privaudit.fl.privacy.local_dp import (
    BudgetPolicy,
    CalibrationTarget,
    LocalDP,
    LocalDPConfig,
    Participation,
    RateRule,
    calibrate_client_noise,
    client_sample_rate,
)
from privaudit.fl.privacy.perturbation import NoPrivacy
from privaudit.fl.run import TrainSpec, run_training
from privaudit.models import build_model as build_named
from privaudit.papers.privatefl.central_dp import PrivateFLCentralDP
from privaudit.papers.privatefl.personal_layers import PersonalLayers
from privaudit.papers.privatefl.transform import (
    ALPHA_DIMENSIONS,
    BETA_DIMENSIONS,
    PERSONAL_PREFIX,
    TRANSFORM_FORMS,
    PersonalisedModel,
    build_transform,
)

if TYPE_CHECKING:
    from privaudit.fl.run import TrainSpec

PRIVACY_MODES = ("none", "ldp", "cdp", "ddp")
#: Learning rates of 001 Table 3 (MNIST): LDP 1e-1, CDP 5e-3; DDP and no DP use LDP's.
DEFAULT_LR = {"none": 0.1, "ldp": 0.1, "cdp": 5e-3, "ddp": 0.1}
DEFAULT_CLIP = {"ldp": 2.0, "cdp": 1.0, "ddp": 1.0}
#: The reference driver's learning rate for every user, CDP included (BHui97/PrivateFL@0ff71d6:FedAverage.py,
#: ``LEARNING_RATE_DIS = 1e-1`` passed as ``disc_lr``; CDPUser's own default 5e-3 never applies there).
REFERENCE_CDP_LR = 0.1
#: Share of the privacy budget (in RDP, per round) the adaptive-clipping quantile query gets by default.
QUANTILE_BUDGET_SHARE = 0.1


@dataclass(frozen=True)
class PrivateFLConfig:
    """Everything a PrivateFL run needs; defaults are the paper's MNIST settings scaled to MNIST-5k (offline)."""

    # data
    dataset: str = "mnist5k"
    num_clients: int = 20
    classes_per_client: int = 2
    shares: str = "paper"
    partition: str | None = None
    data_seed: int = 0
    dataset_options: dict[str, Any] = field(default_factory=dict)
    # model
    model: str = "privatefl-dnn"
    transform: str = "linear"
    transform_alpha: str = "channel"
    transform_beta: str = "pixel"
    # training
    rounds: int = 60
    local_epochs: int = 1
    batch_size: int = 64
    lr: float | None = None
    momentum: float = 0.0
    transform_lr: float | None = None
    clients_per_round: float = 1.0
    client_sampling: str = Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT.value
    seed: int = 0
    eval_every: int = 1
    # privacy
    privacy: str = "none"
    epsilon: float | None = None
    delta: float = 1e-3
    noise_multiplier: float | None = None
    clip_norm: float | None = None
    accountant: str = "rdp"
    participation: str = "every-round"
    budget_policy: str = "exclude"
    sample_rate: float | None = None
    #: LDP: q_i = B/|D_i| ("batch", None) or opacus' 1/⌈|D_i|/B⌉ = 1/len(DataLoader) ("loader", the reference code's)
    ldp_rate: str | None = None
    #: parameters kept on the client: the transformation ("transform", None) or, as the reference code does for its ``*_IN``
    #: models, every parameter whose name holds 'norm', 'bn' or 'downsample.1' as well ("reference")
    personal_layers: str | None = None
    cdp_variant: str = "paper"
    clip_cap: float = 10.0
    clip_quantile: float | None = None
    clip_lr: float = 0.2
    bit_noise: float | None = None
    bits: int = 16
    signal_bound: float | None = None

    def __post_init__(self) -> None:
        privacy = str(self.privacy).strip().lower()
        if privacy not in PRIVACY_MODES:
            raise InvalidParameterError(f"unknown PrivateFL privacy mode {self.privacy!r}; use {', '.join(PRIVACY_MODES)}")
        object.__setattr__(self, "privacy", privacy)
        object.__setattr__(self, "cdp_variant", CDPVariant.parse(self.cdp_variant).value)
        object.__setattr__(self, "participation", Participation.parse(self.participation).value)
        object.__setattr__(self, "budget_policy", BudgetPolicy.parse(self.budget_policy).value)
        if self.ldp_rate is not None:
            object.__setattr__(self, "ldp_rate", RateRule.parse(self.ldp_rate).value)
        if self.personal_layers is not None:
            object.__setattr__(self, "personal_layers", PersonalLayers.parse(self.personal_layers).value)
        if self.ldp_rate not in (None, "batch") and self.sample_rate is not None:
            raise InvalidParameterError("--ldp-rate chooses how q follows from each client's size; it cannot be combined with --ldp-sample-rate")
        object.__setattr__(self, "client_sampling", Sampling.parse(self.client_sampling).value)  # the one vocabulary
        for value, allowed, what in ((self.transform, TRANSFORM_FORMS, "transformation"), (self.transform_alpha, ALPHA_DIMENSIONS, "α dimension"),
                                     (self.transform_beta, BETA_DIMENSIONS, "β dimension"), (self.shares, ("paper", "equal"), "class shares")):
            if value not in allowed:
                raise InvalidParameterError(f"unknown {what} {value!r}; use {', '.join(allowed)}")
        if privacy != "none" and self.noise_multiplier is None:
            if self.epsilon is None:
                raise InvalidParameterError(f"PrivateFL-{privacy.upper()} needs --epsilon (the claimed ε) or a noise multiplier")
            if not float(self.epsilon) > 0 or math.isinf(float(self.epsilon)):
                raise InvalidParameterError(f"ε must be a positive finite number, got {self.epsilon}")
        if not 0 < float(self.delta) < 1:
            raise InvalidParameterError(f"δ must lie in (0, 1), got {self.delta}")
        if self.noise_multiplier is not None and not float(self.noise_multiplier) > 0:
            raise InvalidParameterError(f"the noise multiplier must be > 0, got {self.noise_multiplier}")
        if self.clip_norm is not None and not float(self.clip_norm) > 0:
            raise InvalidParameterError(f"the clip norm must be > 0, got {self.clip_norm}")
        if self.clip_quantile is not None and not (privacy == "cdp" and self.cdp_variant == "dp-fedavg"):
            raise InvalidParameterError("--clip-quantile (private adaptive clipping) applies to --privacy cdp --cdp-variant dp-fedavg")
        if isinstance(self.bits, bool) or int(self.bits) != self.bits or not 2 <= int(self.bits) <= 62:
            raise InvalidParameterError(f"--bits must be an integer in [2, 62], got {self.bits}")
        for name in ("num_clients", "classes_per_client", "rounds", "local_epochs", "batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or int(value) != value or int(value) < 1:
                raise InvalidParameterError(f"{name.replace('_', ' ')} must be a positive integer, got {value}")

    @property
    def learning_rate(self) -> float:
        if self.lr is not None:
            return float(self.lr)
        if self.privacy == "cdp" and self.cdp_variant == "reference":
            return REFERENCE_CDP_LR
        return DEFAULT_LR[self.privacy]

    @property
    def clip(self) -> float:
        return float(self.clip_norm) if self.clip_norm is not None else DEFAULT_CLIP.get(self.privacy, 1.0)

    @property
    def sampling(self) -> str:
        """Client sampling: Poisson for DP-FedAvg (its accounting needs it), otherwise as configured."""
        dp_fedavg = self.privacy == "cdp" and self.cdp_variant == CDPVariant.DP_FEDAVG.value
        return Sampling.POISSON.value if dp_fedavg else self.client_sampling

    @property
    def partition_string(self) -> str:
        return self.partition or f"classes:{int(self.classes_per_client)}:{self.shares}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def options(self) -> dict[str, Any]:
        """The algorithm options of the run (``privaudit train`` flag names, :data:`OPTION_FIELDS`) that are set."""
        return {option: getattr(self, name) for option, name in OPTION_FIELDS.items() if getattr(self, name) is not None}

    def train_spec(self) -> TrainSpec:
        """This run as the :class:`~privaudit.fl.run.TrainSpec` of algorithm ``privatefl`` (sequential execution)."""
        return TrainSpec(
            algorithm="privatefl",
            dataset=self.dataset,
            rounds=self.rounds,
            model=self.model,
            algorithm_options=self.options(),
            privacy=self.privacy,
            local=LocalTrainingConfig(epochs=self.local_epochs, batch_size=self.batch_size, lr=self.learning_rate, momentum=self.momentum),
            clients_per_round=self.clients_per_round,
            sampling=self.sampling,
            seed=self.seed,
            data_seed=self.data_seed,
            num_clients=self.num_clients,
            partition=self.partition_string,
            dataset_options=dict(self.dataset_options),
            execution="sequential",
            eval_every=self.eval_every,
        )


#: PrivateFL's algorithm options (``privaudit train`` flags, :mod:`privaudit.papers.privatefl.specs`) → PrivateFLConfig fields.
OPTION_FIELDS = {
    "epsilon": "epsilon", "delta": "delta", "participation": "participation", "budget_policy": "budget_policy",
    "cdp_variant": "cdp_variant", "bits": "bits", "clip_norm": "clip_norm", "noise_multiplier": "noise_multiplier",
    "transform": "transform", "transform_alpha": "transform_alpha", "transform_beta": "transform_beta",
    "transform_lr": "transform_lr", "clip_quantile": "clip_quantile", "clip_lr": "clip_lr", "bit_noise": "bit_noise",
    "dp_accountant": "accountant", "ldp_sample_rate": "sample_rate", "signal_bound": "signal_bound", "clip_cap": "clip_cap",
    "ldp_rate": "ldp_rate", "personal_layers": "personal_layers",
}
#: PrivateFLConfig fields that describe the data and the model's body, not the algorithm (the run's TrainSpec has them).
DATA_FIELDS = ("dataset", "num_clients", "classes_per_client", "shares", "partition", "data_seed", "dataset_options", "model")


# -- building -------------------------------------------------------------------------------------
def model_builder(config: PrivateFLConfig):
    """``build(input_shape, num_classes)``: the body ``config.model``, then the transformation (so the body's initial
    weights match the FedAvg baseline's under the same seed)."""

    def build(input_shape: tuple[int, ...], num_classes: int):
        body = build_named(config.model, input_shape, num_classes)
        return PersonalisedModel(body, build_transform(input_shape, config.transform, config.transform_alpha, config.transform_beta))

    return build


def build_model(config: PrivateFLConfig, input_shape: tuple[int, ...], num_classes: int, seed_integer: int):
    """The body under the run's model-init seed, then the transformation (so the body matches the baseline's)."""
    build = model_builder(config)
    return seeded_torch_global(seed_integer, lambda: build(input_shape, num_classes))


def named_model(config: PrivateFLConfig) -> str | None:
    """A registered model name when one describes the run's model (so checkpoints can rebuild it)."""
    if config.model != "privatefl-dnn":
        return None
    if config.transform == "none":
        return "privatefl-dnn"
    if (config.transform, config.transform_alpha, config.transform_beta) == ("linear", "channel", "pixel"):
        return "privatefl-dnn-in"
    return None


def _claim(config: PrivateFLConfig) -> str:
    return f"claimed (ε, δ) = ({config.epsilon:g}, {config.delta:g})" if config.epsilon is not None else "noise multiplier given directly"


def _cdp_mechanism(sigma: float, rate: float):
    return SubsampledGaussian(sigma, rate) if rate < 1 else Gaussian(sigma)


def calibrate_cdp(config: PrivateFLConfig, client_rate: float) -> tuple[float, float | None]:
    """(σ, σ_b): σ for R client-level releases at rate sr; with adaptive clipping also the bit-count noise σ_b."""
    rounds = config.rounds
    if config.noise_multiplier is not None:
        sigma = float(config.noise_multiplier)
        bit_noise = config.bit_noise if config.bit_noise is not None else (sigma / (2 * math.sqrt(QUANTILE_BUDGET_SHARE)))
        return sigma, (bit_noise if config.clip_quantile is not None else None)

    def update_only(sigma: float) -> Composition:
        return Composition.of(_cdp_mechanism(sigma, client_rate), rounds)

    sigma = calibrate_noise(update_only, config.epsilon, config.delta, accountant=config.accountant).noise_multiplier
    if config.clip_quantile is None:
        return sigma, None
    # Andrew et al. 2021 split one Gaussian budget 1/z² between the update (1/z_Δ²) and the bit count (1/(2σ_b)²).
    bit_noise = config.bit_noise if config.bit_noise is not None else sigma / (2 * math.sqrt(QUANTILE_BUDGET_SHARE))

    def both(s: float) -> Composition:
        return Composition([(_cdp_mechanism(s, client_rate), rounds), (_cdp_mechanism(2 * bit_noise, client_rate), rounds)])

    return calibrate_noise(both, config.epsilon, config.delta, accountant=config.accountant).noise_multiplier, bit_noise


def calibrate_ddp(config: PrivateFLConfig, dimension: int, expected_clients: int) -> float:
    """z such that R Skellam releases (the encoding of :func:`~privaudit.fl.privacy.distributed_dp.ddp_scale`) meet (ε, δ)."""
    if config.noise_multiplier is not None:
        return float(config.noise_multiplier)

    def calibrate(bits: int) -> float:
        def composition(z: float) -> Composition:
            ddp = DistributedDPConfig(noise_multiplier=z, clip_norm=config.clip, bits=bits, expected_clients=expected_clients,
                                      signal_bound=config.signal_bound)
            scale = ddp_scale(ddp, dimension, check=False)
            return Composition.of(Skellam(scale.central_variance, scale.l2_sensitivity, scale.l1_sensitivity), config.rounds)

        return calibrate_noise(composition, config.epsilon, config.delta, accountant="rdp").noise_multiplier

    try:
        return calibrate(int(config.bits))
    except NumericalFailure:
        # More noise shrinks the scale s of the encoding (2^b is fixed), so the rounding's share of the
        # sensitivity grows with z: with too few bits no z reaches the target. Name the bit width that does.
        enough = next((b for b in range(int(config.bits) + 1, MAX_DDP_BITS + 1) if _calibrates(calibrate, b)), None)
        hint = f"--bits {enough} reaches it" if enough else f"not even {MAX_DDP_BITS} bits reach it"
        raise InvalidParameterError(
            f"{config.bits} bits are too few for ε = {config.epsilon:g} at δ = {config.delta:g}: the modular range leaves so "
            f"little room that the rounding noise, not the Skellam noise, bounds the guarantee ({hint})") from None


#: Largest modular bit width tried when looking for one that can meet the target.
MAX_DDP_BITS = 62  # the largest --bits the config accepts


def _calibrates(calibrate, bits: int) -> bool:
    try:
        calibrate(bits)
    except NumericalFailure:
        return False
    return True


def wrap_privacy(config: PrivateFLConfig, algorithm, dataset, model) -> tuple[Any, dict[str, Any]]:
    """The privacy wrapper of ``config.privacy`` around ``algorithm`` for a federation on ``dataset``, and a record of
    the calibration (:func:`privacy_wrapper`)."""
    return privacy_wrapper(config, algorithm, [c.num_train for c in dataset.clients], model)


def privacy_wrapper(config: PrivateFLConfig, algorithm, client_sizes: Sequence[int], model) -> tuple[Any, dict[str, Any]]:
    """The privacy wrapper of ``config.privacy`` around ``algorithm`` and a record of the calibration.

    ``client_sizes`` are the clients' training-set sizes (LDP's per-client rates), ``model`` the module the
    federation trains (DDP's dimension: its parameters outside the personal transformation).
    """
    mode = config.privacy
    claim = _claim(config)
    if mode == "none":
        return NoPrivacy(algorithm), {}  # each release is recorded as non-private (ε = ∞), never as ε = 0
    if mode == "ldp":
        sizes = [int(n) for n in client_sizes]
        if config.noise_multiplier is not None:
            sigmas = {i: float(config.noise_multiplier) for i in range(len(sizes))}
            if config.sample_rate is not None:
                rates = {i: float(config.sample_rate) for i in range(len(sizes))}
            elif config.ldp_rate not in (None, "batch"):
                rates = {i: client_sample_rate(n, config.batch_size, config.ldp_rate) for i, n in enumerate(sizes)}
            else:
                rates = None
            plan = {}
        else:
            plan = calibrate_client_noise(sizes, CalibrationTarget(
                epsilon=config.epsilon, delta=config.delta, rounds=config.rounds, epochs=config.local_epochs,
                batch_size=config.batch_size, participation=config.participation, client_rate=config.clients_per_round,
                sample_rate=config.sample_rate, accountant=config.accountant, rate_rule=config.ldp_rate or "batch",
            ))
            sigmas = {i: p.noise_multiplier for i, p in plan.items()}
            rates = {i: p.sample_rate for i, p in plan.items()}
        budget = (float(config.epsilon), float(config.delta)) if config.epsilon is not None else None
        # The reference code's separate transformation learning rate (flr) applies to DP-SGD's noisy step as well.
        lr_scales = () if config.transform_lr is None else ((PERSONAL_PREFIX, float(config.transform_lr) / config.learning_rate),)
        ldp = LocalDPConfig(
            noise_multiplier=sigmas, clip_norm=config.clip, sample_rate=rates, budget=budget, budget_policy=config.budget_policy,
            accountant=config.accountant, lr_scales=lr_scales,
            assumptions=(f"{claim}; σ_i calibrated for the '{config.participation}' participation policy",),
        )
        calibration = {"noise_multipliers": {str(i): s for i, s in sigmas.items()},
                       "planned_steps": {str(i): p.planned_steps for i, p in plan.items()}, "participation": config.participation}
        return LocalDP(algorithm, ldp), calibration
    client_rate = float(config.clients_per_round)
    if mode == "cdp":
        sigma, bit_noise = calibrate_cdp(config, client_rate)
        adaptive = None
        if config.clip_quantile is not None:
            adaptive = AdaptiveClipping(target_quantile=config.clip_quantile, learning_rate=config.clip_lr, bit_noise=bit_noise)
        cdp = CentralDPConfig(
            variant=config.cdp_variant, noise_multiplier=sigma, client_rate=client_rate, num_clients=len(client_sizes),
            client_sampling=config.sampling, clip_norm=config.clip, clip_cap=config.clip_cap, adaptive=adaptive,
            assumptions=(f"{claim}; σ calibrated for {config.rounds} client-level releases at client rate {client_rate:g}",),
        )
        return PrivateFLCentralDP(algorithm, cdp), {"noise_multiplier": sigma, "bit_noise": bit_noise}
    expected = max(math.floor(client_rate * len(client_sizes) + 1e-9), 1)
    dimension = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("transform."))
    z = calibrate_ddp(config, dimension, expected)
    ddp = DistributedDPConfig(noise_multiplier=z, clip_norm=config.clip, bits=int(config.bits), expected_clients=expected,
                              signal_bound=config.signal_bound,
                              assumptions=(f"{claim}; z calibrated for {config.rounds} Skellam releases",))
    scale = ddp_scale(ddp, dimension)  # refuses bit widths too small for this z
    return DistributedDP(algorithm, ddp), {"noise_multiplier": z, "scale": scale.scale, "signal_bound": scale.signal_bound}


# -- running --------------------------------------------------------------------------------------
def load_privatefl_dataset(config: PrivateFLConfig):
    return load_dataset(config.dataset, num_clients=config.num_clients, partition=config.partition_string, seed=config.data_seed,
                        **config.dataset_options)


def train_privatefl(
    config: PrivateFLConfig,
    *,
    dataset=None,
    out: str | os.PathLike | None = None,
    save_client_updates: bool = False,
    overwrite: bool = False,
    progress: bool = False,
    extra: Mapping[str, Any] | None = None,
):
    """Train PrivateFL as ``config`` says; returns the :class:`~privaudit.fl.engine.round_loop.FederationResult`.

    Runs ``config.train_spec()`` through :func:`~privaudit.fl.run.run_training`. ``dataset`` reuses a loaded
    federated dataset (it must be what ``config`` describes); ``out`` writes the checkpoint (manifest with the
    train spec, the algorithm's ``"privatefl"`` section — its settings and calibration — plus ``extra``).
    """
    if not isinstance(config, PrivateFLConfig):
        raise InvalidParameterError("train_privatefl needs a PrivateFLConfig")
    return run_training(config.train_spec(), out, dataset=dataset, save_client_updates=save_client_updates, overwrite=overwrite,
                        progress=progress, extra=extra)


# -- evaluation -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PrivateFLEvaluation:
    """Both evaluations of audit point P8 for the final model.

    ``personalised_accuracy``: Σ correct / Σ count over every client's own test split, each client with its own
    transformation (the reference code's ``evaluate_global``). ``global_accuracy`` / ``global_balanced_accuracy``:
    the global model (identity transformation, no personal layer) on the pooled test set, plain and class-balanced
    (mean per-class recall, i.e. the accuracy on a class-balanced test set).
    """

    personalised_accuracy: float | None
    global_accuracy: float
    global_balanced_accuracy: float
    personalised_per_client: list[float | None]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate_privatefl(result, dataset) -> PrivateFLEvaluation:
    """Evaluate the final global model and every client's extended model (see :class:`PrivateFLEvaluation`)."""
    import torch
    from torch.func import functional_call

    model = result.info.model
    model.eval()
    x_test, y_test = dataset.test

    def predict(state, x):
        with torch.no_grad():
            return functional_call(model, dict(state), (torch.from_numpy(np.ascontiguousarray(x)),)).argmax(dim=1).numpy()

    predicted = predict(result.state, x_test)
    correct = predicted == y_test
    recalls = [float(correct[y_test == c].mean()) for c in np.unique(y_test)]
    per_client: list[float | None] = []
    hits = total = 0
    for cid, client in enumerate(dataset.clients):
        if client.num_test == 0:
            per_client.append(None)
            continue
        state = result.personal_states.get(cid, result.state)
        ok = predict(state, client.x_test) == client.y_test
        per_client.append(float(ok.mean()))
        hits += int(ok.sum())
        total += len(ok)
    model.train()
    return PrivateFLEvaluation(hits / total if total else None, float(correct.mean()), float(np.mean(recalls)), per_client)


# -- privaudit train's summary ----------------------------------------------------------------------
def summary_rows(result) -> dict[str, Any]:
    """Extra rows of ``privaudit train``'s summary: the personalised accuracy and the realised ε (max over subjects)."""
    last = next((m for m in reversed(result.history) if m.test_accuracy is not None), None)
    rows: dict[str, Any] = {"final_personalised_accuracy": None if last is None else last.personalised_accuracy}
    budgets = list(result.ledger.budgets.values())
    if result.ledger.events and budgets:
        delta = budgets[0].delta
        summary = result.ledger.summary(delta, accountant="rdp")
        rows.update({"claimed_epsilon": max(b.epsilon for b in budgets), "delta": delta, "max_epsilon": summary.max_epsilon,
                     "epsilon_valid": summary.all_valid})
    return rows
