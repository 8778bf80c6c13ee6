"""Heterogeneous compositions from a JSON file (``privaudit compute-epsilon --schedule FILE``).

Format (one object)::

    {
      "neighbouring": "add_remove",                       # optional; or "replace_one" (or "add-remove", …)
      "entries": [
        {"mechanism": {"type": "subsampled_gaussian", "noise_multiplier": 1.0, "sample_rate": 0.01}, "count": 500},
        {"mechanism": {"type": "subsampled_gaussian", "noise_multiplier": 2.0, "sample_rate": 0.02}, "count": 500},
        {"mechanism": {"type": "gaussian", "noise_multiplier": 8.0}, "count": 50}
      ]
    }

``count`` may also be written ``steps``; an entry may be a ``[mechanism, count]`` pair; a bare list of entries
is accepted too. Mechanism types: ``gaussian`` (noise_multiplier, sensitivity), ``subsampled_gaussian``
(noise_multiplier, sample_rate, sampling = poisson | fixed_size_without_replacement, or fixed-size), ``laplace`` (scale,
sensitivity), ``pure_dp`` (epsilon, proven_for).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from privaudit.accounting.mechanisms import Composition, Neighbouring, mechanism_from_dict
from privaudit.errors import InvalidParameterError


def composition_from_json(data: Any) -> Composition:
    """Parse the schedule format above; every problem is one :class:`InvalidParameterError`."""
    if isinstance(data, list):
        data = {"entries": data}
    if not isinstance(data, dict) or "entries" not in data:
        raise InvalidParameterError("a schedule must be an object with an 'entries' list (or a bare list of entries)")
    entries = data["entries"]
    if not isinstance(entries, list) or not entries:
        raise InvalidParameterError("a schedule's 'entries' must be a non-empty list")
    parsed = []
    for i, entry in enumerate(entries):
        if isinstance(entry, list | tuple) and len(entry) == 2:
            mech, count = entry
        elif isinstance(entry, dict) and "mechanism" in entry:
            mech = entry["mechanism"]
            count = entry.get("count", entry.get("steps"))
        else:
            raise InvalidParameterError(f"schedule entry {i} must be {{'mechanism': ..., 'count': n}} or [mechanism, n]")
        if count is None:
            raise InvalidParameterError(f"schedule entry {i} lacks a 'count'")
        if isinstance(count, bool) or not isinstance(count, int | float) or float(count) != int(count) or count < 1:
            raise InvalidParameterError(f"schedule entry {i}: count must be a positive integer, got {count!r}")
        try:
            parsed.append((mechanism_from_dict(mech), int(count)))
        except InvalidParameterError as exc:
            raise InvalidParameterError(f"schedule entry {i}: {exc}") from None
    return Composition(parsed, data.get("neighbouring", Neighbouring.ADD_REMOVE))


def load_schedule(path: str | Path) -> Composition:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidParameterError(f"cannot read schedule file {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise InvalidParameterError(f"schedule file {path} is not UTF-8 text (byte {exc.start}); give a JSON file") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidParameterError(f"schedule file {path} is not valid JSON: {exc.msg} (line {exc.lineno})") from None
    return composition_from_json(data)
