"""Type checks of configuration dataclasses against their own annotations.

A config read from JSON or a command line can carry ``"use_kl_loss": "false"`` (a truthy string),
``"facets": "bmr"`` (three one-letter facets) or ``"num_heads": "4"``; each would either train the
wrong model silently or fail far from the cause. :func:`check_fields` checks every field of a
dataclass instance against its annotation and names the field in the error.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

__all__ = ["check_fields", "describe"]


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` fits the type ``hint`` (``int``, ``float``, ``bool``, ``str``, ``None``,
    unions, ``Literal``, ``tuple[X, ...]``, ``list[X]``, ``dict[K, V]``, ``Any``). A ``bool`` is
    not an ``int``; an ``int`` is a ``float``."""
    if hint is Any:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return any(_fits(value, h) for h in get_args(hint))
    if origin is Literal:
        return value in get_args(hint)
    if origin in (tuple, list):
        if not isinstance(value, (tuple, list)):
            return False
        args = get_args(hint)
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        if origin is tuple and args:
            return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args))
        return all(_fits(v, args[0]) for v in value) if args else True
    if origin is dict:
        if not isinstance(value, dict):
            return False
        args = get_args(hint)
        return not args or all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # an annotation this checker does not understand is not refused


def describe(hint: Any) -> str:
    """A readable name of a type hint: ``int | None``, ``tuple[str, ...]``.

    >>> describe(typing.Optional[int]), describe(tuple[str, ...])
    ('int | None', 'tuple[str, ...]')
    """
    if hint is type(None) or hint is None:
        return "None"
    origin = get_origin(hint)
    if origin in (Union, types.UnionType):
        return " | ".join(describe(h) for h in get_args(hint))
    if origin is not None:
        args = ", ".join("..." if a is Ellipsis else describe(a) for a in get_args(hint))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    return getattr(hint, "__name__", str(hint))


def check_fields(obj: Any, where: str = "") -> None:
    """Raise ``TypeError`` naming the first field of the dataclass ``obj`` whose value does not
    fit its annotation (``where``, e.g. a file name, prefixes the message).

    >>> @dataclasses.dataclass
    ... class C:
    ...     heads: int = 8
    ...     kl: bool = True
    >>> check_fields(C())
    >>> check_fields(C(kl="false"), "run.json")
    Traceback (most recent call last):
    TypeError: run.json: field 'kl' of C must be bool, got 'false' (str)
    """
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if f.name in hints and not _fits(value, hints[f.name]):
            prefix = f"{where}: " if where else ""
            raise TypeError(f"{prefix}field {f.name!r} of {type(obj).__name__} must be {describe(hints[f.name])}, "
                            f"got {value!r} ({type(value).__name__})")
