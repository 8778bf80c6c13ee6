"""Algorithm name → how to build it from named options (``--algorithm upcycled-fedprox --mu 0.5 --upcycle 0.7``).

Spec modules define ``SPECS``, a tuple of :class:`AlgorithmSpec` whose builders import the (torch) algorithm
modules lazily, so listing algorithms and building CLI flags stay torch-free; :data:`ALGORITHM_MODULES` lists
the spec modules.
Every base algorithm X is also available as ``upcycled-X`` (:class:`~privaudit.fl.algorithms.upcycled.Upcycled`
around X), taking X's options plus ``--upcycle u`` or ``--lam λ``. Adding an algorithm with its own options
means writing its module and a spec (in a spec module listed here); the CLI picks its flags up, and the spec
says what ``privaudit train`` uses where the command line gives nothing (:attr:`AlgorithmSpec.train_defaults`)
and whether the algorithm runs its own privacy modes (:attr:`AlgorithmSpec.privacy_modes`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.options import Option, reject_unused, take_options

#: Torch-free modules that define ``SPECS``.
ALGORITHM_MODULES = (
    "privaudit.fl.algorithms.specs",
    "privaudit.papers.pfa.specs",
    "privaudit.papers.privatefl.specs",
    "privaudit.papers.fedreg.specs",
)

UPCYCLED_PREFIX = "upcycled-"

UPCYCLE = Option("upcycle", float, "Upcycled-FL coefficient u of ω̄^{2m} = ω̄^{2m−1} + u(ω̄^{2m−1} − ω̄^{2m−2}) (default 0.3)")
LAM = Option("lam", float, "Upcycled-FL λ_m: sets u = μ/(μ+λ) with the base algorithm's μ (FedProx)")
UPCYCLED_OPTIONS = (UPCYCLE, LAM)


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


@cache
def _base_specs() -> dict[str, AlgorithmSpec]:
    specs: dict[str, AlgorithmSpec] = {}
    for module_name in ALGORITHM_MODULES:
        for spec in importlib.import_module(module_name).SPECS:
            if spec.name in specs or spec.name.startswith(UPCYCLED_PREFIX):
                raise ValueError(f"algorithm name {spec.name!r} is registered twice or uses the reserved prefix")
            specs[spec.name] = spec
    return specs


def algorithm_specs() -> dict[str, AlgorithmSpec]:
    """Every algorithm by name, base algorithms first, then their Upcycled versions."""
    base = _base_specs()
    out = dict(base)
    for name, spec in base.items():
        out[UPCYCLED_PREFIX + name] = AlgorithmSpec(
            name=UPCYCLED_PREFIX + name,
            summary=f"Upcycled-FL around {name}: odd rounds are {name}'s, even rounds server-only extrapolation",
            options=spec.options + UPCYCLED_OPTIONS,
            build=spec.build,
            train_defaults=spec.train_defaults,
            privacy_modes=spec.privacy_modes,
        )
    return out


def algorithm_spec(name: str) -> AlgorithmSpec:
    """The spec of algorithm ``name`` (``upcycled-X`` included)."""
    key = str(name).strip().lower()
    specs = algorithm_specs()
    if key not in specs:
        raise InvalidParameterError(f"unknown algorithm {name!r}; known: {', '.join(specs)}")
    return specs[key]


def option_owners() -> dict[str, list[str]]:
    """Option name → the algorithms that take it (for error messages and ``--list``)."""
    owners: dict[str, list[str]] = {}
    for name, spec in _base_specs().items():
        for option in spec.options:
            owners.setdefault(option.name, []).append(name)
    for option in UPCYCLED_OPTIONS:
        owners.setdefault(option.name, []).append("upcycled-*")
    return owners


def all_algorithm_options() -> list[Option]:
    seen: dict[str, Option] = {}
    for spec in _base_specs().values():
        for option in spec.options:
            seen.setdefault(option.name, option)
    for option in UPCYCLED_OPTIONS:
        seen.setdefault(option.name, option)
    return list(seen.values())


def make_algorithm(
    name: str,
    options: Mapping[str, Any] | None = None,
    *,
    privatizer: Callable[[Any], Any] | None = None,
    privacy: str | None = None,
    **kwargs: Any,
):
    """Build algorithm ``name`` from named options (``None`` values mean "not given", so defaults apply).

    ``privatizer`` wraps the base algorithm before Upcycled-FL wraps it, so ``upcycled-X`` with a privacy
    mechanism is Upcycled(Privatizer(X)): the privatizer acts in the odd rounds only. ``privacy`` is the privacy
    mode of an algorithm that runs its own (:attr:`AlgorithmSpec.privacy_modes`), passed to its builder.
    """
    given = {**(options or {}), **kwargs}
    spec = algorithm_spec(name)
    key = spec.name
    base_name = key[len(UPCYCLED_PREFIX) :] if key.startswith(UPCYCLED_PREFIX) else key
    base_spec = _base_specs()[base_name]
    reject_unused(given, [o.name for o in spec.options], f"algorithm {key}", option_owners())
    own_privacy = {}
    if base_spec.privacy_modes:
        if privatizer is not None:
            raise InvalidParameterError(f"{key} runs its own privacy modes ({', '.join(base_spec.privacy_modes)}); "
                                        "it takes --privacy itself, not a generic privatizer")
        own_privacy = {"privacy": "none" if privacy is None else privacy}
    elif privacy is not None and str(privacy).strip().lower() != "none":
        raise InvalidParameterError(f"{key} has no privacy modes of its own: wrap it with a privatizer (--privacy {privacy})")
    algorithm = base_spec.build(**take_options(given, base_spec.options), **own_privacy)
    if privatizer is not None:
        algorithm = privatizer(algorithm)
    if key.startswith(UPCYCLED_PREFIX):
        # torch: imported here, not at the top, to keep it out of the CLI's start-up (this module lists the flags)
        from privaudit.fl.algorithms.upcycled import Upcycled

        upcycled = take_options(given, UPCYCLED_OPTIONS)
        if "upcycle" in upcycled and "lam" in upcycled:
            raise InvalidParameterError("give either --upcycle u or --lam λ, not both")
        algorithm = Upcycled(algorithm, u=upcycled.get("upcycle", 0.3), lam=upcycled.get("lam"))
    return algorithm
