"""LiRA against a federation's final global model, with shadow federations trained through the engine.

Carlini et al. 2022 (Alg. 1): train N shadow federations with the target's recipe on random halves of the
data pool (:mod:`attacks.membership.shadows`), record every candidate's φ = log(p_y/(1−p_y)) under each, and
score the target's φ with the Gaussian likelihood ratio (online) or the one-sided OUT test (offline)
(:mod:`attacks.membership.lira`). Shadows run through :mod:`privaudit.executor` (``in-process``, ``process``,
``ray``) and resume from ``out_dir``. In-process, by default (``shadow_batch=True``), all shadows train in
lockstep as lanes of one stacked run per round (:mod:`attacks.membership.batched_shadows`) — the same shadow
models as one after another (bit for bit in the CPU tests: logistic regression, an MLP with dropout, a small CNN;
within float tolerance where another device or stacked form sums in another order).

Differences from the paper, stated: the data are tabular or small images without augmentations, so φ is
not averaged over augmented queries; each shadow client trains on about half of its home records (train and
test splits pooled), so shadows see ≈ (1 + test fraction)/2 of the target's training-set size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError
from privaudit.executor import make_executor, make_trials, run_trials
from privaudit.progress import progress_bar

from .base import MembershipAttack
from .batched_shadows import LockstepExecutor
from .examples import MembershipExamples, dataset_pool
from .lira import MODES, ShadowStatistics, lira_scores, resolve_variance
from .shadows import data_source, design_digest, guard_out_dir, shadow_homes, shadow_membership, shadow_trial
from .signals import logit_scaled_confidence
from .target import TargetModel


@dataclass(frozen=True)
class LiRAConfig:
    """``shadows`` federations (≥ 2), ``mode`` online/offline, ``variance`` auto/per-example/fixed,
    the executor that trains them (``workers``/``address`` for process pools and Ray), ``out_dir`` for
    resumable shadow results, ``seed`` for the halves and the shadows' training seeds. ``shadow_batch``: with the
    in-process executor, train all shadows as lanes of one stacked run per round (default) instead of one after
    another; process pools and Ray train one shadow per trial."""

    shadows: int = 16
    mode: str = "online"
    variance: str = "auto"
    executor: str = "in-process"
    workers: int | None = None
    address: str | None = None
    out_dir: str | None = None
    seed: int = 0
    progress: bool = False
    shadow_batch: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.shadows, bool) or int(self.shadows) != self.shadows:
            raise InvalidParameterError(f"the number of shadow models must be an integer, got {self.shadows!r}")
        if self.mode not in MODES:
            raise InvalidParameterError(f"unknown LiRA mode {self.mode!r}; use online or offline")
        if self.shadows < 2:
            raise InvalidParameterError(
                f"LiRA {self.mode} needs at least 2 shadow models (each example IN for one, OUT for another), got {self.shadows}"
            )
        resolve_variance(self.variance, int(self.shadows))
        if not isinstance(self.shadow_batch, bool):
            raise InvalidParameterError(f"shadow_batch must be true or false, got {self.shadow_batch!r}")


class LiRAAttack(MembershipAttack):
    name = "lira"
    description = "LiRA (Carlini et al. 2022): per-example Gaussian likelihood ratio from shadow federations trained by the engine"
    needs = ("weights", "recipe")

    def __init__(self, config: LiRAConfig) -> None:
        super().__init__(config)
        self._extra: dict[str, Any] = {}
        self._lanes: dict[str, Any] = {}

    def shadow_statistics(self, target: TargetModel, examples: MembershipExamples) -> ShadowStatistics:
        """Train (or resume) the shadow federations and collect φ and the keep mask of ``examples``."""
        cfg = self.config
        recipe = target.require_recipe("LiRA")
        dataset = target.require_dataset("LiRA")
        pool = dataset_pool(dataset)
        homes = shadow_homes(pool, dataset.num_clients, cfg.seed)
        counts = np.bincount(homes, minlength=dataset.num_clients)
        if counts.min() < 2:
            raise InvalidParameterError(f"LiRA splits each client's records in halves; client {int(counts.argmin())} has {int(counts.min())}")
        if examples.index.max() >= len(pool) or not np.array_equal(pool.y[examples.index], examples.y):
            raise InvalidParameterError("the examples are not records of the target's dataset (build them with examples_from_dataset)")
        executor = make_executor(cfg.executor, workers=cfg.workers, address=cfg.address)  # a missing Ray fails here, before training
        if recipe.model is None and target.model_name:
            from dataclasses import replace

            recipe = replace(recipe, model=target.model_name)
        base = {
            "train": recipe.to_dict(),
            "data": data_source(dataset, recipe),
            "shadows": int(cfg.shadows),
            "design_seed": int(cfg.seed),
            "candidates": [int(i) for i in examples.index],
        }
        specs = [{**base, "shadow": s} for s in range(int(cfg.shadows))]
        guard_out_dir(cfg.out_dir, design_digest(specs))
        trials = make_trials(specs, base_seed=int(cfg.seed), prefix="shadow")
        self._lanes: dict[str, Any] = {}
        if cfg.shadow_batch and cfg.executor == "in-process":
            results = self._train_in_lanes(trials)
        else:
            results = run_trials(shadow_trial, trials, cfg.out_dir, executor, progress=cfg.progress, label="LiRA shadow federations")
        phi = np.array([r["phi"] for r in results], dtype=np.float64)
        keep = shadow_membership(homes, int(cfg.shadows), cfg.seed)[:, examples.index]
        accuracies = [r["accuracy"] for r in results if r.get("accuracy") is not None]
        executions = sorted({r["execution"] for r in results if r.get("execution")})
        self._extra = {"shadow_accuracy_mean": float(np.mean(accuracies)) if accuracies else None,
                       "shadow_training": "; ".join(executions) or None, **({"shadow_lanes": self._lanes} if self._lanes else {})}
        return ShadowStatistics(phi, keep)

    def _train_in_lanes(self, trials) -> list[dict[str, Any]]:
        """All shadows in lockstep, one stacked run per training round (resuming from ``out_dir`` like run_trials)."""
        cfg = self.config
        with progress_bar(f"LiRA: {len(trials)} shadow federations in lanes, rounds", None, enabled=cfg.progress) as bar:
            executor = LockstepExecutor(on_round=bar.advance)
            results = run_trials(shadow_trial, trials, cfg.out_dir, executor, progress=False)
        lockstep = executor.last
        if lockstep is not None:  # None: every shadow came from out_dir
            self._lanes = {"shadows_trained": lockstep.count, "training_rounds": lockstep.rounds,
                           "stacked_rounds": lockstep.stacked_rounds, "local_training_seconds": round(lockstep.training_seconds, 3)}
        return results

    def score(self, target: TargetModel, examples: MembershipExamples) -> np.ndarray:
        stats = self.shadow_statistics(target, examples)
        target_phi = logit_scaled_confidence(target.logits(examples.x), examples.y)
        variance = resolve_variance(self.config.variance, stats.shadows)
        self._extra.update({"mode": self.config.mode, "variance_used": variance, "signal": "logit-confidence"})
        return lira_scores(target_phi, stats, self.config.mode, variance)

    def extra_meta(self) -> dict[str, Any]:
        return dict(self._extra)
