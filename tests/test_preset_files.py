"""The bundled model and plan files (configs/models, configs/plans): block style a person can read
and comment, and the same specs as the one-line flow mappings they replaced (issue 33)."""

import shutil
import subprocess
from pathlib import Path

import pytest

from perfmodel.inputs import presets, yaml12
from perfmodel.specs import Model

ROOT = Path(__file__).resolve().parents[1]
# the last commit whose configs/models and configs/plans were flow mappings
FLOW_COMMIT = "8dfc655"
FILES = sorted(
    p.relative_to(ROOT).as_posix()
    for kind in ("models", "plans")
    for p in (ROOT / "configs" / kind).glob("*.yaml")
)


# keys the bundled files gained after the flow commit, on purpose: the MoE models' router family
# (specs/router.py), which only the new files state; RoPE's base and Llama 3.1's scaling factor
# (issue 40: `plan --emit megatron` writes them)
ADDED_SINCE = {"moe_router_family", "rotary_base", "rope_scaling_factor"}
# values changed since, on purpose: gpt-oss's and DeepSeek-V3's RoPE is YaRN (their config.json
# rope_scaling; issue 30), a value the flow files' schema did not have; a plan built on a changed
# preset inherits it
CHANGED_SINCE = {
    "configs/models/deepseek-v3.yaml": {"position_embedding": "yarn"},
    "configs/models/gpt-oss-120b.yaml": {"position_embedding": "yarn"},
}
INHERITED = {"configs/plans/deepseek-v3-gb200.yaml": "configs/models/deepseek-v3.yaml"}


def _spec(path: str, data):
    if path.startswith("configs/models/"):
        return Model.model_validate(data).model_dump(exclude=ADDED_SINCE)
    # read_as says how the names were read (a base: extended), not what the plan is
    return presets.plan_from_mapping(data, path).model_dump(
        exclude={"read_as": True, "model": ADDED_SINCE}
    )


def _as_changed_since(path: str, spec: dict) -> dict:
    """The flow file's spec with the changes made since on purpose (CHANGED_SINCE)."""
    if path in CHANGED_SINCE:
        return {**spec, **CHANGED_SINCE[path]}
    if path in INHERITED:
        return {**spec, "model": {**spec["model"], **CHANGED_SINCE[INHERITED[path]]}}
    return spec


def _old_text(path: str) -> str | None:
    if shutil.which("git") is None:
        return None
    done = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{FLOW_COMMIT}:{path}"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


@pytest.mark.parametrize("path", FILES)
def test_the_bundled_file_is_block_style_and_fits_a_review_screen(path):
    lines = (ROOT / path).read_text().splitlines()
    assert max(len(line) for line in lines) <= 100
    body = [line for line in lines if not line.lstrip().startswith("#")]
    # no mapping written on one line: every nested section is a block (an empty one may be {})
    assert not any("{" in line and line.rstrip() != f"{line.split(':')[0]}: {{}}" for line in body)
    assert any(line.startswith("#") for line in lines), "a comment says what the sections are"


@pytest.mark.parametrize("path", FILES)
def test_the_block_file_gives_the_same_spec_as_the_flow_mapping_it_replaced(path):
    old = _old_text(path)
    if old is None:
        pytest.skip(f"{FLOW_COMMIT} is not in this checkout's git history")
    new = (ROOT / path).read_text()
    before = _as_changed_since(path, _spec(path, yaml12.load(old, False)))
    assert _spec(path, yaml12.load(new, False)) == before


def test_the_deepseek_v3_file_no_longer_says_mtp_is_not_modelled():
    text = (ROOT / "configs/models/deepseek-v3.yaml").read_text()
    assert "not modelled" not in text
    assert "mtp_num_layers" in text


CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("path", sorted(CONFIGS.rglob("*.yaml")), ids=lambda p: p.name)
def test_the_bundled_loader_reads_every_shipped_file_as_a_users_file_is_read(path):
    """configs/ is read at every start by libyaml's parser (yaml12._BundledLoader) under the same
    YAML 1.2 rules a user's file gets from the pure-Python one: the same data, file by file."""
    text = path.read_text(encoding="utf-8-sig")
    assert yaml12.load(text, bundled=True) == yaml12.load(text)


def test_the_bundled_loader_keeps_yaml_1_2_and_refuses_a_repeated_key():
    assert yaml12.load("a: yes\nb: 010\nc: 1e3\n", bundled=True) == {
        "a": "yes",
        "b": 10,
        "c": 1000.0,
    }
    with pytest.raises(yaml12.YamlError, match="appears twice"):
        yaml12.load("a: 1\na: 2\n", bundled=True)
