"""Issue 22: what the Blackwell runs needed besides presets and formats, as worked numbers: the
logits and router in 16 bits under a low-precision recipe, Transformer Engine's weight cache
across micro-batches, activation offloading to host memory, and the validation targets."""

import numpy as np
import pytest
from helpers import deepseek_v3

from perfmodel.cost import offload
from perfmodel.cost.transformer import lm_head
from perfmodel.engine import answer
from perfmodel.engine.blocks import Setting, block_ops
from perfmodel.engine.estimate import estimate, per_layer_ops, resolve_config
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets


def _plan(dtype="fp8", gpu="gb200", training=None, parallel=None, **system):
    return presets.plan_from_mapping(
        {
            "model": "llama3-70b",
            "system": {
                "gpu": gpu,
                "num_gpus": 64,
                "gpus_per_node": 4,
                "nvlink_domain": 72,
                **system,
            },
            "training": {"global_batch_size": 256, "dtype": dtype, **(training or {})},
            "parallel": {
                "tp": 1,
                "pp": 1,
                "cp": 1,
                "micro_batch_size": 2,
                "zero_stage": 3,
                "recompute": "none",
                **(parallel or {}),
            },
        },
        "t",
    )


def _deepseek(mtp: int = 0, **parallel):
    """DeepSeek-V3 on 1,024 H100 at PP 16 x EP 64 (tests/helpers.deepseek_v3), with ``mtp``
    multi-token prediction layers."""
    plan = deepseek_v3(**parallel)
    model = plan.model.model_copy(update={"mtp_num_layers": mtp})
    return plan.model_copy(update={"model": model})


def _logits_s(plan):
    ops, _ = block_ops(Setting.of(plan), lm_head, np.array([1]), np.array([2]), np.array([False]))
    return next(float(np.sum(o.fwd_s)) for o in ops if o.name == "logits")


def test_the_logits_run_in_bf16_under_every_low_precision_format():
    """Megatron-Core's output layer is its own ColumnParallelLinear, outside TE's autocast: the
    same seconds in BF16, FP8, MXFP8 and NVFP4 (the BF16 peak and fraction)."""
    bf16 = _logits_s(_plan("bf16"))
    for dtype in ("fp8", "mxfp8", "nvfp4"):
        assert _logits_s(_plan(dtype)) == pytest.approx(bf16, rel=1e-12)
    # 2 x 16384 tokens x 8192 x 128256 FLOPs at 2.5 PFLOP/s x the BF16 fraction, at least
    flops = 2 * 16384 * 8192 * 128256
    assert bf16 >= flops / 2.5e15


def test_te_casts_the_weights_once_a_step():
    """Megatron-Core calls TE with is_first_microbatch: the FP8 weights (and transposes) are made
    on a step's first micro-batch and reused by the others (read 2 B, write 1 + 1 B a weight)."""
    cached = _plan(parallel={"zero_stage": 1, "tp": 8})
    per_mb = cached.with_training(fp8_weight_cache=False)
    cfg = resolve_config(cached)
    a, b = estimate(cached, cfg).values, estimate(per_mb, cfg).values
    cast = {o.name: o for o in per_layer_ops(per_mb, cfg)}["FP8 cast of weights"]
    gpu, L, m = cached.system.gpu, 80, 256 // (8 * 2)
    # h (h + 2 kv) + h h + 3 h ffn weights of a layer, over tp 8
    weights = (8192 * (8192 + 2 * 1024) + 8192 * 8192 + 3 * 8192 * 28672) / 8
    assert float(cast.bytes) == pytest.approx(4 * weights)
    once = L * 4 * weights / (gpu.hbm_bandwidth_bytes_per_s * gpu.hbm_efficiency)
    assert a["optimizer"] - b["optimizer"] == pytest.approx(once, rel=1e-3)
    # without the cache, the same cast (a kernel each) in every micro-batch's forward
    assert b["forward"] - a["forward"] == pytest.approx(m * L * float(cast.fwd_s))


def test_offloading_formulas():
    # 40 layers of 3.85 GB over NVLink-C2C (225 GB/s each way, 90% of it): 0.76 s a pass
    moved = offload.moved_bytes(3.85e9, 80, 40)
    assert float(moved) == pytest.approx(154e9)
    t = offload.transfer_seconds(moved, 80, 40, 225e9, 5e-6, 0.9)
    assert float(t) == pytest.approx(40 * 5e-6 + 154e9 / 202.5e9)
    assert float(offload.exposed_seconds(t, 1.0)) == 0.0
    assert float(offload.exposed_seconds(t, 0.5)) == pytest.approx(float(t) - 0.5)
    # one micro-batch in flight: 39 of the 40 layers leave the GPU (one is in transit)
    assert float(offload.resident_saving(3.85e9, 80, 40, 1)) == pytest.approx(39 * 3.85e9)


def test_offloading_frees_the_offloaded_layers_and_exposes_a_slow_copy():
    def acts(n, **system):
        p = _plan(training={"cpu_offloading_num_layers": n}, **system)
        return p, estimate(p, resolve_config(p)).values

    _, v0 = acts(0)
    _, v10 = acts(10)
    _, v40 = acts(40)
    per_layer = (v10["activations_bytes"] - v40["activations_bytes"]) / 30
    assert v0["activations_bytes"] - v10["activations_bytes"] == pytest.approx(9 * per_layer)
    assert 80 * per_layer < v0["activations_bytes"]
    # over NVLink-C2C the copy hides behind each pass: the step is the same
    assert v40["step_time_s"] == pytest.approx(v0["step_time_s"], rel=1e-9)
    # over a 1 GB/s link it cannot: each pass waits for the rest of its copy
    slow = presets.link("pcie-gen5").model_copy(
        update={"bandwidth_bytes_per_s": 1e9, "efficiency": 1.0}
    )
    _, vs = acts(40, host_link=slow.model_dump())
    m = 256 // (64 * 2)
    t = 40 * slow.latency_s + 40 * per_layer / 1e9
    f, b = v0["forward"], v0["backward"]
    assert vs["step_time_s"] - v0["step_time_s"] == pytest.approx((m * t - f) + (m * t - b))


def test_offloading_runs_as_megatron_core_takes_it():
    with pytest.raises(PerfModelError, match=r"pp\(2\).*pp 1 and no recompute"):
        _plan(training={"cpu_offloading_num_layers": 4}, parallel={"pp": 2})
    with pytest.raises(PerfModelError, match=r"must be below num_layers\(80\)"):
        _plan(training={"cpu_offloading_num_layers": 80})
    free = _plan(training={"cpu_offloading_num_layers": 40}).with_parallel(pp=None, recompute=None)
    from perfmodel.engine.search import search

    best = search(free, top=3).results
    assert best and all(r.config.pp == 1 and r.config.recompute == "none" for r in best)


def test_the_host_link_follows_the_gpu():
    assert _plan().system.host_link.name.startswith("NVLink-C2C")
    p = presets.plan_from_mapping(
        {
            "model": "llama3-8b",
            "system": {"gpu": "b200", "num_gpus": 8},
            "training": {"global_batch_size": 64},
        },
        "t",
    )
    assert p.system.host_link.name.startswith("PCIe Gen5")


def test_multi_token_prediction_as_megatron_bridge_counts_it():
    """Issue 21 item 1 (needed by the Blackwell DeepSeek-V3 rows): DeepSeek-V3 with its MTP layer
    is 260.0 GFLOP a token at 4,096 tokens in Megatron-Bridge's tables (TFLOP/s over tokens/s,
    shared/validation/published-2026.yaml); one more MoE layer, its 2h x h projection and one more
    logits pass on the last stage."""
    from perfmodel.cost import flops as fl
    from perfmodel.cost.transformer import LayerShape

    m = presets.model("deepseek-v3").model_copy(update={"mtp_num_layers": 1})
    sh = LayerShape.of(m)
    per_token = fl.megatron_core_flops(sh, 1, 4096, fl.Depth(61, 58, 1, m.mtp_is_moe)) / 4096
    assert per_token / 1e9 == pytest.approx(260.0, abs=0.05)
    base = presets.model("deepseek-v3")
    plan, with_mtp = _deepseek(), _deepseek(mtp=1)
    from perfmodel.engine.blocks import block_costs
    from perfmodel.engine.evaluate import layout, stage_costs
    from perfmodel.engine.knobs import Knobs

    def last_stage(p):
        k = Knobs.from_configs([resolve_config(p)])
        st = Setting.of(p)
        c = block_costs(st, k)
        stages, _ = layout(st, k, c)
        sc = stage_costs(st, stages, c, k.recompute, k.memory_switch)
        moe, head = sum(c["moe"].seconds())[0], sum(c["head"].seconds())[0]
        return stages.layers[0, 3], float(sc["time"][0, 3]), float(moe), float(head)

    (layers0, t0, moe, head0), (layers1, t1, _, head1) = last_stage(plan), last_stage(with_mtp)
    # the split is fixed (61 = 3 + 14 x 4 + 2): the last stage holds one more MoE layer, and its
    # head one more pass through the projection, norms, logits and loss
    assert list(layers1 - layers0) == [0.0, 1.0]
    assert t1 - t0 == pytest.approx(moe + (head1 - head0))
    assert head1 - head0 > 0.8 * head0  # the logits pass dominates both
    a, b = (estimate(p, resolve_config(p)) for p in (plan, with_mtp))
    # the model FLOPs grow by the MTP layer's share; the convention line says it counts them
    ratio = (
        b.values["model_tflops_per_gpu"]
        * b.values["step_time_s"]
        / (a.values["model_tflops_per_gpu"] * a.values["step_time_s"])
    )
    full = fl.model_flops(LayerShape.of(base), 1, 4096, fl.Depth(61, 58))
    assert ratio == pytest.approx(fl.model_flops(sh, 1, 4096, fl.Depth(61, 58, 1, True)) / full)
    assert "MTP layer" in b.to_json()["flop_convention"]


def test_mean_model_states_of_a_mixture_of_experts_shard_the_experts():
    """Issue 21 item 5: 'model states, mean over stages' counted every routed expert on every GPU
    (DeepSeek-V3 on 1,024 H100: 129.7 GB against 40.9 GB on the most loaded stage). By hand:
    the dense part over tp x pp with ZeRO-1 over dp, the experts over pp x ep with their
    optimizer over the expert-data-parallel ranks (here 1)."""
    from perfmodel.cost import memory as mem
    from perfmodel.cost.transformer import LayerShape

    # the split left to the model (first and last stages as balanced)
    plan = _deepseek(
        recompute="full",
        decoder_first_pipeline_num_layers=None,
        decoder_last_pipeline_num_layers=None,
    )
    m = plan.model
    v = estimate(plan, resolve_config(plan)).values
    experts = 58 * m.num_moe_experts * 3 * m.hidden_size * m.moe_ffn_hidden_size
    whole = mem.total_params(LayerShape.of(m), 61, 4096, 58)
    dense_gpu, experts_gpu = (whole - experts) / 16, experts / (16 * 64)
    # bf16 weights (2 B), fp32 gradient accumulation (4 B), Adam's 12 B sharded over dp 64 / edp 1
    by_hand = dense_gpu * (2 + 4 + 12 / 64) + experts_gpu * (2 + 4 + 12 / 1)
    assert v["model_states_mean_bytes"] == pytest.approx(by_hand, rel=1e-6)
    most = v["weights_bytes"] + v["gradients_bytes"] + v["optimizer_bytes"]
    assert v["model_states_mean_bytes"] < most


def test_a_blackwell_plan_takes_the_blackwell_runs_band():
    """A GB200 plan takes the band of Megatron's dense Blackwell runs (Megatron-Bridge and MLPerf),
    sharded (Megatron-FSDP) or not; an A100 plan under megatron-core takes Megatron's Ampere runs;
    a mixture of experts on GB200, which no run validated, says so (issue 28)."""
    from perfmodel.engine import uncertainty

    bands = presets.error_bands()
    from types import SimpleNamespace

    for zero in (1, 3):
        p = _plan(parallel={"zero_stage": zero})
        layout = SimpleNamespace(tp=1, pp=1, cp=1, ep=1, zero_stage=zero)
        assert uncertainty.band(p, bands, layout).basis.startswith("dense Megatron on Blackwell")
    a100 = presets.plan_from_mapping(
        {
            "model": "gpt3-175b",
            "system": {"gpu": "a100-80gb", "num_gpus": 512},
            "training": {"global_batch_size": 1536},
            "parallel": {"tp": 8, "pp": 8, "cp": 1},
        },
        "t",
    )
    est = answer.estimate_or_search(a100, presets.error_bands())[0]
    assert uncertainty.of_estimate(a100, bands, est).basis.startswith("dense Megatron on Ampere")
    from perfmodel.inputs import load_plan

    moe = load_plan("deepseek-v3-gb200")
    est = answer.estimate_or_search(moe, presets.error_bands())[0]
    b = uncertainty.of_estimate(moe, bands, est)
    assert not b.basis.startswith("dense Megatron on Blackwell")
    # Megatron-Bridge's MoE runs on Blackwell and DGX Cloud's on GB200 (published-2026c) are two
    # sources: the class is validated (with one, it needed two)
    assert b.basis.startswith("MoE Megatron on Blackwell") and "of 2 sources" in b.basis
    assert "MoE Megatron on Blackwell by two sources" not in b.unvalidated


def test_mtp_layers_are_not_decoder_layers_of_the_split():
    """The stages' layer counts (what `estimate` prints and `--emit megatron` writes as
    --decoder-last-pipeline-num-layers) are decoder layers; the MTP layer rides beside them."""
    plan = _deepseek(mtp=1)
    layers = estimate(plan, resolve_config(plan)).stage_layers
    assert sum(layers) == 61 and layers[0] == 3 and layers[-1] == 2


def test_node_limited_routing_caps_the_nodes_a_token_reaches():
    """Issue 21, DeepEP and node-limited routing: DeepSeek-V3 sends each token to at most 4 nodes
    (report Sec. 2.1.2; config.json n_group 8, topk_group 4). Over EP 64 on 8 nodes a token's 8
    expert copies reach 8 (1 - (7/8)^8) = 5.25 nodes when routing is free, 4 (1 - (3/4)^8) = 3.60
    when limited to 4 of them: the share of copies that cross nodes falls from 0.656 to 0.450."""
    from perfmodel.cost import collectives as coll

    free = float(coll.node_dedup(64, 8, 8))
    limited = float(coll.node_dedup(64, 8, 8, 8, 4))
    assert free == pytest.approx(8 * (1 - (7 / 8) ** 8) / 8)
    assert limited == pytest.approx(4 * (1 - (3 / 4) ** 8) / 8)
    # one node: the token reaches it once; 16 nodes for 8 groups: each group spans 2 nodes, so a
    # token within 4 groups reaches at most 8 of the 16
    assert float(coll.node_dedup(8, 8, 8, 8, 4)) == pytest.approx(1 / 8)
    assert float(coll.node_dedup(128, 8, 8, 8, 4)) == pytest.approx(8 * (1 - (7 / 8) ** 8) / 8)
    m = presets.model_from_hf_config(
        {**__import__("tests.test_models", fromlist=["DEEPSEEK_V3"]).DEEPSEEK_V3}
    )
    assert (m.moe_router_num_groups, m.moe_router_group_topk) == (8, 4)
    with pytest.raises(Exception, match="go together"):
        m.model_validate({**m.model_dump(), "moe_router_group_topk": None})


def test_fp8_blockwise_recipe():
    """Issue 22 item 3: DeepSeek-V3's blockwise FP8 (1x128 activation tiles, 128x128 weight blocks,
    FP32 scales): every cast and saved input carries 4/128 B of scale an element, the FP8 weight
    copy 4/16384; Hopper only, FP8 only; Megatron-LM's --fp8-recipe reads into it."""
    from perfmodel.inputs.megatron import read_args
    from perfmodel.specs import Precision

    b = Precision.of("fp8", True, "adam", fp8_recipe="blockwise")
    t = Precision.of("fp8", True, "adam", fp8_recipe="tensorwise")
    assert (b.scale_bytes, t.scale_bytes) == (4 / 128, 0.0)
    assert b.fp8_weight_bytes == pytest.approx(1 + 4 / 16384)

    def h100(recipe):
        return presets.plan_from_mapping(
            {
                "model": "llama3-8b",
                "system": {"gpu": "h100-sxm", "num_gpus": 8},
                "training": {"global_batch_size": 32, "dtype": "fp8", "fp8_recipe": recipe},
                "parallel": {"tp": 1, "pp": 1, "cp": 1, "micro_batch_size": 1, "zero_stage": 1},
            },
            "t",
        )

    per_tensor, blockwise = (
        estimate(p, resolve_config(p)) for p in (h100(None), h100("blockwise"))
    )
    assert blockwise.values["step_time_s"] > per_tensor.values["step_time_s"]
    assert any("fp8 blockwise" in a for a in blockwise.assumed)
    with pytest.raises(PerfModelError, match="blockwise FP8 runs on Hopper"):
        _plan(training={"fp8_recipe": "blockwise"})
    with pytest.raises(PerfModelError, match="the recipe is FP8's"):
        _plan(dtype="bf16", training={"fp8_recipe": "delayed"})
    base = (
        "--num-layers 8 --hidden-size 64 --num-attention-heads 2 --micro-batch-size 1"
        " --global-batch-size 8 --vocab-size 100 --fp8-format e4m3"
    )
    assert (
        read_args(base + " --fp8-recipe blockwise", "h100-sxm", num_gpus=1).plan["training"][
            "fp8_recipe"
        ]
        == "blockwise"
    )
    assert (
        read_args(base + " --fp8-recipe mxfp8", "b200", num_gpus=1).plan["training"]["dtype"]
        == "mxfp8"
    )


def test_offloading_without_a_host_link_is_an_error():
    """A GPU given as a mapping has no usual host link: offloading then names the field to set
    rather than pricing the copy at nothing."""
    from perfmodel.errors import PerfModelError as Err

    gpu = presets.gpu("gb200").model_dump()
    with pytest.raises(Err, match=r"needs system\.host_link"):
        _plan(
            training={"cpu_offloading_num_layers": 4},
            gpu=gpu,
            intra_node_link="nvlink5-nvl72",
            inter_node_link="ib-ndr",
        )
