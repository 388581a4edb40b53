"""Issue 21, DualPipe: DeepSeek's bidirectional pipeline (DeepSeek-V3 report, arXiv 2412.19437,
Sec. 3.2.1 and Table 2; deepseek-ai/DualPipe) and the HAI-LLM profile that runs it."""

import numpy as np
import pytest
from helpers import deepseek_v3

from perfmodel.cost import collectives as coll
from perfmodel.cost import pipeline as pipe
from perfmodel.cost.ops import Pointwise
from perfmodel.cost.stages import build_stages
from perfmodel.engine.blocks import dispatch_scale
from perfmodel.engine.dualpipe import COMM_SM_OCCUPANCY, contention, paired_cost
from perfmodel.engine.estimate import estimate, per_layer_ops, resolve_config
from perfmodel.engine.per_layer import layer_block
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.specs import Precision


def _deepseek(schedule: str | None = "dualpipe", framework: str = "hai-llm", **parallel):
    """DeepSeek-V3 on 1,024 H100, PP 16 x EP 64, FP8 with DeepEP, under ``framework``."""
    training = {"dtype": "fp8", "framework": framework, "moe_token_dispatcher_type": "deepep"}
    return deepseek_v3(training, schedule=schedule, **parallel)


def test_the_closed_forms_of_table_2():
    """Bubble (p/2 - 1)(F&B + B - 3W); p + 1 chunks in flight."""
    assert float(pipe.dualpipe_bubble(8, 3.0, 2.0, 1.0)) == pytest.approx(3 * (3 + 2 - 3))
    assert float(pipe.dualpipe_bubble(2, 3.0, 2.0, 1.0)) == 0.0
    # against 1F1B at F = 1, B = 2, W = 1 and a perfect pair (F&B = F + B): 7 x 2 vs 15 x 3
    assert float(pipe.dualpipe_bubble(16, 3.0, 2.0, 1.0)) == 14.0 < (16 - 1) * (1 + 2)
    assert float(pipe.in_flight_microbatches(16, 120, 1, "dualpipe")) == 17


def _pairs_of_dualpipe_step(p: int, m: int, h: int) -> int:
    """F&B pairs a rank runs, counted loop by loop as deepseek-ai/DualPipe's dualpipe.py
    DualPipe.step runs them: step 4 (nF0B1F1B0) two _forward_backward_chunk calls an iteration,
    the middle ranks' first one split; step 5 (nB1F1B0) one."""
    n, half = m // 2, p // 2
    pairs = 0
    for i in range(n - p + h + 1):  # step 4
        pairs += 1 if (i == 0 and h == half - 1) else 2
    pairs += half - h - 1  # step 5
    return pairs


@pytest.mark.parametrize("p,m", [(16, 120), (16, 32), (8, 20), (4, 8), (2, 4), (8, 64)])
def test_pairs_match_dualpipe_step_loop_by_loop(p, m):
    """m - 3p/2 + h + 1 - [h = p/2 - 1] against the loops themselves, rank by rank."""
    for h in range(p // 2):
        assert float(pipe.dualpipe_paired(p, m, h)) == _pairs_of_dualpipe_step(p, m, h)


def test_the_bundled_deepseek_case_pairs_97_at_the_ends_and_103_in_the_middle():
    """p = 16, m = 120 (issue 30): the fifth phase's pairs (p/2 - h - 1) were missed, giving 90."""
    assert float(pipe.dualpipe_paired(16, 120, 0)) == 97
    assert float(pipe.dualpipe_paired(16, 120, 7)) == 103
    assert float(pipe.dualpipe_paired_slowest(16, 120, 1)) == float(
        pipe.dualpipe_paired(16, 120, 1)
    )
    assert float(pipe.dualpipe_paired_slowest(16, 120, 3)) == 97
    assert float(pipe.in_flight_microbatches(16, 120, 1, "1f1b")) == 16


def test_a_rank_holds_stage_i_and_stage_p_minus_1_minus_i():
    """Rank 0 runs the first and the last stage: a chunk costs their mean, and it holds both."""
    stages = build_stages(10, [0] * 10, np.array([4]), np.array([2]), np.array([2]))
    per_class = np.array([[1.0, 5.0, 5.0, 3.0]])
    assert stages.dualpipe(per_class, np.array([True]))[0].tolist() == [2.0, 5.0, 5.0, 2.0]
    assert stages.dualpipe(per_class, np.array([True]), "sum")[0].tolist() == [4, 10, 10, 4]
    assert stages.dualpipe(per_class, np.array([False]))[0].tolist() == [1.0, 5.0, 5.0, 3.0]


def test_an_f_and_b_pair_hides_the_expert_all_to_all():
    """In a pair each chunk's all-to-all runs behind the other's compute, at the cost of the 20
    SMs the report gives its kernels (20 / 112 of the time the compute runs beside them, on H100's
    132 SMs: 88% of it, as deepseek-ai/profile-data's trace ran); the rest of the chunks run alone.
    The slowest (middle) stage's EP line under DualPipe is then m (rho paired(E, C) + (1 - rho) E),
    E and C its per-micro-batch all-to-all and compute under 1F1B, rho = (m - 3p/2 + 2) / m (the
    fewest pairs of a middle rank, h = 1)."""
    one = estimate(p := _deepseek("1f1b"), resolve_config(p), simulate=False).values
    dual = estimate(p := _deepseek(), resolve_config(p), simulate=False).values
    assert not one["slowest_stage_is_first"] and dual["slowest_stage_class"] in (1, 2)
    m = one["num_micro_batches"]
    E = one["ep_comm"] / m
    C = (one["forward"] + one["backward"] + one["recompute"]) / m
    rho = (m - 1.5 * 16 + 2) / m
    hidden = max(E - C, 0.0) + contention(132) * max(min(E, C), COMM_SM_OCCUPANCY * C)
    assert contention(132) == pytest.approx(20 / 112)
    # the kernels hold their SMs longer than the bytes take to move: more than overlapped_time's
    assert hidden > float(coll.overlapped_time(E, C, contention(132)))
    assert dual["ep_comm"] == pytest.approx(m * (rho * hidden + (1 - rho) * E), rel=1e-9)
    assert dual["ep_comm"] < one["ep_comm"] and dual["bubble"] < one["bubble"]
    # the p2p sends of the paired chunks hide too
    assert dual["pp_comm"] < one["pp_comm"]


def test_the_communication_sms_cost_the_whole_pair_not_only_the_bytes():
    """deepseek-ai/profile-data train.json: in an F&B pair of 4 MoE layers (H800, EP 64) the
    DeepEP kernels run beside 88% of the compute (104.2 of 118.2 ms), far longer than their bytes
    take, so the compute pays the 20 SMs' share over that time; an all-to-all longer than the
    compute still shows its excess."""
    c = contention(132)
    assert float(paired_cost(0.01, 0.1, c)) == pytest.approx(c * 0.88 * 0.1)
    assert float(paired_cost(0.095, 0.1, c)) == pytest.approx(c * 0.095)
    assert float(paired_cost(0.3, 0.1, c)) == pytest.approx(0.2 + c * 0.1)
    # no expert all-to-all (a dense model), no communication kernels beside the compute
    assert float(paired_cost(0.0, 0.1, c)) == 0.0
    # arrays in, arrays out
    out = paired_cost(np.array([0.0, 0.01, 0.3]), np.array([0.1, 0.1, 0.1]), c)
    assert out.shape == (3,) and out[0] == 0.0 < out[1] < out[2]


def test_deepseek_makes_the_transposed_fp8_copy_in_a_pass_of_its_own():
    """DeepSeek-V3 report Sec. 3.3.4: the 1 x 128 FP8 activations are read back, transposed and
    re-quantized into 128 x 1 tiles; Transformer Engine writes both copies in one cast. Under
    hai-llm each cast reads one quantized element more (1 + 4/128 B); Megatron-Core's do not."""
    training = {"dtype": "fp8", "fp8_recipe": "blockwise", "moe_token_dispatcher_type": "deepep"}
    plans = {
        fw: deepseek_v3({**training, "framework": fw}, schedule="1f1b")
        for fw in ("hai-llm", "megatron-core")
    }
    casts = {}
    for fw, plan in plans.items():
        block = layer_block(plan, resolve_config(plan))
        # the bytes an element each cast moves (its launches aside: Megatron-Core's grouped experts
        # are quantized expert by expert, cost/layer_kernels.fp8_casts)
        casts[fw] = {
            o.name: o.fwd_bytes_per_el + o.bwd_bytes_per_el
            for o in block.ops
            if isinstance(o, Pointwise) and "FP8 cast of" in o.name
        }
    blockwise = Precision.of("fp8", True, "adam", fp8_recipe="blockwise")
    one_pass = 2 + 2 * (1 + blockwise.scale_bytes)
    for name in ("FP8 cast of GEMM inputs", "FP8 cast of output gradients"):
        ratio = casts["hai-llm"][name] / casts["megatron-core"][name]
        assert ratio == pytest.approx((one_pass + 1 + blockwise.scale_bytes) / one_pass)


def test_two_copies_of_the_parameters_and_their_optimizer_shards_once():
    """Table 2's "2x" parameters: a rank holds two stages' weights and gradients; each stage's
    optimizer states are sharded over the 2 dp ranks that hold it, so ZeRO-1's share is unchanged.
    On GPT-3 175B (dense, tp 8, pp 8, dp 8): the mean states per GPU grow by P (w + g), P the
    1F1B mean parameters per GPU."""
    plan = load_dense()
    one = estimate(plan, resolve_config(plan, schedule="1f1b")).values
    dual = estimate(plan, resolve_config(plan, schedule="dualpipe")).values
    p = Precision.of("bf16", True, "adam")
    w_g, o = p.weight_bytes + p.gradient_bytes, p.optimizer_bytes / 8
    per_gpu = one["model_states_mean_bytes"] / (w_g + o)
    assert dual["model_states_mean_bytes"] == pytest.approx(
        one["model_states_mean_bytes"] + per_gpu * w_g, rel=1e-9
    )
    # the most loaded rank holds the first and the last stage: about twice a stage's weights
    assert 1.9 < dual["weights_bytes"] / one["weights_bytes"] < 2.1
    # p + 1 chunks in flight against 1F1B's p on its first stage
    assert 9 / 8 * 0.95 < dual["activations_bytes"] / one["activations_bytes"] < 9 / 8 * 1.05


def load_dense():
    return presets.plan_from_mapping(
        {
            "model": "gpt3-175b",
            "system": {"gpu": "a100-80gb", "num_gpus": 512},
            "training": {"global_batch_size": 1024, "seq_length": 2048, "framework": "hai-llm"},
            "parallel": {
                "tp": 8,
                "pp": 8,
                "dp": 8,
                "vp": 1,
                "micro_batch_size": 1,
                "zero_stage": 1,
                "sequence_parallel": True,
                "recompute": "selective",
            },
        },
        "t",
    )


def test_fp8_dispatch_moves_a_byte_and_a_scale_per_128():
    """HAI-LLM dispatches in FP8 (report Sec. 3.3.3): the forward dispatch and the combine's
    gradient at (1 + 4/128) / 2 of BF16's bytes; the forward combine stays BF16."""
    assert dispatch_scale(True, "fp8", 2) == pytest.approx((1 + 4 / 128) / 2)
    assert dispatch_scale(True, "bf16", 2) == 1.0 and dispatch_scale(False, "fp8", 2) == 1.0
    plan = _deepseek()
    ops = {o.name: o for o in per_layer_ops(plan, resolve_config(plan), "moe")}
    d, c = ops["EP dispatch (all-to-all)"], ops["EP combine (all-to-all)"]
    assert float(d.bytes) == pytest.approx(float(c.bytes) * (1 + 4 / 128) / 2)
    mcore = _deepseek("1f1b", "megatron-core")
    ops = {o.name: o for o in per_layer_ops(mcore, resolve_config(mcore), "moe")}
    assert float(ops["EP dispatch (all-to-all)"].bytes) == float(
        ops["EP combine (all-to-all)"].bytes
    )


@pytest.mark.parametrize(
    "change, rule, words",
    [
        ({"framework": "megatron-core"}, "PM110", "does not run DualPipe"),
        ({}, None, None),
        ({"global_batch_size": 1024}, "PM106", "m >= 2 pp"),
        ({"moe_a2a_overlap": True}, "PM107", "drop moe_a2a_overlap"),
    ],
)
def test_what_dualpipe_needs(change, rule, words):
    """DualPipe runs under hai-llm only, with an even pp and an even m >= 2 pp (DualPipe.step
    asserts both), and not beside Megatron-Core's own all-to-all overlap."""
    from perfmodel.engine.rules import config_problems

    plan = _deepseek()
    tr = {k: v for k, v in change.items() if k in type(plan.training).model_fields}
    par = {k: v for k, v in change.items() if k not in tr}
    if tr:
        plan = plan.with_training(**tr)
    if par:
        plan = plan.with_parallel(**par)
    problems = config_problems(plan, resolve_config(plan))
    if rule is None:
        assert not [p for p in problems if p[0] in ("PM106", "PM107", "PM110")]
    else:
        assert any(r == rule and words in msg for r, _, msg in problems), problems


def test_the_search_tries_dualpipe_only_where_the_framework_runs_it():
    from perfmodel.engine.search import search

    def schedules(framework):
        free = _deepseek(None, framework).with_parallel(recompute=None)
        return [r.config.schedule for r in search(free, top=20).results]

    hai, mcore = schedules("hai-llm"), schedules("megatron-core")
    # DualPipe halves the bubble and hides the all-to-all: the fastest that fits uses it
    assert hai[0] == "dualpipe" and "1f1b" in hai
    assert mcore and "dualpipe" not in mcore


def test_the_simulator_does_not_pretend_to_run_dualpipe():
    from perfmodel.engine.schedule import simulate

    with pytest.raises(PerfModelError, match="closed form"):
        simulate(8, 16, 1, "dualpipe")
