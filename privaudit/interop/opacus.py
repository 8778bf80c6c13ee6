"""An opacus run's privacy, as privaudit privacy events: re-accounted by privaudit's tight accountants.

opacus (``opacus.PrivacyEngine``) keeps the DP-SGD steps it took in ``engine.accountant.history``: a list of
``(noise_multiplier, sample_rate, num_steps)``, consecutive steps with the same σ and q merged into one entry
(pytorch/opacus@v1.6.0:opacus/accountants/rdp.py, ``RDPAccountant.step``, a release tag; the PRV and GDP accountants
keep the same history; early releases named it ``steps``, e.g. pytorch/opacus@0c2e420:opacus/accountants/rdp.py).
Each entry is ``num_steps`` runs of the subsampled Gaussian mechanism: Poisson sampling at rate q (opacus's
``DPDataLoader``, the default ``poisson_sampling=True``) of per-example gradients clipped to ``max_grad_norm`` C, with
noise std σ·C (Abadi et al. 2016, "Deep Learning with Differential Privacy", Algorithm 1). privaudit records them
as :class:`~privaudit.interop.releases.GaussianRelease` values — ``SubsampledGaussian(σ, q)`` × steps, charged to the
client whose records the engine protected — and keeps opacus's own ``get_epsilon(δ)`` beside them with what its
accountant composed (:class:`~privaudit.accounting.reported.FrameworkAccounting`), so
``privaudit compute-epsilon --checkpoint DIR`` shows both figures and classifies opacus's: its ``rdp`` and ``prv``
accountants (``PrivacyEngine()``'s default in opacus 1.6 is ``prv``, whose ``get_epsilon`` returns the upper end of
its interval) give certified upper bounds for Poisson-sampled DP-SGD — what the history describes, *if* the loader
really Poisson-samples, as opacus's ``DPDataLoader`` does (``make_private``'s default ``poisson_sampling=True``;
pass ``data_loader=`` and it is checked); its ``gdp`` accountant is a central-limit approximation, not a bound.

API::

    OpacusRecorder(out_dir, *, model, dataset, **recorder_options)   # before training: checks the model, data, out_dir
        .finish(*, model, engine, delta, clip=None, optimizer=None, data_loader=None) -> Path   # after training
    OpacusTap(engine, *, client: int | str = 0, clip: float | None = None, optimizer=None,
              sampling: Sampling | str = "poisson", data_loader=None)
        .new_releases() -> list[GaussianRelease]     # the steps taken since the previous call (or since the start)
        .report(recorder, delta) -> float             # opacus's own ε at δ, kept in the checkpoint; returns it
    history_releases(history, *, client=0, clip) -> list[GaussianRelease]   # a whole history at once
    record_opacus_run(out_dir, *, model, dataset, engine, delta, clip=None, optimizer=None, data_loader=None,
                      **recorder_options) -> Path

:class:`OpacusRecorder` and ``record_opacus_run`` write a one-round checkpoint of an ordinary (not federated) opacus
run: one client holding ``dataset``'s partition 0. Create the :class:`OpacusRecorder` *before* training: a model
whose architecture cannot be recorded (a custom ``nn.Module`` without ``architecture=ModelFactory(...)``), a model
that does not fit the data or an occupied ``out_dir`` is refused before any step is taken. ``record_opacus_run``
(everything after training, in one call) cannot check that early; when it fails it keeps the trained weights and
opacus's history in a named folder (``<out_dir>.unrecorded``) and says so, so a run is never lost. In a federation
where each client runs its own engine, keep one :class:`OpacusTap` per client and pass ``tap.new_releases()`` to
``record_round`` every round.

opacus is not imported here: the engine, its accountant, the optimizer and the model are read through the protocols
below (:class:`OpacusAccountant`, :class:`OpacusEngine`, :class:`ReportsEpsilon`, :class:`ClippingOptimizer`,
:class:`GradSampleWrapper`: the members of opacus's classes that are used, pytorch/opacus@v1.6.0).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from privaudit.accounting.mechanisms import Gaussian, Neighbouring, Sampling, SubsampledGaussian
from privaudit.accounting.reported import FrameworkAccounting
from privaudit.errors import InvalidParameterError, PrivauditError
from privaudit.interop.dataset_reference import DatasetReference
from privaudit.interop.recorder import FederationRecorder
from privaudit.interop.releases import GaussianRelease

__all__ = ["OpacusRecorder", "OpacusTap", "history_releases", "record_opacus_run"]

#: opacus accountants whose ``get_epsilon`` is a certified upper bound for the mechanisms they compose
#: (pytorch/opacus@v1.6.0:opacus/accountants/rdp.py, prv.py — prv returns the upper end of its interval) ...
_UPPER_BOUNDS = ("rdp", "prv")
#: ... and those that approximate (opacus/accountants/gdp.py: the central-limit μ-GDP approximation of Poisson
#: subsampled Gaussians, Bu, Dong, Long & Su 2020; not a bound at small q or few steps).
_APPROXIMATIONS = ("gdp",)


@runtime_checkable
class OpacusAccountant(Protocol):
    """An opacus accountant as read here: its ``history`` of ``(noise_multiplier, sample_rate, num_steps)``
    (pytorch/opacus@v1.6.0:opacus/accountants/accountant.py, ``IAccountant``)."""

    history: Sequence[Sequence[float]]


@runtime_checkable
class OpacusEngine(Protocol):
    """An opacus ``PrivacyEngine`` as read here: its ``accountant`` (pytorch/opacus@v1.6.0:opacus/privacy_engine.py)."""

    accountant: OpacusAccountant


@runtime_checkable
class ReportsEpsilon(Protocol):
    """An engine or accountant with opacus's ``get_epsilon(delta)``."""

    def get_epsilon(self, delta: float) -> float: ...


@runtime_checkable
class NamedAccountant(Protocol):
    """An accountant that names its method (``mechanism()``: ``rdp``, ``prv``, ``gdp``)."""

    def mechanism(self) -> str: ...


@runtime_checkable
class ClippingOptimizer(Protocol):
    """opacus's ``DPOptimizer`` as read here: its clip C (pytorch/opacus@v1.6.0:opacus/optimizers/optimizer.py)."""

    max_grad_norm: float


@runtime_checkable
class GradSampleWrapper(Protocol):
    """opacus's ``GradSampleModule``, which wraps the user's module (pytorch/opacus@v1.6.0:opacus/grad_sample/gsm_base.py,
    ``to_standard_module``)."""

    def to_standard_module(self) -> Any: ...


def _entries(history: Any) -> list[tuple[float, float, int]]:
    try:
        entries = [(float(s), float(q), int(n)) for s, q, n in history]
    except (TypeError, ValueError):
        raise InvalidParameterError("an opacus accountant history is a list of (noise_multiplier, sample_rate, num_steps)") from None
    for sigma, q, n in entries:
        if not (sigma > 0 and math.isfinite(sigma)) or not 0 < q <= 1 or n < 1:
            raise InvalidParameterError(f"opacus history entry (σ={sigma}, q={q}, steps={n}) is not a DP-SGD step record")
    return entries


def history_releases(history: Iterable[Sequence[float]], *, client: int | str = 0, clip: float,
                     sampling: Sampling | str = Sampling.POISSON) -> list[GaussianRelease]:
    """The releases of a whole opacus accountant history: one :class:`GaussianRelease` per entry."""
    sampling = Sampling.parse(sampling)
    return [GaussianRelease([client], noise_multiplier=sigma, clip=clip, sensitivity=clip, sample_rate=q, sampling=sampling, steps=n,
                            assumptions=("imported from an opacus accountant history (DP-SGD, per-example clipping)",
                                         f"{sampling.value} sampling of each step's batch: opacus's DPDataLoader, make_private's default "
                                         "poisson_sampling=True (a shuffled DataLoader is neither, and its ε is not this one)"))
            for sigma, q, n in _entries(history)]


def _accountant(engine: OpacusEngine | OpacusAccountant) -> OpacusAccountant:
    accountant = engine.accountant if isinstance(engine, OpacusEngine) else engine
    if not isinstance(accountant, OpacusAccountant):
        raise InvalidParameterError("expected an opacus PrivacyEngine (or its accountant): it has no accountant.history")
    return accountant


def _clip(clip: float | None, optimizer: ClippingOptimizer | None) -> float:
    if clip is None and isinstance(optimizer, ClippingOptimizer):
        clip = optimizer.max_grad_norm
    if clip is None:
        raise InvalidParameterError("the clip C is not in opacus's accountant: pass clip=max_grad_norm or optimizer=<the DPOptimizer>")
    try:
        value = float(clip)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"the clip C must be a number (opacus's max_grad_norm), got {clip!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"the clip C must be positive, got {clip!r}")
    return value


def _check_loader(data_loader: Any, sampling: Sampling) -> None:
    """A loader that is not opacus's ``DPDataLoader`` does not Poisson-sample: refused when Poisson is declared."""
    if data_loader is None or sampling is not Sampling.POISSON:
        return
    try:
        from opacus.data_loader import DPDataLoader
    except ImportError:  # pragma: no cover - opacus is what produced the engine
        return
    if not isinstance(data_loader, DPDataLoader):
        raise InvalidParameterError(
            f"the data loader is a {type(data_loader).__name__}, not opacus's DPDataLoader, so its batches are not "
            "Poisson-sampled (make_private(..., poisson_sampling=False)?): opacus's ε and privaudit's accounting both "
            "assume Poisson sampling; train with make_private's default poisson_sampling=True")


class OpacusTap:
    """Reads the DP-SGD steps an opacus engine took since it was last asked, as privaudit releases."""

    def __init__(self, engine: Any, *, client: int | str = 0, clip: float | None = None, optimizer: Any = None,
                 sampling: Sampling | str = Sampling.POISSON, data_loader: Any = None) -> None:
        sampling = Sampling.parse(sampling)
        _check_loader(data_loader, sampling)
        self.engine, self.client, self.sampling = engine, client, sampling
        self.accountant = _accountant(engine)
        self.clip = _clip(clip, optimizer)
        self._seen: list[tuple[float, float, int]] = []

    def new_releases(self) -> list[GaussianRelease]:
        """Releases for the steps recorded in the history since the previous call.

        opacus only appends entries or grows the last one, so the new steps are the growth of each entry past
        what was seen."""
        current = _entries(self.accountant.history)
        if len(current) < len(self._seen) or any(n < seen[2] for (_, _, n), seen in zip(current, self._seen, strict=False)):
            raise InvalidParameterError("the opacus history was rewritten between two calls (a new accountant?)")
        fresh = []
        for i, (sigma, q, n) in enumerate(current):
            before = self._seen[i][2] if i < len(self._seen) and self._seen[i][:2] == (sigma, q) else 0
            if i < len(self._seen) and self._seen[i][:2] != (sigma, q):
                raise InvalidParameterError("the opacus history was rewritten between two calls (a new accountant?)")
            if n > before:
                fresh.append((sigma, q, n - before))
        self._seen = current
        return history_releases(fresh, client=self.client, clip=self.clip, sampling=self.sampling)

    def epsilon(self, delta: float) -> float:
        """opacus's own ε at ``delta`` (its accountant: rdp, prv or gdp)."""
        source = self.engine if isinstance(self.engine, ReportsEpsilon) else self.accountant
        if not isinstance(source, ReportsEpsilon):
            raise InvalidParameterError("the opacus engine and its accountant have no get_epsilon(delta)")
        return float(source.get_epsilon(delta))

    def method(self) -> str:
        """The opacus accountant's name (``rdp``, ``prv``, ``gdp``; its class name for others)."""
        accountant = self.accountant
        return str(accountant.mechanism()) if isinstance(accountant, NamedAccountant) else type(accountant).__name__

    def source(self) -> str:
        try:
            version = metadata.version("opacus")
        except metadata.PackageNotFoundError:  # pragma: no cover - a vendored opacus
            version = "?"
        return f"opacus {version} ({self.method()} accountant)"

    def accounting(self) -> FrameworkAccounting | None:
        """What opacus's accountant composed: every history entry as (σ, q) Poisson-subsampled Gaussian steps under
        add/remove neighbours (``None`` for an accountant privaudit does not know)."""
        method = self.method()
        if method not in _UPPER_BOUNDS + _APPROXIMATIONS:
            return None
        steps = [(Gaussian(sigma) if q >= 1 else SubsampledGaussian(sigma, q, Sampling.POISSON), n)
                 for sigma, q, n in _entries(self.accountant.history)]
        return FrameworkAccounting(
            method, tuple(steps), Neighbouring.ADD_REMOVE, "upper" if method in _UPPER_BOUNDS else "approximation",
            model="opacus composes every step as a Poisson-subsampled Gaussian at the history's (σ, q)",
            caveat="opacus accounts every step as Poisson sampling at rate q (its DPDataLoader, make_private's default "
                   "poisson_sampling=True); batches drawn otherwise are another mechanism, which its figure does not bound")

    def report(self, recorder: FederationRecorder, delta: float) -> float:
        """Keep opacus's own ε at ``delta`` in the checkpoint, with what its accountant composed (shown and classified by
        ``compute-epsilon --checkpoint`` and reports); returns it."""
        value = self.epsilon(delta)
        recorder.report_epsilon(value, delta, source=self.source(), client=self.client, accounted_as=self.accounting())
        return value


def _module(model: Any) -> Any:
    """The user's module: opacus's ``GradSampleModule`` unwrapped, any other model as it is."""
    return model.to_standard_module() if isinstance(model, GradSampleWrapper) else model


def _one_client(dataset: DatasetReference) -> None:
    if not isinstance(dataset, DatasetReference):
        raise InvalidParameterError("dataset must be a DatasetReference (DatasetReference.packaged or .from_arrays)")
    if sorted(dataset.partition) != [0]:
        raise InvalidParameterError("an opacus run trains one dataset: the DatasetReference's partition is {0: training rows}")


class OpacusRecorder:
    """Records one (non-federated) opacus run: created before training, finished after it.

    Creating it checks everything that does not need the trained model — that the model's architecture can be
    recorded (``architecture=``, as for :class:`~privaudit.interop.recorder.FederationRecorder`), that it takes the
    dataset's records, that ``out_dir`` may be written — so a mistake is reported before the first step.
    """

    def __init__(self, out_dir: str | os.PathLike, *, model: Any, dataset: DatasetReference, **recorder_options: Any) -> None:
        _one_client(dataset)
        options = {"algorithm": "dp-sgd", **recorder_options}
        self.recorder = FederationRecorder(out_dir, model=_module(model), dataset=dataset, **options)

    @property
    def path(self) -> Path:
        return self.recorder.path

    def finish(self, *, model: Any, engine: Any, delta: float, clip: float | None = None, optimizer: Any = None,
               data_loader: Any = None) -> Path:
        """Record the trained ``model`` and the engine's steps as round 1, keep opacus's ε at ``delta``, write the manifest."""
        tap = OpacusTap(engine, client=0, clip=clip, optimizer=optimizer, data_loader=data_loader)
        self.recorder.framework = tap.source()
        module = _module(model)
        self.recorder.record_round(1, global_model=module, privacy_events=tap.new_releases(), sampled_clients=[0])
        tap.report(self.recorder, delta)
        return self.recorder.close()


def record_opacus_run(out_dir: str | os.PathLike, *, model: Any, dataset: DatasetReference, engine: Any, delta: float,
                      clip: float | None = None, optimizer: Any = None, data_loader: Any = None,
                      **recorder_options: Any) -> Path:
    """Write a finished (non-federated) opacus run as a one-round, one-client privaudit checkpoint.

    ``dataset``'s partition must hold one client (0: the records the engine trained on); ``model`` is the trained
    module (opacus's ``GradSampleModule`` is unwrapped to the module it wraps). Prefer :class:`OpacusRecorder`, which
    checks before training; when this call fails, the trained weights and opacus's history are kept in
    ``<out_dir>.unrecorded`` and the error names that folder.
    """
    try:
        return OpacusRecorder(out_dir, model=model, dataset=dataset, **recorder_options).finish(
            model=model, engine=engine, delta=delta, clip=clip, optimizer=optimizer, data_loader=data_loader)
    except PrivauditError as exc:
        kept = _keep_run(out_dir, model, engine)
        if kept is None:
            raise
        raise type(exc)(f"{exc} — the trained run is kept in {kept} (weights.safetensors, opacus-history.json); fix the "
                        "cause and record it again, or create an OpacusRecorder before training next time") from None


def _keep_run(out_dir: str | os.PathLike, model: Any, engine: Any) -> Path | None:
    """Save the trained weights (safetensors) and opacus's accountant history (JSON) beside ``out_dir``; ``None`` when
    even that cannot be written."""
    import json

    import torch
    from safetensors.torch import save_file

    target = Path(f"{Path(out_dir)}.unrecorded")
    try:
        target.mkdir(parents=True, exist_ok=True)
        module = _module(model)
        state = {k: v.detach().to("cpu").contiguous().clone() for k, v in module.state_dict().items()
                 if isinstance(v, torch.Tensor)}
        save_file(state, str(target / "weights.safetensors"), metadata={"kind": "unrecorded opacus run"})
        try:
            history = [list(entry) for entry in _entries(_accountant(engine).history)]
        except PrivauditError:
            history = None
        (target / "opacus-history.json").write_text(json.dumps({"history": history, "model": type(module).__name__},
                                                                indent=1) + "\n")
    except (OSError, RuntimeError, ValueError):
        return None
    return target
