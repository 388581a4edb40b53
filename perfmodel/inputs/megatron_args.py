"""Megatron-LM's arguments as data, shared by the Megatron-LM and NeMo readers: which flag sets
which plan field, which do not change the cost, which perfmodel cannot model, and Megatron's
defaults and argument rules (megatron/training/arguments.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from perfmodel.errors import PerfModelError

# flag -> (section, field, kind); kind: int, str, True/False (a switch that sets the field to that
# value)
MODEL = {
    "--num-layers": "num_layers",
    "--mtp-num-layers": "mtp_num_layers",
    "--hidden-size": "hidden_size",
    "--num-attention-heads": "num_attention_heads",
    "--kv-channels": "kv_channels",
    "--ffn-hidden-size": "ffn_hidden_size",
    "--seq-length": "seq_length",
    "--vocab-size": "vocab_size",
    "--num-experts": "num_moe_experts",
    "--moe-router-topk": "moe_router_topk",
    "--moe-router-num-groups": "moe_router_num_groups",
    "--moe-router-group-topk": "moe_router_group_topk",
    "--moe-ffn-hidden-size": "moe_ffn_hidden_size",
    "--q-lora-rank": "q_lora_rank",
    "--kv-lora-rank": "kv_lora_rank",
    "--moe-shared-expert-intermediate-size": "moe_shared_expert_intermediate_size",
    "--qk-head-dim": "qk_head_dim",
    "--qk-pos-emb-head-dim": "qk_pos_emb_head_dim",
    "--v-head-dim": "v_head_dim",
    "--moe-layer-freq": "moe_layer_freq",
}


PARALLEL = {
    "--tensor-model-parallel-size": "tp",
    "--pipeline-model-parallel-size": "pp",
    "--context-parallel-size": "cp",
    "--expert-model-parallel-size": "ep",
    "--expert-tensor-parallel-size": "etp",
    "--micro-batch-size": "micro_batch_size",
    "--num-virtual-stages-per-pipeline-rank": "vp",
    "--cp-comm-type": "cp_comm_type",
    "--decoder-first-pipeline-num-layers": "decoder_first_pipeline_num_layers",
    "--decoder-last-pipeline-num-layers": "decoder_last_pipeline_num_layers",
}


TRAINING_VALUES = {
    "--global-batch-size": "global_batch_size",
    "--optimizer": "optimizer",
}


SWITCHES = {  # flag -> (section, field, value)
    "--swiglu": ("model", "mlp", "swiglu"),
    "--squared-relu": ("model", "mlp", "squared-relu"),
    "--untie-embeddings-and-output-weights": ("model", "tied_embeddings", False),
    "--disable-bias-linear": ("model", "add_bias_linear", False),
    "--qk-layernorm": ("model", "qk_layernorm", True),
    "--sequence-parallel": ("parallel", "sequence_parallel", True),
    "--use-distributed-optimizer": ("parallel", "zero_stage", 1),
    "--bf16": ("training", "dtype", "bf16"),
    "--fp16": ("training", "dtype", "fp16"),
    "--use-flash-attn": ("training", "flash_attention", True),
    "--overlap-grad-reduce": ("training", "overlap_grad_reduce", True),
    "--overlap-param-gather": ("training", "overlap_param_gather", True),
    # userbuffers' TP/GEMM overlap (Megatron-LM --tp-comm-overlap, Transformer Engine); the plain
    # asynchronous TP all-reduce is Megatron-LM's default
    # (--no-async-tensor-model-parallel-allreduce turns it off)
    "--tp-comm-overlap": ("training", "tp_comm_overlap_ub", True),
    "--no-async-tensor-model-parallel-allreduce": ("training", "tp_comm_overlap", False),
    "--use-megatron-fsdp": None,  # read with --data-parallel-sharding-strategy
    "--deepspeed": None,  # Megatron-DeepSpeed: read with --zero-stage (megatron_profiles)
    "--fp8-param-gather": ("training", "fp8_param_gather", True),
    "--cpu-offloading": None,  # read with --cpu-offloading-num-layers
    "--fine-grained-activation-offloading": None,  # read with --offload-modules
    "--recompute-activations": None,  # selective recompute (megatron_training.read_recompute)
    "--group-query-attention": None,
    "--multi-latent-attention": None,  # read with the flags they enable
    # read by inputs/megatron_moe.py and inputs/megatron_optimizer.py
    "--moe-enable-deepep": None,
    "--overlap-moe-expert-parallel-comm": None,
    "--moe-grouped-gemm": None,
    "--moe-permute-fusion": None,
    "--moe-router-fusion": None,
    "--moe-router-force-load-balancing": None,
    "--moe-pad-expert-input-to-capacity": None,
    "--moe-router-enable-expert-bias": None,
    "--use-precision-aware-optimizer": None,
    "--use-rope-scaling": None,
}


OTHER_VALUES = (
    "--data-parallel-sharding-strategy",
    "--zero-stage",
    "--ds-sequence-parallel-size",
    "--deepspeed_config",
    "--deepspeed-config",
    "--pipeline-model-parallel-layout",
    "--num-query-groups",
    "--normalization",
    "--position-embedding-type",
    "--hidden-dropout",
    "--attention-dropout",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--recompute-modules",
    "--cpu-offloading-num-layers",
    "--offload-modules",
    "--fp8-format",
    "--fp8-recipe",
    "--attention-backend",
    "--num-layers-per-virtual-pipeline-stage",
    "--nproc_per_node",
    "--nproc-per-node",
    "--nnodes",
    "--transformer-impl",
    "--rotary-base",
    "--rope-scaling-factor",
)


NO_COST = re.compile(
    r"^--(lr.*|min-lr|train-(iters|samples)|eval-.*|save.*|load|log-.*|tensorboard.*|wandb-.*|data-path|split|"
    r"vocab-file|merge-file|tokenizer-.*|seed|weight-decay|clip-grad|adam-.*|init-method-std|master[_-]addr|"
    r"master[_-]port|node[_-]rank|exit-.*|distributed-backend|use-mcore-models|max-position-embeddings|"
    r"rampup-batch-size|ckpt-.*|dist-ckpt-.*|no-load-.*|finetune|override-opt_param-scheduler|mock-data|"
    r"use-checkpoint-args|timing-log-level|manual-gc.*|no-create-attention-mask-in-dataloader|"
    r"num-workers|rdzv.*|standalone|no-position-embedding|rotary-percent|"
    r"moe-router-load-balancing-type|moe-aux-loss-coeff|moe-z-loss-coeff|moe-router-dtype|no-load-optim|no-load-rng|"
    r"micro-batch-size-for-eval|profile.*|use-pytorch-profiler|empty-unused-memory-level|log_interval)$"
)


CANNOT = {
    "--encoder-num-layers": "encoder-decoder models (T5)",
    "--encoder-seq-length": "encoder-decoder models (T5)",
    "--hybrid-override-pattern": "hybrid Mamba layers",
    "--fp4-format": "FP4 training from a launch file (a plan's training.dtype: nvfp4 models it)",
    "--heterogeneous-layers-config-path": "heterogeneous layers",
    "--account-for-embedding-in-pipeline-split": "embedding-aware layer splits",
    "--account-for-loss-in-pipeline-split": "loss-aware layer splits",
    "--use-torch-fsdp2": "PyTorch FSDP2",
}


@dataclass
class Imported:
    plan: dict  # a plan mapping, as a plan file holds it
    ignored: list[str] = field(default_factory=list)
    unrecognized: list[str] = field(default_factory=list)
    assumed: list[str] = field(default_factory=list)
    # plan wording -> the file's own (an argument and its value), for the errors of the plan built
    words: dict[str, str] = field(default_factory=dict)


def megatron_defaults(name: str, gpu: str, training: dict | None = None) -> Imported:
    """A plan mapping holding Megatron's defaults where a launch file is silent
    (megatron/training/arguments.py): biases, tied embeddings, dropout, a GELU MLP, LayerNorm,
    learned positions; no parallelism, no recompute, no SP, no distributed optimizer, the 1F1B
    schedule; the megatron-core profile."""
    return Imported(
        {
            "model": {
                "name": name,
                "add_bias_linear": True,
                "tied_embeddings": True,
                "dropout": True,
                "mlp": "gelu",
                "normalization": "layernorm",
                "position_embedding": "learned",
            },
            "system": {"gpu": gpu},
            "training": {"framework": "megatron-core", **(training or {})},
            "parallel": {
                "tp": 1,
                "pp": 1,
                "cp": 1,
                "vp": 1,
                "zero_stage": 0,
                "recompute": "none",
                "sequence_parallel": False,
                "schedule": "1f1b",
            },
        }
    )


def megatron_rules(out: Imported, sp_key: str, who: str) -> None:
    """Megatron's rules once a file is read: vp > 1 runs the interleaved schedule; SP is off at TP 1
    (Megatron turns it off, and says so); MoE runs EP 1 and expert TP = TP unless given
    (Megatron-Core)."""
    model, parallel = out.plan["model"], out.plan["parallel"]
    if parallel["vp"] > 1:
        parallel["schedule"] = "interleaved"
    if parallel["sequence_parallel"] and parallel["tp"] == 1:
        parallel["sequence_parallel"] = False
        out.assumed.append(f"{sp_key} with tensor parallelism 1: off, as {who} turns it off")
    if "num_moe_experts" in model:
        parallel.setdefault("ep", 1)
        parallel.setdefault("etp", parallel["tp"])


def one_value(args: dict, flag: str) -> str:
    """The one value of a flag that takes one (args: flag -> the words after it)."""
    v = args[flag]
    if len(v) != 1:
        raise PerfModelError(f"{flag} takes one value, got {len(v)} ({' '.join(v) or 'none'})")
    return v[0]


def int_value(args: dict, flag: str) -> int:
    """A flag's one value as a whole number, or one error naming the flag."""
    return int(_number(args, flag, int, "a whole number"))


def float_value(args: dict, flag: str) -> float:
    """A flag's one value as a number, or one error naming the flag."""
    return float(_number(args, flag, float, "a number"))


def _number(args: dict, flag: str, cast: type, words: str) -> float:
    v = one_value(args, flag)
    try:
        return cast(v)
    except ValueError:
        raise PerfModelError(f"{flag} {v}: not {words}") from None
