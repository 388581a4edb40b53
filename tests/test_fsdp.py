"""PyTorch FSDP and HSDP as the frameworks run them (issue 20): the profiles, the names FSDP and
torchtitan use, the per-layer traffic of cost/sharded.py worked by hand, the kernels PyTorch runs
(FlashAttention-2, eager and compiled pointwise ops, torchtitan's per-op checkpointing), and the
validation tables' accuracy."""

import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.cost import collectives as coll
from perfmodel.cost import sac
from perfmodel.cost import step as stp
from perfmodel.cost.layer import Link
from perfmodel.cost.layer_kernels import EAGER_RMSNORM, hidden_norm, rope
from perfmodel.cost.shapes import LayerShape, Options, flat_gradient_bytes
from perfmodel.cost.sharded import Group, Sharding, sharded_step, unit_traffic
from perfmodel.cost.transformer import decoder_layer
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.inputs import load, presets
from perfmodel.specs import Parallel, Precision
from perfmodel.specs.framework import PROFILES

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import calibrate_gpu as cg

BF16 = Precision.of("bf16", True, "adam")  # fp32 gradients: 4 B, 16-bit weights: 2 B
PURE = Precision.of("bf16", True, "adam", reduce_dtype="bf16")


def ring(kind, nbytes, n, bw, alpha):
    return sum(coll.collective_time(kind, nbytes, n, bw, alpha))


# --- rings over every NIC ----------------------------------------------------------------------


def test_a_data_parallel_ring_runs_over_every_nic_of_a_node():
    """8 ranks of the group in each node, 50 GB/s NICs, 450 GB/s NVLink: the ring moves at
    min(8 x 50, 450) = 400 GB/s; one rank per node, or a model-parallel group, at the NIC's."""
    multi = Link(50e9, 2e-6, 450e9, 3e-6, 8, True, multi_rail=True)
    assert multi.ring_bandwidth == pytest.approx(400e9)
    assert Link(50e9, 2e-6, 450e9, 3e-6, 8, True).ring_bandwidth == 50e9  # SPEC 3 (TP, CP, EP)
    assert Link(50e9, 2e-6, 450e9, 3e-6, 1, True, multi_rail=True).ring_bandwidth == 50e9
    capped = Link(100e9, 2e-6, 450e9, 3e-6, 8, True, multi_rail=True)
    assert capped.ring_bandwidth == pytest.approx(450e9)  # NVLink bounds it
    inside = Link(450e9, 3e-6, 450e9, 3e-6, 8, False, multi_rail=True)
    assert inside.ring_bandwidth == 450e9
    t = multi.seconds("all-gather", 1.6e9, 32)
    # 31 ring steps over 4 nodes, as NCCL's tuner counts and prices them (cost/nccl.py,
    # src/graph/tuning.cc nInterSteps): 3 cross the network, 28 stay on NVLink; at 1.6 GB NCCL
    # picks Simple: 14 us a network step, 3.4 us an NVLink one, 8.4 us base
    lat = 8.4e-6 + 3 * 14e-6 + 28 * 3.4e-6
    assert t == pytest.approx(lat + 31 / 32 * 1.6e9 / 400e9)


# --- the per-layer traffic, worked ---------------------------------------------------------------

LINK = Link(40e9, 5e-6)
P, L, N = 3.2e9, 32, 16  # parameters on the GPU, layers, ranks
AG = ring("all-gather", P / L * 2, N, 40e9, 5e-6)  # 16-bit weights
RS = ring("reduce-scatter", P / L * 4, N, 40e9, 5e-6)  # fp32 gradients


def step(zero_like_rows, m, *, fwd=0.01, bwd=0.02, precision=BF16, **flags):
    sh = Sharding(
        reshard_after_forward=flags.get("reshard", True),
        zero2_per_microbatch=True,
        reduce_every_microbatch=flags.get("every", True),
        recompute_regathers=False,
    )
    return float(
        sharded_step(Group(P, N, LINK), zero_like_rows, m, 0, L, (fwd, bwd), sh, 0.4, precision)
    )


def hidden(comm, window):
    return max(0.0, comm - window) + 0.4 * min(comm, window)


def test_full_shard_gathers_twice_and_reduce_scatters_every_micro_batch():
    """FULL_SHARD, 4 micro-batches: per layer the gather under the forward, the re-gather and the
    reduce-scatter under the backward; the first gather each micro-batch, the last
    reduce-scatter once."""
    expect = 4 * (L * (hidden(AG, 0.01) + hidden(AG + RS, 0.02)) + AG) + RS
    assert step(True, 4) == pytest.approx(expect)


def test_shard_grad_op_gathers_once_a_micro_batch():
    expect = 4 * (L * (hidden(AG, 0.01) + hidden(RS, 0.02)) + AG) + RS
    assert step(False, 4) == pytest.approx(expect)
    assert step(False, 4) < step(True, 4)


def test_no_sync_reduces_only_the_last_micro_batch():
    every = step(True, 4)
    once = step(True, 4, every=False)
    with_rs = hidden(AG, 0.01) + hidden(AG + RS, 0.02)
    without = hidden(AG, 0.01) + hidden(AG, 0.02)
    assert once == pytest.approx(L * (with_rs + 3 * without) + 4 * AG + RS)
    assert once < every


def test_an_fp32_reduce_dtype_doubles_the_reduce_scatter_bytes():
    ag, rs32 = unit_traffic(Group(P, N, LINK), L, BF16)
    _, rs16 = unit_traffic(Group(P, N, LINK), L, PURE)
    alpha = 15 * 5e-6
    assert rs32 - alpha == pytest.approx(2 * (rs16 - alpha))
    assert ag == pytest.approx(AG)


def test_hsdp_all_reduces_each_shard_across_the_replicas():
    """8-way shards, 4 replicas: after each layer's reduce-scatter its 1/8 shard is all-reduced
    over the 4 replicas on their own link."""
    replica = Link(25e9, 10e-6)
    g = Group(P, 8, LINK, 4, replica)
    _, rs = unit_traffic(g, L, BF16)
    shard = P / L * 4 / 8
    expect = ring("reduce-scatter", P / L * 4, 8, 40e9, 5e-6) + ring(
        "all-reduce", shard, 4, 25e9, 10e-6
    )
    assert rs == pytest.approx(expect)


def test_deepspeed_zero2_keeps_parameters_and_fsdp_shard_grad_op_gathers_them():
    """Under DeepSpeed, ZeRO-2 reduce-scatters every micro-batch and gathers once a step; under an
    FSDP profile it is SHARD_GRAD_OP: per-layer traffic every micro-batch."""
    W = stp.Windows(2.0, 1.0, 2.0, 0.05, 0.1)
    for fsdp in (False, True):
        ov = stp.Overlap(True, True, 40e6, 0.4, Sharding(True, fsdp, True, False))
        dp, per_layer = stp.data_parallel_comm([Group(P, N, LINK)], 2, 4, 0, L, W, ov, BF16)
        assert (per_layer > 0) == fsdp and (dp > 0) != fsdp


# --- names, profiles and rules -------------------------------------------------------------------


def test_fsdp_names_read_as_zero_stages_and_hsdp():
    assert Parallel(sharding_strategy="FULL_SHARD").zero_stage == 3
    assert Parallel(sharding_strategy="SHARD_GRAD_OP").zero_stage == 2
    assert Parallel(sharding_strategy="NO_SHARD").zero_stage == 0
    h = Parallel(sharding_strategy="HYBRID_SHARD", dp_shard=8)
    assert (h.zero_stage, h.dp_shard) == (3, 8)
    t = Parallel(dp_replicate=4, dp_shard=8)
    assert (t.dp, t.dp_shard) == (32, 8)
    for bad, words in (
        (dict(sharding_strategy="HYBRID_SHARD"), "set dp_shard"),
        (dict(sharding_strategy="FULL_SHARD", zero_stage=2), "zero_stage 3, not 2"),
        (dict(dp=8, dp_replicate=4, dp_shard=4), "not dp_replicate(4) x dp_shard(4)"),
        (dict(dp=16, dp_shard=3), "does not divide dp(16)"),
    ):
        with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
            Parallel(**bad)


def fsdp_plan(framework="fsdp", **parallel):
    plan = load("llama3-8b-h100").plan.with_training(framework=framework)
    return plan.with_parallel(**parallel) if parallel else plan


def test_the_profiles_say_what_each_framework_runs():
    titan, composer = fsdp_plan().training, fsdp_plan("fsdp1").training
    assert titan.reduce_dtype == composer.reduce_dtype == "fp32"
    assert titan.attention_backend == "fa2" and titan.pointwise_kernels == "eager"
    assert titan.recompute_modules == ["op_sac"] and not titan.torch_compile
    assert "reduce_dtype" in titan.profile_flags
    deepspeed = fsdp_plan("deepspeed").training
    assert not deepspeed.zero2_gathers_per_microbatch and titan.zero2_gathers_per_microbatch


def test_fsdp1_readies_each_units_flat_gradient_every_micro_batch():
    """FSDP1 (PyTorch 2.1): the views' gradients concatenated into the flat gradient (read and write
    2 B), cast to the fp32 reduce dtype (read 2, write 4), pre-divided in place (read and write
    4): 18 B a weight each micro-batch; with a bf16 reduction no cast, 8 B; Megatron's fused
    accumulation none. Only the fsdp1 profile runs it; a layer's op is its weights at that width,
    timed at the GPU's HBM rate."""
    assert flat_gradient_bytes(2, 4, True) == 18
    assert flat_gradient_bytes(2, 2, True) == 8
    assert flat_gradient_bytes(2, 4, False) == 0
    on = [k for k, prof in PROFILES.items() if prof["flat_gradient_passes"]]
    assert on == ["fsdp1"]
    case = next(c for c in presets.validation_cases() if c["name"] == "llmf-h100-7b-s2048-8gpu")
    plan = case["plan"]
    from perfmodel.engine.per_layer import per_layer_ops

    ops = {o.name: o for o in per_layer_ops(plan, resolve_config(plan))}
    h, f = 4096, 16384  # MPT 7B: QKV, output projection, up, down, with their biases
    weights = h * 3 * h + 3 * h + h * h + h + h * f + f + f * h + h
    gpu = plan.system.gpu
    seconds = weights * 18 / (gpu.hbm_bandwidth_bytes_per_s * gpu.hbm_efficiency)
    op = ops["FSDP flat-gradient copy"]
    assert float(op.fwd_s) == 0.0
    assert float(op.bwd_s) == pytest.approx(seconds, rel=0.01)
    titan = load("llama3-8b-h100").plan.with_training(framework="fsdp")
    names = {o.name for o in per_layer_ops(titan, resolve_config(titan))}
    assert "FSDP flat-gradient copy" not in names


def test_fsdp1_has_no_pipeline_nor_tensor_parallelism_and_megatron_no_hsdp():
    p = fsdp_plan("fsdp1")
    with pytest.raises(PerfModelError, match="fsdp1 has no pipeline parallelism"):
        estimate(p, resolve_config(p, tp=1, pp=2, zero_stage=3, micro_batch_size=1))
    with pytest.raises(PerfModelError, match="fsdp1 has no tensor parallelism"):
        estimate(p, resolve_config(p, tp=2, pp=1, zero_stage=3, micro_batch_size=1))
    p = fsdp_plan("megatron-core")
    with pytest.raises(PerfModelError, match="HSDP"):
        estimate(p, resolve_config(p, tp=1, pp=1, dp=8, dp_shard=4, zero_stage=3))


def test_fsdp_runs_zero3_with_pipeline_parallelism():
    """torchtitan's 405B ran FSDP + TP 8 + PP 8; Megatron-Core refuses ZeRO-3 with pp > 1."""
    plan = load("llama3.1-405b-h100").plan
    fsdp = plan.with_training(framework="fsdp")
    cfg = dict(tp=8, pp=8, zero_stage=3, micro_batch_size=1, recompute="full", vp=1)
    assert estimate(fsdp, resolve_config(fsdp, **cfg)).values["step_time_s"] > 0
    with pytest.raises(PerfModelError, match="ZeRO-3 with pp"):
        estimate(plan, resolve_config(plan, **cfg))


def test_the_search_tries_hsdp_and_labels_it(tmp_path):
    import json

    plan = fsdp_plan(tp=1, pp=1, cp=1, zero_stage=3, micro_batch_size=2, recompute="full")
    path = tmp_path / "hsdp.yaml"
    path.write_text(plan_yaml(plan.with_system(num_gpus=32)))
    r = CliRunner().invoke(main, ["plan", str(path), "--json", "--top", "50"])
    assert r.exit_code == 0, r.output
    shards = {x["config"]["dp_shard"] for x in json.loads(r.output)["results"]}
    assert 0 in shards and shards - {0} <= {2, 4, 8, 16} and len(shards) > 1
    text = CliRunner().invoke(main, ["plan", str(path), "--top", "50"]).output
    assert any(f"dp{32 // d}x{d} " in text for d in shards - {0})


def plan_yaml(plan):
    import yaml

    return yaml.safe_dump(
        {
            "model": plan.model.model_dump(exclude_none=True),
            "system": {
                "gpu": "h100-sxm",
                "num_gpus": plan.system.num_gpus,
                "gpus_per_node": 8,
                "intra_node_link": "nvlink4",
                "inter_node_link": "ib-ndr",
            },
            "training": plan.training.given(),
            "parallel": plan.parallel.model_dump(exclude_none=True),
        }
    )


# --- kernels -------------------------------------------------------------------------------------


def test_flashattention2_reaches_a_third_of_an_h100_and_triton_half_of_that():
    h100, a100 = presets.gpu("h100-sxm"), presets.gpu("a100-80gb")
    assert h100.attention_fraction("fa2") == 0.35  # Shah et al. 2024, abstract
    assert h100.attention_fraction("triton") == pytest.approx(0.175)
    assert h100.attention_fraction("fused") == h100.attention_efficiency
    assert a100.attention_fraction("fa2") == a100.attention_efficiency  # FA2 is Ampere-native


LLAMA = LayerShape.of(load("llama3-8b-h100").plan.model)


def test_eager_rmsnorm_rope_and_swiglu_move_more_bytes_than_fused_and_compiled():
    eager, fused, comp = (Options(pointwise=k) for k in ("eager", "fused", "compiled"))
    n = 1e6
    assert hidden_norm(LLAMA, eager, "n", n).fwd_bytes_per_el == 2 * EAGER_RMSNORM[0] == 36
    assert hidden_norm(LLAMA, fused, "n", n).fwd_bytes_per_el == 4
    assert rope(LLAMA, eager, n)[0].fwd_bytes_per_el == 20  # fp32 copy, complex multiply, back
    assert rope(LLAMA, comp, n)[0].fwd_bytes_per_el == 4

    def layer_bytes(o):
        ops = decoder_layer(LLAMA, o, np.array([1.0]), 4096, np.array([1.0]), np.array([False]))
        return sum(
            float(np.sum(op.elements)) * (op.fwd_bytes_per_el + op.bwd_bytes_per_el)
            for op in ops.ops
            if hasattr(op, "fwd_bytes_per_el")
        )

    assert layer_bytes(eager) > layer_bytes(fused) > layer_bytes(comp)


def test_torchtitan_op_policy_saves_every_other_matmul():
    """wq wk wv wo w1 w3 w2: wq, wv, w1, w2 saved; wk, wo, w3 recomputed. Llama 3 8B: q 4096, kv
    1024, so a sixth of the fused QKV GEMM and half of gate+up are recomputed; kept: the input,
    q and v, the attention output, w1's and w2's outputs."""
    o = Options(flash=True)
    b, s = 1.0, 4096
    block = decoder_layer(LLAMA, o, np.array([b]), s, np.array([1.0]), np.array([False]))
    share, kept = sac.policy(block, LLAMA, 2)
    assert share["QKV projection"] == pytest.approx(1 / 6)
    assert share["MLP gate+up"] == 0.5 and share["output projection"] == 1.0
    assert share["MLP down"] == 0.0 and share["layernorm 1"] == 1.0
    h, q, kv, f = 4096, 4096, 1024, 14336
    assert float(np.asarray(kept).ravel()[0]) == pytest.approx(2 * s * (h + q + kv + q + f + h))


# --- accuracy on the published FSDP runs (a benchmark bound, not a timing) ----------------------


@pytest.fixture(scope="module")
def report():
    from perfmodel.review.validate import validate

    return validate(["llmf-", "titan-"])


# the torchtitan runs of published-2026.yaml that issue's targets were set on; the runs of
# published-2026b.yaml transcribed for their memory peaks (issue 29) are timed too, and their
# step-time errors are the CP and async-TP models' to answer (docs/memory.md)
ISSUE_TITAN = (
    "titan-8b-128gpu-fsdp",
    "titan-8b-128gpu-compile-fp8",
    "titan-70b-256gpu-fsdp32-tp8",
    "titan-405b-512gpu-pp8-1f1b",
    "titan-405b-512gpu-pp8-interleaved",
)


def test_the_fsdp_tables_meet_the_issue_targets(report):
    """Mean |error| within 10%, the worst within 20% (6.6% and 18.4%, llm-foundry's 1B on 128
    H100, now that its flash rows copy q, k, v into flash-attn's varlen layout and back and its
    loss is flash-attn's fused one: docs/validation.md, "One Hopper BF16 fraction")."""
    errs = np.abs(
        [c.error_pct for c in report.cases if c.name.startswith("llmf-") or c.name in ISSUE_TITAN]
    )
    # 18 llm-foundry + 3 torchtitan + its two 405B PP 8 runs: every run expressible
    assert len(errs) == 23
    assert errs.mean() <= 10.0 and errs.max() <= 20.0


def test_llm_foundrys_flash_rows_copy_q_k_v_into_the_varlen_layout_and_back():
    """llm-foundry's flash_attn_fn (attn_impl flash) gathers q, k and v into flash-attn's packed
    rows and scatters the output back every layer (flash_attn/bert_padding.py): forward a read and
    a write an element each (2 x 2 B) and zeros plus index_put for the output (3 x 2 B); backward
    a zeroed gradient and a scatter for each input (3 x 2 B), a gather for the output (2 x 2 B).
    Only where a run says so (attention_unpad): SDPA, Megatron and the triton kernel read the
    layer's tensors as they are."""
    plain = decoder_layer(LLAMA, Options(), np.array([2.0]), 4096, np.array([1.0]), np.array([0]))
    copied = decoder_layer(
        LLAMA, Options(unpad=True), np.array([2.0]), 4096, np.array([1.0]), np.array([0])
    )
    extra = {op.name for op in copied.ops} - {op.name for op in plain.ops}
    assert extra == {"unpad q, k, v (varlen)", "pad attention output (varlen)"}
    ops = {op.name: op for op in copied.ops}
    unpad, pad = ops["unpad q, k, v (varlen)"], ops["pad attention output (varlen)"]
    tokens, q, kv = 2 * 4096, 4096, 1024  # Llama 3 8B: 32 query heads, 8 kv heads of 128
    assert float(unpad.elements[0]) == tokens * (q + 2 * kv)
    assert (unpad.fwd_bytes_per_el, unpad.bwd_bytes_per_el) == (4, 6)
    assert float(pad.elements[0]) == tokens * q
    assert (pad.fwd_bytes_per_el, pad.bwd_bytes_per_el) == (6, 4)
    flash = {c["name"] for c in presets.validation_cases() if c["plan"].training.attention_unpad}
    assert flash == {
        "llmf-h100ls-1b-s2048-128gpu",
        "llmf-h100ls-3b-s2048-512gpu",
        "llmf-h100ls-7b-s2048-512gpu",
        "llmf-h100ls-70b-s2048-128gpu",
        "llmf-h100ls-70b-s2048-512gpu",
    }


def test_ibms_fms_fsdp_runs_are_timed_as_their_readme_states():
    """IBM's fms-fsdp throughput table (one optimizer step per batch of 2 sequences of 4,096 a GPU):
    the 7B H100 row's 7,500 tokens/s a GPU is 2 x 4,096 / 7,500 s a step; the 13B rows recompute
    every other layer (their HFU/MFU, 0.59/0.51 and 0.40/0.35, is about 1 + 1/(3 x 2)); bf16
    reduction (bfSixteen), HSDP over a node for 7B. The table is checked, never fitted: the H100
    BF16 fraction is fitted on llm-foundry and DGX Cloud (benchmarks/calibrate_gpu.py)."""
    runs = {c["name"]: c for c in presets.validation_cases() if c["table"] == "fms-fsdp"}
    assert len(runs) == 10
    seven = runs["fms-eager-7b-h100-96gpu"]["plan"]
    assert seven.parallel.micro_batch_size == 2 and seven.training.global_batch_size == 2 * 96
    assert seven.parallel.dp_shard == 8 and seven.training.reduce_dtype == "bf16"
    thirteen = runs["fms-eager-13b-h100-96gpu"]["plan"].training
    assert thirteen.recompute_modules == ["layer_sac"] and thirteen.checkpoint_every_n_layers == 2
    assert runs["fms-compile-7b-h100-96gpu"]["plan"].training.torch_compile
    assert "fms-fsdp" not in cg.FITS["h100-sxm"][1]


def test_the_fms_fsdp_table_stays_within_its_bounds():
    """Out of sample by construction (no fit reads it): mean |error| 6.8%, max 15.7% (the A100
    70B, FULL_SHARD over 50 Gb/s a GPU). The bound holds the model there, not the figures."""
    from perfmodel.review.validate import validate

    errs = np.abs([c.error_pct for c in validate(["fms-"]).cases])
    assert len(errs) == 10
    assert errs.mean() <= 10.0 and errs.max() <= 20.0


def test_deepspeed_reduces_in_buckets_and_prefetches_a_bucket():
    """DeepSpeed's reduce_bucket_size (5e8): the last bucket, 5e8 / 3.2e9 of 32 layers = 5 layers'
    gradients, waits for the backward's end; its stage3_prefetch_bucket_size (5e7 parameters)
    is what it holds gathered ahead, where FSDP holds one more layer."""
    sh = Sharding(True, False, True, True, reduce_bucket_params=5e8)
    ds = float(sharded_step(Group(P, N, LINK), True, 4, 0, L, (0.01, 0.02), sh, 0.4, BF16))
    fsdp = step(True, 4)
    assert ds - fsdp == pytest.approx(4 * RS)  # 5 layers' reduce-scatters exposed, not 1
    plan = load("llama3-8b-h100").plan
    cfg = dict(tp=1, pp=1, zero_stage=3, micro_batch_size=1, recompute="full")
    w = {}
    for fw in ("deepspeed", "fsdp"):
        p = plan.with_training(framework=fw)
        v = estimate(p, resolve_config(p, **cfg)).values
        w[fw] = (v["weights_bytes"], v["params_per_gpu"] / 32)
    per_layer = w["fsdp"][1]
    # and DeepSpeed keeps a 16-bit partition beside the fp32 master, where FSDP's sharded
    # parameter is the master itself (profile fact params_are_master; issue 29)
    partition = 2 * w["fsdp"][1] * 32 / plan.system.num_gpus
    assert w["fsdp"][0] - w["deepspeed"][0] == pytest.approx(
        2 * (per_layer - 5e7) - partition, rel=1e-6
    )


def test_float8_all_gather_halves_the_gathered_bytes():
    fp8 = Precision.of("fp8", True, "adam")
    alpha = 15 * 5e-6
    ag16, _ = unit_traffic(Group(P, N, LINK), L, fp8)
    ag8, _ = unit_traffic(Group(P, N, LINK), L, fp8, fp8_gather=True)
    assert ag8 - alpha == pytest.approx((ag16 - alpha) / 2)
    ag_bf16, _ = unit_traffic(Group(P, N, LINK), L, BF16, fp8_gather=True)
    assert ag_bf16 == pytest.approx(AG)  # nothing to gather in FP8 without FP8 weights


def test_under_pipeline_parallelism_fsdp_gathers_and_reduces_once_a_step():
    """torch.distributed.pipelining turns FSDP's resharding and gradient sync off until the last
    backward: 8 micro-batches cost one gather and one reduce-scatter per layer, not 8 x 2 + 8."""
    W = stp.Windows(2.0, 1.0, 2.0, 0.01, 0.02)
    sh = Sharding(True, True, True, False, pipeline_once=True)
    ov = stp.Overlap(True, True, 0.0, 0.4, sh)
    _, once = stp.data_parallel_comm([Group(P, N, LINK)], 3, 8, 0, L, W, ov, BF16, once=True)
    expect = L * (hidden(AG, 0.01) + hidden(RS, 0.02)) + AG + RS
    assert float(once) == pytest.approx(expect)
    _, each = stp.data_parallel_comm([Group(P, N, LINK)], 3, 8, 0, L, W, ov, BF16)
    assert float(each) == pytest.approx(step(True, 8))


def test_the_command_line_takes_the_framework_cp_and_dp_shard():
    import json

    r = CliRunner().invoke(
        main,
        ["estimate", "llama3-8b-h100.yaml", "--framework", "fsdp", "--tp", "1", "--pp", "1"]
        + ["--cp", "1", "--zero", "3", "--dp-shard", "4", "--mbs", "1", "--json"],
    )
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["framework"] == "fsdp" and out["config"]["dp_shard"] == 4
    bad = CliRunner().invoke(main, ["estimate", "llama3-8b-h100.yaml", "--framework", "fsdp3"])
    assert bad.exit_code == 2 and "fsdp1" in bad.output


def test_a_data_parallel_all_reduce_across_many_nodes_takes_nccls_tree_latency():
    """1,024 ranks, 8 a node: the ring's 2 x 1,023 latency steps against the tree's 2 x 7 in the
    node and 2 x log2(128) = 14 across; a reduce-scatter stays a ring (NCCL has no tree for it).
    NCCL's own constants (cost/nccl.py): at 1 GB the tree under Simple, 0.92 of the bus
    bandwidth, half of it as algorithm bandwidth."""
    link = Link(50e9, 5e-6, 450e9, 2e-6, 8, True, multi_rail=True)
    t = link.seconds("all-reduce", 1e9, 1024)
    tree = (8.4 + 2 * (7 * 4.0 + 7 * 14.0)) * 1e-6 + 1e9 / (0.5 * 0.92 * 400e9)
    assert t == pytest.approx(tree)
    ring_lat = 1.4 * (8.4 + 1792 * 3.4 + 254 * 14.0) * 1e-6  # with the ring's plateau factor
    assert t < ring_lat + 2 * 1023 / 1024 * 1e9 / 400e9
    rs = link.seconds("reduce-scatter", 1e9, 1024)
    # its 1,023 steps under LL128, which NCCL picks here: 127 node boundaries at 4 us, 896 inside
    # nodes at 1.9 us, 14 us base, at 0.92 of the bus bandwidth
    lat = (14.0 + 127 * 4.0 + 896 * 1.9) * 1e-6
    assert rs == pytest.approx(lat + 1023 / 1024 * 1e9 / (0.92 * 400e9))


def test_no_sync_holds_the_unsharded_gradients_until_the_last_micro_batch():
    plan = load("llama3-8b-h100").plan.with_training(framework="fsdp")
    cfg = dict(tp=1, pp=1, zero_stage=3, micro_batch_size=1, recompute="full")
    every = estimate(plan, resolve_config(plan, **cfg)).values
    quiet = plan.with_training(reduce_every_microbatch=False)
    held = estimate(quiet, resolve_config(quiet, **cfg)).values
    assert held["num_micro_batches"] > 1
    # fp32 gradients of the whole (unsharded) model on this GPU
    extra = held["weights_bytes"] - every["weights_bytes"]
    assert extra == pytest.approx(4 * held["params_per_gpu"], rel=1e-6)
    assert held["zero_comm"] < every["zero_comm"]


def test_torchtitan_per_layer_checkpointing_recomputes_every_nth_layer():
    """selective_ac_option "3": a third of the layers recompute their forward and keep their
    input; the other two thirds keep everything."""
    plan = load("llama3-8b-h100").plan.with_training(
        framework="fsdp", recompute_modules=["layer_sac"], checkpoint_every_n_layers=3
    )
    cfg = dict(tp=1, pp=1, zero_stage=3, micro_batch_size=1)
    none = estimate(plan, resolve_config(plan, recompute="none", **cfg)).values
    full = estimate(plan, resolve_config(plan, recompute="full", **cfg)).values
    third = estimate(plan, resolve_config(plan, recompute="selective", **cfg)).values
    assert third["recompute"] == pytest.approx(full["recompute"] / 3, rel=1e-6)
    expect = (2 * none["activations_bytes"] + full["activations_bytes"]) / 3
    assert third["activations_bytes"] == pytest.approx(expect, rel=0.02)


def test_torchtitan_splits_the_batch_into_pp_micro_batches_by_default():
    plan = load("llama3.1-405b-h100").plan.with_training(framework="fsdp")
    cfg = resolve_config(plan, tp=8, pp=8, zero_stage=3)
    assert cfg.num_micro_batches == 8  # n_microbatches = pipeline_parallel_degree
    mega = resolve_config(plan.with_training(framework="megatron-core"), tp=8, pp=8)
    assert mega.micro_batch_size == 1
