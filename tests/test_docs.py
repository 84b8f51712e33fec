"""The README and the documentation site (mkdocs.yml, docs/).

README stays short, every relative link in README and docs/ resolves (files and
heading anchors), the site builds with ``mkdocs build --strict`` (broken links,
anchors, pages missing from the nav and API objects that do not resolve all fail
it), and the headline library example prints what README says it prints.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
MKDOCS_YML = ROOT / "mkdocs.yml"
README_MAX_LINES = 400

pytestmark = pytest.mark.skipif(
    not (MKDOCS_YML.exists() and DOCS.is_dir()),
    reason="needs a source checkout with mkdocs.yml and docs/ (not shipped in the sdist)",
)

FENCE = re.compile(r"^(```|~~~).*?^\1\s*$", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")
# [text](target) and ![alt](target); the target ends at whitespace or ")".
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def prose(text: str) -> str:
    """The text without fenced code blocks and code spans (links there are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """A heading's anchor as Python-Markdown's toc (mkdocs) and GitHub both make it
    for the plain headings used here: markup dropped, lower case, punctuation
    removed, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    return {slug(h) for _, h in HEADING.findall(FENCE.sub("", path.read_text()))}


def relative_links(path: Path) -> list[str]:
    return [
        t
        for t in LINK.findall(prose(path.read_text()))
        if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I)  # http:, https:, mailto:, ...
    ]


def test_readme_is_short() -> None:
    n = len(README.read_text().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; move reference material to docs/"


def test_readme_keeps_no_draft_text() -> None:
    text = README.read_text().lower()
    for phrase in ("draft notes", "the issue that asked"):
        assert phrase not in text, phrase


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(path: Path) -> None:
    problems = []
    for target in relative_links(path):
        file_part, _, fragment = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if not dest.exists():  # follows the docs/img symlinks into results/
            problems.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            problems.append(f"{target}: {dest.name} has no heading #{fragment}")
    assert not problems, f"{path.relative_to(ROOT)}: " + "; ".join(problems)


def test_readme_links_into_the_docs() -> None:
    targets = {t.partition("#")[0] for t in relative_links(README)}
    for page in ("docs/getting-started.md", "docs/library.md", "docs/cli.md", "docs/gate.md"):
        assert page in targets, page


def test_docs_images_are_the_committed_charts() -> None:
    """docs/img links to results/ rather than holding copies that could go stale."""
    images = [p for p in (DOCS / "img").rglob("*.png")]
    assert images
    for p in images:
        real = p.resolve()
        assert real.is_relative_to(ROOT / "results"), f"{p} is not a link into results/"
        assert real.exists(), f"{p} -> {real} is missing"


@pytest.mark.slow
def test_site_builds_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra (make install)")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is in the dev extra")
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    api = (site / "api" / "memory" / "index.html").read_text()
    assert "MemoryLayer" in api and "RecallQuery" in api
    assert "MemlabError" in (site / "api" / "errors" / "index.html").read_text()
    assert (site / "img" / "baseline" / "recall_precision.png").stat().st_size > 0
    assert (site / "img" / "bench" / "store.png").stat().st_size > 0


# -- the headline library example -------------------------------------------------
def blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, re.M | re.S)


def run_example(code: str, cwd: Path) -> str:
    out = io.StringIO()
    old = Path.cwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<README example>", "exec"), {"__name__": "__example__"})
    finally:
        os.chdir(old)
    return out.getvalue()


def test_readme_example_prints_what_readme_shows(tmp_path: Path) -> None:
    readme = README.read_text()
    code, shown = blocks(readme, "python")[0], blocks(readme, "text")[0]
    assert run_example(code, tmp_path) == shown
    # docs/library.md opens with the same example and output.
    library = (DOCS / "library.md").read_text()
    assert blocks(library, "python")[0] == code
    assert blocks(library, "text")[0] == shown


def test_library_page_shows_the_hash_embedder_missing_a_paraphrase(tmp_path: Path) -> None:
    """The documented limit of the hash embedder, with its real output."""
    library = (DOCS / "library.md").read_text()
    code = blocks(library, "python")[0]
    paraphrase = code.replace('"Where do we deploy?"', '"Where do our workloads run?"')
    assert paraphrase != code
    assert run_example(paraphrase, tmp_path) == blocks(library, "text")[1]


@pytest.mark.slow
def test_minilm_ranks_the_paraphrase_right(tmp_path: Path) -> None:
    """docs/library.md: with MiniLMEmbedder the paraphrase finds the GKE line first."""
    pytest.importorskip("sentence_transformers", reason="needs the minilm extra")
    library = (DOCS / "library.md").read_text()
    code = (
        blocks(library, "python")[0]
        .replace('"Where do we deploy?"', '"Where do our workloads run?"')
        .replace("HashEmbedder, InMemoryStore", "InMemoryStore, MiniLMEmbedder")
        .replace("HashEmbedder()", "MiniLMEmbedder()")
    )
    gke = "We deploy everything on GKE in europe-west1."
    for text in (run_example(code, tmp_path), blocks(library, "text")[2]):
        first_hit = [line for line in text.splitlines() if line.startswith(" 1 ")]
        assert first_hit and first_hit[0].endswith(gke), text


# -- docs/configuration.md against the composed config ------------------------------
def documented_keys(text: str) -> set[str]:
    """Every key a code span of the page names: ``a.b``, ``a.{b,c}`` and the bare
    names of a span list such as ``embedder.base_url``, ``model``, ``dims``."""
    out: set[str] = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        braced = re.fullmatch(r"([\w.]+)\.\{([\w,]+)\}", span)
        if braced:
            out.update(f"{braced[1]}.{k}" for k in braced[2].split(","))
        else:
            out.update(part.strip().lstrip(".") for part in span.split(","))
    return out


def config_leaves(node: object, prefix: str) -> list[str]:
    if isinstance(node, dict) and node:
        return [k for key, v in node.items() for k in config_leaves(v, f"{prefix}.{key}")]
    return [prefix]


PLUGIN_OPTIONS = {
    "store": ("memory", "jsonl", "sqlite", "pgvector"),
    "embedder": ("hash", "minilm", "static", "openai"),
    "summarizer": ("extractive", "openai"),
}


def test_configuration_page_lists_every_key() -> None:
    """Every key of the run's own nodes and of the store, embedder and summarizer
    options is on docs/configuration.md (memory.eviction.decay_unprotects,
    store.integrity and the OpenAI clients' api_key_header and seed were missing)."""
    from omegaconf import OmegaConf

    from memlab.lab.compose import compose_all

    text = (DOCS / "configuration.md").read_text()
    documented = documented_keys(text)
    variants = [[]] + [[f"{g}={o}"] for g, opts in PLUGIN_OPTIONS.items() for o in opts]
    configs = [OmegaConf.to_container(c) for c in compose_all(variants)]
    missing = set()
    for node in ("memory", "report", "cache", "transcripts"):
        missing |= {k for k in config_leaves(configs[0][node], node) if k not in documented}
    missing.discard("transcripts.name")  # the option of the group, in its own table
    for (override,), cfg in zip(variants[1:], configs[1:], strict=True):
        group = override.partition("=")[0]
        missing |= {
            f"{override}: {group}.{key}"
            for key in cfg[group]
            if f"{group}.{key}" not in documented and key not in documented
        }
    assert not missing, f"docs/configuration.md does not list: {sorted(missing)}"


LAB_NODES = ("report", "cache", "transcripts", "tune")
# not a method call such as ``cache.info()``
LAB_KEY = re.compile(rf"`+((?:{'|'.join(LAB_NODES)})\.[a-z_][a-z_0-9.]*[a-z_0-9])(?![\w.(])")
FILE_NAME = re.compile(r"\.(md|csv|png|py|log|db|json|yaml)$")


def test_lab_keys_named_in_docs_and_docstrings_exist() -> None:
    """A ``report.*``, ``cache.*``, ``transcripts.*`` or ``tune.*`` key that a page or
    a lab docstring names is a key of the config (memlab.lab.metrics named
    ``report.rankings`` for report.benchmark_metrics)."""
    from omegaconf import OmegaConf

    from memlab.lab.compose import compose_all

    configs = [OmegaConf.to_container(compose_all([[]], name)[0]) for name in ("config", "tune")]
    keys = {
        k for cfg in configs for node in LAB_NODES for k in config_leaves(cfg.get(node) or {}, node)
    }
    keys |= {k.rpartition(".")[0] for k in keys}  # a node named as a whole
    sources = [*DOCS.rglob("*.md"), README, *(ROOT / "memlab" / "lab").rglob("*.py")]
    wrong = [
        f"{path.relative_to(ROOT)}: {key}"
        for path in sources
        for key in LAB_KEY.findall(path.read_text())
        if key not in keys
        and not FILE_NAME.search(key)
        and not any(k.startswith(key + ".") for k in keys)
    ]
    assert not wrong, wrong


# -- docs/cli.md against the commands' --help -----------------------------------------
CLI_COMMANDS = (
    "run", "embed", "report", "compare", "judge calibrate", "tune", "gate", "convert",
    "synth", "bench store", "demo",
)  # fmt: skip
# an option as --help lists it: at the start of a line, or bracketed in the usage
HELP_OPTION = re.compile(r"(?:^\s*|\[)(--[a-z][a-z-]+)", re.M)


def cli_sections() -> dict[str, str]:
    text = (DOCS / "cli.md").read_text()
    starts = [(m[1], m.start()) for m in re.finditer(r"^## memlab (.+)$", text, re.M)]
    ends = [s for _, s in starts[1:]] + [len(text)]
    return {name: text[start:end] for (name, start), end in zip(starts, ends, strict=True)}


@pytest.mark.parametrize("command", CLI_COMMANDS)
def test_cli_page_names_every_option_of_a_command(command: str, capsys) -> None:  # type: ignore[no-untyped-def]
    """Each option a command's --help lists is in that command's section of
    docs/cli.md (run's and convert's --no-progress were not)."""
    from memlab.cli import main

    sections = cli_sections()
    assert command in sections, f"docs/cli.md has no section '## memlab {command}'"
    assert main([*command.split(), "--help"]) == 0
    options = set(HELP_OPTION.findall(capsys.readouterr().out)) - {"--help"}
    missing = sorted(o for o in options if o not in sections[command])
    assert not missing, f"docs/cli.md, memlab {command}: {missing}"


def test_transcript_format_page_shows_the_real_validation_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """docs/transcript-format.md: its example with a bad probe gives the error it shows
    (it showed a multi-line message; the CLI prints one line)."""
    from memlab.cli import main

    page = (DOCS / "transcript-format.md").read_text()
    example = blocks(page, "json")[0].replace('"evidence": ["t0"]', '"evidence": ["t99"]')
    shown = blocks(page, "text")[0].splitlines()
    assert shown[0].startswith("$ memlab run ")
    folder = tmp_path / "my_transcripts"
    folder.mkdir()
    (folder / "x.json").write_text(example)
    old = Path.cwd()
    os.chdir(tmp_path)
    try:
        assert main(shown[0].removeprefix("$ memlab ").split()) == 2
    finally:
        os.chdir(old)
    assert capsys.readouterr().err.splitlines() == shown[1:]


def test_synthetic_page_names_every_field_value_the_generator_writes() -> None:
    """docs/synthetic.md's "Fields the generator fills" names every turn act, probe
    category and probe meta key of the shipped transcripts (the false-correction act,
    category and meta keys were missing)."""
    import json

    page = (DOCS / "synthetic.md").read_text()
    section = page.split("## Fields the generator fills", 1)[1].split("\n## ", 1)[0]
    named = set(re.findall(r"`([^`\n]+)`", section))
    found: set[str] = set()
    for path in sorted((ROOT / "transcripts" / "synthetic").glob("*.json")):
        data = json.loads(path.read_text())
        for turn in data["turns"]:
            found.add(turn["meta"]["act"])
            if "probe" in turn:
                found.add(turn["probe"]["category"])
                found.update(turn["probe"].get("meta", {}))
                found.update(
                    str(v) for k, v in turn["probe"]["meta"].items() if k in ("update", "false")
                )
    assert found, "no shipped transcripts"
    missing = sorted(found - named)
    assert not missing, f"docs/synthetic.md does not name: {missing}"
