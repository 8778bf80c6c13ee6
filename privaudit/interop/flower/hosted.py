"""privaudit's algorithms and server-side privatizers hosted in Flower: a strategy for the server, a ClientApp for the clients.

The strategy drives the engine's own :class:`~privaudit.fl.engine.round_loop.Federation` — the one round loop —
and the ClientApps train between its steps::

    server (HostedStrategy.__init__)          federation.start()
    server (HostedStrategy.configure_train)   plan ← federation.plan_round(r): S, E_i, objective_i (nothing trained)
    client (hosted_client_app, one node each) outcome_i ← local training of objective_i from ω̄ on its own partition
    server (HostedStrategy.aggregate_train)   federation.complete_round(plan, outcomes): finish, ledger ← events,
                                              aggregate (or server_update); after the last round federation.finish()

Every piece is privaudit's own, exactly as :func:`privaudit.fl.engine.round_loop.run_federation` runs it: the same
:class:`~privaudit.fl.engine.seeding.SeedTree` streams (client sampling and stragglers keyed by the training round,
mini-batch order by (training round, client)), the sequential trainer
(:meth:`~privaudit.fl.engine.trainer.ClientTrainer.train_one`) in each ClientApp, the algorithm's ``finish`` and
``aggregate`` (and the privatizer wrapped around them) in the strategy, the same evaluation and round metrics. So a
spec run here and by :func:`~privaudit.fl.run.run_training` with ``execution="sequential"`` gives the same
ledger and the same models up to floating-point summation order (Flower carries the float32 weights exactly; a ClientApp
trains with one torch thread, the engine with several: ``benchmarks/bench_flower.py`` measures ≤ 2e-7); with the
engine's batched trainer they agree up to summation order too.

What is hosted: the algorithms whose clients need nothing but the global model and their own data
(:data:`HOSTED_ALGORITHMS` and their versions under a hostable algorithm wrapper such as ``upcycled-``: Upcycled-X's
even rounds send no message at all), under no privacy or client-level central DP (``cdp``: DP-FedAvg's clip and noise at the server, its per-round
:class:`~privaudit.accounting.ledger.PrivacyEvent` charged to the clients' ``server`` subject, exactly as the engine
records it). Algorithms that keep per-client state on the server's side of the simulation (SCAFFOLD's control variates,
FedDyn, pFedMe, FedCurv) and client-side privatizers (DP-SGD, output or objective perturbation, distributed DP's noise
shares) are refused with the reason: hosting them needs client state that Flower's nodes would have to keep.

Which node trains which client: each node trains only its own partition (``node_config["partition-id"]``, set by
Flower's simulation engine); before round 1 the strategy asks every node for it (a ``query`` message) and sends client
i's work to the node holding partition i.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import flwr
import torch
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import ServerApp
from flwr.serverapp.strategy import Strategy

from attacks.membership.target import load_training_data, train_spec_from_dict
from privaudit.errors import InvalidParameterError
from privaudit.fl.algorithms.registry import split_wrapper, wrapper_specs
from privaudit.fl.engine.algorithm import Algorithm, ClientContext
from privaudit.fl.engine.checkpoint import CheckpointWriter
from privaudit.fl.engine.config import FederationConfig
from privaudit.fl.engine.local_solver import LocalOutcome, LocalTask, Trainer
from privaudit.fl.engine.round_loop import Federation, FederationResult, RoundPlan
from privaudit.fl.engine.seeding import SeedTree
from privaudit.fl.engine.trainer import ClientTrainer
from privaudit.fl.run import (
    ManifestSections,
    TrainSpec,
    build_algorithm,
    training_model,
    with_algorithm_defaults,
)
from privaudit.interop.flower.simulation import run_simulation
from privaudit.models import default_model_for

#: Base algorithms whose client step depends only on the global model and the client's data.
HOSTED_ALGORITHMS = ("fedavg", "fedprox", "fedavgm", "fedyogi", "fedsgd")
#: Privacy mechanisms that act at the server (the hosted clients release their trained models as they are).
HOSTED_PRIVACY = ("none", "cdp")
#: Name of the ConfigRecord privaudit's messages carry.
CONFIG = "privaudit"
ARRAYS = "arrays"
METRICS = "metrics"
#: How a hosted federation's clients train (the checkpoint manifest's ``model.execution``).
EXECUTION = "flower: sequential trainer in each ClientApp"


def check_hosted(spec: TrainSpec) -> None:
    """Refuse, with the reason, a spec whose algorithm or privacy Flower cannot host as privaudit runs it."""
    wrapper, base = split_wrapper(spec.algorithm)
    if base not in HOSTED_ALGORITHMS or (wrapper is not None and not wrapper.hostable):
        prefixes = [w.prefix for w in wrapper_specs().values() if w.hostable]
        versions = f" and their {', '.join(prefixes)} versions" if prefixes else ""
        raise InvalidParameterError(
            f"algorithm {spec.algorithm} cannot be hosted in Flower: its clients keep state between rounds; hosted are "
            f"{', '.join(HOSTED_ALGORITHMS)}{versions}")
    privacy = spec.privacy or "none"
    if privacy not in HOSTED_PRIVACY:
        raise InvalidParameterError(
            f"--privacy {privacy} privatises on the clients, which the hosted ClientApp does not run; hosted are "
            f"{', '.join(HOSTED_PRIVACY)} (server-side)")


def spec_to_json(spec: TrainSpec) -> str:
    return json.dumps(spec.to_dict(), sort_keys=True)


def spec_from_json(text: str) -> TrainSpec:
    return train_spec_from_dict(json.loads(text))


def to_arrays(state) -> Any:
    return ArrayRecord({k: v.detach().cpu().contiguous() for k, v in state.items()})


def from_arrays(arrays, like) -> dict[str, torch.Tensor]:
    """The state in ``arrays`` in the order and dtypes of ``like`` (a reply with other tensors is refused)."""
    got = arrays.to_torch_state_dict()
    if set(got) != set(like):
        raise InvalidParameterError(f"a reply carries tensors {sorted(got)[:4]}..., the model has {sorted(like)[:4]}...")
    return {k: got[k].to(like[k].dtype).reshape(like[k].shape) for k in like}


class _InClientAppsTrainer(ClientTrainer):
    """The federation's trainer when its clients train in Flower's ClientApps: the sequential trainer each node runs
    (the server side only sets algorithms up with it and names how clients trained)."""

    @property
    def mode(self) -> str:
        return EXECUTION


class InClientApps:
    """The :class:`~privaudit.fl.engine.round_loop.TrainerSource` of a hosted federation: clients train in the ClientApps
    (one sequential trainer per node, one torch thread), so the run records no hardware of this process."""

    def build(self, module, dataset, config: FederationConfig, seeds: SeedTree) -> tuple[Trainer, dict[str, Any]]:
        trainer = _InClientAppsTrainer(module, dataset.input_shape, dataset.num_classes, config.local, config.execution, seeds)
        return trainer, {}


def hosted_federation(spec: TrainSpec, dataset=None, observers=()) -> Federation:
    """The engine's federation of ``spec`` (defaults completed, checked hostable), its clients in the ClientApps."""
    spec = with_algorithm_defaults(spec)
    check_hosted(spec)
    algorithm = build_algorithm(spec)
    dataset = load_training_data(spec) if dataset is None else dataset
    model = training_model(algorithm, spec.model or default_model_for(dataset), dataset, spec.seed)
    return Federation(dataset, model, algorithm, spec.federation_config(), observers=observers, trainers=InClientApps())


# -- the server ------------------------------------------------------------------------------------------
class HostedStrategy(Strategy):
    """A privaudit :class:`~privaudit.fl.run.TrainSpec` as a Flower strategy (see the module docstring).

    ``observers`` are the engine's :class:`~privaudit.fl.engine.round_loop.RoundObserver` values (the checkpoint
    writer among them) and see the run as they see an engine run, from its start (in the constructor). After the last
    round :attr:`result` holds the :class:`~privaudit.fl.engine.round_loop.FederationResult`.
    """

    def __init__(self, spec: TrainSpec, *, dataset=None, observers=(), timeout: float = 3600.0) -> None:
        self.federation = hosted_federation(spec, dataset, observers)
        self.spec = with_algorithm_defaults(spec)
        self.timeout = float(timeout)
        self.result: FederationResult | None = None
        self._nodes: dict[int, int] | None = None
        self._plan: RoundPlan | None = None
        self._spec_json = spec_to_json(self.spec)
        self.federation.start()

    @property
    def algorithm(self) -> Algorithm:
        return self.federation.algorithm

    @property
    def dataset(self):
        return self.federation.dataset

    @property
    def config(self) -> FederationConfig:
        return self.federation.config

    # -- helpers ---------------------------------------------------------------------------------
    def initial_arrays(self):
        return to_arrays(self.federation.state)

    def _discover(self, grid) -> dict[int, int]:
        """partition id → node id, asked of every node once (a ``query`` message)."""
        node_ids = wait_for_nodes(grid, self.dataset.num_clients, self.timeout)
        if len(node_ids) != self.dataset.num_clients:
            raise InvalidParameterError(f"the Flower federation has {len(node_ids)} nodes, the spec's dataset "
                                        f"{self.dataset.num_clients} clients: run one node per client")
        asks = [Message(RecordDict({CONFIG: ConfigRecord({"ask": "partition-id"})}), dst_node_id=n,
                        message_type=MessageType.QUERY) for n in node_ids]
        mapping: dict[int, int] = {}
        for reply in grid.send_and_receive(asks, timeout=self.timeout):
            _raise_on_error(reply)
            mapping[int(reply.content[CONFIG]["partition-id"])] = int(reply.metadata.src_node_id)
        if sorted(mapping) != list(range(self.dataset.num_clients)):
            raise InvalidParameterError(f"the nodes hold partitions {sorted(mapping)}, expected 0..{self.dataset.num_clients - 1}")
        return mapping

    def run(self, grid):
        """Train every round of the spec on ``grid`` (the ServerApp's) and return the FederationResult."""
        self.start(grid=grid, initial_arrays=self.initial_arrays(), num_rounds=self.config.rounds, timeout=self.timeout)
        return self.result

    # -- Flower's strategy interface -------------------------------------------------------------------
    def configure_train(self, server_round, arrays, config, grid):
        if self._nodes is None:
            self._nodes = self._discover(grid)
        plan = self._plan = self.federation.plan_round(int(server_round))
        if not plan.trains:
            return []
        if plan.own_draws:  # the reference code's clock-seeded privatizers draw epochs and shuffles themselves
            raise InvalidParameterError(f"{self.algorithm.name} draws its clients' epochs and mini-batches itself, which "
                                        "the hosted ClientApp does not reproduce")
        messages = []
        for context in plan.contexts:
            record = ConfigRecord({"spec": self._spec_json, "client-id": context.client_id, "round": plan.round,
                                   "training-round": plan.training_round, "epochs": context.epochs})
            messages.append(Message(RecordDict({ARRAYS: to_arrays(plan.global_state), CONFIG: record}),
                                    dst_node_id=self._nodes[context.client_id], message_type=MessageType.TRAIN))
        return messages

    def aggregate_train(self, server_round, replies):
        round_ = int(server_round)
        plan = self._plan
        if plan is None or plan.round != round_:
            raise InvalidParameterError(f"round {round_} was aggregated before it was configured")
        outcomes = self._outcomes(plan, replies) if plan.trains else []
        metrics = self.federation.complete_round(plan, outcomes)
        if round_ == self.config.rounds:
            self.result = self.federation.finish()
        reported = {k: float(v) for k, v in (("train-loss", metrics.train_loss), ("test-accuracy", metrics.test_accuracy))
                    if v is not None}
        return to_arrays(self.federation.state), MetricRecord(reported)

    def _outcomes(self, plan: RoundPlan, replies) -> list[LocalOutcome]:
        """The sampled clients' local training outcomes from their replies, in the plan's client order."""
        outcomes: dict[int, LocalOutcome] = {}
        for reply in replies:
            _raise_on_error(reply)
            meta = reply.content[CONFIG]
            cid = int(meta["client-id"])
            outcomes[cid] = LocalOutcome(cid, from_arrays(reply.content[ARRAYS], plan.global_state), steps=int(meta["steps"]),
                                         epochs=int(meta["epochs"]), mean_loss=float(meta["mean-loss"]))
        missing = [c.client_id for c in plan.contexts if c.client_id not in outcomes]
        if missing:
            raise InvalidParameterError(f"round {plan.round}: no reply from client(s) {missing} (node failed or timed out)")
        return [outcomes[c.client_id] for c in plan.contexts]

    def configure_evaluate(self, server_round, arrays, config, grid):
        return []  # the global model is evaluated at the server, on the pooled test set, as the engine does

    def aggregate_evaluate(self, server_round, replies):
        return None

    def summary(self) -> None:
        pass


def wait_for_nodes(grid, count: int, timeout: float) -> list[int]:
    """The grid's node ids once ``count`` nodes are connected (nodes register asynchronously), or at ``timeout``."""
    deadline = time.monotonic() + float(timeout)
    while len(nodes := list(grid.get_node_ids())) < count and time.monotonic() < deadline:
        time.sleep(0.2)
    return nodes


def _raise_on_error(reply) -> None:
    if reply.has_error():
        raise InvalidParameterError(f"node {reply.metadata.src_node_id} failed: {reply.error.reason}")


# -- the clients -----------------------------------------------------------------------------------------
@dataclass
class _Worker:
    """One node's privaudit side, built once per spec in each process that runs ClientApps."""

    dataset: Any
    algorithm: Algorithm
    trainer: Trainer
    seeds: SeedTree
    like: dict


_WORKERS: dict[str, _Worker] = {}


def _worker(spec_json: str) -> _Worker:
    """The spec's federation set up as the server's is (same model, algorithm and trainer), without starting it."""
    worker = _WORKERS.get(spec_json)
    if worker is None:
        federation = hosted_federation(spec_from_json(spec_json))
        federation.set_up()
        worker = _WORKERS[spec_json] = _Worker(federation.dataset, federation.algorithm, federation.trainer,
                                               federation.seeds, federation.state)
    return worker


def _partition_id(context) -> int:
    try:
        return int(context.node_config["partition-id"])
    except (KeyError, TypeError, ValueError):
        raise InvalidParameterError("the node has no partition-id in its node config (Flower's simulation sets it; "
                                    "on a deployment start each SuperNode with --node-config 'partition-id=i'") from None


def train_client(message, context):
    """The ClientApp's train handler: local training of this node's own client from the global model sent."""
    meta = message.content[CONFIG]
    cid = int(meta["client-id"])
    own = _partition_id(context)
    if cid != own:
        raise InvalidParameterError(f"the server sent client {cid}'s work to the node holding partition {own}")
    torch.set_num_threads(1)
    worker = _worker(str(meta["spec"]))
    state = from_arrays(message.content[ARRAYS], worker.like)
    client = ClientContext(int(meta["round"]), int(meta["training-round"]), cid, worker.dataset.clients[cid],
                           int(meta["epochs"]), worker.seeds)
    objective = worker.algorithm.local_objective(state, client)
    outcome = worker.trainer.train_one(state, LocalTask(cid, client.data, client.epochs, objective), client.training_round)
    reply = ConfigRecord({"client-id": cid, "steps": int(outcome.steps), "epochs": int(outcome.epochs),
                          "mean-loss": float(outcome.mean_loss), "num-examples": int(client.num_examples)})
    return Message(RecordDict({ARRAYS: to_arrays(outcome.state), CONFIG: reply}), reply_to=message)


def answer_query(message, context):
    """The ClientApp's query handler: this node's partition id."""
    return Message(RecordDict({CONFIG: ConfigRecord({"partition-id": _partition_id(context)})}), reply_to=message)


def hosted_client_app(mods=()):
    """The ClientApp of :class:`HostedStrategy` (``mods``: Flower client mods, e.g. a canary mod)."""
    app = ClientApp(mods=list(mods))
    app.train()(train_client)
    app.query()(answer_query)
    return app


# -- one call --------------------------------------------------------------------------------------------
def run_spec_in_flower(spec: TrainSpec, out=None, *, dataset=None, save_client_updates: bool = False,
                       overwrite: bool = False, backend_config=None, quiet: bool = True, extra=None):
    """Run ``spec`` in Flower's simulation engine (one node per client) and return its FederationResult.

    ``out`` writes the engine's checkpoint (manifest with the spec, ``"flower"`` section), as
    :func:`~privaudit.fl.run.run_training` does, so every privaudit command reads it.
    """
    spec = with_algorithm_defaults(spec)
    check_hosted(spec)
    observers: list = []
    if out is not None:
        flower = {"version": flwr.__version__, "hosted": True, "engine": "flwr.simulation (Ray backend)"}
        writer = CheckpointWriter(out, save_client_updates=save_client_updates, overwrite=overwrite,
                                  extra={"train_spec": spec.to_dict(), "flower": flower, **(extra or {})})
        writer.prepare()  # a bad --out is refused before Ray starts
        observers += [ManifestSections(writer), writer]
    strategy = HostedStrategy(spec, dataset=dataset, observers=observers)
    server_app = ServerApp()

    @server_app.main()
    def _main(grid, context) -> None:
        strategy.run(grid)

    run_simulation(server_app, hosted_client_app(), strategy.dataset.num_clients, backend_config=backend_config, quiet=quiet)
    if strategy.result is None:
        raise InvalidParameterError("the Flower run ended before its last round")
    return strategy.result
