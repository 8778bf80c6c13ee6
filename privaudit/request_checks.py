"""Checks every command's request makes before any work starts: output folders and worker counts.

A request (``privaudit.*.request`` modules, one per command) runs them when it is made, so that a typo in ``--out`` or
an impossible worker count never costs a finished run. Nothing is created here: an existing folder is probed with a
temporary file that is deleted at once. Each failure is one :class:`~privaudit.errors.InvalidParameterError` naming the
flag. No numpy, no torch: every layer may use these.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from privaudit.device import cpu_cores
from privaudit.errors import InvalidParameterError


def check_out_folder(folder: Path, files: tuple[str, ...] = (), *, flag: str = "--out") -> Path:
    """Fail now, with one line, when ``folder`` cannot receive ``files``; returns ``folder``.

    An existing folder is probed with a temporary file (deleted at once); a folder still to be made needs its nearest
    existing ancestor to be a writable directory. Each of ``files`` that already exists must be a file, not a folder.
    """
    folder = Path(folder)
    if folder.exists():
        if not folder.is_dir():
            raise InvalidParameterError(f"{flag} {folder} is a file, not a folder")
        try:
            with tempfile.TemporaryFile(dir=folder, prefix=".privaudit-write-check-"):
                pass
        except OSError as exc:
            raise InvalidParameterError(f"{flag} {folder} is not writable ({exc.strerror or exc})") from None
        for name in files:
            if (folder / name).is_dir():
                raise InvalidParameterError(f"{flag} {folder}: {folder / name} is a folder, so the {name} file cannot be written")
        return folder
    ancestor = folder.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InvalidParameterError(f"{flag} {folder} cannot be created: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise InvalidParameterError(f"{flag} {folder} cannot be created: {ancestor} is not writable")
    return folder


def check_writable(target: Path) -> None:
    """One clear error now, rather than a traceback after the work, when the file ``target`` cannot be written.

    Unlike :func:`check_out_folder` this creates the folder (an audit writes its trials there as it goes).
    """
    folder = target.parent
    if folder.exists() and not folder.is_dir():
        raise InvalidParameterError(f"--out {folder} is a file, not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".privaudit-write-check"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise InvalidParameterError(f"--out {folder} is not writable ({exc.strerror or exc})") from None


def check_workers(workers: int | None, clients: int | None = None, *, local: bool = True, flag: str = "--workers") -> None:
    """Refuse, in one line, a worker count below 1 or, for ``local`` processes, above this machine's CPU cores
    (``None``: the command's default; a Ray cluster, ``local=False``, may have more cores than this machine).

    More processes than cores (or, given ``clients``, than clients to train) help nothing: each worker is a spawned
    Python process that imports torch, so ``train --workers 1000`` on 4 clients only starts processes that wait.
    """
    if workers is None:
        return
    if workers < 1:
        raise InvalidParameterError(f"{flag} must be at least 1, got {workers}")
    cores = cpu_cores()
    if local and workers > cores:
        raise InvalidParameterError(f"{flag} {workers} is more than this machine's {cores} CPU cores: extra worker processes only "
                                    f"wait for a core; use --workers {cores} or fewer")
    if clients is not None and workers > clients > 0:
        raise InvalidParameterError(f"{flag} {workers} is more than the federation's {clients} clients: at most one worker per "
                                    f"client trains; use --workers {clients} or fewer")


def check_threads(threads: int, flag: str = "--threads") -> int:
    """torch intra-op threads: at least 1."""
    if threads < 1:
        raise InvalidParameterError(f"{flag} must be at least 1, got {threads}")
    return threads
