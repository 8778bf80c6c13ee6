"""``privaudit attack inversion``: gradient inversion of one client's released update, scored by PSNR/SSIM.

Two modes:

* **dataset** — ``privaudit attack inversion --dataset lfw --model convnet --defense fedavg --attack ig --images 8``
  simulates clients that each release a one-example update (FedReg App. B.4's attack setting) under a defence
  (``fedsgd``, ``fedavg``, ``fedprox``, ``fedreg``, ``fedreg-mg``, ``dpsgd:<σ>``) from seeded untrained weights
  (:func:`attacks.inversion.run_inversion`); for ``dpsgd:<σ>`` the result carries the ε of that release at
  δ = 1e-5.
* **checkpoint** — ``privaudit attack inversion --checkpoint runs/fedavg --client 3 --round 5 --attack ig``
  attacks the model client 3 released in round 5 of a trained federation (written by ``privaudit train
  --save-client-updates``): the update is the released model minus the global model of round 4, the ground
  truth is the client's own records (reloaded from the checkpoint's recipe and checked against its data
  fingerprint), and the attacker's knowledge (lr, local steps = epochs × ⌈n/B⌉, batch size B) comes from the
  checkpoint's local-training config (:func:`attacks.inversion.checkpoint_payload.checkpoint_payload`).

Attacks (:mod:`attacks.inversion.registry`): ``analytic`` (Phong et al. 2018; needs a fully connected first
layer), ``label`` (labels only), ``dlg`` (Zhu et al. 2019), ``ig`` (Geiping et al. 2020), ``adaptive-mg``
(simulates FedReg's modified-gradient step), ``imprint`` (Fowl et al. 2022: a malicious server prepends an imprint
block of ``--bins`` bins to the model, the clients train that model, and a batch of ``--per-update`` images is read
off the bins; dataset mode only, the result records ``server``). Output: an ``inversion`` result (``inversion.json``) that
``privaudit report`` renders, the image grid ``inversion-grid.png`` (ground truth over reconstructions), and
a table of per-image PSNR, SSIM, label correctness and the attack's status. Bad inputs are one line on stderr and exit
code 2 — among them non-finite or absurd attack settings (``--option lr=inf``, ``iterations=10**12``: the ranges of
:mod:`attacks.inversion.limits`), refused before any data loads.

The result records the attack as it ran: its whole configuration (``attack_config``, defaults included) and, per
attacked update, the label rule it used, its optimiser, client model, losses and time (``updates``). Each image carries
its attack's optimisation status (:mod:`attacks.inversion.convergence`): an attack that diverged or made no progress
is flagged in the table, the JSON and the report, and its images are left out of the PSNR/SSIM means (a note says how
many), so a broken attack never reads as a defence's effect.

``--bn-prior update|running`` (``ig`` on a model with BatchNorm, e.g. ``convnet-bn``) adds a BatchNorm-statistics
prior with the form of GradInversion's R_BN (Yin et al., CVPR 2021, §3; :mod:`attacks.inversion.bn_prior`), weighted by
``--bn-weight``. ``running`` uses GradInversion's target, the global running statistics. ``update`` uses a stronger one:
the client's batch statistics, read from its released buffers. The result's data record which statistics the prior
matched (``bn_prior``). On BatchNorm models every attack simulates the client in train mode (batch statistics).

The command maps its flags to an :class:`~attacks.inversion.request.InversionRequest` (which checks them before any data
loads), runs it (:func:`attacks.inversion.run_request.run_request`), writes the result and the grid, and prints.
"""

from __future__ import annotations

from pathlib import Path

import typer

from privaudit import plugins
from privaudit.cli.common import cli_errors

#: The attacks of ``attacks.inversion`` (its registry's ``BUILT_IN``), named here so ``--help`` needs no torch; the
#: registered papers' attacks follow (a test checks the two lists agree).
BUILT_IN_ATTACKS = ("analytic", "label", "dlg", "ig", "imprint")
#: The built-in defences of dataset mode (``attacks.inversion.release``) other than DP-SGD, likewise.
BUILT_IN_DEFENCES = ("fedsgd", "fedavg", "fedprox")


def attack_choices() -> tuple[str, ...]:
    """Every attack ``--attack`` takes, built in and registered by a paper (names only: nothing is imported)."""
    return (*BUILT_IN_ATTACKS, *plugins.collected("attacks"))


def defence_choices() -> tuple[str, ...]:
    """Every defence ``--defense`` takes in dataset mode, DP-SGD as ``dpsgd:<σ>`` last."""
    return (*BUILT_IN_DEFENCES, *plugins.collected("defences"), "dpsgd:<σ>")


def register(attack_app: typer.Typer) -> None:
    @attack_app.command("inversion")
    @cli_errors
    def inversion(
        dataset: str | None = typer.Option(None, "--dataset", help="Dataset mode: simulate clients on this embedded dataset (lfw, images, digits, …)."),
        model: str = typer.Option("convnet", "--model", help="Dataset mode: model name (analytic needs one whose first layer is fully connected)."),
        defense: str = typer.Option("fedavg", "--defense", "--defence", help=f"Dataset mode: {', '.join(defence_choices()[:-1])} or {defence_choices()[-1]}."),
        attack: str = typer.Option("ig", "--attack", help=f"{', '.join(attack_choices())} (imprint: a malicious server)."),
        images: int | None = typer.Option(None, "--images", help="Dataset mode: images to attack (default 8), --per-update in each update."),
        per_update: int | None = typer.Option(None, "--per-update", help="Dataset mode: images in each client update (default 1); "
                                              "--images must be a multiple of it."),
        bins: int | None = typer.Option(None, "--bins", help="imprint: bins of the server's imprint block (default 128)."),
        option: list[str] = typer.Option([], "--option", help="Any field of the attack's configuration as KEY=VALUE "
                                         "(repeatable), e.g. --option start=analytic for adaptive-mg; the flags above win. "
                                         "Non-finite or absurd values (lr=inf, iterations above 10^6) are refused."),
        bn_prior: str | None = typer.Option(None, "--bn-prior", help="ig: BatchNorm-statistics prior (Yin et al. 2021) from the client's "
                                            "released buffers (update) or the global running statistics (running); BatchNorm models only."),
        bn_weight: float | None = typer.Option(None, "--bn-weight", help="ig: weight α of the --bn-prior term (default 0.1)."),
        batched: bool = typer.Option(True, "--batched/--sequential", help="Dataset mode, ig: attack all images (and restarts) "
                                     "in one optimisation (default) or one image after another."),
        iterations: int | None = typer.Option(None, "--iterations", help="Optimisation iterations (ig, adaptive-mg) or L-BFGS steps (dlg)."),
        checkpoint: Path | None = typer.Option(None, "--checkpoint", help="Checkpoint mode: trained federation (privaudit train --save-client-updates)."),
        client: int | None = typer.Option(None, "--client", help="Checkpoint mode: the client whose release is attacked."),
        round_: int | None = typer.Option(None, "--round", help="Checkpoint mode: the round of that release (≥ 1)."),
        labels_known: bool = typer.Option(False, "--labels-known", help="Give the attacker the true labels."),
        seed: int = typer.Option(0, "--seed", help="Seed of image choice, model weights, DP noise and the attack."),
        device: str = typer.Option("cpu", "--device", help="cpu (default), cuda, cuda:<index> or auto (cuda if present)."),
        threads: int = typer.Option(1, "--threads", help="torch intra-op threads."),
        out: Path | None = typer.Option(None, "--out", help="Output directory: inversion.json and inversion-grid.png."),
        quiet: bool = typer.Option(False, "--quiet", help="No progress bar."),
        json_: bool = typer.Option(False, "--json", help="Print the result data as JSON instead of a table."),
    ) -> None:
        """Gradient inversion of a client's update (simulated, or from a checkpoint); writes an inversion result."""
        # torch and the attacks load when the command runs, not at every CLI start
        from attacks.inversion.request import InversionRequest
        from attacks.inversion.run_request import run_request
        from privaudit.cli.inversion_output import emit

        request = InversionRequest(
            attack=attack, dataset=dataset, model=model, defence=defense, images=images, per_update=per_update, bins=bins,
            options=tuple(option), bn_prior=bn_prior, bn_weight=bn_weight, batched=batched, iterations=iterations,
            checkpoint=checkpoint, client=client, round=round_, labels_known=labels_known, seed=seed, device=device,
            threads=threads, out=out)
        emit(run_request(request, progress=not quiet), request, json_output=json_)
