"""`--emit megatron` under the primus profile writes Primus's zero-bubble keys (AMD-AGI/Primus,
zero_bubble.yaml and its zerobubble/README.md; perfmodel/inputs/primus_zb.py) and `import
megatron` reads them back to the same schedule, step and memory (issue 40); interleaved
zero-bubble, which has no key there, is refused naming what to set by hand."""

from __future__ import annotations

import pytest

from perfmodel import inputs
from perfmodel.engine.answer import estimate_or_search
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.emit_check import gpu_preset
from perfmodel.inputs.megatron import read_args
from perfmodel.inputs.megatron_emit import launch_text

EXPECT = {  # schedule: the keys its launch must hold
    "zb-h1": ["--enable_zero_bubble true", "--zero_bubble_max_pending_backward 8"],
    "zb-h2": ["--enable_zero_bubble true", "--zero_bubble_max_pending_backward 16"],
    "zbv": ["--zero_bubble_v_schedule true", "--zero_bubble_v_schedule_mem_setup zb"],
    "v-half": ["--zero_bubble_v_schedule true", "--zero_bubble_v_schedule_mem_setup half"],
    "v-min": ["--zero_bubble_v_schedule true", "--zero_bubble_v_schedule_mem_setup min"],
}


def primus_plan(schedule: str):
    plan = inputs.load("llama2-70b-h100").plan.with_training(framework="primus")
    return plan.with_parallel(pp=8, schedule=schedule)


@pytest.mark.parametrize("schedule", sorted(EXPECT))
def test_primus_zero_bubble_emits_and_reads_back(tmp_path, schedule):
    plan = primus_plan(schedule)
    best = estimate_or_search(plan, presets.error_bands())[0]
    assert best.config.schedule == schedule
    text = launch_text(plan, best)
    assert "--patch_zero_bubble true" in text
    assert all(k in text for k in EXPECT[schedule]), text
    assert max(map(len, text.splitlines())) <= 80
    (tmp_path / "run.sh").write_text(text)
    back = inputs.load(str(tmp_path / "run.sh"), gpu=gpu_preset(plan.system.gpu)[0],
                       vocab_size=plan.model.vocab_size).plan  # fmt: skip
    assert back.training.framework == "primus"
    assert back.parallel.schedule == schedule
    got = estimate(back, resolve_config(back)).values
    for k in ("step_time_s", "total_bytes"):
        assert got[k] == pytest.approx(best.values[k], rel=1e-6)


def test_interleaved_zero_bubble_refused_naming_what_to_set():
    plan = primus_plan("interleaved-zb")
    best = estimate_or_search(plan, presets.error_bands())[0]
    with pytest.raises(PerfModelError) as e:
        launch_text(plan, best)
    said = " ".join(str(e.value).split())
    assert "interleaved zero-bubble" in said
    assert "patch_primus_pipeline: true" in said and "pp_algorithm" in said


LAUNCH = (
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096"
    " --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 64 --bf16"
    " --vocab-size 32000 --pipeline-model-parallel-size 4 --patch_zero_bubble true "
)


@pytest.mark.parametrize(
    "extra, message",
    [
        ("--enable_zero_bubble true --zero_bubble_max_pending_backward auto", "adaptive limit"),
        ("--enable_zero_bubble true --zero_bubble_max_pending_backward 6", "perfmodel models 4"),
        ("--zero_bubble_v_schedule true --zero_bubble_v_schedule_mem_setup low", "zb, half or min"),
        ("--zero_bubble_v_schedule maybe", "true or false"),
    ],
)
def test_primus_keys_perfmodel_does_not_model_are_refused_by_name(extra, message):
    with pytest.raises(PerfModelError, match=message):
        read_args(LAUNCH + extra, "mi300x", 32)


def test_dashed_form_reads_the_same():
    text = LAUNCH.replace("--patch_zero_bubble", "--patch-zero-bubble")
    got = read_args(text + "--zero-bubble-v-schedule true", "mi300x", 32).plan["parallel"]
    assert (got["schedule"], got["vp"]) == ("v-half", 2)  # Primus' default mem_setup: half
