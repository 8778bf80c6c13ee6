"""Output folders that never lose finished work: the one mechanism every command that writes results goes through.

A run writes into the folder the user named (``--out``): a checkpoint round after round, trial journals line after
line, result files and reports at the end. When a write fails there (the disk filled up, the folder was removed or
made read-only while the run went on), the work done so far is not dropped:

1. the failed write leaves no partial file (files are written through a temporary sibling that replaces them;
   a journal append that fails is cut back to where it was);
2. the folder *moves*: a fresh temporary folder is made (``privaudit-<label>-XXXXXXXX`` in the system's temporary
   directory, :func:`tempfile.mkdtemp`), every file already written through the folder in this run is copied there,
   the failed write is made there, and every later write goes there too — so a federation that filled the disk after
   5 of 20 rounds trains on and its checkpoint ends up complete in the temporary folder;
3. the command then says where, naming the file that could not be written (an :class:`OSError` from writing an
   open file names no file, so every write here attaches its path), prints its summary as usual and exits with
   code 2 (:func:`privaudit.cli.common.save_outputs`, :attr:`OutputFolder.relocation`).

If the temporary folder cannot take the work either, :class:`~privaudit.errors.OutputError` names both files.

One command, one folder: a command opens its ``--out`` with :func:`opened`, and any library code that writes under
that path — the checkpoint writer (:class:`privaudit.fl.engine.checkpoint.CheckpointWriter`), the trial journals
(:func:`privaudit.executor.run_trials`), an audit's plan files and result (:mod:`privaudit.audit.runner`), LiRA's
shadow trials — asks :func:`folder_for` and gets a view of the same folder, so everything moves together, once.
Outside such a command :func:`folder_for` gives a folder of its own, which warns (:class:`OutputMovedWarning`) when it
moves. :func:`write_file` is the single low-level writer (tests inject disk-full failures there).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from privaudit.errors import OutputError

T = TypeVar("T")


class OutputMovedWarning(UserWarning):
    """A folder outside a command moved to a temporary folder after a failed write (the message says where)."""


def write_file(path: str | os.PathLike, data: bytes | str, *, append: bool = False) -> Path:
    """Write ``data`` (text is UTF-8) to ``path``, parent folders created; returns the path.

    A whole file goes through a temporary sibling that then replaces ``path`` (a reader never sees half a file, and a
    failed write leaves the old file, or none; the file is not fsynced); ``append`` adds to the end and fsyncs (a
    journal line), and on failure cuts the file back to its old length. Every failure is an :class:`OSError` whose ``filename`` is ``path``.
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            _append(path, payload)
        else:
            _replace(path, payload)
    except OSError as exc:
        if exc.filename is None or Path(exc.filename) != path:
            raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from None
        raise
    return path


def _replace(path: Path, payload: bytes) -> None:
    temporary = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask's permissions, as open() gives
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(payload)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def _append(path: Path, payload: bytes) -> None:
    with path.open("ab") as file:
        start = file.tell()
        try:
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                file.truncate(start)
            raise


@dataclass(frozen=True)
class Relocation:
    """Where a folder's work went: ``failed`` could not be written (``reason``); ``rescue`` holds the work now."""

    target: Path
    failed: Path
    reason: str
    rescue: Path

    def message(self, flag: str = "--out", what: str = "work") -> str:
        """``could not write --out T (F: reason); the finished work was saved to R instead``."""
        return (f"could not write {flag} {self.target} ({self.failed}: {self.reason}); the finished {what} was saved to "
                f"{self.rescue} instead")


class _Root:
    """The state one folder shares with its views: where it is now, and the files written through it."""

    def __init__(self, target: Path, label: str, owned: bool) -> None:
        self.target = target
        self.label = label
        self.owned = owned  # opened by a command, which reports a relocation itself
        self.rescue: Path | None = None
        self.relocation: Relocation | None = None
        self.written: dict[Path, None] = {}  # relative paths, in the order first written
        self.lock = threading.RLock()

    @property
    def current(self) -> Path:
        return self.rescue if self.rescue is not None else self.target

    def relocate(self, failed: Path, exc: OSError) -> None:
        """Move to a fresh temporary folder, with copies of the files written so far; :class:`OutputError` if the
        folder has moved already or the temporary folder fails too."""
        reason = exc.strerror or str(exc) or type(exc).__name__
        if self.rescue is not None:
            raise OutputError(f"could not write {failed} ({reason}) in the temporary folder {self.rescue} that already "
                              f"holds the work of {self.target}") from None
        try:
            rescue = Path(tempfile.mkdtemp(prefix=f"privaudit-{self.label}-"))
        except OSError as second:
            raise OutputError(f"could not write {failed} ({reason}), nor a temporary folder ({second.strerror or second})") from None
        for relative in self.written:
            source = self.target / relative
            try:
                content = source.read_bytes()
            except OSError:
                continue  # removed in the meantime (or the folder itself is gone): nothing to keep
            try:
                write_file(rescue / relative, content)
            except OSError as second:
                raise OutputError(f"could not write {failed} ({reason}), nor a temporary folder ({second.filename}: "
                                  f"{second.strerror or second})") from None
        self.rescue = rescue
        self.relocation = Relocation(self.target, failed, reason, rescue)

    def moved(self) -> None:
        """The failed write was made in the temporary folder: say so where no command will (a folder of its own)."""
        if not self.owned and self.relocation is not None:
            warnings.warn(self.relocation.message(flag="output folder"), OutputMovedWarning, stacklevel=4)


class OutputFolder:
    """A folder a run writes its finished work into, which moves to a temporary folder if a write fails there.

    ``folder.path`` is where the work is now (the target until a write fails); ``folder.relocation`` says why and
    where it moved (``None`` while it has not). Write with :meth:`save` (a file's content), :meth:`save_with` (a
    writer that takes the path), :meth:`append` (a journal line) or :meth:`run` (a writer that fills the folder);
    read what was written with :meth:`file`. :meth:`child` is a view of a sub-folder that moves with its parent.
    """

    def __init__(self, target: str | os.PathLike, label: str, *, _root: _Root | None = None, _prefix: Path = Path()) -> None:
        self._root = _root if _root is not None else _Root(Path(target), label, owned=False)
        self._prefix = _prefix

    @property
    def target(self) -> Path:
        return self._root.target / self._prefix

    @property
    def path(self) -> Path:
        return self._root.current / self._prefix

    @property
    def relocation(self) -> Relocation | None:
        return self._root.relocation

    def child(self, *parts: str) -> OutputFolder:
        return OutputFolder(self._root.target, self._root.label, _root=self._root, _prefix=self._prefix.joinpath(*parts))

    def file(self, relative: str) -> Path:
        """Where the current version of ``relative`` is: the temporary folder's copy once the folder moved, else the
        target's (a journal written before a move, by an earlier run, stays readable)."""
        moved = self.path / relative
        return moved if self._root.rescue is None or moved.exists() else self.target / relative

    def save(self, relative: str, data: bytes | str) -> Path:
        """Write one file (atomically, :func:`write_file`); returns where it was written."""
        return self.save_with(relative, lambda path: write_file(path, data))

    def save_with(self, relative: str, write: Callable[[Path], T]) -> T:
        """``write(path)`` for ``path`` = ``relative`` in the folder; if it fails, the folder moves and it is retried
        there once."""
        key = self._prefix / relative
        with self._root.lock:
            try:
                value = write(self._root.current / key)
            except OSError as exc:
                self._root.relocate(_failed(exc, self._root.current / key), exc)
                value = self._retry(write, self._root.current / key)
                self._root.moved()
            self._root.written.setdefault(key, None)
            return value

    def append(self, relative: str, text: str) -> Path:
        """Append ``text`` to the journal ``relative`` (fsynced); a journal left in the target by an earlier run is
        copied along first once the folder has moved."""
        key = self._prefix / relative
        with self._root.lock:
            path = self._root.current / key
            if self._root.rescue is not None and not path.exists() and (self._root.target / key).exists():
                self._copy_from_target(key)
            try:
                write_file(path, text, append=True)
            except OSError as exc:
                self._root.written.setdefault(key, None)  # the lines written before are part of the work
                self._root.relocate(path, exc)
                path = self._root.current / key
                self._retry(lambda p: write_file(p, text, append=True), path)
                self._root.moved()
            self._root.written.setdefault(key, None)
            return path

    def run(self, write: Callable[[Path], T]) -> T:
        """``write(folder)`` that fills the folder (several files); if it fails, the folder moves and ``write`` runs
        again there, in full."""
        with self._root.lock:
            try:
                return write(self.path)
            except OSError as exc:
                self._root.relocate(_failed(exc, self.path), exc)
                value = self._retry(write, self.path)
                self._root.moved()
                return value

    def _retry(self, write: Callable[[Path], T], path: Path) -> T:
        try:
            return write(path)
        except OSError as second:
            moved = self._root.relocation
            assert moved is not None
            raise OutputError(f"could not write {moved.failed} ({moved.reason}), nor a temporary folder "
                              f"({_failed(second, path)}: {second.strerror or second})") from None

    def _copy_from_target(self, key: Path) -> None:
        try:
            write_file(self._root.current / key, (self._root.target / key).read_bytes())
        except OSError as exc:
            raise OutputError(f"could not copy {self._root.target / key} into the temporary folder "
                              f"{self._root.current} ({exc.strerror or exc})") from None


def _failed(exc: OSError, fallback: Path) -> Path:
    return Path(exc.filename) if isinstance(exc.filename, str | os.PathLike) else fallback


_OPEN: list[OutputFolder] = []


@contextlib.contextmanager
def opened(target: str | os.PathLike, label: str) -> Iterator[OutputFolder]:
    """The command's output folder for the duration of the block: :func:`folder_for` any path under ``target`` returns
    a view of it, so every file the command writes there moves together; the command reports
    :attr:`OutputFolder.relocation` itself (no warning). Inside a folder opened already, a view of that one."""
    enclosing = _registered(Path(target))
    if enclosing is not None:
        yield enclosing
        return
    folder = OutputFolder(target, label, _root=_Root(Path(target), label, owned=True))
    _OPEN.append(folder)
    try:
        yield folder
    finally:
        _OPEN.remove(folder)


def folder_for(path: str | os.PathLike, label: str = "output") -> OutputFolder:
    """The output folder ``path`` is in: a view of a folder a command :func:`opened`, else a folder of its own."""
    path = Path(path)
    return _registered(path) or OutputFolder(path, label)


def _registered(path: Path) -> OutputFolder | None:
    for folder in reversed(_OPEN):
        target = folder.target
        if path == target:
            return folder
        with contextlib.suppress(ValueError):
            return folder.child(*path.relative_to(target).parts)
        with contextlib.suppress(OSError, ValueError):
            return folder.child(*path.resolve().relative_to(target.resolve()).parts)
    return None
