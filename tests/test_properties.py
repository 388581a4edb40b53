"""Property tests (hypothesis) on the invariants STYLE.md lists."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost import collectives as coll
from perfmodel.cost import memory as mem
from perfmodel.cost import pipeline as pipe
from perfmodel.cost import sp
from perfmodel.cost.stages import build_stages
from perfmodel.cost.transformer import LayerShape
from perfmodel.inputs import load_plan

ints = st.integers


@given(p=ints(1, 256), m=ints(1, 4096), v=ints(1, 16))
def test_bubble_in_unit_interval(p, m, v):
    b = pipe.bubble_over_step(p, m, v)
    assert 0 <= b < 1
    assert pipe.bubble_over_ideal(p, m, v) >= b
    assert abs(pipe.utilization(p, m, v) + b - 1) < 1e-12


@given(p=ints(2, 64), target=st.floats(0.01, 0.9))
def test_min_m_meets_target_and_is_smallest(p, target):
    m = pipe.min_microbatches_for_target(p, target)
    assert pipe.bubble_over_step(p, m) < target
    if m > 1:
        assert pipe.bubble_over_step(p, m - 1) >= target - 1e-12


@given(
    kind=st.sampled_from(coll.COLLECTIVES),
    size=st.floats(1, 1e11),
    n=ints(2, 4096),
    bw=st.floats(1e8, 1e13),
    factor=st.floats(1.0, 100.0),
    alpha=st.floats(0, 1e-4),
)
def test_more_bandwidth_never_slows_a_collective(kind, size, n, bw, factor, alpha):
    slow = sum(coll.collective_time(kind, size, n, bw, alpha))
    fast = sum(coll.collective_time(kind, size, n, bw * factor, alpha))
    assert fast <= slow * (1 + 1e-12)


@given(
    t_exp=ints(0, 6),
    sp_on=st.booleans(),
    rc=ints(0, 2),
    b=ints(1, 16),
    s=st.sampled_from([512, 2048, 8192]),
)
def test_activation_memory_never_rises_with_tp(t_exp, sp_on, rc, b, s):
    t = 2**t_exp
    now = mem.activation_bytes_per_layer(s, b, 12288, 96, t, sp_on, rc)
    more = mem.activation_bytes_per_layer(s, b, 12288, 96, 2 * t, sp_on, rc)
    assert more <= now


@given(t_exp=ints(0, 5), pp=st.sampled_from([1, 2, 4, 8, 16]), tied=st.booleans())
def test_parameters_per_gpu_never_rise_with_tp(t_exp, pp, tied):
    t = 2**t_exp
    shape = LayerShape(
        hidden=12288,
        heads=96,
        groups=96,
        ffn=4 * 12288,
        vocab=51200,
        gated=False,
        bias=True,
        norm="layernorm",
        learned_positions=True,
        tied=tied,
    )
    stages = build_stages(96, [0] * 96, np.array([pp]), np.array([96 // pp]), np.array([96 // pp]))

    def most(tp):
        return stages.present_max(
            stages.total([mem.layer_params(shape) / tp, 0.0], *mem.end_params(shape, 2048, tp, pp))
        )[0]

    assert most(2 * t) <= most(t)


@given(t=ints(2, 64), s=ints(1, 64), h=ints(1, 64), b=ints(1, 8))
def test_tp_and_tp_sp_move_the_same_bytes(t, s, h, b):
    seq, hidden = s * t, h * t
    a = sp.block_comm(seq, hidden, b, t, False)["bytes_per_rank"]
    c = sp.block_comm(seq, hidden, b, t, True)["bytes_per_rank"]
    assert abs(a - c) <= 1e-9 * a


@settings(max_examples=50)
@given(t=ints(1, 8), s=ints(1, 16))
def test_sp_resident_peak_is_one_tth(t, s):
    seq = hidden = 64 * s * t
    tp_peak = sp.resident_peak_bytes(sp.shape_trace(seq, hidden, t, False))
    sp_peak = sp.resident_peak_bytes(sp.shape_trace(seq, hidden, t, True))
    assert sp_peak * t == tp_peak


@settings(max_examples=40, deadline=None)
@given(
    pp=st.sampled_from([1, 2, 4, 8]),
    mbs=st.sampled_from([1, 2, 4]),
    sp_on=st.booleans(),
    rc=ints(0, 2),
)
def test_total_memory_per_gpu_never_rises_with_tp(pp, mbs, sp_on, rc):
    """Whole estimate, 512 GPUs, 1F1B, no ZeRO: doubling TP (DP halves) never needs more memory per
    GPU."""
    total = _totals_over_tp(pp, mbs, sp_on, rc, schedule=1)
    assert (np.diff(total) <= 1e-6 * total[:-1]).all()


def test_gpipe_is_the_exception():
    """At a fixed global batch, halving DP doubles m, and GPipe keeps all m micro-batches in
    flight."""
    total = _totals_over_tp(2, 1, False, 0, schedule=0)
    assert total[-1] > total[-2]


def _totals_over_tp(pp, mbs, sp_on, rc, schedule):
    from perfmodel.engine.estimate import Knobs, evaluate

    plan = load_plan("gpt3-175b.yaml")
    tps = np.array([1, 2, 4, 8])
    n = len(tps)
    one, zero = np.ones(n, int), np.zeros(n, int)
    k = Knobs(
        tps,
        np.full(n, pp),
        512 // (tps * pp),
        one,
        np.full(n, mbs),
        np.array([sp_on and t > 1 for t in tps]),
        np.full(n, rc),
        zero,
        np.full(n, schedule),
        cp=one,
        ep=one,
        etp=one,
        cp_comm_type=zero,
        dp_shard=zero,
        first_stage_layers=zero,
        last_stage_layers=zero,
        moe_token_dispatcher_type=zero,
        moe_a2a_overlap=np.zeros(n, bool),
        memory_switch=zero,
    )
    return evaluate(plan, k)["total_bytes"]
