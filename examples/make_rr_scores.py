"""Write the scores of randomized response on fair-coin canaries, for ``privaudit audit --scores``.

Randomized response at ε (Warner 1965; ε-DP by Dwork & Roth 2014, §3.2): each of m canaries is included with
probability ½ (an independent fair coin, the ``bernoulli`` design), and the mechanism reports the canary's membership
bit truthfully with probability e^ε/(1 + e^ε), flipped otherwise. The reported bit is the attack's score (larger =
"member"), so the file is ``{"in": [bits of the included canaries], "out": [bits of the others]}``. Every score is 0
or 1: the one-run routes then rank a score group's canaries in random order
(:mod:`privaudit.stats.guess_selection`). The README's "Bring your own scores" example::

    python examples/make_rr_scores.py --epsilon 1 --canaries 4000 --seed 0 --out rr.json
    privaudit audit --scores rr.json --design bernoulli --delta 0 --claimed-epsilon 0.5

Seeded (``--seed``): the same command always writes the same file.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np


def randomized_response_scores(epsilon: float, canaries: int, seed: int) -> dict[str, list[int]]:
    """One run of ε-randomized response on ``canaries`` fair-coin canaries: the reported bits, split by membership."""
    rng = np.random.default_rng(seed)
    member = rng.random(canaries) < 0.5
    truthful = rng.random(canaries) < math.exp(epsilon) / (1.0 + math.exp(epsilon))
    reported = np.where(truthful, member, ~member).astype(int)
    return {"in": reported[member].tolist(), "out": reported[~member].tolist()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epsilon", type=float, default=1.0, help="ε of randomized response (default 1)")
    parser.add_argument("--canaries", type=int, default=4000, help="number of fair-coin canaries m (default 4000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the coins and of the responses (default 0)")
    parser.add_argument("--out", type=Path, required=True, help="JSON file to write")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.epsilon) and args.epsilon >= 0):
        parser.error(f"--epsilon must be a finite number ≥ 0, got {args.epsilon}")
    if args.canaries < 2:
        parser.error(f"--canaries must be at least 2, got {args.canaries}")
    if args.seed < 0:
        parser.error(f"--seed must be ≥ 0, got {args.seed}")
    scores = randomized_response_scores(args.epsilon, args.canaries, args.seed)
    if not scores["in"] or not scores["out"]:
        parser.error("every canary fell on one side; use more canaries or another seed")
    try:
        args.out.write_text(json.dumps(scores) + "\n", encoding="utf-8")
    except OSError as exc:
        parser.error(f"cannot write {args.out} ({exc.strerror or exc})")
    print(f"wrote {args.out}: {len(scores['in'])} in, {len(scores['out'])} out (randomized response at ε = {args.epsilon:g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
