"""Named plug-in registries.

Every plug-in point of memlab (stores, embedders and summarizers in the memory
layer; strategies, metrics and dataset loaders in the lab) is a ``Registry``: a
name -> object map that its modules fill with ``@REGISTRY.register("name")``.
Nothing else lists a plug-in: validation, the CLI, the gate and the report ask
the registry which names exist.

A registry knows where its built-in plug-ins live (``package``): the first
lookup imports every module of that package, so a new built-in is one module
that registers itself. Plug-ins shipped by other packages register through the
entry-point group ``memlab.<kind>`` (for example, in the plug-in's
pyproject.toml: ``[project.entry-points."memlab.store"] redis = "mypkg.redis"``),
or by calling ``register`` before the registry is used.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Generic, TypeVar, overload

from memlab.errors import ConfigError, MemlabError

T = TypeVar("T")


class Registry(Generic[T]):
    """A name -> plug-in map for one kind of plug-in.

    Args:
        kind: what the plug-ins are, singular ("store", "metric"); used in
            messages and as the entry-point group ``memlab.<kind>``.
        package: dotted name of the package whose modules register the
            built-in plug-ins (imported on first lookup), or None.
        error: the MemlabError subclass raised for an unknown name.
    """

    def __init__(
        self,
        kind: str,
        package: str | None = None,
        *,
        error: type[MemlabError] = ConfigError,
    ) -> None:
        self.kind = kind
        self.package = package
        self.error = error
        self._items: dict[str, T] = {}
        self._loaded = False
        self._lock = threading.RLock()

    # -- filling --------------------------------------------------------------
    @overload
    def register(self, name: str) -> Callable[[T], T]: ...

    @overload
    def register(self, name: str, obj: T, *, replace: bool = False) -> T: ...

    def register(
        self, name: str, obj: T | None = None, *, replace: bool = False
    ) -> T | Callable[[T], T]:
        """Register ``obj`` under ``name``; without ``obj``, return a decorator.

        Raises:
            ConfigError: if the name is not a non-empty string without spaces, or
                is taken by another object (pass ``replace=True`` to swap it).
        """
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise ConfigError(f"a {self.kind} name must be a non-empty word, got {name!r}")

        def add(item: T) -> T:
            with self._lock:
                current = self._items.get(name)
                if current is not None and current is not item and not replace:
                    raise ConfigError(
                        f"{self.kind} {name!r} is registered twice ({_describe(current)} and "
                        f"{_describe(item)}); rename one, or pass replace=True"
                    )
                self._items[name] = item
            return item

        if obj is None:
            return add
        return add(obj)

    def unregister(self, name: str) -> None:
        """Remove a plug-in (tests use this to undo a toy registration)."""
        with self._lock:
            self._items.pop(name, None)

    # -- lookup ---------------------------------------------------------------
    def get(self, name: str) -> T:
        """The plug-in registered as ``name``.

        Raises:
            the registry's error class: naming the unknown name and every known one.
        """
        self.load()
        try:
            return self._items[name]
        except (KeyError, TypeError):
            raise self.error(
                f"unknown {self.kind} {name!r}; choose one of: {', '.join(self.names())}"
            ) from None

    def names(self) -> list[str]:
        """Every registered name, sorted."""
        self.load()
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(name, plug-in) pairs in name order."""
        self.load()
        return sorted(self._items.items())

    def __contains__(self, name: object) -> bool:
        self.load()
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._items)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._items)})"

    # -- discovery ------------------------------------------------------------
    def load(self) -> None:
        """Import the built-in package's modules and the entry points, once."""
        if self._loaded:
            return
        with self._lock:
            if self._loaded:
                return
            # Set first: a module that registers itself while being imported
            # calls back into the registry.
            self._loaded = True
            if self.package is not None:
                package = importlib.import_module(self.package)
                for info in pkgutil.iter_modules(getattr(package, "__path__", [])):
                    if not info.name.startswith("_"):
                        importlib.import_module(f"{self.package}.{info.name}")
            for ep in entry_points(group=f"memlab.{self.kind}"):
                try:
                    loaded = ep.load()
                except Exception as exc:  # a broken third-party plug-in
                    raise ConfigError(
                        f"the {self.kind} plug-in {ep.name!r} ({ep.value}) failed to import: "
                        f"{exc}; fix or uninstall the package that provides it"
                    ) from exc
                # An entry point names a module that registers itself, or the
                # plug-in object itself.
                if ep.name not in self._items and not _is_module(loaded):
                    self.register(ep.name, loaded)


def _is_module(obj: object) -> bool:
    return type(obj).__name__ == "module"


def _describe(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or type(obj).__name__
    return f"{module}.{name}" if module else str(name)
