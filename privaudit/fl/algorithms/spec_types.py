"""The declarations a spec module makes: :class:`AlgorithmSpec` (a buildable algorithm) and :class:`WrapperSpec`.

Spec modules (the core's :mod:`privaudit.fl.algorithms.specs`, each paper's) import these types; the registry
(:mod:`privaudit.fl.algorithms.registry`) reads the modules by name, so the types live apart from it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from privaudit.fl.engine.options import Option

#: Settings of a run that an algorithm's :attr:`AlgorithmSpec.train_defaults` may give: local training
#: (:class:`~privaudit.fl.engine.config.LocalTrainingConfig` by ``privaudit train``'s flag names), execution and
#: client sampling, model and data (``num_clients``, ``partition``).
TRAIN_DEFAULT_KEYS = ("local_epochs", "batch_size", "lr", "momentum", "execution", "sampling", "model", "num_clients", "partition")


@dataclass(frozen=True)
class AlgorithmSpec:
    """A buildable algorithm: its name, a one-line summary, its options and ``build(**options)``.

    ``train_defaults(privacy, options) -> {setting: value}`` gives the run settings of :data:`TRAIN_DEFAULT_KEYS` the
    algorithm's paper uses, for its privacy mode and options (PFA: B = 8, no momentum, ``pfa-lr``); a setting
    the run names wins. ``privacy_modes`` are privacy modes the algorithm runs itself, calibrated from the run
    (PrivateFL's ``ldp``/``cdp``/``ddp`` for a claimed ε): ``--privacy`` is then passed to ``build`` as
    ``privacy=`` and no generic privatizer wraps the algorithm.
    """

    name: str
    summary: str
    options: tuple[Option, ...]
    build: Callable[..., Any]
    train_defaults: Callable[[str, Mapping[str, Any]], Mapping[str, Any]] | None = None
    privacy_modes: tuple[str, ...] = ()

    def defaults(self, privacy: str | None, options: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The run settings this algorithm brings for ``privacy`` and its ``options`` (empty if none)."""
        if self.train_defaults is None:
            return {}
        given = {k: v for k, v in (options or {}).items() if v is not None}
        out = dict(self.train_defaults(str(privacy or "none").strip().lower(), given))
        unknown = sorted(set(out) - set(TRAIN_DEFAULT_KEYS))
        if unknown:
            raise ValueError(f"algorithm {self.name} gives unknown train defaults {unknown}")
        return out



@dataclass(frozen=True)
class WrapperSpec:
    """A wrapper around any base algorithm X, listed as ``<name>-X`` for every X (a paper's plug-in part).

    ``summary(base)`` is the one-line summary of ``<name>-X``; ``options`` are the wrapper's own, taken beside X's;
    ``wrap(algorithm, **options)`` wraps a built X (with those of the wrapper's options that were given, converted).
    ``hostable``: ``<name>-X`` asks the clients for nothing X does not, so Flower can host it whenever it hosts X.
    """

    name: str
    summary: Callable[[str], str]
    options: tuple[Option, ...]
    wrap: Callable[..., Any]
    hostable: bool = False

    @property
    def prefix(self) -> str:
        return self.name + "-"
