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
``_ms``) depend on the machine and are left out unless asked for. Directions
come from the metric registry.

``evaluate`` is the whole ``memlab gate`` check: the two folders must hold the
same experiment (fingerprints) and finished runs (sealed summaries), then the
summaries are compared; ``Outcome.publish`` writes gate.md, gate.csv and the CI
job summary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from memlab.errors import MemlabError, OutputError
from memlab.lab.metrics import direction

EPS = 1e-9
COLUMNS = [
    "strategy", "group", "metric", "direction", "baseline", "ci_low", "ci_high", "run",
    "delta", "tolerance", "status",
]  # fmt: skip


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
    except UnicodeDecodeError as exc:  # a corrupt or binary file: not one memlab wrote
        raise MemlabError(
            f"the {what} {f} is not a summary table (not UTF-8 text: {exc.reason} at byte "
            f"{exc.start}); re-run to regenerate it"
        ) from None
    needed = {"strategy", "group", "metric", "mean", "ci_low", "ci_high"}
    if not needed <= set(df.columns):
        raise MemlabError(f"the {what} {f} lacks columns {sorted(needed - set(df.columns))}")
    return df


def compare(baseline: pd.DataFrame, run: pd.DataFrame, rules: GateRules) -> GateResult:
    """Compare two summaries under ``rules`` (see the module docstring)."""
    base = baseline.dropna(subset=["mean"])
    if rules.groups is not None:
        # A misspelt group would otherwise gate nothing of it, and pass.
        unknown = sorted(set(rules.groups) - set(baseline["group"]))
        if unknown:
            raise MemlabError(
                f"groups {unknown} are not in the baseline; its groups are "
                f"{sorted(set(baseline['group']))}"
            )
        base = base[base["group"].isin(rules.groups)]
    if rules.strategies is not None:
        unknown = sorted(set(rules.strategies) - set(baseline["strategy"]))
        if unknown:
            raise MemlabError(f"strategies {unknown} are not in the baseline")
        base = base[base["strategy"].isin(rules.strategies)]
    # A misspelt metric would otherwise be gated anyway (exclude) or at the default
    # margin (per_metric), silently.
    metrics = set(baseline["metric"])
    named = (
        ("--exclude or the rules file's exclude", rules.exclude),
        ("--margin or the rules file's metrics", rules.per_metric),
    )
    for what, names in named:
        unknown = sorted(set(names) - metrics)
        if unknown:
            raise MemlabError(
                f"{what} names metrics {unknown} that are not in the baseline; check the "
                f"spelling (its metrics are {', '.join(sorted(metrics))})"
            )
    excluded = sorted({m for m in base["metric"] if not rules.gated(m)})
    base = base[base["metric"].map(rules.gated)]
    if base.empty:
        raise MemlabError(
            "the gate rules leave no metric of the baseline to compare (every one excluded "
            "or filtered out, or none has a mean); gating nothing is not a pass"
        )
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
    if "metrics" in data and not isinstance(data["metrics"], dict):
        raise MemlabError(
            f"gate rules file {path}: metrics must map metric names to margins, e.g. "
            f"metrics: {{prompt_tokens: {{rel: 0.05}}}}; got {data['metrics']!r}"
        )
    try:
        if "margin" in data:
            out["margin"] = Margin(**data["margin"])
        if "metrics" in data:
            out["per_metric"] = {str(k): Margin(**v) for k, v in data["metrics"].items()}
    except TypeError as exc:
        raise MemlabError(f"gate rules file {path}: a margin takes abs and rel ({exc})") from None
    for key in ("exclude", "groups", "strategies"):
        value = data.get(key)
        if value is None:
            continue
        # A bare string would be read letter by letter (exclude: leaks -> l, e, a, ...).
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise MemlabError(
                f"gate rules file {path}: {key} must be a list of names, e.g. {key}: [{value}]"
                if isinstance(value, str)
                else f"gate rules file {path}: {key} must be a list of names, got {value!r}"
            )
        out[key] = list(value)
    if "include_latency" in data:
        # bool('no') is True: only a YAML boolean says what was meant.
        if not isinstance(data["include_latency"], bool):
            raise MemlabError(
                f"gate rules file {path}: include_latency must be true or false, "
                f"got {data['include_latency']!r}"
            )
        out["include_latency"] = data["include_latency"]
    return out


def rules(
    *,
    file: Path | None = None,
    margin_abs: float | None = None,
    margin_rel: float | None = None,
    margins: Sequence[str] = (),
    include_latency: bool = False,
    exclude: Sequence[str] = (),
    groups: Sequence[str] | None = None,
    strategies: Sequence[str] | None = None,
) -> GateRules:
    """Gate rules from a rules file with command-line values on top.

    Args:
        file: a YAML rules file (see ``load_rules``).
        margin_abs: the default margin's absolute part (default 0).
        margin_rel: the default margin's part relative to |baseline| (default 0.01).
        margins: per-metric margins, ``METRIC:abs=X,rel=Y``.
        include_latency: also gate ``*_ms`` metrics.
        exclude: metrics never gated (added to the file's).
        groups: only these groups (replace the file's).
        strategies: only these strategies (replace the file's).
    """
    kwargs: dict[str, Any] = load_rules(file) if file else {}
    default = kwargs.get("margin", Margin(abs=0.0, rel=0.01))
    kwargs["margin"] = Margin(
        abs=margin_abs if margin_abs is not None else default.abs,
        rel=margin_rel if margin_rel is not None else default.rel,
    )
    per = dict(kwargs.get("per_metric", {}))
    per.update(parse_margin(m) for m in margins)
    kwargs["per_metric"] = per
    kwargs["exclude"] = [*kwargs.get("exclude", []), *exclude]
    if include_latency:
        kwargs["include_latency"] = True
    if groups:
        kwargs["groups"] = list(groups)
    if strategies:
        kwargs["strategies"] = list(strategies)
    return GateRules(**kwargs)


@dataclass
class Outcome:
    """What ``evaluate`` found: the comparison (None when the folders hold
    different experiments), the report texts, and the error to raise, if any."""

    run_dir: Path
    result: GateResult | None
    text: str
    markdown: str
    error: MemlabError | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and self.result is not None and self.result.passed

    def publish(self, markdown_path: Path | None = None, step_summary: str | None = None) -> Path:
        """Write gate.md (or ``markdown_path``), gate.csv, and append the report to
        the CI job summary file (``$GITHUB_STEP_SUMMARY``) when one is named.

        Raises:
            OutputError: a file cannot be written (naming it).
        """
        from memlab.lab.files import atomic_write, atomic_write_text

        md = markdown_path or self.run_dir / "gate.md"
        if md.is_dir():
            raise OutputError(f"cannot write the gate report to {md}: it is a folder")
        atomic_write_text(md, self.markdown)
        if self.result is not None:
            table = self.result.table
            atomic_write(self.run_dir / "gate.csv", lambda f: table.to_csv(f, index=False))
        if step_summary:
            try:
                with open(step_summary, "a", encoding="utf-8") as f:
                    f.write(self.markdown + "\n")
            except OSError as exc:
                raise OutputError(
                    f"cannot append the gate report to $GITHUB_STEP_SUMMARY ({step_summary}): "
                    f"{exc.strerror or exc}"
                ) from None
        return md


def evaluate(
    baseline: Path, run_dir: Path, gate_rules: GateRules, *, allow_config: Sequence[str] = ()
) -> Outcome:
    """The ``memlab gate`` check of a run folder against a baseline.

    Args:
        baseline: the baseline's summary.csv or its run folder.
        run_dir: the run folder to check.
        gate_rules: margins and filters.
        allow_config: config keys (or prefixes) whose differences are accepted.

    Raises:
        MemlabError: a folder is not a finished run, or a summary is unreadable.
    """
    from memlab.lab import fingerprint

    base_file = baseline / "summary.csv" if baseline.is_dir() else baseline
    if not (run_dir / "summary.csv").exists():
        raise MemlabError(
            f"{run_dir} is not a run folder (no summary.csv); pass `memlab run`'s folder"
        )
    baseline_df = read_summary(base_file, "baseline")
    run_df = read_summary(run_dir, "run")
    base_fp = fingerprint.load(base_file.parent, "baseline")
    run_fp = fingerprint.load(run_dir, "run")
    fingerprint.check_sealed(base_file.parent, base_fp, "baseline")
    fingerprint.check_sealed(run_dir, run_fp, "run")
    diffs = fingerprint.differences(base_fp, run_fp, allow=allow_config)
    if diffs:
        mismatch = MemlabError(
            f"the run is not the baseline's experiment ({len(diffs)} differences): "
            + "; ".join(diffs[:5])
            + ("; ..." if len(diffs) > 5 else "")
            + ". Run the baseline's config on its transcripts, pass --allow-config KEY for a "
            "deliberate difference, or regenerate the baseline (make baseline)"
        )
        md = (
            "## memlab gate\n\n**ERROR: different experiment**\n\n"
            + "\n".join(f"- {d}" for d in diffs)
            + "\n"
        )
        return Outcome(run_dir, None, "", md, mismatch)
    result = compare(baseline_df, run_df, gate_rules)
    notes = [f"allowed config differences under: {', '.join(allow_config)}"] * bool(allow_config)
    md = to_markdown(result, baseline=str(base_file), run=str(run_dir), notes=notes)
    error: MemlabError | None = None
    if result.missing:
        error = MemlabError(
            f"{len(result.missing)} baseline metrics are missing from the run, e.g. "
            + ", ".join(result.missing[:3])
            + "; a missing metric is an error, not a pass"
        )
    return Outcome(run_dir, result, to_text(result), md, error)
