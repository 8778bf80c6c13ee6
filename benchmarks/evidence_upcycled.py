"""Upcycled-FL evidence runs: Table 1's shape (``table1``) and private FedProx vs private Upcycled-FedProx (``private``).

``python benchmarks/evidence_upcycled.py table1 [--workers 2]`` trains, writes ``reports/evidence/upcycled-table1.json``
and renders ``reports/upcycled-table1.md`` from it; ``python benchmarks/evidence_upcycled.py private`` likewise
``reports/evidence/upcycled-private.json`` → ``reports/upcycled-private.md`` and its figure (``PRIVAUDIT_REPORTS``
names another reports folder). The experiments are :mod:`privaudit.papers.upcycled.experiments`; this script only
reads its arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from privaudit.papers.upcycled.experiments import (
    BASE_ALGORITHMS,
    TABLE1_DATASETS,
    experiment_data,
    write_evidence,
)


def main(argv: Sequence[str] | None = None) -> None:
    """Train → write the result file under ``reports/evidence/`` → render the page with :mod:`privaudit.report`."""
    parser = argparse.ArgumentParser(prog="python benchmarks/evidence_upcycled.py", description="Upcycled-FL evidence runs.")
    parser.add_argument("experiment", choices=("table1", "private"))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--datasets", nargs="+", default=list(TABLE1_DATASETS))
    parser.add_argument("--algorithms", nargs="+", default=list(BASE_ALGORITHMS))
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--delta", type=float, default=1e-3)
    parser.add_argument("--out", type=Path, help="the page (default reports/<kind>.md); the result file goes to evidence/ beside it")
    args = parser.parse_args(argv)
    reports = Path(os.environ.get("PRIVAUDIT_REPORTS", "reports"))
    data = experiment_data(args.experiment, seeds=args.seeds, rounds=args.rounds, datasets=args.datasets,
                           algorithms=args.algorithms, workers=args.workers, delta=args.delta)
    kind = f"upcycled-{args.experiment}"
    page = write_evidence(kind, data, sys.argv[1:] if argv is None else list(argv), reports, args.out)
    print(page.read_text())


if __name__ == "__main__":
    main()
