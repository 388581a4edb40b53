"""The mixture-of-experts FFN of a decoder layer, described as data (cost/ops.py).

Megatron-Core MoE (SPEC 11): a router, the token permutation, the expert-parallel exchange (the
all-to-all, all-gather or DeepEP dispatcher), the local experts' grouped GEMMs with expert TP,
and the shared experts as a TP-split dense MLP. Every shape is per rank and per micro-batch,
numpy arrays over configurations; bytes per element are stated at each op.
"""

from __future__ import annotations

from perfmodel.cost import Num

from .layer_kernels import activation, tp_collective
from .moe_kernels import expert_bias, fp8_row_padding, token_sort
from .ops import Collective, Gemm, OpDesc, Pointwise, Transfer, tag
from .shapes import LayerShape, Options, Split, gathered_bytes

__all__ = ["moe_ops"]


def moe_ops(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """Mixture-of-experts FFN (Megatron-Core MoE with the all-to-all dispatcher; SPEC 11): a router
    GEMM h x e on the rank's tokens (s/t of them under SP, which Megatron requires for MoE with TP),
    the tokens permuted by expert and sent to their k experts by an all-to-all over the EP group
    ((ep-1)/ep of them leave the rank), the local experts' grouped GEMMs, and the way back. With
    balanced routing every expert rank receives as many token copies as it sends; the busiest rank
    gets ``imbalance`` times that, which sets the pace of its GEMMs and of the all-to-all. Expert TP
    (etp) splits each expert's inner size and gathers the tokens over its group first. Shared
    experts run on every token as a TP-split dense MLP. The dispatcher may instead all-gather the EP
    group's tokens (Megatron's allgather dispatcher), or send each token once per node (DeepEP)."""
    act, h, E, k, imb = o.act_bytes, m.hidden, m.experts, m.top_k, m.imbalance
    n_loc = x.tokens / x.tok  # this rank's tokens
    copies = n_loc * k  # token copies it dispatches (= receives, balanced)
    rows = copies * x.etp * x.ep / E  # rows per local expert, mean
    dispatch, combine = _ep_exchange(
        o,
        act * n_loc * x.ep * h * imb,
        act * copies * h * imb,
        k,
        (m.route_groups, m.route_topk),
        imb,
    )
    ops: list[OpDesc] = [
        Gemm(
            "router",
            n_loc,
            h,
            E,
            1,
            "tokens",
            h * E,
            saved=act * n_loc * h + 4.0 * n_loc * E,
            sixteen_bit=True,
            rebuilt=("layernorm", act * n_loc * h),
        ),
        Pointwise("token permute", copies * h * imb, 2 * act, 2 * act, 0, "experts"),
        dispatch,
        *_routed_experts(m, o, x, rows, copies),
        combine,
        Pointwise("token unpermute", copies * h * imb, 2 * act, 2 * act, 1, "experts"),
    ]
    ops = tag(ops, "moe")
    if m.shared_ffn:
        ops += _shared_experts(m, o, x)
    return ops


def _ep_exchange(
    o: Options,
    gathered: Num,
    sent: Num,
    k: int,
    route: tuple[int, int] = (0, 0),
    imbalance: float = 1.0,
) -> tuple[Collective, Collective]:
    """Dispatch and combine over the EP group, by Megatron-Core dispatcher: with ``allgather``
    every rank gathers the group's tokens (``gathered`` bytes) and keeps its experts' share;
    otherwise an all-to-all of the rank's token copies (``sent`` bytes); DeepEP and HybridEP send a
    token once per remote node over the NIC and once per rank over NVLink, not once per expert
    (collectives.forwarded_all_to_all_time). With Megatron-Core's EP overlap each all-to-all hides
    under the expert GEMMs of the micro-batch it is interleaved with, forward under a forward,
    backward under a backward. ``imbalance``: the busiest rank's load over the mean, in both byte
    counts."""
    if o.dispatcher == "allgather":
        gather, scatter = (Transfer("all-gather"),), (Transfer("reduce-scatter"),)
        return (
            Collective("EP dispatch (all-gather)", "ep", gathered, fwd=gather, bwd=scatter),
            Collective("EP combine (reduce-scatter)", "ep", gathered, fwd=scatter, bwd=gather),
        )
    # HybridEP (NVIDIA's flex backend for NVLink domains) dedups per domain as DeepEP does per node:
    # the mesh's "node" for EP is the NVLink domain (engine/mesh.py), so both cost the same here
    k_dedup = k if o.dispatcher in ("deepep", "hybridep") else 0
    fc1 = "expert fc1 (grouped)"
    f8 = o.dispatch_scale  # FP8 dispatch: the dispatch and the combine's gradient, not the rest

    def a2a(direction: str, scale: float) -> tuple[Transfer, ...]:
        return (
            Transfer("all-to-all", behind=(fc1, direction) if o.a2a_overlap else None, scale=scale),
        )

    dispatch, combine = (
        Collective(
            f"EP {name} (all-to-all)",
            "ep",
            sent,
            fwd=a2a("fwd", fwd_scale),
            bwd=a2a("bwd", bwd_scale),
            dedup_k=k_dedup,
            route=route,
            imbalance=imbalance,
        )
        for name, fwd_scale, bwd_scale in (("dispatch", f8, 1.0), ("combine", 1.0, f8))
    )
    return dispatch, combine


def _routed_experts(m: LayerShape, o: Options, x: Split, rows: Num, copies: Num) -> list[OpDesc]:
    """The rank's local experts: expert TP's gather of the tokens, the grouped fc1 and fc2 GEMMs of
    ``rows`` rows each (the busiest rank's ``imbalance`` times more set their time), the activation
    between them, and the scatter back."""
    act, h, fe, etp, imb = o.act_bytes, m.hidden, m.moe_ffn, x.etp, m.imbalance
    E, local = m.experts, m.experts / x.ep
    n_e = (2 if m.gated else 1) * fe
    gathered = act * copies * etp * h * imb
    low = o.gemm_bytes + o.scale_bytes  # bytes of a quantized element with its block scale
    # the SwiGLU input: 16-bit, or FP8 where the framework caches it so (DeepSeek-V3 Sec. 3.3.2)
    cache = low if o.fp8_swiglu_cache else act
    gather, scatter = (Transfer("all-gather"),), (Transfer("reduce-scatter"),)
    expert_act = activation(
        m,
        act,
        "expert " + m.act_name,
        rows * local * fe / etp * imb,
        False,
        saved=cache * rows * local * n_e / etp,
        pointwise=o.pointwise,
    )
    # Megatron-Core's moe_act recompute frees the activation's output once fc2 has run
    # (CheckpointWithoutOutput in TEGroupedMLP): in 16 bits that is what fc2 saved; under FP8 fc2
    # keeps its own quantized copy, which only an FP8 SwiGLU cache rebuilds (DeepSeek-V3)
    rebuilt = (
        ("moe_act", act * rows * local * fe / etp)
        if o.gemm_bytes >= 2
        else ("moe_act", low * rows * local * fe / etp) if o.fp8_swiglu_cache else ("", 0.0)
    )
    # Megatron-Core's sort by local expert, FP8 row padding and per-expert fc2 bias (moe_kernels.py)
    sort, unsort = token_sort(m, o, x, gathered / act)
    pad, unpad = fp8_row_padding(m, o, gathered / act)
    return [
        Collective("ETP all-gather of expert tokens", "etp", gathered, fwd=gather, bwd=scatter),
        *sort,
        *pad,
        Gemm(
            "expert fc1 (grouped)",
            rows,
            h,
            n_e / etp,
            local,
            "experts",
            E * h * n_e,
            saved=act * rows * local * h,
            time_rows=rows * imb,
            host_s=local * o.expert_call_s,
        ),
        *tag([expert_act], "moe_act"),
        Gemm(
            "expert fc2 (grouped)",
            rows,
            fe / etp,
            h,
            local,
            "experts",
            E * fe * h,
            saved=act * rows * local * fe / etp,
            time_rows=rows * imb,
            host_s=local * o.expert_call_s,
            rebuilt=rebuilt,
        ),
        *expert_bias(m, o, gathered / act, local),
        *unpad,
        *unsort,
        Collective(
            "ETP reduce-scatter of expert outputs", "etp", gathered, fwd=scatter, bwd=gather
        ),
    ]


def _shared_experts(m: LayerShape, o: Options, x: Split) -> list[OpDesc]:
    """Shared experts (DeepSeek-AI 2024, DeepSeekMoE): a TP-split dense MLP on every token."""
    act, h, M, t, tok = o.act_bytes, m.hidden, x.tokens, x.t, x.tok
    fs, n_s = m.shared_ffn, (2 if m.gated else 1) * m.shared_ffn
    ops: list[OpDesc] = [
        Gemm(
            "shared expert up",
            M,
            h,
            n_s / t,
            1,
            "column",
            h * n_s,
            saved=act * M * h / tok,
            rebuilt=("layernorm", act * M * h / tok),
        ),
        activation(
            m,
            act,
            "shared expert " + m.act_name,
            M * fs / t,
            False,
            saved=act * M * n_s / t,
            pointwise=o.pointwise,
        ),
        Gemm("shared expert down", M, fs / t, h, 1, "row", fs * h, saved=act * M * fs / t),
        tp_collective(
            "TP comm of the shared expert",
            M * h * act,
            "shared expert up",
            gathered=gathered_bytes(o),
        ),
    ]
    return tag(ops, "shared_experts")
