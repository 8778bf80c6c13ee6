"""Upcycled-FL's part of ``make demo`` (:mod:`privaudit.cli.demo`), declared as the paper's ``demo`` part
(:class:`Demo`): the ``compute-epsilon`` commands of the tour over its headline settings, and the evidence steps
that follow the default audit suite.
"""

from __future__ import annotations

from typing import ClassVar


class Demo:
    """The paper's tour steps (title, explanation, ``privaudit compute-epsilon`` arguments) and demo steps."""

    tour: ClassVar[tuple[tuple[str, str, list[str]], ...]] = (
        (
            "Upcycled-FL, output perturbation: FedProx σ = 1 over 80 rounds (the journal version's Fig. 3 states ε̄ = 1.59, and no δ)",
            "The journal version's ε̄ = 1.59 is reproduced by the submission draft's formula (its Thm 5.2) at the draft's δ = 1e-3 and the mean "
            "client size |D| = 224.2; the journal version's own Thm 6.2 prints r + 2·sqrt(r·ln(1/δ)), which gives 1.562 (--form tmlr).",
            ["--mechanism", "upcycled-output", "--rounds", "80", "--noise", "1.0", "--clip", "10", "--dataset-size", "224.2", "--delta", "1e-3",
             "--form", "draft"],
        ),
        (
            "Upcycled-FL, Thm 6.2: Upcycled-FedProx σ = 0.8 over 40 perturbed rounds, with the reference code's noise",
            "The paper claims 1.40 < 1.59. The reference code draws noise with std σ² (torch.normal(0, sigma**2)): "
            "with the std it really used, the claim reverses (1.75 > 1.59 by the same draft formula).",
            ["--mechanism", "upcycled-output", "--rounds", "40", "--noise", "0.8", "--clip", "10", "--dataset-size", "224.2",
             "--delta", "1e-3", "--noise-std", "sigma-squared", "--form", "draft"],
        ),
        (
            "Upcycled-FL, Thm 6.2 with the paper's own (replace-one) neighbours",
            "Replacing a record doubles the sensitivity: ε̄ becomes 3.17, not 1.59.",
            ["--mechanism", "upcycled-output", "--rounds", "80", "--noise", "1.0", "--clip", "10", "--dataset-size", "224.2",
             "--delta", "1e-3", "--sensitivity", "replace-one"],
        ),
        (
            "Upcycled-FL, Thm 6.3 (objective perturbation) for FedAvg (μ = 0)",
            "The theorem needs a strongly convex objective; with μ = 0 (the README's FedAvg example) ε is infinite.",
            ["--mechanism", "upcycled-objective", "--rounds", "40", "--alpha", "20", "--mu", "0", "--u1", "1", "--u2", "0.25",
             "--dataset-size", "224.2"],
        ),
    )

    @staticmethod
    def steps(out: str, executor: str, threads: str) -> list[tuple[str, list[str]]]:
        """(title, ``privaudit`` arguments) of the demo's steps for this paper, writing under ``out``; trials and shadow
        federations run on ``executor``, torch on ``threads`` threads."""
        return [
            ("Private Upcycled-FedProx (output perturbation, σ = 0.8): a federation to attack",
             ["train", "--algorithm", "upcycled-fedprox", "--dataset", "synthetic:iid", "--rounds", "20",
              "--privacy", "output-perturbation", "--noise", "0.8", "--clip", "10", "--out", f"{out}/runs/upcycled-private",
              "--overwrite"]),
            ("LiRA membership inference on that federation's final model (8 shadow federations)",
             ["attack", "membership", "--checkpoint", f"{out}/runs/upcycled-private", "--attack", "lira", "--shadows", "8",
              "--variance", "fixed", "--executor", executor, "--out", f"{out}/membership-lira"]),
        ]
