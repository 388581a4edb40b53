"""The fixed costs of a step (issue 38): the host's time to issue each layer's kernels
(cost/host.py), counted from the block's op list, waited on where it exceeds the GPU's work, and
removed by CUDA graphs."""

import numpy as np
import pytest

from perfmodel.cost import host
from perfmodel.cost.layer import Op
from perfmodel.cost.ops import Block, Collective, FusedAttention, Gemm, Pointwise, Transfer
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import load_plan, vtrain
from perfmodel.specs.framework import PROFILES


def _op(name, kind, fwd, bwd):
    return Op(name, kind, 0.0, 0.0, np.array([fwd]), np.array([bwd]))


def test_launches_are_read_off_the_op_list():
    g = Gemm("fc", 8, 8, 8, 1, "column")
    fa = FusedAttention("core", (g,), 0.0)
    fwd_only = Pointwise("gelu", 10, 2.0, 0.0, 0.0, "column", kernels=3)
    empty = Pointwise("nothing", 0, 2.0, 2.0, 0.0, "column")
    ar = Collective("ar", "tp", 1e6, (Transfer("all-reduce"),), (Transfer("all-reduce"),))
    block = Block("b", (g, fa, fwd_only, empty, ar))
    timed = [
        _op("fc", "gemm", 1e-5, 2e-5),
        _op("core", "attention", 1e-5, 2e-5),
        _op("gelu", "elementwise", 1e-6, 0.0),
        _op("nothing", "elementwise", 0.0, 0.0),
        _op("ar", "comm", 5e-6, 0.0),  # runs forward only (tp 1 backward: no time, no launch)
    ]
    fwd, bwd = host.launches(block, timed)
    # GEMM 1 + 2 (input and weight gradients); attention 1 + 1; gelu 3 forward; all-reduce 1
    assert fwd.tolist() == [1 + 1 + 3 + 1] and bwd.tolist() == [2 + 1]


def test_the_host_adds_only_what_exceeds_the_gpus_work():
    out = host.exposed_host(np.array([10, 10, 100]), 50e-6, np.array([1e-3, 0.2e-3, 1e-3]))
    assert out == pytest.approx([0.0, 0.3e-3, 4e-3])


def _small():
    """vTrain's h1024, 20-layer model at tp 8, micro-batch 1: kernels of a few microseconds."""
    run = next(r for r in vtrain.runs() if r.tp == 8 and r.micro_batch == 1 and r.hidden == 1024)
    return run, run.plan()


def _step(plan):
    return estimate(plan, resolve_config(plan)).values["step_time_s"]


def test_a_small_model_waits_on_its_host_and_cuda_graphs_remove_it():
    run, plan = _small()
    fitted = _step(plan)
    none = _step(plan.with_training(kernel_host_s=0.0))
    graphs = _step(plan.with_training(cuda_graphs=True))
    assert graphs == none
    # the host's share is most of this step: measured 0.82 s, 0.14 s of GPU work
    assert fitted > 3 * none
    assert abs(fitted / run.measured_s - 1) < 0.3


def test_a_large_models_gpu_work_hides_its_host():
    plan = load_plan("gpt3-175b.yaml").with_training(framework="deepspeed")
    cfg = resolve_config(plan, tp=8, pp=8, micro_batch_size=1)
    on = estimate(plan, cfg).values["step_time_s"]
    off = estimate(plan.with_training(kernel_host_s=0.0), cfg).values["step_time_s"]
    assert on == off


def test_the_host_time_grows_the_step_with_the_micro_batches_it_issues():
    """The same tokens in more, smaller micro-batches issue more kernels: vTrain measures the
    step growing (0.16 s at micro-batch 4, 0.82 s at 1) and so does the model."""
    _, plan = _small()
    steps = [_step(plan.with_parallel(micro_batch_size=b)) for b in (4, 2, 1)]
    assert steps[0] < steps[1] < steps[2]
    flat = [
        _step(plan.with_parallel(micro_batch_size=b).with_training(kernel_host_s=0.0))
        for b in (4, 1)
    ]
    assert steps[2] / steps[0] > 2 * flat[1] / flat[0]


def test_only_the_fitted_profile_carries_a_host_time():
    fitted = {name for name, p in PROFILES.items() if p["kernel_host_s"]}
    assert fitted == {"deepspeed"}
    # Megatron-LM 2021's layers under ZeRO-3 (deepspeed-2021) are issued by megatron-2021's code
    assert PROFILES["deepspeed-2021"]["kernel_host_s"] == PROFILES["megatron-2021"]["kernel_host_s"]
    assert not any(p["cuda_graphs"] for p in PROFILES.values())
