"""Argument checks shared by the public API: each raises an InputError that names
the argument and says what is expected.

Every public entry point of ``memlab.memory`` validates its arguments with these
before it changes anything, so a bad call never leaves a trace and never
surfaces as a raw ``TypeError``, ``ValueError`` or ``AttributeError``.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memlab.errors import InputError

MAX_ID_CHARS = 256
"""Longest record id every store accepts (ids are primary keys; scopes have no limit)."""


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_text(value: object, name: str, *, empty: bool = False) -> str:
    """A string that can be encoded as UTF-8 (no lone surrogates); non-blank
    unless ``empty``.

    Raises:
        InputError: naming ``name``.
    """
    if not isinstance(value, str):
        raise InputError(f"{name} must be a string, got {type(value).__name__} {_show(value)}")
    if not empty and not value.strip():
        raise InputError(f"{name} must be a non-empty string, got {_show(value)}")
    check_unicode(value, name)
    return value


def check_unicode(value: str, name: str) -> str:
    """``value`` if it can be encoded as UTF-8, else an InputError naming ``name``."""
    if value.isascii():  # a flag CPython keeps on the string: no encoding needed
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(
            f"{name} is not valid unicode (lone surrogate at {exc.start}); decode the text "
            "properly before passing it"
        ) from None
    return value


def check_number(
    value: object,
    name: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    above: float | None = None,
    integer: bool = False,
    none: bool = False,
) -> Any:
    """A finite real number (an int when ``integer``) within ``lo..hi`` and greater
    than ``above``, or None when ``none`` allows it. Booleans are not numbers here.

    Returns:
        The value as ``float`` (``int`` when ``integer``), or None.

    Raises:
        InputError: naming ``name`` and the allowed range.
    """
    if value is None and none:
        return None
    kind = "an integer" if integer else "a number"
    t = type(value)
    if t is int or (t is float and not integer):  # the common case, without ABC checks
        number: Any = value if integer else float(value)  # type: ignore[arg-type]
    else:
        ok = isinstance(value, numbers.Integral if integer else numbers.Real) and not isinstance(
            value, bool
        )
        if not ok:
            raise InputError(f"{name} must be {kind}, got {type(value).__name__} {_show(value)}")
        real: Any = value
        number = int(real) if integer else float(real)
    if not math.isfinite(number):
        raise InputError(f"{name} must be a finite number, got {_show(value)}")
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        bounds = (
            f"in {lo:g}..{hi:g}"
            if lo is not None and hi is not None
            else (f">= {lo:g}" if lo is not None else f"<= {hi:g}")
        )
        raise InputError(f"{name} must be {kind} {bounds}, got {_show(value)}")
    if above is not None and not number > above:
        raise InputError(f"{name} must be {kind} > {above:g}, got {_show(value)}")
    return number


#: The epoch seconds a timestamp may hold: 0001-01-01 to 9999-12-31T23:59:59 UTC,
#: what ``datetime``, ISO-8601 and every store can represent (the prompt and
#: ``explain()`` show each record's time).
MIN_EPOCH = -62_135_596_800.0
MAX_EPOCH = 253_402_300_799.0

#: The largest count (tokens, access_count) a store keeps: SQLite's and numpy's int64.
MAX_COUNT = 2**63 - 1


def check_time(value: object, name: str, *, none: bool = False) -> Any:
    """Epoch seconds: a finite number within years 1..9999 (``MIN_EPOCH`` ..
    ``MAX_EPOCH``), or None when ``none`` allows it.

    Returns:
        The value as ``float``, or None.

    Raises:
        InputError: naming ``name`` and the allowed range.
    """
    t = check_number(value, name, none=none)
    if t is not None and not MIN_EPOCH <= t <= MAX_EPOCH:
        raise InputError(
            f"{name} must be epoch seconds within the years 1..9999 "
            f"({MIN_EPOCH:.0f}..{MAX_EPOCH:.0f}), got {_show(value)}"
        )
    return t


def check_callable(value: object, name: str, what: str) -> Any:
    """``value`` if it can be called, else an InputError saying what it should be."""
    if not callable(value):
        raise InputError(f"{name} must be {what}, got {type(value).__name__} {_show(value)}")
    return value


def check_instance(
    value: object, cls: type | tuple[type, ...], name: str, *, none: bool = True
) -> Any:
    """``value`` if it is an instance of ``cls`` (or None when ``none``)."""
    if value is None and none:
        return None
    if not isinstance(value, cls):
        names = " or ".join(c.__name__ for c in (cls if isinstance(cls, tuple) else (cls,)))
        raise InputError(f"{name} must be a {names}, got {type(value).__name__} {_show(value)}")
    return value


def check_bool(value: object, name: str) -> bool:
    """``value`` if it is a bool (not 0/1, not a string)."""
    if not isinstance(value, bool):
        raise InputError(f"{name} must be True or False, got {type(value).__name__} {_show(value)}")
    return value


def check_strings(value: object, name: str, *, empty_items: bool = True) -> list[str]:
    """A list, tuple or other iterable of strings, never a bare string (whose
    characters would each become an item).

    Raises:
        InputError: naming ``name`` (a bare string, a non-iterable, or an item
            that is not a string).
    """
    if isinstance(value, str | bytes | bytearray):
        raise InputError(
            f"{name} must be a list of strings, not a single {type(value).__name__} "
            f"({_show(value)}); wrap it in a list: [{_show(value)}]"
        )
    if isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise InputError(f"{name} must be a list of strings, got {type(value).__name__}")
    out = list(value)
    for i, item in enumerate(out):
        if not isinstance(item, str):
            raise InputError(
                f"{name}[{i}] must be a string, got {type(item).__name__} {_show(item)}"
            )
        if not empty_items and not item.strip():
            raise InputError(f"{name}[{i}] is empty")
        check_unicode(item, f"{name}[{i}]")
    return out


def check_id(value: object, name: str = "record id") -> str:
    """A record id: a non-empty UTF-8 string of at most ``MAX_ID_CHARS`` characters."""
    if not isinstance(value, str) or not value:
        raise InputError(f"{name} must be a non-empty string, got {_show(value)}")
    if len(value) > MAX_ID_CHARS:
        raise InputError(
            f"{name} has {len(value)} characters, more than the {MAX_ID_CHARS} every store "
            "accepts; use a shorter id (or omit it for a random one)"
        )
    return check_unicode(value, name)


def check_meta(value: object, name: str = "meta") -> dict[str, Any]:
    """A JSON object: string keys, JSON values, no NaN or infinity, valid unicode.

    Returns:
        ``value`` itself (not copied).

    Raises:
        InputError: naming ``name`` and what cannot be stored.
    """
    if not isinstance(value, dict):
        raise InputError(f"{name} must be a dict, got {type(value).__name__} {_show(value)}")
    if not value:
        return value
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InputError(
            f"{name} cannot be stored as JSON ({exc}); use strings, numbers, booleans, None, "
            "lists and dicts with string keys"
        ) from None
    except RecursionError:
        raise InputError(f"{name} is nested too deeply (or refers to itself)") from None
    if any(not isinstance(k, str) for k in value):
        # json.dumps turns int keys into strings: a reopened store would differ.
        raise InputError(f"{name} keys must be strings, got {sorted(map(repr, value))[:3]}")
    check_unicode(text, name)
    return value


def check_path(value: object, name: str) -> Path:
    """A file path: a non-empty ``str`` or ``os.PathLike`` (not None, not bytes)."""
    if isinstance(value, bool) or not isinstance(value, str | os.PathLike):
        raise InputError(
            f"{name} must be a file path (str or pathlib.Path), got "
            f"{type(value).__name__} {_show(value)}"
        )
    text = os.fspath(value)
    if not isinstance(text, str) or not text.strip():
        raise InputError(f"{name} must be a non-empty file path, got {_show(value)}")
    check_unicode(text, name)
    if "\x00" in text:
        raise InputError(f"{name} holds a NUL character: {_show(value)}")
    return Path(text)
