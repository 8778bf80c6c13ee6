"""``privaudit attack``: attacks on trained federations, one sub-command per attack family.

``privaudit attack membership --checkpoint runs/priv --attack lira --shadows 16 --out audits/lira`` runs a
record-level membership-inference attack (:mod:`attacks.membership`) and writes a ``membership-attack``
result (ROC, AUC, TPR at 0.1 % / 1 % FPR) with the raw scores in a sidecar ``.npz``.

Structure: :data:`attack_app` is the ``attack`` sub-app; the membership command is defined here (its flags map to an
:class:`~attacks.membership.request.MembershipRequest`, run by :func:`attacks.membership.request.run_request`), and other
families register on the same sub-app from the modules in :data:`SUBCOMMAND_MODULES` (each exposing
``register(attack_app)``). Module-level imports stay light: torch and the attacks load inside the commands.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import typer

from privaudit.cli.common import cli_errors

#: Modules that add further ``privaudit attack <family>`` sub-commands via ``register(attack_app)``.
SUBCOMMAND_MODULES: tuple[str, ...] = ("privaudit.cli.attack_inversion",)

attack_app = typer.Typer(
    name="attack",
    help="Attack a trained federation: membership inference, gradient inversion.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@attack_app.callback()
def _attack_group() -> None:
    """Attack a trained federation."""


@attack_app.command("membership")
@cli_errors
def membership(
    checkpoint: Path = typer.Option(..., "--checkpoint", help="Trained federation directory (privaudit train --out)."),
    attack: str = typer.Option("loss", "--attack", help="loss, confidence, entropy, modified-entropy or lira."),
    shadows: int = typer.Option(16, "--shadows", help="LiRA: number of shadow federations (≥ 2)."),
    mode: str = typer.Option("online", "--mode", help="LiRA: online (IN and OUT Gaussians) or offline (OUT only)."),
    variance: str = typer.Option("auto", "--variance", help="LiRA: auto, per-example or fixed (best with few shadows)."),
    executor: str = typer.Option("in-process", "--executor", help="Where LiRA's shadows train: in-process, process or ray."),
    shadow_batch: bool = typer.Option(True, "--shadow-batch/--no-shadow-batch", help="LiRA, in-process: train all shadows "
                                      "as lanes of one stacked run per round (default) or one federation after another."),
    workers: int | None = typer.Option(None, "--workers", help="Process-pool / Ray workers (default: all cores)."),
    address: str | None = typer.Option(None, "--address", help="Ray cluster address, e.g. auto."),
    threat_model: str = typer.Option("final-model", "--threat-model", help="final-model, or client-releases (needs --save-client-updates)."),
    round_: int | None = typer.Option(None, "--round", help="Attack the global model of this round (default: the last)."),
    max_examples: int | None = typer.Option(None, "--max-examples", help="At most this many members and non-members (seeded)."),
    seed: int = typer.Option(0, "--seed", help="Seed of example subsampling, shadow halves and shadow training."),
    out: Path | None = typer.Option(None, "--out", help="Output directory: membership-attack.json, membership-scores.npz, shadow trials."),
    threads: int = typer.Option(1, "--threads", help="torch intra-op threads."),
    device: str = typer.Option("cpu", "--device", help="LiRA: where the shadow federations train: cpu (default), cuda, cuda:<index> or auto."),
    quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
    json_: bool = typer.Option(False, "--json", help="Print the result data as JSON instead of a table."),
    trust_factory: str | None = typer.Option(None, "--trust-factory", help="Import this model factory (package.module:function) that a recorded checkpoint names; runs that code."),
) -> None:
    """Membership inference on a trained federation's records; writes a membership-attack result."""
    # torch and the attacks load when the command runs, not at every CLI start
    from attacks.membership.request import MembershipRequest
    from privaudit.cli.membership_output import run

    request = MembershipRequest(checkpoint=checkpoint, attack=attack, shadows=shadows, mode=mode, variance=variance,
                                executor=executor, shadow_batch=shadow_batch, workers=workers, address=address,
                                threat_model=threat_model, round=round_, max_examples=max_examples, seed=seed, out=out,
                                threads=threads, device=device, trust_factory=trust_factory)
    run(request, quiet=quiet, json_output=json_)


def register(app: typer.Typer) -> None:
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(attack_app)
    app.add_typer(attack_app, name="attack")
