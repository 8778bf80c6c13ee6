"""What a client releases under a given defence: ground-truth updates for inversion experiments.

Small, self-contained client-side training for attack experiments (the federation engine in
``privaudit.fl`` is the real trainer). Each defence reuses the same functional code the attacker
simulates (:mod:`attacks.inversion.client_simulation`), so an attacker that assumes the right defence matches the
client exactly.

* :class:`FedSGDRelease` — the mean loss gradient of the client's batch.
* :class:`FedAvgRelease` — θ_K − θ_0 after K local SGD steps (FedProx with ``proximal_mu > 0``).
* :class:`DPSGDRelease` — K steps of DP-SGD (Abadi et al., CCS 2016, Alg. 1): per-example gradients
  (``torch.func.vmap`` over ``torch.func.grad``), each clipped to L2 norm C jointly over all parameters,
  summed, Gaussian noise N(0, σ²C²I) added, divided by the batch size; released as θ_K − θ_0.

Papers add their own defences (:func:`registered_defences`, a paper's ``PAPER.defences``); each follows
:class:`Defence` and may reuse the same functional pieces.

:func:`release_update` returns the update together with the :class:`ClientKnowledge` an
honest-but-curious server has by default (the protocol's lr, steps, batch size and the number of
examples; labels only when ``labels_known``).

Models with BatchNorm train as a client does, in train mode: every forward pass normalises with its batch's
statistics and moves the running buffers once (:mod:`attacks.inversion.bn_prior`); the payload then carries the
buffers' change (``InversionPayload.buffer_update``), as FedAvg's state-dict exchange does. Only FedSGD and
FedAvg/FedProx are simulated for such models (DP-SGD's per-example gradients and the extra forward passes of other
defences have no defined batch statistics here: refused in one line).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch.func import functional_call, grad, vmap

from privaudit import plugins
from privaudit.errors import InvalidParameterError

from .bn_prior import fold_running_statistics, has_batch_norm, recorded_forward_statistics
from .client_simulation import FedSGDGradient, UnrolledLocalSGD, batch_slices
from .functional_model import FunctionalModel, ParamDict, one_hot, soft_cross_entropy
from .threat_model import ClientKnowledge, DataSpec, InversionPayload, ModelFactory


class Defence(Protocol):
    """What a client releases under a defence: ``run`` its local training from the model's weights (the update, as a
    parameter dict), the :class:`ClientKnowledge` an honest-but-curious server has of it, and a record of its settings."""

    name: str

    def run(
        self, model: FunctionalModel, inputs: torch.Tensor, targets: torch.Tensor, data: DataSpec, generator: torch.Generator
    ) -> ParamDict: ...

    def knowledge(self, num_examples: int, labels: tuple[int, ...] | None) -> ClientKnowledge: ...

    def describe(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class FedSGDRelease:
    name: str = "fedsgd"

    def run(self, model, inputs, targets, data, generator):  # type: ignore[no-untyped-def]
        return FedSGDGradient().simulate(model, inputs, targets, create_graph=False)

    def knowledge(self, num_examples: int, labels: tuple[int, ...] | None) -> ClientKnowledge:
        return ClientKnowledge(num_examples=num_examples, update_kind="gradient", labels=labels)

    def describe(self) -> dict[str, Any]:
        return {"defence": self.name}


@dataclass(frozen=True)
class FedAvgRelease:
    lr: float = 0.01
    local_steps: int = 4
    batch_size: int | None = None
    proximal_mu: float = 0.0
    name: str = "fedavg"

    def run(self, model, inputs, targets, data, generator):  # type: ignore[no-untyped-def]
        sgd = UnrolledLocalSGD(self.lr, self.local_steps, self.batch_size, self.proximal_mu)
        return sgd.simulate(model, inputs, targets, create_graph=False)

    def knowledge(self, num_examples: int, labels: tuple[int, ...] | None) -> ClientKnowledge:
        return ClientKnowledge(
            num_examples=num_examples, update_kind="delta", lr=self.lr, local_steps=self.local_steps,
            batch_size=self.batch_size, proximal_mu=self.proximal_mu, labels=labels,
        )

    def describe(self) -> dict[str, Any]:
        return {"defence": self.name, "lr": self.lr, "local_steps": self.local_steps,
                "batch_size": self.batch_size, "proximal_mu": self.proximal_mu}


def clipped_noisy_gradient(
    model: FunctionalModel,
    params: ParamDict,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    clip_norm: float,
    noise_multiplier: float,
    generator: torch.Generator,
) -> ParamDict:
    """(Σ_j clip_C(∇ℓ_j) + N(0, σ²C²I)) / B — one DP-SGD gradient (Abadi et al. 2016, Alg. 1)."""

    def example_loss(p: ParamDict, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        logits = functional_call(model.module, (p, model.buffers), (x.unsqueeze(0),))
        return soft_cross_entropy(logits, y.unsqueeze(0))

    per_example = vmap(grad(example_loss), in_dims=(None, 0, 0))(params, inputs, targets)
    norms = torch.sqrt(sum(g.reshape(g.shape[0], -1).pow(2).sum(dim=1) for g in per_example.values()))
    scale = torch.clamp(clip_norm / (norms + 1e-12), max=1.0)
    out = {}
    for name, g in per_example.items():
        summed = (g * scale.reshape((-1,) + (1,) * (g.dim() - 1))).sum(dim=0)
        noise = torch.randn(summed.shape, generator=generator, device=summed.device) * (noise_multiplier * clip_norm)
        out[name] = (summed + noise) / inputs.shape[0]
    return out


@dataclass(frozen=True)
class DPSGDRelease:
    lr: float = 0.01
    local_steps: int = 4
    batch_size: int | None = None
    clip_norm: float = 1.0
    noise_multiplier: float = 0.01
    name: str = "dpsgd"

    def __post_init__(self) -> None:
        if not self.clip_norm > 0 or self.noise_multiplier < 0:
            raise InvalidParameterError("DP-SGD needs a positive clip norm C and a non-negative noise multiplier σ")

    def run(self, model, inputs, targets, data, generator):  # type: ignore[no-untyped-def]
        start = {k: v.detach() for k, v in model.params.items()}
        theta = dict(start)
        batches = batch_slices(inputs.shape[0], self.batch_size)
        for step in range(self.local_steps):
            batch = batches[step % len(batches)]
            g = clipped_noisy_gradient(
                model, theta, inputs[batch], targets[batch], self.clip_norm, self.noise_multiplier, generator
            )
            theta = {k: theta[k] - self.lr * g[k] for k in theta}
        return {k: theta[k] - start[k] for k in theta}

    def knowledge(self, num_examples: int, labels: tuple[int, ...] | None) -> ClientKnowledge:
        return ClientKnowledge(
            num_examples=num_examples, update_kind="delta", lr=self.lr, local_steps=self.local_steps,
            batch_size=self.batch_size, labels=labels,
        )

    def describe(self) -> dict[str, Any]:
        return {"defence": self.name, "lr": self.lr, "local_steps": self.local_steps, "batch_size": self.batch_size,
                "clip_norm": self.clip_norm, "noise_multiplier": self.noise_multiplier}


def release_update(
    defence: Defence,
    model_factory: ModelFactory,
    global_weights: dict[str, torch.Tensor],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    data: DataSpec,
    *,
    seed: int = 0,
    labels_known: bool = False,
    private_parameters: tuple[str, ...] = (),
) -> InversionPayload:
    """Run ``defence`` on (inputs, labels) from ``global_weights`` and package what the server receives.

    ``private_parameters`` (e.g. PrivateFL's transformation layer) are used by the client but withheld
    from the payload's global weights and update. All randomness (DP noise) comes from ``seed``. The client runs on
    the device of ``global_weights`` (move them there to release on a GPU).
    """
    if inputs.shape[0] != labels.shape[0]:
        raise InvalidParameterError(f"{inputs.shape[0]} inputs but {labels.shape[0]} labels")
    if tuple(inputs.shape[1:]) != data.shape:
        raise InvalidParameterError(f"inputs have shape {tuple(inputs.shape[1:])}, the data spec says {data.shape}")
    device = next(iter(global_weights.values())).device if global_weights else torch.device("cpu")
    model = FunctionalModel.build(model_factory, global_weights, device)
    generator = torch.Generator(device=torch.device(device))
    generator.manual_seed(int(seed))
    x = inputs.to(device, torch.float32)
    targets = one_hot(labels.to(device), data.num_classes)
    buffer_update: dict[str, torch.Tensor] = {}
    if has_batch_norm(model.module):
        if not isinstance(defence, FedSGDRelease | FedAvgRelease):
            raise InvalidParameterError(f"defence {defence.name!r} is not simulated for models with BatchNorm (its extra or per-example "
                                        "forward passes have no defined batch statistics); use fedsgd, fedavg or fedprox")
        with recorded_forward_statistics(model) as statistics:  # every forward pass is one training step's
            update = defence.run(model, x, targets, data, generator)
        buffer_update = {k: v.detach().cpu() for k, v in fold_running_statistics(model, statistics).items()}
    else:
        update = defence.run(model, x, targets, data, generator)
    hidden = set(private_parameters)
    label_tuple = tuple(int(v) for v in labels.tolist()) if labels_known else None
    return InversionPayload(
        model_factory=model_factory,
        global_weights={k: v.detach().cpu() for k, v in global_weights.items() if k not in hidden},
        update={k: v.detach().cpu() for k, v in update.items() if k not in hidden},
        data=data,
        knowledge=defence.knowledge(inputs.shape[0], label_tuple),
        buffer_update={k: v for k, v in buffer_update.items() if k not in hidden},
    )


def fedprox_release(**options: Any) -> FedAvgRelease:
    """The ``fedprox`` defence: FedAvg's local SGD with FedProx's proximal term, μ = 0.01 unless given."""
    return FedAvgRelease(**{"proximal_mu": 0.01, **options, "name": "fedprox"})


#: The built-in defences by name: ``factory(**options)`` → a :class:`Defence` (``dpsgd`` also takes its σ from the
#: spec, :func:`attacks.inversion.experiment.parse_defence`).
BUILT_IN_DEFENCES: dict[str, Callable[..., Defence]] = {
    "fedsgd": FedSGDRelease,
    "fedavg": FedAvgRelease,
    "fedprox": fedprox_release,
    "dpsgd": DPSGDRelease,
}


def registered_defences() -> dict[str, Callable[..., Defence]]:
    """Every defence by name: the built-in ones, then those the registered papers contribute.

    A paper's ``PAPER.defences`` maps a name to a reference (:class:`privaudit.plugins.Ref`) to a factory with the
    same contract — ``factory(**options)`` returns a :class:`Defence` (a dataclass of the release's settings is one).
    A plug-in name that clashes with a built-in one is one clear error.
    """
    found = dict(BUILT_IN_DEFENCES)
    for name, (paper, ref) in plugins.collected("defences").items():
        if name in found:
            raise InvalidParameterError(f"paper {paper.key!r} registers the defence {name!r}, which is built in")
        found[name] = ref.load()
    return found
