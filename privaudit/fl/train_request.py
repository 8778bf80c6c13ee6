"""What ``privaudit train`` asks, as one checked value, and the library function that runs it.

A :class:`TrainRequest` is a :class:`~privaudit.fl.run.TrainSpec` still to be completed — the local-training settings
and the execution mode left open take the algorithm's own defaults for its privacy mode and options (its spec's
``train_defaults``, :mod:`privaudit.fl.algorithms.registry`), else :data:`TRAIN_DEFAULTS` — plus where the checkpoint
goes and how the run uses this machine. Making it checks every field before any data is loaded (one
:class:`~privaudit.errors.InvalidParameterError` each, ``--out`` included); :func:`run_request` trains through the one
entry point :func:`privaudit.fl.run.run_training`. Torch is imported when the run starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privaudit.accounting.mechanisms import Sampling
from privaudit.device import resolve_device
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.registry import algorithm_spec
from privaudit.fl.engine.config import LocalTrainingConfig
from privaudit.fl.run import TrainSpec, run_training
from privaudit.request_checks import check_out_folder, check_threads, check_workers

#: ``train``'s settings where neither the request nor the algorithm's spec (``train_defaults``) gives one.
TRAIN_DEFAULTS: Mapping[str, Any] = {"local_epochs": 10, "batch_size": 32, "lr": 0.01, "momentum": 0.5, "execution": "auto",
                                     "sampling": Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT}


@dataclass(frozen=True)
class TrainRequest:
    """One training run. ``local_epochs``, ``batch_size``, ``lr``, ``momentum``, ``execution`` and ``sampling`` left
    ``None`` are completed as the module docstring says; ``classes_per_client`` N is the partition ``classes:N``;
    ``dataset_options`` are ``KEY=VALUE`` texts (numbers and true/false read as such). ``out`` receives the checkpoint
    (``overwrite`` replaces one there), with every client release when ``save_client_updates``; ``threads`` torch
    intra-op threads. Checked and completed when made: :attr:`spec` is the run's :class:`TrainSpec`."""

    algorithm: str | None = None
    dataset: str | None = None
    rounds: int | None = None
    model: str | None = None
    privacy: str = "none"
    algorithm_options: Mapping[str, Any] = field(default_factory=dict)
    privacy_options: Mapping[str, Any] = field(default_factory=dict)
    clients_per_round: float = 1.0
    sampling: str | Sampling | None = None
    stragglers: float = 0.0
    local_epochs: int | None = None
    batch_size: int | None = None
    lr: float | None = None
    momentum: float | None = None
    double_softmax: bool = False
    execution: str | None = None
    seed: int = 0
    data_seed: int = 0
    num_clients: int | None = None
    partition: str | None = None
    classes_per_client: int | None = None
    dataset_options: tuple[str, ...] = ()
    eval_every: int = 1
    eval_train_loss: bool = False
    device: str = "cpu"
    workers: int = 1
    threads: int = 1
    out: Path | None = None
    save_client_updates: bool = False
    overwrite: bool = False
    spec: TrainSpec = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        missing = [flag for flag, value in (("--algorithm", self.algorithm), ("--dataset", self.dataset),
                                            ("--rounds", self.rounds)) if value is None]
        if missing:
            raise InvalidParameterError(f"train needs {', '.join(missing)} (or --list)")
        check_threads(self.threads)
        check_workers(self.workers, self.num_clients)
        if self.out is not None:  # before any data is loaded or model built
            check_out_folder(self.out)
        resolve_device(self.device)  # an absent device is one line, before any data is loaded
        object.__setattr__(self, "spec", self._spec())

    def _settings(self) -> dict[str, Any]:
        """The settings of :data:`TRAIN_DEFAULTS` given, else the algorithm's defaults (for its privacy mode and
        options), else train's."""
        assert self.algorithm is not None
        brought = algorithm_spec(self.algorithm).defaults(self.privacy, dict(self.algorithm_options))
        given = {"local_epochs": self.local_epochs, "batch_size": self.batch_size, "lr": self.lr, "momentum": self.momentum,
                 "execution": self.execution, "sampling": self.sampling}
        defaults = {**TRAIN_DEFAULTS, **{k: v for k, v in brought.items() if k in TRAIN_DEFAULTS}}
        return {k: given[k] if given[k] is not None else defaults[k] for k in TRAIN_DEFAULTS}

    def _spec(self) -> TrainSpec:
        assert self.algorithm is not None and self.dataset is not None and self.rounds is not None
        settings = self._settings()
        partition = self.partition
        if self.classes_per_client is not None:
            if partition is not None:
                raise InvalidParameterError("give either --classes-per-client N or --partition, not both")
            partition = f"classes:{self.classes_per_client}"
        local = LocalTrainingConfig(epochs=settings["local_epochs"], batch_size=settings["batch_size"], lr=settings["lr"],
                                    momentum=settings["momentum"], double_softmax=self.double_softmax)
        return TrainSpec(
            algorithm=self.algorithm, dataset=self.dataset, rounds=self.rounds, model=self.model,
            algorithm_options=dict(self.algorithm_options), privacy=self.privacy, privacy_options=dict(self.privacy_options),
            local=local, clients_per_round=self.clients_per_round, sampling=Sampling.parse(settings["sampling"]).value,
            stragglers=self.stragglers, seed=self.seed, data_seed=self.data_seed, num_clients=self.num_clients,
            partition=partition, dataset_options=dataset_options(self.dataset_options), execution=settings["execution"],
            device=self.device, workers=self.workers, eval_every=self.eval_every, eval_train_loss=self.eval_train_loss)


def dataset_options(items: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` texts as dataset options: integers, floats and true/false as such, anything else as text."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise InvalidParameterError(f"--dataset-option takes KEY=VALUE, got {item!r}")
        value: Any = text.strip()
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        if text.strip().lower() in ("true", "false"):
            value = text.strip().lower() == "true"
        out[key.strip()] = value
    return out


def run_request(request: TrainRequest, *, progress: bool = True) -> Any:
    """Train ``request.spec`` on ``request.threads`` torch threads and write its checkpoint to ``request.out``; returns
    the :class:`~privaudit.fl.engine.round_loop.FederationResult`."""
    import torch  # the training stack loads when a run starts, not when a request is checked

    torch.set_num_threads(request.threads)
    return run_training(request.spec, request.out, save_client_updates=request.save_client_updates,
                        overwrite=request.overwrite, progress=progress)
