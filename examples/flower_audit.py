"""A Flower app audited by privaudit: FedAvg on scikit-learn's digits in Flower's simulation, recorded by the audit tap.

The app is ordinary Flower (message API, flwr 1.42): a ClientApp that trains a small MLP with local SGD on its own
partition and a ServerApp that runs ``FedAvg`` — wrapped, with ``--noise σ > 0`` (default 0.5), in Flower's
``DifferentialPrivacyServerSideFixedClipping`` (clip ``--clip C``). The privaudit lines are the
:class:`~privaudit.interop.DatasetReference` (which digits each client holds, which were held out), the
:class:`~privaudit.interop.FederationRecorder`, the :class:`~privaudit.interop.flower.AuditTap` around the strategy
and ``tap_mod`` in the ClientApp's mods. Then::

    python examples/flower_audit.py --out runs/flower
    privaudit compute-epsilon --checkpoint runs/flower --delta 1e-5
    privaudit attack membership --checkpoint runs/flower --attack loss

``--canary-audit m`` re-runs the same app once more with a privaudit canary mod added to the ClientApp (nothing else
changes), into ``DIR/canary-run``, and prints the one-run audit's ε lower bounds, their ceiling and power; the result
is written to ``DIR/canary-run/one-run.json`` (``privaudit report`` renders it). Every client holds the same number of
records, so FedAvg's example weights are equal and the tap records the DP rounds as valid events. Flower's own ε (its
RDP accountant, no amplification) is kept and classified by ``compute-epsilon --checkpoint``: a certified upper bound
when every node trains (``--fraction 1``, the default), not an upper bound when fewer are sampled — and refuted with
``--clients 10 --fraction 0.5 --noise 1 --rounds 10``, where Flower reports 19.05 and the rounds that ran have
ε ≥ 31.27 at δ = 1e-5 (README, "Flower").

``--canary-clients m`` adds m virtual canary clients (:class:`~privaudit.interop.flower.FlowerCanaryClients` around
Flower's fixed-clipping wrapper, directions from :class:`~privaudit.interop.LoopCanaries`): each present by a fair
coin, taking part in every round with every node (``--fraction 1``; client sampling is refused, see
:mod:`privaudit.interop.flower.canary_clients`), its update c_k at the clip norm clipped, averaged and noised by Flower's wrapper, whose m counts the canaries; then
``privaudit audit --checkpoint DIR --client-canaries m`` scores them on the recorded global models. Flower's own
accountant is not run then (it would count a population without the canaries). m ≤ the model's scalars keeps
their directions orthonormal: ``--hidden 256`` gives 19,210.

``--adaptive`` (or ``--adaptive client``) wraps FedAvg in Flower's adaptive-clipping wrapper instead
(``DifferentialPrivacyServerSideAdaptiveClipping``, or ``DifferentialPrivacyClientSideAdaptiveClipping`` with
``adaptiveclipping_mod`` added to the ClientApp): σ is the noise multiplier z it is configured with, ``--clip`` the
initial clip norm and ``--count-stddev`` the noise σ_b of its clipped count (Flower's default m/20, which requires
z < m/10). The tap records both releases of every round (the count and the mean, at the clip norm of that round) and
the run prints the clip norms C_t it went through; Flower's adaptive wrappers keep no ε of their own. Seeded
(``--seed``): Flower's node sampling (Python's ``random``), the model's initialisation and every client's mini-batches;
with ``--adaptive`` also Flower's DP noise (NumPy's global generator), which there steers the clip norm too, and
with ``--canary-clients`` the noise, the canaries' directions, coins and sampling.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from privaudit.interop import DatasetReference, FederationRecorder


def make_model(hidden: int = 32) -> nn.Sequential:
    return nn.Sequential(nn.Flatten(), nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def digits_partition(clients: int, per_client: int, seed: int) -> tuple[dict[int, list[int]], list[int]]:
    """Equal shares of a seeded permutation of the digits' rows; the rest are the held-out non-members."""
    from privaudit.fl.engine.recorded_data import packaged_pool

    _, y, _, _ = packaged_pool("digits")
    order = np.random.default_rng(seed).permutation(len(y))
    if clients * per_client >= len(y):
        raise SystemExit(f"error: {clients} clients × {per_client} records leave no held-out digits (there are {len(y)})")
    parts = {c: order[c * per_client:(c + 1) * per_client].tolist() for c in range(clients)}
    return parts, order[clients * per_client:].tolist()


def dp_strategy(strategy, args: argparse.Namespace, net: nn.Module, sampled: int):
    """``strategy`` under the DP wrapper the options ask for (none with ``--noise 0``), and the ClientApp's mods."""
    from flwr.clientapp.mod import adaptiveclipping_mod
    from flwr.serverapp import NeighboringRelation, PrivacyConfig, RdpAccountant, SamplingMethod
    from flwr.serverapp.strategy import (
        DifferentialPrivacyClientSideAdaptiveClipping,
        DifferentialPrivacyServerSideAdaptiveClipping,
        DifferentialPrivacyServerSideFixedClipping,
    )

    from privaudit.errors import InvalidParameterError
    from privaudit.interop import LoopCanaries
    from privaudit.interop.flower import FlowerCanaryClients, tap_mod

    client_mods = [tap_mod]
    if args.noise > 0 and args.adaptive:
        wrapper = (DifferentialPrivacyServerSideAdaptiveClipping if args.adaptive == "server"
                   else DifferentialPrivacyClientSideAdaptiveClipping)
        try:
            strategy = wrapper(strategy, args.noise, sampled, initial_clipping_norm=args.clip,
                               clipped_count_stddev=args.count_stddev)
        except ValueError as exc:  # e.g. z ≥ 2σ_b: Flower's message says which setting to change
            raise InvalidParameterError(" ".join(str(exc).split())) from None
        if args.adaptive == "client":
            client_mods.append(adaptiveclipping_mod)  # clips to the C_t the wrapper sends, reports the norm bit
    elif args.noise > 0 and args.canary_clients:  # virtual canary clients, clipped and noised by Flower's wrapper
        canaries = LoopCanaries(net, count=args.canary_clients, clip=args.clip, first_id=args.clients, seed=args.seed)
        dp = DifferentialPrivacyServerSideFixedClipping(strategy, args.noise, args.clip, sampled)
        strategy = FlowerCanaryClients(dp, canaries, real_sampled=sampled)
    elif args.noise > 0:  # Flower's own accountant too: the tap keeps its ε beside privaudit's
        accountant = RdpAccountant(PrivacyConfig(1e-5, args.clients, NeighboringRelation.ADD_OR_REMOVE_ONE,
                                                 SamplingMethod.NO_AMPLIFICATION))
        strategy = DifferentialPrivacyServerSideFixedClipping(strategy, args.noise, args.clip, sampled, accountant=accountant)
    return strategy, client_mods


def build_app(out: Path, args: argparse.Namespace, mods=()):
    """The Flower app, recording into ``out``; ``mods`` are appended to the ClientApp's mods (the canary audit's)."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg

    from privaudit.interop.flower import AuditTap, FlowerApp

    parts, held_out = digits_partition(args.clients, args.per_client, args.seed)
    data = DatasetReference.packaged("digits", partition=parts, non_members=held_out)
    torch.manual_seed(args.seed)
    net = make_model(args.hidden)
    sampled = max(1, int(args.clients * args.fraction))
    # min_train_nodes: FedAvg counts the connected nodes before waiting for them, so round 1 could sample fewer
    strategy = FedAvg(fraction_train=args.fraction, fraction_evaluate=0.0, min_train_nodes=sampled,
                      min_available_nodes=args.clients)
    strategy, client_mods = dp_strategy(strategy, args, net, sampled)
    recorder = FederationRecorder(out, model=net, dataset=data, seed=args.seed, algorithm="flower-fedavg", framework="flwr",
                                  overwrite=args.overwrite)  # after the wrapper, which may refuse its settings
    tap = AuditTap(strategy, recorder=recorder, record_client_updates=args.record_client_updates)

    client_app = ClientApp(mods=[*client_mods, *mods])

    @client_app.train()
    def train(message: Message, context) -> Message:
        torch.set_num_threads(1)
        partition = int(context.node_config["partition-id"])
        x, y = (torch.from_numpy(a) for a in data.client_data(partition))
        round_ = int(message.content["config"]["server-round"])
        model = make_model(args.hidden)
        model.load_state_dict(message.content["arrays"].to_torch_state_dict())
        generator = torch.Generator().manual_seed(args.seed * 100_003 + round_ * 1_009 + partition)
        optimiser = torch.optim.SGD(model.parameters(), lr=args.lr)
        losses = []
        for _ in range(args.epochs):
            order = torch.randperm(len(y), generator=generator)
            for start in range(0, len(y), args.batch_size):
                rows = order[start:start + args.batch_size]
                optimiser.zero_grad()
                loss = nn.functional.cross_entropy(model(x[rows]), y[rows])
                loss.backward()
                optimiser.step()
                losses.append(float(loss))
        metrics = MetricRecord({"num-examples": len(y), "train_loss": float(np.mean(losses))})
        return Message(RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics}), reply_to=message)

    x_test, y_test = (torch.from_numpy(a) for a in (data.x[held_out], data.y[held_out]))

    def evaluate(round_: int, arrays: ArrayRecord) -> MetricRecord:
        model = make_model(args.hidden)
        model.load_state_dict(arrays.to_torch_state_dict())
        with torch.no_grad():
            logits = model(x_test)
        return MetricRecord({"accuracy": float((logits.argmax(1) == y_test).float().mean()),
                             "test_loss": float(nn.functional.cross_entropy(logits, y_test))})

    server_app = ServerApp()

    @server_app.main()
    def main(grid, context) -> None:
        random.seed(args.seed)  # Flower samples nodes with Python's random
        if args.adaptive or args.canary_clients:  # and draws its DP noise from NumPy's, which with adaptive
            np.random.seed(args.seed)  # clipping also steers C_t (a canary-client audit is then reproducible too)
        tap.start(grid=grid, initial_arrays=ArrayRecord(net.state_dict()), num_rounds=args.rounds,
                  train_config=ConfigRecord({}), evaluate_fn=evaluate)

    return FlowerApp(server_app, client_app, num_supernodes=args.clients, tap=tap)


def _print_audit(result) -> None:
    print(f"one-run canary audit ({result.inserted} of {result.canaries} canaries inserted), "
          f"claimed (ε, δ) = ({result.claimed_epsilon:.4g}, {result.delta:g})")
    print(f"{'estimator':<18} {'ε lower bound':>14} {'α':>7} {'ceiling':>9} {'power':>6}")
    for b in result.bounds:
        power = "—" if b.power is None else f"{b.power.probability:.2f}"
        print(f"{b.estimator:<18} {b.epsilon_lb:>14.4g} {b.significance:>7.3g} {b.ceiling:>9.4g} {power:>6}")
    print(f"verdict: {result.verdict.verdict.value} — {result.verdict.reason}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="checkpoint directory to write")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--per-client", type=int, default=150, help="digits per client (the rest are held out)")
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--fraction", type=float, default=1.0, help="fraction of the nodes Flower samples per round")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=0.3)
    parser.add_argument("--noise", type=float, default=0.5, help="noise multiplier σ of Flower's DP wrapper (0: no DP wrapper)")
    parser.add_argument("--clip", type=float, default=1.0, help="clip norm C of each client's update (initial C with --adaptive)")
    parser.add_argument("--adaptive", nargs="?", const="server", choices=("server", "client"), default=None,
                        help="Flower's adaptive-clipping wrapper instead of fixed clipping (server- or client-side clipping)")
    parser.add_argument("--count-stddev", type=float, default=None,
                        help="with --adaptive: noise std σ_b of the clipped count (default Flower's m/20)")
    parser.add_argument("--record-client-updates", action="store_true", help="also record what each client sent")
    parser.add_argument("--canary-audit", type=int, default=0, metavar="M",
                        help="then re-run the app with M canaries (a client mod) and audit it in one run")
    parser.add_argument("--canary-client", type=int, default=0)
    parser.add_argument("--canary-clients", type=int, default=0, metavar="M",
                        help="add M virtual canary clients (each present by a fair coin, sampled like the nodes, clipped "
                             "and noised by Flower's DP wrapper) and save them for `privaudit audit --client-canaries M`")
    parser.add_argument("--hidden", type=int, default=32, help="hidden units of the MLP (M canaries need M ≤ its scalars)")
    parser.add_argument("--canary-magnitude", type=float, default=None, help="canary norm (default: --clip)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--verbose", action="store_true", help="show Flower's log")
    args = parser.parse_args(argv)
    from privaudit.errors import InvalidParameterError, PrivauditError

    try:
        if args.adaptive and args.canary_audit:
            raise InvalidParameterError("--canary-audit is not offered with --adaptive: the canary's norm would have to "
                                        "stay within every round's clip norm C_t, which moves")
        if args.canary_clients and (args.adaptive or args.noise <= 0):
            raise InvalidParameterError("--canary-clients needs Flower's fixed-clipping DP wrapper (--noise > 0, "
                                        "no --adaptive)")
        if args.canary_clients and args.canary_audit:
            raise InvalidParameterError("--canary-clients and --canary-audit are two audits: run them one at a time")
        if args.canary_clients and args.fraction < 1:
            raise InvalidParameterError("--canary-clients needs every node every round (--fraction 1): with Flower's "
                                        "fixed-size node sampling the canaries' own sampling has no proven accounting; "
                                        "audit client sampling with a recorded loop (examples/byo_pytorch.py "
                                        "--canary-clients) instead")
        out = Path(args.out)
        app = build_app(out, args)
        app.run(quiet=not args.verbose)
        final = app.tap.recorder.path
        print(f"recorded the Flower run in {final}")
        if args.canary_clients:
            canaries = app.tap.strategy.canaries
            saved = canaries.save(final)
            print(f"{len(canaries.client_ids)} of {canaries.count} canary clients present; saved {saved}\n"
                  f"audit them: privaudit audit --checkpoint {final} --client-canaries {canaries.count}")
        if args.adaptive and args.noise > 0:
            from privaudit.fl.engine.checkpoint import TrainedFederation
            from privaudit.interop.flower.tap import CLIP_METRIC

            clips = [m.get("other", {}).get(CLIP_METRIC) for m in TrainedFederation(final).manifest["metrics"]]
            print("adaptive clip norm C_t per round: " + ", ".join("—" if c is None else f"{c:.4g}" for c in clips))
        if args.canary_audit:
            from privaudit.interop.flower import FlowerCanaryOptions, run_flower_canary_audit
            from privaudit.report.results import make_result, write_result

            options = FlowerCanaryOptions(canaries=args.canary_audit, client=args.canary_client,
                                          magnitude=args.canary_magnitude, seed=args.seed, power_trials=100)
            result = run_flower_canary_audit(lambda where, mods: build_app(where, args, mods), out / "canary-run", options,
                                             quiet=not args.verbose)
            _print_audit(result)
            written = write_result(out / "canary-run" / "one-run.json",
                                   make_result("claim-audit", f"{result.claim_id}: {result.verdict.verdict.value}", result.data(),
                                               {"app": "examples/flower_audit.py", **options.to_dict()}, seed=args.seed))
            print(f"written: {written}")
    except PrivauditError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
