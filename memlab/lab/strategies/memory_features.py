"""``kind: memory_features``: the memory layer with its optional features, each one a
config node: layered session scopes (``layers``), procedural memory
(``procedures``) and reflection (``reflect``).

An entry starts from the run's ``memory`` settings and its own ``memory``
overrides, exactly like ``kind: memory``, and switches features on:

- ``layers.enabled``: every turn with a session id is remembered in the layered
  scopes ``["<scope>:<session>", "<scope>"]`` (``session_scope``): episodes go to
  the session layer, summaries, reflections and procedures to the user's scope
  (``LayerPolicy``'s fields: ``episodic``, ``semantic``, ``procedural``). A probe
  recalls from both layers, with a shared ranking or ``layers.split`` shares of
  the budget. When a scope's session changes, the previous session is ended
  (``MemoryLayer.end_session``: reflected, and its trusted episodes folded into
  the user's scope), so the new session reads what carried over, and never the
  old session's raw episodes.
- ``procedures.enabled``: a ``ProcedureRecorder`` reads every user, tool and agent
  turn and writes successful tool sequences as procedures (``ProcedurePolicy``'s
  fields). With ``procedures.slot`` the best procedure whose similarity to the
  probe is at least ``procedures.slot_similarity`` is packed first, and the rest
  of the recall (episodes and semantic records only) fills the budget; without
  it procedures compete with every record in the shared ranking.
- ``reflect.enabled``: a reflector (``reflect.reflector``: a name in
  ``REFLECTORS``, built with ``reflect.options``) runs on ``ReflectPolicy``'s
  schedule (its fields: ``every``, ``trigger_tokens``, ``archive``,
  ``read_untrusted``, ``supersede``).

The presets are memory_layered, memory_procedural, memory_reflect and their
ablations (conf/strategies/).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memlab.errors import ConfigError, InputError
from memlab.lab.schema import (
    as_dict,
    build,
    fields_schema,
    structured,
)
from memlab.lab.strategies.base import (
    STRATEGIES,
    Components,
    Context,
    StrategyFactory,
    session_scope,
)
from memlab.lab.strategies.memory import (
    MemoryEntry,
    MemoryKind,
    MemoryParts,
    MemoryStrategy,
    merged_entry,
)
from memlab.lab.transcripts import Turn
from memlab.memory import RecallQuery
from memlab.memory.procedural import ProcedurePolicy
from memlab.memory.procedure_recorder import ProcedureRecorder
from memlab.memory.records import MemoryKind as RecordKind
from memlab.memory.reflect import REFLECTORS, ReflectPolicy
from memlab.memory.scopes import LayerPolicy

ENABLED = ("enabled", bool, False)
LayersSettings = fields_schema(
    LayerPolicy,
    name="LayersSettings",
    extra=[ENABLED, ("split", Any, None)],
    doc="LayerPolicy's fields, enabled, and split (budget shares per layer; null: shared ranking).",
)
ProceduresSettings = fields_schema(
    ProcedurePolicy,
    name="ProceduresSettings",
    extra=[ENABLED, ("slot", bool, True), ("slot_similarity", float, 0.15)],
    doc="ProcedurePolicy's fields, enabled, and the procedure slot (slot, slot_similarity).",
)
ReflectSettings = fields_schema(
    ReflectPolicy,
    name="ReflectSettings",
    extra=[ENABLED, ("reflector", str, "rules"), ("options", Any, None)],
    doc="ReflectPolicy's fields, enabled, the reflector's name and constructor options.",
)


@dataclass
class FeaturesEntry(MemoryEntry):
    """A ``strategies`` entry of kind ``memory_features``: ``memory`` overrides (as for
    ``kind: memory``) and the three feature nodes."""

    layers: Any = field(default_factory=LayersSettings)
    procedures: Any = field(default_factory=ProceduresSettings)
    reflect: Any = field(default_factory=ReflectSettings)


@dataclass(frozen=True)
class _Nodes:
    layers: Any
    procedures: Any
    reflect: Any


@dataclass(frozen=True)
class FeatureParts:
    """Checked library objects for one memory_features strategy."""

    memory: MemoryParts
    layers: LayerPolicy | None
    split: tuple[float, ...] | None
    procedures: ProcedurePolicy | None
    slot: bool
    slot_similarity: float
    reflect: ReflectPolicy | None
    reflector: str
    reflector_options: dict[str, Any]


class FeatureStrategy(MemoryStrategy):
    """A MemoryStrategy with layered session scopes, procedures and reflection.

    Args:
        layered: remember and recall in ``[session scope, scope]`` for turns with a
            session id.
        split: budget shares per layer (None: a shared ranking).
        record_procedures: capture procedures from the turns.
        slot: pack the best matching procedure first.
        slot_similarity: the lowest cosine of a procedure for the slot.
        **kwargs: MemoryStrategy's arguments (``layers``, ``procedures``,
            ``reflector``, ``reflect`` among the layer's).
    """

    def __init__(
        self,
        *args: Any,
        layered: bool = False,
        split: tuple[float, ...] | None = None,
        record_procedures: bool = False,
        slot: bool = False,
        slot_similarity: float = 0.15,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.layered = layered
        self.split = split
        self.recorder = ProcedureRecorder(self.layer) if record_procedures else None
        self.slot = slot and record_procedures
        self.slot_similarity = slot_similarity
        self._session: dict[str, tuple[str, ...]] = {}  # scope -> the layers of its open session

    def scope_of(self, turn: Turn) -> str | tuple[str, ...]:
        if self.layered and turn.session is not None:
            return (session_scope(turn.scope, turn.session), turn.scope)
        return turn.scope

    def _switch(self, turn: Turn) -> None:
        """End the scope's previous session when this turn opens another one."""
        if not self.layered:
            return
        scopes = self.scope_of(turn)
        if isinstance(scopes, str):
            return
        previous = self._session.get(turn.scope)
        if previous is not None and previous != scopes:
            self.layer.end_session(previous, now=self.now)
            if self.recorder is not None:
                self.recorder.finish(previous)
        self._session[turn.scope] = scopes

    def observe(self, turn: Turn) -> None:
        self.now = max(self.now, turn.time)
        self._switch(turn)
        super().observe(turn)
        if self.recorder is None:
            return
        scopes = self.scope_of(turn)
        if turn.role == "user":
            self.recorder.user(scopes, turn.text, turn.id)
        elif turn.role == "tool":
            self.recorder.tool(scopes, turn.text, turn.id)
        else:
            self.recorder.agent(scopes, turn.text, turn.id)

    def context(self, probe: Turn, budget: int) -> Context:
        self.now = max(self.now, probe.time)
        self._switch(probe)
        scopes = self.scope_of(probe)
        query: dict[str, Any] = dict(self.query)
        if self.split is not None and not isinstance(scopes, str):
            query["split"] = self.split
        first: list[Any] = []
        if self.slot:
            best = self.layer.recall(
                RecallQuery(scopes, probe.text, token_budget=budget, now=self.now,
                            kinds=[RecordKind.PROCEDURAL], max_hits=1),
                touch=False,
            )  # fmt: skip
            first = [h for h in best.hits if h.similarity >= self.slot_similarity]
        used = sum(h.record.tokens for h in first)
        hits = list(first)
        if self.slot and "kinds" not in query:
            # procedures come through the slot only: a long procedure that merely
            # shares words with a question must not push a needed fact out
            query["kinds"] = [RecordKind.EPISODIC, RecordKind.SEMANTIC]
        if budget - used > 0:
            rest = self.layer.recall(
                RecallQuery(scopes, probe.text, token_budget=budget - used, now=self.now, **query)
            )
            taken = {h.record.id for h in first}
            hits += [h for h in rest.hits if h.record.id not in taken]
        if first:
            self.layer.store.touch(first[0].record.scope, [first[0].record.id], self.now)
        return Context([self.item(h) for h in hits])


def feature_parts(memory: MemoryParts, entry: Any, where: str) -> FeatureParts:
    """Check the feature nodes of an entry (ConfigError naming the key)."""

    def policy(node: Any, factory: Any, key: str, lab: tuple[str, ...]) -> Any:
        values = {k: v for k, v in as_dict(node).items() if k not in lab}
        return build(factory, values, f"{where}.{key}")

    layers = policy(entry.layers, LayerPolicy, "layers", ("enabled", "split"))
    split = None
    if entry.layers.split is not None:
        if not isinstance(entry.layers.split, list | tuple) or len(entry.layers.split) != 2:
            raise ConfigError(
                f"config key '{where}.layers.split': give two shares (the session layer's, "
                f"then the user scope's), got {entry.layers.split!r}"
            )
        build(RecallQuery, {"scope": ["a", "b"], "text": "", "split": entry.layers.split},
              f"{where}.layers")  # fmt: skip
        split = tuple(float(x) for x in entry.layers.split)
    procedures = policy(
        entry.procedures, ProcedurePolicy, "procedures", ("enabled", "slot", "slot_similarity")
    )
    reflect = policy(entry.reflect, ReflectPolicy, "reflect", ("enabled", "reflector", "options"))
    name = entry.reflect.reflector
    options = dict(entry.reflect.options or {})
    if entry.reflect.enabled:
        try:
            cls = REFLECTORS.get(name)
        except InputError as exc:
            raise ConfigError(f"config key '{where}.reflect.reflector': {exc}") from None
        close = getattr(build(cls, options, f"{where}.reflect.options"), "close", None)
        if close is not None:
            close()
    return FeatureParts(
        memory=memory,
        layers=layers if entry.layers.enabled else None,
        split=split,
        procedures=procedures if entry.procedures.enabled else None,
        slot=bool(entry.procedures.slot),
        slot_similarity=float(entry.procedures.slot_similarity),
        reflect=reflect if entry.reflect.enabled else None,
        reflector=name,
        reflector_options=options,
    )


class FeaturesKind:
    """The ``memory_features`` kind: the memory kind's settings plus three feature nodes."""

    schema: type = FeaturesEntry

    def __init__(self) -> None:
        self.memory = MemoryKind()

    def entry(self, name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
        return merged_entry(FeaturesEntry, name, raw)

    def settings(self, name: str, raw: Mapping[str, Any], run: Mapping[str, Any]) -> FeatureParts:
        values = self.entry(name, raw)
        memory = self.memory.settings(name, {"memory": values["memory"]}, run)
        where = f"strategies.{name}"
        node = _Nodes(
            structured(LayersSettings, values["layers"], f"{where}.layers"),
            structured(ProceduresSettings, values["procedures"], f"{where}.procedures"),
            structured(ReflectSettings, values["reflect"], f"{where}.reflect"),
        )
        return feature_parts(memory, node, where)

    def factory(self, name: str, settings: Any, parts: Components) -> StrategyFactory:
        s: FeatureParts = settings

        def make(transcript: Any) -> MemoryStrategy:
            store = parts.open_store(name, transcript.id)
            extra: dict[str, Any] = {
                "layered": s.layers is not None,
                "split": s.split,
                "record_procedures": s.procedures is not None,
                "slot": s.slot,
                "slot_similarity": s.slot_similarity,
            }
            if s.layers is not None:
                extra["layers"] = s.layers
            if s.procedures is not None:
                extra["procedures"] = s.procedures
            if s.reflect is not None:
                extra["reflect"] = s.reflect
                extra["reflector"] = REFLECTORS.get(s.reflector)(**s.reflector_options)
            return s.memory.strategy(
                name, store, parts, drop_store=parts.drop_store, cls=FeatureStrategy, **extra
            )

        return make


STRATEGIES.register("memory_features", FeaturesKind())
