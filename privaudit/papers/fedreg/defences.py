"""What a FedReg client releases in an inversion experiment: the ``fedreg`` and ``fedreg-mg`` defences.

Xu, Hong, Huang, Jiang, "Acceleration of Federated Learning with Alleviated Forgetting in Local Training" (FedReg),
ICLR 2022: the client's local training with the pseudo-data regulariser (§3.2, eq. 10–11) and, for FedReg+MG, the
modified gradient (§3.3, eq. 12), run by the same functional code the adaptive attacker simulates
(:class:`privaudit.papers.fedreg.forward.FedRegLocalTraining`), so an attacker that assumes the right defence matches
the client exactly. Each release follows :class:`attacks.inversion.release.Defence`; the paper registers both by
name (``PAPER.defences``), which is how :func:`attacks.inversion.experiment.parse_defence` finds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from attacks.inversion.threat_model import ClientKnowledge
from privaudit.papers.fedreg.forward import FedRegLocalTraining


@dataclass(frozen=True)
class FedRegMGRelease:
    """θ_K − θ_0 after K local FedReg steps (eq. 11) with MG (eq. 12) and the regulariser (eq. 10), each switchable;
    FGSM pseudo data clamped to the data range unless ``clamp_fgsm`` is off (the reference code's, audit point R6)."""

    lr: float = 0.01
    local_steps: int = 1
    batch_size: int | None = None
    gamma: float = 0.5
    pseudo_step: float = 0.1
    perturb_step: float | None = None
    fgsm_steps: int = 10
    use_modified_gradient: bool = True
    regularize: bool = True
    clamp_fgsm: bool = True
    name: str = "fedreg-mg"

    def run(self, model, inputs, targets, data, generator):  # type: ignore[no-untyped-def]
        local = FedRegLocalTraining(
            lr=self.lr, local_steps=self.local_steps, batch_size=self.batch_size, gamma=self.gamma,
            pseudo_step=self.pseudo_step, perturb_step=self.perturb_step, fgsm_steps=self.fgsm_steps,
            use_modified_gradient=self.use_modified_gradient, regularize=self.regularize,
            box=data.box(inputs.device) if self.clamp_fgsm else None,
        )
        return local.simulate(model, inputs, targets, create_graph=False)

    def knowledge(self, num_examples: int, labels: tuple[int, ...] | None) -> ClientKnowledge:
        return ClientKnowledge(
            num_examples=num_examples, update_kind="delta", lr=self.lr, local_steps=self.local_steps,
            batch_size=self.batch_size, labels=labels,
        )

    def describe(self) -> dict[str, Any]:
        return {"defence": self.name, "lr": self.lr, "local_steps": self.local_steps, "batch_size": self.batch_size,
                "gamma": self.gamma, "pseudo_step": self.pseudo_step, "fgsm_steps": self.fgsm_steps,
                "modified_gradient": self.use_modified_gradient, "regularize": self.regularize,
                "fgsm_clamped_to_data_range": self.clamp_fgsm}


def plain_fedreg_release(**options: Any) -> FedRegMGRelease:
    """The ``fedreg`` defence: FedReg's local step without the modified gradient (eq. 10–11 only)."""
    return FedRegMGRelease(**{**options, "use_modified_gradient": False, "name": "fedreg"})
