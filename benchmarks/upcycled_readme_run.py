"""The Upcycled-FL README's private FedAvg run, re-run with privaudit as the reference code runs it.

``python benchmarks/upcycled_readme_run.py --seeds 0 1 2 --data-seeds 0 1`` trains a grid of training and data seeds
and prints one line per run (test and training accuracy, each the mean of the last 10 rounds, and Σ p_i²). Variants:
``--noise-rng seeded``, ``--real-clock``, ``--no-double-softmax``, ``--no-privacy``, ``--reference-sizes`` and
``--reference-data CHECKOUT`` (the reference repository's own ``synthetic_iid`` files). The run is
:mod:`privaudit.papers.upcycled.readme_run`; this script only reads its arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from privaudit.errors import PrivauditError
from privaudit.papers.upcycled.readme_run import run_readme
from privaudit.papers.upcycled.reference_data import load_reference_synthetic


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python benchmarks/upcycled_readme_run.py", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--data-seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--rounds", type=int, default=80)
    parser.add_argument("--no-double-softmax", action="store_true", help="train on the logits (privaudit's default loss)")
    parser.add_argument("--noise-rng", default="clock-ms", choices=("clock-ms", "seeded"))
    parser.add_argument("--real-clock", action="store_true", help="clock-ms from time.time at each release (not reproducible)")
    parser.add_argument("--no-privacy", action="store_true", help="the same run without output perturbation")
    parser.add_argument("--reference-sizes", action="store_true", help="data with the reference files' client sizes")
    parser.add_argument("--reference-data", metavar="CHECKOUT", default=None,
                        help="train on the synthetic_iid files of this checkout of osu-srml/Upcycled-FL (4dd7400)")
    args = parser.parse_args(argv)
    if args.reference_data is not None and args.reference_sizes:
        parser.error("--reference-data and --reference-sizes choose different data; give one")
    if args.reference_data is not None:
        try:  # a wrong checkout is one line and exit code 2, before any training
            load_reference_synthetic(args.reference_data, "synthetic_iid")
        except PrivauditError as error:
            parser.exit(2, f"error: {error}\n")
    import torch  # after the argument checks: a wrong command line answers without loading torch

    torch.set_num_threads(1)
    print(f"{'data seed':>9} {'seed':>4} {'Σp²':>6} {'test acc (last 10)':>18} {'train acc (last 10)':>19} {'s':>6}")
    for data_seed in args.data_seeds:
        for seed in args.seeds:
            run = run_readme(seed, data_seed, rounds=args.rounds, double_softmax=not args.no_double_softmax, noise_rng=args.noise_rng,
                             real_clock=args.real_clock, private=not args.no_privacy, reference_sizes=args.reference_sizes,
                             reference_data=args.reference_data)
            print(f"{run.data_seed:>9} {run.seed:>4} {run.noise_weight:>6.4f} {run.test_accuracy:>18.4f} {run.train_accuracy:>19.4f} "
                  f"{run.seconds:>6.1f}", flush=True)


if __name__ == "__main__":
    main()
