"""How a checkpoint names the architecture of its model, and how a reader rebuilds it without unpickling.

A manifest's ``model`` section names the architecture in one of three ways (``model["architecture"]["kind"]``):

* ``registry`` — a privaudit model name (:func:`privaudit.models.build_model`), also written as ``model["name"]``
  (every checkpoint ``privaudit train`` writes, and older checkpoints without an ``architecture`` field);
* ``sequential`` — a ``torch.nn.Sequential`` of standard ``torch.nn`` layers, written as a JSON list of
  ``{"type": "Linear", "args": {...}}`` (:func:`describe_sequential`). Rebuilding looks each type up in
  :data:`SEQUENTIAL_LAYERS`, a fixed allow-list of ``torch.nn`` classes, and calls it with JSON numbers and
  strings: no code named by the file is imported or run;
* ``factory`` — ``"package.module:qualname"`` plus JSON ``kwargs``: a function of the user's own code that
  returns the module. **Trust:** importing a module named inside a file runs that module's code, so a factory is
  imported only when the reader names the very same factory as trusted (``trust_factory=`` in the API,
  ``--trust-factory`` on the CLI); otherwise reading refuses with one line that says so. A checkpoint from
  someone else therefore cannot make privaudit import anything.

Whatever the kind, the rebuilt module's tensors must have the names and shapes the manifest records
(:func:`privaudit.fl.engine.checkpoint.check_shapes`) before weights are loaded.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from privaudit.errors import CheckpointError, InvalidParameterError, PrivauditError

if TYPE_CHECKING:
    from torch import nn

REGISTRY, SEQUENTIAL, FACTORY = "registry", "sequential", "factory"
KINDS = (REGISTRY, SEQUENTIAL, FACTORY)

#: ``torch.nn`` layer → the constructor arguments read back from an instance (attribute name = argument name,
#: except ``bias``, which is whether the layer has one). Only these types are described and rebuilt.
SEQUENTIAL_LAYERS: dict[str, tuple[str, ...]] = {
    "Linear": ("in_features", "out_features", "bias"),
    "Conv1d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias"),
    "Conv2d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias"),
    "BatchNorm1d": ("num_features", "eps", "momentum", "affine", "track_running_stats"),
    "BatchNorm2d": ("num_features", "eps", "momentum", "affine", "track_running_stats"),
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine"),
    "GroupNorm": ("num_groups", "num_channels", "eps", "affine"),
    "ReLU": (),
    "Tanh": (),
    "Sigmoid": (),
    "SiLU": (),
    "Identity": (),
    "GELU": ("approximate",),
    "LeakyReLU": ("negative_slope",),
    "ELU": ("alpha",),
    "Softplus": ("beta", "threshold"),
    "Flatten": ("start_dim", "end_dim"),
    "Dropout": ("p",),
    "Dropout2d": ("p",),
    "MaxPool1d": ("kernel_size", "stride", "padding"),
    "MaxPool2d": ("kernel_size", "stride", "padding"),
    "AvgPool1d": ("kernel_size", "stride", "padding"),
    "AvgPool2d": ("kernel_size", "stride", "padding"),
    "AdaptiveAvgPool2d": ("output_size",),
    "Sequential": (),
}

_FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*:[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def _json_value(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_json_value(v) for v in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    raise InvalidParameterError(f"layer argument {value!r} is not a JSON number, string or list")


def describe_sequential(module: nn.Module) -> list[dict[str, Any]] | None:
    """The JSON description of ``module`` if it is an ``nn.Sequential`` of :data:`SEQUENTIAL_LAYERS` (nested
    ``Sequential`` allowed), else ``None``."""
    from torch import nn

    if type(module) is not nn.Sequential:
        return None
    layers = []
    for child in module.children():
        kind = type(child).__name__
        if kind not in SEQUENTIAL_LAYERS or type(child) is not getattr(nn, kind):  # every allow-listed name is in torch.nn
            return None
        if kind == "Sequential":
            inner = describe_sequential(child)
            if inner is None:
                return None
            layers.append({"type": kind, "layers": inner})
            continue
        args = {}
        for name in SEQUENTIAL_LAYERS[kind]:
            value = getattr(child, name) is not None if name == "bias" else getattr(child, name)
            args[name] = _json_value(value)
        layers.append({"type": kind, "args": args})
    return layers


def build_sequential(layers: Any) -> nn.Module:
    """Rebuild an ``nn.Sequential`` from :func:`describe_sequential`'s description (allow-listed types only)."""
    from torch import nn

    if not isinstance(layers, list):
        raise CheckpointError("a sequential architecture must be a list of layers")
    built = []
    for layer in layers:
        kind = layer.get("type") if isinstance(layer, dict) else None
        if kind not in SEQUENTIAL_LAYERS:
            raise CheckpointError(f"layer type {kind!r} is not one privaudit rebuilds (allowed: {', '.join(SEQUENTIAL_LAYERS)})")
        if kind == "Sequential":
            built.append(build_sequential(layer.get("layers")))
            continue
        args = layer.get("args", {})
        if not isinstance(args, dict) or set(args) - set(SEQUENTIAL_LAYERS[kind]):
            raise CheckpointError(f"layer {kind} has arguments privaudit does not know: {sorted(set(args) - set(SEQUENTIAL_LAYERS[kind]))}")
        args = {k: tuple(v) if isinstance(v, list) else v for k, v in args.items()}
        try:
            built.append(getattr(nn, kind)(**args))
        except (TypeError, ValueError, RuntimeError) as exc:
            raise CheckpointError(f"layer {kind}({args}) cannot be built: {exc}") from None
    return nn.Sequential(*built)


def check_factory_name(factory: str) -> str:
    if not isinstance(factory, str) or not _FACTORY.match(factory):
        raise InvalidParameterError(f"a model factory is named 'package.module:function', got {factory!r}")
    return factory


def import_factory(factory: str):
    """The callable named ``package.module:qualname`` (imports the module: only for factories the caller trusts)."""
    module_name, _, qualname = check_factory_name(factory).partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise CheckpointError(f"model factory {factory} cannot be imported: {exc}") from None
    if not callable(target):
        raise CheckpointError(f"model factory {factory} is not callable")
    return target


def architecture_of(model_info: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest's architecture description, older manifests (a model name only) included."""
    described = model_info.get("architecture")
    if described is None:
        return {"kind": REGISTRY, "name": model_info.get("name")} if model_info.get("name") else {"kind": "custom"}
    if not isinstance(described, dict) or described.get("kind") not in KINDS:
        raise CheckpointError(f"the manifest's model architecture {described!r} is not one of: {', '.join(KINDS)}")
    return dict(described)


def rebuildable(model_info: Mapping[str, Any], trust_factory: str | None = None) -> str | None:
    """Why the architecture cannot be rebuilt here (one line), or ``None`` when it can."""
    try:
        described = architecture_of(model_info)
    except CheckpointError as exc:
        return str(exc)
    kind = described["kind"]
    if kind in (REGISTRY, SEQUENTIAL):
        return None
    if kind == FACTORY:
        factory = described.get("factory")
        if trust_factory is None or trust_factory != factory:
            return (f"the model is built by the user's factory {factory}; importing it runs that code, so privaudit does so "
                    f"only when asked: pass --trust-factory {factory} (API: trust_factory=...)")
        return None
    return "the model is a custom module whose architecture was not recorded, so it cannot be rebuilt"


def build_architecture(model_info: Mapping[str, Any], trust_factory: str | None = None) -> nn.Module:
    """A fresh module of the manifest's architecture (weights as initialised; callers load the recorded ones)."""
    from torch import nn

    from privaudit.models import build_model  # torch and the model zoo: only when a module is rebuilt

    problem = rebuildable(model_info, trust_factory)
    if problem:
        raise CheckpointError(problem)
    described = architecture_of(model_info)
    kind = described["kind"]
    if kind == REGISTRY:
        try:
            return build_model(described["name"], tuple(model_info["input_shape"]), int(model_info["num_classes"]))
        except PrivauditError as exc:
            raise CheckpointError(f"the manifest's model cannot be built: {exc}") from None
    if kind == SEQUENTIAL:
        return build_sequential(described.get("layers"))
    kwargs = described.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise CheckpointError("a model factory's kwargs must be a JSON object")
    try:
        module = import_factory(described["factory"])(**kwargs)
    except CheckpointError:
        raise
    except Exception as exc:  # the user's own code: any failure is reported in one line
        raise CheckpointError(f"model factory {described['factory']}(**{kwargs}) failed: {type(exc).__name__}: {exc}") from None
    if not isinstance(module, nn.Module):
        raise CheckpointError(f"model factory {described['factory']} returned {type(module).__name__}, not a torch.nn.Module")
    return module
