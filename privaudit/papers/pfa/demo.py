"""PFA's part of ``make demo`` (:mod:`privaudit.cli.demo`), declared as the paper's ``demo`` part
(:class:`Demo`): the ``compute-epsilon`` commands of the tour over its headline settings, and the evidence steps
that follow the default audit suite.
"""

from __future__ import annotations

from typing import ClassVar


class Demo:
    """The paper's tour steps (title, explanation, ``privaudit compute-epsilon`` arguments) and demo steps."""

    tour: ClassVar[tuple[tuple[str, str, list[str]], ...]] = (
        (
            "PFA: a public client (claimed ε_m = 10) under the reference calibration σ = 10·q·sqrt(T·log10(1/δ))/ε",
            "With the code's defaults (2000 records, batch 4, T = 8000 steps) the noise gives ε ≈ 23, not 10.",
            ["--mechanism", "pfa-reference", "--epsilon", "10", "--sample-rate", "0.002", "--steps", "8000", "--delta", "1e-5", "--accountant", "rdp"],
        ),
        (
            "PFA: a private client (claimed ε_m = 0.1) under the same calibration",
            "Eight times more noise than the budget needs (ε ≈ 0.013).",
            ["--mechanism", "pfa-reference", "--epsilon", "0.1", "--sample-rate", "0.002", "--steps", "8000", "--delta", "1e-5", "--accountant", "rdp"],
        ),
    )

    @staticmethod
    def steps(out: str, executor: str, threads: str) -> list[tuple[str, list[str]]]:
        """(title, ``privaudit`` arguments) of the demo's steps for this paper, writing under ``out``; trials and shadow
        federations run on ``executor``, torch on ``threads`` threads."""
        return [
            ("PFA with MixGauss1 budgets: a federation whose clients each have their own ε (the ledger's pre-check stops it)",
             ["train", "--algorithm", "pfa", "--budgets", "mixgauss1", "--clients", "20", "--clients-per-round", "0.8",
              "--local-steps", "20", "--batch-size", "8", "--rounds", "10", "--dataset", "mnist5k", "--model", "pfa-lr",
              "--out", f"{out}/runs/pfa", "--overwrite"]),
            ("The same PFA federation with the reference code's closed-form noise σ = 10q√(T·log₁₀(1/δ))/ε",
             ["train", "--algorithm", "pfa", "--budgets", "mixgauss1", "--clients", "20", "--clients-per-round", "0.8",
              "--local-steps", "20", "--batch-size", "8", "--rounds", "10", "--dataset", "mnist5k", "--model", "pfa-lr",
              "--noise-calibration", "reference", "--out", f"{out}/runs/pfa-reference-calibration", "--overwrite"]),
            ("What each client of the reference-calibrated run really spent vs its budget",
             ["compute-epsilon", "--checkpoint", f"{out}/runs/pfa-reference-calibration", "--delta", "1e-5", "--accountant", "rdp",
              "--out", f"{out}/pfa-reference-calibration-ledger.json"]),
            ("What each PFA client really spent vs its budget (the run's ledger, RDP)",
             ["compute-epsilon", "--checkpoint", f"{out}/runs/pfa", "--delta", "1e-5", "--accountant", "rdp",
              "--out", f"{out}/pfa-ledger.json"]),
            ("ε vs rounds of the PFA client that spent the most, by every accountant that can account for it",
             ["compute-epsilon", "--checkpoint", f"{out}/runs/pfa", "--delta", "1e-5", "--curve",
              "--out", f"{out}/pfa-epsilon-curve.json"]),
        ]
