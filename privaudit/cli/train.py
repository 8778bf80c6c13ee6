"""``privaudit train``: train a federation and write it to a checkpoint directory.

With ``--out DIR`` it also writes ``DIR/training.json``, a ``training`` result (test accuracy and loss per
evaluated round, from the manifest's metrics) that ``privaudit report`` renders as accuracy vs rounds.

Algorithm and privacy flags are not written out here: they come from the algorithm and privacy registries
(:mod:`privaudit.fl.algorithms.registry`, :mod:`privaudit.fl.privacy.registry`), so an algorithm with its own
options appears on the command line by registering its spec. The flags map to a
:class:`~privaudit.fl.train_request.TrainRequest` (checked before any data loads), run through the one entry point
:func:`privaudit.fl.run.run_training`; what a paper adds comes from its algorithm: the settings its paper uses where no
flag is given (its spec's ``train_defaults``), its privacy modes, and the rows it adds to the summary
(``summary_rows``). Only torch-free modules are imported when the CLI starts; data, models and training are imported
when the command runs.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import typer

from privaudit.cli.common import cli_errors, command_signature
from privaudit.cli.common import option as common_option
from privaudit.fl.algorithms.registry import all_algorithm_options, option_owners
from privaudit.fl.privacy.registry import all_privacy_options, privacy_option_owners

_COMMON_PANEL = "Federation"
_ALGORITHM_PANEL = "Algorithm options (apply to the algorithms named in brackets)"
_PRIVACY_PANEL = "Privacy options (apply to the mechanisms named in brackets)"


def _common_parameters() -> list[inspect.Parameter]:
    def option(name: str, annotation: Any, default: Any, *flags: str, help: str) -> inspect.Parameter:
        return common_option(name, annotation, default, *flags, help=help, panel=_COMMON_PANEL)

    return [
        option("list_", bool, False, "--list", help="List algorithms, datasets, models and privacy mechanisms, then exit."),
        option("algorithm", str | None, None, "--algorithm", help="Algorithm name, e.g. fedprox, or a wrapped one such as <wrapper>-fedprox (see --list)."),
        option("dataset", str | None, None, "--dataset", help="Dataset, e.g. synthetic:0.5,0.5, synthetic:iid, digits, mnist:<root> (see --list)."),
        option("rounds", int | None, None, "--rounds", help="Iterations of the round loop (a wrapped algorithm may train in some of them only)."),
        option("model", str | None, None, "--model", help="Model name (default: the dataset's default model)."),
        option("privacy", str, "none", "--privacy", help="Privacy mechanism (see --list), or a mode of the algorithm's own (its --list entry)."),
        option("clients_per_round", float, 1.0, "--clients-per-round", help="Fraction q of clients sampled per training round."),
        option("sampling", str | None, None, "--sampling", help="Client sampling: fixed-size (⌊qN⌋ without replacement; default unless the algorithm brings its own) or poisson."),
        option("stragglers", float, 0.0, "--stragglers", help="Probability that a sampled client runs a random number of epochs < E."),
        option("local_epochs", int | None, None, "--local-epochs", help="Local epochs E (default 10 unless the algorithm brings its own)."),
        option("batch_size", int | None, None, "--batch-size", help="Local mini-batch size (default 32 unless the algorithm brings its own)."),
        option("lr", float | None, None, "--lr", help="Local learning rate (default 0.01 unless the algorithm brings its own for its privacy mode)."),
        option("momentum", float | None, None, "--momentum", help="Local SGD momentum (default 0.5 unless the algorithm brings its own)."),
        option("double_softmax", bool, False, "--double-softmax", help="Train on cross-entropy of softmax(logits), as reference code whose models end in Softmax under CrossEntropyLoss does."),
        option("seed", int, 0, "--seed", help="Seed of sampling, stragglers, shuffling, noise and model initialisation."),
        option("data_seed", int, 0, "--data-seed", help="Seed of the data generator / partition (kept fixed across training seeds)."),
        option("num_clients", int | None, None, "--num-clients", "--clients", help="Number of clients (pooled datasets)."),
        option("partition", str | None, None, "--partition", help="Partition of a pooled dataset, e.g. iid, shards:2, classes:2, dirichlet:0.5."),
        option("classes_per_client", int | None, None, "--classes-per-client", help="N classes per client (the same as --partition classes:N)."),
        option("dataset_option", list[str] | None, None, "--dataset-option", help="Extra dataset option KEY=VALUE (repeatable), e.g. dim=20."),
        option("execution", str | None, None, "--execution", help="auto (default unless the algorithm brings its own), batched (stacked clients) or sequential."),
        option("eval_every", int, 1, "--eval-every", help="Evaluate the global model every k iterations (and after the last)."),
        option("eval_train_loss", bool, False, "--eval-train-loss", help="Also evaluate loss and accuracy on every client's training data (as some reference code publishes)."),
        option("out", Path | None, None, "--out", help="Checkpoint directory to write (with DIR/training.json, a 'training' result for privaudit report)."),
        option("save_client_updates", bool, False, "--save-client-updates", help="Also store every released client model per round."),
        option("overwrite", bool, False, "--overwrite", help="Replace an existing checkpoint in --out."),
        option("threads", int, 1, "--threads", help="torch intra-op threads (logistic regression and small MLPs train fastest with 1)."),
        option("device", str, "cpu", "--device", help="Where clients train: cpu (default), cuda, cuda:<index> or auto (cuda if present)."),
        option("workers", int, 1, "--workers", help="CPU processes training the clients that do not batch (CNNs, DP-SGD), each with cores // workers threads."),
        option("quiet", bool, False, "--quiet", help="No progress bar."),
        option("json_", bool, False, "--json", help="Print the run summary as JSON."),
    ]


def _registry_parameters() -> tuple[list[inspect.Parameter], list[str], list[str]]:
    """The algorithms' and privatizers' own options (their registries), with the names of each kind."""
    parameters: list[inspect.Parameter] = []
    algorithm_names: list[str] = []
    privacy_names: list[str] = []
    for options, owners, panel, names in (
        (all_algorithm_options(), option_owners(), _ALGORITHM_PANEL, algorithm_names),
        (all_privacy_options(), privacy_option_owners(), _PRIVACY_PANEL, privacy_names),
    ):
        for opt in options:
            annotation = str | None if opt.choices else opt.type | None
            suffix = f" [{', '.join(owners.get(opt.name, []))}]"
            parameters.append(common_option(opt.name, annotation, None, opt.flag, help=opt.help + suffix, panel=panel))
            names.append(opt.name)
    return parameters, algorithm_names, privacy_names


#: The request's fields that are ``train`` flags of the same name.
_REQUEST_FLAGS = ("algorithm", "dataset", "rounds", "model", "privacy", "clients_per_round", "sampling", "stragglers",
                  "local_epochs", "batch_size", "lr", "momentum", "double_softmax", "execution", "seed", "data_seed",
                  "num_clients", "partition", "classes_per_client", "eval_every", "eval_train_loss", "device", "workers",
                  "threads", "out", "save_client_updates", "overwrite")


def register(app: typer.Typer) -> None:
    registry_parameters, algorithm_option_names, privacy_option_names = _registry_parameters()

    def train(**flags: Any) -> None:
        """Train a federation (optionally private, optionally Upcycled-FL) and write it to --out."""
        # data, models and training (torch) load when the command runs, not at every CLI start
        from privaudit.cli.train_output import print_lists, run
        from privaudit.fl.train_request import TrainRequest

        if flags["list_"]:
            print_lists()
            return
        request = TrainRequest(
            **{name: flags[name] for name in _REQUEST_FLAGS}, dataset_options=tuple(flags["dataset_option"] or ()),
            algorithm_options={k: flags[k] for k in algorithm_option_names if flags[k] is not None},
            privacy_options={k: flags[k] for k in privacy_option_names if flags[k] is not None})
        run(request, quiet=flags["quiet"], json_output=flags["json_"])

    command_signature(train, _common_parameters() + registry_parameters)  # a registry option named as one of train's: an error
    app.command("train", no_args_is_help=True)(cli_errors(train))
