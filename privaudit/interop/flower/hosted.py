"""privaudit's algorithms and server-side privatizers hosted in Flower: a strategy for the server, a ClientApp for the clients.

The split follows privaudit's round (:mod:`privaudit.fl.algorithms.base`)::

    server (HostedStrategy.configure_train)   S ← sample clients (the engine's seeded stream), objective_i, E_i
    client (hosted_client_app, one node each) outcome_i ← local training of objective_i from ω̄ on its own partition
    server (HostedStrategy.aggregate_train)   result_i ← algorithm.finish(ω̄, i, outcome_i); ledger ← events;
                                              ω̄ ← algorithm.aggregate(r, ω̄, results)  — or server_update (no client)

Every piece is privaudit's own, called as :func:`privaudit.fl.engine.round_loop.run_federation` calls it: the same
:class:`~privaudit.fl.engine.seeding.SeedTree` streams (client sampling and stragglers keyed by the training round,
mini-batch order by (training round, client)), the sequential trainer
(:meth:`~privaudit.fl.engine.trainer.ClientTrainer.train_one`) in each ClientApp, the algorithm's ``finish`` and
``aggregate`` (and the privatizer wrapped around them) in the strategy, the same evaluation and round metrics. So a
spec run here and by :func:`~privaudit.fl.engine.run.run_training` with ``execution="sequential"`` gives the same
ledger and the same models up to floating-point summation order (Flower carries the float32 weights exactly; a ClientApp
trains with one torch thread, the engine with several: ``benchmarks/bench_flower.py`` measures ≤ 2e-7); with the
engine's batched trainer they agree up to summation order too.

What is hosted: the algorithms whose clients need nothing but the global model and their own data
(:data:`HOSTED_ALGORITHMS` and their ``upcycled-`` versions: Upcycled-X's even rounds send no message at all), under no
privacy or client-level central DP (``cdp``: DP-FedAvg's clip and noise at the server, its per-round
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
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from flwr.serverapp.strategy import Strategy

from privaudit.errors import InvalidParameterError
from privaudit.fl.engine.run import TrainSpec

#: Base algorithms whose client step depends only on the global model and the client's data.
HOSTED_ALGORITHMS = ("fedavg", "fedprox", "fedavgm", "fedyogi", "fedsgd")
#: Privacy mechanisms that act at the server (the hosted clients release their trained models as they are).
HOSTED_PRIVACY = ("none", "cdp")
#: Name of the ConfigRecord privaudit's messages carry.
CONFIG = "privaudit"
ARRAYS = "arrays"
METRICS = "metrics"


def check_hosted(spec: TrainSpec) -> None:
    """Refuse, with the reason, a spec whose algorithm or privacy Flower cannot host as privaudit runs it."""
    from privaudit.fl.algorithms.registry import UPCYCLED_PREFIX

    base = spec.algorithm.removeprefix(UPCYCLED_PREFIX)
    if base not in HOSTED_ALGORITHMS:
        raise InvalidParameterError(
            f"algorithm {spec.algorithm} cannot be hosted in Flower: its clients keep state between rounds; hosted are "
            f"{', '.join(HOSTED_ALGORITHMS)} and their upcycled- versions")
    privacy = spec.privacy or "none"
    if privacy not in HOSTED_PRIVACY:
        raise InvalidParameterError(
            f"--privacy {privacy} privatises on the clients, which the hosted ClientApp does not run; hosted are "
            f"{', '.join(HOSTED_PRIVACY)} (server-side)")


def spec_to_json(spec: TrainSpec) -> str:
    return json.dumps(spec.to_dict(), sort_keys=True)


def spec_from_json(text: str) -> TrainSpec:
    from attacks.membership.target import train_spec_from_dict

    return train_spec_from_dict(json.loads(text))


def _load_dataset(spec: TrainSpec):
    from attacks.membership.target import load_training_data

    return load_training_data(spec)


def to_arrays(state) -> Any:
    from flwr.app import ArrayRecord

    return ArrayRecord({k: v.detach().cpu().contiguous() for k, v in state.items()})


def from_arrays(arrays, like) -> dict[str, torch.Tensor]:
    """The state in ``arrays`` in the order and dtypes of ``like`` (a reply with other tensors is refused)."""
    got = arrays.to_torch_state_dict()
    if set(got) != set(like):
        raise InvalidParameterError(f"a reply carries tensors {sorted(got)[:4]}..., the model has {sorted(like)[:4]}...")
    return {k: got[k].to(like[k].dtype).reshape(like[k].shape) for k in like}


# -- the server ------------------------------------------------------------------------------------------
@dataclass
class _Round:
    started: float
    trains: bool
    contexts: list = field(default_factory=list)


class HostedStrategy(Strategy):
    """A privaudit :class:`~privaudit.fl.engine.run.TrainSpec` as a Flower strategy (see the module docstring).

    ``observers`` are the engine's :class:`~privaudit.fl.engine.round_loop.RoundObserver` values (the checkpoint
    writer among them) and see the run as they see an engine run. After the last round :attr:`result` holds the
    :class:`~privaudit.fl.engine.round_loop.FederationResult`.
    """

    def __init__(self, spec: TrainSpec, *, dataset=None, observers=(), timeout: float = 3600.0) -> None:
        from privaudit.fl.engine.params import model_state
        from privaudit.fl.engine.round_loop import RunInfo, _build_model, input_bounds
        from privaudit.fl.engine.run import build_algorithm, training_model, with_algorithm_defaults
        from privaudit.fl.engine.seeding import SEED_SCHEME, SeedTree
        from privaudit.fl.engine.trainer import ClientTrainer
        from privaudit.models import default_model_for

        spec = with_algorithm_defaults(spec)
        check_hosted(spec)
        self.spec = spec
        self.config = spec.federation_config()
        self.algorithm = build_algorithm(spec)
        self.dataset = _load_dataset(spec) if dataset is None else dataset
        self.seeds = SeedTree(self.config.seed)
        name = spec.model or default_model_for(self.dataset)
        module, self.model_name = _build_model(training_model(self.algorithm, name, self.dataset, spec.seed), self.dataset, self.seeds)
        module.train()
        self.module = module
        self.state = model_state(module)
        self.timeout = float(timeout)
        self.observers = list(observers)
        from privaudit.accounting.ledger import PrivacyLedger
        from privaudit.fl.algorithms.base import SetupContext
        from privaudit.fl.engine.evaluation import Evaluator

        trainer = ClientTrainer(module, self.dataset.input_shape, self.dataset.num_classes, self.config.local,
                                self.config.execution, self.seeds)
        self.algorithm.setup(SetupContext(
            model=module, initial_state={k: v.clone() for k, v in self.state.items()},
            trainable=tuple(n for n, p in module.named_parameters() if p.requires_grad),
            input_shape=tuple(self.dataset.input_shape), num_clients=self.dataset.num_clients,
            client_sizes=tuple(int(n) for n in self.dataset.client_sizes), local_lr=self.config.local.lr,
            local_momentum=self.config.local.momentum, seeds=self.seeds, trainer=trainer,
            input_bounds=input_bounds(self.dataset)))
        self.evaluator = Evaluator(module, self.dataset, train_loss=self.config.eval_train_loss)
        self.ledger = PrivacyLedger(neighbouring=self.algorithm.neighbouring)
        self.algorithm.start_federation(self.config, self.ledger)
        self.info = RunInfo(config=self.config, algorithm=self.algorithm.describe(), dataset=self.dataset.describe(),
                            model_name=self.model_name, model=module,
                            initial_state={k: v.clone() for k, v in self.state.items()},
                            execution_mode="flower: sequential trainer in each ClientApp",
                            seeds={"seed": self.config.seed, "scheme": SEED_SCHEME})
        self.history: list = []
        self.result = None
        self._nodes: dict[int, int] | None = None
        self._training_round = 0
        self._round: _Round | None = None
        self._started = time.perf_counter()
        self._spec_json = spec_to_json(spec)

    # -- helpers ---------------------------------------------------------------------------------
    def initial_arrays(self):
        return to_arrays(self.state)

    def _discover(self, grid) -> dict[int, int]:
        """partition id → node id, asked of every node once (a ``query`` message)."""
        from flwr.app import ConfigRecord, Message, MessageType, RecordDict

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
        from flwr.app import ConfigRecord, Message, MessageType, RecordDict

        from privaudit.fl.algorithms.base import ClientContext
        from privaudit.fl.engine.sampling import local_epochs, sample_clients

        if self._nodes is None:
            self._nodes = self._discover(grid)
        round_ = int(server_round)
        trains = self.algorithm.trains_clients(round_)
        self._round = _Round(time.perf_counter(), trains)
        for observer in self.observers:
            observer.on_round_start(round_, trains)
        if not trains:
            return []
        self._training_round += 1
        tr = self._training_round
        rng = self.seeds.numpy("sampling", tr)
        chosen = self.algorithm.select_clients(tr, rng)
        if chosen is not None:
            sampled = sorted(int(c) for c in chosen)
        else:
            sampled = [int(c) for c in sample_clients(self.dataset.num_clients, self.config.clients_per_round, self.config.sampling, rng)]
        epochs = [int(e) for e in local_epochs(len(sampled), self.config.local.epochs, self.config.stragglers,
                                               self.seeds.numpy("stragglers", tr))]
        client_draws = getattr(self.algorithm, "client_draws", None)  # the engine's hook (clock-seeded privatizers)
        if client_draws is not None and client_draws(tr, sampled, epochs, self.config) is not None:
            raise InvalidParameterError(f"{self.algorithm.name} draws its clients' epochs and mini-batches itself, which "
                                        "the hosted ClientApp does not reproduce")
        contexts = [ClientContext(round_, tr, cid, self.dataset.clients[cid], ep, self.seeds) for cid, ep in zip(sampled, epochs, strict=True)]
        for context in contexts:  # what the server knows of each client's objective (wrappers count the round's clients)
            self.algorithm.local_objective(self.state, context)
        self._round.contexts = contexts
        messages = []
        for context in contexts:
            record = ConfigRecord({"spec": self._spec_json, "client-id": context.client_id, "round": round_,
                                   "training-round": tr, "epochs": context.epochs})
            messages.append(Message(RecordDict({ARRAYS: to_arrays(self.state), CONFIG: record}),
                                    dst_node_id=self._nodes[context.client_id], message_type=MessageType.TRAIN))
        return messages

    def aggregate_train(self, server_round, replies):
        from flwr.app import MetricRecord

        from privaudit.fl.engine.round_loop import _round_metrics
        from privaudit.fl.engine.trainer import LocalOutcome

        round_ = int(server_round)
        current = self._round
        if current is None:
            raise InvalidParameterError(f"round {round_} was aggregated before it was configured")
        results = []
        if current.trains:
            outcomes: dict[int, LocalOutcome] = {}
            for reply in replies:
                _raise_on_error(reply)
                meta = reply.content[CONFIG]
                cid = int(meta["client-id"])
                outcomes[cid] = LocalOutcome(cid, from_arrays(reply.content[ARRAYS], self.state), steps=int(meta["steps"]),
                                             epochs=int(meta["epochs"]), mean_loss=float(meta["mean-loss"]))
            missing = [c.client_id for c in current.contexts if c.client_id not in outcomes]
            if missing:
                raise InvalidParameterError(f"round {round_}: no reply from client(s) {missing} (node failed or timed out)")
            results = [self.algorithm.finish(self.state, c, outcomes[c.client_id]) for c in current.contexts]
            for result in results:
                self.ledger.record_all(result.events)
            self.state = self.algorithm.aggregate(round_, self.state, results)
        else:
            self.state = self.algorithm.server_update(round_, self.state)
        sampled = [c.client_id for c in current.contexts]
        epochs = [c.epochs for c in current.contexts]
        metrics = _round_metrics(round_, current.trains, sampled, epochs, self.config, results, self.evaluator, self.algorithm,
                                 self.state, current.started)
        self.history.append(metrics)
        for observer in self.observers:
            observer.on_round_end(round_, self.state, results, metrics)
        if round_ == self.config.rounds:
            self._finish()
        reported = {k: float(v) for k, v in (("train-loss", metrics.train_loss), ("test-accuracy", metrics.test_accuracy))
                    if v is not None}
        return to_arrays(self.state), MetricRecord(reported)

    def _finish(self) -> None:
        from privaudit.fl.engine.round_loop import FederationResult

        self.result = FederationResult(state=self.state, history=self.history, ledger=self.ledger, info=self.info,
                                       seconds=time.perf_counter() - self._started,
                                       personal_states=self.algorithm.personal_states(), algorithm=self.algorithm)
        self.algorithm.end_federation(self.result)
        for observer in self.observers:
            observer.on_end(self.result)

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
    algorithm: Any
    trainer: Any
    seeds: Any
    like: dict


_WORKERS: dict[str, _Worker] = {}


def _worker(spec_json: str) -> _Worker:
    worker = _WORKERS.get(spec_json)
    if worker is not None:
        return worker
    from privaudit.fl.algorithms.base import SetupContext
    from privaudit.fl.engine.params import model_state
    from privaudit.fl.engine.round_loop import _build_model, input_bounds
    from privaudit.fl.engine.run import build_algorithm, training_model
    from privaudit.fl.engine.seeding import SeedTree
    from privaudit.fl.engine.trainer import ClientTrainer
    from privaudit.models import default_model_for

    spec = spec_from_json(spec_json)
    config = spec.federation_config()
    dataset = _load_dataset(spec)
    algorithm = build_algorithm(spec)
    seeds = SeedTree(config.seed)
    module, _ = _build_model(training_model(algorithm, spec.model or default_model_for(dataset), dataset, spec.seed), dataset, seeds)
    module.train()
    trainer = ClientTrainer(module, dataset.input_shape, dataset.num_classes, config.local, config.execution, seeds)
    state = model_state(module)
    algorithm.setup(SetupContext(
        model=module, initial_state=state, trainable=tuple(n for n, p in module.named_parameters() if p.requires_grad),
        input_shape=tuple(dataset.input_shape), num_clients=dataset.num_clients,
        client_sizes=tuple(int(n) for n in dataset.client_sizes), local_lr=config.local.lr,
        local_momentum=config.local.momentum, seeds=seeds, trainer=trainer, input_bounds=input_bounds(dataset)))
    worker = _Worker(dataset, algorithm, trainer, seeds, state)
    _WORKERS[spec_json] = worker
    return worker


def _partition_id(context) -> int:
    try:
        return int(context.node_config["partition-id"])
    except (KeyError, TypeError, ValueError):
        raise InvalidParameterError("the node has no partition-id in its node config (Flower's simulation sets it; "
                                    "on a deployment start each SuperNode with --node-config 'partition-id=i'") from None


def train_client(message, context):
    """The ClientApp's train handler: local training of this node's own client from the global model sent."""
    from flwr.app import ConfigRecord, Message, RecordDict

    from privaudit.fl.algorithms.base import ClientContext
    from privaudit.fl.engine.trainer import LocalTask

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
    from flwr.app import ConfigRecord, Message, RecordDict

    return Message(RecordDict({CONFIG: ConfigRecord({"partition-id": _partition_id(context)})}), reply_to=message)


def hosted_client_app(mods=()):
    """The ClientApp of :class:`HostedStrategy` (``mods``: Flower client mods, e.g. a canary mod)."""
    from flwr.clientapp import ClientApp

    app = ClientApp(mods=list(mods))
    app.train()(train_client)
    app.query()(answer_query)
    return app


# -- one call --------------------------------------------------------------------------------------------
def run_spec_in_flower(spec: TrainSpec, out=None, *, dataset=None, save_client_updates: bool = False,
                       overwrite: bool = False, backend_config=None, quiet: bool = True, extra=None):
    """Run ``spec`` in Flower's simulation engine (one node per client) and return its FederationResult.

    ``out`` writes the engine's checkpoint (manifest with the spec, ``"flower"`` section), as
    :func:`~privaudit.fl.engine.run.run_training` does, so every privaudit command reads it.
    """
    import flwr

    from privaudit.fl.engine.checkpoint import CheckpointWriter
    from privaudit.fl.engine.run import _ManifestSections, with_algorithm_defaults
    from privaudit.interop.flower.simulation import run_simulation

    spec = with_algorithm_defaults(spec)
    check_hosted(spec)
    observers: list = []
    writer = None
    if out is not None:
        flower = {"version": flwr.__version__, "hosted": True, "engine": "flwr.simulation (Ray backend)"}
        writer = CheckpointWriter(out, save_client_updates=save_client_updates, overwrite=overwrite,
                                  extra={"train_spec": spec.to_dict(), "flower": flower, **(extra or {})})
        writer.prepare()  # a bad --out is refused before Ray starts
    strategy = HostedStrategy(spec, dataset=dataset)
    if writer is not None:
        observers += [_ManifestSections(writer, strategy.algorithm), writer]
    strategy.observers = observers
    for observer in observers:
        observer.on_start(strategy.info)

    from flwr.serverapp import ServerApp

    server_app = ServerApp()

    @server_app.main()
    def _main(grid, context) -> None:
        strategy.run(grid)

    run_simulation(server_app, hosted_client_app(), strategy.dataset.num_clients, backend_config=backend_config, quiet=quiet)
    if strategy.result is None:
        raise InvalidParameterError("the Flower run ended before its last round")
    return replace(strategy.result, info=replace(strategy.result.info, execution_mode=strategy.info.execution_mode))
