"""``privaudit train``: train a federation and write it to a checkpoint directory.

With ``--out DIR`` it also writes ``DIR/training.json``, a ``training`` result (test accuracy and loss per
evaluated round, from the manifest's metrics) that ``privaudit report`` renders as accuracy vs rounds.

Algorithm and privacy flags are not written out here: they come from the algorithm and privacy registries
(:mod:`privaudit.fl.algorithms.registry`, :mod:`privaudit.fl.privacy.registry`), so an algorithm with its own
options appears on the command line by registering its spec. Every algorithm and privatizer runs through the
one entry point :func:`privaudit.fl.run.run_training`; what a paper adds comes from its algorithm: the
settings its paper uses where no flag is given (its spec's ``train_defaults``), its privacy modes, and the rows
it adds to the summary (``summary_rows``). Only torch-free modules are imported when the CLI starts; data,
models and training are imported when the command runs.
"""

from __future__ import annotations

import contextlib
import inspect
from pathlib import Path
from typing import Any

import typer

from privaudit.cli.common import (
    check_out_folder,
    check_workers,
    cli_errors,
    fail,
    print_json,
    relocation_problem,
)
from privaudit.errors import InvalidParameterError
from privaudit.output_folder import OutputFolder, opened

_COMMON_PANEL = "Federation"
_ALGORITHM_PANEL = "Algorithm options (apply to the algorithms named in brackets)"
_PRIVACY_PANEL = "Privacy options (apply to the mechanisms named in brackets)"


def _common_parameters() -> list[inspect.Parameter]:
    def option(name: str, annotation: Any, default: Any, *flags: str, help: str, panel: str = _COMMON_PANEL) -> inspect.Parameter:
        info = typer.Option(default, *flags, help=help, rich_help_panel=panel)
        return inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation)

    return [
        option("list_", bool, False, "--list", help="List algorithms, datasets, models and privacy mechanisms, then exit."),
        option("algorithm", str | None, None, "--algorithm", help="Algorithm name, e.g. fedprox or upcycled-fedprox (see --list)."),
        option("dataset", str | None, None, "--dataset", help="Dataset, e.g. synthetic:0.5,0.5, synthetic:iid, digits, mnist:<root> (see --list)."),
        option("rounds", int | None, None, "--rounds", help="Iterations of the round loop (Upcycled-X trains in the odd ones)."),
        option("model", str | None, None, "--model", help="Model name (default: the dataset's default model)."),
        option("privacy", str, "none", "--privacy", help="Privacy mechanism (see --list), or the algorithm's own mode (PrivateFL: none, ldp, cdp, ddp)."),
        option("clients_per_round", float, 1.0, "--clients-per-round", help="Fraction q of clients sampled per training round."),
        option("sampling", str | None, None, "--sampling", help="Client sampling: fixed-size (⌊qN⌋ without replacement; default) or poisson (PrivateFL-CDP dp-fedavg's default)."),
        option("stragglers", float, 0.0, "--stragglers", help="Probability that a sampled client runs a random number of epochs < E."),
        option("local_epochs", int | None, None, "--local-epochs", help="Local epochs E (default 10; PrivateFL 1)."),
        option("batch_size", int | None, None, "--batch-size", help="Local mini-batch size (default 32; PrivateFL 64, PFA 8)."),
        option("lr", float | None, None, "--lr", help="Local learning rate (default 0.01; PrivateFL 0.1, CDP 0.005; PFA 0.1)."),
        option("momentum", float | None, None, "--momentum", help="Local SGD momentum (default 0.5 as Upcycled-FL; PrivateFL and PFA 0)."),
        option("double_softmax", bool, False, "--double-softmax", help="Train on cross-entropy of softmax(logits), as Upcycled-FL's code does (its models end in Softmax under CrossEntropyLoss)."),
        option("seed", int, 0, "--seed", help="Seed of sampling, stragglers, shuffling, noise and model initialisation."),
        option("data_seed", int, 0, "--data-seed", help="Seed of the data generator / partition (kept fixed across training seeds)."),
        option("num_clients", int | None, None, "--num-clients", "--clients", help="Number of clients (pooled datasets)."),
        option("partition", str | None, None, "--partition", help="Partition of a pooled dataset, e.g. iid, shards:2, classes:2, dirichlet:0.5."),
        option("classes_per_client", int | None, None, "--classes-per-client", help="N classes per client (PrivateFL's split: --partition classes:N)."),
        option("dataset_option", list[str] | None, None, "--dataset-option", help="Extra dataset option KEY=VALUE (repeatable), e.g. dim=20."),
        option("execution", str | None, None, "--execution", help="auto (default; PrivateFL: sequential), batched (stacked clients) or sequential."),
        option("eval_every", int, 1, "--eval-every", help="Evaluate the global model every k iterations (and after the last)."),
        option("eval_train_loss", bool, False, "--eval-train-loss", help="Also evaluate loss and accuracy on every client's training data (as the Upcycled-FL code publishes)."),
        option("out", Path | None, None, "--out", help="Checkpoint directory to write (with DIR/training.json, a 'training' result for privaudit report)."),
        option("save_client_updates", bool, False, "--save-client-updates", help="Also store every released client model per round."),
        option("overwrite", bool, False, "--overwrite", help="Replace an existing checkpoint in --out."),
        option("threads", int, 1, "--threads", help="torch intra-op threads (logistic regression and small MLPs train fastest with 1)."),
        option("device", str, "cpu", "--device", help="Where clients train: cpu (default), cuda, cuda:<index> or auto (cuda if present)."),
        option("workers", int, 1, "--workers", help="CPU processes training the clients that do not batch (CNNs, DP-SGD), each with cores // workers threads."),
        option("quiet", bool, False, "--quiet", help="No progress bar."),
        option("json_", bool, False, "--json", help="Print the run summary as JSON."),
    ]


def _registry_parameters() -> tuple[list[inspect.Parameter], set[str], set[str]]:
    from privaudit.fl.algorithms.registry import all_algorithm_options, option_owners
    from privaudit.fl.privacy.registry import all_privacy_options, privacy_option_owners

    parameters = []
    algorithm_names, privacy_names = set(), set()
    for options, owners, panel, names in (
        (all_algorithm_options(), option_owners(), _ALGORITHM_PANEL, algorithm_names),
        (all_privacy_options(), privacy_option_owners(), _PRIVACY_PANEL, privacy_names),
    ):
        for opt in options:
            annotation = str | None if opt.choices else opt.type | None
            suffix = f" [{', '.join(owners.get(opt.name, []))}]"
            info = typer.Option(None, opt.flag, help=opt.help + suffix, rich_help_panel=panel)
            parameters.append(inspect.Parameter(opt.name, inspect.Parameter.KEYWORD_ONLY, default=info, annotation=annotation))
            names.add(opt.name)
    return parameters, algorithm_names, privacy_names


#: ``train``'s settings where neither a flag nor the algorithm's spec (``train_defaults``) gives one.
_DEFAULTS = {"local_epochs": 10, "batch_size": 32, "lr": 0.01, "momentum": 0.5, "execution": "auto", "sampling": "fixed-size"}


def _settings(kwargs: dict[str, Any], algorithm_defaults: dict[str, Any]) -> dict[str, Any]:
    """The flags of :data:`_DEFAULTS` given, else the algorithm's defaults (for its --privacy and options), else train's."""
    defaults = {**_DEFAULTS, **{k: v for k, v in algorithm_defaults.items() if k in _DEFAULTS}}
    return {k: kwargs[k] if kwargs[k] is not None else defaults[k] for k in _DEFAULTS}


def _parse_dataset_options(items: list[str] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise InvalidParameterError(f"--dataset-option takes KEY=VALUE, got {item!r}")
        value: Any = text.strip()
        for convert in (int, float):
            try:
                value = convert(text)
                break
            except ValueError:
                continue
        if text.strip().lower() in ("true", "false"):
            value = text.strip().lower() == "true"
        out[key.strip()] = value
    return out


def _print_lists() -> None:
    from rich.console import Console
    from rich.table import Table

    from privaudit.data import describe_datasets
    from privaudit.fl.algorithms.registry import algorithm_specs
    from privaudit.fl.privacy.registry import PRIVACY_SPECS
    from privaudit.models import describe_models

    console = Console()
    sections = (
        ("Algorithms", {name: spec.summary + (f"  [{', '.join(o.flag for o in spec.options)}]" if spec.options else "") for name, spec in algorithm_specs().items()}),
        ("Datasets", describe_datasets()),
        ("Models", describe_models()),
        ("Privacy mechanisms", {name: spec.summary + (f"  [{', '.join(o.flag for o in spec.options)}]" if spec.options else "") for name, spec in PRIVACY_SPECS.items()}),
    )
    for title, rows in sections:
        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column("name", style="bold")
        table.add_column("description")
        for name, text in rows.items():
            table.add_row(name, text)
        console.print(table)


def _summary(result, out: Path | None) -> dict[str, Any]:
    history = result.history
    return {
        "algorithm": result.info.algorithm["name"],
        "dataset": result.info.dataset["name"],
        "model": result.info.model_name,
        "execution": result.info.execution_mode,
        "rounds": len(history),
        "training_rounds": sum(1 for m in history if m.trained),
        "final_test_accuracy": result.final_accuracy,
        **({"final_train_accuracy": history[-1].global_train_accuracy} if history and history[-1].global_train_accuracy is not None else {}),
        "privacy_events": len(result.ledger.events),
        "invalid_privacy_events": sum(1 for e in result.ledger.events if not e.valid),
        "seconds": result.seconds,
        "device": result.info.hardware.get("device_name"),
        "workers": result.info.hardware.get("workers"),
        "checkpoint": None if out is None else str(out),
    }


def _write_training_result(folder: OutputFolder) -> Path:
    """Write ``training.json`` beside the checkpoint just written in ``folder``: accuracy per evaluated round.

    Built from the verified manifest (:func:`privaudit.report.producers.training_result`), so it says exactly
    what the checkpoint records; the checkpoint reader never opens it. Through the checkpoint's output folder: a
    failed write moves the checkpoint to a temporary folder with it (:mod:`privaudit.output_folder`).
    """
    from privaudit.fl.engine.checkpoint import TRAINING_RESULT, read_manifest
    from privaudit.report.producers import training_result
    from privaudit.report.results import write_result

    return folder.save_with(TRAINING_RESULT, lambda path: write_result(path, training_result(read_manifest(path.parent),
                                                                                             path.parent)))


def register(app: typer.Typer) -> None:
    registry_parameters, algorithm_option_names, privacy_option_names = _registry_parameters()
    common = _common_parameters()
    clash = {p.name for p in common} & {p.name for p in registry_parameters}
    if clash:
        raise RuntimeError(f"registry options clash with train's own options: {sorted(clash)}")

    def train(**kwargs: Any) -> None:
        """Train a federation (optionally private, optionally Upcycled-FL) and write it to --out."""
        if kwargs["list_"]:
            _print_lists()
            return
        missing = [flag for flag, key in (("--algorithm", "algorithm"), ("--dataset", "dataset"), ("--rounds", "rounds")) if kwargs[key] is None]
        if missing:
            raise InvalidParameterError(f"train needs {', '.join(missing)} (or --list)")
        if kwargs["threads"] < 1:
            raise InvalidParameterError(f"--threads must be at least 1, got {kwargs['threads']}")
        check_workers(kwargs["workers"], kwargs["num_clients"])
        if kwargs["out"] is not None:  # before any data is loaded or model built
            check_out_folder(kwargs["out"])
        from privaudit.device import resolve_device

        resolve_device(kwargs["device"])  # an absent device is one line, before any data is loaded
        import torch

        from privaudit.fl.algorithms.registry import algorithm_spec
        from privaudit.fl.engine.config import LocalTrainingConfig
        from privaudit.fl.run import TrainSpec, run_training

        torch.set_num_threads(kwargs["threads"])
        algorithm_options = {k: kwargs[k] for k in algorithm_option_names if kwargs[k] is not None}
        settings = _settings(kwargs, algorithm_spec(kwargs["algorithm"]).defaults(kwargs["privacy"], algorithm_options))
        if kwargs["classes_per_client"] is not None:
            if kwargs["partition"] is not None:
                raise InvalidParameterError("give either --classes-per-client N or --partition, not both")
            kwargs["partition"] = f"classes:{kwargs['classes_per_client']}"

        spec = TrainSpec(
            algorithm=kwargs["algorithm"],
            dataset=kwargs["dataset"],
            rounds=kwargs["rounds"],
            model=kwargs["model"],
            algorithm_options=algorithm_options,
            privacy=kwargs["privacy"],
            privacy_options={k: kwargs[k] for k in privacy_option_names if kwargs[k] is not None},
            local=LocalTrainingConfig(epochs=settings["local_epochs"], batch_size=settings["batch_size"], lr=settings["lr"],
                                      momentum=settings["momentum"], double_softmax=kwargs["double_softmax"]),
            clients_per_round=kwargs["clients_per_round"],
            sampling=settings["sampling"],
            stragglers=kwargs["stragglers"],
            seed=kwargs["seed"],
            data_seed=kwargs["data_seed"],
            num_clients=kwargs["num_clients"],
            partition=kwargs["partition"],
            dataset_options=_parse_dataset_options(kwargs["dataset_option"]),
            execution=settings["execution"],
            device=kwargs["device"],
            workers=kwargs["workers"],
            eval_every=kwargs["eval_every"],
            eval_train_loss=kwargs["eval_train_loss"],
        )
        out = kwargs["out"]
        # the checkpoint's folder: should the disk fill, what was written moves to a temporary folder and training goes on
        with opened(out, "train") if out is not None else contextlib.nullcontext() as folder:
            result = run_training(spec, out, save_client_updates=kwargs["save_client_updates"], overwrite=kwargs["overwrite"],
                                  progress=not kwargs["quiet"])
            summary = _summary(result, None if folder is None else folder.path)
            if folder is not None:
                summary["training_result"] = str(_write_training_result(folder))
        summary.update(result.summary_rows())  # what the algorithm adds (PFA: ε spent, uplink; PrivateFL: ε)
        if kwargs["json_"]:
            print_json(summary)
        else:
            from rich.console import Console
            from rich.table import Table

            table = Table(title="privaudit train", show_header=False, title_justify="left")
            for key, value in summary.items():
                table.add_row(key.replace("_", " "), f"{value:.4g}" if isinstance(value, float) else str(value))
            Console().print(table)
        problem = None if folder is None else relocation_problem(folder, what="checkpoint")
        if problem:
            raise fail(problem)

    parameters = common + registry_parameters
    train.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    train.__annotations__ = {p.name: p.annotation for p in parameters}
    app.command("train", no_args_is_help=True)(cli_errors(train))
