"""Config schemas derived from the library, and library errors as config errors.

The library's dataclasses (``RankWeights``, ``SummarizePolicy``, ...) and
constructors (``JsonlStore(path, fsync=...)``) hold every default and every
check. The lab never restates them: ``fields_schema`` and ``signature_schema``
turn a dataclass or a signature into a mutable dataclass that OmegaConf/Hydra
can type-check (same names, types and defaults), and ``build`` creates the
library object from config values, turning its ``InputError`` into a
``ConfigError`` that names the config key.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from typing import Any, TypeVar

from omegaconf import MISSING, OmegaConf

from memlab.errors import ConfigError, InputError, MemlabError

T = TypeVar("T")
Extra = tuple[str, Any, Any]  # (name, type, default) of a lab-only field


@cache
def _omegaconf_type(tp: Any) -> Any:
    """``tp`` if OmegaConf can type-check a field of it, else ``Any`` (e.g.
    ``str | os.PathLike``: the library's constructor checks those values)."""
    probe = dataclasses.make_dataclass("Probe", [("x", tp, dataclasses.field(default=MISSING))])
    try:
        OmegaConf.structured(probe)
    except Exception:
        return Any
    return tp


def _hints(obj: Any) -> dict[str, Any]:
    try:
        return typing.get_type_hints(obj)
    except Exception:  # an annotation that does not resolve: check the values only
        return {}


def _spec(name: str, tp: Any, default: Any = MISSING, factory: Any = None) -> tuple[str, Any, Any]:
    if factory is not None:
        return (name, _omegaconf_type(tp), dataclasses.field(default_factory=factory))
    if isinstance(default, list | dict | set):
        value = default
        return (
            name,
            _omegaconf_type(tp),
            dataclasses.field(default_factory=lambda: type(value)(value)),
        )
    return (name, _omegaconf_type(tp), dataclasses.field(default=default))


def fields_schema(
    cls: type,
    *,
    name: str | None = None,
    include: Sequence[str] | None = None,
    extra: Sequence[Extra] = (),
    doc: str | None = None,
) -> type:
    """A config schema with the fields of the library dataclass ``cls``.

    Args:
        cls: the library dataclass whose fields (names, types, defaults) the
            schema copies.
        name: the schema's class name (default: ``<cls>Settings``).
        include: only these fields (default: every init field).
        extra: lab-only fields ``(name, type, default)``, placed first.
        doc: the schema's docstring.
    """
    hints = _hints(cls)
    specs = [_spec(n, tp, d) for n, tp, d in extra]
    for f in dataclasses.fields(cls):
        if not f.init or (include is not None and f.name not in include):
            continue
        factory = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        default = MISSING if f.default is dataclasses.MISSING else f.default
        specs.append(_spec(f.name, hints.get(f.name, Any), default, factory))
    schema = dataclasses.make_dataclass(name or f"{cls.__name__}Settings", specs)
    schema.__doc__ = doc or f"Config of {cls.__module__}.{cls.__qualname__} (same fields)."
    return schema


def partial_schema(schema: type, name: str | None = None) -> type:
    """A copy of a config schema whose every field defaults to MISSING (``???``):
    the shape of a set of *overrides*. Hydra type-checks them and rejects unknown
    keys, and the keys nobody set stay unset (``set_values`` drops them)."""
    hints = _hints(schema)
    specs = []
    for f in dataclasses.fields(schema):
        has_factory = f.default_factory is not dataclasses.MISSING
        default = typing.cast(Callable[[], Any], f.default_factory)() if has_factory else f.default
        if dataclasses.is_dataclass(default):
            sub = partial_schema(type(default))
            specs.append((f.name, Any, dataclasses.field(default_factory=sub)))
        else:
            tp = _omegaconf_type(hints.get(f.name, Any))
            specs.append((f.name, tp, dataclasses.field(default=MISSING)))
    out = dataclasses.make_dataclass(name or f"{schema.__name__}Overrides", specs)
    out.__doc__ = f"Overrides of {schema.__name__} (every key optional)."
    return out


def set_values(tree: Any) -> Any:
    """A plain config tree without its unset (``???``) leaves and the mappings they
    leave empty."""
    if isinstance(tree, Mapping):
        out = {}
        for k, v in tree.items():
            kept = set_values(v)
            if kept == MISSING or (isinstance(kept, dict) and not kept and isinstance(v, Mapping)):
                continue
            out[k] = kept
        return out
    return tree


def parameters(func: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """The keyword-capable parameters of a function or class (``self`` excluded)."""
    sig = inspect.signature(func)
    return {
        n: p
        for n, p in sig.parameters.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) and n != "self"
    }


def default_of(func: Callable[..., Any], param: str) -> Any:
    """The default value of one parameter of a library function or class."""
    p = parameters(func)[param]
    if p.default is inspect.Parameter.empty:
        raise TypeError(f"{func.__qualname__}({param}) has no default")
    return p.default


_PLAIN = (str, int, float, bool, type(None))


def config_value_type(tp: Any) -> Any:
    """The config type of a parameter annotated ``tp``, or None when a config
    cannot hold such a value (an object: a client, a callback).

    Paths (``str | os.PathLike[str]``, ``str | Path``) are strings in a config.
    """
    import os
    from pathlib import Path

    args = typing.get_args(tp) if typing.get_origin(tp) in (typing.Union, types.UnionType) else ()
    members = list(args) or [tp]
    optional = type(None) in members
    kept: list[Any] = []
    for m in members:
        origin = typing.get_origin(m) or m
        if m is type(None):
            continue
        if origin in (Path, os.PathLike) or (isinstance(origin, type) and issubclass(origin, Path)):
            kept.append(str)
        elif m in _PLAIN:
            kept.append(m)
        elif m is Any:
            kept.append(Any)
        else:
            return None
    kept = list(dict.fromkeys(kept))
    if not kept:
        return None
    if len(kept) > 1:
        return Any  # a union of scalars: the constructor checks the value
    return kept[0] | None if optional and kept[0] is not Any else kept[0]


def signature_schema(
    func: Callable[..., Any],
    *,
    name: str | None = None,
    include: Sequence[str] | None = None,
    exclude: Iterable[str] = (),
    extra: Sequence[Extra] = (),
) -> type:
    """A config schema with the parameters of a library constructor or function:
    names, annotated types and defaults (a parameter without a default is
    required). Parameters a config cannot hold (clients, callbacks) are left out;
    ``extra`` lab-only fields ``(name, type, default)`` come first."""
    target = func.__init__ if inspect.isclass(func) else func
    hints = _hints(target)
    skip = set(exclude)
    specs = [_spec(n, tp, d) for n, tp, d in extra]
    for n, p in parameters(func).items():
        if n in skip or (include is not None and n not in include):
            continue
        tp = config_value_type(hints.get(n, Any))
        default = MISSING if p.default is inspect.Parameter.empty else p.default
        if tp is None:
            if default is MISSING:
                raise TypeError(f"{func.__qualname__}({n}) cannot be set from a config")
            continue
        specs.append(_spec(n, tp, default))  # MISSING ("???"): a value is required
    schema = dataclasses.make_dataclass(
        name or f"{getattr(func, '__name__', 'Call')}Settings", specs
    )
    schema.__doc__ = f"Config of {func.__module__}.{func.__qualname__} (its parameters)."
    return schema


# -- config values -> typed objects -----------------------------------------------
def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def omegaconf_error(exc: Exception, key: str = "") -> ConfigError:
    """An OmegaConf merge/validation error as a one-line ConfigError naming the key."""
    sub = str(getattr(exc, "full_key", "") or "")
    full = ".".join(k for k in (key, sub) if k)
    msg = _first_line(str(getattr(exc, "msg", "") or exc))
    if type(exc).__name__ == "ConfigKeyError" or "not in struct" in msg or " not in '" in msg:
        return ConfigError(
            f"config key '{full}': it does not exist; check the spelling "
            "(memlab run --cfg job prints every key)"
        )
    if "Missing mandatory value" in msg:
        return ConfigError(f"config key '{full}': needs a value")
    return ConfigError(f"config key '{full}': {msg}" if full else msg)


def structured(schema: type, values: Any, key: str = "") -> Any:
    """``values`` (a mapping or a DictConfig) merged over the defaults of ``schema``
    and checked: unknown keys, wrong types, missing values, and whatever the
    schema's ``__post_init__`` checks.

    Returns:
        An instance of ``schema``.

    Raises:
        ConfigError: naming the key under ``key``.
    """
    plain = OmegaConf.to_container(values, resolve=True) if OmegaConf.is_config(values) else values
    check_nodes(schema, plain, key)
    try:
        merged = OmegaConf.merge(OmegaConf.structured(schema), plain or {})
        return OmegaConf.to_object(merged)
    except MemlabError as exc:
        raise config_error(exc, key, schema) from None
    except Exception as exc:
        if isinstance(exc.__cause__, MemlabError):
            raise config_error(exc.__cause__, key, schema) from None
        raise omegaconf_error(exc, key) from None


def _node_schema(f: dataclasses.Field[Any]) -> type | None:
    """The schema of a field whose default is a nested node (a schema instance)."""
    if f.default_factory is dataclasses.MISSING:
        return None
    default = typing.cast(Callable[[], Any], f.default_factory)()
    return type(default) if dataclasses.is_dataclass(default) else None


def check_nodes(schema: type, values: Any, key: str = "") -> None:
    """Refuse ``null`` for a nested node of ``schema`` (``memory.weights=null``).

    Such nodes are typed ``Any`` (so that partial overrides of them merge), which
    lets OmegaConf take ``null`` for them; the builders read their keys, so a
    null node would fail later as a bug rather than as bad config.

    Raises:
        ConfigError: naming the key of the null node.
    """
    if not isinstance(values, Mapping):
        return
    for f in dataclasses.fields(schema):
        sub = _node_schema(f)
        if sub is None or f.name not in values:
            continue
        full = f"{key}.{f.name}" if key else f.name
        value = values[f.name]
        if value is None:
            raise ConfigError(
                f"config key '{full}': must be a mapping of its keys, not null; set the "
                f"keys to change (e.g. {full}.KEY=VALUE) or drop the override to keep "
                "the defaults (memlab run --cfg job prints them)"
            )
        check_nodes(sub, value, full)


_HEAD = re.compile(r"^(\S+) (.*)$", re.S)


def config_error(exc: MemlabError, key: str, names: Iterable[str] | type = ()) -> ConfigError:
    """A library error about a value as a ConfigError naming the config key.

    Library messages start with the value's name (``"weights.recency must be a
    number >= 0, got -1"``, ``"pool must be ..."``); when that name ends in one
    of ``names`` (field names, or a dataclass whose fields they are), the key
    becomes ``<key>.<name>`` and the rest of the message follows it.
    """
    text = _first_line(str(exc)) or type(exc).__name__
    if text.startswith("config key '"):
        return ConfigError(text)  # already names its key
    if isinstance(names, type) and dataclasses.is_dataclass(names):
        names = [f.name for f in dataclasses.fields(names)]
    known = set(names)  # type: ignore[arg-type]
    m = _HEAD.match(text)
    if m:
        head, rest = m.groups()
        last = head.rsplit(".", 1)[-1]
        if last in known:
            full = f"{key}.{last}" if key else last
            return ConfigError(f"config key '{full}': {rest}")
        if key and re.fullmatch(r"[\w.]+", head) and rest.startswith("must "):
            return ConfigError(f"config key '{key}': {rest}")  # the library's name for it
    return ConfigError(f"config key '{key}': {text}" if key else text)


def build(
    factory: Callable[..., T],
    values: Mapping[str, Any],
    key: str,
    names: Iterable[str] | None = None,
) -> T:
    """``factory(**values)``; the library's InputError becomes a ConfigError naming
    ``key`` (and the field, when the message names one of ``names``, by default
    the keys of ``values``)."""
    try:
        return factory(**values)
    except InputError as exc:
        raise config_error(exc, key, values if names is None else names) from None


def as_dict(obj: Any) -> dict[str, Any]:
    """A schema instance's fields (not recursive) as keyword arguments."""
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
