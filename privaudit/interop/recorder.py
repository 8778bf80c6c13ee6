"""Record a federation trained by your own loop as a privaudit checkpoint.

Public API (stable; typed; everything else in this module is private)::

    DatasetReference.packaged(name, *, partition, non_members=()) -> DatasetReference
    DatasetReference.from_arrays(name, x, y, *, partition, non_members=(), store=True,
                                 num_classes=None, data_range=None) -> DatasetReference
    ModelFactory(factory: str, kwargs: Mapping[str, Any] = {})            # "package.module:function"
    GaussianRelease(clients, *, noise_multiplier=None, noise_std=None, clip, sensitivity=None, sample_rate=1.0,
                    sampling=None, steps=1, level="record", assumptions=(), note="")   # sampling: required when q < 1
    NoDP(clients, reason="no calibrated noise")
    privacy_events(release, round) -> list[PrivacyEvent]                  # GaussianRelease | NoDP | PrivacyEvent

    FederationRecorder(out_dir, *, model: nn.Module, dataset: DatasetReference,
                       architecture: str | ModelFactory | None = None, algorithm: str = "custom",
                       seed: int | None = None, neighbouring: str = "add-remove", overwrite: bool = False,
                       config: Mapping[str, Any] | None = None, framework: str | None = None,
                       local_training: Mapping[str, Any] | None = None)
        .record_round(round: int, *, global_model: nn.Module | Mapping[str, Tensor],
                      client_releases: Mapping[int, nn.Module | Mapping[str, Tensor]] | None = None,
                      privacy_events: Sequence[GaussianRelease | NoDP | PrivacyEvent] = (),
                      sampled_clients: Sequence[int] | None = None,
                      metrics: Mapping[str, float] | None = None) -> None
        .report_epsilon(epsilon: float, delta: float, *, source: str, client: int | str | None = None,
                        accounted_as: FrameworkAccounting | None = None) -> None
        .set_budget(client, epsilon, delta) -> None
        .close() -> Path                        # writes manifest.json last; also on leaving a ``with`` block
        .path -> Path

Use::

    data = DatasetReference.packaged("digits", partition={0: [0, 1, ...], 1: [...]}, non_members=[...])
    with FederationRecorder("runs/mine", model=net, dataset=data, seed=0) as recorder:
        for r in range(1, rounds + 1):
            ...                                 # your round: sample clients, train, aggregate, add noise
            recorder.record_round(r, global_model=net, client_releases={c: w for c, w in sent.items()},
                                  privacy_events=[GaussianRelease(sampled, noise_multiplier=1.0, clip=1.0,
                                                                  sensitivity=2.0)],  # noise on each clipped update
                                  sampled_clients=sampled, metrics={"test_accuracy": acc})

What is written is the ordinary checkpoint of :mod:`privaudit.fl.engine.checkpoint` (schema
``privaudit.federation/1``; ``manifest.json`` last and atomically, every tensor file hashed), read and verified
like any other, so ``privaudit compute-epsilon --checkpoint DIR``, ``attack membership --checkpoint DIR`` (threshold
attacks), ``attack inversion --checkpoint DIR`` (with client releases) and ``privaudit report`` work on it. What a
recorded checkpoint cannot do is be *re-trained* (LiRA's shadow federations, ``audit --checkpoint``'s canary
re-runs): it has no privaudit training recipe, and those commands say so.

**The model.** Weights are stored as safetensors (nothing is pickled, ever). The architecture is recorded so a reader
can rebuild the module (:mod:`privaudit.fl.engine.architecture`): ``architecture="fedreg-mlp"`` (a privaudit model
name, :func:`privaudit.models.build_model`); ``None`` (default) for an ``nn.Sequential`` of standard ``torch.nn``
layers, recorded as JSON and rebuilt from an allow-list; or ``ModelFactory("mypkg.nets:make_net", {"width": 64})``,
a function of your code that readers import **only** when they name it as trusted (``--trust-factory
mypkg.nets:make_net``; API ``trust_factory=``), because importing a module runs its code.

**The data.** :class:`DatasetReference` names the records (a packaged dataset privaudit loads, e.g. scikit-learn's
digits, or your arrays stored inside the checkpoint with ``store=True``), fingerprints them (sha256), and says which
records each client trained on (``partition``: client id 0..K−1 → row indices; those are the *members*) and which
no client saw (``non_members``: the attack's non-members). Arrays you do not store are fingerprinted only, and
attacks that need the records refuse with a one-line reason.

**Privacy.** Each round's releases are described in your terms — :class:`GaussianRelease` (noise multiplier σ = noise
std / clip C, the clip C, the sampling rate q and scheme of each step, the number of steps) or :class:`NoDP` — and
become privaudit :class:`~privaudit.accounting.ledger.PrivacyEvent` values in the manifest's ledger, accounted by
privaudit's tight accountants (``compute-epsilon --checkpoint``). A client that trained in a round (``sampled_clients``, or a
recorded release) with no event for it is recorded as *no DP guarantee* for that client (ε = ∞), never as free — unless the round has a
client-level (``"server"``) event: central DP protects what the trusted server publishes, and the client releases
recorded beside it are what that server saw, not something the guarantee covers. ``report_epsilon`` keeps what your
framework claimed (e.g. opacus's own ε), shown beside privaudit's figure and — given what its accountant composed
(``accounted_as``) — classified as a certified upper bound, not an upper bound for what ran, or refuted
(:mod:`privaudit.accounting.reported`). A sampling rate below 1 needs its scheme (``sampling="poisson"`` or
``"fixed-size"``; no default), and client-level releases declared Poisson whose rounds all sampled the same number of
clients — improbable under Poisson sampling (:data:`SAMPLING_ALPHA`) — are marked invalid with the reason when the
recorder closes.

**Checked early.** The architecture, the model against the dataset's records and ``out_dir`` are checked when the
recorder is created, so create it before your loop trains: a custom module without ``architecture=`` is refused
before the first round, never after the last.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import torch
from torch import nn

from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Gaussian, Sampling, SubsampledGaussian
from privaudit.accounting.reported import FrameworkAccounting
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.architecture import (
    FACTORY,
    REGISTRY,
    SEQUENTIAL,
    check_factory_name,
    describe_sequential,
)
from privaudit.fl.engine.checkpoint import SCHEMA, CheckpointWriter, clients_file, global_file
from privaudit.fl.engine.params import model_state
from privaudit.fl.engine.recorded_data import DATA_FILE, PARTITION_FILE, packaged_pool, pool_fingerprint

__all__ = [
    "DatasetReference",
    "FederationRecorder",
    "GaussianRelease",
    "ModelFactory",
    "NoDP",
    "privacy_events",
]

#: The ``recorded`` section's marker: which privaudit module wrote the checkpoint.
RECORDER = "privaudit.interop.recorder"
#: A constant number of sampled clients over rounds declared Poisson-sampled is flagged when, under the declared
#: Poisson sampling, all those rounds sampling one and the same number has a probability below this.
SAMPLING_ALPHA = 1e-3


# -- the data ------------------------------------------------------------------------------------------
def _index_vector(values: Iterable[int], n: int, what: str) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().numpy()
    index = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if index.size == 0:
        return np.zeros(0, dtype=np.int64)
    if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer):
        raise InvalidParameterError(f"{what} must be a list of integer row indices")
    index = index.astype(np.int64)
    if index.min() < 0 or index.max() >= n:
        raise InvalidParameterError(f"{what} indexes rows outside the {n} records")
    if len(np.unique(index)) != len(index):
        raise InvalidParameterError(f"{what} lists a row twice")
    return index


@dataclass(frozen=True, eq=False)
class DatasetReference:
    """The records a federation trained on: where they are found again, their fingerprint and their partition.

    Build it with :meth:`packaged` or :meth:`from_arrays`. ``partition`` maps client ids 0..K−1 to the row indices
    of the records that client trained on; ``non_members`` are rows no client trained on (the membership attack's
    non-members). A row may belong to one client only.
    """

    name: str
    kind: str  # "packaged" | "stored" | "external"
    x: np.ndarray
    y: np.ndarray
    partition: dict[int, np.ndarray]
    non_members: np.ndarray
    num_classes: int
    data_range: tuple[float, float]
    description: str = ""

    def __post_init__(self) -> None:
        n = len(self.y)
        if len(self.x) != n:
            raise InvalidParameterError(f"dataset {self.name!r}: {len(self.x)} inputs but {n} labels")
        ids = sorted(self.partition)
        if not ids or ids != list(range(len(ids))):
            raise InvalidParameterError(f"the partition must map client ids 0..K−1 to row indices, got ids {ids[:6]}")
        seen = np.concatenate([self.partition[k] for k in ids] + [self.non_members])
        if len(np.unique(seen)) != len(seen):
            raise InvalidParameterError("a record is in two clients' partitions, or in a partition and among the non-members")

    @classmethod
    def packaged(cls, name: str, *, partition: Mapping[int, Sequence[int]],
                 non_members: Sequence[int] = ()) -> DatasetReference:
        """A dataset shipped inside an installed package that privaudit loads by name (``digits``, ``mnist5k``,
        ``lfw``, ``images``; :func:`privaudit.fl.engine.recorded_data.packaged_pool` gives its rows)."""
        x, y, num_classes, data_range = packaged_pool(name)
        return cls(name, "packaged", x, y, _partition(partition, len(y)), _index_vector(non_members, len(y), "non_members"),
                   num_classes, data_range, f"packaged dataset {name}")

    @classmethod
    def from_arrays(cls, name: str, x: np.ndarray | torch.Tensor, y: np.ndarray | torch.Tensor, *,
                    partition: Mapping[int, Sequence[int]], non_members: Sequence[int] = (), store: bool = True,
                    num_classes: int | None = None, data_range: tuple[float, float] | None = None,
                    description: str = "") -> DatasetReference:
        """Your own arrays: ``x`` (inputs, any shape per record) and ``y`` (integer labels). With ``store=True`` they
        are saved inside the checkpoint (``tensors/data.safetensors``) so attacks can reload them; with ``False``
        only their fingerprint is kept."""
        x = np.ascontiguousarray(x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x, dtype=np.float32)
        y_raw = y.detach().cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)
        if y_raw.ndim != 1 or (y_raw.size and not np.issubdtype(y_raw.dtype, np.integer)):
            raise InvalidParameterError("labels y must be a one-dimensional array of integers")
        y = np.ascontiguousarray(y_raw, dtype=np.int64)
        if x.ndim < 2 or len(y) == 0:
            raise InvalidParameterError("x must hold at least one record, shaped (records, features...)")
        if not np.isfinite(x).all():
            raise InvalidParameterError("x holds NaN or infinite values")
        classes = int(num_classes) if num_classes is not None else int(y.max()) + 1
        if y.min() < 0 or y.max() >= classes:
            raise InvalidParameterError(f"labels must lie in 0..{classes - 1}")
        span = (float(x.min()), float(x.max())) if data_range is None else (float(data_range[0]), float(data_range[1]))
        return cls(name, "stored" if store else "external", x, y, _partition(partition, len(y)),
                   _index_vector(non_members, len(y), "non_members"), classes, span, description or f"arrays {name}")

    @property
    def input_shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.x.shape[1:])

    def fingerprint(self) -> str:
        return pool_fingerprint(self.x, self.y)

    def client_data(self, client: int) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) of the records ``client`` trained on."""
        rows = self.partition[int(client)]
        return self.x[rows], self.y[rows]


def _partition(partition: Mapping[int, Sequence[int]], n: int) -> dict[int, np.ndarray]:
    if not isinstance(partition, Mapping):
        raise InvalidParameterError("partition must map each client id to the row indices it trained on")
    out = {}
    for client, rows in partition.items():
        if isinstance(client, bool) or not isinstance(client, int | np.integer):
            raise InvalidParameterError(f"partition keys are integer client ids, got {client!r}")
        out[int(client)] = _index_vector(rows, n, f"partition[{client}]")
    return out


@dataclass(frozen=True)
class ModelFactory:
    """A function of your code, ``"package.module:function"``, that returns the model when called with ``kwargs``
    (JSON values). Readers import it only when told to trust it (see the module docstring)."""

    factory: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_factory_name(self.factory)
        object.__setattr__(self, "kwargs", dict(self.kwargs))


# -- privacy, in the user's terms ------------------------------------------------------------------------
@dataclass(frozen=True)
class GaussianRelease:
    """Gaussian noise on clipped contributions, released ``steps`` times in one round.

    ``clients``: who the guarantee protects — client ids (each client's records, ``level="record"``: local DP-SGD or
    noise on a client's own update) or ``"server"`` (``level="client"``: central DP over whole clients, one event for
    the federation). ``noise_multiplier`` σ = noise std / ``clip`` (give it, or ``noise_std``). ``sensitivity`` Δ is how
    far (L2) the noised quantity moves when one protected unit is added or removed: C when each unit adds one clipped
    term to the noised sum (DP-SGD's per-example clipping; DP-FedAvg's per-client clipping under ``level="client"``,
    the default there); noise on one client's whole clipped update that protects its *records* has Δ = 2C (the update
    may change anywhere in the ball of radius C). Record-level releases must state Δ: there is no safe default. ``sample_rate`` q and ``sampling`` (``poisson`` or ``fixed-size``)
    describe how each step samples what it protects (records within a client for DP-SGD; clients for central DP);
    q = 1 means every step sees everything. With q < 1 ``sampling`` must be given, as there is no safe default either:
    ``"poisson"`` (each unit independently with probability q, so the number sampled varies) or ``"fixed-size"``
    (exactly q·N drawn without replacement — the ordinary ``random.sample`` loop, and Flower's — for which an added
    unit displaces a sampled one and the guarantee is far weaker: σ = 1, q = 0.5, 10 rounds, δ = 1e-5 gives ε = 31.4
    fixed-size against 10.5 Poisson). Accounted as ``steps`` runs of ``Gaussian(z)`` (q = 1) or
    ``SubsampledGaussian(z, q, sampling)`` with z = noise std / Δ.
    """

    clients: Sequence[int | str] | int | str
    noise_multiplier: float | None = None
    noise_std: float | None = None
    clip: float | None = None
    sensitivity: float | None = None
    sample_rate: float = 1.0
    sampling: str | None = None
    steps: int = 1
    level: str = "record"
    assumptions: Sequence[str] = ()
    note: str = ""

    def __post_init__(self) -> None:
        if self.clip is None or not (isinstance(self.clip, int | float) and math.isfinite(self.clip) and self.clip > 0):
            raise InvalidParameterError(f"a Gaussian release needs the clip C that bounds each contribution (positive), got {self.clip!r}")
        if (self.noise_multiplier is None) == (self.noise_std is None):
            raise InvalidParameterError("give exactly one of noise_multiplier (σ = std / clip) or noise_std")
        if self.sensitivity is not None and not (isinstance(self.sensitivity, int | float) and math.isfinite(self.sensitivity)
                                                 and self.sensitivity > 0):
            raise InvalidParameterError(f"sensitivity must be a positive number, got {self.sensitivity!r}")
        if self.level not in ("record", "client"):
            raise InvalidParameterError(f"level must be 'record' or 'client', got {self.level!r}")
        if self.level == "record" and self.sensitivity is None:
            # No silent default: Δ = C (per-example clipped sums, DP-SGD) and Δ = 2C (noise on a client's whole clipped
            # update) are both common, and the wrong one halves the noise the accountant believes in.
            raise InvalidParameterError("a record-level Gaussian release needs its sensitivity: sensitivity=clip for DP-SGD's "
                                        "per-example clipped sums, sensitivity=2*clip for noise on a whole clipped update")
        if isinstance(self.steps, bool) or int(self.steps) != self.steps or self.steps < 1:
            raise InvalidParameterError(f"steps must be a positive integer, got {self.steps!r}")
        if self.sampling is None and isinstance(self.sample_rate, int | float) and self.sample_rate < 1:
            raise InvalidParameterError(
                f"sample_rate={self.sample_rate:g} needs sampling='poisson' (each independently with probability q: the "
                "number sampled varies) or sampling='fixed-size' (exactly q·N drawn without replacement, e.g. "
                "random.sample; far weaker guarantees): there is no safe default")
        self.mechanism()  # validates σ, q and the sampling scheme now, where the user made the mistake

    @property
    def std(self) -> float:
        """The noise standard deviation (σ·C)."""
        return float(self.noise_std) if self.noise_std is not None else float(self.noise_multiplier) * float(self.clip)  # type: ignore[arg-type]

    @property
    def multiplier(self) -> float:
        """z = noise std / Δ, the multiplier the accountants take."""
        return self.std / float(self.sensitivity if self.sensitivity is not None else self.clip)  # type: ignore[arg-type]

    def mechanism(self) -> Gaussian | SubsampledGaussian:
        if float(self.sample_rate) >= 1.0:
            if float(self.sample_rate) > 1.0:
                raise InvalidParameterError(f"sample_rate must lie in (0, 1], got {self.sample_rate}")
            return Gaussian(self.multiplier)
        return SubsampledGaussian(self.multiplier, float(self.sample_rate), Sampling.parse(self.sampling))  # type: ignore[arg-type]

    def client_ids(self) -> list[str]:
        clients = [self.clients] if isinstance(self.clients, int | str) else list(self.clients)
        if self.level == "client" and clients != [SERVER]:
            raise InvalidParameterError("a client-level (central DP) release is charged to clients='server'")
        if self.level == "record" and SERVER in clients:
            raise InvalidParameterError("a release charged to 'server' protects whole clients: pass level='client'")
        return [str(c) for c in clients]

    def describe(self) -> str:
        delta = float(self.sensitivity if self.sensitivity is not None else self.clip)  # type: ignore[arg-type]
        text = (f"Gaussian noise of std {self.std:g} on contributions clipped to C = {float(self.clip):g} (L2 sensitivity "  # type: ignore[arg-type]
                f"Δ = {delta:g}, multiplier z = {self.multiplier:g})")
        if float(self.sample_rate) < 1:
            text += f", {Sampling.parse(self.sampling).value.replace('_', ' ')} sampling q = {float(self.sample_rate):g}"  # type: ignore[arg-type]
        return text + f", {int(self.steps)} step(s)"


@dataclass(frozen=True)
class NoDP:
    """Releases without calibrated noise: each named client has no DP guarantee (ε = ∞) from this round on."""

    clients: Sequence[int | str] | int | str
    reason: str = "released without calibrated noise"

    def client_ids(self) -> list[str]:
        return [str(c) for c in ([self.clients] if isinstance(self.clients, int | str) else list(self.clients))]


Release = GaussianRelease | NoDP | PrivacyEvent


def privacy_events(release: Release, round: int) -> list[PrivacyEvent]:
    """The privaudit ledger events that ``release`` caused in ``round`` (one per protected client)."""
    if isinstance(release, PrivacyEvent):
        return [release]
    if isinstance(release, NoDP):
        return [PrivacyEvent.no_guarantee(cid, round, release.reason) for cid in release.client_ids()]
    if not isinstance(release, GaussianRelease):
        raise InvalidParameterError(f"a privacy event is a GaussianRelease, NoDP or PrivacyEvent, got {type(release).__name__}")
    neighbours = ("client-level neighbours (one client's whole data)",) if release.level == "client" else ()
    assumptions = (release.describe(), *neighbours, *release.assumptions)
    return [PrivacyEvent(cid, round, release.mechanism(), int(release.steps), assumptions, True, release.note)
            for cid in release.client_ids()]


# -- the recorder ---------------------------------------------------------------------------------------
def _state(model: nn.Module | Mapping[str, torch.Tensor], names: Sequence[str], what: str) -> dict[str, torch.Tensor]:
    if isinstance(model, nn.Module):
        state = model_state(model)
    elif isinstance(model, Mapping):
        state = dict(model)
    else:
        raise InvalidParameterError(f"{what} must be an nn.Module or a state dict, got {type(model).__name__}")
    missing = [n for n in names if n not in state]
    if missing:
        raise InvalidParameterError(f"{what} lacks tensor {missing[0]!r}" + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    out = {}
    for name in names:
        tensor = state[name]
        if not isinstance(tensor, torch.Tensor):
            raise InvalidParameterError(f"{what}[{name!r}] is not a tensor")
        out[name] = tensor.detach().to("cpu").clone()
    return out


def _architecture(model: nn.Module, architecture: str | ModelFactory | None) -> dict[str, Any]:
    if isinstance(architecture, ModelFactory):
        return {"kind": FACTORY, "factory": architecture.factory, "kwargs": dict(architecture.kwargs)}
    if isinstance(architecture, str):
        from privaudit.models import MODEL_NAMES

        if architecture not in MODEL_NAMES:
            raise InvalidParameterError(f"unknown privaudit model {architecture!r}; name one of {', '.join(MODEL_NAMES)}, pass "
                                        "a ModelFactory, or leave architecture=None for an nn.Sequential of torch.nn layers")
        return {"kind": REGISTRY, "name": architecture}
    if architecture is not None:
        raise InvalidParameterError("architecture must be a privaudit model name, a ModelFactory or None")
    layers = describe_sequential(model)
    if layers is None:
        raise InvalidParameterError(
            f"cannot record the architecture of a {type(model).__name__}: pass architecture=ModelFactory('package.module:function', "
            "kwargs) naming the function that builds it, a privaudit model name, or use an nn.Sequential of torch.nn layers")
    return {"kind": SEQUENTIAL, "layers": layers}


class FederationRecorder:
    """Writes a privaudit checkpoint from your own training loop (see the module docstring for the API).

    Tensor files are written as rounds are recorded; ``manifest.json`` is written last by :meth:`close` (or on
    leaving a ``with`` block without an exception: after an exception nothing is finalised, so a half-recorded
    run is never mistaken for a checkpoint). ``out_dir`` is checked now: an existing checkpoint is refused unless
    ``overwrite``. ``local_training`` (``{"lr", "epochs", "batch_size", "momentum"}``) is what your clients ran
    locally: ``attack inversion --checkpoint`` simulates it; ``config`` holds any other settings (JSON values).
    """

    def __init__(self, out_dir: str | os.PathLike, *, model: nn.Module, dataset: DatasetReference,
                 architecture: str | ModelFactory | None = None, algorithm: str = "custom", seed: int | None = None,
                 neighbouring: str = "add-remove", overwrite: bool = False, config: Mapping[str, Any] | None = None,
                 framework: str | None = None, local_training: Mapping[str, Any] | None = None) -> None:
        if not isinstance(model, nn.Module):
            raise InvalidParameterError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(dataset, DatasetReference):
            raise InvalidParameterError("dataset must be a DatasetReference (DatasetReference.packaged or .from_arrays)")
        self._architecture = _architecture(model, architecture)
        self._writer = CheckpointWriter(out_dir, overwrite=overwrite)
        self._ledger = PrivacyLedger(neighbouring=neighbouring)
        self.dataset, self.algorithm, self.seed, self.framework = dataset, str(algorithm), seed, framework
        self._config = dict(config or {})
        if local_training is not None:  # what gradient inversion's attacker simulates: lr, epochs, batch_size, momentum
            from dataclasses import asdict

            from privaudit.fl.engine.config import LocalTrainingConfig

            try:
                self._config["local"] = asdict(LocalTrainingConfig(**dict(local_training)))
            except TypeError as exc:
                raise InvalidParameterError(f"local_training takes lr, epochs, batch_size, momentum: {exc}") from None
        initial = model_state(model)
        self._names = list(initial)
        self._trainable = [n for n, p in model.named_parameters() if p.requires_grad]
        self._shapes = {k: list(v.shape) for k, v in initial.items()}
        self._check_model_fits(model)
        self._metrics: list[dict[str, Any]] = []
        self._observed: dict[int, int] = {}  # round → number of clients seen training in it (when the caller said)
        self._reported: list[dict[str, Any]] = []
        self._round = 0
        self._has_releases = False
        self._closed = False
        self._started = time.time()
        self._writer.prepare()
        self._writer.write_tensors(global_file(0), initial, {"kind": "global", "round": "0"})
        self._write_data()

    @property
    def path(self) -> Path:
        return self._writer.root

    def _check_model_fits(self, model: nn.Module) -> None:
        """The model must take the dataset's records and give one logit per class (one record, no gradient)."""
        device = next(iter(model.parameters()), torch.empty(0)).device
        probe = torch.as_tensor(self.dataset.x[:1]).to(device)
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad(), torch.random.fork_rng(devices=[]):
                out = model(probe)
        except Exception as exc:  # the user's module: any failure is one clear line
            raise InvalidParameterError(f"the model cannot take the dataset's records (shape {tuple(probe.shape[1:])}): "
                                        f"{type(exc).__name__}: {exc}") from None
        finally:
            model.train(was_training)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (1, self.dataset.num_classes):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise InvalidParameterError(f"the model must return logits shaped (batch, {self.dataset.num_classes}), got {shape}")

    def _write_data(self) -> None:
        data = self.dataset
        parts = {f"client/{k}": torch.from_numpy(v.copy()) for k, v in sorted(data.partition.items())}
        parts["non_members"] = torch.from_numpy(data.non_members.copy())
        self._writer.write_tensors(PARTITION_FILE, parts, {"kind": "partition"})
        if data.kind == "stored":
            self._writer.write_tensors(DATA_FILE, {"x": torch.from_numpy(data.x.copy()), "y": torch.from_numpy(data.y.copy())},
                                       {"kind": "data"})

    def record_round(self, round: int, *, global_model: nn.Module | Mapping[str, torch.Tensor],
                     client_releases: Mapping[int, nn.Module | Mapping[str, torch.Tensor]] | None = None,
                     privacy_events: Sequence[Release] = (), sampled_clients: Sequence[int] | None = None,
                     metrics: Mapping[str, float] | None = None) -> None:
        """Record round ``round`` (1, 2, 3, … in order): the global model after it, optionally the models the clients
        released in it (``{client: weights}``), the privacy events those releases caused, the clients sampled and
        metrics (``test_accuracy``, ``test_loss``, ``train_loss`` or any other name → value)."""
        if self._closed:
            raise InvalidParameterError("the recorder is closed")
        if isinstance(round, bool) or not isinstance(round, int) or round != self._round + 1:
            raise InvalidParameterError(f"rounds are recorded in order 1, 2, 3, …: expected round {self._round + 1}, got {round!r}")
        known = set(self.dataset.partition)
        releases = dict(client_releases or {})
        for client in [*releases, *(sampled_clients if sampled_clients is not None else ())]:
            if isinstance(client, bool) or not isinstance(client, int | np.integer) or int(client) not in known:
                raise InvalidParameterError(f"client {client!r} is not in the dataset's partition (clients 0..{len(known) - 1})")
        sampled = [int(c) for c in (sampled_clients if sampled_clients is not None else sorted(releases))]
        if isinstance(privacy_events, GaussianRelease | NoDP | PrivacyEvent):
            raise InvalidParameterError("privacy_events is a list of releases: pass [release]")
        events = [e for release in privacy_events for e in _events(release, round)]
        state = _state(global_model, self._names, f"the global model of round {round}")
        flat: dict[str, torch.Tensor] = {}
        for client, weights in sorted(releases.items()):
            for name, tensor in _state(weights, self._names, f"client {client}'s release in round {round}").items():
                flat[f"{int(client)}/{name}"] = tensor
        charged = {e.client_id for e in events}
        # a client that trained this round (sampled, or whose release is recorded) shaped what was released: without
        # an event for it (or a client-level one for the round) it has no guarantee, never a free round (ε = 0)
        contributed = sorted({int(c) for c in releases} | set(sampled))
        unaccounted = [c for c in contributed if str(c) not in charged and SERVER not in charged]
        self._writer.write_tensors(global_file(round), state, {"kind": "global", "round": str(round)})
        if flat:
            self._writer.write_tensors(clients_file(round), flat, {"kind": "clients", "round": str(round)})
            self._has_releases = True
        self._ledger.record_all(events)
        self._ledger.record_all(PrivacyEvent.no_guarantee(c, round, "trained or released a model with no privacy event recorded")
                                for c in unaccounted)
        self._metrics.append(_round_metrics(round, sampled, metrics))
        if sampled_clients is not None or releases:
            self._observed[round] = len(sampled)
        self._round = round

    def report_epsilon(self, epsilon: float, delta: float, *, source: str, client: int | str | None = None,
                       accounted_as: FrameworkAccounting | None = None) -> None:
        """Keep an ε your framework reported (e.g. opacus's ``get_epsilon``), shown beside privaudit's own figure.

        ``accounted_as`` says what the framework's accountant composed (its method and mechanisms, in privaudit's
        terms); with it, ``compute-epsilon --checkpoint`` and reports classify the figure as a certified upper bound,
        not an upper bound for what ran, or refuted (:mod:`privaudit.accounting.reported`); without it, unverified.
        """
        value = float(epsilon)
        if math.isnan(value) or value < 0 or not 0 <= float(delta) < 1:
            raise InvalidParameterError(f"a reported ε must be ≥ 0 with δ in [0, 1), got ε={epsilon}, δ={delta}")
        if accounted_as is not None and not isinstance(accounted_as, FrameworkAccounting):
            raise InvalidParameterError("accounted_as is a privaudit.accounting.reported.FrameworkAccounting")
        entry: dict[str, Any] = {"source": str(source), "epsilon": value if math.isfinite(value) else "inf",
                                 "delta": float(delta), "client": None if client is None else str(client)}
        if accounted_as is not None:
            entry["accounted_as"] = accounted_as.to_dict()
        self._reported.append(entry)

    def set_budget(self, client: int | str, epsilon: float, delta: float) -> None:
        """A per-client (ε, δ) budget, reported against the client's accounted ε."""
        self._ledger.set_budget(client, epsilon, delta)

    def close(self) -> Path:
        """Write the manifest (once) and return the checkpoint directory."""
        if self._closed:
            return self.path
        from privaudit import __version__

        self._check_poisson_counts()

        data = self.dataset
        sizes = [len(data.partition[k]) for k in sorted(data.partition)]
        reference: dict[str, Any] = {"kind": data.kind}
        if data.kind == "packaged":
            reference["name"] = data.name
        elif data.kind == "stored":
            reference["file"] = DATA_FILE
        else:
            reference["description"] = data.description
        manifest = {
            "schema": SCHEMA,
            "privaudit_version": __version__,
            "created_unix": time.time(),
            "algorithm": {"name": self.algorithm, "recorded": True},
            "config": {"rounds": self._round, **{k: v for k, v in self._config.items() if k != "rounds"}},
            "model": {
                "name": self._architecture["name"] if self._architecture["kind"] == REGISTRY else None,
                "architecture": self._architecture,
                "input_shape": list(data.input_shape),
                "num_classes": data.num_classes,
                "parameters": self._shapes,
                "trainable": self._trainable,
                "execution": "recorded",
            },
            "seeds": {} if self.seed is None else {"seed": int(self.seed)},
            "dataset": {
                "name": data.name,
                "num_clients": len(sizes),
                "num_classes": data.num_classes,
                "input_shape": list(data.input_shape),
                "train_size_total": int(sum(sizes)),
                "train_size_min_mean_max": [int(min(sizes)), float(np.mean(sizes)), int(max(sizes))],
                "fingerprint": data.fingerprint(),
                "records": len(data.y),
                "data_range": list(data.data_range),
                "reference": reference,
                "partition": {"file": PARTITION_FILE, "clients": len(sizes), "non_members": len(data.non_members)},
            },
            "ledger": self._ledger.to_dict(),
            "metrics": self._metrics,
            "final_accuracy": next((m["test_accuracy"] for m in reversed(self._metrics) if m.get("test_accuracy") is not None), None),
            "seconds": time.time() - self._started,
            "save_client_updates": self._has_releases,
            "recorded": {"by": RECORDER, "framework": self.framework},
            "reported_epsilon": self._reported,
        }
        try:
            self._writer.write_manifest(manifest)
            self._write_training_result()
        except OSError as exc:
            raise CheckpointError(f"cannot write the manifest in {self.path}: {exc.strerror or exc}") from None
        self._closed = True
        return self.path

    def _check_poisson_counts(self) -> None:
        """Client-level releases declared Poisson-sampled whose rounds all sampled the same number of clients are
        marked invalid, with the reason (:data:`SAMPLING_ALPHA`).

        Under Poisson sampling at rate q of K clients the number sampled is Binomial(K, q), so R rounds that all
        sample one number c have probability Σ_c P(c)^R. A loop that draws a fixed number (``random.sample``) does so
        every round; its guarantee is the fixed-size one, far weaker. An invalid event rather than a refusal: the run
        is kept (attacks and reports still read it) and ``compute-epsilon`` states no guarantee and says why.
        """
        clients = len(self.dataset.partition)
        groups: dict[float, list[int]] = {}
        for event in self._ledger.events:
            m = event.mechanism
            if (event.client_id == SERVER and isinstance(m, SubsampledGaussian) and m.sampling is Sampling.POISSON
                    and m.sample_rate < 1 and event.round in self._observed):
                groups.setdefault(m.sample_rate, []).append(event.round)
        flagged: dict[tuple[float, int], str] = {}
        for q, rounds in groups.items():
            rounds = sorted(set(rounds))
            counts = {self._observed[r] for r in rounds}
            if len(rounds) < 2 or len(counts) != 1:
                continue
            p = _all_equal_probability(clients, q, len(rounds))
            if p >= SAMPLING_ALPHA:
                continue
            (count,) = counts
            reason = (f"declared Poisson sampling of clients at q = {q:g}, but all {len(rounds)} such rounds sampled "
                      f"exactly {count} of the {clients} clients (probability {p:.2g} under Poisson sampling): the loop "
                      "samples a fixed number, whose guarantee is the fixed-size one (sampling='fixed-size'; "
                      "compute-epsilon --mechanism subsampled-gaussian --sampling fixed-size gives it)")
            flagged.update({(q, r): reason for r in rounds})
        if not flagged:
            return
        from dataclasses import replace

        def checked(event: PrivacyEvent) -> PrivacyEvent:
            m = event.mechanism
            if event.client_id != SERVER or not isinstance(m, SubsampledGaussian) or m.sampling is not Sampling.POISSON:
                return event
            reason = flagged.get((m.sample_rate, event.round))
            if reason is None:
                return event
            return replace(event, valid=False, note="; ".join(n for n in (event.note, reason) if n))

        self._ledger.events = [checked(e) for e in self._ledger.events]

    def _write_training_result(self) -> None:
        """``training.json`` beside the manifest, as ``privaudit train`` writes it (accuracy per round, for reports)."""
        from privaudit.fl.engine.checkpoint import TRAINING_RESULT, read_manifest
        from privaudit.report.producers import training_result
        from privaudit.report.results import write_result

        write_result(self.path / TRAINING_RESULT, training_result(read_manifest(self.path), self.path))

    def __enter__(self) -> FederationRecorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()


def _all_equal_probability(clients: int, q: float, rounds: int) -> float:
    """P(``rounds`` independent Binomial(``clients``, q) draws are all equal) = Σ_c P(c)^rounds."""
    total = 0.0
    for c in range(clients + 1):
        log_p = (math.lgamma(clients + 1) - math.lgamma(c + 1) - math.lgamma(clients - c + 1)
                 + c * math.log(q) + (clients - c) * math.log1p(-q))
        total += math.exp(rounds * log_p)
    return min(1.0, total)


def _events(release: Release, round: int) -> list[PrivacyEvent]:
    events = privacy_events(release, round)
    for event in events:
        if event.round != round:
            raise InvalidParameterError(f"a PrivacyEvent of round {event.round} was given to round {round}")
    return events


_METRIC_FIELDS = ("train_loss", "test_accuracy", "test_loss", "global_train_loss", "personalised_accuracy")


def _round_metrics(round: int, sampled: list[int], metrics: Mapping[str, float] | None) -> dict[str, Any]:
    values = dict(metrics or {})
    if "accuracy" in values and "test_accuracy" not in values:
        values["test_accuracy"] = values.pop("accuracy")
    out: dict[str, Any] = {"round": round, "trained": bool(sampled), "clients": sampled}
    other = {}
    for name, value in values.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise InvalidParameterError(f"metric {name!r} of round {round} must be a number, got {value!r}") from None
        number_or_none = number if math.isfinite(number) else None
        if name in _METRIC_FIELDS:
            out[name] = number_or_none
        else:
            other[str(name)] = number_or_none
    if other:
        out["other"] = other
    return out
