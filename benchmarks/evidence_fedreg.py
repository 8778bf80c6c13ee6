"""FedReg evidence run (Xu et al., ICLR 2022): convergence R_a (Table 1) and accuracy vs DP-SGD (Table 4 analogue).

``python benchmarks/evidence_fedreg.py [--rounds 40] [--inversion PATH] [--claims-audit PATH]`` trains (seeded, CPU,
one torch thread by default), writes ``reports/evidence/fedreg.json`` and renders ``reports/fedreg.md`` and its
figures from it. The experiment is :mod:`privaudit.papers.fedreg.evidence`; this script only reads its arguments.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from privaudit.papers.fedreg.evidence import COMMAND, EvidenceConfig, run_evidence, write_evidence


def main(argv: Sequence[str] | None = None) -> int:
    """Train → write ``reports/evidence/fedreg.json`` → render ``reports/fedreg.md`` and its figures from it."""
    parser = argparse.ArgumentParser(prog="python benchmarks/evidence_fedreg.py", description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=EvidenceConfig.rounds)
    parser.add_argument("--local-epochs", type=int, default=EvidenceConfig.local_epochs)
    parser.add_argument("--num-clients", type=int, default=EvidenceConfig.num_clients)
    parser.add_argument("--seed", type=int, default=EvidenceConfig.seed)
    parser.add_argument("--out-dir", default=EvidenceConfig.out_dir)
    parser.add_argument("--threads", type=int, default=EvidenceConfig.threads)
    parser.add_argument("--inversion", type=Path, default=None,
                        help="the inversion evidence result joined for Table 4 (default OUT_DIR/evidence/inversion.json)")
    parser.add_argument("--claims-audit", type=Path, default=None,
                        help="the claims audit's merged results.json (default OUT_DIR/claims-audit/results.json)")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    cfg = EvidenceConfig(rounds=args.rounds, local_epochs=args.local_epochs, num_clients=args.num_clients, seed=args.seed,
                         out_dir=args.out_dir, threads=args.threads)
    evidence = run_evidence(cfg, progress=not args.quiet)
    command = " ".join([COMMAND, *(sys.argv[1:] if argv is None else argv)])
    page = write_evidence(evidence, cfg, inversion=args.inversion, claims_audit=args.claims_audit, command=command)
    print(f"wrote {Path(cfg.out_dir) / 'evidence' / 'fedreg.json'} and {page} in {evidence['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
