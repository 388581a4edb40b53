"""Published runs held for their memory (configs/memory_runs, issue 29): every one ran, so every one
fits; and the pieces of the memory model the published runs needed, each against its source."""

from __future__ import annotations

import numpy as np
import pytest

from perfmodel.cost.stages import build_stages
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import presets
from perfmodel.inputs.memory_runs import memory_runs
from perfmodel.review.validate_memory import memory_runs as estimated_runs


@pytest.fixture(scope="module")
def runs():
    return estimated_runs()


def test_every_published_run_the_project_does_not_time_fits(runs):
    """The runs of shared/validation that `validate` does not time (Primus's 'zbb' row and its
    Qwen3-235B rows on MI355X) and the torchtitan rows held for their peaks: each ran, so each fits
    under the default reserve, and each names where it comes from. A run `validate` times (IBM's
    fms-fsdp table since it became one) is held there only, not twice."""
    names = {r.name for r in runs}
    timed = {c["name"] for c in presets.validation_cases()}
    assert not names & timed, names & timed
    assert sum(n.startswith("fms-") for n in timed) == 10
    assert sum(n.startswith("primus-qwen3-235b") for n in names) == 3
    assert "primus-llama2-7b-16l-zbb-8gpu" in names
    for r in runs:
        assert bool(r.estimate.values["fits"]), r.name
    for raw in memory_runs():
        assert raw["description"] and raw["source"], raw["name"]


def _fms_13b(every: int | None):
    case = next(c for c in presets.validation_cases() if c["name"] == "fms-eager-13b-a100-128gpu")
    training = case["plan"].training
    if every is None:
        plan = case["plan"].with_parallel(recompute="none")
    else:
        plan = case["plan"].with_training(
            recompute_modules=list(training.recompute_modules), checkpoint_every_n_layers=every
        )
    return estimate(plan, resolve_config(plan)).values


def test_fms_13b_checkpoints_every_other_block():
    """fms-fsdp checkpoints every k-th block (ac_handler.py); the 13B row's k is not stated, but
    its HFU over MFU, 0.59 / 0.51, is what recomputing one block's forward in k adds: 1 + 1/(3k)
    = 1.17 at k = 2 (full checkpointing 1.33, k = 3 1.11). Without checkpointing the model is
    over the usable line of the A100; with it, under."""
    hfu_over_mfu = 0.59 / 0.51
    assert hfu_over_mfu == pytest.approx(1 + 1 / (3 * 2), abs=0.01)
    # the line itself, not the verdict: `fits` is false only beyond the memory band (issue 37)
    bare, every = _fms_13b(None), _fms_13b(2)
    assert float(bare["total_bytes"]) > float(bare["usable_bytes"])
    assert float(every["total_bytes"]) <= float(every["usable_bytes"]) and bool(every["fits"])
    assert float(_fms_13b(2)["total_bytes"]) < float(_fms_13b(4)["total_bytes"])


def test_mlperf_system_descriptions_give_the_blackwell_capacities():
    """The HBM the device reports, as NVIDIA's MLPerf Training v5.0/v5.1 system descriptions state
    it (accelerator_memory_capacity): GB200 189471 MiB (NVIDIA's 186 GB is GiB), GB300 284208 MiB,
    B200 183359 MiB, HGX B300 275040 MiB."""
    for gpu, mib in (("gb200", 189471), ("gb300", 284208), ("b200", 183359), ("b300", 275040)):
        assert presets.gpu(gpu).hbm_capacity_bytes == mib * 2**20


def test_a_v_shaped_schedule_holds_both_ends_on_its_first_rank():
    """ZB-V, V-Half, V-Min: rank 0 runs the first and the last chunk, so it holds the embedding
    and the LM head (Primus's V-schedule patch puts the embedding group on rank 0 alone)."""
    stages = build_stages(16, [0] * 16, np.array([8, 8]), np.array([2, 2]), np.array([2, 2]))
    per_class = stages.total([np.array([1.0, 1.0]), None], np.array([5.0, 5.0]), 7.0)
    moved = stages.v_ends(per_class, 7.0, np.array([False, True]))
    assert moved[0, 0] == per_class[0, 0] and moved[0, 3] == per_class[0, 3]
    assert moved[1, 0] == pytest.approx(2 + 5 + 7) and moved[1, 3] == pytest.approx(2)
    primus = {c.name: c for c in _primus()}
    ends = float(primus["primus-llama2-7b-16l-v-min-8gpu"].estimate.values["params_per_gpu"])
    plain = float(primus["primus-llama2-7b-16l-1f1b-8gpu"].estimate.values["params_per_gpu"])
    assert ends - plain == pytest.approx(32000 * 4096 + 4096)  # the output layer and final norm


def _primus():
    from perfmodel.review.validate import validate

    return validate(["primus"]).cases


def test_zero_bubble_h1_holds_p_micro_batches_on_every_stage():
    """ZB-H1 defers the W passes, so every stage holds 1F1B's first-stage count: Primus's
    simulator of its zero-bubble schedule (p 8, m 32) holds 8 on every rank; 1F1B's last stage 1."""
    # the 'zbb' row runs interleaved zero-bubble at vp 2; the same plan at ZB-H1 and 1F1B, vp 1
    zbb = next(r for r in memory_runs(["zbb"]))["plan"].with_parallel(schedule="zb-h1", vp=1)
    one = zbb.with_parallel(schedule="1f1b")
    acts = {
        name: float(estimate(p, resolve_config(p)).values["activations_bytes"])
        for name, p in (("zb-h1", zbb), ("1f1b", one))
    }
    # the peak moves to the last rank, which also keeps the logits of a micro-batch
    assert acts["zb-h1"] > acts["1f1b"]
