import sys
import types

import pytest

from memlab.errors import ConfigError, InputError
from memlab.registry import Registry


def test_register_decorator_and_lookup():
    reg: Registry[type] = Registry("widget")

    @reg.register("b")
    class B:
        pass

    reg.register("a", int)
    assert reg.get("b") is B
    assert reg.names() == ["a", "b"]
    assert "a" in reg and "c" not in reg
    assert list(reg) == ["a", "b"]
    assert len(reg) == 2


def test_unknown_name_lists_the_known_ones():
    reg: Registry[int] = Registry("metric", error=InputError)
    reg.register("x", 1)
    with pytest.raises(InputError, match=r"unknown metric 'y'; choose one of: x"):
        reg.get("y")
    with pytest.raises(InputError):
        reg.get(["not", "hashable"])  # type: ignore[arg-type]


def test_duplicate_name_is_an_error_unless_replaced():
    reg: Registry[int] = Registry("store")
    reg.register("x", 1)
    reg.register("x", 1)  # the same object again is fine (a module re-imported)
    with pytest.raises(ConfigError, match="registered twice"):
        reg.register("x", 2)
    reg.register("x", 2, replace=True)
    assert reg.get("x") == 2
    reg.unregister("x")
    assert "x" not in reg


@pytest.mark.parametrize("bad", ["", "a b", None, 3])
def test_bad_names(bad):
    with pytest.raises(ConfigError, match="non-empty word"):
        Registry("store").register(bad, 1)  # type: ignore[arg-type]


def test_package_modules_are_imported_on_first_lookup(tmp_path, monkeypatch):
    pkg = tmp_path / "toyplugins"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from memlab.registry import Registry\nREG = Registry('toy', 'toyplugins')\n"
    )
    (pkg / "one.py").write_text("from toyplugins import REG\nREG.register('one', 1)\n")
    (pkg / "_private.py").write_text("raise RuntimeError('never imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import toyplugins

        assert toyplugins.REG.names() == ["one"]
        assert toyplugins.REG.get("one") == 1
    finally:
        for name in [m for m in sys.modules if m.startswith("toyplugins")]:
            del sys.modules[name]


def test_entry_points_register_objects(monkeypatch):
    class EP:
        name = "ext"
        value = "ext:thing"

        def load(self):
            return "the plug-in"

    class BadEP(EP):
        name = "bad"

        def load(self):
            raise ImportError("no module named ext")

    import memlab.registry as registry

    monkeypatch.setattr(
        registry, "entry_points", lambda group: [EP()] if group == "memlab.toy" else []
    )
    reg: Registry[str] = Registry("toy")
    assert reg.get("ext") == "the plug-in"

    monkeypatch.setattr(registry, "entry_points", lambda group: [BadEP()])
    with pytest.raises(ConfigError, match="plug-in 'bad' .* failed to import"):
        Registry("toy").names()


def test_an_entry_point_naming_a_module_is_not_registered_itself(monkeypatch):
    module = types.ModuleType("extmod")

    class EP:
        name = "extmod"
        value = "extmod"

        def load(self):
            return module

    import memlab.registry as registry

    monkeypatch.setattr(registry, "entry_points", lambda group: [EP()])
    assert Registry("toy").names() == []


def test_the_memory_layer_registries_list_the_built_in_plug_ins():
    from memlab.memory import EMBEDDERS, STORES, SUMMARIZERS, HashEmbedder, JsonlStore

    assert STORES.names() == ["jsonl", "memory", "pgvector", "sqlite"]
    assert STORES.get("jsonl") is JsonlStore
    assert EMBEDDERS.names() == ["hash", "minilm", "openai", "static"]
    assert EMBEDDERS.get("hash") is HashEmbedder
    assert SUMMARIZERS.names() == ["extractive", "openai"]
    with pytest.raises(InputError, match="unknown store 'redis'"):
        STORES.get("redis")
