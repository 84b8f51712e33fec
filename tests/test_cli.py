"""The memlab command line (memlab.cli): help, exit codes, one-line errors,
progress bars, file modes. What the commands compute is tested with the lab
module each one calls (test_experiment, test_sweep, test_gate, test_tune...)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from memlab import __version__
from memlab.cli import COMMANDS, main
from tests.conftest import default_sigint, memlab, on_a_terminal
from tests.transcript_gen import write_transcripts

ROOT = Path(__file__).resolve().parents[1]


def test_demo_runs_and_explains(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "remembered 12 memories for 2 users" in out
    assert "PagerDuty" in out and "weights:" in out


def test_unknown_command_exits_nonzero(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["frobnicate"]) == 2
    assert "unknown command" in capsys.readouterr().err


def test_console_script_prints_errors_without_traceback() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "frobnicate"], capture_output=True, text=True
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


# -- memlab run / report ------------------------------------------------------------
@pytest.fixture
def tdir(handmade_dir: Path) -> Path:
    return handmade_dir


def test_run_writes_tables_and_charts(tmp_path: Path, tdir: Path) -> None:
    out = tmp_path / "run"
    proc = memlab(
        "run",
        "transcripts=dir",
        f"transcripts.path={tdir}",
        f"hydra.run.dir={out}",
        "progress=false",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ["summary.csv", "probes.csv", "turns.csv", "config.yaml"]:
        assert (out / name).exists(), name
    assert {p.name for p in (out / "charts").glob("*.png")} >= {
        "recall_precision.png",
        "prompt_tokens.png",
        "store_growth.png",
        "stale_rate.png",
    }
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.columns) == [
        "strategy",
        "group",
        "metric",
        "mean",
        "ci_low",
        "ci_high",
        "n",
    ]
    assert set(summary.strategy) >= {
        "stuff_all",
        "sliding_window",
        "memory",
        "memory_similarity_only",
        "memory_no_summarize",
        "memory_no_floor",
        "memory_oracle_salience",
    }
    assert (summary[summary.metric == "leaks"]["mean"] == 0).all()
    assert "results:" in proc.stdout and str(out) in proc.stdout
    # report rebuilds the same summary from the rows
    (out / "summary.csv").unlink()
    rep = memlab("report", str(out), cwd=tmp_path)
    assert rep.returncode == 0, rep.stderr
    assert pd.read_csv(out / "summary.csv").equals(summary)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("memory.weights.recency=-1", "config key 'memory.weights.recency': must be a number >= 0"),
        ("budget=0", "config key 'budget': must be a positive integer"),
        ("memory.wieghts.recency=1", "config key 'memory.wieghts.recency': it does not exist"),
        ("store=nosuch", "config group 'store' has no option 'nosuch'"),
        ("strategies.memory.memory.weights.usage=-2", "strategies.memory.memory.weights.usage"),
    ],
)
def test_bad_config_is_one_line_error(
    tmp_path: Path, tdir: Path, override: str, message: str
) -> None:
    proc = memlab(
        "run",
        "transcripts=dir",
        f"transcripts.path={tdir}",
        override,
        f"hydra.run.dir={tmp_path / 'x'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 2
    assert message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_bad_transcripts_path_is_an_error(tmp_path: Path) -> None:
    proc = memlab(
        "run",
        "transcripts=dir",
        f"transcripts.path={tmp_path / 'nope'}",
        f"hydra.run.dir={tmp_path / 'x'}",
        cwd=tmp_path,
    )
    assert (
        proc.returncode == 2 and "does not exist" in proc.stderr and "Traceback" not in proc.stderr
    )
    # Hydra made the run folder before the transcripts failed to load: it is removed,
    # so no folder without results is left for report or gate to trip over.
    assert not (tmp_path / "x").exists()


def test_report_on_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    proc = memlab("report", str(tmp_path), cwd=tmp_path)
    assert proc.returncode == 2 and "no memlab run" in proc.stderr


# --- memlab synth -------------------------------------------------------------


def test_synth_writes_n_transcripts_from_consecutive_seeds(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    from memlab.lab.synth import generate
    from memlab.lab.transcripts import dumps, load_dir

    out = tmp_path / "more"
    assert main(["synth", "--n", "3", "--seed", "5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert str(out) in printed and "3 written" in printed
    names = sorted(p.name for p in out.iterdir())
    assert names == ["support-0005.json", "support-0006.json", "support-0007.json"]
    for seed in (5, 6, 7):
        text = (out / f"support-{seed:04d}.json").read_text(encoding="utf-8")
        assert text == dumps(generate(seed))
    assert [t.id for t in load_dir(out)] == ["support-0005", "support-0006", "support-0007"]
    # running it again changes nothing
    assert main(["synth", "--n", "3", "--seed", "5", "--out", str(out)]) == 0
    assert "3 unchanged" in capsys.readouterr().out


def test_synth_refuses_to_overwrite_different_files_without_force(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "t"
    assert main(["synth", "--n", "2", "--seed", "1", "--out", str(out)]) == 0
    mine = out / "support-0002.json"
    mine.write_text('{"mine": true}\n', encoding="utf-8")
    capsys.readouterr()
    assert main(["synth", "--n", "3", "--seed", "1", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "support-0002.json" in err and "--force" in err and "Traceback" not in err
    assert mine.read_text(encoding="utf-8") == '{"mine": true}\n'
    assert not (out / "support-0003.json").exists()
    assert main(["synth", "--n", "3", "--seed", "1", "--out", str(out), "--force"]) == 0
    assert "1 written, 1 replaced, 1 unchanged" in capsys.readouterr().out
    assert mine.read_text(encoding="utf-8") != '{"mine": true}\n'


def test_synth_bad_arguments_are_clean_errors(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    a_file = tmp_path / "file.json"
    a_file.write_text("{}", encoding="utf-8")
    cases = [
        (["--n", "0", "--out", str(tmp_path / "x")], "--n must be a positive integer"),
        (["--n", "ten", "--out", str(tmp_path / "x")], "invalid int value: 'ten'"),
        (["--seed", "-3", "--out", str(tmp_path / "x")], "--seed must be a non-negative"),
        (["--n", "2"], "required: --out"),
        (["--out", str(tmp_path / "x"), "--bogus"], "unrecognized arguments: --bogus"),
        (["--out", str(a_file)], "is not a folder"),
    ]
    for args, message in cases:
        assert main(["synth", *args]) == 2, args
        err = capsys.readouterr().err
        assert err.startswith("memlab: error:") and message in err, (args, err)
        assert "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_synth_help_exits_zero(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["synth", "--help"]) == 0
    assert "--force" in capsys.readouterr().out


def test_synth_console_errors_have_no_traceback(tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.run(
        [sys.executable, "-m", "memlab.cli", "synth", "--n", "-1", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--n must be a positive integer" in proc.stderr


LATENCY = {"recall_ms", "write_ms", "maintain_ms"}


# -- help and version ---------------------------------------------------------------------
def test_version(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"memlab {__version__}"


@pytest.mark.parametrize(
    "args",
    [
        ["--help"],
        ["run", "--help"],
        ["tune", "--help"],
        ["report", "--help"],
        ["convert", "--help"],
        ["gate", "--help"],
        ["demo", "--help"],
        ["synth", "--help"],
        ["bench", "--help"],
        ["bench", "store", "--help"],
        ["compare", "--help"],
        ["embed", "--help"],
        ["judge", "--help"],
        ["judge", "calibrate", "--help"],
    ],
)
def test_every_command_has_help_that_runs_nothing(args: list[str], tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    os.chdir(tmp_path)
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:") and "memlab" in out
    assert "%%" not in out  # a description is printed as written, not %-formatted
    assert "remembered" not in out  # the demo did not run
    assert list(tmp_path.iterdir()) == []  # nothing was written


def test_run_help_lists_groups_and_registered_plugins_not_schemas(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "store:" in out and "sqlite" in out and "strategy kinds:" in out
    assert "schema" not in out and "_schema" not in out


def test_help_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`memlab run --help | head`: the reader goes away first; no BrokenPipeError."""
    for args in (["run", "--help"], ["run", "--cfg", "job"], ["--help"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "memlab.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
        )
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()  # before memlab writes a byte
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=120) == 0, err
        assert "BrokenPipe" not in err and "Traceback" not in err, err


# -- exit codes: every failure is one line ----------------------------------------------------
@pytest.fixture(scope="module")
def gen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_transcripts(tmp_path_factory.mktemp("gen") / "t", range(2), turns=40)


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory, gen: Path) -> Path:
    """A finished run folder (its own baseline)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    proc = memlab(
        "run", "transcripts=dir", f"transcripts.path={gen}", "strategies=[sliding_window]",
        "report.charts=false", f"hydra.run.dir={out}", cwd=out.parent,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("memlab: "), lines[0]
    return lines[0]


def test_cli_failures_have_distinct_exit_codes_and_one_line(
    tmp_path: Path, gen: Path, finished: Path
) -> None:
    """0 ok, 1 gate regression only, 2 bad input, 3 I/O / environment / internal."""
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    a_folder = tmp_path / "a_folder"
    a_folder.mkdir()
    data = ["transcripts=dir", f"transcripts.path={gen}", "strategies=[sliding_window]"]
    base = ["gate", "--baseline", str(finished), str(finished)]
    # fmt: off
    cases = [
        # bad input: 2
        (["run", *data, "memory.wieghts.recency=1"], {}, 2, "'memory.wieghts.recency': it does not exist"),
        (["run", *data, "+memory.weigths.recency=0.3"], {}, 2, "'memory.weigths': it does not exist"),
        (["run", *data, "budget=0"], {}, 2, "config key 'budget': must be a positive integer"),
        (["run", "transcripts=dir", f"transcripts.path={tmp_path / 'nope'}"], {}, 2, "does not exist"),
        (["run", *data, "budget=1,2"], {}, 2, "budget=1,2 is a sweep; add -m"),
        # --cfg job: before, Hydra's app said "internal error: ConfigCompositionException"
        # (exit 3), "I/O failure: ... Could not find" (exit 3) and "internal error:
        # ValueError: Only one of --run, --multirun, --cfg ..." (exit 3)
        (["run", "--cfg", "job", "budgt=3"], {}, 2, "config key 'budgt': it does not exist"),
        (["run", "--cfg", "job", "eviction=nosuch"], {}, 2, "'eviction' has no option 'nosuch'"),
        (["run", "--cfg", "job", "-m", "budget=1,2"], {}, 2, "drop -m"),
        (["frobnicate"], {}, 2, "unknown command 'frobnicate'"),
        (["bench"], {}, 2, "bench needs a target"),
        (["report", str(a_file)], {}, 2, "is not a folder"),
        (["gate", "--baseline", str(finished), str(tmp_path)], {}, 2, "not a run folder"),
        (["synth", "--n", "0", "--out", str(tmp_path / "s")], {}, 2, "--n must be a positive"),
        (["synth", "--out", str(tmp_path / "s"), "--bogus"], {}, 2, "unrecognized arguments"),
        # I/O or environment: 3
        (["run", *data, f"hydra.run.dir={a_file}/run"], {}, 3, "is a file, not a folder"),
        ([*base, "--markdown", str(a_folder)], {}, 3, "cannot write the gate report to"),
        # before: "cannot write .../a_file/gate.md: File exists"
        ([*base, "--markdown", f"{a_file}/gate.md"], {}, 3, f"{a_file} is a file, not a folder"),
        (base, {"GITHUB_STEP_SUMMARY": str(a_folder)}, 3, "$GITHUB_STEP_SUMMARY"),
        (["synth", "--n", "1", "--out", f"{a_file}/x"], {}, 3, "is a file, not a folder"),
        (
            ["run", *data, "strategies=[memory]", "store=pgvector",
             "store.dsn=postgresql://memlab@127.0.0.1:9/none", "store.connect_timeout=2"],
            {}, 3, "cannot reach PostgreSQL",
        ),
    ]
    # fmt: on
    for args, env, code, message in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "memlab.cli", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env={**os.environ, **env},
            timeout=300,
        )
        assert proc.returncode == code, (args, proc.returncode, proc.stderr[-2000:])
        assert message in one_line(proc), (args, proc.stderr)
    # the same run folder gated against itself passes (0); a regression is 1 (test_gate)
    ok = memlab(*base, cwd=tmp_path)
    assert ok.returncode == 0 and "PASS" in ok.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["report", "--seed", "-1"], "report: --seed must be an integer >= 0, got -1"),
        (["report", "--bootstrap", "-1"], "report: --bootstrap must be an integer >= 0"),
        (["compare", "--seed", "-1"], "compare: --seed must be an integer >= 0, got -1"),
        (["compare", "--bootstrap", "-2"], "compare: --bootstrap must be an integer >= 0"),
    ],
)
def test_report_and_compare_refuse_a_negative_seed_or_bootstrap_before_writing(
    finished: Path, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    command, *flags = args
    folders = [str(finished)] * (2 if command == "compare" else 1)
    before = {p: p.stat().st_mtime_ns for p in finished.rglob("*")}
    assert main([command, *folders, "--no-charts", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert {p: p.stat().st_mtime_ns for p in finished.rglob("*")} == before


def test_an_internal_error_is_one_line_exit_3_unless_debugging(
    capsys, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    def boom(args: list[str]) -> int:
        raise RuntimeError("something\nunexpected")

    monkeypatch.setitem(COMMANDS, "demo", boom)
    monkeypatch.delenv("MEMLAB_DEBUG", raising=False)
    assert main(["demo"]) == 3
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: RuntimeError: something unexpected" in err
    assert "MEMLAB_DEBUG=1" in err and "Traceback" not in err
    monkeypatch.setenv("MEMLAB_DEBUG", "1")
    assert main(["demo"]) == 3
    assert "Traceback" in capsys.readouterr().err


def test_ctrl_c_is_one_line_exit_130_and_leaves_no_summary(tmp_path: Path) -> None:
    """Interrupted mid-replay: exit 130, one line, and no summary.csv a gate could
    take for the run's result."""
    many = write_transcripts(tmp_path / "t", range(30), turns=60)
    out = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, "-m", "memlab.cli", "run", "transcripts=dir", f"transcripts.path={many}",
         "progress=false", f"hydra.run.dir={out}"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        preexec_fn=default_sigint,
    )  # fmt: skip
    # The fingerprint is written when the replay starts; wait for it (or for the end).
    while not (out / "fingerprint.json").exists() and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert lines == ["memlab: interrupted"], err
    assert not (out / "summary.csv").exists()


# -- progress bars and file modes -------------------------------------------------------------
def _on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str]:
    return on_a_terminal(*args, cwd=cwd)


def test_progress_bars_only_on_a_terminal(tmp_path: Path, gen: Path) -> None:
    run = ["run", "transcripts=dir", f"transcripts.path={gen}", "strategies=[sliding_window]",
           "report.charts=false"]  # fmt: skip
    piped = memlab(*run, f"hydra.run.dir={tmp_path / 'a'}", cwd=tmp_path)
    assert piped.returncode == 0 and "replay" not in piped.stderr  # progress=true by default
    code, drawn = _on_a_terminal([*run, f"hydra.run.dir={tmp_path / 'b'}"], tmp_path)
    assert code == 0 and "replay" in drawn
    code, drawn = _on_a_terminal(
        [*run, "--no-progress", f"hydra.run.dir={tmp_path / 'c'}"], tmp_path
    )
    assert code == 0 and "replay" not in drawn
    code, drawn = _on_a_terminal(["synth", "--n", "2", "--out", str(tmp_path / "s")], tmp_path)
    assert code == 0 and "synth" in drawn
    code, drawn = _on_a_terminal(
        ["synth", "--n", "2", "--out", str(tmp_path / "s2"), "--no-progress"], tmp_path
    )
    assert code == 0 and "synth" not in drawn


def test_output_files_respect_the_umask(tmp_path: Path, gen: Path) -> None:
    def under_umask(*args: str) -> None:
        proc = subprocess.run(
            [sys.executable, "-m", "memlab.cli", *args],
            capture_output=True, text=True, cwd=tmp_path, timeout=300,
            preexec_fn=lambda: os.umask(0o027),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr

    under_umask("synth", "--n", "1", "--out", str(tmp_path / "synth"))
    under_umask(
        "run", "transcripts=dir", f"transcripts.path={gen}", "strategies=[sliding_window]",
        "report.charts=false", f"hydra.run.dir={tmp_path / 'run'}",
    )  # fmt: skip
    files = [
        tmp_path / "synth" / "support-0001.json",
        *(tmp_path / "run" / name for name in ("fingerprint.json", "summary.csv", "probes.csv",
                                               "turns.csv", "config.yaml")),
    ]  # fmt: skip
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) == 0o640, f


def test_a_failure_of_many_lines_is_printed_as_one() -> None:
    from memlab.cli.common import one_line

    message = "3 of 3 transcripts in d are invalid:\na.json: bad\nb.json: invalid (2 problems):\n"
    message += "  - turn 't0', field 'text': empty\n  - turn 't1', field 'role': bot\nc.json: bad"
    assert one_line(message) == (
        "3 of 3 transcripts in d are invalid: a.json: bad; b.json: invalid (2 problems): "
        "turn 't0', field 'text': empty; turn 't1', field 'role': bot; c.json: bad"
    )
    long = "\n".join(f"file{i}.json: not valid JSON at line 1" for i in range(100))
    short = one_line(long, limit=200)
    assert len(short) < 260 and short.endswith("; ... and 95 more lines of problems"), short
    assert one_line("x" * 50, limit=10) == "x" * 10 + "..."


def test_a_folder_of_bad_transcripts_fails_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "bad"
    folder.mkdir()
    for i in range(8):
        (folder / f"s{i}.json").write_text('{"format": "memlab.transcript/1", "id": "' + "x" * 80)
    proc = memlab("run", "transcripts=dir", f"transcripts.path={folder}", "progress=false",
                  f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 2
    assert "8 of 8 transcripts" in one_line(proc)
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_a_failed_multirun_job_is_one_line(tmp_path: Path, gen: Path) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "a.json").write_text("{")
    proc = memlab(
        "run", "-m", "transcripts=dir", f"transcripts.path={gen},{bad}", "progress=false",
        "report.charts=false", "strategies=[sliding_window]", "hydra/launcher=basic",
        f"hydra.sweep.dir={tmp_path / 'sweep'}", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 2
    line = one_line(proc)
    assert "job 1 (" in line and "finished jobs are in" in line, line
