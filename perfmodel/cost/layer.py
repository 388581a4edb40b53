"""Every operation of one transformer layer on one GPU, forward and backward (SPEC 4-5).

Megatron tensor parallelism (Shoeybi et al. 2019; seed 000, 2.3): QKV and
MLP-up are column-parallel (N split t ways), the output projection and
MLP-down row-parallel (K split t ways); forward one all-reduce of b s h
elements after attention and one after the MLP, backward two more at the
column-parallel inputs. With SP (Korthikanti 2022; seed 002) each all-reduce
becomes a reduce-scatter plus an all-gather and the token-wise regions
(norms, dropout, residual) work on s/t tokens.

Times come from the roofline with the GPU's achievable efficiencies
(roofline.kernel_time, roofline.gemm_efficiency). Backward of a GEMM is two
GEMMs (input gradient and weight gradient) of the same FLOPs. Megatron
overlaps the backward collective at a column-parallel input with that
layer's weight-gradient GEMM (Korthikanti 2022, Sec. 6.2: the reason full
recompute costs 39%, not 33%), so only the excess is exposed.

Every quantity is a numpy array broadcast over configurations: micro-batch
b, TP degree t, SP flag, and the TP link's bandwidth and latency.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import collectives as coll
from .roofline import gemm_bytes, gemm_efficiency, gemm_flops, kernel_time

DTYPE_BYTES = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


@dataclass
class Op:
    """One operation: forward FLOPs and HBM bytes (wire bytes per rank for comm), times in seconds."""

    name: str
    kind: str            # gemm | attention | elementwise | comm
    flops: np.ndarray
    bytes: np.ndarray
    fwd_s: np.ndarray
    bwd_s: np.ndarray    # backward time on the critical path (exposed part for comm)
    attention_core: bool = False  # recomputed by selective recompute
    compute_bound: np.ndarray | None = None


@dataclass(frozen=True)
class Hardware:
    """The numbers of a GPU and the TP link that the layer model needs (SI units)."""

    peak: float              # FLOP/s for the compute dtype
    hbm_bw: float            # bytes/s
    num_sms: int
    gemm_eff: float
    k_overhead: float
    hbm_eff: float
    attn_eff: float
    overhead_s: float
    overlap_penalty: float = 0.0  # fraction of overlapped comm time still paid (SM/HBM contention)
    tail_waves: bool = True       # classic wave quantization (False: stream-K balanced tails)
    core_eff: float = 1.0         # unfused attention core: fraction of its roofline speed it reaches

    @classmethod
    def from_gpu(cls, gpu, dtype: str) -> "Hardware":
        return cls(gpu.peak(dtype), gpu.hbm_bandwidth_bytes_per_s, gpu.num_sms, gpu.gemm_efficiency,
                   gpu.gemm_k_overhead, gpu.hbm_efficiency, gpu.attention_efficiency, gpu.kernel_overhead_s,
                   gpu.comm_overlap_penalty, gpu.gemm_tail_waves,
                   gpu.unfused_attention_efficiency)


def _gemm_time(hw: Hardware, M, K, N, dt, batch=1, core=1.0):
    eff = gemm_efficiency(M, N, K, hw.num_sms, hw.gemm_eff, hw.k_overhead, batch, hw.tail_waves)
    return kernel_time(gemm_flops(M, K, N, batch), gemm_bytes(M, K, N, dt, batch), hw.peak, hw.hbm_bw,
                       eff * core, hw.hbm_eff * core, hw.overhead_s)


def gemm_op(hw: Hardware, name: str, M, K, N, dt, batch=1, attention_core=False):
    """A GEMM and its backward (input gradient M x N x K, weight gradient K x M x N). Returns (op, wgrad_s)."""
    flops = gemm_flops(M, K, N, batch)
    nbytes = gemm_bytes(M, K, N, dt, batch)
    core = hw.core_eff if attention_core else 1.0
    fwd = _gemm_time(hw, M, K, N, dt, batch, core)
    dgrad = _gemm_time(hw, M, N, K, dt, batch, core)
    wgrad = _gemm_time(hw, K, M, N, dt, batch, core)
    bound = flops / (hw.peak * hw.gemm_eff) >= nbytes / (hw.hbm_bw * hw.hbm_eff)
    return Op(name, "gemm", flops, nbytes, fwd, dgrad + wgrad, attention_core, bound), dgrad, wgrad


def elementwise_op(hw: Hardware, name: str, elements, fwd_bytes_per_el, bwd_bytes_per_el,
                   flops_per_el=1.0, attention_core=False):
    """A memory-bound elementwise kernel: time = bytes / (HBM BW x efficiency) + overhead. A pass
    that moves no bytes in one direction (a backward-only kernel) launches nothing there."""
    el = np.asarray(elements, dtype=float)
    hbm_eff = hw.hbm_eff * (hw.core_eff if attention_core else 1.0)

    def run(bytes_per_el):
        if not bytes_per_el:
            return np.zeros(el.shape)
        return kernel_time(el * flops_per_el, el * bytes_per_el, hw.peak, hw.hbm_bw, 1.0, hbm_eff, hw.overhead_s)
    fwd, bwd = run(fwd_bytes_per_el), run(bwd_bytes_per_el)
    return Op(name, "elementwise", el * flops_per_el, el * fwd_bytes_per_el, fwd, bwd, attention_core,
              np.zeros(el.shape, dtype=bool))


def layer_ops(hw: Hardware, *, b, s: int, h: int, a: int, g: int, f: int, swiglu: bool, dtype: str,
              t, sp, flash: bool, tp_bw, tp_alpha, overlap: bool = True,
              grad_accum_bytes: float = 0.0, bias: bool = False, persist_ln: bool = True) -> list[Op]:
    """The operations of one layer on one GPU for a micro-batch of b sequences (SPEC 5).

    Memory-bound kernels follow Megatron-LM's GPT layer (megatron/model/transformer.py, 2021-2022):
    besides the fused norm, softmax, dropout and bias-activation kernels, the QKV bias is a separate
    add (F.linear on a 3-D input), the attention context is made contiguous with a copy, the
    backward concatenates the q, k, v gradients back into the fused QKV gradient, autograd adds the
    two gradients that reach each residual branch point, and every bias gradient is a reduction
    over the tokens. Bytes per element are stated at each op; `bias` is False for bias-free models."""
    dt = DTYPE_BYTES[dtype]
    act = max(dt, 2)  # activations are at least 16-bit
    b = np.asarray(b, dtype=float)
    t = np.asarray(t, dtype=float)
    sp = np.asarray(sp, dtype=bool)
    d = h // a
    M = b * s
    tok_shard = np.where(sp, t, 1.0)           # token-wise regions work on s/t tokens under SP
    heads = a / t                               # heads per GPU
    mlp_n = (2 if swiglu else 1) * f / t        # swiglu: gate and up projections fused

    ln_bwd = layernorm_backward_bytes(act, persist_ln)
    ops: list[Op] = []
    ops.append(elementwise_op(hw, "layernorm 1", M * h / tok_shard, 2 * act, ln_bwd, 8))
    qkv, qkv_dgrad, qkv_wgrad = gemm_op(hw, "QKV projection", M, h, (h + 2 * g * d) / t, dt)
    ops.append(qkv)
    qkv_el = M * (h + 2 * g * d) / t
    if bias:  # output += bias after the GEMM (read and write); backward: bias gradient, a reduction
        ops.append(elementwise_op(hw, "QKV bias add", qkv_el, 2 * act, act, 1))
    if flash:
        flops = 4.0 * b * s * s * h / t
        io = act * b * s * (2 * h + 2 * g * d) / t
        fwd = kernel_time(flops, io, hw.peak, hw.hbm_bw, hw.attn_eff, hw.hbm_eff, hw.overhead_s)
        bwd = kernel_time(2.5 * flops, 2 * io, hw.peak, hw.hbm_bw, hw.attn_eff, hw.hbm_eff, hw.overhead_s)
        ops.append(Op("attention core (flash)", "attention", flops, io, fwd, bwd, True,
                      flops / (hw.peak * hw.attn_eff) >= io / (hw.hbm_bw * hw.hbm_eff)))
    else:
        nb = b * heads  # independent (s x d)(d x s) products
        ops.append(gemm_op(hw, "attention scores QK^T", s, d, s, dt, nb, True)[0])
        # fused scale-mask-softmax: read and write s^2 per head; backward reads y, dy, writes dx
        ops.append(elementwise_op(hw, "softmax", nb * s * s, 2 * act, 3 * act, 5, True))
        # dropout on probabilities: 1-byte mask
        ops.append(elementwise_op(hw, "attention dropout", nb * s * s, 2 * act + 1, 2 * act + 1, 1, True))
        ops.append(gemm_op(hw, "attention x V", s, s, d, dt, nb, True)[0])
        # context [b a/t, s, d] -> [s, b, h/t]: permute + contiguous, a copy each way (the last op
        # of Megatron's CoreAttention, so selective recompute repeats it)
        ops.append(elementwise_op(hw, "context transpose", M * h / t, 2 * act, 2 * act, 0, True))
    # backward: the q, k, v gradients are concatenated into the fused QKV gradient (split's backward)
    ops.append(elementwise_op(hw, "QKV gradient concat", qkv_el, 0.0, 2 * act, 0))
    proj, _, _ = gemm_op(hw, "output projection", M, h / t, h, dt)
    ops.append(proj)

    message = M * h * act
    zero = np.zeros(np.broadcast(t, b).shape)
    # forward g (all-reduce, or reduce-scatter under SP) after each row-parallel GEMM;
    # backward f at each column-parallel input, overlapped with that GEMM's weight gradient.
    def hidden(comm, gemm):
        return _behind(hw, comm, gemm, overlap)

    ar, half = _tp_collective_times(message, t, tp_bw, tp_alpha)

    def tp_comm(label: str, col_wgrad, col_dgrad):
        no_sp_bwd = hidden(ar, col_wgrad)
        # SP backward: all-gather of the gradient (exposed), re-gather of the input
        # under dgrad, reduce-scatter under wgrad (Megatron's SP backward)
        sp_bwd = half + hidden(half, col_dgrad) + hidden(half, col_wgrad)
        fwd_kind = np.where(sp, 2 * half, ar)  # SP forward: reduce-scatter here + all-gather before next GEMM
        wire = np.where(sp, 2 * coll.bytes_per_rank("reduce-scatter", message, t),
                        coll.bytes_per_rank("all-reduce", message, t))
        bwd = np.where(t > 1, np.where(sp, sp_bwd, no_sp_bwd), 0.0)
        return Op(label, "comm", zero, wire + zero, np.where(t > 1, fwd_kind, 0.0) + zero, bwd + zero)

    ops.append(tp_comm("TP comm after attention", qkv_wgrad, qkv_dgrad))
    # fused bias-dropout-add: read x, residual, write out, 1-byte mask; backward reads dy and the
    # mask, writes dx (the residual's gradient is dy itself), plus the bias-gradient reduction
    bda_bwd = 2 * act + 1 + (act if bias else 0)
    ops.append(elementwise_op(hw, "bias-dropout-add 1", M * h / tok_shard, 3 * act + 1, bda_bwd, 3))
    # the residual branch point's two gradients (through the norm, and straight) are summed
    ops.append(elementwise_op(hw, "residual gradient add 1", M * h / tok_shard, 0.0, 3 * act, 1))
    ops.append(elementwise_op(hw, "layernorm 2", M * h / tok_shard, 2 * act, ln_bwd, 8))
    up, up_dgrad, up_wgrad = gemm_op(hw, "MLP up" + (" (gate+up)" if swiglu else ""), M, h, mlp_n, dt)
    ops.append(up)
    if swiglu:
        ops.append(elementwise_op(hw, "swiglu", M * f / t, 3 * act, 5 * act, 4))
    else:  # fused bias-gelu; backward reads dy and x, writes dx, plus the bias-gradient reduction
        ops.append(elementwise_op(hw, "bias-gelu", M * f / t, 2 * act, 3 * act + (act if bias else 0), 8))
    ops.append(gemm_op(hw, "MLP down", M, f / t, h, dt)[0])
    ops.append(tp_comm("TP comm after MLP", up_wgrad, up_dgrad))
    ops.append(elementwise_op(hw, "bias-dropout-add 2", M * h / tok_shard, 3 * act + 1, bda_bwd, 3))
    ops.append(elementwise_op(hw, "residual gradient add 2", M * h / tok_shard, 0.0, 3 * act, 1))
    if grad_accum_bytes:
        # unfused weight-gradient accumulation: main_grad += grad over every weight of the layer,
        # once per micro-batch in backward (read the new gradient and the buffer, write the buffer)
        weights = (h * (h + 2 * g * d) + h * h + (3 if swiglu else 2) * h * f) / t
        ops.append(elementwise_op(hw, "weight-gradient accumulation", weights + 0 * b, 0.0, grad_accum_bytes, 1))
    return ops


def _tp_collective_times(message, t, tp_bw, tp_alpha):
    """Seconds of a TP all-reduce of `message` bytes and of its half, a reduce-scatter or an
    all-gather (the same ring time, SPEC 3)."""
    return (sum(coll.collective_time("all-reduce", message, t, tp_bw, tp_alpha)),
            sum(coll.collective_time("reduce-scatter", message, t, tp_bw, tp_alpha)))


def _behind(hw: Hardware, comm, gemm, overlap: bool):
    """A collective overlapped with a GEMM (Megatron's asynchronous TP communication): the excess
    is exposed, and the overlapped part still costs overlap_penalty of its time through SM and
    HBM contention. Without overlap, all of it."""
    if not overlap:
        return comm
    return coll.overlapped_time(comm, gemm, hw.overlap_penalty)


def output_layer_ops(hw: Hardware, *, b, s: int, h: int, V: int, dtype: str, t, sp, tp_bw, tp_alpha,
                     persist_ln: bool = True, overlap: bool = True) -> list[Op]:
    """Last stage: final norm, the TP collective at the logits input, logits GEMM 2bshV/t and the fp32
    vocab-parallel loss. The logits GEMM is a column-parallel linear (Megatron-LM parallel_lm_logits):
    without SP its input gradient is all-reduced over TP in the backward, behind the weight gradient;
    under SP its input is all-gathered in the forward (exposed) and, in the backward, gathered again
    behind the input-gradient GEMM and reduce-scattered behind the weight gradient."""
    dt = DTYPE_BYTES[dtype]
    act = max(dt, 2)
    b = np.asarray(b, dtype=float)
    t = np.asarray(t, dtype=float)
    sp = np.asarray(sp, dtype=bool)
    M = b * s
    ops = [elementwise_op(hw, "final layernorm", M * h / np.where(sp, t, 1.0), 2 * act,
                          layernorm_backward_bytes(act, persist_ln), 8)]
    logits, dgrad, wgrad = gemm_op(hw, "logits", M, h, V / t, dt)
    message = M * h * act
    ar, half = _tp_collective_times(message, t, tp_bw, tp_alpha)
    fwd = np.where((t > 1) & sp, half, 0.0)
    bwd = np.where(t > 1, np.where(sp, _behind(hw, half, dgrad, overlap) + _behind(hw, half, wgrad, overlap),
                                   _behind(hw, ar, wgrad, overlap)), 0.0)
    wire = np.where(sp, coll.bytes_per_rank("all-gather", message, t), 0.0)
    ops.append(Op("TP comm at the logits input", "comm", np.zeros(np.shape(fwd)), wire, fwd, bwd))
    ops.append(logits)
    # vocab-parallel cross-entropy on fp32 logits, HBM passes over the [b s, V/t] tensor as Megatron-LM
    # runs them (gpt_model: output.float(); mpu/cross_entropy.py, _VocabParallelCrossEntropy):
    # forward cast 2+4, max 4, sub_ 4+4, exp 4+4, sum 4, div_ 4+4 = 38 B per logit;
    # backward mul_ 4+4 and the cast's backward 4+2 = 14 B per logit
    ops.append(elementwise_op(hw, "cross-entropy (fp32)", M * V / t, 38.0, 14.0, 6))
    return ops


def embedding_ops(hw: Hardware, *, b, s: int, h: int, dtype: str, t, sp, tp_bw, tp_alpha) -> list[Op]:
    """First stage: the vocab-parallel lookup, its TP reduction, dropout (memory-bound), backward
    scatter-add. Each rank looks up only its vocabulary shard and zeroes the other rows, so the b s h
    output is summed over TP: an all-reduce in the forward (its backward is the identity), or under
    SP a reduce-scatter whose backward is an all-gather (Megatron-LM VocabParallelEmbedding and
    language_model.Embedding)."""
    act = max(DTYPE_BYTES[dtype], 2)
    M = np.asarray(b, dtype=float) * s
    t = np.asarray(t, dtype=float)
    sp = np.asarray(sp, dtype=bool)
    shard = np.where(sp, t, 1.0)
    message = M * h * act
    ar, half = _tp_collective_times(message, t, tp_bw, tp_alpha)
    fwd = np.where(t > 1, np.where(sp, half, ar), 0.0)
    bwd = np.where((t > 1) & sp, half, 0.0)
    wire = np.where(sp, coll.bytes_per_rank("reduce-scatter", message, t), coll.bytes_per_rank("all-reduce", message, t))
    return [Op("TP reduction of the embedding", "comm", np.zeros(np.shape(fwd)), wire, fwd, bwd),
            elementwise_op(hw, "embedding + dropout", M * h / shard, 3 * act + 1, 3 * act + 1, 1)]


def layernorm_backward_bytes(act: int, persistent: bool) -> float:
    """HBM bytes per element of a layernorm backward. The persistent kernel (apex contrib
    FastLayerNorm, Megatron's default since late 2021) reads x and dy once and writes dx; the
    earlier two-pass kernel (apex fused_layer_norm_cuda, used by Megatron before it) reads x and
    dy once for the gamma/beta partial sums (cuComputePartGradGammaBeta) and again for dx
    (cuComputeGradInput)."""
    return 3 * act if persistent else 5 * act


def grad_accumulation_bytes(dtype: str, fused: bool, fp32_buffer: bool) -> float:
    """HBM bytes per weight of an unfused gradient accumulation: read grad, read and write the buffer."""
    if fused:
        return 0.0
    return max(DTYPE_BYTES[dtype], 2) + 2 * (4 if fp32_buffer else 2)
