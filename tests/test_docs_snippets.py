"""Every Python snippet in the README and docs/*.md runs as written, with the values it shows.

A ```` ```python ```` block whose lines start with ``>>>`` is a doctest: it runs through
``doctest`` and each shown value must match. Any other Python block runs as a script (its own
``assert`` lines are its check). Blocks in other languages (shell sessions, TOML) are not run
here: the README's shell commands are tests/test_readme_commands.py's.

A Python block that is not meant to run is excluded by a visible marker on the line before its
fence, with the reason: ``<!-- snippet: not run (why) -->``; such blocks are listed by
``test_excluded_snippets_are_few_and_say_why``. Each block runs in a fresh namespace, in a
fresh working folder (what it writes goes to a temporary directory).

What the test changes, and why: a snippet that names the embedded model
(``learner.model.resolve(None)``) gets the repo's tiny model, saved with ``save_pretrained``,
so that the TRL snippet's two steps fit the CI budget; everything else it does is as written.
"""

from __future__ import annotations

import doctest
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

ROOT = Path(__file__).resolve().parents[1]
EXCLUDE = re.compile(r"<!--\s*snippet:\s*not run\s*\((?P<why>[^)]+)\)\s*-->")
# Snippets that start containers (the sandbox, the Python tool, the code env) need the engine.
NEEDS_DOCKER = re.compile(r"Sandbox\(|grpo/MathPython-v0|grpo/CodeTests-v0|python_tool=True")


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int  # 1-based line of the opening fence
    code: str
    excluded: str | None  # the marker's reason, or None

    @property
    def name(self) -> str:
        where = self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path.name
        return f"{where}:{self.line}"

    @property
    def is_doctest(self) -> bool:
        return self.code.lstrip().startswith(">>>")


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def snippets_of(path: Path) -> list[Snippet]:
    """The file's Python fences, found by a Markdown parser (a fence inside a string or an
    indented block is text, as it renders)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = []
    for token in MarkdownIt().parse(text):
        if token.type != "fence" or token.info.split()[:1] != ["python"]:
            continue
        start = token.map[0]
        before = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        marker = EXCLUDE.search(before)
        found.append(Snippet(path, start + 1, token.content,
                             marker.group("why").strip() if marker else None))
    return found


ALL = [s for path in doc_files() for s in snippets_of(path)]
RUN = [s for s in ALL if s.excluded is None]


def _params() -> list:
    params = []
    for s in RUN:
        marks = [pytest.mark.docker] if NEEDS_DOCKER.search(s.code) else []
        if "trl" in s.code:
            marks.append(pytest.mark.slow)
        params.append(pytest.param(s, id=s.name, marks=marks))
    return params


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory) -> Path:
    from learner.model import load_tokenizer, tiny_model

    path = tmp_path_factory.mktemp("tiny-model")
    tiny_model().save_pretrained(path)
    load_tokenizer().save_pretrained(path)
    return path


def run_doctest(snippet: Snippet) -> None:
    test = doctest.DocTestParser().get_doctest(snippet.code, {"__name__": "__snippet__"},
                                               snippet.name, str(snippet.path), snippet.line)
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test, out=report.append)
    if runner.failures:
        pytest.fail(f"{snippet.name}: {runner.failures} shown value(s) differ\n" + "".join(report),
                    pytrace=False)


@pytest.mark.parametrize("snippet", _params())
def test_snippet_runs_as_written(snippet: Snippet, tmp_path, monkeypatch, request) -> None:
    monkeypatch.chdir(tmp_path)
    if "resolve(None)" in snippet.code:
        if "trl" in snippet.code:
            pytest.importorskip("trl")  # the trl extra (dev has it)
        import learner.model

        tiny = str(request.getfixturevalue("tiny_model_dir"))
        real = learner.model.resolve
        monkeypatch.setattr(learner.model, "resolve",
                            lambda name=None: tiny if name is None else real(name))
    if snippet.is_doctest:
        run_doctest(snippet)
    else:
        exec(compile(snippet.code, snippet.name, "exec"), {"__name__": "__snippet__"})


def test_the_docs_have_the_snippets_this_test_is_for() -> None:
    # The extraction itself: a parser change or a moved file must not leave nothing to run.
    names = {s.name.split(":")[0] for s in RUN}
    assert {"README.md", "docs/environments.md", "docs/integrations.md"} <= names
    trl = [s for s in RUN if s.path.name == "integrations.md" and "GRPOTrainer(" in s.code]
    assert len(trl) == 1 and "trainer.train()" in trl[0].code and "max_steps=2" in trl[0].code
    assert sum(s.is_doctest for s in RUN) >= 3


def test_excluded_snippets_are_few_and_say_why() -> None:
    excluded = [s for s in ALL if s.excluded is not None]
    assert all(len(s.excluded) >= 10 for s in excluded), [s.name for s in excluded]
    assert len(excluded) <= max(2, len(ALL) // 10), [f"{s.name}: {s.excluded}" for s in excluded]


def test_a_marker_excludes_only_the_block_right_after_it(tmp_path) -> None:
    doc = tmp_path / "x.md"
    doc.write_text("<!-- snippet: not run (needs a GPU) -->\n```python\nimport cuda_only\n```\n\n"
                   "```python\n>>> 1 + 1\n2\n```\n\n```bash\nmake demo\n```\n"
                   "```python\ns = '''\n```python\n'''\n```\n", encoding="utf-8")
    found = [(s.line, s.excluded, s.is_doctest) for s in snippets_of(doc)]
    assert found == [(2, "needs a GPU", False), (6, None, True), (14, None, False)]


def test_a_wrong_shown_value_fails(tmp_path) -> None:
    snippet = Snippet(tmp_path / "x.md", 1, ">>> 1 + 1\n3\n", None)
    with pytest.raises(pytest.fail.Exception, match="shown value"):
        run_doctest(snippet)
