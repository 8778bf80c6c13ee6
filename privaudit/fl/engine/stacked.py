"""Forward passes over *stacked* client parameters: many clients' models evaluated in one call.

Parameters carry a leading lane dimension (``weight: [C, out, in]``) and so does the input
(``x: [C, B, ...]``); the output is ``[C, B, classes]``. Two constructions, tried in this order:

1. ``layers`` — the model is traced with ``torch.fx`` and every node is mapped to a lane-aware operation
   (``nn.Linear`` → one batched matrix product, ``nn.Conv2d`` → one *grouped* convolution, ``nn.Flatten`` shifted
   by one dimension, element-wise activations unchanged), evaluated with
   :func:`torch.func.functional_call`-style parameter binding. This avoids ``vmap``'s per-call overhead, which
   dominates for logistic regression and small MLPs (measured in ``benchmarks/bench_federation.py``).
   Convolutions fold the lanes into the channels: ``[C, B, c_in, H, W]`` is viewed as ``[B, C·c_in, H, W]`` and
   convolved with the lanes' kernels concatenated, ``groups = C`` (the construction of grouped convolutions,
   Krizhevsky et al. 2012, used for per-lane weights); pooling and padding act per channel, so they run on the same
   folded view. Lanes and batch are swapped by strided views, not copies, so consecutive convolutional layers
   pass their activations on without moving them. On one CPU core the gain depends on the network, since the CPU is
   bound by the convolutions' arithmetic rather than per-call overhead: one stacked step of 10 lanes ran 1.5–3.0×
   faster than the 10 clients one after another for PFA's CNN, 0.95–1.14× for FedReg's, 0.66–0.82× for the 6-layer
   ConvNet, and at ``vmap``'s speed or better (0.92–2.08×), in two runs on a loaded 2-core machine
   (``benchmarks/bench_cpu.py``); on a GPU one grouped call replaces C small kernel launches.
2. ``vmap`` — :func:`torch.func.vmap` over :func:`torch.func.functional_call`: any stateless model whose
   operations have batching rules (convolutions, pooling, ...).

Each construction is *checked* before use: on random stacked parameters it must reproduce, lane by lane,
what ``functional_call`` on the original model computes. Models with buffers (batch norm) fail the check and
are trained by the sequential trainer.

Dropout (p > 0) has a lane-aware form in the ``layers`` construction: every lane draws its masks from its own
``torch.Generator`` (passed as ``generators=``, one per lane), in the same order and with the same calls as
``nn.Dropout`` draws from torch's global generator in the sequential trainer, so a client seeded alike gets the
same masks, bit for bit, in either mode (checked like every other operation).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.fx
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, vmap

#: ``forward(params, x, generators=None, lengths=None)``: one ``torch.Generator`` per lane and each lane's real rows (dropout).
StackedForward = Callable[..., torch.Tensor]

_ELEMENTWISE_MODULES = (
    nn.ReLU,
    nn.ReLU6,
    nn.LeakyReLU,
    nn.ELU,
    nn.GELU,
    nn.SiLU,
    nn.Tanh,
    nn.Sigmoid,
    nn.Softplus,
    nn.Hardtanh,
    nn.Identity,
)
_ELEMENTWISE_FUNCTIONS = {
    operator.add,
    operator.sub,
    operator.mul,
    operator.truediv,
    operator.neg,
    torch.add,
    torch.sub,
    torch.mul,
    torch.relu,
    torch.tanh,
    torch.sigmoid,
    F.relu,
    F.leaky_relu,
    F.gelu,
    F.silu,
    F.elu,
    F.softplus,
}
_ELEMENTWISE_METHODS = {"relu", "tanh", "sigmoid", "add", "sub", "mul", "neg"}


#: Modules that act on each channel of an image separately: they run unchanged on the lanes-in-channels view.
_PER_CHANNEL_MODULES = (
    nn.MaxPool2d,
    nn.AvgPool2d,
    nn.AdaptiveAvgPool2d,
    nn.AdaptiveMaxPool2d,
    nn.ZeroPad2d,
    nn.ConstantPad2d,
    nn.ReflectionPad2d,
    nn.ReplicationPad2d,
)


class NotStackable(Exception):
    """The model has an operation the ``layers`` construction does not know how to stack."""


@dataclass(frozen=True)
class StackedModel:
    """A checked stacked forward and how it was built (``"layers"`` or ``"vmap"``)."""

    forward: StackedForward
    kind: str
    random: bool = False  # has random layers (dropout): the forward needs per-lane generators
    convolutional: bool = False  # has convolutions (batched as grouped convolutions in the ``layers`` form)


def _linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    lanes = x.shape[0]
    flat = x.reshape(lanes, -1, x.shape[-1])
    if bias is None:
        out = torch.bmm(flat, weight.transpose(1, 2))
    else:
        out = torch.baddbmm(bias.unsqueeze(1), flat, weight.transpose(1, 2))
    return out.reshape(*x.shape[:-1], weight.shape[1])


def _fold(x: torch.Tensor) -> torch.Tensor:
    """``[C, B, c, H, W]`` → ``[B, C·c, H, W]``: lanes become channel groups (a view when ``x`` came from :func:`_unfold`)."""
    if x.dim() != 5:
        raise ValueError(f"a stacked image batch has 5 dimensions [lanes, batch, channels, height, width], got {tuple(x.shape)}")
    lanes, batch = x.shape[0], x.shape[1]
    return x.transpose(0, 1).reshape(batch, lanes * x.shape[2], *x.shape[3:])


def _unfold(y: torch.Tensor, lanes: int) -> torch.Tensor:
    """``[B, C·c, H, W]`` → ``[C, B, c, H, W]`` (a strided view, no copy)."""
    return y.reshape(y.shape[0], lanes, y.shape[1] // lanes, *y.shape[2:]).transpose(0, 1)


def _conv2d(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, module: nn.Conv2d) -> torch.Tensor:
    """Lane c convolved with its own kernel ``weight[c]``: one convolution with ``groups = C·module.groups``."""
    lanes = weight.shape[0]
    out = F.conv2d(_fold(x), weight.reshape(-1, *weight.shape[2:]), None if bias is None else bias.reshape(-1),
                   stride=module.stride, padding=module.padding, dilation=module.dilation, groups=lanes * module.groups)
    return _unfold(out, lanes)


def _per_channel(x: torch.Tensor, module: nn.Module) -> torch.Tensor:
    return _unfold(module(_fold(x)), x.shape[0])


def _dropout(x: torch.Tensor, p: float, generators: Sequence[torch.Generator] | None,
             lengths: Sequence[int] | None) -> torch.Tensor:
    """Inverted dropout per lane: lane c's mask ~ Bernoulli(1 − p) from ``generators[c]``, kept values × 1/(1 − p).

    Lane c holds ``lengths[c]`` real rows followed by padding (all rows when ``lengths`` is ``None``). Its mask is
    exactly what ``F.dropout`` draws from the global generator for that client's ``[lengths[c], ...]`` batch (one
    ``bernoulli_`` of that shape); padding rows get a zero mask. Seeded alike, the masks agree bit for bit.
    """
    lanes, width = x.shape[0], x.shape[1]
    if generators is None or len(generators) != lanes:
        raise ValueError(f"stacked dropout needs one generator per lane ({lanes}), got "
                         f"{'none' if generators is None else len(generators)}")
    if p >= 1.0:
        return torch.zeros_like(x)
    masks = torch.zeros_like(x)
    for lane, generator in enumerate(generators):
        n = width if lengths is None else int(lengths[lane])
        masks[lane, :n] = torch.empty((n, *x.shape[2:]), dtype=x.dtype).bernoulli_(1.0 - p, generator=generator)
    return x * masks * (1.0 / (1.0 - p))


def _shift(dim: int) -> int:
    return dim + 1 if dim >= 0 else dim


Step = tuple[str, Callable[..., torch.Tensor], tuple, dict]


def _module_step(node: torch.fx.Node, module: nn.Module, lane_context: _LaneGenerators) -> Step:
    """The lane-aware operation of one ``call_module`` node; :class:`NotStackable` when it has none."""
    args = tuple(node.args)
    if isinstance(module, nn.Linear):
        prefix, has_bias = str(node.target), module.bias is not None

        def run_linear(params, x, _p=prefix, _b=has_bias):
            return _linear(x, params[f"{_p}.weight"], params[f"{_p}.bias"] if _b else None)

        return node.name, run_linear, args, {}
    if isinstance(module, nn.Conv2d):
        if module.padding_mode != "zeros":
            raise NotStackable(f"no stacked form for a convolution with padding mode {module.padding_mode!r}")
        prefix, has_bias = str(node.target), module.bias is not None

        def run_conv(params, x, _p=prefix, _b=has_bias, _m=module):
            return _conv2d(x, params[f"{_p}.weight"], params[f"{_p}.bias"] if _b else None, _m)

        return node.name, run_conv, args, {}
    if isinstance(module, _PER_CHANNEL_MODULES):
        if isinstance(module, nn.MaxPool2d | nn.AdaptiveMaxPool2d) and module.return_indices:
            raise NotStackable("pooling that returns indices has no stacked form")
        return node.name, lambda params, x, _m=module: _per_channel(x, _m), args, {}
    if isinstance(module, nn.Flatten):
        start, end = _shift(module.start_dim), _shift(module.end_dim)
        return node.name, lambda params, x, _s=start, _e=end: x.flatten(_s, _e), args, {}
    if isinstance(module, nn.Softmax | nn.LogSoftmax) and module.dim is not None:
        fn = torch.softmax if isinstance(module, nn.Softmax) else torch.log_softmax
        dim = _shift(module.dim)
        return node.name, lambda params, x, _f=fn, _d=dim: _f(x, _d), args, {}
    if isinstance(module, nn.Dropout):
        if module.inplace and module.p > 0:
            raise NotStackable("in-place dropout has no stacked form")

        def run_dropout(params, x, _m=module):
            if not _m.training or _m.p == 0:
                return x
            return _dropout(x, float(_m.p), lane_context.generators, lane_context.lengths)

        return node.name, run_dropout, args, {}
    if isinstance(module, _ELEMENTWISE_MODULES):
        if any(True for _ in module.parameters()):
            raise NotStackable(f"activation {type(module).__name__} has parameters")
        return node.name, lambda params, x, _m=module: _m(x), args, dict(node.kwargs)
    raise NotStackable(f"no stacked form for {type(module).__name__}")


class LayerProgram:
    """A traced model's nodes as lane-aware steps (:func:`layer_program`); calling it is the stacked forward
    (:data:`StackedForward`). ``convolutional``: whether a step is a (grouped) convolution."""

    def __init__(self, steps: list[Step], placeholder: str, output: str, lane_context: _LaneGenerators,
                 convolutional: bool) -> None:
        self.steps, self.placeholder, self.output = steps, placeholder, output
        self.lane_context, self.convolutional = lane_context, convolutional

    @staticmethod
    def _resolve(value, env):
        if isinstance(value, torch.fx.Node):
            return env[value.name]
        if isinstance(value, tuple | list):
            return type(value)(LayerProgram._resolve(v, env) for v in value)
        return value

    def __call__(self, params: Mapping[str, torch.Tensor], x: torch.Tensor, generators: Sequence[torch.Generator] | None = None,
                 lengths: Sequence[int] | None = None) -> torch.Tensor:
        self.lane_context.generators, self.lane_context.lengths = generators, lengths
        try:
            env = {self.placeholder: x}
            for name, fn, args, kwargs in self.steps:
                env[name] = fn(params, *self._resolve(args, env), **{k: self._resolve(v, env) for k, v in kwargs.items()})
            return env[self.output]
        finally:
            self.lane_context.generators = self.lane_context.lengths = None


def layer_program(model: nn.Module) -> LayerProgram:
    """Map an fx trace of ``model`` onto lane-aware operations; raise :class:`NotStackable` otherwise."""
    try:
        graph_module = torch.fx.symbolic_trace(model)
    except Exception as exc:  # fx raises many kinds of errors on untraceable code
        raise NotStackable(f"fx cannot trace the model: {exc}") from None
    steps: list[Step] = []
    lane_context = _LaneGenerators()
    convolutional = False
    placeholder: str | None = None
    output_arg = None
    for node in graph_module.graph.nodes:
        if node.op == "placeholder":
            if placeholder is not None:
                raise NotStackable("the model takes more than one input")
            placeholder = node.name
        elif node.op == "call_module":
            module = graph_module.get_submodule(node.target)
            steps.append(_module_step(node, module, lane_context))
            convolutional = convolutional or isinstance(module, nn.Conv2d)
        elif node.op == "call_function" and node.target in _ELEMENTWISE_FUNCTIONS:
            steps.append((node.name, lambda params, *a, _f=node.target, **kw: _f(*a, **kw), tuple(node.args), dict(node.kwargs)))
        elif node.op == "call_method" and node.target in _ELEMENTWISE_METHODS:
            steps.append(
                (node.name, lambda params, x, *a, _m=node.target, **kw: getattr(x, _m)(*a, **kw), tuple(node.args), dict(node.kwargs))
            )
        elif node.op == "output":
            output_arg = node.args[0]
        else:
            raise NotStackable(f"no stacked form for {node.op} {node.target}")
    if placeholder is None or not isinstance(output_arg, torch.fx.Node):
        raise NotStackable("the model must map one input to one output tensor")
    return LayerProgram(steps, placeholder, output_arg.name, lane_context, convolutional)


class _LaneGenerators:
    """Per-lane generators and real row counts of the forward call in progress (read by the dropout steps)."""

    generators: Sequence[torch.Generator] | None = None
    lengths: Sequence[int] | None = None


def vmap_program(model: nn.Module) -> StackedForward:
    def one_lane(params: Mapping[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(model, dict(params), (x,))

    batched = vmap(one_lane)

    def forward(params: Mapping[str, torch.Tensor], x: torch.Tensor, generators: Sequence[torch.Generator] | None = None,
                lengths: Sequence[int] | None = None) -> torch.Tensor:
        return batched(params, x)  # random layers fail the check below, so no generator is ever needed here

    return forward


_CHECK_SEEDS = (11, 12)


def _matches(forward: StackedForward, model: nn.Module, input_shape: tuple[int, ...]) -> bool:
    """Whether ``forward`` reproduces ``functional_call`` lane by lane on random parameters and inputs.

    Lane i runs with its generator seeded like torch's global generator for the per-lane reference call, so
    random layers must draw the same values in the same order to pass.
    """
    generator = torch.Generator().manual_seed(1234)
    base = {name: p.detach() for name, p in model.named_parameters()}
    lanes = len(_CHECK_SEEDS)
    stacked = {
        name: torch.stack([p + 0.1 * torch.randn(p.shape, generator=generator) for _ in range(lanes)]) for name, p in base.items()
    }
    x = torch.randn((lanes, 3, *input_shape), generator=generator)

    def reference(i: int) -> torch.Tensor:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(_CHECK_SEEDS[i])
            return functional_call(model, {n: t[i] for n, t in stacked.items()}, (x[i],))

    try:
        with torch.no_grad():
            got = forward(stacked, x, generators=[torch.Generator().manual_seed(s) for s in _CHECK_SEEDS])
            want = torch.stack([reference(i) for i in range(lanes)])
    except Exception:  # unsupported op, a vmap batching rule missing, random ops under vmap, ...
        return False
    return got.shape == want.shape and torch.allclose(got, want, rtol=1e-4, atol=1e-5)


def build_stacked_model(model: nn.Module, input_shape: tuple[int, ...]) -> StackedModel | None:
    """A checked stacked forward for ``model`` (in training mode), or ``None`` when it cannot be batched."""
    if any(True for _ in model.buffers()):
        return None  # per-client buffers (batch norm statistics) are handled by the sequential trainer only
    was_training = model.training
    model.train()
    try:
        try:
            program = layer_program(model)
        except NotStackable:
            program = None
        if program is not None and _matches(program, model, input_shape):
            random = any(isinstance(m, nn.Dropout) and m.p > 0 for m in model.modules())
            return StackedModel(program, "layers", random, program.convolutional)
        program = vmap_program(model)
        if _matches(program, model, input_shape):
            convolutional = any(isinstance(m, nn.Conv1d | nn.Conv2d | nn.Conv3d) for m in model.modules())
            return StackedModel(program, "vmap", convolutional=convolutional)
        return None
    finally:
        model.train(was_training)
