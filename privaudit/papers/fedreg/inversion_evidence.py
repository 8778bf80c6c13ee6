"""Evidence for the FedReg privacy audit points R1, R2, R4, R5 (listed in the README): inversion vs ε.

:func:`run` (``python benchmarks/evidence_inversion.py [--images 4] [--adaptive-images 2] [--iterations 300] [--seed 0]``)
attacks one-example client updates (FedReg App. B.4: the attacked update is the parameter change after
**one local step on one data point**, so FedAvg, FedProx and FedSGD coincide up to the step size) under

* FedAvg (no defence), lr 0.1;
* FedAvg + DP-SGD (Abadi et al. 2016, Alg. 1): clip to C = 1, Gaussian noise σ·C, σ ∈ {1e-3, 1e-2, 1e-1, 1},
  with the ε it buys at δ = 1e-5 from :mod:`privaudit.accounting` (one full-batch step — sampling rate 1 — on
  the one example: a single Gaussian mechanism of noise multiplier σ, add/remove neighbours, ``auto``
  accountant);
* FedReg's local step without MG (Xu et al., ICLR 2022, eq. 10–11) and FedReg + MG (eq. 12), γ = 0.5,
  η_s = 1e-3 (the CIFAR-10 setting of App. B.4), 10 FGSM steps clamped to the data range (R6 fixed);
  neither carries a DP guarantee (R1),

with the attacks

* ``analytic`` (Phong et al. 2018; Geiping et al. 2020 §4) on the FC-first ``upcycled-mlp``;
* ``ig`` — Inverting Gradients (Geiping et al. 2020: cosine distance, TV 1e-4, Adam on signed gradients,
  step schedule, box constraint) on the ``convnet`` (cnn6 style), assuming plain FedAvg ("naive" for FedReg);
* ``adaptive-mg`` ("adaptive" in the records) against plain FedReg *and* FedReg + MG: the same optimisation
  through an exact simulation of the client's step (regulariser, FGSM pseudo data, and MG where the client uses it),
  labels inferred (iDLG) and given, so that the difference between the FedReg and FedReg+MG rows is MG's (audit
  point R4); on lfw and digits also on the FC-first ``upcycled-mlp`` (labels given);
* the adaptive attacks that try to *invert* plain FedReg (:data:`STRONG_ADAPTIVE`): ``adaptive-mg`` started at the
  analytic first-layer recovery on the ``upcycled-mlp`` (labels given and inferred), and with continuation through a
  smoothed LeakyReLU on the ``convnet`` (labels given) — again on plain FedReg and FedReg + MG alike, so that under an
  attack that inverts plain FedReg the difference between the rows is what MG adds;

and measures the *update anatomy* of both FedReg variants on the attacked examples
(:mod:`privaudit.papers.fedreg.update_anatomy`): the attacker's simulation on the true example against the release
(1 − cos ≈ 0: the client model is exact), the release against the plain SGD step (how much of the data gradient the
regulariser leaves), and iDLG's label from each (whether the defence or the attack breaks label inference).

Data (all embedded, nothing downloaded): scikit-image ``lfw_subset`` (25×25 grey, face/non-face labels),
scikit-image sample images (32×32 RGB) and scikit-learn digits (8×8). Weights are untrained and seeded.
Scaled to ~15–25 min on 2 shared CPU cores: few images per dataset, a few hundred IG iterations (the paper
used 32,000) and fewer images for the expensive adaptive attack; all stated in the report.

Draws ``reports/inversion-<dataset>.png`` (all defences, first rows analytic then IG) and
``reports/inversion-<dataset>-adaptive.png`` (FedReg and FedReg + MG, naive vs adaptive), writes the result file
``reports/evidence/inversion.json`` (kind ``inversion-evidence``: the settings and one record per defence × attack ×
dataset; the grids declared as its inputs) and renders ``reports/inversion.md`` from it
(:func:`privaudit.papers.fedreg.pages.inversion_page`); ``privaudit report reports/evidence/inversion.json --out
reports/inversion.md`` re-renders the page without re-running the attacks. The result file records the command line
that ran (provenance and settings), which the page's header shows.

``adaptive_only`` (``--adaptive-only``) re-runs only the :data:`STRONG_ADAPTIVE` cells (minutes instead of the full run's half hour),
replaces their rows in the existing ``<out-dir>/evidence/inversion.json`` (every other row is kept), adds the grids
``inversion-<dataset>-<variant>.png``, records the re-run's command, time and settings under
``settings["adaptive_reruns"]`` and re-renders the page; a missing or unwritable result file is refused before any work.
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attacks.inversion.convergence import FLAGGED
from attacks.inversion.experiment import InversionExperiment, defence_epsilon, parse_defence, run_inversion
from attacks.inversion.figures import save_image_grid
from privaudit.errors import InvalidParameterError
from privaudit.papers.fedreg.update_anatomy import update_anatomy
from privaudit.progress import progress_bar
from privaudit.report.evidence import write_page
from privaudit.report.results import make_result, read_result, write_result

DELTA = 1e-5
SIGMAS = (1e-3, 1e-2, 1e-1, 1.0)
DATASETS = {"lfw": "LFW subset (25×25 grey)", "images": "skimage samples (32×32 RGB)", "digits": "sklearn digits (8×8)"}
LOCAL = {"lr": 0.1, "local_steps": 1, "batch_size": None}
FEDREG = {"gamma": 0.5, "pseudo_step": 1e-3, "fgsm_steps": 10}
CLIP = 1.0
ANALYTIC_MODEL = "upcycled-mlp"
IG_MODEL = "convnet"
#: Datasets on which the adaptive attack also runs on the FC-first model (labels known); the 32×32 RGB images are left
#: out there for time (the 604k-parameter MLP on 3,072 inputs).
ADAPTIVE_FC_DATASETS = ("lfw", "digits")
#: The adaptive attacker's FGSM derivative: the displacement held constant (sign' = 0 almost everywhere).
ADAPTIVE_OPTIONS = {"fgsm_gradient": "identity"}
#: On the FC-first model the adaptive attack runs without the TV prior. First images, 300 iterations, plain FedReg,
#: labels known: digits 22.3 dB without TV vs 18.1 dB with TV 1e-4, but lfw 14.0 dB without TV (the committed run)
#: vs 21.9 dB with TV 1e-4 (a separate run) — the choice was made on digits alone and costs lfw.
ADAPTIVE_FC_OPTIONS = {**ADAPTIVE_OPTIONS, "tv_weight": 0.0}
@dataclass(frozen=True)
class StrongVariant:
    """An ``adaptive-mg`` variant that tries to *invert* plain FedReg: its model, attack options, label modes (True:
    labels given, so the attacker's client model is exact; False: inferred by iDLG) and whether it attacks all
    ``--images`` or only the first ``--adaptive-images``."""

    model: str
    options: dict[str, Any]
    labels_known: tuple[bool, ...]
    all_images: bool


#: The adaptive attacks that try to *invert* plain FedReg, run on plain FedReg and FedReg+MG alike so that the difference
#: between the rows is MG's; label stem → variant. ``analytic start`` seeds the descent with the closed-form first-layer
#: recovery from the same update and refines it through the exact FedReg simulation (FC-first model only; cheap, so on
#: every image); ``continuation`` anneals a smooth surrogate of the ConvNet's LeakyReLU to the exact activation
#: (:mod:`attacks.inversion.smooth_activation`; the run's most expensive cells, so labels given and the adaptive images only).
STRONG_ADAPTIVE: dict[str, StrongVariant] = {
    "adaptive, analytic start": StrongVariant(ANALYTIC_MODEL, {**ADAPTIVE_FC_OPTIONS, "start": "analytic", "lr": 1e-3,
                                                               "keep_best_iterate": True}, (True, False), True),
    "adaptive, continuation": StrongVariant(IG_MODEL, {**ADAPTIVE_OPTIONS, "smooth_temperature": 0.1, "smooth_fraction": 0.5,
                                                       "tv_weight": 1e-2, "keep_best_iterate": True}, (True,), False),
}
#: ``--variants`` names of :data:`STRONG_ADAPTIVE`'s entries.
VARIANT_NAMES = {"analytic-start": "adaptive, analytic start", "continuation": "adaptive, continuation"}
#: How the variants' settings were chosen (first lfw image, plain FedReg, labels given, 300 iterations, one restart,
#: measured with ``run_inversion`` before the evidence run): ConvNet — IG's loop 7.0 dB; τ_0 = 1 / 0.1 / 0.01 (TV 1e-4) 7.8 / 8.5 /
#: 8.6 dB; TV 1e-2 alone 9.2 dB; τ_0 = 0.1 with TV 1e-2 / 5e-2 12.0 / 12.6 dB; τ_0 = 0.1 with the l2 distance 8.7 dB.
#: FC-first MLP, analytic start: signed-Adam lr 1e-2 / 1e-3 / 1e-4 gave 21.4 / 36.2 / 44.0 dB on the second digits image
#: (the first: 111 / 97 / 113 dB); lr 1e-3 with the best iterate kept was taken.
NO_DP = "no DP guarantee"
#: The command that runs this module's experiment (recorded in the result file with its arguments).
COMMAND = "python benchmarks/evidence_inversion.py"


@dataclass(frozen=True)
class RunSettings:
    """How much of the evidence runs: images per dataset (every defence × attack), images for the adaptive attacks on
    FedReg and FedReg+MG, IG / adaptive-MG iterations, the seed, torch's intra-op threads and the datasets."""

    images: int = 4
    adaptive_images: int = 2
    iterations: int = 300
    seed: int = 0
    threads: int = 1
    datasets: tuple[str, ...] = tuple(DATASETS)


@dataclass(frozen=True)
class Defence:
    label: str
    spec: str
    options: dict[str, Any]
    sigma: float | None = None


@dataclass(frozen=True)
class Cell:
    dataset: str
    defence: Defence
    attack: str  # registry name
    attack_label: str
    model: str
    images: int
    labels_known: bool = False  # the attacker is given the true labels instead of inferring them (iDLG)
    variant: str | None = None  # a key of STRONG_ADAPTIVE: the adaptive attack's options


@dataclass
class Outcome:
    cell: Cell
    epsilon: float | str
    psnr: list[float]
    ssim: list[float]
    label_accuracy: float | None
    seconds: float
    label_hits: list[float] = field(default_factory=list)
    matching_losses: list[float | None] = field(default_factory=list)
    ground_truth: Any = field(default=None, repr=False)
    reconstructions: Any = field(default=None, repr=False)
    #: each image's attack status (attacks.inversion.convergence); flagged images stay listed but leave the means
    status: list[str] = field(default_factory=list)

    def first(self, k: int) -> Outcome:
        """The outcome on the first ``k`` images only: update u depends on image u and seed + u alone."""
        hits = self.label_hits[:k]
        c = self.cell
        return Outcome(Cell(c.dataset, c.defence, c.attack, c.attack_label, c.model, k, c.labels_known, c.variant),
                       self.epsilon, self.psnr[:k], self.ssim[:k], sum(hits) / len(hits) if hits else None, self.seconds,
                       hits, self.matching_losses[:k], None if self.ground_truth is None else self.ground_truth[:k],
                       None if self.reconstructions is None else self.reconstructions[:k], self.status[:k])

    def record(self, iterations: int) -> dict[str, Any]:
        c = self.cell
        return {
            "defence": c.defence.label, "sigma": c.defence.sigma, "epsilon": self.epsilon, "attack": c.attack_label,
            "dataset": c.dataset, "psnr_mean": _mean(self.psnr, self.status), "ssim_mean": _mean(self.ssim, self.status),
            "status": self.status, "images_excluded": sum(s in FLAGGED for s in self.status),
            "label_accuracy": self.label_accuracy, "model": c.model, "images": c.images, "psnr": self.psnr,
            "ssim": self.ssim, "iterations": None if c.attack == "analytic" else iterations, "seconds": self.seconds,
            "labels_known": c.labels_known, "matching_loss": self.matching_losses,
            **({"variant": c.variant, "attack_options": attack_options(c)} if c.variant else {}),
        }


def _mean(values: Sequence[float], status: Sequence[str] = ()) -> float | None:
    """Mean over the images whose attack is not flagged (∞ when one of them was recovered exactly)."""
    values = [v for i, v in enumerate(values) if i >= len(status) or status[i] not in FLAGGED]
    finite = [v for v in values if math.isfinite(v)]
    if not values:
        return None
    return float(sum(values) / len(values)) if len(finite) == len(values) else float("inf")


def defences() -> list[Defence]:
    out = [Defence("FedAvg", "fedavg", dict(LOCAL))]
    out += [Defence(f"FedAvg+DP-SGD σ={s:g}", f"dpsgd:{s:g}", {**LOCAL, "clip_norm": CLIP}, s) for s in SIGMAS]
    out += [Defence("FedReg", "fedreg", {**LOCAL, **FEDREG}), Defence("FedReg+MG", "fedreg-mg", {**LOCAL, **FEDREG})]
    return out


def strong_adaptive_cells(dataset: str, images: int, adaptive_images: int,
                          variants: Sequence[str] = tuple(STRONG_ADAPTIVE)) -> list[Cell]:
    """The :data:`STRONG_ADAPTIVE` ``variants`` on plain FedReg and FedReg+MG, in each variant's label modes."""
    cells = []
    for variant in variants:
        spec = STRONG_ADAPTIVE[variant]
        count = images if spec.all_images else adaptive_images
        for d in (d for d in defences() if d.spec.startswith("fedreg")):
            for known in spec.labels_known:
                cells.append(Cell(dataset, d, "adaptive-mg", variant + (" (labels known)" if known else ""), spec.model,
                                  count, labels_known=known, variant=variant))
    return cells


def plan(datasets: Sequence[str], images: int, adaptive_images: int, *, adaptive_only: bool = False,
         variants: Sequence[str] = tuple(STRONG_ADAPTIVE)) -> list[Cell]:
    """Every cell of the evidence; ``adaptive_only``: only the :data:`STRONG_ADAPTIVE` cells of ``variants``."""
    if adaptive_only:
        return [c for ds in datasets for c in strong_adaptive_cells(ds, images, adaptive_images, variants)]
    cells = []
    for ds in datasets:
        for d in defences():
            cells.append(Cell(ds, d, "analytic", "analytic", ANALYTIC_MODEL, images))
        for d in defences():
            cells.append(Cell(ds, d, "ig", "ig (naive)" if d.spec.startswith("fedreg") else "ig", IG_MODEL, images))
        if adaptive_images > 0:  # the naive IG run above covers the same first images (same seeds)
            # the same adaptive attack (exact simulation of the client) on plain FedReg and on FedReg+MG, so that
            # the difference between the two rows is MG's; labels inferred (iDLG), then given
            for d in (d for d in defences() if d.spec.startswith("fedreg")):
                cells.append(Cell(ds, d, "adaptive-mg", "adaptive", IG_MODEL, adaptive_images))
                cells.append(Cell(ds, d, "adaptive-mg", "adaptive (labels known)", IG_MODEL, adaptive_images,
                                  labels_known=True))
            if ds in ADAPTIVE_FC_DATASETS:  # the same attack where the first layer holds the input (FC first)
                for d in (d for d in defences() if d.spec.startswith("fedreg")):
                    cells.append(Cell(ds, d, "adaptive-mg", "adaptive (labels known)", ANALYTIC_MODEL, adaptive_images,
                                      labels_known=True))
            cells += strong_adaptive_cells(ds, images, adaptive_images)
    return cells


def attack_options(cell: Cell) -> dict[str, Any]:
    """The attack options ``cell`` runs with (the iteration count comes separately)."""
    if cell.variant is not None:
        return dict(STRONG_ADAPTIVE[cell.variant].options)
    if cell.attack == "adaptive-mg":
        return dict(ADAPTIVE_OPTIONS if cell.model == IG_MODEL else ADAPTIVE_FC_OPTIONS)
    return {}


def run_cell(cell: Cell, iterations: int, seed: int, progress) -> Outcome:  # type: ignore[no-untyped-def]

    options = {} if cell.attack == "analytic" else {"iterations": iterations}
    options.update(attack_options(cell))
    experiment = InversionExperiment(
        attack=cell.attack, defence=cell.defence.spec, dataset=cell.dataset, model=cell.model, num_images=cell.images,
        attack_options=options, defence_options=dict(cell.defence.options), seed=seed, labels_known=cell.labels_known,
    )
    run = run_inversion(experiment, progress=progress)
    exact = defence_epsilon(parse_defence(cell.defence.spec, cell.defence.options), DELTA)
    epsilon: float | str = NO_DP if exact is None else exact
    hits = [float(u["scores"]["label_accuracy"]) for u in run.updates
            if u.get("scores", {}).get("label_accuracy") is not None]
    losses = [u.get("attack", {}).get("matching_loss") for u in run.updates]
    return Outcome(cell, epsilon, list(run.psnr), list(run.ssim), run.label_accuracy, run.seconds, hits, losses,
                   run.ground_truth, run.reconstructions, list(run.status))


# -- outputs -------------------------------------------------------------------------------------------
def _grids(outcomes: list[Outcome], out_dir: Path) -> list[str]:
    import torch


    written = []
    for ds in dict.fromkeys(o.cell.dataset for o in outcomes):
        for name, variant in VARIANT_NAMES.items():  # each adaptive attack that tries to invert plain FedReg
            strong = [o for o in outcomes if o.cell.dataset == ds and o.cell.variant == variant and o.reconstructions is not None]
            if not strong:
                continue
            assert all(torch.equal(strong[0].ground_truth, o.ground_truth) for o in strong)
            rows = [("ground truth", strong[0].ground_truth)] + [
                (f"{o.cell.attack_label}\n{o.cell.defence.label} ({o.cell.model})", o.reconstructions) for o in strong]
            path = save_image_grid(out_dir / f"inversion-{ds}-{name}.png", rows, psnr=[None, *[o.psnr for o in strong]],
                                   title=f"{DATASETS[ds]}:\n{variant}, FedReg and FedReg+MG")
            written.append(path.name)
        outcomes_ds = [o for o in outcomes if o.cell.variant is None]
        full = [o for o in outcomes_ds if o.cell.dataset == ds and o.reconstructions is not None and o.cell.attack != "adaptive-mg"]
        if full:
            rows = [("ground truth", full[0].ground_truth)]
            rows += [(f"{o.cell.attack_label}\n{o.cell.defence.label}", o.reconstructions) for o in full]
            path = save_image_grid(out_dir / f"inversion-{ds}.png", rows, psnr=[None, *[o.psnr for o in full]],
                                   title=f"{DATASETS[ds]}:\none-example updates, PSNR per image")
            written.append(path.name)
        small = []
        for spec in ("fedreg", "fedreg-mg"):  # per FedReg variant: naive IG on the same images, then adaptive
            adaptive = [o for o in outcomes_ds if o.cell.dataset == ds and o.cell.attack == "adaptive-mg"
                        and o.cell.defence.spec == spec]
            naive = next((o for o in outcomes_ds if o.cell.dataset == ds and o.cell.defence.spec == spec
                          and o.cell.attack == "ig"), None)
            if adaptive and naive is not None:
                small += [naive.first(adaptive[0].cell.images), *adaptive]
        if small and all(o.reconstructions is not None for o in small):
            rows = [("ground truth", small[0].ground_truth)] + [
                (f"{o.cell.attack_label}\n{o.cell.defence.label}" + ("" if o.cell.model == IG_MODEL else f" ({o.cell.model})"),
                 o.reconstructions) for o in small]
            assert all(torch.equal(small[0].ground_truth, o.ground_truth) for o in small)
            path = save_image_grid(out_dir / f"inversion-{ds}-adaptive.png", rows, psnr=[None, *[o.psnr for o in small]],
                                   title=f"{DATASETS[ds]}:\nFedReg and FedReg+MG,\nnaive vs adaptive")
            written.append(path.name)
    return written


def anatomy(datasets: Sequence[str], images: int, seed: int) -> list[dict[str, Any]]:
    """:func:`privaudit.papers.fedreg.update_anatomy.update_anatomy` of plain FedReg and FedReg+MG on the attacked
    examples of each dataset (the IG model, the evidence's settings)."""
    out = []
    for ds in datasets:
        for d in (d for d in defences() if d.spec.startswith("fedreg")):
            out.append({"dataset": ds, "defence_label": d.label,
                        **update_anatomy(ds, d.spec, dict(d.options), IG_MODEL, images, seed)})
    return out


def write_evidence(outcomes: list[Outcome], scale: RunSettings, seconds: float, out_dir: Path,
                   command: str, checks: list[dict[str, Any]] | None = None) -> Path:
    """Draw the reconstruction grids, write ``<out_dir>/evidence/inversion.json`` (records + settings, the grids
    declared as inputs, ``command`` — the command line that ran — as provenance), then render
    ``<out_dir>/inversion.md`` from it."""
    import torch


    grids = _grids(outcomes, out_dir)
    settings = {
        "images": scale.images, "adaptive_images": scale.adaptive_images, "iterations": scale.iterations,
        "seed": scale.seed, "threads": scale.threads, "datasets": list(dict.fromkeys(o.cell.dataset for o in outcomes)),
        "dataset_names": DATASETS,
        "local": LOCAL, "fedreg": FEDREG, "clip": CLIP, "delta": DELTA, "analytic_model": ANALYTIC_MODEL, "ig_model": IG_MODEL,
        "adaptive_options": ADAPTIVE_OPTIONS, "adaptive_fc_options": ADAPTIVE_FC_OPTIONS, "adaptive_fc_datasets": list(ADAPTIVE_FC_DATASETS),
        "strong_adaptive": strong_settings(),
        "machine": platform.machine(), "torch": torch.__version__, "command": command,
    }
    data = {"settings": settings, "seconds": seconds, "records": [o.record(scale.iterations) for o in outcomes],
            "update_anatomy": checks or []}
    result = make_result("inversion-evidence", "Gradient inversion vs ε: FedAvg, DP-SGD, FedReg, FedReg+MG", data,
                         {"datasets": settings["datasets"], "threads": scale.threads}, command=command, seed=scale.seed,
                         inputs={Path(name).stem: f"../{name}" for name in grids})
    path = write_result(out_dir / "evidence" / "inversion.json", result)
    return write_page(path, out_dir / "inversion.md").markdown


def strong_settings() -> dict[str, dict[str, Any]]:
    """:data:`STRONG_ADAPTIVE` as the result file records it: label stem → model, attack options, label modes, images."""
    return {label: {"model": v.model, "options": dict(v.options), "labels_known": list(v.labels_known),
                    "images": "all" if v.all_images else "adaptive"} for label, v in STRONG_ADAPTIVE.items()}


def _record_key(record: dict[str, Any]) -> tuple[Any, ...]:
    return record["dataset"], record["defence"], record["attack"], record.get("model")


def merge_adaptive(outcomes: list[Outcome], scale: RunSettings, seconds: float, out_dir: Path, command: str) -> Path:
    """Put the re-run :data:`STRONG_ADAPTIVE` records into the committed ``<out_dir>/evidence/inversion.json`` (records
    with the same dataset, defence, attack and model are replaced, all others kept), draw their grids, note the re-run
    (command, time, settings) under ``settings["adaptive_reruns"]`` and re-render ``<out_dir>/inversion.md``."""
    import datetime

    import torch


    path = out_dir / "evidence" / "inversion.json"
    result = read_result(path)
    fresh = [o.record(scale.iterations) for o in outcomes]
    replaced = {_record_key(r) for r in fresh}
    data = result.data
    data["records"] = [r for r in data["records"] if _record_key(r) not in replaced] + fresh
    ran = {o.cell.variant for o in outcomes}
    rerun = {"command": command, "seconds": seconds, "iterations": scale.iterations, "images": scale.images,
             "adaptive_images": scale.adaptive_images, "seed": scale.seed, "threads": scale.threads,
             "datasets": list(dict.fromkeys(o.cell.dataset for o in outcomes)),
             "strong_adaptive": {k: v for k, v in strong_settings().items() if k in ran},
             "torch": torch.__version__, "machine": platform.machine(),
             "created": datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()}
    earlier = []  # earlier re-runs keep only the variants this one does not supersede
    for run in data["settings"].get("adaptive_reruns", []):
        kept = {k: v for k, v in run.get("strong_adaptive", {}).items() if k not in ran}
        if kept:
            earlier.append({**run, "strong_adaptive": kept})
    data["settings"]["adaptive_reruns"] = [*earlier, rerun]
    result.inputs.update({Path(name).stem: f"../{name}" for name in _grids(outcomes, out_dir)})
    write_result(path, result)
    return write_page(path, out_dir / "inversion.md").markdown


def check_merge_target(out_dir: Path) -> str | None:
    """Why ``adaptive_only`` cannot merge into ``<out_dir>/evidence/inversion.json`` (None when it can)."""
    import os


    path = out_dir / "evidence" / "inversion.json"
    try:
        result = read_result(path)
    except InvalidParameterError as exc:
        return f"--adaptive-only merges into an existing result file: {exc}"
    if result.kind != "inversion-evidence":
        return f"{path} is a {result.kind!r} result, not the inversion evidence"
    if not os.access(path, os.W_OK) or not os.access(out_dir, os.W_OK):
        return f"cannot write {path} or {out_dir}"
    return None


def run_cells(cells: Sequence[Cell], iterations: int, seed: int, *, progress: bool = True) -> list[Outcome]:
    """:func:`run_cell` for every cell in order, with one progress bar over all their images."""
    outcomes = []
    done = 0
    with progress_bar("inversion evidence", sum(c.images for c in cells), enabled=progress) as bar:
        for cell in cells:
            bar.describe(f"{cell.dataset}: {cell.attack_label} vs {cell.defence.label}")
            outcomes.append(run_cell(cell, iterations, seed, lambda k, done=done: bar.set(done + k)))
            done += cell.images
    return outcomes


def run(settings: RunSettings, out_dir: Path, command: str, *, adaptive_only: bool = False,
        variants: Sequence[str] = tuple(STRONG_ADAPTIVE), progress: bool = True) -> str:
    """Run the evidence and write it under ``out_dir`` (``command``: the command line that ran, recorded); returns
    what was written, in one line.

    ``adaptive_only``: only the :data:`STRONG_ADAPTIVE` ``variants``, merged into the existing result file
    (:func:`merge_adaptive`; check :func:`check_merge_target` first); otherwise every cell, the update anatomy and a
    new result file (:func:`write_evidence`).
    """
    import torch

    torch.set_num_threads(settings.threads)
    adaptive_images = min(settings.adaptive_images, settings.images)
    if adaptive_only:
        cells = plan(settings.datasets, settings.images, adaptive_images, adaptive_only=True, variants=variants)
    else:
        cells = plan(settings.datasets, settings.images, adaptive_images)
    start = time.perf_counter()
    outcomes = run_cells(cells, settings.iterations, settings.seed, progress=progress)
    if adaptive_only:
        page = merge_adaptive(outcomes, settings, time.perf_counter() - start, out_dir, command)
        return (f"merged {len(outcomes)} adaptive rows into {out_dir / 'evidence' / 'inversion.json'} and wrote {page} "
                f"in {(time.perf_counter() - start) / 60:.1f} min")
    checks = anatomy(settings.datasets, adaptive_images, settings.seed) if settings.adaptive_images else []
    seconds = time.perf_counter() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    page = write_evidence(outcomes, settings, seconds, out_dir, command, checks)
    return f"wrote {out_dir / 'evidence' / 'inversion.json'} and {page} in {seconds / 60:.1f} min"
