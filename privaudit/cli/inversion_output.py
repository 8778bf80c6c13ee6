"""``privaudit attack inversion`` once the attack has run: the ``inversion`` result and its image grid written to
``--out`` (kept in a temporary folder should the write fail, :func:`privaudit.cli.common.save_outputs`), and the
per-image table (or the result's data as JSON) printed.

Imported when the command runs (torch, matplotlib).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from attacks.inversion.figures import save_image_grid
from attacks.inversion.request import GRID_FILE, RESULT_FILE, InversionRequest
from attacks.inversion.run_request import InversionOutcome
from privaudit.cli.common import fail, print_json, save_outputs
from privaudit.report import results  # through the module: tests replace its writer


def emit(outcome: InversionOutcome, request: InversionRequest, *, json_output: bool) -> None:
    """Write the result (with ``--out``) and print it; a write that failed is one error line after the output."""
    saved = None
    if request.out is not None:  # --out was checked before the attack; should writing fail now anyway, the result is kept elsewhere
        saved = save_outputs(lambda folder: _write(folder, outcome, request), request.out, command="attack-inversion")
    result_path = None if saved is None else saved.value
    if json_output or (saved is not None and saved.value is None):
        print_json(outcome.data | {"result": None if result_path is None else str(result_path)})
    else:
        _print_table(outcome.data, result_path)
    if saved is not None and saved.problem:
        raise fail(saved.problem)


def _write(folder: Path, outcome: InversionOutcome, request: InversionRequest) -> Path:
    """The image grid (ground truth over reconstructions) and the ``inversion`` result, into ``folder``."""
    data = outcome.data
    data["grid"] = None  # set again once the grid is in this folder
    if outcome.reconstructions is not None:
        save_image_grid(folder / GRID_FILE, [("ground truth", outcome.ground_truth),
                                             (f"{request.attack}\n{outcome.defence_label}", outcome.reconstructions)],
                        psnr=[None, data["psnr"]], title=outcome.title)
        data["grid"] = GRID_FILE
    return results.write_result(folder / RESULT_FILE, results.make_result("inversion", outcome.title, data, request.config_record(),
                                                          seed=request.seed))


def _print_table(data: dict[str, Any], result_path: Path | None) -> None:
    console = Console()
    table = Table(title=f"privaudit attack inversion — {data['attack']} vs {data['defense']}", title_justify="left")
    for name in ("image", "true label", "predicted", "PSNR (dB)", "SSIM", "attack status"):
        table.add_column(name, justify="right")
    for row in data["per_image"]:
        psnr = row["psnr"]
        table.add_row(str(row["index"]), str(row["true_label"]), "—" if row["predicted_label"] is None else
                      f"{row['predicted_label']} {'✓' if row['label_correct'] else '✗'}",
                      "—" if psnr is None else ("∞" if math.isinf(psnr) else f"{psnr:.2f}"),
                      "—" if row["ssim"] is None else f"{row['ssim']:.3f}",
                      row["status"] if row["status"] in ("ok", "closed-form") else f"[bold red]{row['status']}[/bold red]")
    console.print(table)
    excluded = sum(data["images_excluded"].values())
    over = f" over {data['images_summarised']} of {data['images_summarised'] + excluded} images" if excluded else ""
    summary = [f"PSNR mean {data['psnr_mean']:.2f} dB{over}" if data["psnr_mean"] is not None else
               ("no PSNR: every attack failed" if excluded else "no images reconstructed"),
               f"SSIM mean {data['ssim_mean']:.3f}" if data["ssim_mean"] is not None else "",
               f"label accuracy {data['label_accuracy']:.2f}" if data["label_accuracy"] is not None else "",
               f"ε = {data['epsilon']:.3g} at δ = {data['delta']:g}" if isinstance(data.get("epsilon"), float) else "",
               f"{data['seconds']:.1f} s on {data['device']}"]
    console.print(" · ".join(s for s in summary if s))
    for note in data.get("notes", []):
        console.print(f"[dim]note: {note}[/dim]")
    if result_path is not None:
        console.print(f"result: {result_path}   grid: {result_path.parent / data['grid'] if data.get('grid') else '—'}")


