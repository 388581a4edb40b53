"""The mesh rules (perfmodel/engine/mesh.py), each run through both sides that apply it: `check` on
a resolved plan, and the search, as a vectorized mask (counted by reason) or, for the rules the
search satisfies by construction, as an error on contradicting fixed knobs (issue 11)."""

import numpy as np
import pytest

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.engine.mesh import Mesh
from perfmodel.engine.rules import RULES, config_problems
from perfmodel.engine.space import enumerate_space
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.review.check import check

GPT3 = "gpt3-175b"


def plan(model=GPT3, gbs=1536, gpus=512, **parallel):
    return presets.plan_from_mapping(
        {
            "model": model,
            "system": {
                "gpu": "a100-80gb",
                "num_gpus": gpus,
                "gpus_per_node": 8,
                "intra_node_link": "nvlink3",
                "inter_node_link": "ib-hdr",
            },
            "training": {"global_batch_size": gbs, "framework": "megatron-2022"},
            "parallel": parallel,
        },
        "test plan",
    )


def custom(layers=96, heads=96, groups=None, hidden=None):
    hidden = hidden or 128 * heads
    return {
        "name": "custom",
        "num_layers": layers,
        "hidden_size": hidden,
        "num_attention_heads": heads,
        "num_query_groups": groups,
        "vocab_size": 51200,
        "seq_length": 2048,
    }


def rules_in_check(p) -> set[str]:
    return {f.rule for f in check(p)}


def rejected(p) -> dict[str, int]:
    space = enumerate_space(p)
    assert len(space.knobs) == 0  # the fixed knobs leave nothing valid
    return dict(space.rejected)


def test_every_rule_is_tested_here():
    assert {r.id for r in RULES} == {
        "PM102",
        "PM103",
        "PM104",
        "PM105",
        "PM106",
        "PM107",
        "PM108",
        "PM109",
        "PM110",
        "PM201",
    }


def test_pm102_product_of_the_degrees_is_the_gpu_count():
    p = plan(tp=8, pp=8, dp=4)
    assert "PM102" in rules_in_check(p)
    assert rejected(p) == {}  # dp = 512 / 64 = 8 is derived, so the fixed dp 4 leaves no pair


def test_pm103_heads_not_divisible_by_tp():
    p = plan(custom(heads=20), tp=8, pp=8)
    assert "PM103" in rules_in_check(p)
    assert rejected(p) == {"tp does not divide the attention heads / query groups (tp values)": 1}


def test_pm103_query_groups_and_tp_do_not_divide_one_another():
    p = plan(custom(heads=48, groups=12), tp=8, pp=8)
    assert "PM103" in rules_in_check(p)
    assert rejected(p) == {"tp does not divide the attention heads / query groups (tp values)": 1}


def test_fewer_kv_groups_than_tp_is_refused_everywhere():
    """2 KV groups at tp 8: Megatron-Core splits the query groups over the TP ranks
    (divide(num_query_groups, tp), megatron/core/transformer/attention.py) and does not replicate
    them, so check reports PM103, estimate refuses it, and the search never proposes tp above the
    groups (issue 19: it used to pass all three)."""
    p = plan(custom(heads=32, groups=2), tp=8, pp=8, micro_batch_size=1)
    assert "PM103" in rules_in_check(p)
    with pytest.raises(PerfModelError, match=r"num_query_groups\(2\) is not divisible by tp\(8\)"):
        estimate(p, resolve_config(p))
    free = plan(custom(heads=32, groups=2), pp=8, micro_batch_size=1)
    assert set(enumerate_space(free).knobs.tp.tolist()) <= {1, 2}


def test_pm104_more_stages_than_layers():
    p = plan(custom(layers=4), tp=8, pp=8)
    assert "PM104" in rules_in_check(p)
    assert rejected(p) == {"pp does not divide the layers ((tp, cp, pp) combinations)": 1}


def test_pm104_more_virtual_stages_than_layers():
    p = plan(tp=8, pp=8, vp=13, micro_batch_size=1)  # 104 chunks for 96 layers
    assert "PM104" in rules_in_check(p)
    assert rejected(p) == {"more virtual stages than layers ((mbs, vp) pairs)": 1}


def test_pm104_first_and_last_stage_layers_must_fit():
    p = plan(tp=8, pp=8, decoder_first_pipeline_num_layers=50, decoder_last_pipeline_num_layers=50)
    assert "PM104" in rules_in_check(p)
    assert rejected(p) == {"pp does not divide the layers ((tp, cp, pp) combinations)": 1}


def test_pm105_global_batch_not_divisible_by_dp_times_micro_batch():
    p = plan(gbs=100, tp=8, pp=8)  # dp 8
    assert "PM105" in rules_in_check(p)
    assert rejected(p) == {"global batch not divisible by dp ((tp, cp, pp) combinations)": 1}


def test_pm106_interleaving_needs_m_a_multiple_of_pp():
    p = plan(gbs=400, tp=8, pp=8, micro_batch_size=1, vp=2)  # m = 400 / 8 = 50, not a multiple of 8
    assert "PM106" in rules_in_check(p)
    assert rejected(p) == {"interleaving needs pp > 1 and m a multiple of pp ((mbs, vp) pairs)": 1}


def test_pm107_interleaving_needs_pp_above_1_as_a_mask():
    p = plan(tp=8, pp=1, vp=2)
    assert "PM107" in rules_in_check(p)
    with pytest.raises(PerfModelError, match="needs pp > 1"):
        enumerate_space(p)
    # pp left free: the pp = 1 candidates are masked, counted under the interleaving reason
    free = enumerate_space(plan(tp=8, vp=2, micro_batch_size=1))
    assert (free.knobs.pp > 1).all()
    assert free.rejected["interleaving needs pp > 1 and m a multiple of pp ((mbs, vp) pairs)"] >= 1


@pytest.mark.parametrize(
    "knobs, needle",
    [
        ({"tp": 1, "sequence_parallel": True}, "sequence_parallel needs tp > 1"),
        ({"pp": 8, "vp": 1, "schedule": "interleaved"}, "schedule interleaved needs vp > 1"),
        ({"pp": 8, "vp": 2, "schedule": "1f1b"}, "needs schedule interleaved"),
    ],
)
def test_pm107_contradicting_knobs(knobs, needle):
    p = plan(**knobs)
    assert "PM107" in rules_in_check(p)
    with pytest.raises(PerfModelError, match=needle):
        enumerate_space(p)


def framework_plan(framework, **parallel):
    p = plan(**parallel)
    return p.with_training(framework=framework)


@pytest.mark.parametrize(
    "framework, zero, pp",
    [
        ("megatron-core", 2, 1),
        ("megatron-2022", 3, 1),
        ("deepspeed", 2, 8),
        ("megatron-core", 3, 8),
        ("megatron-2021", 1, 8),
    ],
)
def test_pm110_zero_stages_the_framework_does_not_run(framework, zero, pp):
    p = framework_plan(framework, tp=8, pp=pp, zero_stage=zero, micro_batch_size=1)
    assert "PM110" in rules_in_check(p)
    space = enumerate_space(p)
    assert (
        len(space.knobs) == 0
        and space.rejected.get("the framework cannot run it (configurations)", 0) > 0
    )


def test_search_never_proposes_zero2_with_a_pipeline():
    """Issue 13: ZeRO-2 with pp > 1 was the top pick for GPT-3 on 512 GPUs; no framework runs it."""
    for framework in ("megatron-core", "deepspeed"):
        k = enumerate_space(framework_plan(framework)).knobs
        assert not ((k.zero_stage >= 2) & (k.pp > 1)).any()
    assert set(enumerate_space(framework_plan("megatron-core")).knobs.zero_stage) == {0, 1, 3}
    assert set(enumerate_space(framework_plan("deepspeed")).knobs.zero_stage) == {0, 1, 2, 3}


def test_pm110_uneven_stages_before_megatron_core():
    p = framework_plan("megatron-2022", tp=8, pp=7)
    assert "PM110" in rules_in_check(p.with_system(num_gpus=448))
    assert len(enumerate_space(p.with_system(num_gpus=448)).knobs) == 0
    assert (
        len(
            enumerate_space(
                framework_plan("megatron-core", tp=8, pp=7).with_system(num_gpus=448)
            ).knobs
        )
        > 0
    )


def test_pm110_no_cp_before_megatron_core():
    p = framework_plan("megatron-2022", tp=8, pp=8, cp=2).with_training(flash_attention=True)
    assert "PM110" in rules_in_check(p)


def test_pm201_tp_across_nodes():
    p = plan(tp=16, pp=8)
    assert "PM201" in rules_in_check(p)  # a warning in check: the layout runs, slowly
    assert rejected(p) == {
        "tp group would cross the node boundary (tp values; --allow-cross-node-tp)": 1
    }
    assert len(enumerate_space(p, allow_cross_node_tp=True).knobs) > 0


def test_search_space_breaks_no_rule():
    """What the masks let through, check's side of the same rules accepts."""
    p = plan()
    space = enumerate_space(p)
    rng = np.random.default_rng(1)
    for i in rng.choice(len(space.knobs), size=200, replace=False):
        assert config_problems(p, space.knobs.config(int(i), 1536), False) == []


# ---------------------------------------------------------------- placement


def test_megatron_core_order_puts_tp_innermost_then_dp_then_pp():
    system = plan().system
    m = Mesh(8, 8, 8, system)
    assert m.order == (
        "tp",
        "cp",
        "dp",
        "pp",
    )  # Megatron-Core's "tp-cp-ep-dp-pp" with EP folded out
    assert (m.stride("tp"), m.stride("dp"), m.stride("pp")) == (1, 8, 64)
    pp_first = Mesh(8, 8, 8, system.model_copy(update={"placement": "tp-pp-dp"}))
    assert (pp_first.stride("pp"), pp_first.stride("dp")) == (8, 64)
    arrays = Mesh(np.array([2, 8]), np.array([4, 8]), np.array([64, 8]), system)
    assert list(arrays.stride("pp")) == [128, 64]


def test_which_link_each_group_crosses():
    system = plan().system
    inside = Mesh(4, 2, 64, system)
    assert inside.crossing("tp") == "intra" and inside.crossing("dp") == "hierarchical"
    assert Mesh(8, 8, 8, system).crossing("pp") == "inter"
    assert Mesh(16, 4, 8, system).crossing("tp") == "hierarchical"
    assert Mesh(8, 8, 8, system).link_spec("tp").name == system.intra_node_link.name
    assert Mesh(8, 8, 8, system).link_spec("dp").name == system.inter_node_link.name
