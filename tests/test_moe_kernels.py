"""Issue 30: the memory-bound kernels Megatron-Core's MoE layer and attention run besides the
GEMMs and the all-to-alls (cost/moe_kernels.py, cost/shapes.py): the alltoall dispatcher's sort by
local expert, Transformer Engine's FP8 row padding, the experts' per-expert fc2 bias, MLA's RoPE
and Q/K/V assembly, YaRN RoPE as PyTorch ops, FP8 current scaling's amax pass, and the launches of
an op issued in pieces."""

from dataclasses import replace

import numpy as np
import pytest

from perfmodel.cost.layer import Hardware, Link, time_block
from perfmodel.cost.layer_kernels import UNFUSED_ROPE
from perfmodel.cost.ops import Block, Pointwise
from perfmodel.cost.shapes import Split
from perfmodel.cost.transformer import LayerShape, Options, decoder_layer
from perfmodel.engine.estimate import resolve_config
from perfmodel.inputs import presets
from perfmodel.inputs.megatron import read_args
from perfmodel.inputs.megatron_emit import to_args
from perfmodel.specs.framework import PROFILES

S = 4096


def _moe(bias=False, padded=False, **kw):
    """Qwen3-30B-A3B's MoE shape (128 experts of ffn 768, top 8, h 2048), one micro-batch."""
    base = LayerShape(
        hidden=2048,
        heads=32,
        groups=4,
        ffn=768,
        vocab=151936,
        gated=True,
        bias=bias,
        norm="rmsnorm",
        learned_positions=False,
        tied=False,
        head_dim=128,
        experts=128,
        top_k=8,
        moe_ffn=768,
        padded=padded,
        rope=True,
    )
    return replace(base, **kw)


def _ops(m, o, ep=16, t=1):
    block = decoder_layer(m, o, 1, S, t, False, 1, ep, 1, moe=True)
    return {op.name: op for op in block.ops}


def _megatron(**kw):
    return Options(flash=True, megatron_moe=True, **kw)


def test_the_profiles_say_whose_moe_module_and_rope_they_run():
    assert PROFILES["megatron-core"]["megatron_moe_kernels"] is True
    assert PROFILES["megatron-core"]["yarn_rope_fused"] is False
    for name in ("hai-llm", "deepspeed", "fsdp", "internevo"):
        assert PROFILES[name]["megatron_moe_kernels"] is False, name
        assert PROFILES[name]["yarn_rope_fused"] is True, name


def test_alltoall_sorts_the_received_tokens_by_local_expert_and_back():
    """Megatron-Core's alltoall dispatcher: one more read and write of every token copy each way
    (sort_chunks_by_idxs), where a rank holds more than one expert; the flex dispatchers permute
    once; a framework that is not Megatron-Core's module does not sort."""
    ops = _ops(_moe(), _megatron(dispatcher="alltoall"))
    permute, sort, unsort = (ops[n] for n in ("token permute", "token sort by local expert",
                                              "token unsort"))  # fmt: skip
    assert np.asarray(sort.elements) == pytest.approx(np.asarray(permute.elements))
    assert (sort.fwd_bytes_per_el, sort.bwd_bytes_per_el) == (4, 4)
    assert np.asarray(unsort.elements) == pytest.approx(np.asarray(sort.elements))
    # one expert a rank: nothing to sort
    one = _ops(_moe(), _megatron(dispatcher="alltoall"), ep=128)
    assert float(np.asarray(one["token sort by local expert"].elements)) == 0.0
    for o in (_megatron(dispatcher="deepep"), Options(flash=True, dispatcher="alltoall")):
        assert "token sort by local expert" not in _ops(_moe(), o)


def test_fp8_pads_each_experts_rows_where_nothing_else_does():
    """Transformer Engine's Fp8Padding and Fp8Unpadding under a low-precision format with the
    alltoall dispatcher, dropless; the flex dispatchers pad in their permutation and capacity
    padding makes the counts even: no copy."""
    fp8 = {"gemm_bytes": 1}
    ops = _ops(_moe(), _megatron(dispatcher="alltoall", **fp8))
    pad, unpad = ops["FP8 row padding of expert inputs"], ops["FP8 row unpadding of expert outputs"]
    assert (pad.fwd_bytes_per_el, unpad.bwd_bytes_per_el) == (4, 4)
    assert np.asarray(pad.elements) == pytest.approx(np.asarray(ops["token permute"].elements))
    for m, o in (
        (_moe(), _megatron(dispatcher="deepep", **fp8)),
        (_moe(padded=True), _megatron(dispatcher="alltoall", **fp8)),
        (_moe(), _megatron(dispatcher="alltoall")),  # 16-bit GEMMs
    ):
        assert "FP8 row padding of expert inputs" not in _ops(m, o)


def test_the_experts_fc2_bias_is_added_expert_by_expert_in_fp32():
    """TEGroupedMLP._apply_bias (gpt-oss): 28 bytes an element forward, 36 backward, two launches
    an expert and two more."""
    ops = _ops(_moe(bias=True), _megatron(dispatcher="alltoall"), ep=8)
    bias = ops["expert fc2 bias (per expert, fp32)"]
    assert (bias.fwd_bytes_per_el, bias.bwd_bytes_per_el) == (28.0, 36.0)
    assert float(np.asarray(bias.kernels)) == 2 * 16 + 2
    assert np.asarray(bias.elements) == pytest.approx(np.asarray(ops["token permute"].elements))
    assert "expert fc2 bias (per expert, fp32)" not in _ops(_moe(), _megatron())
    assert "expert fc2 bias (per expert, fp32)" not in _ops(_moe(bias=True), Options(flash=True))


def _mla(yarn=True):
    m = presets.model("deepseek-v3")
    return replace(LayerShape.of(m), yarn=yarn)


def test_mla_assembles_q_k_v_and_runs_yarn_rope_as_pytorch_ops_in_megatron_core():
    """MLA's Q and K concatenated and V made contiguous (a read and write of each element), and
    its RoPE: one kernel where the framework fuses it, Megatron-Core's PyTorch ops for DeepSeek's
    YaRN (14 widths each way); both repeated by the mla_up_proj recompute."""
    m, x = _mla(), Split.of(1, S, 2, True)
    heads = m.heads / 2
    for fused in (True, False):
        o = Options(flash=True, yarn_rope_fused=fused)
        ops = {op.name: op for op in decoder_layer(m, o, 1, S, 2, True, 1, 64, 1, moe=True).ops}
        rope = ops["MLA RoPE" if fused else "MLA RoPE (YaRN, PyTorch ops)"]
        assembly = ops["MLA Q, K assembly and V copy"]
        assert rope.fwd_bytes_per_el == (4.0 if fused else 28.0)
        assert np.asarray(rope.elements) == pytest.approx(S * (heads + 1) * m.qk_rope)
        assert np.asarray(assembly.elements) == pytest.approx(
            float(x.tokens) * heads * (2 * (m.qk_nope + m.qk_rope) + m.v_head)
        )
        assert "mla_up_proj" in rope.modules and "mla_up_proj" in assembly.modules
    # plain RoPE (no YaRN) is fused wherever the framework fuses RoPE
    o = Options(flash=True, yarn_rope_fused=False)
    plain = decoder_layer(_mla(yarn=False), o, 1, S, 2, True, 1, 64, 1, moe=True)
    assert "MLA RoPE" in {op.name for op in plain.ops}


def test_yarn_rope_of_gpt_oss_runs_unfused_in_megatron_core():
    """Megatron-Bridge turns apply_rope_fusion off for position embeddings other than rope
    (utils/fusions.py): gpt-oss's YaRN costs Megatron-Core's PyTorch ops."""
    m = LayerShape.of(presets.model("gpt-oss-120b"))
    assert m.yarn and m.rope
    o = Options(flash=True, yarn_rope_fused=False)
    ops = {op.name: op for op in decoder_layer(m, o, 1, S, 1, False, 1, 8, 1, moe=True).ops}
    rope = ops["RoPE on q and k (YaRN, PyTorch ops)"]
    assert (rope.fwd_bytes_per_el, rope.bwd_bytes_per_el) == (UNFUSED_ROPE[0] * 2,) * 2
    fused = decoder_layer(replace(m, yarn=False), o, 1, S, 1, False, 1, 8, 1, moe=True)
    assert {op.name: op for op in fused.ops}["RoPE on q and k"].fwd_bytes_per_el == 4.0


def test_fp8_current_scaling_reads_each_tensor_for_its_amax():
    """Transformer Engine's current (tensorwise) scaling: an amax pass before each cast (2 bytes an
    element more), three launches a tensor, each expert of a grouped GEMM on its own, and the normed
    inputs cast after their norm instead of by it."""
    fp8 = {"gemm_bytes": 1, "dispatcher": "deepep"}
    delayed = _ops(_moe(), _megatron(**fp8))
    current = _ops(_moe(), _megatron(fp8_current=True, **fp8))
    name = "FP8 cast of GEMM inputs"
    assert current[name].fwd_bytes_per_el == delayed[name].fwd_bytes_per_el + 2
    # 8 local experts in fc1 and fc2 and the output projection, three kernels each
    assert float(np.asarray(current[name].kernels)) == 3 * (8 + 8 + 1)
    normed = current["FP8 cast of normed GEMM inputs (current scaling)"]
    assert np.asarray(normed.elements) == pytest.approx(S * 2048)  # the QKV projection's input
    assert "FP8 cast of normed GEMM inputs (current scaling)" not in delayed


def test_an_op_issued_in_pieces_pays_each_launch():
    hw = Hardware.from_gpu(presets.gpu("h100-sxm"), "bf16")

    def seconds(kernels):
        p = Pointwise("copy", np.asarray(1e6), 4.0, 4.0, 0, "experts", kernels=kernels)
        (op,) = time_block(hw, Block("b", (p,)), gemm_bytes=2, sizes={}, sp=np.asarray(False),
                           links={"tp": Link(np.asarray(1e9), np.asarray(1e-6))})  # fmt: skip
        return float(np.asarray(op.fwd_s))

    assert seconds(5.0) - seconds(1.0) == pytest.approx(4 * hw.overhead_s)


def test_yarn_is_read_from_config_json_megatron_and_written_back():
    """rope_scaling of type yarn (gpt-oss, DeepSeek-V3) reads as position_embedding yarn; Megatron
    --position-embedding-type yarn likewise, and --emit megatron writes it."""
    cfg = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 1024,
        "num_hidden_layers": 2,
        "num_attention_heads": 8,
        "intermediate_size": 4096,
        "vocab_size": 32000,
        "hidden_act": "silu",
    }
    assert presets.model_from_hf_config(cfg).position_embedding == "rope"
    yarn = {**cfg, "rope_scaling": {"rope_type": "yarn", "factor": 32.0}}
    assert presets.model_from_hf_config(yarn).position_embedding == "yarn"
    args = (
        "--num-layers 2 --hidden-size 1024 --num-attention-heads 8 --seq-length 4096"
        " --max-position-embeddings 4096 --micro-batch-size 1 --global-batch-size 8"
        " --position-embedding-type yarn --swiglu --normalization RMSNorm"
    )
    plan = read_args(args, "h100-sxm", num_gpus=8, vocab_size=32000).plan
    assert plan["model"]["position_embedding"] == "yarn"
    assert presets.model("gpt-oss-120b").position_embedding == "yarn"
    assert presets.model("deepseek-v3").position_embedding == "yarn"


def test_the_emitted_megatron_arguments_carry_yarn():
    case = next(
        c for c in presets.validation_cases() if c["name"] == "dgxc-deepseek-v3-h100-bf16-1024gpu"
    )
    plan = case["plan"]
    args = " ".join(to_args(plan, resolve_config(plan).as_dict()))
    assert "--position-embedding-type yarn" in args
