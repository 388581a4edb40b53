"""Issue 30: the MoE switches as searched knobs (the dispatcher, Megatron-Core's all-to-all
overlap) and the router's load by family (specs/router.py)."""

import json

import numpy as np
import pytest
from helpers import deepseek_v3, deepseek_v3_pp8_vp4

from perfmodel.cli import main
from perfmodel.engine.estimate import estimate, resolve_config, validate_config
from perfmodel.engine.knobs import DISPATCHER_NAMES
from perfmodel.engine.space import enumerate_space
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.inputs.megatron_emit import to_args
from perfmodel.specs import Config
from perfmodel.specs.router import ROUTER_LOAD, load_imbalance


def _free(**parallel):
    """DeepSeek-V3 on 1,024 H100 with only pp and vp left free (and the MoE switches, which the
    plan does not name)."""
    return deepseek_v3({"dtype": "bf16"}, pp=None, vp=None, **parallel)


def test_the_search_chooses_the_switches_where_the_plan_leaves_them():
    """Every configuration carries a dispatcher the megatron-core profile runs and an overlap only
    where Megatron-Core allows it (ep > 1, vp > 1 under pp > 1, no full recompute, not allgather);
    the choice per configuration is never slower than the profile's default."""
    plan = _free()
    k = enumerate_space(plan).knobs
    names = {DISPATCHER_NAMES[int(c)] for c in np.unique(k.moe_token_dispatcher_type)}
    assert names <= {"alltoall", "allgather", "deepep", "hybridep"} and "deepep" in names
    on = k.moe_a2a_overlap.astype(bool)
    assert on.any()
    assert not (on & (k.pp > 1) & (k.vp == 1)).any()
    assert not (on & (k.recompute == 2)).any()
    gbs = plan.training.global_batch_size
    for i in np.flatnonzero(on)[:3]:
        cfg = k.config(int(i), gbs)
        chosen = estimate(plan, cfg, simulate=False).values["step_time_s"]
        default = Config(**{**cfg.__dict__, "moe_token_dispatcher_type": "alltoall"})
        default = Config(**{**default.__dict__, "moe_a2a_overlap": False})
        assert chosen <= estimate(plan, default, simulate=False).values["step_time_s"]


def test_switches_a_plan_sets_are_kept():
    plan = deepseek_v3(
        {"dtype": "bf16", "moe_token_dispatcher_type": "allgather", "moe_a2a_overlap": False},
        pp=None,
        vp=None,
    )
    k = enumerate_space(plan).knobs
    assert set(np.unique(k.moe_token_dispatcher_type)) == {1}  # allgather
    assert not k.moe_a2a_overlap.any()


def test_a_dense_model_has_no_moe_switches_to_search():
    plan = presets.plan_from_mapping(
        {
            "model": "llama3-8b",
            "system": {"gpu": "h100-sxm", "num_gpus": 16},
            "training": {"global_batch_size": 64},
        },
        "t",
    )
    k = enumerate_space(plan).knobs
    assert set(np.unique(k.moe_token_dispatcher_type)) == {0} and not k.moe_a2a_overlap.any()


def test_hai_llm_defaults_to_the_reports_dispatch_and_dualpipe():
    """DeepSeek-V3 report Sec. 3.2: DualPipe and node-limited DeepEP dispatch, without the plan
    naming either; an odd pp, where DualPipe cannot run, falls to 1F1B."""
    cfg = resolve_config(deepseek_v3({"dtype": "fp8", "framework": "hai-llm"}))
    assert cfg.schedule == "dualpipe" and cfg.moe_token_dispatcher_type == "deepep"
    assert not cfg.moe_a2a_overlap
    odd = resolve_config(deepseek_v3({"dtype": "fp8", "framework": "hai-llm"}, pp=1, ep=64))
    assert odd.schedule == "1f1b"
    assert resolve_config(deepseek_v3({"dtype": "bf16"})).moe_token_dispatcher_type == "alltoall"


def test_the_overlap_outside_megatron_cores_conditions_is_refused():
    """megatron/training/arguments.py asserts a virtual pipeline under pp > 1 for
    --overlap-moe-expert-parallel-comm: the message names the factors and the fix."""
    plan = deepseek_v3({"dtype": "bf16", "moe_a2a_overlap": True})
    with pytest.raises(PerfModelError, match=r"moe_a2a_overlap .*vp\(1\)"):
        validate_config(plan, resolve_config(plan))


def test_plan_reports_and_emits_the_choice(runner, tmp_path):
    """`plan --json` names the choice under moe_token_dispatcher_type and moe_a2a_overlap, and
    `--emit megatron` writes it."""
    src = tmp_path / "ds.yaml"
    src.write_text(json.dumps(deepseek_v3_pp8_vp4()))
    r = runner.invoke(main, ["plan", str(src), "--top", "1", "--json"])
    assert r.exit_code == 0, r.output
    best = json.loads(r.output)["results"][0]
    cfg = best["config"]
    # nothing fits at this layout without CP below 4,096 tokens a rank: the search tries it, and
    # says so
    assert cfg["cp"] > 1 and any("fewer than any published run's" in w for w in best["warnings"])
    assert cfg["moe_token_dispatcher_type"] in ("deepep", "hybridep")
    assert cfg["moe_a2a_overlap"] is True
    plan = presets.plan_from_mapping(json.loads(src.read_text()), "t")
    args = " ".join(to_args(plan, cfg))
    assert f"--moe-flex-dispatcher-backend {cfg['moe_token_dispatcher_type']}" in args
    assert "--overlap-moe-expert-parallel-comm" in args
    off = " ".join(to_args(plan, {**cfg, "moe_a2a_overlap": False}))
    assert "--overlap-moe-expert-parallel-comm" not in off


def test_router_families_and_token_dropping_set_the_load():
    """specs/router.py: each family's figure; a capacity factor caps the load, and padding to
    capacity fixes it there (NeMo's MegatronTokenDropCallback: 1.0, padded)."""
    assert load_imbalance("balanced") == 1.0
    assert load_imbalance("aux_loss") == ROUTER_LOAD["aux_loss"] == 1.5
    # fitted on the one dropless DeepSeek-V3 step as it trained, the report's whole run
    # (benchmarks/moe_imbalance.py --fit: 1.40); the DGX Cloud benchmark drops tokens (capacity 1)
    assert load_imbalance("aux_free_bias") == ROUTER_LOAD["aux_free_bias"] == 1.40
    assert load_imbalance("llama4") == load_imbalance("aux_loss")  # no dropless run: assumed
    assert load_imbalance("aux_loss", capacity_factor=1.25) == 1.25
    assert load_imbalance("aux_loss", capacity_factor=2.0) == 1.5
    assert load_imbalance("aux_loss", capacity_factor=2.0, pad_to_capacity=True) == 2.0
    assert load_imbalance("aux_loss", given=1.2) == 1.2
    assert presets.model("deepseek-v3").load_imbalance == ROUTER_LOAD["aux_free_bias"]
    assert presets.model("qwen3-235b-a22b").load_imbalance == 1.5


def test_forced_balance_is_faster_than_the_routers_own_load():
    base = deepseek_v3({"dtype": "bf16"})
    m = base.model.model_copy(update={"moe_router_family": "balanced"})
    forced = base.model_copy(update={"model": m})
    t = estimate(base, resolve_config(base), simulate=False).values["step_time_s"]
    f = estimate(forced, resolve_config(forced), simulate=False).values["step_time_s"]
    assert f < t
