"""Reading source declarations from YAML: a component's ``defs.yaml`` or a plain mapping.

A bad declaration is a ``DeclarationError`` that names the file, the field and what is
allowed, e.g. ``defs/orders/defs.yaml: columns[2].type: 'money' is not a column type;
allowed: int64, int32, ...``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from idem_assets.sources.declaration import LandingSource, kind_of
from idem_assets.sources.rules import RULE_KINDS

COMPONENT_TYPE = "idem_assets.lib.LandingSourceComponent"


class DeclarationError(ValueError):
    """A source declaration that cannot be used; the message names where and why."""


def field_path(loc: Sequence[int | str]) -> str:
    """``columns[2].type`` from pydantic's ``("columns", 2, "type")``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _model_at(model: type[BaseModel], loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The declaration model a location points into (for listing its allowed fields)."""
    current: type[BaseModel] | None = model
    for part in loc:
        if current is None or isinstance(part, int):
            continue
        if part in RULE_KINDS:  # the tag of a rule's kind: its model
            current = RULE_KINDS[part]
            continue
        field = current.model_fields.get(part) or next(
            (f for f in current.model_fields.values() if f.alias == part), None
        )
        if field is None:
            return current
        current = _inner_model(field.annotation)
    return current


def _inner_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def explain(error: ValidationError, model: type[BaseModel]) -> list[str]:
    """One line per problem of a ``model`` declaration: field path, what is wrong and what
    is allowed (a field of the other kind of source says why this kind has none)."""
    lines = []
    for item in error.errors():
        loc = tuple(item["loc"])
        message = str(item["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
        owner = _model_at(model, loc[:-1])
        why = getattr(owner, "WHY", {}).get(loc[-1]) if loc else None
        if item["type"] == "extra_forbidden":
            known = (
                sorted(f.alias or name for name, f in owner.model_fields.items()) if owner else []
            )
            message = why or f"unknown field; allowed: {', '.join(known)}"
        elif item["type"] == "missing":
            message = why or "required field is missing"
        shown = [part for part in loc if part not in RULE_KINDS]
        lines.append(f"{field_path(shown)}: {message}")
    return lines


def declaration_from_mapping(attributes: Mapping[str, Any], where: str) -> LandingSource:
    """Validate a declaration's attributes; errors name ``where`` and each field."""
    try:
        return LandingSource.model_validate(dict(attributes))
    except ValidationError as exc:
        problems = "\n  ".join(explain(exc, kind_of(dict(attributes))))
        raise DeclarationError(f"{where}: invalid source declaration:\n  {problems}") from None


def load_source(path: str | Path) -> LandingSource:
    """The declaration in a YAML file: a component ``defs.yaml`` or the attributes alone."""
    path = Path(path)
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise DeclarationError(f"{path}: cannot read the declaration: {exc}") from exc
    if not isinstance(document, Mapping):
        raise DeclarationError(f"{path}: a declaration is a YAML mapping")
    if "type" in document:
        if document["type"] != COMPONENT_TYPE:
            raise DeclarationError(
                f"{path}: type is {document['type']!r}; a source declaration has type "
                f"{COMPONENT_TYPE}"
            )
        attributes = document.get("attributes")
        if not isinstance(attributes, Mapping):
            raise DeclarationError(f"{path}: attributes: the declaration goes under attributes")
        document = attributes
    return declaration_from_mapping(document, str(path))
