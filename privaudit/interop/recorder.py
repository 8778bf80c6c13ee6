"""Record a federation trained by your own loop as a privaudit checkpoint.

Public API (stable; typed; :class:`DatasetReference` lives in :mod:`privaudit.interop.dataset_reference`, the releases
in :mod:`privaudit.interop.releases`, all importable from :mod:`privaudit.interop`)::

    DatasetReference.packaged(name, *, partition, non_members=()) -> DatasetReference
    DatasetReference.from_arrays(name, x, y, *, partition, non_members=(), store=True,
                                 num_classes=None, data_range=None) -> DatasetReference
    ModelFactory(factory: str, kwargs: Mapping[str, Any] = {})            # "package.module:function"
    GaussianRelease(clients, *, noise_multiplier=None, noise_std=None, clip, sensitivity=None, sample_rate=1.0,
                    sampling=None, steps=1, level="record", assumptions=(), note="")   # sampling: required when q < 1
    NoDP(clients, reason="no calibrated noise")
    privacy_events(release, round) -> list[PrivacyEvent]                  # GaussianRelease | NoDP | PrivacyEvent

    FederationRecorder(out_dir, *, model: nn.Module, dataset: DatasetReference, **options)   # RecordingOptions:
                       architecture: str | ModelFactory | None = None, algorithm: str = "custom",
                       seed: int | None = None, neighbouring: Neighbouring | str = "add_remove", overwrite: bool = False,
                       config: Mapping[str, Any] | None = None, framework: str | None = None,
                       local_training: Mapping[str, Any] | None = None
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

**The data** (:mod:`privaudit.interop.dataset_reference`): which records each client trained on, and which no client
saw, fingerprinted.

**Privacy** (:mod:`privaudit.interop.releases`): each round's releases in your terms, privaudit ledger events in the
manifest. A client that trained in a round (``sampled_clients``, or a recorded release) with no event for it is
recorded as *no DP guarantee* for that client (ε = ∞), never as free — unless the round has a client-level
(``"server"``) event: central DP protects what the trusted server publishes, and the client releases recorded beside it
are what that server saw, not something the guarantee covers. ``report_epsilon`` keeps what your framework claimed
(e.g. opacus's own ε), shown beside privaudit's figure and — given what its accountant composed (``accounted_as``) —
classified as a certified upper bound, not an upper bound for what ran, or refuted
(:mod:`privaudit.accounting.reported`). Client-level releases declared Poisson whose rounds all sampled the same number
of clients are marked invalid with the reason when the recorder closes (:mod:`privaudit.interop.recorder_checks`).

**Checked early.** The architecture, the model against the dataset's records and ``out_dir`` are checked when the
recorder is created, so create it before your loop trains: a custom module without ``architecture=`` is refused
before the first round, never after the last.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import torch
from torch import nn

from privaudit import __version__
from privaudit.accounting.ledger import SERVER, PrivacyEvent, PrivacyLedger
from privaudit.accounting.mechanisms import Neighbouring
from privaudit.accounting.reported import FrameworkAccounting
from privaudit.errors import CheckpointError, InvalidParameterError
from privaudit.fl.engine.architecture import (
    FACTORY,
    REGISTRY,
    SEQUENTIAL,
    check_factory_name,
    describe_sequential,
)
from privaudit.fl.engine.checkpoint import (
    SCHEMA,
    TRAINING_RESULT,
    CheckpointWriter,
    clients_file,
    global_file,
    read_manifest,
)
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.engine.params import model_state
from privaudit.fl.engine.recorded_data import DATA_FILE, PARTITION_FILE
from privaudit.interop.dataset_reference import DatasetReference
from privaudit.interop.recorder_checks import poisson_count_check
from privaudit.interop.releases import GaussianRelease, NoDP, Release, round_events
from privaudit.models import model_names
from privaudit.report.producers import training_result
from privaudit.report.results import write_result

__all__ = ["FederationRecorder", "ModelFactory", "RecordingOptions"]

#: The ``recorded`` section's marker: which privaudit module wrote the checkpoint.
RECORDER = "privaudit.interop.recorder"


@dataclass(frozen=True)
class ModelFactory:
    """A function of your code, ``"package.module:function"``, that returns the model when called with ``kwargs``
    (JSON values). Readers import it only when told to trust it (see the module docstring)."""

    factory: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_factory_name(self.factory)
        object.__setattr__(self, "kwargs", dict(self.kwargs))


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
        if architecture not in model_names():
            raise InvalidParameterError(f"unknown privaudit model {architecture!r}; name one of {', '.join(model_names())}, pass "
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


@dataclass(frozen=True)
class RecordingOptions:
    """What a :class:`FederationRecorder` records besides the model and its data: each field is a keyword of the
    recorder (``FederationRecorder(out, model=…, dataset=…, seed=0, overwrite=True)``).

    ``architecture``: how readers rebuild the model (module docstring, *The model*); ``algorithm``: the name the
    manifest gives the training; ``neighbouring``: the relation the ledger's guarantees are stated for; ``overwrite``:
    replace an existing checkpoint in ``out_dir``; ``config``: any other settings (JSON values); ``framework``: what
    trained it (e.g. ``"flwr"``); ``local_training`` (``{"lr", "epochs", "batch_size", "momentum"}``): what your
    clients ran locally, which ``attack inversion --checkpoint`` simulates.
    """

    architecture: str | ModelFactory | None = None
    algorithm: str = "custom"
    seed: int | None = None
    neighbouring: Neighbouring | str = Neighbouring.ADD_REMOVE
    overwrite: bool = False
    config: Mapping[str, Any] | None = None
    framework: str | None = None
    local_training: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> RecordingOptions:
        """The options given by keyword; an unknown keyword is one :class:`~privaudit.errors.InvalidParameterError`."""
        unknown = sorted(set(options) - {f.name for f in fields(cls)})
        if unknown:
            raise InvalidParameterError(f"FederationRecorder takes no option {', '.join(unknown)}; its options are "
                                        f"{', '.join(f.name for f in fields(cls))}")
        return cls(**options)

    def local_config(self) -> dict[str, Any] | None:
        """``local_training`` checked as a :class:`~privaudit.fl.engine.config.LocalTrainingConfig` (JSON values)."""
        if self.local_training is None:
            return None
        try:
            return asdict(LocalTrainingConfig(**dict(self.local_training)))
        except TypeError as exc:
            raise InvalidParameterError(f"local_training takes lr, epochs, batch_size, momentum: {exc}") from None


class FederationRecorder:
    """Writes a privaudit checkpoint from your own training loop (see the module docstring for the API).

    Tensor files are written as rounds are recorded; ``manifest.json`` is written last by :meth:`close` (or on
    leaving a ``with`` block without an exception: after an exception nothing is finalised, so a half-recorded
    run is never mistaken for a checkpoint). ``out_dir`` is checked now: an existing checkpoint is refused unless
    ``overwrite``. The keyword ``options`` are those of :class:`RecordingOptions`.
    """

    def __init__(self, out_dir: str | os.PathLike, *, model: nn.Module, dataset: DatasetReference, **options: Any) -> None:
        settings = RecordingOptions.of(options)
        if not isinstance(model, nn.Module):
            raise InvalidParameterError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(dataset, DatasetReference):
            raise InvalidParameterError("dataset must be a DatasetReference (DatasetReference.packaged or .from_arrays)")
        self._architecture = _architecture(model, settings.architecture)
        self._writer = CheckpointWriter(out_dir, overwrite=settings.overwrite)
        self._ledger = PrivacyLedger(neighbouring=settings.neighbouring)
        self.dataset, self.algorithm, self.seed = dataset, str(settings.algorithm), settings.seed
        self.framework = settings.framework
        self._config = dict(settings.config or {})
        local = settings.local_config()  # what gradient inversion's attacker simulates: lr, epochs, batch_size, momentum
        if local is not None:
            self._config["local"] = local
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
        events = [e for release in privacy_events for e in round_events(release, round)]
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
        self._ledger.events = poisson_count_check(self._ledger.events, self._observed, len(self.dataset.partition))
        manifest = self._manifest()
        try:
            self._writer.write_manifest(manifest)
            self._write_training_result()
        except OSError as exc:
            raise CheckpointError(f"cannot write the manifest in {self.path}: {exc.strerror or exc}") from None
        self._closed = True
        return self.path

    def _manifest(self) -> dict[str, Any]:
        """The checkpoint manifest (schema :data:`~privaudit.fl.engine.checkpoint.SCHEMA`) of what was recorded."""
        data = self.dataset
        sizes = [len(data.partition[k]) for k in sorted(data.partition)]
        reference: dict[str, Any] = {"kind": data.kind}
        if data.kind == "packaged":
            reference["name"] = data.name
        elif data.kind == "stored":
            reference["file"] = DATA_FILE
        else:
            reference["description"] = data.description
        return {
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

    def _write_training_result(self) -> None:
        """``training.json`` beside the manifest, as ``privaudit train`` writes it (accuracy per round, for reports)."""
        write_result(self.path / TRAINING_RESULT, training_result(read_manifest(self.path), self.path))

    def __enter__(self) -> FederationRecorder:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            self.close()



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
