"""The memory-bound passes of one layer and of the optimizer step, byte for byte (cost/layer.py).

Each count follows the kernels Megatron-LM runs; the tests pin the counts, so a change to one
has to be a deliberate change of the model."""

import pytest
from helpers import timed

from perfmodel.cost import collectives as coll
from perfmodel.cost.step import optimizer_step_bytes
from perfmodel.cost.transformer import embedding, layernorm_backward_bytes, lm_head
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import load_plan, presets
from perfmodel.specs import Precision

S, H, A, T, B = 2048, 12288, 96, 8, 1  # GPT-3 175B on TP8, one sequence
M = B * S


def ops_of(bias: bool, swiglu: bool = False, sp: bool = False, persist_ln: bool = True) -> dict:
    return timed(b=B, s=S, h=H, a=A, t=T, sp=sp, bias=bias, gated=swiglu, persist_ln=persist_ln)[0]


def test_bias_add_after_the_qkv_gemm_and_its_gradient_reduction():
    ops = ops_of(bias=True)
    qkv_out = M * 3 * H / T
    assert float(ops["QKV bias add"].bytes) == pytest.approx(4 * qkv_out)  # read + write bf16
    assert "QKV bias add" not in ops_of(bias=False, swiglu=True)


def test_backward_only_passes_launch_nothing_forward():
    ops = ops_of(bias=True)
    for name in ("QKV gradient concat", "residual gradient add 1", "residual gradient add 2"):
        assert float(ops[name].fwd_s) == 0.0 and float(ops[name].bwd_s) > 0.0, name


def test_residual_gradient_adds_read_two_and_write_one():
    hw = timed(b=B, s=S, h=H, a=A, t=T)[1]
    full, sp = ops_of(bias=True), ops_of(bias=True, sp=True)
    t_full = float(full["residual gradient add 1"].bwd_s) - hw.overhead_s
    assert t_full == pytest.approx(6 * M * H / (hw.hbm_bw * hw.hbm_eff))
    # under SP the token-wise regions hold s/t tokens
    assert float(sp["residual gradient add 1"].bwd_s) - hw.overhead_s == pytest.approx(t_full / T)


def test_context_transpose_is_part_of_the_recomputed_attention_core():
    assert ops_of(bias=True)["context transpose"].attention_core


def test_two_pass_layernorm_backward_reads_its_inputs_twice():
    assert layernorm_backward_bytes(2, persistent=True) == 6  # x, dy in; dx out
    assert layernorm_backward_bytes(2, persistent=False) == 10  # x, dy twice; dx out
    slow, fast = ops_of(bias=True, persist_ln=False), ops_of(bias=True)
    assert float(slow["layernorm 1"].bwd_s) > float(fast["layernorm 1"].bwd_s)


@pytest.mark.parametrize(
    "optimizer, dtype, fp32_grads, expected",
    [
        (
            "adam",
            "bf16",
            True,
            8 + 24 + 4 + 4 + 6 + 4,
        ),  # 1/dp scaling, norm, update, master copy, zero
        (
            "adam",
            "fp16",
            False,
            4 + 24 + 6 + 8 + 4 + 4 + 6 + 2,
        ),  # + copy to fp32, unscale/inf check
        ("adam", "bf16", False, 4 + 24 + 6 + 4 + 4 + 6 + 2),
        ("adam", "fp32", False, 8 + 24 + 4 + 4 + 4),  # no master copy, fp32 grads throughout
        ("sgd", "bf16", True, 8 + 16 + 4 + 4 + 6 + 4),
    ],
)
def test_optimizer_step_bytes(optimizer, dtype, fp32_grads, expected):
    assert optimizer_step_bytes(Precision.of(dtype, fp32_grads, optimizer)) == expected


def test_sequence_parallel_pipeline_send_needs_no_all_gather():
    """With SP each rank sends its own s/t slice (Megatron skips scatter/gather): the p2p time
    drops by exactly the all-gather of the b s h activation over the TP link."""
    plan = load_plan("gpt3-175b.yaml")
    kw = dict(tp=8, pp=8, micro_batch_size=1, recompute="selective")
    plain = estimate(
        plan, resolve_config(plan, sequence_parallel=False, **kw), simulate=False
    ).values["p2p_s"]
    sp = estimate(plan, resolve_config(plan, sequence_parallel=True, **kw), simulate=False).values[
        "p2p_s"
    ]
    link = plan.system.intra_node_link
    gather = sum(
        coll.collective_time(
            "all-gather", M * H * 2, 8, link.bandwidth_bytes_per_s * link.efficiency, link.latency_s
        )
    )
    assert plain - sp == pytest.approx(gather, rel=1e-9)


def test_bias_defaults_follow_the_architecture():
    assert presets.model("gpt3-175b").has_bias
    assert not presets.model("llama2-70b").has_bias
    hf = presets.model_from_hf_config(
        {
            "hidden_size": 4096,
            "num_hidden_layers": 2,
            "num_attention_heads": 32,
            "vocab_size": 32000,
            "model_type": "qwen2",
            "attention_bias": True,
        }
    )
    assert hf.has_bias


def test_unfused_core_efficiency_slows_only_the_attention_core():
    """unfused_attention_efficiency divides the core kernels' roofline time, nothing else."""
    gpu = presets.gpu("a100-80gb")
    slow_gpu = gpu.model_copy(update={"unfused_attention_efficiency": 0.5})

    def run(g, flash=False):
        ops, hw = timed(b=B, s=S, h=H, a=A, t=T, gpu=g, flash=flash)
        return ops, hw.overhead_s

    (base, ov), (slow, _) = run(gpu), run(slow_gpu)
    for name, op in base.items():
        if (
            op.attention_core
        ):  # the roofline part takes twice as long; the launch overhead does not change
            assert float(slow[name].fwd_s) - ov == pytest.approx(2 * (float(op.fwd_s) - ov)), name
        else:
            assert float(slow[name].fwd_s) == float(op.fwd_s) and float(slow[name].bwd_s) == float(
                op.bwd_s
            ), name
    # the fused (flash) kernel has its own efficiency, attention_efficiency
    flash, flash_slow = run(gpu, flash=True)[0], run(slow_gpu, flash=True)[0]
    assert float(flash_slow["attention core (flash)"].fwd_s) == float(
        flash["attention core (flash)"].fwd_s
    )


def test_vocab_parallel_embedding_reduces_its_output_over_tp():
    """Each TP rank looks up only its vocabulary shard, so the b s h embedding output is summed over
    the TP group: an all-reduce in the forward, a reduce-scatter under SP (whose backward is an
    all-gather); Megatron-LM VocabParallelEmbedding, language_model.Embedding."""
    msg, bw, alpha = M * H * 2, 2.3e11, 3e-6

    def comm(sp, t=T):
        ops = timed(embedding, b=B, s=S, h=H, a=A, t=t, sp=sp, tp_bw=bw, tp_alpha=alpha)[0]
        c = next(o for o in ops.values() if o.kind == "comm")
        return float(c.fwd_s), float(c.bwd_s)

    assert comm(False) == pytest.approx(
        (sum(coll.collective_time("all-reduce", msg, T, bw, alpha)), 0.0)
    )
    half = sum(coll.collective_time("reduce-scatter", msg, T, bw, alpha))
    assert comm(True) == pytest.approx((half, half))
    assert comm(False, t=1) == (0.0, 0.0)


def test_logits_input_gradient_is_all_reduced_behind_the_weight_gradient():
    """Without SP the logits GEMM's input gradient is all-reduced over TP in the backward (a column-
    parallel linear); Megatron overlaps it with the logits weight-gradient GEMM like any column-
    parallel layer (tp_comm_overlap), so only the contention share is paid; exposed without overlap.
    """
    bw, alpha = 2.3e11, 3e-6
    hw = timed(b=B, s=S, h=H, a=A, t=T)[1]

    def bwd_comm(overlap):
        ops = timed(lm_head, b=B, s=S, h=H, a=A, t=T, tp_bw=bw, tp_alpha=alpha, overlap=overlap)[0]
        return float(next(o for o in ops.values() if o.kind == "comm").bwd_s)

    ar = sum(coll.collective_time("all-reduce", M * H * 2, T, bw, alpha))
    assert bwd_comm(False) == pytest.approx(ar)
    # the weight gradient (V/t x h from b s tokens) takes longer than the all-reduce: all of it
    # hides
    assert bwd_comm(True) == pytest.approx(hw.overlap_penalty * ar)
