"""Shared test helpers: describe and time one block the way evaluate() does, with plain
arguments."""

import numpy as np

from perfmodel.cost.layer import Hardware, Link, time_block
from perfmodel.cost.transformer import LayerShape, Options, decoder_layer
from perfmodel.inputs import presets


def shape(h, a, g=None, f=None, V=51200, gated=False, bias=True, norm="layernorm"):
    return LayerShape(
        hidden=h,
        heads=a,
        groups=g or a,
        ffn=f or 4 * h,
        vocab=V,
        gated=gated,
        bias=bias,
        norm=norm,
        learned_positions=not gated,
        tied=True,
    )


def timed(
    builder=decoder_layer,
    *,
    b,
    s,
    t,
    sp=False,
    tp_bw=2.3e11,
    tp_alpha=3e-6,
    overlap=True,
    gpu="a100-80gb",
    flash=False,
    persist_ln=True,
    **shape_kw,
):
    """{op name: timed Op} of ``builder`` (decoder_layer, lm_head or embedding) on one GPU, bf16."""
    hw = Hardware.from_gpu(gpu if not isinstance(gpu, str) else presets.gpu(gpu), "bf16")
    block = builder(shape(**shape_kw), Options(flash=flash, persist_ln=persist_ln), b, s, t, sp)
    ops = time_block(
        hw,
        block,
        gemm_bytes=2,
        sizes={"tp": np.asarray(float(t))},
        sp=np.asarray(sp),
        links={"tp": Link(np.asarray(tp_bw), np.asarray(tp_alpha))},
        overlap=overlap,
    )
    return {o.name: o for o in ops}, hw
