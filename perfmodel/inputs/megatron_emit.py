"""Megatron-LM's language, written: a configuration as Megatron-LM launch arguments (`plan --emit
megatron`), and an imported plan as YAML with what was ignored or assumed as comments."""

from __future__ import annotations

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron_args import Imported


def to_args(plan, config: dict) -> list[str]:
    """Megatron-LM arguments for a plan's model and one configuration (an Estimate's
    config.as_dict())."""
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
    return _model_args(plan) + _parallel_args(c) + _training_args(plan, c)


def _model_args(plan) -> list[str]:
    """The model's shape in Megatron-LM's names (megatron/training/arguments.py)."""
    m = plan.model
    a = [
        f"--num-layers {m.num_layers}",
        f"--hidden-size {m.hidden_size}",
        f"--num-attention-heads {m.num_attention_heads}",
        f"--ffn-hidden-size {m.ffn}",
        f"--seq-length {plan.seq_length}",
        f"--max-position-embeddings {plan.seq_length}",
    ]
    if m.groups != m.num_attention_heads:
        a += ["--group-query-attention", f"--num-query-groups {m.groups}"]
    if m.kv_channels:
        a.append(f"--kv-channels {m.kv_channels}")
    a += {"swiglu": ["--swiglu"], "squared-relu": ["--squared-relu"]}.get(m.mlp, [])
    if m.position_embedding == "rope":
        a.append("--position-embedding-type rope")
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
        a += [
            f"--num-experts {m.num_moe_experts}",
            f"--moe-router-topk {m.moe_router_topk}",
            f"--moe-token-dispatcher-type {plan.training.moe_token_dispatcher_type}",
        ]
        if m.moe_ffn_hidden_size:
            a.append(f"--moe-ffn-hidden-size {m.moe_ffn_hidden_size}")
        if m.moe_shared_expert_intermediate_size:
            a.append(
                f"--moe-shared-expert-intermediate-size {m.moe_shared_expert_intermediate_size}"
            )
        pattern = m.moe_pattern()
        if not all(pattern):
            a.append(f"--moe-layer-freq '{str(pattern).replace(' ', '')}'")
    return a


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
    for key, flag in (
        ("cp", "--context-parallel-size"),
        ("ep", "--expert-model-parallel-size"),
        ("etp", "--expert-tensor-parallel-size"),
    ):
        if c.get(key, 1) > 1:
            a.append(f"{flag} {c[key]}")
    if c.get("cp", 1) > 1:
        a.append(f"--cp-comm-type {c['cp_comm_type']}")
    if c["sequence_parallel"]:
        a.append("--sequence-parallel")
    if c["recompute"] != "none":
        a.append(f"--recompute-granularity {c['recompute']}")
        if c["recompute"] == "full":
            a += ["--recompute-method uniform", "--recompute-num-layers 1"]
    if c["zero_stage"] == 1:
        a.append("--use-distributed-optimizer")
    elif c["zero_stage"] > 1:
        a += [
            "--use-megatron-fsdp",
            "--data-parallel-sharding-strategy "
            + {2: "optim_grads", 3: "optim_grads_params"}[c["zero_stage"]],
        ]
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
    a += {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16", "--fp8-format hybrid"]}.get(
        dtype, []
    )
    return a


def launch_text(plan, best) -> str:
    """`plan --emit megatron`: the best configuration as Megatron-LM arguments, under two comment
    lines with the prediction and the launcher."""
    nodes = -(-plan.system.num_gpus // plan.system.gpus_per_node)
    head = [
        (
            f"# {plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}: predicted "
            f"{best.values['step_time_s']:.3g} s per step, MFU {100 * best.values['mfu']:.1f}%"
        ),
        (
            f"# launch: torchrun --nproc_per_node {plan.system.gpus_per_node} --nnodes {nodes}"
            f" pretrain_gpt.py ...; the vocabulary ({plan.model.vocab_size:,}) comes from your"
            " tokenizer"
        ),
    ]
    return "\n".join(head) + "\n" + " \\\n".join(to_args(plan, best.config.as_dict()))


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
    return "\n".join(head) + "\n" + yaml.safe_dump(imp.plan, sort_keys=False)
