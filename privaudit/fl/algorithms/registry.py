"""Algorithm name → how to build it from named options (``--algorithm fedprox --mu 0.5``).

Spec modules define ``SPECS``, a tuple of :class:`~privaudit.fl.algorithms.spec_types.AlgorithmSpec` whose builders import the (torch) algorithm
modules lazily, so listing algorithms and building CLI flags stay torch-free. The spec modules are the core's own
(:data:`CORE_SPEC_MODULES`) and each registered paper's (:attr:`privaudit.plugins.Paper.algorithm_specs`). A paper
may also declare a *wrapper* (:class:`~privaudit.fl.algorithms.spec_types.WrapperSpec`, :attr:`privaudit.plugins.Paper.algorithm_wrappers`): every base
algorithm X is then also available as ``<wrapper>-X``, taking X's options plus the wrapper's. Adding an algorithm
with its own options means writing its module and a spec (in a spec module the core or a paper lists); the CLI picks
its flags up, and the spec says what ``privaudit train`` uses where the command line gives nothing
(:attr:`AlgorithmSpec.train_defaults`) and whether the algorithm runs its own privacy modes
(:attr:`AlgorithmSpec.privacy_modes`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from privaudit import plugins
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.spec_types import AlgorithmSpec, WrapperSpec
from privaudit.fl.engine.options import Option, reject_unused, take_options

#: The core's torch-free modules that define ``SPECS`` (the papers' are read from the registry).
CORE_SPEC_MODULES = ("privaudit.fl.algorithms.specs",)

def spec_modules() -> tuple[str, ...]:
    """The modules that define ``SPECS``: the core's, then each registered paper's (in paper-key order)."""
    return (*CORE_SPEC_MODULES, *(module for paper in plugins.papers() for module in paper.algorithm_specs))


@cache
def wrapper_specs() -> dict[str, WrapperSpec]:
    """Every registered algorithm wrapper, by name."""
    out: dict[str, WrapperSpec] = {}
    for name, (_, ref) in plugins.collected("algorithm_wrappers").items():
        spec = ref.load()
        if not isinstance(spec, WrapperSpec) or spec.name != name:
            raise InvalidParameterError(f"algorithm wrapper {name!r} ({ref.target}) is not a WrapperSpec named {name!r}")
        out[name] = spec
    return out


def split_wrapper(name: str) -> tuple[WrapperSpec | None, str]:
    """``(wrapper, base)`` of an algorithm name: the wrapper and ``"fedprox"`` for ``<wrapper>-fedprox``, else ``(None, name)``."""
    for wrapper in wrapper_specs().values():
        if name.startswith(wrapper.prefix):
            return wrapper, name[len(wrapper.prefix):]
    return None, name


@cache
def _base_specs() -> dict[str, AlgorithmSpec]:
    specs: dict[str, AlgorithmSpec] = {}
    prefixes = tuple(w.prefix for w in wrapper_specs().values())
    for module_name in spec_modules():
        for spec in importlib.import_module(module_name).SPECS:
            if spec.name in specs or spec.name.startswith(prefixes):
                raise ValueError(f"algorithm name {spec.name!r} is registered twice or uses a wrapper's prefix")
            specs[spec.name] = spec
    return specs


def algorithm_specs() -> dict[str, AlgorithmSpec]:
    """Every algorithm by name: the base algorithms, then each wrapper's versions of them."""
    base = _base_specs()
    out = dict(base)
    for wrapper in wrapper_specs().values():
        for name, spec in base.items():
            out[wrapper.prefix + name] = AlgorithmSpec(
                name=wrapper.prefix + name,
                summary=wrapper.summary(name),
                options=spec.options + wrapper.options,
                build=spec.build,
                train_defaults=spec.train_defaults,
                privacy_modes=spec.privacy_modes,
            )
    return out


def algorithm_spec(name: str) -> AlgorithmSpec:
    """The spec of algorithm ``name`` (``<wrapper>-X`` included)."""
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
    for wrapper in wrapper_specs().values():
        for option in wrapper.options:
            owners.setdefault(option.name, []).append(wrapper.prefix + "*")
    return owners


def all_algorithm_options() -> list[Option]:
    seen: dict[str, Option] = {}
    for spec in _base_specs().values():
        for option in spec.options:
            seen.setdefault(option.name, option)
    for wrapper in wrapper_specs().values():
        for option in wrapper.options:
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

    ``privatizer`` wraps the base algorithm before an algorithm wrapper does, so ``<wrapper>-X`` with a privacy
    mechanism is Wrapper(Privatizer(X)) (for Upcycled-X the privatizer acts in the odd rounds only). ``privacy`` is the
    privacy mode of an algorithm that runs its own (:attr:`AlgorithmSpec.privacy_modes`), passed to its builder.
    """
    given = {**(options or {}), **kwargs}
    spec = algorithm_spec(name)
    key = spec.name
    wrapper, base_name = split_wrapper(key)
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
    if wrapper is not None:
        algorithm = wrapper.wrap(algorithm, **take_options(given, wrapper.options))
    return algorithm
