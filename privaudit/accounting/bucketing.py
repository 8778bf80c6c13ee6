"""Bucketing of many distinct subsampled Gaussians into few, each at its least private member.

When a composition holds thousands of distinct (σ, q) steps (per-step noise schedules, per-client ledgers), the
accountants group near-equal ones on a geometric grid and account each group at its largest s = Δ/σ (least noise)
and largest q. Sound for every dominating pair of :mod:`privaudit.accounting.pairs`: adding noise is post-processing
(x ↦ r·x + √(1 − r²)·Z maps N(0, 1), N(±s, 1) to N(0, 1), N(±r·s, 1)), and a lower sampling rate is a mixture of the
pair with the identical pair (N(0, 1), N(0, 1)), so by joint convexity of the hockey-stick divergence (for the
symmetric pairs α ≥ 1 suffices) and quasi-convexity of the Rényi divergence (Mironov 2017, "Rényi differential
privacy", Prop. 1 and its data-processing inequality) both the privacy profile and the RDP curve only grow.
"""

from __future__ import annotations

import math

import numpy as np

#: Relative bucket widths tried in turn until the buckets fit the limit (the last one is used regardless).
BUCKET_RATIOS = (1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2)


def bucket(sampled: list[tuple[float, float, int]], limit: int) -> tuple[list[tuple[float, float, int]], str]:
    """Group (s, q, count) into at most ``limit`` buckets on a geometric grid; each bucket takes its largest
    s = Δ/σ (least noise) and largest q (sound: both are monotone, see the module docstring)."""
    arr = np.array(sampled, dtype=float)
    log_s, log_q = np.log(arr[:, 0]), np.log(arr[:, 1])
    for ratio in BUCKET_RATIOS:
        width = math.log1p(ratio)
        keys = np.stack([np.floor(log_s / width), np.floor(log_q / width)], axis=1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        if uniq.shape[0] <= limit or ratio == BUCKET_RATIOS[-1]:
            break
    inverse = inverse.ravel()
    n = uniq.shape[0]
    s_max = np.full(n, -np.inf)
    q_max = np.full(n, -np.inf)
    np.maximum.at(s_max, inverse, arr[:, 0])
    np.maximum.at(q_max, inverse, arr[:, 1])
    counts = np.bincount(inverse, weights=arr[:, 2], minlength=n)
    out = [(float(a), float(b), int(c)) for a, b, c in zip(s_max, q_max, counts, strict=True)]
    note = (f"{len(sampled)} distinct subsampled Gaussians grouped into {n} buckets of relative width {ratio:g} in σ and q, "
            "each accounted at its least noisy, most sampled member (an upper bound)")
    return out, note
