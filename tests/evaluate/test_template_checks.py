"""Templates are checked once, where they are parsed (:func:`infembed.templates.resolve_template`).

Invariant: a template that ``str.format`` could not fill with a query and an instruction (an unknown field, an
unbalanced brace, no ``{query}`` field) is a :class:`SettingsError` naming the flag and the problem, before any
model is loaded; ``infembed eval --template`` prints it as one line (exit 2), never a KeyError traceback.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from infembed.data.errors import SettingsError
from infembed.templates import join, resolve_template

INFEMBED = Path(sys.executable).with_name("infembed")
BENCH = Path(__file__).parents[1] / "data" / "fixtures" / "instruction_bench"

BAD = {
    "{query} {instruction} {foo}": ["--template", "unknown field {foo}"],
    "{query": ["--template", "unbalanced"],
    "{query} {instruction} }": ["--template", "unbalanced"],
    "{instruction} only": ["--template", "{query}"],
    "{{query}} {instruction}": ["--template", "{query}"],  # a literal, not a field
    "{query} {0} {instruction}": ["--template", "unknown field {0}"],
    "{query.upper} {instruction}": ["--template", "unknown field {query.upper}"],
}


@pytest.mark.parametrize("template", sorted(BAD))
def test_bad_templates_are_refused_with_the_flag_and_the_problem(template):
    with pytest.raises(SettingsError) as caught:
        resolve_template(template)
    for part in BAD[template]:
        assert part in str(caught.value), str(caught.value)


def test_good_templates_still_resolve_and_join():
    assert resolve_template(None) == "{query} {instruction}"
    assert resolve_template("instruct") == "Instruct: {instruction}\nQuery: {query}"
    custom = resolve_template("Q: {query} | I: {instruction} {{literal}}")
    assert join(custom, "a", "b") == "Q: a | I: b {literal}"


@pytest.mark.parametrize("template", ["{query} {instruction} {foo}", "{query"])
def test_eval_template_flag_is_one_line(tmp_path, template):
    if not INFEMBED.exists():
        pytest.skip(f"{INFEMBED} not installed")
    done = subprocess.run(
        [str(INFEMBED), "eval", "-b", BENCH, "-r", "bm25", "--template", template],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert "--template" in " ".join(done.stderr.split())
