"""Regenerate what the README and docs/ quote: docs/reference.md from the pydantic specs, and the
output of every `$ perfmodel ...` command quoted in README.md and docs/*.md (rerun in place).
Run after a change that moves a figure, then read the diff:

    python benchmarks/refresh_docs.py          # everything
    python benchmarks/refresh_docs.py README.md docs/validation.md

tests/test_docs.py fails while any of it is stale."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from perfmodel.output import docblocks, reference  # noqa: E402


def main(names: list[str]) -> None:
    (ROOT / "docs" / "reference.md").write_text(reference.markdown())
    print("wrote docs/reference.md")
    pages = [ROOT / n for n in names] or [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        new = docblocks.refresh(text, ROOT)
        if new != text:
            page.write_text(new)
            print(f"refreshed {page.relative_to(ROOT)}")


if __name__ == "__main__":
    main(sys.argv[1:])
