"""The blocks of a plan and what one micro-batch through each costs: the Setting every cost reads
(shapes, precision, GPU numbers, kernels), the layer, embedding and LM head as op lists
(cost/ops.py), and their costs (engine/block_cost.py) per distinct knob combination, gathered back
into arrays over configurations (perfmodel/engine/evaluate.py composes them into a
step)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from perfmodel.cost import Num
from perfmodel.cost.layer import Hardware, Op, time_block
from perfmodel.cost.ops import Block
from perfmodel.cost.transformer import (
    LayerShape,
    Options,
    decoder_layer,
    embedding,
    flat_gradient_bytes,
    grad_accumulation_bytes,
    lm_head,
    mtp_head,
)
from perfmodel.engine.block_cost import BlockCost
from perfmodel.engine.knobs import CP_COMM_NAMES, DISPATCHER_NAMES, Knobs
from perfmodel.engine.memory_switches import SWITCHES
from perfmodel.engine.mesh import Mesh
from perfmodel.specs import Plan, Precision
from perfmodel.specs.by_plan import ByPlan
from perfmodel.specs.framework import PROFILES
from perfmodel.specs.precision import LOW_PRECISION, UNFUSED_NORM_QUANT

_KEY = (
    "tp",
    "micro_batch_size",
    "sequence_parallel",
    "cp",
    "ep",
    "etp",
    "cp_comm_type",
    "moe_token_dispatcher_type",
    "moe_a2a_overlap",
)
# the knobs that change the op list itself (Options), one op list per distinct combination
_OPTION_KEY = ("cp_comm_type", "moe_token_dispatcher_type", "moe_a2a_overlap")


@dataclass(frozen=True)
class Setting:
    """What every cost of a plan reads besides the knobs: shapes, precision, GPU numbers,
    kernels."""

    plan: Plan
    shape: LayerShape
    precision: Precision
    hw: Hardware
    options: Options
    moe_pattern: tuple[int, ...]

    @classmethod
    def of(cls, plan: Plan) -> Setting:
        """The plan's setting (remembered by the plan: a search asks for it some ten times a
        plan, and it reads some fifty fields)."""
        return _SETTINGS.get(plan, None, lambda: cls._of(plan))

    @classmethod
    def _of(cls, plan: Plan) -> Setting:
        tr = plan.training
        p = Precision.of(
            tr.dtype,
            tr.grad_accum_fp32,
            tr.optimizer,
            tr.mfu_peak,
            tr.reduce_dtype,
            tr.fp8_recipe,
            (tr.exp_avg_dtype, tr.exp_avg_sq_dtype),
            tr.main_params_dtype,
        )
        opts = Options(
            gemm_bytes=p.gemm_bytes,
            scale_bytes=p.scale_bytes,
            act_bytes=p.activation_bytes,
            flash=tr.flash_attention,
            persist_ln=tr.persist_layer_norm,
            dispatcher=tr.moe_token_dispatcher_type,
            a2a_overlap=tr.moe_a2a_overlap,
            dispatch_scale=dispatch_scale(tr.moe_fp8_dispatch, tr.dtype, p.activation_bytes),
            dropout=plan.model.has_dropout,
            bias_fused=tr.bias_gemm_fusion,
            fused_ce=tr.fused_cross_entropy,
            fp8_swiglu_cache=bool(PROFILES[tr.framework]["fp8_swiglu_cache"]) and p.gemm_bytes < 2,
            attn_out_bytes=float(PROFILES[tr.framework]["attn_out_cache_bytes"]),
            fp8_transpose_pass=bool(PROFILES[tr.framework]["fp8_transpose_pass"]),
            quant_unfused=tr.dtype in UNFUSED_NORM_QUANT,
            megatron_moe=bool(PROFILES[tr.framework]["megatron_moe_kernels"]),
            yarn_rope_fused=bool(PROFILES[tr.framework]["yarn_rope_fused"]),
            fp8_current=tr.dtype == "fp8" and tr.fp8_recipe == "tensorwise",
            tp_overlap_ub=tr.tp_comm_overlap_ub,
            tp_overlap_symm=bool(PROFILES[tr.framework]["tp_overlap_symm_mem"]),
            fp8_param_gather=tr.fp8_param_gather or tr.fp8_weight_cache,
            expert_call_s=tr.expert_call_overhead_s,
            pointwise="compiled" if tr.torch_compile else tr.pointwise_kernels,
            unpad=tr.attention_unpad,
            grad_accum_bytes=grad_accumulation_bytes(
                p.activation_bytes, tr.grad_accumulation_fusion, p.gradient_bytes
            ),
            flat_grad_bytes=flat_gradient_bytes(
                p.activation_bytes,
                p.reduce_bytes,
                bool(PROFILES[tr.framework]["flat_gradient_passes"]),
            ),
        )
        return cls(
            plan,
            LayerShape.of(plan.model),
            p,
            Hardware.from_gpu(plan.system.gpu, p.compute, tr.attention_backend),
            opts,
            tuple(plan.model.moe_pattern()),
        )

    @property
    def moe_layers(self) -> int:
        return sum(self.moe_pattern)

    @property
    def mtp(self) -> int:
        """Multi-token prediction layers (on the last stage)."""
        return self.plan.model.mtp_num_layers

    @property
    def mtp_kind(self) -> int:
        """The MTP layers' kind: 0 dense, 1 MoE (cost/stages.KINDS order)."""
        return int(self.plan.model.mtp_is_moe)

    def kinds(self) -> list[str]:
        """The layer kinds this model has (cost/stages.KINDS order)."""
        return [
            k
            for k, n in (
                ("dense", len(self.moe_pattern) - self.moe_layers),
                ("moe", self.moe_layers),
            )
            if n
        ]


# each recent plan's Setting
_SETTINGS: ByPlan[Setting] = ByPlan(1024)


def dispatch_scale(fp8_dispatch: bool, dtype: str, act_bytes: int) -> float:
    """Bytes a dispatched token element takes over the activations' act_bytes: under a low-precision
    format with moe_fp8_dispatch, an FP8 byte plus an FP32 scale per 128 elements (DeepSeek-V3
    report Sec. 3.3.3; DeepEP's tests count (1 + 4/128) / 2 of BF16), else 1. Dimensionless."""
    return (1 + 4 / 128) / act_bytes if fp8_dispatch and dtype in LOW_PRECISION else 1.0


def block_ops(
    st: Setting,
    builder: Callable[..., Block],
    tp: Num,
    b: Num,
    sp: Num,
    cp: Num = 1,
    ep: Num = 1,
    etp: Num = 1,
    cp_comm: str = "p2p",
    dispatcher: str | None = None,
    a2a_overlap: bool | None = None,
    **kw: Any,
) -> tuple[list[Op], Block]:
    """A block (decoder_layer, lm_head or embedding) described and timed for arrays of the split;
    ``dispatcher`` and ``a2a_overlap`` (None: the training's) are the MoE switches."""
    plan = st.plan
    mesh = Mesh(
        np.asarray(tp), 1, 1, plan.system, cp=np.asarray(cp), ep=np.asarray(ep), etp=np.asarray(etp)
    )
    o = Options(
        **{
            **st.options.__dict__,
            "cp_comm": cp_comm,
            "dispatcher": st.options.dispatcher if dispatcher is None else dispatcher,
            "a2a_overlap": st.options.a2a_overlap if a2a_overlap is None else bool(a2a_overlap),
        }
    )
    if builder is decoder_layer:
        block = builder(st.shape, o, b, plan.seq_length, tp, sp, cp, ep, etp, **kw)
    else:
        block = builder(st.shape, o, b, plan.seq_length, tp, sp, cp)
    sizes = {"tp": tp, "cp": cp, "ep": ep, "etp": etp}
    links = {d: mesh.link(d) for d in sizes}
    return (
        time_block(
            st.hw,
            block,
            gemm_bytes=st.precision.gemm_bytes,
            sizes=sizes,
            sp=sp,
            links=links,
            # userbuffers (Transformer Engine) and torchtitan's async TP pipeline the TP
            # collectives with their GEMMs whether or not the backward all-reduce is asynchronous
            # (cost/layer_kernels.tp_collective says which transfer hides behind which pass)
            overlap=plan.training.tp_comm_overlap or plan.training.tp_comm_overlap_ub,
        ),
        block,
    )


# one-configuration costs of the last plans seen, by what the blocks read of them and by split:
# the search details its top configurations one estimate at a time, and they share a handful of
# splits (so do a sweep's plans)
_ONE: dict[tuple[str, tuple[Any, ...], tuple[int, ...]], dict[str, BlockCost]] = {}


# the costs of every distinct split the last few multi-configuration calls priced, by what the
# blocks read of the plan (_signature): the search prices the memory switch sets' rows (a subset
# of its own, engine/search._with_switches) on plans whose blocks are the same
# (the splits' index, their timed ops, their costs by what selective recompute repeats)
_MANY: dict[str, tuple[dict[tuple[int, ...], int], dict[str, list[Part]], dict[Any, Any]]] = {}


def _signature(st: Setting) -> str:
    """What the blocks' timed ops read of a setting: the plan but for its parallel section, the
    optimizer's and gradients' dtypes (which reach the blocks through the options, if at all) and
    what selective recompute repeats (applied after the ops are timed), the options, and the
    precision but for the optimizer's and gradients' bytes."""
    return _SIGNED.get(st.plan, None, lambda: _signed(st))


def _signed(st: Setting) -> str:
    """_signature, written out."""
    switched = {f for s in SWITCHES.values() for f in s.fields}  # recompute_modules among them
    # the global batch reaches no block (a block is one micro-batch): a sweep of it shares them
    later = ("recompute_modules", "checkpoint_every_n_layers", "offload_modules")
    exclude: dict[str, Any] = {
        "parallel": True,
        "training": {*switched, *later, "global_batch_size"},
    }
    plan = st.plan.model_dump_json(exclude=exclude)
    prec = replace(st.precision, optimizer_bytes=0, gradient_bytes=0, reduce_wire_bytes=0)
    return f"{plan}|{st.options!r}|{prec!r}|{st.moe_pattern}"


# each recent plan's signature (computing one writes the plan's JSON)
_SIGNED: ByPlan[str] = ByPlan(64)


def _modules(st: Setting) -> tuple[Any, ...]:
    """What the blocks' costs read of the plan after their ops are timed (_assemble)."""
    tr = st.plan.training
    return (tuple(tr.recompute_modules), tr.checkpoint_every_n_layers, tuple(tr.offload_modules))


def _cached_many(st: Setting, k: Knobs) -> dict[str, BlockCost]:
    """_block_costs, reusing the timed ops of the splits recent calls priced on a setting of the
    same signature (timing only the splits not seen yet, once each), and their costs where
    selective recompute repeats the same modules."""
    cols = [np.asarray(getattr(k, name), dtype=np.int64) for name in _KEY]
    _, first, inverse = np.unique(row_codes(cols), return_index=True, return_inverse=True)
    inverse = inverse.ravel()
    splits = [tuple(r) for r in np.stack([c[first] for c in cols], axis=1).tolist()]
    sig = _signature(st)
    if sig not in _MANY:
        if len(_MANY) >= 4:
            _MANY.pop(next(iter(_MANY)))
        _MANY[sig] = ({}, {}, {})
    index, parts, assembled = _MANY[sig]
    new = [j for j, x in enumerate(splits) if x not in index]
    if new:  # time the splits not seen yet, numbered after the others
        fresh = _block_parts(st, k.take(first[new]))
        for name, groups in fresh.items():
            parts.setdefault(name, []).extend((g[0] + len(index), *g[1:]) for g in groups)
        index.update({splits[j]: len(index) + i for i, j in enumerate(new)})
        # what was assembled stays; the new splits' costs follow it
        for key, costs in assembled.items():
            more = _assemble(st, len(new), fresh, key)
            assembled[key] = {n: BlockCost.concat(c, more[n]) for n, c in costs.items()}
    modules = _modules(st)
    if modules not in assembled:
        assembled[modules] = _assemble(st, len(index), parts)
    at = np.asarray([index[x] for x in splits], dtype=np.int64)[inverse]
    return {name: c.take(at) for name, c in assembled[modules].items()}


def block_costs(st: Setting, k: Knobs) -> dict[str, BlockCost]:
    """Dense layer, MoE layer, LM head and embedding costs per micro-batch. They depend on the split
    of a micro-batch only (tp, b, sp, cp, ep, etp, CP's exchange), so each is computed once per
    distinct split and broadcast back to every configuration."""
    if len(k) != 1:
        return _cached_many(st, k)
    key = (_signature(st), _modules(st), tuple(int(np.asarray(getattr(k, n))[0]) for n in _KEY))
    hit = _ONE.get(key)
    if hit is not None:
        return hit
    out = _block_costs(st, k)
    if len(_ONE) > 256:
        _ONE.clear()
    _ONE[key] = out
    return out


def host_seconds(tr: Any) -> float:
    """The host's seconds per kernel a block's passes wait on (cost/host.py): none where CUDA
    graphs replay the layers."""
    return 0.0 if tr.cuda_graphs else float(tr.kernel_host_s)


def row_codes(cols: list[np.ndarray]) -> np.ndarray:
    """One int64 per row naming its combination of the (non-negative integer) columns: a
    mixed-radix code, column by column (np.unique on rows is slow)."""
    key = np.zeros(len(cols[0]) if cols else 0, dtype=np.int64)
    radix = 1
    for col in cols:
        col = np.asarray(col, dtype=np.int64)
        top = int(col.max(initial=0)) + 1
        # too wide for one int64: renumber the column by its distinct values
        if radix * top >= 2**62:
            values, col = np.unique(col, return_inverse=True)
            col, top = col.ravel(), len(values)
        key, radix = key * top + col, radix * top
    return key


def _block_costs(
    st: Setting, k: Knobs, kinds: tuple[str, ...] | None = None
) -> dict[str, BlockCost]:
    """block_costs over any number of configurations (of the blocks named in ``kinds``: all by
    default)."""
    key = row_codes([np.asarray(getattr(k, name), dtype=np.int64) for name in _KEY])
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    unique = _assemble(st, len(first), _block_parts(st, k.take(first), kinds))
    return {name: c.take(inverse.ravel()) for name, c in unique.items()}


# one block's ops for a group of distinct splits: (their rows, ops, block, tp, ep, etp)
Part = tuple[np.ndarray, Any, Block, np.ndarray, np.ndarray, np.ndarray]


def _block_parts(
    st: Setting, k: Knobs, kinds: tuple[str, ...] | None = None
) -> dict[str, list[Part]]:
    """The timed ops of every block for configurations of distinct splits (the costly part of
    block_costs; what recompute repeats is applied after, in _assemble)."""
    u = {name: np.asarray(getattr(k, name), dtype=np.int64) for name in _KEY}
    builders: list[tuple[str, Callable[..., Block], dict[str, Any]]] = [
        ("embedding", embedding, {}),
        ("head", lm_head, {}),
    ]
    if st.mtp:
        builders.append(("mtp_head", mtp_head, {}))
    builders += [(kind, decoder_layer, {"moe": kind == "moe"}) for kind in st.kinds()]
    if kinds is not None:
        builders = [b for b in builders if b[0] in kinds]
    out: dict[str, list[Part]] = {}
    for name, builder, kw in builders:
        # one op list per distinct option the block is built with: CP's exchange, and for the MoE
        # layer the dispatcher and the overlap too (the other blocks have no experts)
        names = _OPTION_KEY if name == "moe" else _OPTION_KEY[:1]
        opt = row_codes([u[n] for n in names])
        _, at, which = np.unique(opt, return_index=True, return_inverse=True)
        which = which.ravel()
        combos = [
            (u["cp_comm_type"][j], u["moe_token_dispatcher_type"][j], u["moe_a2a_overlap"][j])
            for j in at
        ]
        out[name] = []
        for i, (code, disp, overlap) in enumerate(combos):
            rows = np.flatnonzero(which == i)
            f = {n: u[n][rows].astype(float) for n in ("tp", "micro_batch_size", "cp", "ep", "etp")}
            sp = u["sequence_parallel"][rows].astype(bool)
            ops, block = block_ops(
                st,
                builder,
                f["tp"],
                f["micro_batch_size"],
                sp,
                f["cp"],
                f["ep"],
                f["etp"],
                CP_COMM_NAMES[int(code)],
                DISPATCHER_NAMES[int(disp)],
                bool(overlap),
                **kw,
            )
            out[name].append((rows, ops, block, f["tp"], f["ep"], f["etp"]))
    return out


def _assemble(
    st: Setting, n: int, parts: dict[str, list[Part]], modules: tuple[Any, ...] | None = None
) -> dict[str, BlockCost]:
    """The blocks' costs of ``n`` distinct splits from their timed ops, with what the plan's
    selective recompute repeats (recompute_modules, checkpoint_every_n_layers) and what
    fine-grained offloading moves (offload_modules); or those of ``modules`` (_modules)."""
    tr = st.plan.training
    recompute_modules, every, offload = modules or _modules(st)
    out: dict[str, BlockCost] = {}
    for name, groups in parts.items():
        costs = [
            (
                rows,
                BlockCost.of(
                    ops,
                    block,
                    tp,
                    ep,
                    etp,
                    recompute_modules,
                    st.shape,
                    st.precision.activation_bytes,
                    every,
                    PROFILES[tr.framework]["zero3_max_live_params"],
                    host_seconds(tr),
                    offload,
                ),
            )
            for rows, ops, block, tp, ep, etp in groups
        ]
        out[name] = BlockCost.merge(costs, n)
    if st.mtp and "head" in out:
        # each MTP layer's projection, norms and pass through the shared output head run on the
        # last stage after the main head (its transformer layer is one of that stage's layers)
        out["head"] = out["head"].plus(out.pop("mtp_head"), st.mtp)
    return out
