"""An opacus run's privacy, as privaudit privacy events: re-accounted by privaudit's tight accountants.

opacus (``opacus.PrivacyEngine``) keeps the DP-SGD steps it took in ``engine.accountant.history``: a list of
``(noise_multiplier, sample_rate, num_steps)``, consecutive steps with the same σ and q merged into one entry
(pytorch/opacus@v1.6.0:opacus/accountants/rdp.py, ``RDPAccountant.step``, a release tag; the PRV and GDP accountants
keep the same history; early releases named it ``steps``, e.g. pytorch/opacus@0c2e420:opacus/accountants/rdp.py).
Each entry is ``num_steps`` runs of the subsampled Gaussian mechanism: Poisson sampling at rate q (opacus's
``DPDataLoader``, the default ``poisson_sampling=True``) of per-example gradients clipped to ``max_grad_norm`` C, with
noise std σ·C (Abadi et al. 2016, "Deep Learning with Differential Privacy", Algorithm 1). privaudit records them
as :class:`~privaudit.interop.recorder.GaussianRelease` values — ``SubsampledGaussian(σ, q)`` × steps, charged to the
client whose records the engine protected — and keeps opacus's own ``get_epsilon(δ)`` beside them, so
``privaudit compute-epsilon --checkpoint DIR`` shows both figures.

API::

    OpacusTap(engine, *, client: int | str = 0, clip: float | None = None, optimizer=None, sampling="poisson")
        .new_releases() -> list[GaussianRelease]     # the steps taken since the previous call (or since the start)
        .report(recorder, delta) -> float             # opacus's own ε at δ, kept in the checkpoint; returns it
    history_releases(history, *, client=0, clip) -> list[GaussianRelease]   # a whole history at once
    record_opacus_run(out_dir, *, model, dataset, engine, delta, clip=None, optimizer=None, **recorder_options) -> Path

``record_opacus_run`` writes a one-round checkpoint of an ordinary (not federated) opacus run: one client holding
``dataset``'s partition 0. In a federation where each client runs its own engine, keep one :class:`OpacusTap` per
client and pass ``tap.new_releases()`` to ``record_round`` every round.

opacus is not imported here: the engine is read through ``engine.accountant.history``, ``engine.get_epsilon`` and
``optimizer.max_grad_norm``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.interop.recorder import DatasetReference, FederationRecorder, GaussianRelease

__all__ = ["OpacusTap", "history_releases", "record_opacus_run"]


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
                     sampling: str = "poisson") -> list[GaussianRelease]:
    """The releases of a whole opacus accountant history: one :class:`GaussianRelease` per entry."""
    return [GaussianRelease([client], noise_multiplier=sigma, clip=clip, sensitivity=clip, sample_rate=q, sampling=sampling, steps=n,
                            assumptions=("imported from an opacus accountant history (DP-SGD, per-example clipping)",
                                         f"{sampling} sampling of each step's batch: opacus's DPDataLoader, make_private's default "
                                         "poisson_sampling=True (a shuffled DataLoader is neither, and its ε is not this one)"))
            for sigma, q, n in _entries(history)]


def _accountant(engine: Any) -> Any:
    accountant = getattr(engine, "accountant", engine)
    if not hasattr(accountant, "history"):
        raise InvalidParameterError("expected an opacus PrivacyEngine (or its accountant): it has no accountant.history")
    return accountant


def _clip(clip: float | None, optimizer: Any) -> float:
    if clip is None and optimizer is not None:
        clip = getattr(optimizer, "max_grad_norm", None)
    if clip is None:
        raise InvalidParameterError("the clip C is not in opacus's accountant: pass clip=max_grad_norm or optimizer=<the DPOptimizer>")
    try:
        value = float(clip)
    except (TypeError, ValueError):
        raise InvalidParameterError(f"the clip C must be a number (opacus's max_grad_norm), got {clip!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise InvalidParameterError(f"the clip C must be positive, got {clip!r}")
    return value


class OpacusTap:
    """Reads the DP-SGD steps an opacus engine took since it was last asked, as privaudit releases."""

    def __init__(self, engine: Any, *, client: int | str = 0, clip: float | None = None, optimizer: Any = None,
                 sampling: str = "poisson") -> None:
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
        getter = getattr(self.engine, "get_epsilon", None) or self.accountant.get_epsilon
        return float(getter(delta))

    def source(self) -> str:
        try:
            version = metadata.version("opacus")
        except metadata.PackageNotFoundError:  # pragma: no cover - a vendored opacus
            version = "?"
        mechanism = getattr(self.accountant, "mechanism", None)
        name = mechanism() if callable(mechanism) else type(self.accountant).__name__
        return f"opacus {version} ({name} accountant)"

    def report(self, recorder: FederationRecorder, delta: float) -> float:
        """Keep opacus's own ε at ``delta`` in the checkpoint (shown by ``compute-epsilon --checkpoint``); returns it."""
        value = self.epsilon(delta)
        recorder.report_epsilon(value, delta, source=self.source(), client=self.client)
        return value


def record_opacus_run(out_dir: str | os.PathLike, *, model: Any, dataset: DatasetReference, engine: Any, delta: float,
                      clip: float | None = None, optimizer: Any = None, **recorder_options: Any) -> Path:
    """Write a finished (non-federated) opacus run as a one-round, one-client privaudit checkpoint.

    ``dataset``'s partition must hold one client (0: the records the engine trained on); ``model`` is the trained
    module (opacus's ``GradSampleModule`` is unwrapped to the module it wraps).
    """
    if sorted(dataset.partition) != [0]:
        raise InvalidParameterError("an opacus run trains one dataset: the DatasetReference's partition is {0: training rows}")
    module = getattr(model, "_module", model)  # GradSampleModule keeps the user's module here
    tap = OpacusTap(engine, client=0, clip=clip, optimizer=optimizer)
    options = {"algorithm": "dp-sgd", "framework": tap.source(), **recorder_options}
    with FederationRecorder(out_dir, model=module, dataset=dataset, **options) as recorder:
        recorder.record_round(1, global_model=module, privacy_events=tap.new_releases(), sampled_clients=[0])
        tap.report(recorder, delta)
    return recorder.path
