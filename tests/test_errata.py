"""Errata (memlab.lab.errata): every error type on hand-made fixtures, the checks on
bad files, a run with errata (what each metric lost or changed, provenance), and
the 34 errata of the LoCoMo development slice."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from memlab.errors import ErrataError
from memlab.lab import errata
from memlab.lab.datasets import DatasetWarning, load_source
from memlab.lab.experiment import run
from memlab.lab.sweep import plan_run
from memlab.lab.transcripts import Transcript, question_id
from tests.conftest import FIXTURES, shared_path

LOCOMO = FIXTURES / "locomo_errata.json"
ERRATA = FIXTURES / "errata_handmade.json"


def loaded(path: Path = LOCOMO) -> list[Transcript]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return load_source("locomo", str(path), progress=False)


def probes(transcripts: list[Transcript]) -> dict[str, Any]:
    return {question_id(t, turn): turn.probe for t in transcripts for turn in t.probes}


def write(tmp_path: Path, data: Any, name: str = "errata.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return p


# -- each error type ---------------------------------------------------------------------
def test_each_error_type_gets_its_documented_action() -> None:
    before = loaded()
    fixes = errata.load(ERRATA)
    result = errata.apply(before, fixes)
    old, new = probes(before), probes(result.transcripts)
    # WRONG_CITATION: corrected evidence, same answer, still scored.
    assert old["locomo_0_qa0"].evidence == ("D1:3",)
    assert new["locomo_0_qa0"].evidence == ("D1:1",) and new["locomo_0_qa0"].answer == "Rex"
    # HALLUCINATION, TEMPORAL_ERROR, ATTRIBUTION_ERROR: the gold answer is dropped.
    for q in ("locomo_0_qa1", "locomo_0_qa2", "locomo_0_qa3"):
        assert old[q].answer and new[q].answer is None and new[q].scored
        assert new[q].evidence == old[q].evidence
    # INCOMPLETE: answer dropped, the fuller evidence taken.
    assert new["locomo_0_qa5"].answer is None
    assert new["locomo_0_qa5"].evidence == ("D2:1", "D2:3")
    # AMBIGUOUS: excluded (kept, unscored), nothing else changes.
    assert new["locomo_0_qa4"].scored is False and new["locomo_0_qa4"].answer == "the beach"
    # An explicit action: a clean corrected answer.
    assert new["locomo_1_qa0"].answer == "Eva"
    # Untouched questions stay as they were; the entry for another file is skipped.
    assert new["locomo_0_qa6"] == old["locomo_0_qa6"]
    assert result.count == 7 and result.skipped == ["locomo_7_qa3"]
    # Each changed probe remembers what it was; the inputs are not modified.
    record = new["locomo_0_qa0"].meta["errata"]
    assert record == {"error_type": "WRONG_CITATION", "action": "evidence",
                      "evidence": ["D1:3"], "answer": "Rex", "scored": True}  # fmt: skip
    assert probes(loaded()) == old
    assert all(t.meta[errata.TRANSCRIPT_KEY] == fixes.sha256 for t in result.transcripts)


def test_original_restores_the_probe_before_its_erratum() -> None:
    before = loaded()
    after = errata.apply(before, errata.load(ERRATA)).transcripts
    for t_old, t_new in zip(before, after, strict=True):
        for a, b in zip(t_old.turns, t_new.turns, strict=True):
            restored = errata.original(b)
            if b.probe is not None and "errata" in b.probe.meta:
                assert restored == a
            else:
                assert restored is None


def test_applied_table_and_descriptions() -> None:
    after = errata.apply(loaded(), errata.load(ERRATA)).transcripts
    table = errata.applied(after)
    assert list(table.columns) == errata.APPLIED_COLUMNS and len(table) == 7
    row = table.set_index("question_id").loc["locomo_0_qa0"]
    assert row.error_type == "WRONG_CITATION" and row.action == "evidence"
    assert "['D1:3'] -> ['D1:1']" in row.change
    assert table.set_index("question_id").loc["locomo_1_qa0"].change.endswith("-> 'Eva'")
    assert errata.applied(loaded()).empty


def test_errata_key_any_dataset_by_the_adapters_question_id(tmp_path: Path) -> None:
    # Transcripts without adapter ids are keyed <transcript id>/<turn id>.
    from memlab.lab.transcripts import load

    t = load(FIXTURES / "handmade.json")
    fix = write(tmp_path, [{"question_id": f"{t.id}/t10", "error_type": "WRONG_CITATION",
                            "correct_evidence": ["t0"]}])  # fmt: skip
    (after,) = errata.apply([t], errata.load(fix)).transcripts
    assert after.turns[after.index["t10"]].probe.evidence == ("t0",)  # type: ignore[union-attr]


# -- bad files are clear errors -------------------------------------------------------------
GOOD = {"question_id": "locomo_0_qa0", "error_type": "WRONG_CITATION", "correct_evidence": ["D1:1"]}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "is not JSON text"),
        ({"errata": []}, "must be a JSON list"),
        (["x"], "entry #0: must be an object"),
        ([{"error_type": "WRONG_CITATION"}], "field 'question_id': missing"),
        ([{"question_id": "q"}], "field 'error_type': missing"),
        ([{"question_id": "q", "error_type": "MYSTERY"}], "'MYSTERY' has no default action"),
        ([{**GOOD, "action": "rewrite"}], "field 'action': must be one of"),
        ([{**GOOD, "correct_evidence": "D1:1"}], "must be a list of turn ids"),
        ([{**GOOD, "correct_evidence": []}], "action 'evidence' (WRONG_CITATION) needs"),
        ([{"question_id": "q", "error_type": "X", "action": "answer"}], "needs the corrected"),
        ([GOOD, GOOD], "entries #0 and #1 both correct question 'locomo_0_qa0'"),
        # true and NaN became the gold answers "True" and "nan"
        ([{**GOOD, "action": "answer", "correct_answer": True}], "must be a string (or a"),
        ([{**GOOD, "action": "answer", "correct_answer": math.nan}], "got nan"),
        ([{**GOOD, "action": "answer", "correct_answer": ["x"]}], "correct_answer': must be"),
    ],
)
def test_bad_files_name_the_entry_and_field(tmp_path: Path, data: Any, message: str) -> None:
    with pytest.raises(ErrataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        errata.load(write(tmp_path, data))


def test_errata_that_do_not_fit_the_transcripts(tmp_path: Path) -> None:
    with pytest.raises(ErrataError, match="does not exist"):
        errata.load(tmp_path / "nope.json")
    ts = loaded()
    wrong_text = write(tmp_path, [{**GOOD, "question": "What did Ben paint?"}])
    with pytest.raises(ErrataError, match="is not this run's question"):
        errata.apply(ts, errata.load(wrong_text))
    later = write(tmp_path, [{**GOOD, "correct_evidence": ["D2:1", "D9:9"]}])
    with pytest.raises(ErrataError, match=r"\['D9:9'\] name no earlier turn"):
        errata.apply(ts, errata.load(later))
    nothing = write(tmp_path, [{**GOOD, "question_id": "q-17"}])
    with pytest.raises(ErrataError, match="none of its 1 errata names a question"):
        errata.apply(ts, errata.load(nothing))
    once = errata.apply(ts, errata.load(ERRATA)).transcripts
    with pytest.raises(ErrataError, match="already has errata applied"):
        errata.apply(once, errata.load(ERRATA))
    assert errata.apply(ts, errata.load(write(tmp_path, []))).transcripts == ts


# -- a run with errata ---------------------------------------------------------------------
def _run(tmp_path: Path, name: str, *extra: str) -> Any:
    cfg = plan_run(
        [
            "transcripts=locomo",
            f"transcripts.path={LOCOMO}",
            "strategies=[stuff_all,memory_longterm]",
            "report.bootstrap=0",
            "report.charts=false",
            "progress=false",
            *extra,
        ]
    ).cfg
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DatasetWarning)
        return run(cfg, tmp_path / name)


def test_a_run_reports_the_errata_and_what_each_metric_lost_or_changed(tmp_path: Path) -> None:
    plain = _run(tmp_path, "plain")
    fixed = _run(tmp_path, "fixed", f"transcripts.errata={ERRATA}")
    out = fixed.out
    table = pd.read_csv(out / "errata.csv")
    assert len(table) == 7 and set(table.error_type) >= set(errata.ERROR_TYPES)
    impact = pd.read_csv(out / "errata_impact.csv").set_index(["strategy", "metric"])
    s = impact.loc[("stuff_all", "answer_in_context")]
    # Four answers dropped (hallucination, temporal, attribution, incomplete) and one
    # question excluded: five lost; the corrected answer "Eva" is in the context.
    assert (s.errata_probes, s.lost, s.gained) == (7, 5, 0)
    assert s.changed == 1 and s.mean_after == 1.0  # Ava -> Eva: 0 before, 1 after
    ev = impact.loc[("stuff_all", "evidence_recall")]
    assert ev.lost == 1 and ev.changed == 0  # stuff_all holds every turn: only the exclusion
    # The probe rows carry the erratum and the scores against the original ground truth.
    rows = fixed.probes.set_index(["strategy", "question_id"])
    cited = rows.loc[("memory_longterm", "locomo_0_qa0")]
    assert cited.errata == "WRONG_CITATION:evidence"
    assert json.loads(cited.errata_before)["_scored"] is True
    assert math.isnan(rows.loc[("stuff_all", "locomo_0_qa1")].answer_in_context)
    # Provenance: the errata file's hash; the transcripts' content changed too.
    fp_fixed = json.loads((out / "fingerprint.json").read_text())
    fp_plain = json.loads((plain.out / "fingerprint.json").read_text())
    assert fp_fixed["provenance"]["errata"]["sha256"] == errata.load(ERRATA).sha256
    assert fp_fixed["provenance"]["errata"]["entries"] == 8
    assert fp_plain["provenance"]["errata"] is None
    assert fp_fixed["transcripts"] != fp_plain["transcripts"]
    assert not (plain.out / "errata.csv").exists()
    # The excluded question left the scored groups.
    n = {
        r: int(x.summary.query("strategy == 'stuff_all' and group == 'all' and "
                               "metric == 'evidence_recall'")["n"].iloc[0])
        for r, x in (("plain", plain), ("fixed", fixed))
    }  # fmt: skip
    assert n["fixed"] == n["plain"] - 1


def test_a_bad_errata_file_fails_before_the_run_writes(tmp_path: Path) -> None:
    bad = write(tmp_path, [{"question_id": "q"}])
    with pytest.raises(ErrataError, match="error_type"):
        _run(tmp_path, "bad", f"transcripts.errata={bad}")
    assert not (tmp_path / "bad").exists()


# -- the development slice's 34 errata -------------------------------------------------------
def test_dev_slice_errata() -> None:
    data = shared_path("datasets", "locomo", "locomo_dev2.json")
    audit = shared_path("datasets", "locomo", "audit", "errors_dev2.json")
    before = loaded(data)
    fixes = errata.load(audit)
    result = errata.apply(before, fixes)
    assert result.count == 34 and result.skipped == []
    old, new = probes(before), probes(result.transcripts)
    counts: dict[str, int] = {}
    for e in fixes.entries:
        counts[e.error_type] = counts.get(e.error_type, 0) + 1
        a, b = old[e.question_id], new[e.question_id]
        if e.error_type == "WRONG_CITATION":
            assert b.evidence == tuple(dict.fromkeys(e.correct_evidence or ()))
            assert b.answer == a.answer and b.scored
        elif e.error_type == "AMBIGUOUS":
            assert not b.scored and b.answer == a.answer
        else:
            assert b.answer is None and b.scored
    assert counts == {"WRONG_CITATION": 15, "HALLUCINATION": 5, "AMBIGUOUS": 5,
                      "ATTRIBUTION_ERROR": 4, "TEMPORAL_ERROR": 3, "INCOMPLETE": 2}  # fmt: skip
    changed_evidence = [q for q in old if old[q].evidence != new[q].evidence]
    assert len(changed_evidence) >= 15


def test_impact_counts_by_hand_including_a_judges_grade() -> None:
    def before(answer: bool = True, scored: bool = True, **values: float | None) -> str:
        return json.dumps({**values, "_answer": answer, "_scored": scored})

    rows = pd.DataFrame(
        [
            # corrected evidence: recall 0 -> 1 (changed); the grade stands (unchanged)
            ("s", "WRONG_CITATION:evidence", True, before(evidence_recall=0.0), 1.0, 1.0),
            # answer dropped: the grade is lost; recall unchanged
            ("s", "HALLUCINATION:drop_answer", True, before(evidence_recall=0.5), 0.5, 0.0),
            # excluded: every metric lost
            ("s", "AMBIGUOUS:exclude", False, before(evidence_recall=1.0), 1.0, 1.0),
            # answer corrected: regraded (changed)
            ("s", "TYPO:answer", True, before(evidence_recall=1.0), 1.0, 1.0),
            # no erratum: not counted
            ("s", None, True, None, 0.0, 0.0),
        ],
        columns=["strategy", "errata", "scored", "errata_before", "evidence_recall",
                 "answer_accuracy"],
    )  # fmt: skip
    table = errata.impact(rows, ["evidence_recall", "answer_accuracy"]).set_index("metric")
    ev = table.loc["evidence_recall"]
    assert (ev.errata_probes, ev.lost, ev.gained, ev.changed, ev.unchanged) == (4, 1, 0, 1, 2)
    assert ev.mean_before == pytest.approx(2.5 / 4) and ev.mean_after == pytest.approx(2.5 / 3)
    acc = table.loc["answer_accuracy"]
    assert (acc.lost, acc.changed, acc.unchanged) == (2, 1, 1)
    assert acc.mean_before == pytest.approx(1.0)  # only the grade known before: 1.0
    assert errata.impact(rows.drop(columns="errata_before"), ["evidence_recall"]).empty
