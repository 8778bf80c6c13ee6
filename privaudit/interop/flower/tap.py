"""The audit tap: record any Flower strategy's run as a privaudit checkpoint, with the privacy events of its DP wrapper.

Use (the ServerApp and ClientApp of your Flower app; two lines change)::

    recorder = FederationRecorder(out, model=net, dataset=DatasetReference.packaged("digits", partition=parts))
    strategy = AuditTap(DifferentialPrivacyServerSideFixedClipping(FedAvg(...), 1.0, 0.5, 4), recorder=recorder)
    strategy.start(grid=grid, initial_arrays=ArrayRecord(net.state_dict()), num_rounds=3)   # closes the recorder
    client_app = ClientApp(mods=[tap_mod])                                                    # says which partition

:class:`AuditTap` is itself a Flower ``Strategy``: it passes every call to the strategy it wraps and, per round,
hands :meth:`~privaudit.interop.recorder.FederationRecorder.record_round` the global model the wrapped strategy
aggregated, the sampled clients (by partition id), the models they sent when ``record_client_updates`` (as sent:
before a server-side clip), the round's metrics (the wrapped strategy's and ``evaluate_fn``'s) and the privacy events:

* under Flower's fixed-clipping wrappers (``DifferentialPrivacyServerSideFixedClipping``, or
  ``DifferentialPrivacyClientSideFixedClipping`` with ``fixedclipping_mod`` on the clients; McMahan, Ramage, Talwar &
  Zhang 2018): the server adds N(0, (σC/m)²) to the mean of the m clipped updates, so the noisy *sum* of the n updates
  that arrived has multiplier σ·n/m (σ when every sampled client replied). Flower samples m of the N nodes uniformly
  without replacement (``random.sample``), so the round is one ``SubsampledGaussian(σn/m, q = m/N, fixed-size)``
  (``Gaussian`` when every node takes part), charged to the clients' ``server`` subject (client-level DP). The
  sensitivity C of the *mean* holds only when the clients' weights are equal: with unequal weights (FedAvg weights by
  ``num-examples``) the event is recorded ``valid=False`` with the reason, as Flower's own accountant refuses them;
  so is a round whose wrapped strategy aggregates other than by ``FedAvg.aggregate_train`` (FedMedian, FedTrimmedAvg,
  FedAvgM, FedAdam, …: a median, a trimmed mean or a server optimiser step is not the mean the noise is calibrated to;
  Flower's accountant refuses them too). The event covers the model arrays only: the wrapped strategy's aggregated
  train metrics (e.g. the clients' mean loss) pass through un-noised and are recorded as they are;
* with client-side clipping the server trusts the clients' ``fixedclipping_mod``: the tap measures every update
  that arrives and records the round ``valid=False`` when one is longer than C (likewise C_t and
  ``adaptiveclipping_mod`` below);
* under Flower's adaptive-clipping wrappers (``DifferentialPrivacyServerSideAdaptiveClipping``, or
  ``DifferentialPrivacyClientSideAdaptiveClipping`` with ``adaptiveclipping_mod`` on the clients; Andrew, Thakkar,
  McMahan & Ramaswamy 2021): both releases of a round — the noisy count of clipped updates that moves the clip norm,
  and the noisy mean — with the round's clip C_t read from the wrapper before its aggregation (kept as the round metric
  ``dp_clipping_norm``) and the C_{t+1} at which Flower then draws the mean's noise
  (:mod:`~privaudit.interop.flower.adaptive` derives the events: two Gaussians when every node trains, one fixed-size
  subsampled Gaussian of Thm 1's combined multiplier when m < N are sampled); invalid as for fixed clipping;
* without a DP wrapper: every sampled client released its update without calibrated noise (``NoDP``: ε = ∞).
* with :class:`~privaudit.interop.flower.canary_clients.FlowerCanaryClients` in the chain (virtual canary clients
  appended to the replies before the DP wrapper): the canaries count in the round's population, sample and results
  (the event's q and multiplier), never in the recorded partition or sampled clients.

When the wrapper runs Flower's own accountant (``accountant=``), its ε is kept in the checkpoint beside privaudit's
(``reported_epsilon``), with what that accountant composed (:func:`flower_accounting`), so ``compute-epsilon
--checkpoint`` and reports classify it (:mod:`privaudit.accounting.reported`). Flower's fixed-clipping accounting
(flwr 1.42 requires ``SamplingMethod.NO_AMPLIFICATION``) composes one Gaussian(σ) of sensitivity C per round. That is
the round's mechanism when every node trains; when m < N nodes are sampled, an added client can displace a sampled one,
the noised sum moves by up to 2C, and the round is the fixed-size subsampled Gaussian above, which Gaussian(σ) does not
bound under add/remove neighbours: Flower's figure is then *not an upper bound*, and *refuted* where a certified lower
bound on the recorded rounds exceeds it (10 rounds of 5 of 10 clients at σ = 1, δ = 1e-5: Flower's RDP gives
ε = 19.05, the recorded rounds' PRV lower end 31.3).

Flower's client-side ``LocalDpMod`` is not read: its noise is added on the clients, where the tap cannot see it, so a
run with ``LocalDpMod`` alone is recorded as without DP — an over-statement of risk, never of privacy. The adaptive
wrappers have no accountant of their own in flwr 1.42, so no Flower ε is kept for them.

:func:`tap_mod` is the client mod that adds the node's partition id (``node_config["partition-id"]``) to each train
reply in a ConfigRecord of its own; the tap needs it to name the clients in the recorded partition, and refuses a run
without it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from flwr.app import ArrayRecord, ConfigRecord, MessageType
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideAdaptiveClipping,
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAvg,
    Strategy,
)

from privaudit.accounting.ledger import SERVER, PrivacyEvent
from privaudit.accounting.mechanisms import Gaussian, Neighbouring, Sampling, SubsampledGaussian
from privaudit.accounting.reported import FrameworkAccounting
from privaudit.errors import InvalidParameterError
from privaudit.interop.flower.adaptive import AdaptiveRound, FlowerAdaptiveDP, adaptive_round_events
from privaudit.interop.flower.canary_clients import FlowerCanaryClients
from privaudit.interop.recorder import FederationRecorder
from privaudit.interop.releases import NoDP

#: The ConfigRecord :func:`tap_mod` adds to a train reply.
TAP_RECORD = "privaudit-tap"
FIXED_WRAPPERS = DifferentialPrivacyServerSideFixedClipping | DifferentialPrivacyClientSideFixedClipping
ADAPTIVE_WRAPPERS = DifferentialPrivacyServerSideAdaptiveClipping | DifferentialPrivacyClientSideAdaptiveClipping
#: The round metric holding an adaptive wrapper's clip norm C_t (the norm the round's updates were clipped to).
CLIP_METRIC = "dp_clipping_norm"


def tap_mod(message, context, call_next):
    """Flower client mod: the train reply carries this node's partition id (``ConfigRecord`` ``privaudit-tap``)."""
    reply = call_next(message, context)
    if message.metadata.message_type.split(".")[0] != MessageType.TRAIN or reply.has_error():
        return reply
    try:
        partition = int(context.node_config["partition-id"])
    except (KeyError, TypeError, ValueError):
        raise InvalidParameterError("tap_mod needs the node's partition-id (Flower's simulation sets it; on a deployment "
                                    "start each SuperNode with --node-config 'partition-id=i')") from None
    reply.content[TAP_RECORD] = ConfigRecord({"partition-id": partition})
    return reply


# -- Flower's DP wrappers ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class FlowerDP:
    """The settings of a Flower fixed-clipping DP wrapper: noise multiplier σ, clip C, clients sampled per round m."""

    wrapper: str
    noise_multiplier: float
    clipping_norm: float
    num_sampled_clients: int
    #: the class whose ``aggregate_train`` the wrapped strategy runs, and whether it is ``FedAvg``'s (the mean)
    aggregator: str = "FedAvg"
    mean_aggregation: bool = True

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _chain(strategy) -> Iterable:
    seen = set()
    while strategy is not None and id(strategy) not in seen:
        seen.add(id(strategy))
        yield strategy
        strategy = getattr(strategy, "strategy", None)


def _aggregation(inner) -> tuple[str, bool]:
    """(the class whose ``aggregate_train`` ``inner`` runs, whether it is ``FedAvg``'s mean)."""
    method = type(inner).aggregate_train  # Strategy declares it
    return method.__qualname__.split(".")[0], isinstance(inner, FedAvg) and method is FedAvg.aggregate_train


def _dp_wrappers(strategy) -> list:
    """The Flower DP wrappers (fixed or adaptive clipping) in ``strategy``'s chain; more than one is refused."""
    found = [layer for layer in _chain(strategy) if isinstance(layer, FIXED_WRAPPERS | ADAPTIVE_WRAPPERS)]
    if len(found) > 1:
        raise InvalidParameterError("the strategy has two Flower DP wrappers; the tap records one")
    return found


def flower_dp_settings(strategy) -> FlowerDP | FlowerAdaptiveDP | None:
    """The DP wrapper's settings in ``strategy``'s chain of wrapped strategies (``None`` without one): a fixed-clipping
    wrapper's (:class:`FlowerDP`) or an adaptive-clipping wrapper's
    (:class:`~privaudit.interop.flower.adaptive.FlowerAdaptiveDP`, its clip as it is now). A chain with two DP wrappers
    is refused."""
    found = _dp_wrappers(strategy)
    if not found:
        return None
    layer = found[0]
    owner, mean = _aggregation(layer.strategy)  # Flower's DP wrappers hold the strategy they wrap
    if isinstance(layer, ADAPTIVE_WRAPPERS):
        return FlowerAdaptiveDP(type(layer).__name__, float(layer.noise_multiplier), float(layer.clipped_count_stddev),
                                int(layer.num_sampled_clients), float(layer.clipping_norm),
                                float(layer.target_clipped_quantile), float(layer.clip_norm_lr), aggregator=owner,
                                mean_aggregation=mean)
    return FlowerDP(type(layer).__name__, float(layer.noise_multiplier), float(layer.clipping_norm),
                    int(layer.num_sampled_clients), aggregator=owner, mean_aggregation=mean)


def flower_privacy_spent(strategy) -> tuple[str, Any, Any] | None:
    """(wrapper name, Flower's ``PrivacySpent``, its accountant) when a DP wrapper in the chain runs Flower's own
    accountant."""
    for layer in _chain(strategy):  # only the fixed-clipping wrappers hold an (optional) accountant in flwr 1.42
        if isinstance(layer, FIXED_WRAPPERS) and layer.accountant is not None:
            return type(layer).__name__, layer.privacy_spent(), layer.accountant
    return None


def flower_accounting(accountant, method: str) -> FrameworkAccounting | None:
    """What a Flower accountant composed, from its public ``config`` and ``state_dict()`` (flwr 1.42,
    ``flwr.supercore.privacy_accounting``): per composed event, Gaussian(σ) (``no-amplification``), σ at Poisson rate
    m/N (``poisson``) or m of N without replacement (``without-replacement``, replace-one). ``None`` when its state
    cannot be read."""
    from flwr.serverapp import NeighboringRelation, SamplingMethod

    if method != "rdp":  # the one Flower accountant whose answer privaudit knows to be an upper bound (dp-accounting's RDP)
        return None
    try:
        config = accountant.config
        compositions = accountant.state_dict()["compositions"]
        mechanisms = []
        for item in compositions:
            event, count = item["event"], int(item["count"])
            sigma, m, n = float(event["noise_multiplier"]), int(event["sample_size"]), int(event["population_size"])
            if config.sampling_method is SamplingMethod.NO_AMPLIFICATION or m >= n:
                mechanisms.append((Gaussian(sigma), count))
            elif config.sampling_method is SamplingMethod.POISSON:
                mechanisms.append((SubsampledGaussian(sigma, m / n, Sampling.POISSON), count))
            else:
                mechanisms.append((SubsampledGaussian(sigma, m / n, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT), count))
        relation = (Neighbouring.REPLACE_ONE if config.neighboring_relation is NeighboringRelation.REPLACE_ONE
                    else Neighbouring.ADD_REMOVE)
        amplification = config.sampling_method.value
    except (AttributeError, KeyError, TypeError, ValueError, InvalidParameterError):
        return None
    if not mechanisms:
        return None
    caveat = ("Flower's no-amplification accounting takes each round as Gaussian(σ) with sensitivity C, which is the round "
              "only when every node trains; with m < N sampled, an added client can displace a sampled one, so the noised "
              "sum moves by up to 2C and Gaussian(σ) does not bound the round under add/remove neighbours"
              if amplification == SamplingMethod.NO_AMPLIFICATION.value else
              "Flower's accountant composes the events its strategy reported; the rounds recorded from the run differ")
    return FrameworkAccounting(method, tuple(mechanisms), relation, "upper",
                               model=f"Flower {method} accounting with sampling_method={amplification}", caveat=caveat)


def _weighting_key(strategy) -> str | None:
    for layer in _chain(strategy):
        key = getattr(layer, "weighted_by_key", None)
        if isinstance(key, str):
            return key
    return None


def _weights(replies, key: str | None) -> list[float] | None:
    if key is None:
        return None
    out = []
    for reply in replies:
        records = list(reply.content.metric_records.values())
        if len(records) != 1 or key not in records[0]:
            return None
        out.append(float(records[0][key]))
    return out


def largest_update_norm(replies, sent: ArrayRecord) -> float:
    """The largest L2 norm, over all of a reply's arrays as Flower's ``get_norm`` takes it, of reply − ``sent``, less
    what float32 rounding of ``sent`` + a clipped update can add (2⁻²³ per unit of ‖sent‖ and of the update): a
    lower bound on the norm of an update as the client computed it."""
    base = {k: v.double() for k, v in _state_of(sent).items()}
    rounding = 2.0**-23 * math.sqrt(sum(float((v**2).sum()) for v in base.values()))
    largest = 0.0
    for reply in replies:
        for record in reply.content.array_records.values():
            state = _state_of(record)
            if set(state) != set(base):
                raise InvalidParameterError("a train reply carries other tensors than the global model it was sent")
            total = sum(float(((state[k].double() - base[k]) ** 2).sum()) for k in base)
            norm = math.sqrt(total)
            largest = max(largest, norm - rounding - 2.0**-23 * norm)
    return largest


def dp_round_event(dp: FlowerDP, round_: int, *, sampled: int, population: int, replied: int,
                   weights: list[float] | None, largest_norm: float | None = None,
                   canaries: int = 0) -> PrivacyEvent | None:
    """The client-level event of one round of a Flower fixed-clipping wrapper (see the module docstring).

    ``largest_norm``: the largest update norm that arrived (client-side clipping only: the server trusts the
    clients' ``fixedclipping_mod``, and an update longer than C shows it did not run). ``canaries``: how many of the
    ``sampled`` (and ``replied``) were virtual canary clients (:class:`FlowerCanaryClients`).
    """
    if replied == 0:
        return None
    if dp.noise_multiplier <= 0:
        return PrivacyEvent.no_guarantee(SERVER, round_, f"{dp.wrapper} with noise multiplier 0: clipped but not noised")
    z = dp.noise_multiplier * replied / dp.num_sampled_clients
    q = sampled / population if population else 1.0
    mechanism = Gaussian(z) if q >= 1 else SubsampledGaussian(z, q, Sampling.FIXED_SIZE_WITHOUT_REPLACEMENT)
    assumptions = [
        f"Flower {dp.wrapper} (McMahan et al. 2018): updates clipped to C = {dp.clipping_norm:g}, N(0, (σC/m)²) added to "
        f"their mean with σ = {dp.noise_multiplier:g}, m = {dp.num_sampled_clients}; {replied} update(s) arrived: "
        f"multiplier σ·{replied}/{dp.num_sampled_clients} = {z:.6g} on their sum",
        f"{sampled} of {population} nodes sampled uniformly without replacement (Flower's sample_nodes)",
        "client-level add/remove neighbours (one client's whole data)",
        f"the sample size m = {dp.num_sampled_clients} is fixed and public (Flower derives it from the number of connected "
        "nodes, which adding or removing one client could change; the fixed-size analysis assumes it does not)",
    ]
    if canaries:  # (the phrase's start is what privaudit check reads)
        assumptions[1] = (f"{sampled} of {population} nodes sampled: {sampled - canaries} by Flower's sample_nodes (uniformly "
                          f"without replacement) and {canaries} virtual canary clients (FlowerCanaryClients)")
    failures = []
    if not dp.mean_aggregation:
        failures.append(f"the wrapped strategy aggregates with {dp.aggregator}.aggregate_train, not FedAvg's mean: the noise "
                        "σC/m is calibrated to the sensitivity of the mean of clipped updates only")
    if largest_norm is not None and largest_norm > dp.clipping_norm * (1 + 1e-6):
        failures.append(f"an update of norm {largest_norm:.6g} > C = {dp.clipping_norm:g} arrived: the clients did not clip "
                        "(add fixedclipping_mod to the ClientApp's mods)")
    if weights is None:
        failures.append("the clients' aggregation weights are unknown, so the mean's sensitivity C/n is not established")
    elif len(set(weights)) > 1:
        failures.append(f"the clients' aggregation weights differ ({min(weights):g}..{max(weights):g}): a client's share of "
                        "the weighted mean exceeds 1/n, so the noise is not calibrated to its sensitivity")
    return PrivacyEvent(SERVER, round_, mechanism, 1, tuple(assumptions), valid=not failures, note="; ".join(failures))


# -- the tap --------------------------------------------------------------------------------------------
def _state_of(arrays: ArrayRecord) -> dict:
    state = arrays.to_torch_state_dict()
    if state and all(k.isdigit() for k in state):
        raise InvalidParameterError("the strategy's arrays are unnamed (an ArrayRecord built from a list of arrays); "
                                    "build it from the model's state dict, ArrayRecord(net.state_dict()), so the tap "
                                    "can match its tensors to the recorded model")
    return state


def _number(value) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(float(value)) else None


class AuditTap(Strategy):
    """Wraps any Flower strategy and records its run through ``recorder`` (see the module docstring)."""

    def __init__(self, strategy: Strategy, *, recorder, record_client_updates: bool = False) -> None:
        if not isinstance(strategy, Strategy):
            raise InvalidParameterError(f"AuditTap wraps a Flower strategy (flwr.serverapp.strategy.Strategy), got {type(strategy).__name__}")
        if not isinstance(recorder, FederationRecorder):
            raise InvalidParameterError("AuditTap records through a privaudit FederationRecorder")
        super().__init__()
        self.strategy = strategy
        self.recorder = recorder
        self.record_client_updates = bool(record_client_updates)
        self.dp = flower_dp_settings(strategy)
        wrappers = _dp_wrappers(strategy)
        #: the adaptive wrapper itself, whose clip norm moves every round (read before and after its aggregation)
        self._adaptive = wrappers[0] if wrappers and isinstance(wrappers[0], ADAPTIVE_WRAPPERS) else None
        #: canary clients (:class:`FlowerCanaryClients`) the chain appends to the replies; never recorded as clients
        canary_layers = [layer for layer in _chain(strategy) if isinstance(layer, FlowerCanaryClients)]
        self._canaries = canary_layers[0] if canary_layers else None
        self._clip: float | None = None
        self._global: ArrayRecord | None = None
        self._sent: ArrayRecord | None = None
        self._sampled = 0
        self._population = 0
        self._pending: dict[str, Any] | None = None
        self._closed = False

    # -- Flower's strategy interface -------------------------------------------------------------------
    def configure_train(self, server_round, arrays, config, grid):
        self._flush()
        if self._global is None:
            self._global = arrays
        self._sent = arrays  # what the clients train from: their updates are measured against it
        self._clip = None if self._adaptive is None else float(self._adaptive.clipping_norm)  # C_t, before Flower moves it
        messages = list(self.strategy.configure_train(server_round, arrays, config, grid))
        virtual = self._canaries  # canary clients sampled with the nodes: part of the round's population and sample
        self._sampled = len(messages) + (0 if virtual is None else len(virtual.round_canaries))
        self._population = len(list(grid.get_node_ids())) + (0 if virtual is None else len(virtual.present))
        return messages

    def aggregate_train(self, server_round, replies):
        replies = list(replies)
        ok = [r for r in replies if not r.has_error()]
        partitions: list[int] = []
        releases: dict[int, dict] = {}
        for reply in ok:
            tag = reply.content.get(TAP_RECORD) if hasattr(reply.content, "get") else None
            if tag is None or "partition-id" not in tag:
                raise InvalidParameterError("a train reply has no partition id: add tap_mod to the ClientApp's mods "
                                            "(ClientApp(mods=[tap_mod]))")
            partition = int(tag["partition-id"])
            partitions.append(partition)
            if self.record_client_updates:  # as the client sent it, before a server-side clip changes it in place
                arrays = list(reply.content.array_records.values())
                if len(arrays) != 1:
                    raise InvalidParameterError("record_client_updates needs one ArrayRecord per reply")
                releases[partition] = {k: v.clone() for k, v in _state_of(arrays[0]).items()}
        weights = _weights(ok, _weighting_key(self.strategy))
        clip = None  # an adaptive wrapper's C_t, as configure_train saw it (the clip norm the clients were sent)
        if self._adaptive is not None:
            clip = self._clip if self._clip is not None else float(self._adaptive.clipping_norm)
        client_clipped = self.dp is not None and self.dp.wrapper in ("DifferentialPrivacyClientSideFixedClipping",
                                                                     "DifferentialPrivacyClientSideAdaptiveClipping")
        largest = largest_update_norm(ok, self._sent) if client_clipped and ok and self._sent is not None else None
        canaries_in = 0 if self._canaries is None or not ok else len(self._canaries.round_canaries)
        aggregated, metrics = self.strategy.aggregate_train(server_round, replies)
        released = aggregated is not None
        if released:
            self._global = aggregated
        events: list = []
        round_metrics = self._metrics(metrics)
        if self._adaptive is not None and clip is not None:
            next_clip = float(self._adaptive.clipping_norm)
            # Flower's adaptive wrappers draw the noisy count whenever no reply is an error (validate_replies)
            counted = (bool(replies) and len(ok) == len(replies)) or next_clip != clip
            events = adaptive_round_events(self.dp, AdaptiveRound(
                int(server_round), sampled=self._sampled, population=self._population, replied=len(ok), weights=weights,
                clip=clip, next_clip=next_clip, count_released=counted, mean_released=released, largest_norm=largest))
            round_metrics[CLIP_METRIC] = clip
            released = released or bool(events)  # a round that released only its count still used the clients' bits
        elif released and self.dp is not None:
            event = dp_round_event(self.dp, int(server_round), sampled=self._sampled, population=self._population,
                                   replied=len(ok) + canaries_in, weights=weights, largest_norm=largest,
                                   canaries=canaries_in)
            events = [] if event is None else [event]
        elif released and partitions:
            events = [NoDP(sorted(partitions), "Flower strategy without a DP wrapper: the update entered the global model "
                                               "without calibrated noise")]
        self._pending = {"round": int(server_round), "global": _state_of(self._global), "releases": releases or None,
                         "events": events, "sampled": sorted(partitions) if released else [],  # nothing entered a release
                         "metrics": round_metrics}
        return aggregated, metrics

    def configure_evaluate(self, server_round, arrays, config, grid):
        return self.strategy.configure_evaluate(server_round, arrays, config, grid)

    def aggregate_evaluate(self, server_round, replies):
        metrics = self.strategy.aggregate_evaluate(server_round, replies)
        self._observe(int(server_round), metrics)
        return metrics

    def summary(self) -> None:
        self.strategy.summary()

    def start(self, grid, initial_arrays, num_rounds: int = 3, timeout: float = 3600, train_config=None,
              evaluate_config=None, evaluate_fn: Callable | None = None):
        """Flower's round loop (``Strategy.start``) through the tap; the recorder is closed when it ends."""
        self._global = initial_arrays

        def observed(round_, arrays):
            result = evaluate_fn(round_, arrays)
            self._observe(int(round_), result)
            return result

        result = super().start(grid, initial_arrays, num_rounds=num_rounds, timeout=timeout, train_config=train_config,
                               evaluate_config=evaluate_config, evaluate_fn=None if evaluate_fn is None else observed)
        self.close()
        return result

    def close(self):
        """Record the last round and write the checkpoint's manifest (once); returns its directory.

        When the DP wrapper runs Flower's own accountant, its ε is kept beside privaudit's (``report_epsilon``).
        """
        if not self._closed:
            self._flush()
            flower = flower_privacy_spent(self.strategy)
            if flower is not None and flower[1] is not None and flower[1].num_releases > 0:
                name, spent, accountant = flower
                method = str(spent.accounting_method)
                self.recorder.report_epsilon(float(spent.epsilon), float(spent.delta), client="server",
                                             source=f"Flower {name} accountant ({method}, {spent.num_releases} releases)",
                                             accounted_as=flower_accounting(accountant, method))
            self._closed = True
        return self.recorder.close()

    # -- recording ---------------------------------------------------------------------------------------
    @staticmethod
    def _metrics(record) -> dict[str, float]:
        if record is None:
            return {}
        return {str(k): v for k, v in ((k, _number(v)) for k, v in record.items()) if v is not None}

    def _observe(self, round_: int, record) -> None:
        if self._pending is not None and self._pending["round"] == round_:
            self._pending["metrics"].update(self._metrics(record))

    def _flush(self) -> None:
        pending, self._pending = self._pending, None
        if pending is None:
            return
        self.recorder.record_round(pending["round"], global_model=pending["global"], client_releases=pending["releases"],
                                   privacy_events=pending["events"], sampled_clients=pending["sampled"],
                                   metrics=pending["metrics"])
