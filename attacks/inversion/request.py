"""What ``privaudit attack inversion`` asks, as one checked value: :class:`InversionRequest`.

Two modes: **dataset** (clients simulated on an embedded dataset, each releasing an update of ``per_update`` images
under a defence by name, :func:`attacks.inversion.experiment.run_inversion`) and **checkpoint** (one client's release
in one round of a trained federation, :mod:`attacks.inversion.checkpoint_payload`). Making the request checks every
field — the attack, its options and configuration (:func:`attacks.inversion.registry.build_attack`, with the ranges
of :mod:`attacks.inversion.limits`), the defence, the mode's own fields, the checkpoint's release, the device and
``--out`` — each failure one :class:`~privaudit.errors.InvalidParameterError` naming the flag, before any data loads.
:func:`attacks.inversion.run_request.run_request` runs it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attacks.inversion.checkpoint_payload import check_release
from attacks.inversion.experiment import defence_specs
from attacks.inversion.registry import build_attack, parse_attack_options, registered_attacks
from attacks.inversion.release import registered_defences
from privaudit.device import resolve_device
from privaudit.errors import InvalidParameterError
from privaudit.request_checks import check_out_folder, check_threads

#: The files ``--out`` receives: the ``inversion`` result and the image grid (ground truth over reconstructions).
RESULT_FILE = "inversion.json"
GRID_FILE = "inversion-grid.png"
#: Images attacked in dataset mode when ``images`` is not given.
DEFAULT_IMAGES = 8
#: The configuration fields an ``iterations`` request sets, in order of preference (ig: iterations; dlg: L-BFGS steps).
ITERATION_FIELDS = ("iterations", "steps")


def iteration_field(attack: str) -> str | None:
    """The configuration field ``iterations`` sets for ``attack`` (``None``: the attack does not iterate)."""
    names = {f.name for f in dataclasses.fields(registered_attacks()[attack].config_class)}
    return next((name for name in ITERATION_FIELDS if name in names), None)


@dataclass(frozen=True)
class InversionRequest:
    """One inversion attack: dataset mode (``dataset``, ``model``, ``defence``, ``images``, ``per_update``, ``batched``)
    or checkpoint mode (``checkpoint``, ``client``, ``round``), and the attack (``attack``, ``options`` as KEY=VALUE,
    ``iterations``, ``bins``, ``bn_prior``/``bn_weight``) with the shared ``labels_known``, ``seed``, ``device``,
    ``threads`` and ``out``. Checked when made; ``attack_options`` and ``bn_options`` are the attack's parsed options."""

    attack: str = "ig"
    dataset: str | None = None
    model: str = "convnet"
    defence: str = "fedavg"
    images: int | None = None
    per_update: int | None = None
    bins: int | None = None
    options: tuple[str, ...] = ()
    bn_prior: str | None = None
    bn_weight: float | None = None
    batched: bool = True
    iterations: int | None = None
    checkpoint: Path | None = None
    client: int | None = None
    round: int | None = None
    labels_known: bool = False
    seed: int = 0
    device: str = "cpu"
    threads: int = 1
    out: Path | None = None
    attack_options: dict[str, Any] = field(init=False, compare=False, repr=False)
    bn_options: dict[str, Any] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "attack", self.attack.strip().lower())
        object.__setattr__(self, "defence", self.defence.strip().lower())
        self._check_attack()
        self._check_imprint()
        object.__setattr__(self, "bn_options", self._bn_options())
        if (self.dataset is None) == (self.checkpoint is None):
            raise InvalidParameterError("give exactly one of --dataset (simulated clients) or --checkpoint (a trained federation)")
        if self.checkpoint is not None:
            if self.images is not None:
                raise InvalidParameterError("--images applies to dataset mode; checkpoint mode attacks all of the client's records")
            check_release(self.checkpoint, self.client, self.round)
        else:
            if self.client is not None or self.round is not None:
                raise InvalidParameterError("--client and --round apply to checkpoint mode (--checkpoint)")
            _check_defence(self.defence)
        resolved = resolve_device(self.device)  # an absent GPU is one line (privaudit.device)
        device = self.device.strip().lower()
        object.__setattr__(self, "device", str(resolved) if device == "auto" else device)
        if self.out is not None:
            check_out_folder(self.out, (RESULT_FILE, GRID_FILE))  # before the attack, not after it
        options: dict[str, Any] = parse_attack_options(self.attack, list(self.options))
        if self.iterations is not None:
            options[iteration_field(self.attack)] = self.iterations  # type: ignore[index]
        if self.bins is not None:
            options["bins"] = self.bins
        build_attack(self.attack, device=self.device, **options)  # a bad configuration is one line before any data loads
        object.__setattr__(self, "attack_options", options)

    @property
    def image_count(self) -> int:
        """Images attacked in dataset mode."""
        return DEFAULT_IMAGES if self.images is None else self.images

    def _check_attack(self) -> None:
        attacks = registered_attacks()
        if self.attack not in attacks:
            raise InvalidParameterError(f"unknown attack {self.attack!r}; choose one of: {', '.join(attacks)}")
        if self.images is not None and self.images < 1:
            raise InvalidParameterError(f"--images must be at least 1, got {self.images}")
        if self.iterations is not None:
            if self.iterations < 1:
                raise InvalidParameterError(f"--iterations must be at least 1, got {self.iterations}")
            if iteration_field(self.attack) is None:
                raise InvalidParameterError(f"--iterations does not apply to the {self.attack} attack (it does not iterate)")
        check_threads(self.threads)

    def _check_imprint(self) -> None:
        """The batch and imprint options (``per_update``, ``bins``)."""
        if self.per_update is not None:
            if self.per_update < 1:
                raise InvalidParameterError(f"--per-update must be at least 1, got {self.per_update}")
            if self.checkpoint is not None:
                raise InvalidParameterError("--per-update applies to dataset mode; a checkpoint's release holds all of the client's records")
            if self.image_count % self.per_update:
                raise InvalidParameterError(f"--images ({self.image_count}) must be a multiple of --per-update ({self.per_update})")
        if self.bins is not None:
            if self.attack != "imprint":
                raise InvalidParameterError(f"--bins applies to the imprint attack, not {self.attack}")
            if self.bins < 2:
                raise InvalidParameterError(f"--bins must be at least 2, got {self.bins}")
        if self.attack == "imprint" and self.checkpoint is not None:
            raise InvalidParameterError("the imprint attack needs a server that modified the model before the clients trained it; "
                                        "a checkpoint's releases were computed on the unmodified model (use --dataset)")

    def _bn_options(self) -> dict[str, Any]:
        """The ig options ``bn_prior``/``bn_weight`` set (GradInversion's R_BN, Yin et al. 2021 §3)."""
        if self.bn_prior is None:
            if self.bn_weight is not None:
                raise InvalidParameterError("--bn-weight needs --bn-prior update|running")
            return {}
        source = self.bn_prior.strip().lower()
        if self.attack != "ig":
            raise InvalidParameterError(f"--bn-prior applies to the ig attack, not {self.attack}")
        if source not in ("update", "running"):
            raise InvalidParameterError(f"unknown --bn-prior {self.bn_prior!r}; choose update (the client's released BatchNorm "
                                        "buffers) or running")
        if self.bn_weight is not None and not (self.bn_weight > 0 and math.isfinite(self.bn_weight)):
            raise InvalidParameterError(f"--bn-weight must be positive and finite, got {self.bn_weight}")
        return {"bn_stats": source, **({} if self.bn_weight is None else {"bn_weight": self.bn_weight})}

    def config_record(self) -> dict[str, Any]:
        """The request as a result file records it (its ``config``)."""
        return {"dataset": self.dataset, "model": self.model, "defense": self.defence, "attack": self.attack,
                "images": self.images, "iterations": self.iterations,
                "checkpoint": None if self.checkpoint is None else str(self.checkpoint), "client": self.client,
                "round": self.round, "labels_known": self.labels_known, "seed": self.seed, "device": self.device,
                "per_update": self.per_update, "bins": self.bins, "bn_prior": self.bn_prior, "bn_weight": self.bn_weight}


def _check_defence(spec: str) -> float | None:
    """A dataset-mode defence by name; returns σ for ``dpsgd:<σ>``."""
    name, colon, argument = spec.partition(":")
    if name == "dpsgd":
        try:
            sigma = float(argument)
        except ValueError:
            raise InvalidParameterError(f"defence {spec!r}: give DP-SGD's noise multiplier, e.g. dpsgd:1e-2") from None
        if not (sigma > 0 and math.isfinite(sigma)):
            raise InvalidParameterError(f"defence {spec!r}: the noise multiplier σ must be positive and finite")
        return sigma
    if name in registered_defences() and not colon:
        return None
    raise InvalidParameterError(f"unknown defence {spec!r}; choose one of: {', '.join(defence_specs())}")


def is_dpsgd(spec: str) -> bool:
    """Whether a (checked) defence spec is DP-SGD, whose release carries an ε."""
    return spec.partition(":")[0] == "dpsgd"
