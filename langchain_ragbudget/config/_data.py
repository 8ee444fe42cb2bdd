"""A configuration as plain data (nested mappings, as YAML gives them), by key path.

Merging before validation, the key paths errors name, and the values they show.
"""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from langchain_ragbudget.config._suggest import did_you_mean
from langchain_ragbudget.errors import ConfigError

DEFAULT_CONFIG_NAME = "config_default.yml"
"""The shipped defaults' file name."""


class KeyPathError(ValueError):
    """A validator's refusal of one value below the field it validates.

    Pydantic blames the validated field; this carries the rest of the key path,
    so the error names the key the user wrote.
    """

    def __init__(self, parts: list[str], problem: str) -> None:
        super().__init__(f"{dotted(parts)}: {problem}")
        self.parts = parts
        self.problem = problem


class Shown:
    """A value as an error shows it: its repr, cut to a readable length."""

    LIMIT = 200

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text

    @classmethod
    def of(cls, value: Any) -> Any:
        """`value` itself, or a stand-in with a shortened repr if it is long."""
        text = repr(value)
        if len(text) <= cls.LIMIT:
            return value
        return cls(f"{text[: cls.LIMIT]}... ({len(text)} characters)")


def surface_name_problem(name: str) -> str | None:
    """Why `name` cannot name a surface (people type and read it), or None."""
    if not name:
        return "a surface name must not be empty"
    if name != name.strip():
        return (
            "a surface name must not start or end with blanks (YAML keeps "
            "them, so this would be a surface of its own)"
        )
    if not name.isprintable():
        return (
            "a surface name must be printable (no control, zero-width or "
            "format characters)"
        )
    return None


def check_surface_names(data: dict[str, Any], file: str) -> None:
    """Refuse a surface whose name `surface_name_problem` rejects, naming it."""
    surfaces = data.get("surfaces")
    for name in surfaces if isinstance(surfaces, dict) else ():
        problem = surface_name_problem(name) if isinstance(name, str) else None
        if problem is not None:
            raise ConfigError(file, f"surfaces.{name!r}", Shown.of(name), problem)


def check_prompt_room(max_prompt: int | None, reserve_output_tokens: int) -> None:
    """Refuse an answer reservation that leaves no room for the prompt.

    Here, not in the budget, so reading a configuration loads no langchain_core.

    Raises:
        ValueError: `reserve_output_tokens` is at least `max_prompt_tokens`.
    """
    if max_prompt is not None and reserve_output_tokens >= max_prompt:
        raise ValueError(
            f"reserve_output_tokens ({reserve_output_tokens}) leaves no room in "
            f"max_prompt_tokens ({max_prompt})"
        )


def unknown_surface(file: str, name: str, known: Iterable[str]) -> ConfigError:
    """The error for a surface no file defines, never blaming the shipped file."""
    names = sorted(known)
    problem = f"unknown surface; known: {', '.join(names)}{did_you_mean(name, names)}"
    if file != DEFAULT_CONFIG_NAME:
        return ConfigError(
            file,
            f"surfaces.{name}",
            name,
            f"not in this file nor the defaults: {problem}",
        )
    error = ConfigError(file, f"surfaces.{name}", name, problem)
    error.args = (
        f"surface {name!r} is not defined anywhere (no configuration file given; "
        f"define surfaces.{name} in a --config file): {problem}",
    )
    return error


def dotted(path: list[str]) -> str:
    """A key path as the file spells it, `surfaces.chat.max_tokens`."""
    return ".".join(path) or "<root>"


def validation_error(
    data: dict[str, Any],
    file: str,
    exc: ValidationError,
    model: type[BaseModel] | None = None,
) -> ConfigError:
    """The first key pydantic refused in `data`, as one error blaming `file`.

    With `model`, an unknown key gets the closest known key as a suggestion.
    """
    errors = exc.errors()
    first = errors[0]
    parts = key_parts(data, first["loc"], first["type"])
    # A union (`str | list[str] | None`) reports one error per member: merge them.
    problems = [
        _problem(error)
        for error in errors
        if key_parts(data, error["loc"], error["type"]) == parts
    ]
    problem = "; ".join(dict.fromkeys(problems))
    below = (first.get("ctx") or {}).get("error")
    if isinstance(below, KeyPathError):
        parts, problem = [*parts, *below.parts], below.problem
    elif first["type"] == "extra_forbidden" and model is not None and parts:
        problem += did_you_mean(parts[-1], known_keys(model, parts[:-1]))
    return ConfigError(file, dotted(parts), Shown.of(_lookup(data, parts)), problem)


def known_keys(model: type[BaseModel], parts: list[str]) -> list[str]:
    """The keys the section at `parts` accepts (its model's fields), or []."""
    current: Any = model
    for part in parts:
        current = _section_model(current, part)
        if current is None:
            return []
    return list(current.model_fields)


def _section_model(model: Any, part: str) -> Any:
    if isinstance(model, tuple):  # a mapping of models: any key gives its value
        return model[0]
    field = model.model_fields.get(part)
    return None if field is None else _as_model(field.annotation)


def _as_model(annotation: Any) -> Any:
    """A model class from an annotation, a mapping of models as `(model,)`, or None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) is dict and len(args) == 2:
        inner = _as_model(args[1])
        return None if inner is None or isinstance(inner, tuple) else (inner,)
    models = [m for m in (_as_model(a) for a in args) if m is not None]
    return models[0] if len(models) == 1 else None


def _problem(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown key"
    problem = str(error["msg"])
    value = error.get("input")
    if error["type"] in ("int_type", "float_type") and isinstance(value, str):
        problem += _number_hint(value, whole=error["type"] == "int_type")
    elif error["type"] == "bool_type" and isinstance(value, str):
        problem += " (use true or false; yes, no, on and off are text in YAML 1.2)"
    elif error["type"] in ("int_type", "float_type") and isinstance(value, bool):
        problem += " (YAML reads true and false as booleans)"
    elif error["type"] == "int_type" and isinstance(value, float):
        problem += " (a whole number, without a decimal point)"
    return problem


def _number_hint(value: str, *, whole: bool) -> str:
    """A quoted number: drop the quotes (shown on it); a word: what is wanted."""
    try:
        float(value)
    except ValueError:
        wanted = "a whole number, e.g. 1000" if whole else "a number, e.g. 0.5"
        return f" (write {wanted})"
    return f" (this is a string; write the number without quotes: {value.strip()})"


def key_parts(data: Any, loc: tuple[int | str, ...], kind: str) -> list[str]:
    """The dotted path of `loc` in the user's data, without pydantic's union tags."""
    parts: list[str] = []
    for i, part in enumerate(loc):
        child = _child(data, part)
        if child is _ABSENT and not (i == len(loc) - 1 and kind == "missing"):
            continue  # "str", "list[str]", "function-after[...]": not in the file
        data = child
        parts.append(str(part))
    return parts


_ABSENT = object()


def _child(data: Any, part: int | str) -> Any:
    if isinstance(data, dict) and part in data:
        return data[part]
    if isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data):
        return data[part]
    return _ABSENT


def _lookup(data: Any, parts: list[str]) -> Any:
    for part in parts:
        key: int | str = (
            int(part) if isinstance(data, list) and part.isdigit() else part
        )
        data = _child(data, key)
    return None if data is _ABSENT else data


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`base` with `override` merged in: mappings key by key, anything else replaced.

    The result shares no object with either.
    """
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def leaves(data: Any, parts: list[str]) -> list[tuple[list[str], Any]]:
    """(key path, value) of every leaf: a non-mapping, or an empty mapping."""
    if not isinstance(data, dict) or not data:
        return [(parts, data)]
    return [
        leaf for key, value in data.items() for leaf in leaves(value, [*parts, key])
    ]


def has_key_path(data: Any, parts: list[str]) -> bool:
    """Whether `data` holds the key path `parts` (through mappings only)."""
    for part in parts:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True
