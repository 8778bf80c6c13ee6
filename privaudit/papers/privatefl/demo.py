"""PrivateFL's part of ``make demo`` (:mod:`privaudit.cli.demo`), declared as the paper's ``demo`` part
(:class:`Demo`): the ``compute-epsilon`` commands of the tour over its headline settings (the default audit suite covers the rest).
"""

from __future__ import annotations

from typing import ClassVar


class Demo:
    """The paper's tour steps (title, explanation, ``privaudit compute-epsilon`` arguments) and demo steps."""

    tour: ClassVar[tuple[tuple[str, str, list[str]], ...]] = (
        (
            "PrivateFL-LDP: the noise for ε = 8, δ = 1e-3 (q = 0.1, 1500 DP-SGD steps)",
            "opacus' RDP calibration gives σ ≈ 2.15; the tight accountant needs less noise for the same guarantee.",
            ["--mechanism", "subsampled-gaussian", "--epsilon", "8", "--delta", "1e-3", "--sample-rate", "0.1", "--steps", "1500", "--calibrate"],
        ),
        (
            "PrivateFL-CDP: σ = 6.37 was calibrated for ε = 8 (150 rounds, q = 1); the code clips and noises 3 tensors separately",
            "Per-tensor clipping makes the effective multiplier σ/√3: the claimed ε = 8 is really about 15.",
            ["--mechanism", "gaussian", "--noise-multiplier", "6.37", "--steps", "150", "--delta", "1e-3", "--tensors", "3", "--accountant", "all"],
        ),
    )

    @staticmethod
    def steps(out: str, executor: str, threads: str) -> list[tuple[str, list[str]]]:
        """None: the default audit suite covers the paper."""
        return []
