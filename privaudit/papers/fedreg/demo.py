"""FedReg's part of ``make demo`` (:mod:`privaudit.cli.demo`), declared as the paper's ``demo`` part
(:class:`Demo`): the ``compute-epsilon`` commands of the tour over its headline settings, and the evidence steps
that follow the default audit suite.
"""

from __future__ import annotations

from typing import ClassVar


class Demo:
    """The paper's tour steps (title, explanation, ``privaudit compute-epsilon`` arguments) and demo steps."""

    tour: ClassVar[tuple[tuple[str, str, list[str]], ...]] = (
        (
            "FedReg: the DP-SGD comparison point for EMNIST (σ = 0.01, 20 full-batch steps)",
            "The 'matched PSNR' baseline carries essentially no privacy: ε ≈ 10⁵.",
            ["--mechanism", "gaussian", "--noise-multiplier", "0.01", "--steps", "20", "--delta", "1e-5"],
        ),
    )

    @staticmethod
    def steps(out: str, executor: str, threads: str) -> list[tuple[str, list[str]]]:
        """(title, ``privaudit`` arguments) of the demo's steps for this paper, writing under ``out``; trials and shadow
        federations run on ``executor``, torch on ``threads`` threads."""
        return [
            ("Gradient inversion, analytic attack on a fully connected first layer: FedReg+MG's update (no noise)",
             ["attack", "inversion", "--dataset", "lfw", "--model", "upcycled-mlp", "--defense", "fedreg-mg", "--attack",
              "analytic", "--images", "4", "--out", f"{out}/inversion-fedreg-mg-analytic"]),
            ("Inverting Gradients on a FedAvg update (convnet, 300 iterations)",
             ["attack", "inversion", "--dataset", "lfw", "--model", "convnet", "--defense", "fedavg", "--attack", "ig",
              "--images", "2", "--iterations", "300", "--threads", threads, "--out", f"{out}/inversion-fedavg-ig"]),
            ("Inverting Gradients on a FedReg+MG update (the attacker assumes FedAvg)",
             ["attack", "inversion", "--dataset", "lfw", "--model", "convnet", "--defense", "fedreg-mg", "--attack", "ig",
              "--images", "2", "--iterations", "300", "--threads", threads, "--out", f"{out}/inversion-fedreg-mg-ig"]),
            ("Inverting Gradients on a DP-SGD update (σ = 0.01: the result carries its ε)",
             ["attack", "inversion", "--dataset", "lfw", "--model", "convnet", "--defense", "dpsgd:1e-2", "--attack", "ig",
              "--images", "2", "--iterations", "300", "--threads", threads, "--out", f"{out}/inversion-dpsgd-ig"]),
        ]
