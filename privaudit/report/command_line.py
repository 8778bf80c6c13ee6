"""The command line a result records: the program that really ran, with every secret-looking value redacted.

A result's provenance names the process that wrote it. That process is not always privaudit's CLI: a plain PyTorch
or opacus script writes ``training.json`` through the recorder, and inside ``flwr run`` the ServerApp runs in a
process started as ``flwr-serverapp --runtime-api-address … --token … --insecure`` — whose SuperLink token must not
end up in a result file or a report. :func:`current_command` rebuilds the invocation from ``sys.orig_argv``
(the interpreter's own argv, Python ≥ 3.10) and :func:`redact` removes:

* the value of any flag whose name looks secret (token, secret, password, passwd, pwd, key, apikey, auth,
  credential, cookie, session, signature, …), as ``--flag value`` and ``--flag=value``, and ``NAME=value``
  arguments with such a name;
* values that look like credentials wherever they stand: long hexadecimal strings (≥ 32 digits), JWT-shaped
  ``xxx.yyy.zzz`` strings, and long base64-like strings mixing upper case, lower case and digits (≥ 24 chars);
* URL user information (``https://user:pass@host`` → ``https://***@host``) and secret-named query parameters;
* ``python -c`` code (it may hold anything).

A redacted value reads ``***``. Over-redaction of a harmless value is accepted; a leaked secret is not.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

#: What a redacted value reads.
REDACTED = "***"
#: Stand-ins written as they are (never shell-quoted).
_PLACEHOLDERS = frozenset({REDACTED, "<code>"})

_SECRET_WORDS = ("token", "secret", "password", "passwd", "passphrase", "pwd", "apikey", "api_key", "auth",
                 "credential", "cookie", "session", "signature", "private", "bearer", "jwt")
_SECRET_PARTS = {"key", "pass", "pw", "sig"}
_HEX = re.compile(r"[0-9a-fA-F]{32,}")
_JWT = re.compile(r"[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}")
_B64 = re.compile(r"[A-Za-z0-9+_-]{24,}")
_URL_USER = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")
_QUERY = re.compile(r"(?P<name>[?&;][^=&;#\s]+)=(?P<value>[^&;#\s]*)")
_ASSIGNMENT = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)=(?P<value>.*)", re.S)


def secret_name(name: str) -> bool:
    """Does a flag, variable or parameter called ``name`` hold a secret (``--token``, ``API_KEY``, ``auth-file``)?"""
    lowered = name.lower().lstrip("-")
    if any(word in lowered.replace("-", "_") for word in _SECRET_WORDS):
        return True
    parts = [p for p in re.split(r"[-_.]", lowered) if p]
    return any(p in _SECRET_PARTS or p.endswith("key") for p in parts)


def secret_value(value: str) -> bool:
    """Does ``value``, or a piece of it between separators (``/ : , ; @ = ? &``, quotes, spaces), look like a
    credential: ≥ 32 hexadecimal digits, a JWT, or ≥ 24 base64 characters mixing lower case, upper case and digits?"""
    if _JWT.search(value):
        return True
    for piece in re.split(r"[\s:,;'\"/@=?&]+", value):
        if _HEX.fullmatch(piece):
            return True
        if _B64.fullmatch(piece) and all(re.search(p, piece) for p in (r"[a-z]", r"[A-Z]", r"[0-9]")):
            return True
    return False


def _clean(value: str) -> str:
    """A single value with URL user information, secret query parameters and credential-looking parts redacted."""
    value = _URL_USER.sub(lambda m: f"{m['scheme']}{REDACTED}@", value)
    value = _QUERY.sub(lambda m: f"{m['name']}={REDACTED}" if secret_name(m["name"][1:]) else m[0], value)
    if secret_value(value):
        return REDACTED
    return value


def redact(argv: Sequence[str]) -> list[str]:
    """``argv`` with every secret-looking value replaced by :data:`REDACTED` (see the module docstring)."""
    out: list[str] = []
    hide_next = False
    for arg in (str(a) for a in argv):
        if hide_next:
            hide_next = False
            if not arg.startswith("--"):
                out.append(REDACTED)
                continue
        if arg.startswith("-") and not arg.startswith("---") and len(arg) > 1:
            name, eq, value = arg.partition("=")
            if secret_name(name):
                if eq:
                    out.append(f"{name}={REDACTED}")
                else:
                    out.append(name)
                    hide_next = True
                continue
            out.append(f"{name}={_clean(value)}" if eq else arg)
            continue
        assignment = _ASSIGNMENT.fullmatch(arg)
        if assignment and secret_name(assignment["name"]):
            out.append(f"{assignment['name']}={REDACTED}")
            continue
        out.append(_clean(arg))
    return out


def redact_text(command: str) -> str:
    """A command line given as one string, redacted token by token (split as a POSIX shell would)."""
    try:
        tokens = shlex.split(command)
    except ValueError:  # unbalanced quotes: split on white space
        tokens = command.split()
    return " ".join(t if t in _PLACEHOLDERS else shlex.quote(t) for t in redact(tokens))


def _program(orig: Sequence[str]) -> list[str]:
    """The invocation without the interpreter's own path: ``privaudit …``, ``python script.py …``, ``python -m mod …``,
    ``flwr-serverapp …`` (a console script is named by its own name)."""
    if not orig:
        return ["python"]
    interpreter, rest = "python", list(orig[1:])
    options: list[str] = []
    while rest and rest[0].startswith("-") and rest[0] not in ("-m", "-c", "-"):
        options.append(rest.pop(0))  # interpreter options (-u, -X dev, -W …) are kept
        if options[-1] in ("-X", "-W") and rest:
            options.append(rest.pop(0))
    if not rest:
        return [interpreter, *options]
    head = rest[0]
    if head == "-m" and len(rest) > 1:
        module = rest[1]
        package, _, sub = module.partition(".")
        if package == "privaudit" and sub.split(".")[0] in ("", "cli", "__main__"):  # privaudit's CLI
            return ["privaudit", *rest[2:]]
        return [interpreter, *options, "-m", module, *rest[2:]]
    if head == "-c":
        return [interpreter, *options, "-c", "<code>", *rest[2:]]
    script = os.path.basename(head)
    if script == "privaudit" or head.replace(os.sep, "/").endswith("privaudit/__main__.py"):
        return ["privaudit", *rest[1:]]
    if script.endswith(".py") or head == "-":
        return [interpreter, *options, head, *rest[1:]]
    return [script, *rest[1:]]  # a console script (bin/flwr-serverapp, bin/pytest): its own name


#: privaudit CLI invocations running in this process (innermost last): see :func:`privaudit_command`.
_CLI: list[list[str]] = []


@contextmanager
def privaudit_command(args: Sequence[str]) -> Iterator[None]:
    """Within the block privaudit's CLI is the program: results record ``privaudit <args>`` (``privaudit.cli.app.main``
    opens it, so a command run from Python or from another command records what it was given)."""
    _CLI.append(["privaudit", *(str(a) for a in args)])
    try:
        yield
    finally:
        _CLI.pop()


def current_command() -> str:
    """The command that is running: privaudit's CLI with the arguments it was given, or else this process as it was
    started (``sys.orig_argv``), the program named as it ran; secrets redacted."""
    argv = _CLI[-1] if _CLI else _program(list(sys.orig_argv or [sys.executable, *sys.argv]))
    return " ".join(t if t in _PLACEHOLDERS else shlex.quote(t) for t in redact(argv))
