"""Gradient-inversion evidence for FedReg's audit points R1, R2, R4, R5: inversion vs ε for FedAvg, DP-SGD, FedReg, FedReg+MG.

``python benchmarks/evidence_inversion.py [--images 4] [--adaptive-images 2] [--iterations 300] [--seed 0]`` attacks
one-example client updates under every defence (FedReg App. B.4), writes ``reports/evidence/inversion.json`` with the
reconstruction grids and renders ``reports/inversion.md``; ``--adaptive-only [--variants ...]`` re-runs only the
adaptive attacks that try to invert plain FedReg and merges their rows into the existing result file. The experiment
is :mod:`privaudit.papers.fedreg.inversion_evidence`; this script only reads its arguments.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

from privaudit.papers.fedreg.inversion_evidence import (
    COMMAND,
    DATASETS,
    VARIANT_NAMES,
    RunSettings,
    check_merge_target,
    run,
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/evidence_inversion.py", description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=int, default=4, help="images per dataset (every defence × attack)")
    parser.add_argument("--adaptive-images", type=int, default=2, help="images per dataset for naive vs adaptive on FedReg+MG")
    parser.add_argument("--iterations", type=int, default=300, help="IG / adaptive-MG iterations")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--out-dir", type=Path, default=Path("reports"))
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--adaptive-only", action="store_true",
                        help="run only the adaptive attacks that try to invert plain FedReg (STRONG_ADAPTIVE) and merge "
                             "their rows into the existing <out-dir>/evidence/inversion.json")
    parser.add_argument("--variants", nargs="+", default=list(VARIANT_NAMES), choices=list(VARIANT_NAMES),
                        help="with --adaptive-only: which of those attacks to re-run (default: all)")
    args = parser.parse_args(argv)
    command = shlex.join([*COMMAND.split(), *(sys.argv[1:] if argv is None else argv)])
    if args.images < 1 or args.adaptive_images < 0 or args.iterations < 1 or args.threads < 1:
        parser.error("--images, --iterations and --threads must be at least 1, --adaptive-images at least 0")
    if args.adaptive_only:
        if args.adaptive_images < 1:
            parser.error("--adaptive-only needs --adaptive-images of at least 1")
        problem = check_merge_target(args.out_dir)
        if problem:
            parser.error(problem)
    settings = RunSettings(images=args.images, adaptive_images=args.adaptive_images, iterations=args.iterations,
                           seed=args.seed, threads=args.threads, datasets=tuple(args.datasets))
    print(run(settings, args.out_dir, command, adaptive_only=args.adaptive_only,
              variants=[VARIANT_NAMES[v] for v in args.variants], progress=not args.quiet))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
