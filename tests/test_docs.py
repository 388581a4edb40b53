"""The README and docs/ say what the tool does today: the plan reference is generated from the
specs and complete, every quoted command output is what the command prints, the README stays a
short door with its two commands first, and no page speaks the team's internal words."""

import re
from pathlib import Path

import pytest

from perfmodel.output import docblocks, reference

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


def test_the_plan_reference_is_generated_from_the_specs():
    """docs/reference.md is what `benchmarks/refresh_docs.py` writes from the specs today."""
    assert (
        ROOT / "docs" / "reference.md"
    ).read_text() == reference.markdown(), (
        "docs/reference.md is stale: run python benchmarks/refresh_docs.py"
    )


@pytest.mark.parametrize("section", [s[0] for s in reference.SECTIONS])
def test_every_key_of_every_section_has_an_entry_with_its_meaning(section):
    path = {s[0]: s[2] for s in reference.SECTIONS}[section]
    cls = reference.spec(path)
    text = (ROOT / "docs" / "reference.md").read_text()
    block = text.split(f"## {section}\n", 1)[1].split("\n## ", 1)[0]
    undocumented = [k for k, f in cls.model_fields.items() if not (f.description or "").strip()]
    assert not undocumented, f"{section}: fields without a description: {undocumented}"
    missing = [k for k in cls.model_fields if f"| `{k}` |" not in block]
    assert not missing, f"{section}: keys without an entry: {missing}"


def test_the_reference_reads_units_and_profile_defaults():
    """The generated rows carry what a writer needs: a quantity's unit, a flag's profile default."""
    gpu = {r[0]: r for r in reference.rows(reference.spec("perfmodel.specs.hardware:GPU"))}
    assert gpu["`hbm_capacity_bytes`"][4].startswith("bytes")
    training = {
        r[0]: r for r in reference.rows(reference.spec("perfmodel.specs.training:Training"))
    }
    assert training["`tp_comm_overlap`"][3] == "the framework profile's"
    assert training["`global_batch_size`"][3] == "required"


def test_the_readme_opens_with_its_two_commands_and_stays_short():
    lines = README.read_text().splitlines()
    assert len(lines) <= 400, f"README.md has {len(lines)} lines; the door stays under 400"
    fence = lines.index("```bash")
    install, tests = lines[fence + 1], lines[fence + 2]
    assert "pip install ." in install and "perfmodel plan" in install
    assert tests == "python -m pip install -e '.[test]' && python -m pytest -q"
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci, ".ci/run runs the README's test command verbatim"


def test_every_page_the_readme_links_exists():
    for target in re.findall(r"\]\(([^)#]+)\)", README.read_text()):
        assert (ROOT / target).exists(), f"README links {target}, which is not in the repository"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_speaks_the_teams_internal_words(page):
    text = page.read_text()
    for pattern in (
        r"\bissues? \d+",
        r"\bseed 00\d",
        r"\bSPEC \d",
        r"\.\./shared",
        r"shared/valid",
    ):
        assert not re.search(pattern, text, re.IGNORECASE), f"{page.name}: {pattern}"


@pytest.mark.parametrize(
    "page", [p for p in PAGES if "$ perfmodel" in p.read_text()], ids=lambda p: p.name
)
def test_quoted_outputs_are_what_the_commands_print(page):
    """Every `$ perfmodel ...` block shows today's output (search timings aside)."""
    stale = docblocks.stale(page.read_text(), ROOT)
    assert not stale, f"{page.name}: stale output of {stale}; run python benchmarks/refresh_docs.py"


def test_a_quoted_block_that_drifts_is_caught():
    """The drift check can fail: a figure changed by hand in a quoted output is reported."""
    text = (
        "```\n$ perfmodel bubble -m 8 -p 4 | head -4\n"
        + "\n".join(docblocks.run("perfmodel bubble -m 8 -p 4 | head -4", ROOT))
        + "\n```\n"
    )
    assert docblocks.stale(text, ROOT) == []
    assert docblocks.stale(text.replace("37.5%", "38.5%"), ROOT) == [
        "perfmodel bubble -m 8 -p 4 | head -4"
    ]
