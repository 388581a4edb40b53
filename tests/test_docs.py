"""The README documents what a plan may hold: every key of the model mapping and of the run
section is in its tables (so neither can drift from the specs)."""

from pathlib import Path

from perfmodel.specs import Model
from perfmodel.specs.run import Run

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


def test_every_model_key_is_in_the_readme():
    missing = [k for k in Model.model_fields if f"| `{k}` |" not in README]
    assert not missing, missing


def test_every_run_key_is_in_the_readme():
    missing = [k for k in Run.model_fields if f"`{k}`" not in README]
    assert not missing, missing
