"""PrivateFL (Yang, Hui, Yuan, Gong & Cao, USENIX Security 2023; 001): FL with a personalised data transformation.

Every client k trains an *extended local model* θ_k = T_k ∘ θ_{k_L}: a personalised transformation T_k
("layer zero", :mod:`privaudit.papers.privatefl.transform`) in front of the shared model (001 §3.2, Eq. 2). Each round,
client k starts θ_{k_L} from the global model and T_k from its own T_k of its previous round (identity at
the start), trains both (Alg. 2), keeps T_k and uploads θ_{k_L} only (Alg. 2 line 13) — the released model
here carries the global model's (identity) transformation, i.e. the released update of T_k is zero. The server
averages the uploaded models without weights, θ^{r+1} = (1/K_s) Σ_k θ_{k_L} (Alg. 1 line 7; the reference
code's ``agg_weights`` is the same plain mean).

The privacy variants are wrappers around this algorithm, built when the run starts by
:class:`~privaudit.papers.privatefl.calibrated.CalibratedPrivateFL` (the algorithm ``privatefl`` of the registry,
which calibrates the noise for the claimed ε from the run; :func:`~privaudit.papers.privatefl.experiment.privacy_wrapper`):

* LDP — :class:`privaudit.fl.privacy.local_dp.LocalDP` (record-level DP-SGD of the whole extended model, 001 §3.3);
* CDP — :class:`privaudit.papers.privatefl.central_dp.PrivateFLCentralDP` (``paper`` Alg. 1, ``reference`` code, ``dp-fedavg``);
* DDP — :class:`privaudit.fl.privacy.distributed_dp.DistributedDP` (Alg. 3: Skellam + secure aggregation).

The reference code trains the transformation with its own learning rate ``--flr`` (``CDPUser`` param groups,
BHui97/PrivateFL@39711e6:FedUser.py); ``transform_lr_scale`` (= flr/lr) reproduces that, 1 (one learning rate, the paper) by default.
``personal_layers="reference"`` keeps, as the reference code does for its ``*_IN`` models
(``CDPUser.set_model_state_dict``), every parameter whose name holds 'norm', 'bn' or 'downsample.1' on the client as
well: not uploaded, not averaged, not noised (the server's privatizers see only :attr:`shared_names`); buffers are
not among them (privaudit's server keeps the global model's).
:meth:`personal_states` gives every client's extended model (global θ_L, own T_k) for the personalised
evaluation (audit point P8); the global model itself carries the identity transformation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine import params as P
from privaudit.fl.engine.algorithm import Algorithm, ClientContext, ClientResult
from privaudit.fl.engine.capabilities import PersonalModels, SharedParameters
from privaudit.fl.engine.local_training import SGD, LocalObjective
from privaudit.fl.engine.params import State
from privaudit.papers.privatefl.grouped_sgd import GroupedSGD
from privaudit.papers.privatefl.personal_layers import PersonalLayers, is_personal
from privaudit.papers.privatefl.personal_start import PersonalStart
from privaudit.papers.privatefl.transform import PERSONAL_PREFIX


class PrivateFL(Algorithm, SharedParameters, PersonalModels):
    """Personalised transformation kept on each client, plain mean of the uploaded shared models."""

    name = "privatefl"

    def __init__(self, transform_lr_scale: float = 1.0, personal_layers: PersonalLayers | str = PersonalLayers.TRANSFORM) -> None:
        scale = float(transform_lr_scale)
        if not scale > 0 or math.isinf(scale):
            raise InvalidParameterError(f"the transformation's learning-rate factor must be a finite number > 0, got {transform_lr_scale}")
        self.transform_lr_scale = scale
        self.personal_layers = PersonalLayers.parse(personal_layers)
        self.personal_names: tuple[str, ...] = ()
        self._shared_names: tuple[str, ...] = ()
        self._personal: dict[int, State] = {}
        self._global: State = {}

    def setup(self, context) -> None:
        super().setup(context)
        self.personal_names = tuple(n for n in context.trainable if is_personal(n, self.personal_layers))
        self._shared_names = tuple(n for n in context.trainable if not is_personal(n, self.personal_layers))
        self._personal = {}
        self._global = P.clone(context.initial_state)

    @property
    def shared_names(self) -> tuple[str, ...]:
        """The parameters the server averages: every trainable one but the personal transformation (none before setup)."""
        return self._shared_names

    def personal_parameters(self, client: int) -> State:
        """Client ``client``'s current transformation (the global model's identity one if it never trained)."""
        kept = self._personal.get(int(client))
        return dict(kept) if kept is not None else {n: self._global[n] for n in self.personal_names}

    def local_objective(self, global_state: State, client: ClientContext) -> LocalObjective:
        solver: Any = SGD() if self.transform_lr_scale == 1.0 else GroupedSGD(((PERSONAL_PREFIX, self.transform_lr_scale),))
        if self.personal_names:
            solver = PersonalStart(self.personal_parameters(client.client_id), solver)
        return LocalObjective(solver=solver)

    def finish(self, global_state: State, client: ClientContext, outcome) -> ClientResult:
        if self.personal_names:
            self._personal[client.client_id] = {n: outcome.state[n].detach().clone() for n in self.personal_names}
        released = {k: (global_state[k].clone() if k in self.personal_names else v) for k, v in outcome.state.items()}
        return ClientResult(
            client_id=client.client_id,
            num_examples=client.num_examples,
            state=released,
            train_loss=outcome.mean_loss,
            steps=outcome.steps,
            epochs=outcome.epochs,
            info=dict(outcome.info),
        )

    def aggregate(self, round: int, global_state: State, results: Sequence[ClientResult]) -> State:
        """θ^{r+1} = (1/K_s) Σ_k θ_{k_L} over the shared parameters (001 Alg. 1 line 7); T stays the identity."""
        new = P.clone(global_state)
        if results:
            for name in self.shared_names:
                new[name] = torch.stack([r.state[name] for r in results]).mean(dim=0)
        self._global = new
        return new

    def observe_global(self, state: State) -> None:
        """Set the global model the clients' kept transformations are combined with in :meth:`personal_states`
        (the server step, :meth:`aggregate`, sets it every round; this sets one trained elsewhere)."""
        self._global = state

    def personal_states(self) -> dict[int, State]:
        """Every client's extended model: the current global θ_L with the client's own T_k."""
        if not self._global:
            return {}
        return {cid: {**self._global, **self.personal_parameters(cid)} for cid in range(self.context.num_clients)}

    def hyperparameters(self) -> dict[str, Any]:
        out: dict[str, Any] = {"transform_lr_scale": self.transform_lr_scale, "personal_parameters": list(self.personal_names)}
        if self.personal_layers is not PersonalLayers.TRANSFORM:
            out["personal_layers"] = self.personal_layers.value
        return out

