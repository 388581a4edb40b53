"""Issue 40 item 3: expert parallelism under FSDP, as torchtitan's MoE runs it
(torchtitan/distributed/parallel_dims.py at commit 0119de15): the routed experts split over ep
ranks with etp = tp or 1, their states sharded by FSDP over dp_shard_in_ep = dp_shard x cp (x tp
at etp 1) / ep ranks, the dense parts over dp_shard x cp, the tokens dispatched by an all-to-all
over the ep ranks (torchtitan/distributed/expert_parallel.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from perfmodel.engine.estimate import estimate, resolve_config, validate_config
from perfmodel.engine.mesh import Mesh, expert_shard
from perfmodel.errors import PerfModelError
from perfmodel.inputs.load import load_plan

SCOUT = Path(__file__).parent / "data" / "fsdp_moe" / "llama4-scout-gb200-ep16.yaml"
MEASURED_STEP_S = 2560 * 8192 / (6169 * 256)  # 13.28 s: tokens/s per GPU as published


def _values(plan):
    cfg = resolve_config(plan)
    validate_config(plan, cfg)
    return estimate(plan, cfg).values


def _dp_shard_in_ep(dp_shard, cp, tp, ep, etp):
    """torchtitan's ParallelDims.build_mesh: the experts' FSDP mesh."""
    return dp_shard * cp // ep if etp == tp else dp_shard * cp * tp // ep


def test_scout_on_256_gb200_estimates_under_fsdp():
    """Refused before ("fsdp has no expert parallelism"); now the published run estimates within
    the typical band of it, with its all-to-all over the 16 EP ranks on the critical path."""
    plan = load_plan(str(SCOUT))
    v = _values(plan)
    step = float(v["step_time_s"])
    assert step == pytest.approx(MEASURED_STEP_S, rel=0.2)
    assert float(v["ep_comm"]) > 0


@pytest.mark.parametrize(
    "tp,cp,dp,dp_shard,ep,etp",
    [
        (1, 1, 256, 256, 16, 1),
        (2, 1, 128, 128, 16, 1),
        (2, 1, 128, 128, 16, 2),
        (1, 2, 128, 128, 8, 1),
        (2, 2, 64, 64, 8, 2),
        (1, 1, 256, 64, 16, 1),  # HSDP: 4 replicas of a 64-rank shard group
        (2, 1, 128, 32, 8, 2),
        (1, 1, 256, 16, 16, 1),  # the experts' shard group is one rank: not sharded
    ],
)
def test_the_experts_shard_group_is_torchtitans(tp, cp, dp, dp_shard, ep, etp):
    """Megatron-Core's expert data parallelism tp cp dp / (ep etp) is torchtitan's dp_shard_in_ep
    under full sharding; under HSDP the experts shard within the shard group and replicate over
    its dp / dp_shard copies, as the dense parameters do."""
    system = load_plan(str(SCOUT)).system
    mesh = Mesh(np.array([tp]), 1, np.array([dp]), system, cp=cp, ep=ep, etp=etp)
    got = expert_shard(mesh.edp, np.array([dp]), np.array([dp_shard]), np.array([3]))
    assert int(got[0]) == _dp_shard_in_ep(dp_shard, cp, tp, ep, etp)
    # Megatron's ZeRO-1 shard groups keep the expert-data-parallel ranks
    z1 = expert_shard(mesh.edp, np.array([dp]), np.array([dp_shard]), np.array([1]))
    assert int(z1[0]) == int(mesh.edp[0])


def test_hsdp_keeps_the_experts_sharded_within_the_shard_group():
    """With dp_shard 16 and ep 16 each rank holds its experts' whole states (dp_shard_in_ep = 1),
    so the optimizer's bytes grow by the 16 ranks they were sharded over; the dense parameters'
    states grow by 256 / 16 too."""
    plan = load_plan(str(SCOUT)).with_parallel(recompute="full", micro_batch_size=1)
    full = float(_values(plan)["optimizer_bytes"])
    hsdp = float(_values(plan.with_parallel(dp_shard=16))["optimizer_bytes"])
    assert hsdp == pytest.approx(16 * full, rel=1e-6)


def test_fsdp_prices_the_experts_as_megatron_folds_them_under_full_sharding():
    """Under full sharding the two meshes agree, so the optimizer states and the all-to-all of the
    fsdp and megatron-core profiles are the same (the weights are not: FSDP's gathered units and
    Megatron's master copies are each framework's own)."""
    plan = load_plan(str(SCOUT)).with_parallel(recompute="full", micro_batch_size=1)
    tt = _values(plan)
    mc = _values(plan.with_training(framework="megatron-core"))
    assert float(tt["optimizer_bytes"]) == pytest.approx(float(mc["optimizer_bytes"]), rel=1e-9)
    assert float(tt["ep_comm"]) == pytest.approx(float(mc["ep_comm"]), rel=0.05)


@pytest.mark.parametrize(
    "changes, words, megatron_runs_it",
    [
        # etp must be tp or 1: Megatron-Core folds etp 4 (parallel folding)
        (dict(tp=2, dp=128, etp=4, sequence_parallel=True), r"etp = tp or etp = 1", True),
        # ep must divide dp_shard x cp (x tp): 8 does not divide a shard group of 4
        (dict(dp_shard=4, ep=8), r"does not fold into fsdp's mesh", False),
    ],
)
def test_what_torchtitans_mesh_cannot_fold_is_refused(changes, words, megatron_runs_it):
    """ParallelDims._validate asserts etp = tp or 1, ep a multiple of cp (x tp at etp 1) that
    divides dp_shard x cp (x tp)."""
    plan = load_plan(str(SCOUT)).with_parallel(recompute="full", micro_batch_size=1, **changes)
    with pytest.raises(PerfModelError, match=words):
        _values(plan)
    ok = plan.with_parallel(ep=4) if not megatron_runs_it else None
    if ok is not None:  # a shard group of 4 holds ep 4: dp_shard_in_ep 1
        assert float(_values(ok)["step_time_s"]) > 0
    else:
        assert float(_values(plan.with_training(framework="megatron-core"))["step_time_s"]) > 0


def test_torchtitan_expert_parallel_degrees_read_and_write_back():
    """[parallelism] expert_parallel_degree and expert_tensor_parallel_degree set ep and etp
    (they were refused while the fsdp profile had no EP); --emit torchtitan writes them, and the
    file reads back to the same configuration and step."""
    from perfmodel.inputs.load import _with_links, plan_of
    from perfmodel.inputs.torchtitan import read_job
    from perfmodel.inputs.torchtitan_emit import toml_text

    text = (
        '[model]\nname = "qwen3"\nflavor = "30B-A3B"\n'
        "[training]\nlocal_batch_size = 2\nseq_len = 4096\n"
        '[activation_checkpoint]\nmode = "full"\n'
        "[parallelism]\ndata_parallel_shard_degree = -1\nexpert_parallel_degree = 8\n"
    )
    first = read_job(text, "h100-sxm", 64, "job.toml")
    assert (first.plan["parallel"]["ep"], first.plan["parallel"]["etp"]) == (8, 1)
    plan = plan_of(_with_links(first, "job.toml", "h100-sxm"), "job.toml")
    est = estimate(plan, resolve_config(plan))
    back = read_job(toml_text(plan, est), "h100-sxm", 64, "back.toml")
    assert (back.plan["parallel"]["ep"], back.plan["parallel"]["etp"]) == (8, 1)
    again = plan_of(_with_links(back, "back.toml", "h100-sxm"), "back.toml")
    step = float(estimate(again, resolve_config(again)).values["step_time_s"])
    assert step == pytest.approx(float(est.values["step_time_s"]), rel=1e-9)
