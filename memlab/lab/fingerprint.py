"""What an experiment was: the transcripts it replayed and the config it ran with.

Every run writes ``fingerprint.json``; the gate compares a run's fingerprint
with its baseline's, so that a run on other transcripts or another config is
reported as a mismatch instead of being compared metric by metric.

The config part leaves out keys that do not change what is measured
(``VOLATILE_KEYS``: progress bars, charts, the bootstrap's size and seed, the
model cache, whose answers are bit-identical to the model's) and
the ``transcripts`` node, whose content is captured by the transcript hashes
(the same files loaded from another path are the same experiment).

A finished run *seals* its fingerprint with the SHA-256 of the summary.csv it
wrote (``seal``); the gate refuses a run folder whose summary.csv is not the
sealed one (a run that failed or was interrupted after an earlier run wrote into
the same folder, or a summary edited by hand), and a run that a reader's cost
limit stopped early (``incomplete``: why, what it spent, how many transcripts
and probes it left out). The seal also records the SHA-256 of probes.csv and
turns.csv (``rows_sha256``), which ``memlab report`` and ``memlab compare`` read
(``check_rows``).

A reader's and judge's model, endpoint, prompt and answer length are part of
the experiment; how they were reached (timeouts, retries, the key's variable,
concurrency, the cost limit, the endpoint check) is not.

Provenance (``provenance``): what the numbers rest on besides the config:
the dataset's SHA-256 (its file, or its folder's files), the errata file's
SHA-256 and how many errata it applied, and the judge's name, model and prompt
hash. The gate refuses runs whose provenance differs (a deliberate comparison
passes ``--allow-config provenance.<part>``).

Format 3 (this one) records every key of the effective config (plug-ins by
their registry ``name``, each strategy with its own kind's keys) and the
provenance. A format-2 fingerprint recorded no provenance (read as not known,
and not compared). A format-1 fingerprint (memlab 0.1 before the registries) is
read as format 2: plug-ins named by ``_target_`` get their registry name,
strategy keys that the kind does not have are dropped, and keys it did not
record are not compared.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memlab.errors import MemlabError
from memlab.lab.files import atomic_write
from memlab.lab.transcripts import Transcript

FORMAT = "memlab.fingerprint/3"
FORMAT_2 = "memlab.fingerprint/2"
FORMAT_1 = "memlab.fingerprint/1"
SUMMARY = "summary.csv"
ROWS = ("probes.csv", "turns.csv")
"""The row tables a run's seal covers besides its summary (what report and compare read)."""
FILENAME = "fingerprint.json"
_TRANSPORT = (
    "api_key_env",
    "api_key_header",
    "timeout",
    "max_retries",
    "backoff",
    "max_delay",
    "seed",
)
VOLATILE_KEYS = (
    "progress",
    "seed",
    "report.charts",
    "report.bootstrap",
    "transcripts",
    "tune",
    "cache",
    *(f"{group}.{key}" for group in ("reader", "judge") for key in _TRANSPORT),
    "reader.concurrency",
    "reader.max_usd",
    "reader.dry_run",
    "reader.preflight",
)


def transcript_hash(transcript: Transcript) -> str:
    """SHA-256 of a transcript's content (canonical JSON: sorted keys, no whitespace),
    so reformatting a file or moving it does not change it."""
    text = json.dumps(
        transcript.to_dict(), sort_keys=True, ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def flatten(tree: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists and scalars are leaves."""
    if isinstance(tree, Mapping) and tree:
        out: dict[str, Any] = {}
        for k, v in tree.items():
            out.update(flatten(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: tree} if prefix else {}


def _matches(key: str, prefixes: Iterable[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def experiment_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config keys that define an experiment (dotted, volatile keys removed)."""
    return {k: v for k, v in sorted(flatten(config).items()) if not _matches(k, VOLATILE_KEYS)}


def fingerprint(
    transcripts: Sequence[Transcript],
    config: Mapping[str, Any],
    provenance: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The fingerprint of a run: transcript ids with content hashes, the experiment
    config (a resolved plain dict) with its hash, and the provenance (see
    ``provenance``; None records an unknown one)."""
    from memlab import __version__

    exp = experiment_config(config)
    blob = json.dumps(exp, sort_keys=True, default=str).encode("utf-8")
    return {
        "format": FORMAT,
        "memlab_version": __version__,
        "transcripts": {t.id: transcript_hash(t) for t in transcripts},
        "config_sha256": hashlib.sha256(blob).hexdigest(),
        "config": exp,
        "provenance": dict(provenance) if provenance is not None else None,
    }


def provenance(
    dataset: str,
    dataset_sha256: str | None,
    errata: Mapping[str, Any] | None = None,
    judge: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A run's provenance.

    Args:
        dataset: the dataset's name (``transcripts.name``).
        dataset_sha256: the SHA-256 of what it read (``datasets.dataset_sha256``).
        errata: ``{"sha256", "entries", "applied"}`` of the errata file, or None.
        judge: ``judges.provenance`` of the judge that graded the answers, or None
            (no reader).
    """
    return {
        "dataset": {"name": dataset, "sha256": dataset_sha256},
        "errata": dict(errata) if errata is not None else None,
        "judge": dict(judge) if judge is not None else None,
    }


def write(folder: Path, fp: Mapping[str, Any]) -> Path:
    """Write ``fingerprint.json`` into a run folder atomically.

    Raises:
        OutputError: the folder cannot be written.
    """

    def dump(f: Any) -> None:
        json.dump(fp, f, indent=1, sort_keys=True, default=str)
        f.write("\n")

    return atomic_write(folder / FILENAME, dump)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def seal(folder: Path) -> None:
    """Record the SHA-256 of the folder's summary.csv in its fingerprint (the run,
    or a rebuild of its summary, is complete)."""
    fp = load(folder)
    fp["summary_sha256"] = file_sha256(folder / SUMMARY)
    fp["rows_sha256"] = {
        name: file_sha256(folder / name) for name in ROWS if (folder / name).exists()
    }
    fp.pop("partial", None)
    write(folder, fp)


def check_rows(folder: Path, fp: Mapping[str, Any], what: str = "run") -> None:
    """Refuse a run folder whose probes.csv or turns.csv is not what its run wrote (a
    copy cut short, a file edited by hand): tables rebuilt or runs compared from them
    would be wrong without a sign. A seal from before rows were sealed checks nothing.

    Raises:
        MemlabError: naming the file.
    """
    sealed = fp.get("rows_sha256")
    if not isinstance(sealed, Mapping):
        return
    for name, digest in sealed.items():
        path = folder / str(name)
        # a missing table is the reader's to report (a gate baseline keeps only its
        # summary): "no probes.csv here" says more than "damaged"
        if path.exists() and file_sha256(path) != digest:
            raise MemlabError(
                f"the {what} folder {folder}: {name} is not the one its run wrote (cut "
                "short, damaged or changed since); restore the folder or re-run it"
            )


def check_sealed(folder: Path, fp: Mapping[str, Any], what: str = "run") -> None:
    """Refuse a run folder whose summary.csv is not the one its run wrote.

    Raises:
        MemlabError: the fingerprint has no seal (the run did not finish), the
            seal does not match summary.csv, or a cost limit stopped the run.
    """
    if fp.get("format") == FORMAT_1:
        return  # written before runs were sealed
    incomplete = fp.get("incomplete")
    if incomplete:
        info = incomplete if isinstance(incomplete, Mapping) else {}
        raise MemlabError(
            f"the {what} folder {folder} holds an incomplete run "
            f"({info.get('reason', 'it stopped early')}, {info.get('probes_unanswered', '?')} "
            "probes unanswered); re-run it with a higher reader.max_usd (the answers it "
            "received are cached: they cost nothing again)"
        )
    check_finished(folder, fp, what)
    sealed = fp.get("summary_sha256")
    summary = folder / SUMMARY
    if not summary.exists() or file_sha256(summary) != sealed:
        raise MemlabError(
            f"the {what} folder {folder}: summary.csv is not the one its run wrote "
            "(another run wrote into this folder, or the file was changed); re-run it, "
            "or rebuild it with `memlab report`"
        )


def check_finished(folder: Path, fp: Mapping[str, Any], what: str = "run") -> None:
    """Refuse a run folder whose run did not finish: its config.yaml and fingerprint
    are that run's, but its probes.csv and turns.csv may be an earlier run's (a
    rerun into the same folder that failed or was interrupted).

    Raises:
        MemlabError: the fingerprint (not format 1) has no summary seal.
    """
    if fp.get("format") != FORMAT_1 and fp.get("summary_sha256") is None:
        raise MemlabError(
            f"the {what} folder {folder} holds no finished run (its fingerprint.json has no "
            "summary seal: the run failed or was interrupted); re-run it"
        )


def load(folder: Path, what: str = "run") -> dict[str, Any]:
    """Read a run folder's fingerprint (format 1 is upgraded, see the module doc).

    Raises:
        MemlabError: missing or unreadable file (the message says how to make one).
    """
    path = folder / FILENAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise MemlabError(
            f"the {what} folder {folder} has no {FILENAME}, so it cannot be matched; "
            "re-run it with this memlab (`make baseline` regenerates the baseline)"
        ) from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise MemlabError(f"{path} is unreadable ({exc}); re-run to regenerate it") from None
    if not isinstance(data, dict) or data.get("format") not in (FORMAT, FORMAT_2, FORMAT_1):
        raise MemlabError(f"{path} is not a {FORMAT} file; re-run to regenerate it")
    if data["format"] == FORMAT_1:
        data["config"] = upgrade_config(data.get("config", {}))
        data["partial"] = True
    return data


def _registered_name(group: str, target: str) -> str:
    """The registry name of the class a format-1 ``_target_`` names (else the target)."""
    from memlab.lab.config import PLUGINS

    module, _, attr = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError):
        return target
    return next((name for name, c in PLUGINS[group].items() if c is cls), target)


def upgrade_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A format-1 experiment config in format-2 terms (see the module doc)."""
    from memlab.lab.config import PLUGINS
    from memlab.lab.strategies import STRATEGIES

    out = dict(config)
    for group in PLUGINS:
        target = out.pop(f"{group}._target_", None)
        if target is not None:
            out[f"{group}.name"] = _registered_name(group, str(target))
    for key in [k for k in out if k.startswith("strategies.")]:
        name, _, sub = key[len("strategies.") :].partition(".")
        kind = out.get(f"strategies.{name}.kind")
        if sub == "kind" or kind not in STRATEGIES:
            continue
        keys = STRATEGIES.get(str(kind)).entry(name, {})
        if sub.split(".")[0] not in keys:
            del out[key]  # the old catch-all entry's keys that this kind does not have
    return out


def differences(
    baseline: Mapping[str, Any], run: Mapping[str, Any], allow: Sequence[str] = ()
) -> list[str]:
    """How two fingerprints differ, one line per difference (empty: same experiment).

    Args:
        baseline, run: fingerprints.
        allow: config keys (or prefixes, e.g. ``memory.weights``) whose
            differences are accepted, for deliberate comparisons of settings.
    """
    out: list[str] = []
    partial_base, partial_run = bool(baseline.get("partial")), bool(run.get("partial"))
    bt, rt = baseline.get("transcripts", {}), run.get("transcripts", {})
    missing = sorted(set(bt) - set(rt))
    extra = sorted(set(rt) - set(bt))
    changed = sorted(k for k in set(bt) & set(rt) if bt[k] != rt[k])
    if missing:
        out.append(f"transcripts missing from the run: {_few(missing)}")
    if extra:
        out.append(f"transcripts not in the baseline: {_few(extra)}")
    if changed:
        out.append(f"transcripts whose content changed: {_few(changed)}")
    out += provenance_differences(baseline, run, allow)
    bc, rc = baseline.get("config", {}), run.get("config", {})
    for key in sorted(set(bc) | set(rc)):
        if _matches(key, allow):
            continue
        if (key not in bc and partial_base) or (key not in rc and partial_run):
            continue  # a format-1 fingerprint did not record this key
        if key not in rc:
            out.append(f"config key {key}: {bc[key]!r} in the baseline, absent in the run")
        elif key not in bc:
            out.append(f"config key {key}: absent in the baseline, {rc[key]!r} in the run")
        elif bc[key] != rc[key]:
            out.append(f"config key {key}: {bc[key]!r} in the baseline, {rc[key]!r} in the run")
    return out


PROVENANCE_KEYS = (
    ("dataset", "sha256", "dataset file"),
    ("errata", "sha256", "errata file"),
    ("judge", "name", "judge"),
    ("judge", "model", "judge model"),
    ("judge", "prompt_sha256", "judge prompt"),
)


def provenance_differences(
    baseline: Mapping[str, Any], run: Mapping[str, Any], allow: Sequence[str] = ()
) -> list[str]:
    """How two fingerprints' provenance differs, one line per difference. A
    fingerprint that recorded none (format 1 or 2) is not compared; ``allow``
    prefixes such as ``provenance.judge`` accept a part's differences."""
    if not baseline.get("provenance") or not run.get("provenance"):
        return []
    bp, rp = baseline.get("provenance") or {}, run.get("provenance") or {}
    out = []
    for part, key, label in PROVENANCE_KEYS:
        if _matches(f"provenance.{part}.{key}", allow):
            continue
        b, r = (bp.get(part) or {}).get(key), (rp.get(part) or {}).get(key)
        if b != r:
            out.append(f"{label} differs: {_short(b)} in the baseline, {_short(r)} in the run")
    return out


def _short(value: Any) -> str:
    if value is None:
        return "none"
    text = str(value)
    return f"sha256 {text[:12]}…" if len(text) == 64 else repr(text)


def _few(items: Sequence[str], n: int = 5) -> str:
    head = ", ".join(items[:n])
    return head + (f" and {len(items) - n} more" if len(items) > n else "")
