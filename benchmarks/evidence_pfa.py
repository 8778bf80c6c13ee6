"""PFA / PFA+ / WeiAvg evidence run (004): accuracy of every method, ε really spent, PFA+'s uplink saving.

``python benchmarks/evidence_pfa.py [--workers 2] [--quick] [--out reports]`` trains on mnist5k, writes
``reports/evidence/pfa.json`` and renders ``reports/pfa.md`` and its figures from it. The experiment is
:mod:`privaudit.papers.pfa.evidence`; this script only reads its arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from privaudit.papers.pfa.evidence import COMMAND, REPORTS, run_evidence


def main(argv: Sequence[str] | None = None) -> None:
    """Train → write ``reports/evidence/pfa.json`` → render ``reports/pfa.md`` and its figures from it."""
    parser = argparse.ArgumentParser(prog="python benchmarks/evidence_pfa.py", description="PFA evidence runs.")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="logistic regression only, a few rounds (a smoke test)")
    parser.add_argument("--out", type=Path, default=REPORTS, help="reports directory (pfa.md, figures, evidence/pfa.json)")
    args = parser.parse_args(argv)
    command = " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)])
    print(run_evidence(args.out, command, workers=args.workers, quick=args.quick))


if __name__ == "__main__":
    main()
