"""The regression gate: compare a run's summary.csv with a baseline's, metric by metric.

For every (strategy, group, metric) of the baseline that the rules gate, with
d the metric's direction (+1 higher is better, -1 lower is better, 0 neither;
``direction``), the change is ``delta = run - baseline`` and the tolerance is

    tolerance = half-width of the baseline's bootstrap interval on the wrong side
                (baseline - ci_low when higher is better, ci_high - baseline when
                lower is better)
              + margin.abs + margin.rel * |baseline|

A metric **regresses** when ``d * delta < -tolerance``. Direction-0 metrics are
shown when they change but never fail. A metric of the baseline that the run
lacks (or has as NaN) is an error, not a pass. Latency metrics (names ending in
``_ms``) depend on the machine and are left out unless asked for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from memlab.errors import MemlabError
from memlab.lab.metrics import METRICS

# Summary rows that are not per-probe metrics (see report.summarize).
EXTRA_DIRECTIONS: dict[str, int] = {
    "write_ms": -1,
    "maintain_ms": -1,
    "final_store_records": 0,
    "final_store_archived": 0,
    "final_store_tokens": 0,
    "final_store_bytes": 0,
}
EPS = 1e-9
COLUMNS = [
    "strategy", "group", "metric", "direction", "baseline", "ci_low", "ci_high", "run",
    "delta", "tolerance", "status",
]  # fmt: skip


def direction(metric: str) -> int:
    """+1 if higher is better, -1 if lower is, 0 if neither (or unknown)."""
    if metric in METRICS:
        return METRICS[metric].direction
    return EXTRA_DIRECTIONS.get(metric, 0)


def is_latency(metric: str) -> bool:
    """Machine-dependent timing metrics (``recall_ms``, ``write_ms``, ...)."""
    return metric.endswith("_ms")


@dataclass(frozen=True)
class Margin:
    """Slack added to the bootstrap half-width: ``abs + rel * |baseline|``."""

    abs: float = 0.0
    rel: float = 0.0

    def __post_init__(self) -> None:
        for name in ("abs", "rel"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
                raise MemlabError(f"gate margin {name} must be a number >= 0, got {v!r}")


@dataclass(frozen=True)
class GateRules:
    """What the gate compares and how much slack it allows.

    Attributes:
        margin: default margin for every metric.
        per_metric: margins that replace the default for some metrics.
        include_latency: also gate ``*_ms`` metrics (off: they depend on the machine).
        exclude: metrics never gated.
        groups: only these groups (None: every group of the baseline).
        strategies: only these strategies (None: every strategy of the baseline).
    """

    margin: Margin = field(default_factory=lambda: Margin(abs=0.0, rel=0.01))
    per_metric: Mapping[str, Margin] = field(default_factory=dict)
    include_latency: bool = False
    exclude: Sequence[str] = ()
    groups: Sequence[str] | None = None
    strategies: Sequence[str] | None = None

    def margin_for(self, metric: str) -> Margin:
        return self.per_metric.get(metric, self.margin)

    def gated(self, metric: str) -> bool:
        return metric not in self.exclude and (self.include_latency or not is_latency(metric))


@dataclass
class GateResult:
    """Every compared row (``table``, columns ``COLUMNS``) and the verdict."""

    table: pd.DataFrame
    missing: list[str]
    excluded: list[str]

    @property
    def regressions(self) -> pd.DataFrame:
        return self.table[self.table["status"] == "REGRESSED"]

    @property
    def moved(self) -> pd.DataFrame:
        return self.table[~self.table["status"].isin(["same", "missing"])]

    @property
    def passed(self) -> bool:
        return not self.missing and self.regressions.empty


def read_summary(path: Path, what: str) -> pd.DataFrame:
    """A summary.csv (or the folder holding one) as a DataFrame.

    Raises:
        MemlabError: missing file or columns.
    """
    f = path / "summary.csv" if path.is_dir() else path
    try:
        df = pd.read_csv(f, dtype={"strategy": str, "group": str, "metric": str})
    except FileNotFoundError:
        raise MemlabError(
            f"the {what} {f} does not exist; pass a run folder or its summary.csv"
        ) from None
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as exc:
        raise MemlabError(f"the {what} {f} is not a summary table ({exc})") from None
    needed = {"strategy", "group", "metric", "mean", "ci_low", "ci_high"}
    if not needed <= set(df.columns):
        raise MemlabError(f"the {what} {f} lacks columns {sorted(needed - set(df.columns))}")
    return df


def compare(baseline: pd.DataFrame, run: pd.DataFrame, rules: GateRules) -> GateResult:
    """Compare two summaries under ``rules`` (see the module docstring)."""
    base = baseline.dropna(subset=["mean"])
    if rules.groups is not None:
        base = base[base["group"].isin(rules.groups)]
    if rules.strategies is not None:
        unknown = sorted(set(rules.strategies) - set(baseline["strategy"]))
        if unknown:
            raise MemlabError(f"strategies {unknown} are not in the baseline")
        base = base[base["strategy"].isin(rules.strategies)]
    excluded = sorted({m for m in base["metric"] if not rules.gated(m)})
    base = base[base["metric"].map(rules.gated)]
    index = ["strategy", "group", "metric"]
    dup = run[run.duplicated(index)]
    if not dup.empty:
        raise MemlabError(
            "the run's summary has duplicate (strategy, group, metric) rows, e.g. "
            f"{tuple(dup.iloc[0][index])}; gate one run folder, not a multirun table"
        )
    theirs: dict[tuple[str, str, str], float] = {
        (str(a), str(b), str(c)): float(v)
        for a, b, c, v in zip(
            run["strategy"], run["group"], run["metric"], run["mean"], strict=True
        )
    }
    rows: list[tuple[object, ...]] = []
    missing = []
    for rec in base.to_dict("records"):
        key = (str(rec["strategy"]), str(rec["group"]), str(rec["metric"]))
        mean, lo, hi = float(rec["mean"]), float(rec["ci_low"]), float(rec["ci_high"])
        d = direction(key[2])
        value = theirs.get(key, math.nan)
        if math.isnan(value):
            missing.append(" / ".join(key))
            rows.append((*key, d, mean, lo, hi, math.nan, math.nan, math.nan, "missing"))
            continue
        delta = value - mean
        if d > 0:
            half = mean - lo
        elif d < 0:
            half = hi - mean
        else:
            half = max(mean - lo, hi - mean)
        half = max(0.0, half) if math.isfinite(half) else 0.0
        m = rules.margin_for(key[2])
        tol = half + m.abs + m.rel * abs(mean)
        if abs(delta) <= EPS:
            status = "same"
        elif d == 0:
            status = "changed"
        elif d * delta < -(tol + EPS):
            status = "REGRESSED"
        elif d * delta < 0:
            status = "worse, within tolerance"
        else:
            status = "better"
        rows.append((*key, d, mean, lo, hi, value, delta, tol, status))
    table = pd.DataFrame(rows, columns=COLUMNS)
    return GateResult(table=table, missing=missing, excluded=excluded)


ARROW = {1: "↑", -1: "↓", 0: "·"}


def _fmt(v: float) -> str:
    if math.isnan(v):
        return "-"
    if v == 0 or abs(v) >= 100:
        return f"{v:,.1f}" if v else "0"
    return f"{v:.4f}" if abs(v) >= 0.01 else f"{v:.3g}"


def moved_table(result: GateResult) -> pd.DataFrame:
    """The rows that changed, regressions first, as display strings."""
    order = {"REGRESSED": 0, "missing": 1, "worse, within tolerance": 2, "better": 3, "changed": 4}
    t = result.table[result.table["status"] != "same"].copy()
    t["_o"] = t["status"].map(order)
    t = t.sort_values(["_o", "strategy", "group", "metric"]).drop(columns="_o")
    return pd.DataFrame(
        {
            "strategy": t["strategy"],
            "group": t["group"],
            "metric": [f"{m} {ARROW[d]}" for m, d in zip(t["metric"], t["direction"], strict=True)],
            "baseline [95% CI]": [
                f"{_fmt(b)} [{_fmt(lo)}, {_fmt(hi)}]"
                for b, lo, hi in zip(t["baseline"], t["ci_low"], t["ci_high"], strict=True)
            ],
            "run": [_fmt(v) for v in t["run"]],
            "delta": [("-" if math.isnan(v) else f"{v:+.4g}") for v in t["delta"]],
            "tolerance": [_fmt(v) for v in t["tolerance"]],
            "status": t["status"],
        }
    )


def verdict(result: GateResult) -> str:
    n = len(result.table)
    if result.missing:
        return f"ERROR: {len(result.missing)} of {n} baseline metrics are missing from the run"
    bad = len(result.regressions)
    moved = len(result.moved)
    if bad:
        return f"FAIL: {bad} of {n} metrics regressed beyond tolerance ({moved} moved)"
    return f"PASS: {n} metrics compared, {moved} moved, none regressed beyond tolerance"


def to_markdown(result: GateResult, *, baseline: str, run: str, notes: Sequence[str] = ()) -> str:
    """The gate's report as Markdown (for gate.md and a CI job summary)."""
    lines = [
        "## memlab gate",
        "",
        f"**{verdict(result)}**",
        "",
        f"- baseline: `{baseline}`",
        f"- run: `{run}`",
        "- tolerance = baseline's bootstrap half-width (wrong side) + margin",
    ]
    if result.excluded:
        lines.append(f"- not gated: {', '.join(result.excluded)}")
    lines += [f"- {n}" for n in notes]
    lines.append("")
    table = moved_table(result)
    if table.empty:
        lines.append("No metric moved.")
    else:
        lines.append("| " + " | ".join(table.columns) + " |")
        lines.append("|" + "---|" * len(table.columns))
        for row in table.itertuples(index=False):
            cells = [str(c).replace("|", "\\|") for c in row]
            if row.status == "REGRESSED":
                cells = [f"**{c}**" for c in cells]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def to_text(result: GateResult) -> str:
    table = moved_table(result)
    body = "no metric moved" if table.empty else table.to_string(index=False)
    return f"{body}\n\n{verdict(result)}"


def parse_margin(spec: str) -> tuple[str, Margin]:
    """``METRIC:abs=0.02,rel=0.05`` (either part optional) -> (metric, Margin).

    Raises:
        MemlabError: a malformed spec, with the expected form.
    """
    metric, sep, rest = spec.partition(":")
    values: dict[str, float] = {}
    ok = bool(sep and metric and rest)
    for part in rest.split(",") if ok else []:
        k, eq, v = part.partition("=")
        try:
            if not eq or k.strip() not in ("abs", "rel"):
                raise ValueError
            values[k.strip()] = float(v)
        except ValueError:
            ok = False
    if not ok:
        raise MemlabError(
            f"--margin {spec!r}: expected METRIC:abs=X,rel=Y (e.g. prompt_tokens:rel=0.05)"
        )
    return metric.strip(), Margin(**values)


def load_rules(path: Path) -> dict[str, object]:
    """Read a YAML rules file into ``GateRules`` keyword arguments.

    Format::

        margin: {abs: 0.0, rel: 0.01}
        metrics: {prompt_tokens: {rel: 0.05}, leaks: {abs: 0, rel: 0}}
        exclude: [untrusted_items]
        include_latency: false
        groups: [all, far, corrected]
        strategies: [memory]

    Raises:
        MemlabError: unreadable file, unknown keys, bad values.
    """
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        raise MemlabError(f"gate rules file {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise MemlabError(f"gate rules file {path} is not valid YAML: {exc}") from None
    allowed = {"margin", "metrics", "exclude", "include_latency", "groups", "strategies"}
    if not isinstance(data, dict) or not set(data) <= allowed:
        extra = sorted(set(data) - allowed) if isinstance(data, dict) else data
        raise MemlabError(
            f"gate rules file {path}: unknown keys {extra}; allowed: {sorted(allowed)}"
        )
    out: dict[str, object] = {}
    try:
        if "margin" in data:
            out["margin"] = Margin(**data["margin"])
        if "metrics" in data:
            out["per_metric"] = {str(k): Margin(**v) for k, v in data["metrics"].items()}
    except TypeError as exc:
        raise MemlabError(f"gate rules file {path}: a margin takes abs and rel ({exc})") from None
    for key in ("exclude", "groups", "strategies"):
        if data.get(key) is not None:
            out[key] = [str(x) for x in data[key]]
    if "include_latency" in data:
        out["include_latency"] = bool(data["include_latency"])
    return out
