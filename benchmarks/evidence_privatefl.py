"""PrivateFL evidence run (001): FedAvg vs PrivateFL under LDP, CDP and DDP, both evaluations, realised ε.

``python benchmarks/evidence_privatefl.py [--rounds 30] [--workers 2] [--quick]`` trains, writes
``reports/evidence/privatefl.json`` and renders ``reports/privatefl.md`` and its figure from it (``PRIVAUDIT_REPORTS``
names another reports folder). The experiment is :mod:`privaudit.papers.privatefl.evidence`; this script only reads
its arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from privaudit.papers.privatefl.evidence import COMMAND, run_evidence


def main(argv: Sequence[str] | None = None) -> None:
    """Train → write the result file ``reports/evidence/privatefl.json`` → render ``reports/privatefl.md`` from it."""
    parser = argparse.ArgumentParser(prog="python benchmarks/evidence_privatefl.py", description="PrivateFL evidence runs.")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--ddp-rounds", type=int, default=20)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="3 rounds, ε = 8 only (a smoke test of the pipeline)")
    parser.add_argument("--out", type=Path, help="the page (default reports/privatefl.md); the result file goes to evidence/ beside it")
    args = parser.parse_args(argv)
    reports = Path(os.environ.get("PRIVAUDIT_REPORTS", "reports"))
    out = args.out or reports / "privatefl.md"
    command = " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)])
    page = run_evidence(out, command, rounds=args.rounds, ddp_rounds=args.ddp_rounds, workers=args.workers, quick=args.quick)
    print(page.read_text())


if __name__ == "__main__":
    main()
