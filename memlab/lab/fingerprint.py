"""What an experiment was: the transcripts it replayed and the config it ran with.

Every run writes ``fingerprint.json``; the gate compares a run's fingerprint
with its baseline's, so that a run on other transcripts or another config is
reported as a mismatch instead of being compared metric by metric.

The config part leaves out keys that do not change what is measured
(``VOLATILE_KEYS``: progress bars, charts, the bootstrap's size and seed, the
model cache, whose answers are bit-identical to the model's) and
the ``transcripts`` node, whose content is captured by the transcript hashes
(the same files loaded from another path are the same experiment).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memlab.errors import MemlabError
from memlab.lab.transcripts import Transcript

FORMAT = "memlab.fingerprint/1"
FILENAME = "fingerprint.json"
VOLATILE_KEYS = (
    "progress",
    "seed",
    "report.charts",
    "report.bootstrap",
    "transcripts",
    "tune",
    "cache",
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


def fingerprint(transcripts: Sequence[Transcript], config: Mapping[str, Any]) -> dict[str, Any]:
    """The fingerprint of a run: transcript ids with content hashes, and the
    experiment config (a resolved plain dict) with its hash."""
    from memlab import __version__

    exp = experiment_config(config)
    blob = json.dumps(exp, sort_keys=True, default=str).encode("utf-8")
    return {
        "format": FORMAT,
        "memlab_version": __version__,
        "transcripts": {t.id: transcript_hash(t) for t in transcripts},
        "config_sha256": hashlib.sha256(blob).hexdigest(),
        "config": exp,
    }


def write(folder: Path, fp: Mapping[str, Any]) -> Path:
    """Write ``fingerprint.json`` into a run folder atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / FILENAME
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{FILENAME}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(fp, f, indent=1, sort_keys=True, default=str)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(folder: Path, what: str = "run") -> dict[str, Any]:
    """Read a run folder's fingerprint.

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
    except (OSError, json.JSONDecodeError) as exc:
        raise MemlabError(f"{path} is unreadable ({exc}); re-run to regenerate it") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise MemlabError(f"{path} is not a {FORMAT} file; re-run to regenerate it")
    return data


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
    bc, rc = baseline.get("config", {}), run.get("config", {})
    for key in sorted(set(bc) | set(rc)):
        if _matches(key, allow):
            continue
        if key not in rc:
            out.append(f"config key {key}: {bc[key]!r} in the baseline, absent in the run")
        elif key not in bc:
            out.append(f"config key {key}: absent in the baseline, {rc[key]!r} in the run")
        elif bc[key] != rc[key]:
            out.append(f"config key {key}: {bc[key]!r} in the baseline, {rc[key]!r} in the run")
    return out


def _few(items: Sequence[str], n: int = 5) -> str:
    head = ", ".join(items[:n])
    return head + (f" and {len(items) - n} more" if len(items) > n else "")
