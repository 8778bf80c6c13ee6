"""``privaudit train`` once its request is made: the run inside its output folder, ``training.json`` beside the
checkpoint, the summary printed; and ``train --list``.

Imported when the command runs (data, models and training load torch).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from privaudit.cli.common import fail, print_json, relocation_problem
from privaudit.data import describe_datasets
from privaudit.fl.algorithms.registry import algorithm_specs
from privaudit.fl.engine.checkpoint import TRAINING_RESULT, read_manifest
from privaudit.fl.privacy.registry import privacy_specs
from privaudit.fl.train_request import TrainRequest, run_request
from privaudit.models import describe_models
from privaudit.output_folder import OutputFolder, opened
from privaudit.report import results  # through the module: tests replace its writer
from privaudit.report.producers import training_result


def run(request: TrainRequest, *, quiet: bool, json_output: bool) -> None:
    """Train, write ``training.json`` beside the checkpoint and print the summary (JSON with ``json_output``)."""
    out = request.out
    # the checkpoint's folder: should the disk fill, what was written moves to a temporary folder and training goes on
    with opened(out, "train") if out is not None else contextlib.nullcontext() as folder:
        result = run_request(request, progress=not quiet)
        summary = _summary(result, None if folder is None else folder.path)
        if folder is not None:
            summary["training_result"] = str(_write_training_result(folder))
    summary.update(result.summary_rows())  # what the algorithm adds (e.g. ε spent, uplink)
    if json_output:
        print_json(summary)
    else:
        table = Table(title="privaudit train", show_header=False, title_justify="left")
        for key, value in summary.items():
            table.add_row(key.replace("_", " "), f"{value:.4g}" if isinstance(value, float) else str(value))
        Console().print(table)
    problem = None if folder is None else relocation_problem(folder, what="checkpoint")
    if problem:
        raise fail(problem)


def print_lists() -> None:
    """``train --list``: the algorithms, datasets, models and privacy mechanisms."""
    console = Console()
    sections = (
        ("Algorithms", {name: spec.summary + (f"  [{', '.join(o.flag for o in spec.options)}]" if spec.options else "") for name, spec in algorithm_specs().items()}),
        ("Datasets", describe_datasets()),
        ("Models", describe_models()),
        ("Privacy mechanisms", {name: spec.summary + (f"  [{', '.join(o.flag for o in spec.options)}]" if spec.options else "") for name, spec in privacy_specs().items()}),
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
    return folder.save_with(TRAINING_RESULT, lambda path: results.write_result(path, training_result(read_manifest(path.parent),
                                                                                             path.parent)))
