"""JSON Schemas (draft 2020-12) of the files privaudit writes, shipped with the package so other tools can read and
write them.

=========================================  ==========================================  ==============================
file                                       documents                                   ``$id``
=========================================  ==========================================  ==============================
``federation-manifest.schema.json``        a checkpoint's ``manifest.json``            ``urn:privaudit:schema:federation-manifest:1``
                                           (``privaudit.federation/1``)
``ledger.schema.json``                     a privacy ledger (``privaudit.ledger/1``),  ``urn:privaudit:schema:ledger:1``
                                           also the manifest's ``ledger``
``result.schema.json``                     every result file (``privaudit.result/1``)  ``urn:privaudit:schema:result:1``
                                           and each kind's required ``data`` keys
``report-results.schema.json``             a report's merged ``results.json``          ``urn:privaudit:schema:report-results:1``
                                           (``privaudit.report/1``)
``scores-audit.schema.json``               ``audit --scores --out DIR``'s              ``urn:privaudit:schema:scores-audit:1``
                                           ``scores-audit.json``
``check.schema.json``                      ``privaudit check --json`` and a ``check``  ``urn:privaudit:schema:check:1``
                                           result's data (``privaudit.check/1``)
=========================================  ==========================================  ==============================

Schemas refer to each other by ``$id``. :func:`validate` (needs the ``jsonschema`` package, in the ``dev`` extra)
checks a document against the schema its ``"schema"`` field names, or the one given; :func:`load_schema` reads a
schema without any dependency.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from privaudit.errors import InvalidParameterError

__all__ = ["SCHEMAS", "load_schema", "schema_name_for", "validate"]

#: Schema name (file stem) → the ``"schema"`` value of the documents it describes (``None``: the document has none).
SCHEMAS: dict[str, str | None] = {
    "federation-manifest": "privaudit.federation/1",
    "ledger": "privaudit.ledger/1",
    "result": "privaudit.result/1",
    "report-results": "privaudit.report/1",
    "scores-audit": None,
    "check": "privaudit.check/1",
}


@cache
def _text(name: str) -> str:
    if name not in SCHEMAS:
        raise InvalidParameterError(f"unknown schema {name!r}; choose one of: {', '.join(SCHEMAS)}")
    return resources.files(__name__).joinpath(f"{name}.schema.json").read_text(encoding="utf-8")


def load_schema(name: str) -> dict[str, Any]:
    """The JSON Schema ``name`` (a key of :data:`SCHEMAS`) as a dict (a fresh copy)."""
    return json.loads(_text(name))


def schema_name_for(document: Any) -> str:
    """The schema a document declares through its ``"schema"`` field."""
    declared = document.get("schema") if isinstance(document, dict) else None
    for name, value in SCHEMAS.items():
        if value is not None and value == declared:
            return name
    raise InvalidParameterError(f"the document declares no known schema ({declared!r}); name the schema to check it against")


def _validator(name: str):
    try:
        from jsonschema import Draft202012Validator
        from referencing import Registry, Resource
    except ImportError:
        raise InvalidParameterError("validating needs the jsonschema package: pip install 'privaudit[dev]' (or jsonschema)") from None
    schemas = {key: load_schema(key) for key in SCHEMAS}
    registry = Registry().with_resources((doc["$id"], Resource.from_contents(doc)) for doc in schemas.values())
    return Draft202012Validator(schemas[name], registry=registry)


def validate(document: Any, name: str | None = None) -> None:
    """Check ``document`` against schema ``name`` (default: the one its ``"schema"`` field names); the first problem
    is one :class:`~privaudit.errors.InvalidParameterError` line naming where it is."""
    name = name or schema_name_for(document)
    validator = _validator(name)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(top level)"
        raise InvalidParameterError(f"not a valid {name} document at {where}: {first.message}"
                                    + (f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""))
