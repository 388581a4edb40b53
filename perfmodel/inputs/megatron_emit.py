"""Megatron-LM's language, written: a configuration as Megatron-LM launch arguments (`plan --emit
megatron`), and an imported plan as YAML with what was ignored or assumed as comments."""

from __future__ import annotations

from perfmodel.errors import PerfModelError
from perfmodel.inputs import primus_zb
from perfmodel.inputs.emit_check import trip_note
from perfmodel.inputs.emit_text import wrap_args, wrap_comments
from perfmodel.inputs.megatron_args import Imported
from perfmodel.inputs.megatron_layout import FLAG, layout_text
from perfmodel.inputs.megatron_profiles import (
    count_lines,
    cp_args,
    domain_line,
    marker_line,
    zero_args,
)

SCHEDULE_TITLES = {
    "dualpipe": "DualPipe",
    "dualpipev": "DualPipeV",
    "zb-h1": "ZB-H1",
    "zb-h2": "ZB-H2",
    "zbv": "ZB-V",
    "v-half": "V-Half",
    "v-min": "V-Min",
    "interleaved-zb": "interleaved zero-bubble",
}


def to_args(plan, config: dict, layers: list[float] | None = None) -> list[str]:
    """Megatron-LM arguments for a plan's model and one configuration (an Estimate's
    config.as_dict()), with the layers on each stage it was predicted with (Estimate.stage_layers;
    None: the even split)."""
    m, c = plan.model, config
    lacking = [
        name
        for name, on in (
            ("a gated GELU MLP (geglu)", m.mlp == "geglu"),
            ("sandwich norms", m.sandwich_norm),
            ("sliding-window attention", m.sliding_window),
            ("chunked attention", m.attention_chunk_size),
        )
        if on
    ]
    if lacking:
        raise PerfModelError(
            f"{plan.model.name}: Megatron-LM has no argument for {', '.join(lacking)}; "
            "write its arguments by hand"
        )
    framework = plan.training.framework
    zb = framework == "primus" and primus_zb.emits(c.get("schedule"))
    if c.get("schedule") not in (None, "gpipe", "1f1b", "interleaved") and not zb:
        title = SCHEDULE_TITLES.get(c["schedule"], c["schedule"])
        raise PerfModelError(primus_zb.refusal(c["schedule"], title, framework))
    if plan.training.framework == "deepspeed" and m.is_moe:
        raise PerfModelError(
            "framework deepspeed: --emit megatron writes Megatron-DeepSpeed's arguments for dense"
            " models; DeepSpeed-MoE's take another form (--num-experts per layer, --ep-world-size):"
            " write those by hand"
        )
    return (
        _model_args(plan, c)
        + _parallel_args(c)
        + cp_args(c, plan.training.framework)
        + zero_args(c["zero_stage"], plan.training.framework)
        + _instances_args(c)
        + _split_args(c, _decoder_layers(plan, layers or []), plan.model.mtp_num_layers)
        + _training_args(plan, c)
        + (primus_zb.primus_args(c) if zb else [])
    )


def _instances_args(c: dict) -> list[str]:
    """A ZeRO-1 sharding group of dp_shard ranks as Megatron-Core launches it: dp / dp_shard
    distributed-optimizer instances (inputs/megatron_optimizer.read_instances reads it back)."""
    shard = c.get("dp_shard") or 0
    if c["zero_stage"] != 1 or not shard or shard == c["dp"]:
        return []
    return [f"--num-distributed-optimizer-instances {c['dp'] // shard}"]


def _decoder_layers(plan, layers: list[float]) -> list[float]:
    """The decoder layers of each stage: an Estimate's stage_layers count the MTP layers on the
    last stage (where the cost model runs them), Megatron-LM's split arguments do not."""
    mtp = plan.model.mtp_num_layers
    if layers and mtp and sum(layers) == plan.model.num_layers + mtp:
        return [*layers[:-1], layers[-1] - mtp]
    return layers


def _split_args(c: dict, layers: list[float], mtp: int = 0) -> list[str]:
    """The layer split the prediction rests on, as Megatron-Core launches it: nothing for the even
    split; --decoder-first/last-pipeline-num-layers when the other stages share the rest evenly and
    vp divides every stage (TransformerConfig asserts both); else --pipeline-model-parallel-layout
    (inputs/megatron_layout)."""
    n = [int(x) for x in layers]
    pp, vp = c["pp"], c["vp"]
    if pp == 1 or len(set(n)) == 1 or len(n) != pp:
        return []
    if len(set(n[1:-1])) <= 1 and not any(k % vp for k in n):
        return [
            f"--decoder-first-pipeline-num-layers {n[0]}",
            f"--decoder-last-pipeline-num-layers {n[-1]}",
        ]
    return [f"{FLAG} '{layout_text(n, vp, mtp)}'"]


def _model_args(plan, c: dict | None = None) -> list[str]:
    """The model's shape in Megatron-LM's names (megatron/training/arguments.py), with the MoE
    switches of the configuration ``c`` (the search's choice; None: the training's)."""
    m = plan.model
    a = [
        f"--num-layers {m.num_layers}",
        f"--hidden-size {m.hidden_size}",
        f"--num-attention-heads {m.num_attention_heads}",
        f"--ffn-hidden-size {m.ffn}",
        f"--seq-length {plan.seq_length}",
        # the model's positions (131,072 for Llama 3.1), at least the training's sequence
        f"--max-position-embeddings {max(m.seq_length, plan.seq_length)}",
    ]
    if m.mtp_num_layers:
        a.append(f"--mtp-num-layers {m.mtp_num_layers}")
    if m.groups != m.num_attention_heads:
        a += ["--group-query-attention", f"--num-query-groups {m.groups}"]
    if m.kv_channels:
        a.append(f"--kv-channels {m.kv_channels}")
    a += {"swiglu": ["--swiglu"], "squared-relu": ["--squared-relu"]}.get(m.mlp, [])
    if m.position_embedding in ("rope", "yarn"):
        a.append(f"--position-embedding-type {m.position_embedding}")
        if m.rotary_base:  # Megatron-LM's --rotary-base is an integer (default 10000)
            a.append(f"--rotary-base {m.rotary_base:.0f}")
        if m.rope_scaling_factor:
            a.append(f"--use-rope-scaling --rope-scaling-factor {m.rope_scaling_factor:g}")
    if m.norm == "rmsnorm":
        a.append("--normalization RMSNorm")
    if not m.has_bias:
        a.append("--disable-bias-linear")
    if not m.tied_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    if not m.has_dropout:
        a += ["--hidden-dropout 0", "--attention-dropout 0"]
    if m.qk_layernorm:
        a.append("--qk-layernorm")
    if m.is_mla:
        a.append("--multi-latent-attention")
        a += [
            f"--{k.replace('_', '-')} {getattr(m, k)}"
            for k in (
                "q_lora_rank",
                "kv_lora_rank",
                "qk_head_dim",
                "qk_pos_emb_head_dim",
                "v_head_dim",
            )
            if getattr(m, k)
        ]
    if m.is_moe:
        a += _moe_args(plan, c or {})
    return a


def _moe_args(plan, c: dict) -> list[str]:
    """The experts, the router and the MoE switches of the configuration ``c`` (the search's choice;
    the training's where ``c`` has none)."""
    m = plan.model
    a = [
        f"--num-experts {m.num_moe_experts}",
        f"--moe-router-topk {m.moe_router_topk}",
    ]
    # DeepEP and HybridEP run behind Megatron-Core's flex dispatcher
    # (--moe-flex-dispatcher-backend)
    kind = c.get("moe_token_dispatcher_type", plan.training.moe_token_dispatcher_type)
    a.append(
        f"--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend {kind}"
        if kind in ("deepep", "hybridep")
        else f"--moe-token-dispatcher-type {kind}"
    )
    if c.get("moe_a2a_overlap", plan.training.moe_a2a_overlap):
        a.append("--overlap-moe-expert-parallel-comm")
    if m.moe_router_family == "balanced" or m.moe_load_imbalance == 1.0:
        a.append("--moe-router-force-load-balancing")
    elif m.moe_router_family == "aux_free_bias":
        a.append("--moe-router-enable-expert-bias")
    if m.moe_expert_capacity_factor is not None:
        a.append(f"--moe-expert-capacity-factor {m.moe_expert_capacity_factor:g}")
        if m.moe_pad_expert_input_to_capacity:
            a.append("--moe-pad-expert-input-to-capacity")
    if m.moe_router_num_groups:
        a.append(
            f"--moe-router-num-groups {m.moe_router_num_groups}"
            f" --moe-router-group-topk {m.moe_router_group_topk}"
        )
    if m.moe_ffn_hidden_size:
        a.append(f"--moe-ffn-hidden-size {m.moe_ffn_hidden_size}")
    if m.moe_shared_expert_intermediate_size:
        a.append(f"--moe-shared-expert-intermediate-size {m.moe_shared_expert_intermediate_size}")
    pattern = m.moe_pattern()
    if not all(pattern):
        a.append(f"--moe-layer-freq '{layer_freq_expression(pattern)}'")
    return a


def layer_freq_expression(pattern: list[int]) -> str:
    """A MoE layer pattern as the shortest Python list expression Megatron-LM's --moe-layer-freq
    evaluates (arguments.py, moe_freq_type: "([0]*3+[1]*58)", "([1,0])*24"): the plain list, its
    runs, or a repeated unit written by its runs, so that DeepSeek-V3's 61 layers take one short
    line, not 130 columns."""

    def runs(xs: list[int]) -> str:
        out, i = [], 0
        while i < len(xs):
            j = i
            while j < len(xs) and xs[j] == xs[i]:
                j += 1
            out.append(f"[{xs[i]}]*{j - i}" if j - i > 1 else f"[{xs[i]}]")
            i = j
        return "+".join(out)

    n = len(pattern)
    forms = [str(pattern).replace(" ", ""), f"({runs(pattern)})"]
    for unit in range(1, n // 2 + 1):
        if n % unit == 0 and pattern == pattern[:unit] * (n // unit):
            forms.append(f"({str(pattern[:unit]).replace(' ', '')})*{n // unit}")
            forms.append(f"({runs(pattern[:unit])})*{n // unit}")
            break
    return min(forms, key=len)


def _parallel_args(c: dict) -> list[str]:
    """One configuration's parallel layout, recompute and ZeRO stage as Megatron-LM arguments."""
    a = [
        f"--tensor-model-parallel-size {c['tp']}",
        f"--pipeline-model-parallel-size {c['pp']}",
        f"--micro-batch-size {c['micro_batch_size']}",
        f"--global-batch-size {c['global_batch_size']}",
    ]
    if c["vp"] > 1:
        a.append(f"--num-virtual-stages-per-pipeline-rank {c['vp']}")
    if c.get("ep", 1) > 1:
        a.append(f"--expert-model-parallel-size {c['ep']}")
    # Megatron-LM's expert TP defaults to the tensor-parallel size (arguments.py)
    if c.get("ep", 1) > 1 and c.get("etp", 1) != c["tp"]:
        a.append(f"--expert-tensor-parallel-size {c['etp']}")
    if c["sequence_parallel"]:
        a.append("--sequence-parallel")
    if c["recompute"] != "none":
        a.append(f"--recompute-granularity {c['recompute']}")
        if c["recompute"] == "full":
            a += ["--recompute-method uniform", "--recompute-num-layers 1"]
    return a


def _training_args(plan, c: dict) -> list[str]:
    """The kernels, overlaps and precision the plan's training section names. The asynchronous TP
    all-reduce is Megatron-LM's default; userbuffers' overlap (--tp-comm-overlap) needs sequence
    parallelism, which Megatron-LM asserts, so it is written only with SP."""
    t = plan.training
    a = ["--attention-backend " + ("flash" if t.flash_attention else "unfused")]
    a += [
        f"--{k.replace('_', '-')}"
        for k in ("overlap_grad_reduce", "overlap_param_gather", "fp8_param_gather")
        if getattr(t, k)
    ]
    if not t.tp_comm_overlap and c["tp"] > 1:
        a.append("--no-async-tensor-model-parallel-allreduce")
    if t.tp_comm_overlap_ub and c["sequence_parallel"]:
        a.append("--tp-comm-overlap")
    dtype = plan.training.dtype
    if dtype == "nvfp4":
        raise PerfModelError(
            "training.dtype nvfp4: perfmodel writes no FP4 launch arguments (nor reads"
            " Megatron-LM's --fp4-format); emit an FP8 or MXFP8 plan, or write them by hand"
        )
    a += {
        "bf16": ["--bf16"],
        "fp16": ["--fp16"],
        "fp8": ["--bf16", "--fp8-format hybrid"],
        # MXFP8 is Megatron-LM's --fp8-recipe mxfp8 (E4M3 with 32-element block scales)
        "mxfp8": ["--bf16", "--fp8-format e4m3", "--fp8-recipe mxfp8"],
    }.get(dtype, [])
    if dtype == "fp8" and t.fp8_recipe:
        a.append(f"--fp8-recipe {t.fp8_recipe}")
    if c["recompute"] == "selective" and tuple(t.recompute_modules) != ("core_attn",):
        # what selective recompute repeats, where it is not Megatron-LM's default (core_attn)
        a.append("--recompute-modules " + " ".join(t.recompute_modules))
    if t.cpu_offloading_num_layers:
        # TransformerConfig.cpu_offloading with cpu_offloading_num_layers (arguments.py)
        a += ["--cpu-offloading", f"--cpu-offloading-num-layers {t.cpu_offloading_num_layers}"]
    if t.offload_modules:
        # TransformerConfig.fine_grained_activation_offloading with offload_modules
        a += [
            "--fine-grained-activation-offloading",
            "--offload-modules " + " ".join(t.offload_modules),
        ]
    moments = {"--exp-avg-dtype": t.exp_avg_dtype, "--exp-avg-sq-dtype": t.exp_avg_sq_dtype}
    # BF16 main gradients under a 16-bit or low-precision dtype, whose default is fp32
    # (Megatron-LM's --main-grads-dtype, with the precision-aware optimizer)
    bf16_grads = dtype not in ("fp16", "fp32") and not t.grad_accum_fp32
    # FP16 master weights (--main-params-dtype, fp32 or fp16 in Megatron-LM); apex's remainders
    # and none have no Megatron-LM flag, and the read-back's check says what differs
    fp16_main = t.main_params_dtype == "fp16"
    if any(v != "fp32" for v in moments.values()) or bf16_grads or fp16_main:
        a.append("--use-precision-aware-optimizer")
        a += [f"{flag} {v}" for flag, v in moments.items() if v != "fp32"]
    if fp16_main:
        a.append("--main-params-dtype fp16")
    if bf16_grads:
        a.append("--main-grads-dtype bf16")
    if t.optimizer_cpu_offload:
        # HybridDeviceOptimizer: the precision-aware optimizer's code path (arguments.py asserts it)
        if "--use-precision-aware-optimizer" not in a:
            a.append("--use-precision-aware-optimizer")
        fraction = f"--optimizer-offload-fraction {t.optimizer_cpu_offload:g}"
        a += ["--optimizer-cpu-offload", fraction]
        if t.optimizer_offload_overlap:
            a.append("--overlap-cpu-optimizer-d2h-h2d")
    return a


def read_back(plan, args: list[str]):
    """The plan as today's Megatron-LM runs the arguments: the plan's model and system, the
    training and parallel sections as `import megatron` reads them (the megatron-core profile)."""
    from perfmodel.inputs.megatron import read_args
    from perfmodel.specs import Plan

    # the GPU named here is a placeholder: the plan's own system section replaces it below
    imp = read_args(" ".join(args), "h100-sxm", plan.system.num_gpus, plan.model.vocab_size)
    full = plan.model_dump()
    training = {**imp.plan["training"], "seq_length": plan.training.seq_length}
    return Plan.model_validate({**full, "training": training, "parallel": imp.plan["parallel"]})


def profile_note(plan, args: list[str], predicted_s: float) -> str | None:
    """What the arguments run as where the plan's framework profile is an older Megatron-LM's:
    the arguments alone cannot say which Megatron-LM, and today's runs them as megatron-core (the
    comment line of megatron_profiles.marker_line carries the profile back to `import
    megatron`)."""
    framework = plan.training.framework
    if not marker_line(framework):
        return None
    if any(a.startswith("--patch_zero_bubble") for a in args):
        return (
            f"the prediction ({predicted_s:.3g} s) is for framework {framework}: the"
            " --patch_zero_bubble keys are Primus's (zero_bubble.yaml); launch with Primus, as"
            " upstream Megatron-LM does not take them"
        )
    from perfmodel.engine.estimate import estimate, resolve_config

    back = read_back(plan, args)
    step = estimate(back, resolve_config(back)).values["step_time_s"]
    return (
        f"the prediction ({predicted_s:.3g} s) is for framework {framework};"
        f" today's Megatron-LM runs these arguments as megatron-core, predicted {step:.3g} s"
    )


def launch_json(plan, best) -> dict:
    """`plan --emit megatron --json`: the arguments as a list, the launcher and the prediction."""
    args = to_args(plan, best.config.as_dict(), best.stage_layers)
    return {
        "arguments": args,
        "launcher": _launcher(plan),
        "step_time_s": best.values["step_time_s"],
        "mfu": best.values["mfu"],
        "framework": plan.training.framework,
        "framework_note": profile_note(plan, args, best.values["step_time_s"]),
        "nvlink_domain": plan.system.nvlink_domain,
        "config": best.config.as_dict(),
        # what the arguments, read back with the comment lines launch_text writes, do not carry
        "not_carried": trip_note(plan, best, launch_text(plan, best), "megatron"),
    }


def launch_text(plan, best) -> str:
    """`plan --emit megatron`: the best configuration as Megatron-LM arguments, then comment lines
    with the prediction, the launcher and, for an older profile, what it runs as and its marker."""
    args = to_args(plan, best.config.as_dict(), best.stage_layers)
    step = best.values["step_time_s"]
    head = [
        (
            f"# {plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}: predicted "
            f"{step:.3g} s per step, MFU {100 * best.values['mfu']:.1f}%"
        ),
        (
            f"# launch: {_launcher(plan)} ...; the vocabulary ({plan.model.vocab_size:,}) comes"
            " from your tokenizer"
        ),
    ]
    note = profile_note(plan, args, step)
    head += [f"# {note}"] if note else []
    shard, dp = best.config.as_dict().get("dp_shard") or 0, best.config.dp
    if shard and shard != dp:
        head.append(
            f"# not in these arguments: the HSDP split (dp_shard {shard}, {dp // shard} replicas"
            f" of dp {dp}); Megatron-LM shards over all {dp} ranks"
        )
    head += count_lines(plan.system.num_gpus, plan.system.gpus_per_node)
    head += marker_line(plan.training.framework)
    head += domain_line(plan.system.nvlink_domain)
    # the comments follow the arguments, so that the text can follow a launcher's line ending in
    # a backslash (a comment there would end the command, as the shell reads it)
    text = " \\\n".join(args) + "\n" + "\n".join(head)
    trip = trip_note(plan, best, text, "megatron")
    head += [f"# {trip}"] if trip else []
    return " \\\n".join(wrap_args(args)) + "\n" + "\n".join(wrap_comments(head))


def _launcher(plan) -> str:
    nodes = -(-plan.system.num_gpus // plan.system.gpus_per_node)
    return f"torchrun --nproc_per_node {plan.system.gpus_per_node} --nnodes {nodes} pretrain_gpt.py"


def plan_yaml(imp: Imported, source: str = "Megatron-LM arguments") -> str:
    """The imported plan as YAML, with what was ignored or assumed as comments."""
    import yaml

    head = [f"# Imported from {source} by `perfmodel import`."]
    head += [f"# ignored (no effect on the cost): {', '.join(imp.ignored)}"] if imp.ignored else []
    head += (
        [
            "# not recognized, ignored (check they do not change the cost):"
            f" {', '.join(imp.unrecognized)}"
        ]
        if imp.unrecognized
        else []
    )
    head += [f"# assumed: {a}" for a in imp.assumed]
    return (
        "\n".join(wrap_comments(head)) + "\n" + yaml.safe_dump(imp.plan, sort_keys=False, width=78)
    )
