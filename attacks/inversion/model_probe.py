"""Find layers by what the model actually executes, not by registration order.

Analytic recovery needs the first trainable layer an input meets; label inference needs the layer
that produces the logits. Both are found by running the model once with forward hooks on every module
that owns parameters directly, which is robust to custom ``forward`` methods.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from .functional_model import FunctionalModel


@dataclass(frozen=True)
class LayerCall:
    """One execution of a parameter-owning module: its qualified name, the module and its I/O shapes."""

    name: str
    module: nn.Module
    input_shape: tuple[int, ...]
    output_shape: tuple[int, ...]

    def parameter_name(self, local: str) -> str:
        """Qualified parameter name (as in ``named_parameters``) of this layer's ``local`` parameter."""
        return f"{self.name}.{local}" if self.name else local


def trace_parameterised_layers(model: FunctionalModel, inputs: torch.Tensor) -> list[LayerCall]:
    """Modules that own parameters, in the order the forward pass calls them on ``inputs``."""
    calls: list[LayerCall] = []
    handles = []
    for name, module in model.module.named_modules():
        if any(True for _ in module.parameters(recurse=False)):

            def hook(mod: nn.Module, args: tuple, output: object, _name: str = name) -> None:
                first = args[0] if args else None
                in_shape = tuple(first.shape) if isinstance(first, torch.Tensor) else ()
                out_shape = tuple(output.shape) if isinstance(output, torch.Tensor) else ()
                calls.append(LayerCall(_name, mod, in_shape, out_shape))

            handles.append(module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            model(model.params, inputs)
    finally:
        for handle in handles:
            handle.remove()
    return calls


def capture_layer_input(model: FunctionalModel, layer: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """The tensor ``layer`` receives when the model runs on ``inputs`` (first call only)."""
    captured: list[torch.Tensor] = []

    def hook(mod: nn.Module, args: tuple) -> None:
        if not captured:
            captured.append(args[0].detach().clone())

    handle = layer.register_forward_pre_hook(hook)
    try:
        with torch.no_grad():
            model(model.params, inputs)
    finally:
        handle.remove()
    return captured[0]
