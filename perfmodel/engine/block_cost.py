"""What one micro-batch through a block costs on one GPU, as arrays over configurations: its
seconds of compute and communication, stored activations under each recompute choice and its
parameters, read off the block's timed ops (cost/layer.py); engine/blocks.py builds them per
distinct split of a micro-batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from perfmodel.cost import Array, Num, sac
from perfmodel.cost import host as hst
from perfmodel.cost import offload_modules as offm
from perfmodel.cost import sharded as shd
from perfmodel.cost import step as stp
from perfmodel.cost.layer import Op
from perfmodel.cost.ops import Block, Gemm, Pointwise, in_modules
from perfmodel.cost.shapes import LayerShape
from perfmodel.engine.switch_table import MODULE_SETS

_COMPUTE = ("gemm", "attention", "elementwise")


def _expert_params(block: Block) -> Num:
    """The block's routed experts' parameters (the whole model's)."""
    return sum(
        (
            op.params
            for op in block.ops
            if isinstance(op, (Gemm, Pointwise)) and op.shard == "experts"
        ),
        0.0,
    )


def _by_recompute(f: Callable[[int], Num], zero: Num) -> Array:
    """(3, n): ``f`` of each recompute code (0 none, 1 selective, 2 full), per configuration."""
    return np.stack([np.broadcast_to(f(rc) + zero, np.shape(zero)) for rc in (0, 1, 2)])


def _offloads(
    block: Block, offload: tuple[str, ...], modules: tuple[str, ...], act_bytes: float, zero: Num
) -> tuple[Array, Array]:
    """What each offload set moves (the plan's own, then every fine-grained switch set's), by
    recompute code, and the offload groups it runs: the modules it names that the block has."""
    sets = [offload, *MODULE_SETS]
    moved = offm.offloaded_table(block, sets, modules, act_bytes)
    have = offm.present(block)
    return (
        np.stack([_by_recompute(x.__getitem__, zero) for x in moved]),
        np.stack([len(set(x) & have) + zero for x in sets]),
    )


@dataclass(frozen=True)
class BlockCost:
    """One block on one GPU per micro-batch: seconds of compute and communication, forward and
    backward, and of the attention core's forward (what selective recompute repeats); activation
    bytes kept under no, selective and full recompute; parameters on the rank (all, and those of the
    routed experts). A pass's compute includes what it waits on the host to issue its kernels
    beyond the GPU's work (``of``'s ``host_s``, seconds a kernel: cost/host.py).
    """

    fwd: Array
    bwd: Array
    comm_fwd: Array
    comm_bwd: Array
    core_fwd: Array  # compute of the selectively recomputed modules' forward
    core_comm: Array  # their communication
    activations: Array  # (3, n): recompute none, selective, full
    params: Array
    expert_params: Array
    # of comm_fwd and comm_bwd, what the context- and the expert-parallel groups move (the rest is
    # TP's): the breakdown's own lines for them
    cp_fwd: Array
    cp_bwd: Array
    ep_fwd: Array
    ep_bwd: Array
    wgrad: Array  # of bwd, the weight-gradient GEMMs (DualPipe's W)
    # weight tensors, and the share of the weights whose gather waits (cost/sharded.py)
    tensors: Array
    unprefetched: Array
    # fine-grained activation offloading (cost/offload_modules.py): bytes per micro-batch the
    # plan's offload_modules (index 0) and each fine-grained switch set's (1..: switch_table.
    # MODULE_SETS) send to the host, (sets, 3, n) by recompute code as ``activations``; and the
    # offload groups a pass copies (one host message each way a group), (sets, n)
    offloaded: Array
    offload_groups: Array

    @classmethod
    def of(
        cls,
        ops: list[Op],
        block: Block,
        t: Num,
        ep: Num,
        etp: Num,
        modules: tuple[str, ...] = ("core_attn",),
        shape: LayerShape | None = None,
        act_bytes: int = 2,
        layer_every: int = 2,
        max_live: float | None = None,
        host_s: float = 0.0,
        offload: tuple[str, ...] = (),
    ) -> BlockCost:
        zero = 0.0 * ops[0].fwd_s
        # the share of each op's forward that selective recompute repeats: whole modules
        # (Megatron-Core --recompute-modules), or torchtitan's per-op policy (cost/sac.py)
        repeat = {o.name: 1.0 for o in block.ops if in_modules(o, modules)}
        kept_sac = None
        if sac.MODULE in modules and shape is not None:
            repeat, kept_sac = sac.policy(block, shape, act_bytes)
        elif sac.LAYER_MODULE in modules:
            repeat, kept_sac = sac.layer_policy(block, layer_every)

        def total(attr: str, kinds: tuple[str, ...], core_only: bool = False) -> Array:
            return np.asarray(
                sum(
                    (
                        getattr(o, attr) * (repeat.get(o.name, 0.0) if core_only else 1.0)
                        for o in ops
                        if o.kind in kinds
                    ),
                    zero,
                )
            )

        def group_total(attr: str, groups: tuple[str, ...]) -> Array:
            return np.asarray(
                sum((getattr(o, attr) for o in ops if o.kind == "comm" and o.group in groups), zero)
            )

        acts = _by_recompute(
            lambda rc: (
                kept_sac
                if rc == 1 and kept_sac is not None
                else block.activation_bytes(rc, modules)
            ),
            zero,
        )

        expert = _expert_params(block)
        params = np.asarray((block.params() - expert) / t + expert / (ep * etp) + zero)
        fwd, bwd = total("fwd_s", _COMPUTE), total("bwd_s", _COMPUTE)
        comm_fwd, comm_bwd = total("fwd_s", ("comm",)), total("bwd_s", ("comm",))
        wait_f, wait_b = hst.waits(block, ops, host_s, fwd + comm_fwd, bwd + comm_bwd)
        tensors, unprefetched = shd.weight_tensors(block, t, ep * etp, max_live)
        return cls(
            fwd + wait_f,
            bwd + wait_b,
            comm_fwd,
            comm_bwd,
            total("fwd_s", _COMPUTE, core_only=True),
            total("fwd_s", ("comm",), core_only=True),
            acts,
            params,
            np.asarray(expert / (ep * etp) + zero),
            group_total("fwd_s", ("cp",)),
            group_total("bwd_s", ("cp",)),
            group_total("fwd_s", ("ep", "etp")),
            group_total("bwd_s", ("ep", "etp")),
            total("wgrad_s", ("gemm",)),
            np.asarray(tensors + zero),
            np.asarray(unprefetched + zero),
            *_offloads(block, offload, modules, act_bytes, zero),
        )

    def plus(self, other: BlockCost, times: float) -> BlockCost:
        """This block and ``times`` copies of another, one after the other (every field adds)."""
        return BlockCost(
            *(
                np.asarray(getattr(self, f)) + times * np.asarray(getattr(other, f))
                for f in self.__dataclass_fields__
            )
        )

    def seconds(self, recompute: Num = 0) -> tuple[Array, Array]:
        """(forward, backward) seconds per micro-batch, communication included; the backward
        includes what ``recompute`` (a RECOMPUTE_CODES code) repeats of the forward."""
        rec, rec_comm = stp.layer_recompute(
            self.fwd, self.comm_fwd, self.core_fwd, recompute, self.core_comm
        )
        return self.fwd + self.comm_fwd, self.bwd + self.comm_bwd + rec + rec_comm

    def kept(self, recompute: Num) -> Array:
        """Activation bytes kept per micro-batch under each configuration's recompute code."""
        rc = np.asarray(recompute)[None, :]
        return np.asarray(np.take_along_axis(self.activations, rc, axis=0)[0])

    def offload(self, recompute: Num, which: Array) -> Array:
        """Bytes per micro-batch fine-grained offloading moves, under each configuration's
        recompute code and offload set (0: the plan's own; 1..: switch_table.MODULE_SETS)."""
        n = np.arange(np.shape(self.offloaded)[-1])
        return np.asarray(self.offloaded[np.asarray(which), np.asarray(recompute), n])

    def groups(self, which: Array) -> Array:
        """The offload groups a layer copies under each configuration's offload set."""
        n = np.arange(np.shape(self.offload_groups)[-1])
        return np.asarray(self.offload_groups[np.asarray(which), n])

    def take(self, idx: Array) -> BlockCost:
        """The configurations at ``idx``. Each field is indexed when first read (__getattr__):
        block_costs hands every configuration its split's costs this way, and most evaluations
        read a few of the fields (the fine-grained offloading tables, (sets, 3, n), only where
        a row offloads), so the rest are never copied."""
        out = object.__new__(BlockCost)
        object.__setattr__(out, "_taken", (self, idx))
        return out

    def __getattr__(self, name: str) -> Array:
        """A field of a taken BlockCost (take), indexed now and kept."""
        taken = self.__dict__.get("_taken")
        if taken is None or name not in BlockCost.__dataclass_fields__:
            raise AttributeError(name)
        value = np.asarray(getattr(taken[0], name))[..., taken[1]]
        object.__setattr__(self, name, value)
        return value

    @staticmethod
    def concat(a: BlockCost, b: BlockCost) -> BlockCost:
        """The configurations of ``a``, then those of ``b``."""
        return BlockCost(
            *(
                np.concatenate([np.asarray(getattr(a, f)), np.asarray(getattr(b, f))], axis=-1)
                for f in BlockCost.__dataclass_fields__
            )
        )

    @staticmethod
    def merge(parts: list[tuple[np.ndarray, BlockCost]], n: int) -> BlockCost:
        """One BlockCost over n configurations from the parts computed for some rows each."""
        if len(parts) == 1:
            return parts[0][1]
        fields = {}
        for name in BlockCost.__dataclass_fields__:
            first = np.asarray(getattr(parts[0][1], name))
            arr = np.zeros(first.shape[:-1] + (n,))
            for rows, c in parts:
                arr[..., rows] = getattr(c, name)
            fields[name] = arr
        return BlockCost(**fields)
