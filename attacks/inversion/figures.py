"""Image grids for reports: ground truth in the first row, one row per defence/attack below it.

Uses matplotlib's Agg backend (no display needed). Each cell shows one [0, 1] image; the title of a
reconstruction cell gives its PSNR when scores are passed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from privaudit.errors import InvalidParameterError

from ..metrics import to_hwc


def save_image_grid(
    path: str | Path,
    rows: Sequence[tuple[str, Any]],
    *,
    psnr: Sequence[Sequence[float] | None] | None = None,
    title: str | None = None,
    cell_inches: float = 1.2,
) -> Path:
    """Write a PNG grid; ``rows`` = [(row label, images (N, C, H, W) or (N, H, W) in [0, 1]), ...].

    Every row must hold the same number of images (the ground truth's order: match reconstructions
    with :func:`attacks.metrics.match_order` first). ``psnr[r][i]`` annotates cell i of row r.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not rows:
        raise InvalidParameterError("an image grid needs at least one row")
    arrays = [np.clip(to_hwc(images), 0.0, 1.0) for _, images in rows]
    columns = arrays[0].shape[0]
    if any(a.shape[0] != columns for a in arrays):
        raise InvalidParameterError("every row of an image grid must hold the same number of images")
    if psnr is not None and len(psnr) != len(rows):
        raise InvalidParameterError("give one PSNR list (or None) per row")
    label_inches = 0.09 * max(len(line) for label, _ in rows for line in str(label).split("\n")) + 0.3
    fig, axes = plt.subplots(
        len(rows), columns, figsize=(cell_inches * columns + label_inches, cell_inches * len(rows) + 0.5), squeeze=False
    )
    for r, ((label, _), array) in enumerate(zip(rows, arrays, strict=True)):
        for c in range(columns):
            ax = axes[r][c]
            image = array[c]
            ax.imshow(image[..., 0] if image.shape[-1] == 1 else image, cmap="gray" if image.shape[-1] == 1 else None,
                      vmin=0.0, vmax=1.0, interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if psnr is not None and psnr[r] is not None:
                value = psnr[r][c]  # type: ignore[index]
                ax.set_title("∞ dB" if math.isinf(value) else f"{value:.1f} dB", fontsize=7)
            if c == 0:
                ax.set_ylabel(label, fontsize=8, rotation=0, ha="right", va="center")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
