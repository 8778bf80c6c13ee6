"""Which torch device a run uses: ``cpu``, ``cuda``, ``cuda:N`` or ``auto``, resolved once and described in results.

One job: turn the user's ``--device`` text into a :class:`torch.device` that exists on this machine, or fail with
one line (:class:`~privaudit.errors.DeviceUnavailableError`, exit code 2 on the CLI). ``auto`` is ``cuda`` (device 0)
when torch sees a CUDA device, else ``cpu``. :func:`describe_device` is what results and manifests record
(``"cpu (2 cores, x86_64)"``, ``"cuda:0 (NVIDIA H100 80GB HBM3)"``), so every number says where it was computed.

Results are reproducible for a given seed *and* device: the CPU and a GPU run the same float32 operations in a
different order (and cuDNN picks its own kernels), so their models agree up to rounding, not bit for bit.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Iterator
from contextlib import contextmanager

from privaudit.errors import DeviceUnavailableError, InvalidParameterError

DEVICE_CHOICES = "cpu, cuda, cuda:<index> or auto"
#: The device federations train on when their caller names none (``privaudit audit --device`` sets it for its trials;
#: spawned pool workers inherit it). Unset: the CPU.
DEVICE_ENV = "PRIVAUDIT_DEVICE"
_PATTERN = re.compile(r"cpu|auto|cuda(?::(\d+))?")


def resolve_device(spec=None):  # -> torch.device
    """The :class:`torch.device` named by ``spec`` (``None`` means ``cpu``), checked to exist here.

    Raises :class:`InvalidParameterError` for text that names no device and :class:`DeviceUnavailableError` for a
    CUDA device this machine does not have.
    """
    import torch

    if spec is None:
        return torch.device("cpu")
    if isinstance(spec, torch.device):
        text = str(spec)
    elif isinstance(spec, str):
        text = spec.strip().lower()
    else:
        raise InvalidParameterError(f"device must be one of {DEVICE_CHOICES}, got {spec!r}")
    match = _PATTERN.fullmatch(text)
    if match is None:
        raise InvalidParameterError(f"unknown device {spec!r}; use {DEVICE_CHOICES}")
    if text == "cpu":
        return torch.device("cpu")
    available = torch.cuda.is_available()
    if text == "auto":
        return torch.device("cuda", 0) if available else torch.device("cpu")
    if not available:
        raise DeviceUnavailableError(f"device {text!r}: CUDA is not available here (torch {torch.__version__}); "
                                     "use --device cpu or auto")
    index = int(match.group(1) or 0)
    count = torch.cuda.device_count()
    if index >= count:
        raise DeviceUnavailableError(f"device {text!r}: only {count} CUDA device(s) visible (cuda:0..cuda:{count - 1})")
    return torch.device("cuda", index)


def default_device() -> str | None:
    """The device named by :data:`DEVICE_ENV`, or ``None`` (the CPU) when it is unset or empty."""
    return os.environ.get(DEVICE_ENV, "").strip() or None


@contextmanager
def training_device(spec) -> Iterator[str]:
    """Within the block, federations whose caller names no device train on ``spec`` (resolved first: an absent
    device fails here). Process-pool workers started inside the block inherit it."""
    name = str(resolve_device(spec))
    previous = os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = name
    try:
        yield name
    finally:
        if previous is None:
            os.environ.pop(DEVICE_ENV, None)
        else:
            os.environ[DEVICE_ENV] = previous


def cpu_cores() -> int:
    """The cores this process may run on (the affinity mask where the OS has one, else ``os.cpu_count()``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def describe_device(device) -> str:
    """One line naming ``device`` for results: ``"cpu (2 cores, x86_64)"`` or ``"cuda:0 (<GPU name>)"``."""
    import torch

    device = resolve_device(device) if not isinstance(device, torch.device) else device
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return f"cuda:{index} ({torch.cuda.get_device_name(index)})"
    return f"cpu ({cpu_cores()} cores, {platform.machine() or 'unknown architecture'})"


def device_record(device) -> dict[str, str]:
    """``{"device": "cpu", "device_name": "cpu (2 cores, x86_64)"}``: what every result and manifest stores."""
    import torch

    device = resolve_device(device) if not isinstance(device, torch.device) else device
    name = str(device) if device.type != "cuda" or device.index is not None else "cuda:0"
    return {"device": name, "device_name": describe_device(device)}
