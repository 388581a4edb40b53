"""Context and expert parallelism and uneven pipeline stages (issue 12): the figures the issue
names."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from perfmodel.cost import collectives as coll
from perfmodel.cost.stages import build_stages, split_layers
from perfmodel.cost.transformer import LayerShape, Options, decoder_layer
from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.engine.schedule import simulate
from perfmodel.engine.space import enumerate_space
from perfmodel.inputs import presets


def plan(model, gpus, gbs, gpn=8, **training):
    return presets.plan_from_mapping(
        {
            "model": model,
            "system": {
                "gpu": "h100-sxm",
                "num_gpus": gpus,
                "gpus_per_node": gpn,
                "intra_node_link": "nvlink4",
                "inter_node_link": "ib-ndr",
            },
            "training": {"global_batch_size": gbs, "flash_attention": True, **training},
        },
        "test",
    )


@pytest.mark.parametrize("cp", [2, 4, 8])
@pytest.mark.parametrize("recompute", [0, 1, 2])
def test_cp_activations_are_one_cp_th(cp, recompute):
    """Each CP rank keeps the activations of its s/cp tokens: 1/cp of the cp = 1 figure, for every
    op of the layer (Megatron-Core CP; SPEC 11), under each recompute mode."""
    sh = LayerShape.of(presets.model("llama3-70b"))
    o = Options(flash=True)
    one = decoder_layer(sh, o, 1, 32768, 8, True, 1).activation_bytes(recompute)
    split = decoder_layer(sh, o, 1, 32768, 8, True, cp).activation_bytes(recompute)
    assert float(split) == pytest.approx(float(one) / cp, rel=1e-12)


def test_cp_activations_in_the_memory_report():
    p = plan("llama3-70b", 64, 32).with_training(seq_length=32768)
    base = dict(tp=8, pp=1, micro_batch_size=1, sequence_parallel=True, recompute="selective")
    one = estimate(
        p.with_system(num_gpus=8), resolve_config(p.with_system(num_gpus=8), cp=1, **base)
    )
    four = estimate(
        p.with_system(num_gpus=32), resolve_config(p.with_system(num_gpus=32), cp=4, **base)
    )
    # the layers' share (everything but the embedding/head terms, which CP divides too) drops 4x
    assert four.values["activations_bytes"] == pytest.approx(
        one.values["activations_bytes"] / 4, rel=1e-9
    )


@pytest.mark.parametrize("ep", [2, 8, 32])
def test_all_to_all_sends_ep_minus_one_over_ep_of_the_dispatched_tokens(ep):
    """Each rank keeps 1/ep of its token copies (those for its own experts) and sends the rest:
    (ep-1)/ep of b s k / t copies of h elements (SPEC 11)."""
    sh = LayerShape.of(
        presets.model("qwen3-235b-a22b").model_copy(update={"moe_load_imbalance": 1.0})
    )
    b, s, t = 1, 4096, 2
    block = decoder_layer(sh, Options(), b, s, t, True, 1, ep, 1, moe=True)
    dispatch = next(op for op in block.ops if op.name == "EP dispatch (all-to-all)")
    copies = b * s / t * 8  # SP shards the tokens over TP; top-8 routing
    assert float(dispatch.message) == pytest.approx(copies * 4096 * 2)
    assert float(coll.bytes_per_rank("all-to-all", dispatch.message, ep)) == pytest.approx(
        (ep - 1) / ep * copies * 4096 * 2
    )


def test_all_to_all_across_nodes_sends_only_the_remote_share_over_the_nic():
    """32 ranks over 4 nodes of 8: 7/32 of the data stays on NVLink, 24/32 crosses InfiniBand."""
    S, n = 64e6, 32
    t = coll.all_to_all_time(S, n, 8, 450e9, 1e-6, 50e9, 5e-6)
    assert t == pytest.approx(24 * 5e-6 + 24 / 32 * S / 50e9)
    assert coll.all_to_all_time(S, 8, 8, 450e9, 1e-6, 50e9, 5e-6) == pytest.approx(
        7 * (1e-6 + S / 8 / 450e9)
    )


def test_expert_gemms_follow_the_tokens_each_expert_receives():
    """Each local expert's grouped GEMM has the rows its expert receives from every EP rank: ep x
    the rank's token copies / e. More EP means fewer local experts with more rows each, so a higher
    GEMM efficiency (SPEC 11); the load imbalance stretches the busiest rank's rows."""
    from perfmodel.cost.roofline import gemm_efficiency

    sh = LayerShape.of(presets.model("qwen3-235b-a22b"))
    fc1 = {}
    for ep in (1, 32):
        block = decoder_layer(sh, Options(), 1, 4096, 1, False, 1, ep, 1, moe=True)
        fc1[ep] = next(op for op in block.ops if op.name == "expert fc1 (grouped)")
    copies = 4096 * 8
    assert float(fc1[1].M) == copies / 128 and float(fc1[32].M) == 32 * copies / 128
    assert float(fc1[1].batch) == 128 and float(fc1[32].batch) == 4
    assert float(fc1[32].time_rows) == pytest.approx(float(fc1[32].M) * sh.imbalance)
    h100 = presets.gpu("h100-sxm")
    eff = {
        ep: float(
            gemm_efficiency(
                g.M,
                g.N,
                g.K,
                h100.num_sms,
                h100.gemm_efficiency,
                h100.gemm_k_overhead,
                g.batch,
                h100.gemm_tail_waves,
            )
        )
        for ep, g in fc1.items()
    }
    assert eff[1] <= eff[32]


# ---------------------------------------------------------------- uneven stages


@settings(max_examples=60, deadline=None)
@given(
    p=st.integers(2, 8),
    m=st.integers(1, 24),
    times=st.lists(st.floats(0.2, 3.0), min_size=8, max_size=8),
    schedule=st.sampled_from(["1f1b", "gpipe"]),
)
def test_uneven_stages_step_between_the_slowest_stage_bounds(p, m, times, schedule):
    """The slowest stage runs m micro-batches back to back at best, and the pipeline never needs
    more than the closed form with every stage as slow as the slowest: m T_max <= step <= (m + p -
    1) T_max. (The closed form of the *mean* stage is no lower bound: with p = 2, m = 2 and stages
    of 2 and 1 the heavier first stage hides its extra work behind the drain, 30.8% bubble against
    (p-1)/(m+p-1) = 33.3%.)
    """
    tf = [x / 3 for x in times[:p]]
    tb = [2 * x / 3 for x in times[:p]]
    sim = simulate(p, m, 1, schedule, tf, tb)
    t_max = max(times[:p])
    assert m * t_max - 1e-9 <= sim.step_time <= (m + p - 1) * t_max + 1e-9


def test_heavier_first_stage_can_beat_the_mean_closed_form():
    """The counterexample above, pinned: stages of 2 and 1 (f:b = 1:2), m = 2."""
    sim = simulate(2, 2, 1, "1f1b", [2 / 3, 1 / 3], [4 / 3, 2 / 3])
    assert sim.step_time == pytest.approx(13 / 3)
    assert sim.bubble_over_step == pytest.approx(4 / 13) and 4 / 13 < 1 / 3


def test_equal_stages_simulate_to_the_closed_form():
    for p, m in ((4, 8), (8, 48), (2, 3)):
        sim = simulate(p, m, 1, "1f1b", [1.0] * p, [2.0] * p)
        assert sim.bubble_over_step == pytest.approx((p - 1) / (m + p - 1), rel=1e-12)


def test_llama3_405b_on_16_stages():
    """126 layers do not divide over 16 stages: the split gives the ends fewer layers (they carry
    the embedding and the LM head) and the middle stages 8 each, and estimate runs it (Dubey et al.
    2024 trained Llama 3 405B with pp = 16)."""
    p = plan("llama3.1-405b", 16384, 2048).with_parallel(
        tp=8, pp=16, cp=1, micro_batch_size=1, sequence_parallel=True, recompute="full"
    )
    e = estimate(p, resolve_config(p))
    assert sum(e.stage_layers) == 126 and len(e.stage_layers) == 16
    assert max(e.stage_layers[1:-1]) - min(e.stage_layers[1:-1]) <= 1
    assert e.stage_layers[0] <= e.stage_layers[1] and e.stage_layers[-1] <= e.stage_layers[1]
    assert e.values["bubble_simulated_over_step"] >= e.values["bubble_over_step"] - 1e-12


def test_balanced_split_is_never_slower_than_the_given_one():
    L, pp = 70, 12  # BLOOM: 70 layers on 12 stages
    t = np.full(1, 1.0)
    f, la = split_layers(
        L, np.array([pp]), np.array([1]), np.array([0]), np.array([0]), t, t * 2.5, t * 4.0
    )
    stages = build_stages(L, [0] * L, np.array([pp]), f, la)
    span = stages.present_max(stages.total([t, 0.0], 2.5, 4.0))[0]
    for first in range(1, 8):
        for last in range(1, 8):
            other = build_stages(L, [0] * L, np.array([pp]), np.array([first]), np.array([last]))
            if (L - first - last) >= pp - 2:
                assert span <= other.present_max(other.total([t, 0.0], 2.5, 4.0))[0] + 1e-9


def test_bloom_70_layers_on_12_stages_is_in_the_search():
    bloom = {
        "name": "BLOOM-176B",
        "num_layers": 70,
        "hidden_size": 14336,
        "num_attention_heads": 112,
        "vocab_size": 250880,
        "seq_length": 2048,
    }
    p = plan(bloom, 384, 2048).with_parallel(tp=4, pp=12)
    space = enumerate_space(p)
    assert len(space.knobs) > 0 and set(space.knobs.pp) == {12}


def test_deepseek_v3_dense_layers_sit_on_the_first_stage():
    p = plan("deepseek-v3", 1024, 4096).with_parallel(
        tp=1, pp=16, ep=64, micro_batch_size=1, recompute="full"
    )
    e = estimate(p, resolve_config(p))
    assert sum(e.stage_layers) == 61
    stages_obj = build_stages(
        61,
        presets.model("deepseek-v3").moe_pattern(),
        np.array([16]),
        np.array([int(e.stage_layers[0])]),
        np.array([int(e.stage_layers[-1])]),
    )
    dense_first = stages_obj.layers[0, 0, 0]
    assert dense_first == min(3, e.stage_layers[0])


@settings(max_examples=200, deadline=None)
@given(
    L=st.integers(3, 96),
    p=st.integers(2, 32),
    e_first=st.floats(0, 20).map(lambda x: round(x, 3)),
    e_last=st.floats(0, 20).map(lambda x: round(x, 3)),
)
def test_balanced_split_is_the_best_of_every_split(L, p, e_first, e_last):
    """cost/stages._balanced tries five last-stage sizes per first-stage size; every (f, l) up to
    one layer past the even share, tried one by one, finds no shorter slowest stage, and none as
    short nearer the even split (f + l larger)."""
    from perfmodel.cost.stages import _balanced

    if p > L:
        return
    f, la = (
        int(x[0])
        for x in _balanced(L, np.array([p]), np.ones(1), np.array([e_first]), np.array([e_last]))
    )

    def span(f, la):
        rest = L - f - la
        if f < 1 or la < 1 or (rest < p - 2 if p > 2 else rest != 0):
            return np.inf
        mid = -(-rest // (p - 2)) if p > 2 else 0
        return max(f + e_first, la + e_last, mid)

    top = -(-L // p) + 1
    best = min(
        ((span(a, b), -(a + b)) for a in range(top + 1) for b in range(top + 1)),
        key=lambda x: (x[0] * (1 - 1e-12 * -x[1] / L), x[1]),
    )
    assert span(f, la) <= best[0] * (1 + 1e-9)
    assert f + la >= -best[1] or span(f, la) < best[0]
