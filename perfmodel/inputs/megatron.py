"""Megatron-LM's language, both ways (issue 15, item 4): a launch command or argument file read into
a plan, and a configuration written out as Megatron-LM arguments.

Argument names and defaults are Megatron-LM's (megatron/training/arguments.py): biases on unless
--disable-bias-linear, embeddings tied unless --untie-embeddings-and-output-weights, dropout 0.1
unless --hidden-dropout/--attention-dropout 0, --num-query-groups read only with
--group-query-attention. The distributed launcher's --nproc_per_node and --nnodes give the GPU
count. Every argument read is one of three kinds: one that sets the plan (MODEL, PARALLEL, TRAINING
below), one that does not change the cost (NO_COST: named as ignored), and one whose cost perfmodel
cannot model (CANNOT: an error naming it). An argument of none of these is named as not recognized,
so the reader can judge it."""

from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass, field

from perfmodel.errors import PerfModelError

# flag -> (section, field, kind); kind: int, str, True/False (a switch that sets the field to that
# value)
MODEL = {
    "--num-layers": "num_layers",
    "--hidden-size": "hidden_size",
    "--num-attention-heads": "num_attention_heads",
    "--kv-channels": "kv_channels",
    "--ffn-hidden-size": "ffn_hidden_size",
    "--seq-length": "seq_length",
    "--vocab-size": "vocab_size",
    "--num-experts": "num_moe_experts",
    "--moe-router-topk": "moe_router_topk",
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
    "--moe-token-dispatcher-type": "moe_token_dispatcher_type",
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
    "--tp-comm-overlap": ("training", "tp_comm_overlap", True),
    "--fp8-param-gather": ("training", "fp8_param_gather", True),
    "--group-query-attention": None,
    "--multi-latent-attention": None,  # read with the flags they enable
}
OTHER_VALUES = (
    "--num-query-groups",
    "--normalization",
    "--position-embedding-type",
    "--hidden-dropout",
    "--attention-dropout",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--recompute-modules",
    "--fp8-format",
    "--attention-backend",
    "--num-layers-per-virtual-pipeline-stage",
    "--nproc_per_node",
    "--nproc-per-node",
    "--nnodes",
    "--transformer-impl",
)
NO_COST = re.compile(
    r"^--(lr.*|min-lr|train-(iters|samples)|eval-.*|save.*|load|log-.*|tensorboard.*|wandb-.*|data-path|split|"
    r"vocab-file|merge-file|tokenizer-.*|seed|weight-decay|clip-grad|adam-.*|init-method-std|master[_-]addr|"
    r"master[_-]port|node[_-]rank|exit-.*|distributed-backend|use-mcore-models|max-position-embeddings|"
    r"rampup-batch-size|ckpt-.*|dist-ckpt-.*|no-load-.*|finetune|override-opt_param-scheduler|mock-data|"
    r"use-checkpoint-args|timing-log-level|manual-gc.*|no-create-attention-mask-in-dataloader|"
    r"num-workers|rdzv.*|standalone|no-position-embedding|rotary-base|rotary-percent|"
    r"moe-router-load-balancing-type|moe-aux-loss-coeff|moe-z-loss-coeff|moe-router-dtype|no-load-optim|no-load-rng|"
    r"micro-batch-size-for-eval|profile.*|use-pytorch-profiler|empty-unused-memory-level|log_interval)$"
)
CANNOT = {
    "--encoder-num-layers": "encoder-decoder models (T5)",
    "--encoder-seq-length": "encoder-decoder models (T5)",
    "--hybrid-override-pattern": "hybrid Mamba layers",
    "--mtp-num-layers": "multi-token prediction layers",
    "--fp4-format": "FP4 training",
    "--cpu-offloading": "activation or weight offloading to the CPU",
    "--moe-expert-capacity-factor": "token dropping (it models dropless routing)",
    "--heterogeneous-layers-config-path": "heterogeneous layers",
    "--pipeline-model-parallel-layout": "a custom pipeline layout",
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


def tokens(text: str) -> list[str]:
    """The words of a launch script or argument file: comments and line continuations dropped,
    simple NAME=value variables substituted (``$X``, ``${X}``, ``$((A*B))``), bash array brackets
    removed.
    """
    env: dict[str, str] = {}
    lines = text.replace("\\\n", " ").splitlines()
    for ln in lines:
        m = re.match(r"^\s*(?:export\s+)?([A-Za-z_]\w*)=([^\s(][^\s]*)\s*(#.*)?$", ln)
        if m:
            env[m.group(1)] = _expand(m.group(2), env)
    words = []
    for ln in lines:
        if re.match(r"^\s*(?:export\s+)?[A-Za-z_]\w*=[^(]", ln):
            continue
        try:
            parts = shlex.split(_expand(ln, env), comments=True)
        except ValueError as e:
            raise PerfModelError(f"cannot read the line {ln.strip()[:60]!r}: {e}") from None
        words += [w for w in parts if not re.fullmatch(r"[A-Za-z_]\w*=\(|\)|\(", w)]
    return words


def _expand(s: str, env: dict[str, str]) -> str:
    def arith(m):
        expr = _expand(m.group(1), env)
        if not re.fullmatch(r"[\d\s*+\-/()]+", expr):
            return m.group(0)
        return str(int(_small_eval(expr)))

    s = re.sub(
        r"\$\{([A-Za-z_]\w*):-\"?([^}\"]*)\"?\}", lambda m: env.get(m.group(1), m.group(2)), s
    )
    s = re.sub(r"\$\(\((.*?)\)\)", arith, s)
    return re.sub(r"\$\{?([A-Za-z_]\w*)\}?(?!\[)", lambda m: env.get(m.group(1), m.group(0)), s)


def read_args(
    text: str, gpu: str, num_gpus: int | None = None, vocab_size: int | None = None
) -> Imported:
    """A plan mapping from Megatron-LM arguments; ``gpu`` names the GPU preset (Megatron does not
    say)."""
    words = tokens(text)
    args: dict[str, list[str]] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("--"):
            i += 1
            continue
        flag, _, inline = w.partition("=")
        vals = [inline] if inline else []
        i += 1
        while (
            not inline
            and i < len(words)
            and not words[i].startswith("--")
            and not _is_noise(words[i])
        ):
            vals.append(words[i])
            i += 1
        args[flag] = vals
    return _to_plan(args, gpu, num_gpus, vocab_size)


def _is_noise(w: str) -> bool:
    return (
        w.endswith(".py")
        or w in ("torchrun", "python", "python3", "-m")
        or "${" in w
        or w.startswith("$")
    )


def _one(args, flag) -> str:
    v = args[flag]
    if len(v) != 1:
        raise PerfModelError(f"{flag} takes one value, got {len(v)} ({' '.join(v) or 'none'})")
    return v[0]


def _int(args, flag) -> int:
    v = _one(args, flag)
    try:
        return int(v)
    except ValueError:
        raise PerfModelError(f"{flag} {v}: not a whole number") from None


def _to_plan(args: dict, gpu: str, num_gpus: int | None, vocab_size: int | None) -> Imported:
    cannot = [f"{f} ({CANNOT[f]})" for f in args if f in CANNOT]
    if cannot:
        raise PerfModelError(
            f"perfmodel cannot model {', '.join(cannot)}; remove the argument or plan without it"
        )
    # Megatron-LM's opt-in switches are off unless given (the megatron-core profile, NeMo's
    # defaults, has them on)
    off = {
        "overlap_grad_reduce": False,
        "overlap_param_gather": False,
        "tp_comm_overlap": False,
        "fp8_param_gather": False,
    }
    out = megatron_defaults("imported", gpu, off)
    model, system, training, parallel = (
        out.plan[k] for k in ("model", "system", "training", "parallel")
    )
    for flag in args:
        if flag == "--moe-layer-freq":
            model["moe_layer_freq"] = _layer_freq(_one(args, flag))
        elif flag in MODEL:
            model[MODEL[flag]] = _int(args, flag)
        elif flag in PARALLEL:
            parallel[PARALLEL[flag]] = (
                _one(args, flag) if flag == "--cp-comm-type" else _int(args, flag)
            )
        elif flag in TRAINING_VALUES:
            training[TRAINING_VALUES[flag]] = (
                _int(args, flag) if flag == "--global-batch-size" else _one(args, flag)
            )
        elif flag in SWITCHES:
            if args[flag]:
                raise PerfModelError(
                    f"{flag} is a switch and takes no value (got {' '.join(args[flag])})"
                )
            if SWITCHES[flag]:
                section, key, value = SWITCHES[flag]
                out.plan[section][key] = value
        elif flag in OTHER_VALUES:
            continue
        elif NO_COST.match(flag):
            out.ignored.append(flag)
        else:
            out.unrecognized.append(flag)
    _special(args, out)
    _system_and_vocab(args, out, num_gpus, vocab_size)
    if "--global-batch-size" not in args or "--micro-batch-size" not in args:
        raise PerfModelError("the arguments lack --global-batch-size or --micro-batch-size")
    return out


def _small_eval(expr: str):
    """A shell or Python expression of digits, brackets and + - * / (the callers check the
    characters), with the product of its numbers at most 10^8 and no powers, so that it cannot run
    long or build a huge list.
    """
    bound = math.prod(
        max(int(n), 1) for n in re.findall(r"\d+", expr)
    )  # above any value or length it yields
    if "**" in expr or bound > 10**8 or len(expr) > 2000:
        raise PerfModelError(f"{expr[:60]!r}: too large an expression to read")
    try:
        value = eval(
            expr, {"__builtins__": {}}
        )  # noqa: S307 - characters restricted by the callers
    except (SyntaxError, ZeroDivisionError, TypeError) as e:
        raise PerfModelError(f"{expr[:60]!r}: cannot evaluate ({e.__class__.__name__})") from None
    if isinstance(value, list) and len(value) > 100_000:
        raise PerfModelError(
            f"{expr[:60]!r}: a list of {len(value):,} entries; one per layer is expected"
        )
    return value


def _layer_freq(text: str) -> int | list[int]:
    """--moe-layer-freq: every k-th layer (an int) or a Python list expression such as
    ([0]*3+[1]*58)."""
    if text.strip().isdigit():
        return int(text)
    if not re.fullmatch(r"[\[\]\d\s*+,()]+", text):
        raise PerfModelError(
            f"--moe-layer-freq {text}: give an int or a list such as ([0]*3+[1]*58)"
        )
    value = _small_eval(text)
    if not isinstance(value, list) or any(x not in (0, 1) for x in value):
        raise PerfModelError(f"--moe-layer-freq {text}: the list must hold 0 and 1, one per layer")
    return value


def _special(args: dict, out: Imported) -> None:
    """The arguments whose meaning depends on others."""
    model, training, parallel = out.plan["model"], out.plan["training"], out.plan["parallel"]
    if "--num-query-groups" in args:
        if "--group-query-attention" in args:
            model["num_query_groups"] = _int(args, "--num-query-groups")
        else:
            out.ignored.append(
                "--num-query-groups (Megatron reads it only with --group-query-attention)"
            )
    if "--normalization" in args:
        norm = _one(args, "--normalization")
        if norm not in ("LayerNorm", "RMSNorm"):
            raise PerfModelError(f"--normalization {norm}: perfmodel models LayerNorm and RMSNorm")
        model["normalization"] = norm.lower()
    if "--position-embedding-type" in args:
        kind = _one(args, "--position-embedding-type")
        if kind not in ("learned_absolute", "rope", "none"):
            raise PerfModelError(
                f"--position-embedding-type {kind}: perfmodel models learned_absolute, rope and"
                " none"
            )
        model["position_embedding"] = "learned" if kind == "learned_absolute" else "rope"
    drops = [float(_one(args, f)) for f in ("--hidden-dropout", "--attention-dropout") if f in args]
    if drops and not any(drops):
        model["dropout"] = False
    if "--multi-latent-attention" not in args and any(
        k in model for k in ("q_lora_rank", "kv_lora_rank")
    ):
        raise PerfModelError(
            "--q-lora-rank/--kv-lora-rank without --multi-latent-attention: add it or drop them"
        )
    if "--fp8-format" in args:
        if _one(args, "--fp8-format") not in ("e4m3", "hybrid"):
            raise PerfModelError(
                f"--fp8-format {_one(args, '--fp8-format')}: perfmodel models e4m3 and hybrid"
            )
        training["dtype"] = "fp8"
    backend = _one(args, "--attention-backend") if "--attention-backend" in args else None
    if backend in ("unfused", "local"):
        training["flash_attention"] = False
    elif backend in ("flash", "fused", "auto"):
        training["flash_attention"] = True
    if "--transformer-impl" in args and _one(args, "--transformer-impl") == "local":
        out.assumed.append(
            "--transformer-impl local: modelled with the megatron-core profile's fused kernels"
        )
    _recompute(args, out)
    if "--num-layers-per-virtual-pipeline-stage" in args:
        per = _int(args, "--num-layers-per-virtual-pipeline-stage")
        layers, pp = model.get("num_layers"), parallel["pp"]
        if not layers or layers % (pp * per):
            raise PerfModelError(
                f"--num-layers-per-virtual-pipeline-stage {per} does not divide --num-layers "
                f"{layers} over {pp} stages"
            )
        parallel["vp"] = layers // (pp * per)
    megatron_rules(out, "--sequence-parallel", "Megatron-LM")
    if "dtype" not in training:
        training["dtype"] = "fp32"
        out.assumed.append("no --bf16/--fp16/--fp8-format: fp32, as Megatron-LM runs by default")


def _recompute(args: dict, out: Imported) -> None:
    parallel, training = out.plan["parallel"], out.plan["training"]
    if "--recompute-granularity" in args:
        g = _one(args, "--recompute-granularity")
        if g not in ("full", "selective"):
            raise PerfModelError(f"--recompute-granularity {g}: Megatron accepts full or selective")
        parallel["recompute"] = g
    if "--recompute-modules" in args:
        training["recompute_modules"] = args["--recompute-modules"]
    method = _one(args, "--recompute-method") if "--recompute-method" in args else None
    n = _int(args, "--recompute-num-layers") if "--recompute-num-layers" in args else None
    if method == "block" and n is not None:
        raise PerfModelError(
            "--recompute-method block with --recompute-num-layers: recomputing only some layers "
            "of each stage is not modelled; use --recompute-method uniform"
        )
    if method == "uniform" and n not in (None, 1):
        raise PerfModelError(
            f"--recompute-num-layers {n} with uniform: perfmodel models recomputing each layer "
            "(--recompute-num-layers 1)"
        )


def _system_and_vocab(
    args: dict, out: Imported, num_gpus: int | None, vocab_size: int | None
) -> None:
    system, model = out.plan["system"], out.plan["model"]
    per_node = next(
        (_int(args, f) for f in ("--nproc_per_node", "--nproc-per-node") if f in args), None
    )
    nodes = _int(args, "--nnodes") if "--nnodes" in args else None
    if per_node:
        system["gpus_per_node"] = per_node
    if num_gpus:
        system["num_gpus"] = num_gpus
    elif per_node and nodes:
        system["num_gpus"] = per_node * nodes
    else:
        raise PerfModelError(
            "the GPU count is not in the arguments (torchrun's --nproc_per_node and --nnodes); "
            "pass --gpus N"
        )
    if vocab_size:
        model["vocab_size"] = vocab_size
    elif "vocab_size" not in model:
        tok = _one(args, "--tokenizer-type") if "--tokenizer-type" in args else ""
        if tok == "GPT2BPETokenizer" or (
            not tok and "--vocab-file" in args and "--merge-file" in args
        ):
            model["vocab_size"] = 50257  # Radford et al. 2019: GPT-2's byte-pair vocabulary
            out.assumed.append(
                "vocabulary 50,257: GPT-2's BPE (--tokenizer-type GPT2BPETokenizer, or a "
                "--vocab-file with a --merge-file, which only that tokenizer takes)"
            )
        else:
            raise PerfModelError(
                "the vocabulary size is not in the arguments (it comes from the tokenizer); "
                "pass --vocab-size N"
            )


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
    a += [
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
    t = plan.training
    a.append("--attention-backend " + ("flash" if t.flash_attention else "unfused"))
    a += [
        f"--{k.replace('_', '-')}"
        for k in (
            "overlap_grad_reduce",
            "overlap_param_gather",
            "tp_comm_overlap",
            "fp8_param_gather",
        )
        if getattr(t, k)
    ]
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
