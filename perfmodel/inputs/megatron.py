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

from perfmodel.errors import PerfModelError
from perfmodel.inputs import megatron_moe, megatron_optimizer
from perfmodel.inputs import primus_zb as zb
from perfmodel.inputs.megatron_args import (
    CANNOT,
    MODEL,
    NO_COST,
    OTHER_VALUES,
    PARALLEL,
    SWITCHES,
    TRAINING_VALUES,
    Imported,
    float_value,
    int_value,
    megatron_defaults,
    megatron_rules,
    one_value,
)
from perfmodel.inputs.megatron_layout import FLAG as LAYOUT
from perfmodel.inputs.megatron_layout import first_last, read_layout
from perfmodel.inputs.megatron_profiles import (
    count_of,
    domain_of,
    framework_of,
    read_cp_comm,
    read_sharding,
)
from perfmodel.inputs.megatron_training import read_fp8, read_offloading, read_recompute
from perfmodel.inputs.shell import Command, Reader

LAUNCHERS = ("torchrun", "python", "python3", "deepspeed", "srun", "mpirun", "accelerate")


def tokens(text: str) -> list[str]:
    """The words Megatron-LM's argument parser sees: the script read as bash reads it
    (perfmodel/inputs/shell.py), then the launch command's words; an argument file without a
    launcher gives all its words. Two launch commands are two runs: an error naming their lines."""
    commands = Reader(text).commands()

    def launches(c: Command) -> bool:
        return any(w.rsplit("/", 1)[-1] in LAUNCHERS or w.endswith(".py") for w in c.words) and any(
            w.startswith("--") for w in c.words
        )

    runs = [c for c in commands if launches(c)]
    if len(runs) > 1:
        lines = ", ".join(str(c.line) for c in runs)
        raise PerfModelError(
            f"{len(runs)} launch commands (lines {lines}): each is a run of its own; keep the one"
            " to plan in the file (or import each from a file of its own)"
        )
    if runs:
        return runs[0].words
    return [w for c in commands for w in c.words]


def read_args(
    text: str, gpu: str, num_gpus: int | None = None, vocab_size: int | None = None
) -> Imported:
    """A plan mapping from Megatron-LM arguments; ``gpu`` names the GPU preset (Megatron does not
    say)."""
    words = tokens(text)
    args: dict[str, list[str]] = {}
    given_twice: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        if not w.startswith("--"):
            i += 1
            continue
        flag, _, inline = w.partition("=")
        if flag in args:
            given_twice.append(flag)
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
    launcher = {"--nproc_per_node", "--nproc-per-node", "--nnodes"} & args.keys()
    if num_gpus is None and not launcher:  # `plan --emit megatron`'s comment line, if any
        num_gpus = count_of(text, "num_gpus")
    out = _to_plan(args, gpu, num_gpus, vocab_size)
    if not launcher and count_of(text, "gpus_per_node"):
        out.plan["system"]["gpus_per_node"] = count_of(text, "gpus_per_node")
    out.plan["training"]["framework"] = framework_of(text, args)
    if domain_of(text):
        out.plan["system"]["nvlink_domain"] = domain_of(text)
    for flag in dict.fromkeys(given_twice):
        out.assumed.append(
            f"{flag} is given more than once: the last ({' '.join(args[flag])}) counts, as"
            " Megatron-LM's argparse takes it"
        )
    return out


def _is_noise(w: str) -> bool:
    return (
        w.endswith(".py")
        or w in ("torchrun", "python", "python3", "-m")
        or "${" in w
        or w.startswith("$")
    )


def _to_plan(args: dict, gpu: str, num_gpus: int | None, vocab_size: int | None) -> Imported:
    cannot = [f"{f} ({CANNOT[f]})" for f in args if f in CANNOT]
    if cannot:
        raise PerfModelError(
            f"perfmodel cannot model {', '.join(cannot)}; remove the argument or plan without it"
        )
    # Megatron-LM's opt-in switches are off unless given (the megatron-core profile, NeMo's
    # defaults, has them on)
    _contradictions(args)
    off = {
        "overlap_grad_reduce": False,
        "overlap_param_gather": False,
        "tp_comm_overlap": True,  # the asynchronous TP all-reduce is on unless turned off
        "tp_comm_overlap_ub": False,
        "fp8_param_gather": False,
    }
    out = megatron_defaults("imported", gpu, off)
    model, training, parallel = (out.plan[k] for k in ("model", "training", "parallel"))
    for flag in args:
        if flag == "--moe-layer-freq":
            model["moe_layer_freq"] = _layer_freq(one_value(args, flag))
        elif flag in MODEL:
            model[MODEL[flag]] = int_value(args, flag)
        elif flag in PARALLEL:
            if flag != "--cp-comm-type":  # megatron_profiles.read_cp_comm
                parallel[PARALLEL[flag]] = int_value(args, flag)
        elif flag in TRAINING_VALUES:
            training[TRAINING_VALUES[flag]] = (
                int_value(args, flag) if flag == "--global-batch-size" else one_value(args, flag)
            )
        elif flag in SWITCHES:
            if args[flag]:
                raise PerfModelError(
                    f"{flag} is a switch and takes no value (got {' '.join(args[flag])})"
                )
            switch = SWITCHES[flag]
            if switch:
                section, key, value = switch
                out.plan[section][key] = value
        elif flag in (*OTHER_VALUES, *megatron_moe.FLAGS, *megatron_optimizer.FLAGS, *zb.FLAGS):
            continue
        elif NO_COST.match(flag):
            out.ignored.append(flag)
        else:
            out.unrecognized.append(flag)
    _special(args, out)
    zb.read_schedule(args, parallel, out.assumed)  # Primus's zero-bubble keys, after vp's rule
    megatron_moe.read_moe(args, out)
    megatron_optimizer.read_optimizer(args, out)
    megatron_optimizer.read_offload(args, out)
    _system_and_vocab(args, out, num_gpus, vocab_size)
    megatron_optimizer.read_instances(args, out)
    if "--global-batch-size" not in args or "--micro-batch-size" not in args:
        raise PerfModelError("the arguments lack --global-batch-size or --micro-batch-size")
    return out


def _small_eval(expr: str):
    """A shell or Python expression of digits, brackets and + - * / (the callers check the
    characters), with the product of its numbers at most 10^8 and no powers, so that it cannot run
    long or build a huge list.
    """
    # above any value or length it yields
    bound = math.prod(max(int(n), 1) for n in re.findall(r"\d+", expr))
    if "**" in expr or bound > 10**8 or len(expr) > 2000:
        raise PerfModelError(f"{expr[:60]!r}: too large an expression to read")
    try:
        value = eval(expr, {"__builtins__": {}})
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


# (flags, why): arguments Megatron-LM refuses together (megatron/training/arguments.py,
# validate_args), or that name two values of one setting
CONTRADICTIONS = (
    (("--bf16", "--fp16"), "Megatron-LM refuses --fp16 with --bf16: pick one"),
    (("--swiglu", "--squared-relu"), "they are two MLP activations: pick one"),
    (
        ("--num-layers-per-virtual-pipeline-stage", "--num-virtual-stages-per-pipeline-rank"),
        "Megatron-LM takes one of them: give the virtual stages one way",
    ),
)
CHOICES = {  # argparse choices of Megatron-LM (arguments.py; AttnBackend)
    "--attention-backend": ("flash", "fused", "unfused", "local", "auto"),
    "--recompute-method": ("uniform", "block"),
    "--data-parallel-sharding-strategy": ("no_shard", "optim", "optim_grads", "optim_grads_params"),
}


def _contradictions(args: dict) -> None:
    for flags, why in CONTRADICTIONS:
        if all(f in args for f in flags):
            raise PerfModelError(f"{' and '.join(flags)} together: {why}")
    for flag, choices in CHOICES.items():
        if flag in args and one_value(args, flag) not in choices:
            raise PerfModelError(
                f"{flag} {one_value(args, flag)}: Megatron-LM accepts {', '.join(choices)}"
            )


def _special(args: dict, out: Imported) -> None:
    """The arguments whose meaning depends on others."""
    model, training, parallel = out.plan["model"], out.plan["training"], out.plan["parallel"]
    if "--group-query-attention" in args and "--num-query-groups" not in args:
        model["num_query_groups"] = 1  # Megatron-LM's default for --num-query-groups
        out.assumed.append(
            "--group-query-attention without --num-query-groups: 1 group, its default"
        )
    if "--num-query-groups" in args:
        if "--group-query-attention" in args:
            model["num_query_groups"] = int_value(args, "--num-query-groups")
        else:
            out.ignored.append(
                "--num-query-groups (Megatron reads it only with --group-query-attention)"
            )
    if "--normalization" in args:
        norm = one_value(args, "--normalization")
        if norm not in ("LayerNorm", "RMSNorm"):
            raise PerfModelError(f"--normalization {norm}: perfmodel models LayerNorm and RMSNorm")
        model["normalization"] = norm.lower()
    if "--position-embedding-type" in args:
        kind = one_value(args, "--position-embedding-type")
        if kind not in ("learned_absolute", "rope", "yarn", "none"):
            raise PerfModelError(
                f"--position-embedding-type {kind}: perfmodel models learned_absolute, rope, yarn"
                " and none"
            )
        model["position_embedding"] = {"learned_absolute": "learned"}.get(kind, kind)
    _rope_numbers(args, model)
    drops = [float_value(args, f) for f in ("--hidden-dropout", "--attention-dropout") if f in args]
    if drops and not any(drops):
        model["dropout"] = False
    if "--multi-latent-attention" in args and "kv_lora_rank" not in model:
        raise PerfModelError(
            "--multi-latent-attention without --kv-lora-rank: give the latent attention's shape"
            " (--kv-lora-rank, --q-lora-rank, --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim)"
        )
    if "--multi-latent-attention" not in args and any(
        k in model for k in ("q_lora_rank", "kv_lora_rank")
    ):
        raise PerfModelError(
            "--q-lora-rank/--kv-lora-rank without --multi-latent-attention: add it or drop them"
        )
    read_fp8(args, training, out.ignored, out.words)
    backend = one_value(args, "--attention-backend") if "--attention-backend" in args else None
    if backend in ("unfused", "local"):
        training["flash_attention"] = False
    elif backend in ("flash", "fused", "auto"):
        training["flash_attention"] = True
    if "--transformer-impl" in args and one_value(args, "--transformer-impl") == "local":
        out.assumed.append(
            "--transformer-impl local: modelled with the megatron-core profile's fused kernels"
        )
    read_recompute(args, out)
    read_offloading(args, out)
    read_sharding(args, parallel, out.ignored, out.assumed)
    read_cp_comm(args, parallel, out.assumed)
    if "--num-layers-per-virtual-pipeline-stage" in args:
        per = int_value(args, "--num-layers-per-virtual-pipeline-stage")
        if per < 1:
            raise PerfModelError(
                f"--num-layers-per-virtual-pipeline-stage {per}: give at least 1 layer per chunk"
            )
        layers, pp = model.get("num_layers"), parallel["pp"]
        if not layers or layers % (pp * per):
            raise PerfModelError(
                f"--num-layers-per-virtual-pipeline-stage {per} does not divide --num-layers "
                f"{layers} over {pp} stages"
            )
        parallel["vp"] = layers // (pp * per)
    if LAYOUT in args:
        _layout(args, model, parallel)
    megatron_rules(out, "--sequence-parallel", "Megatron-LM")
    if "dtype" not in training:
        training["dtype"] = "fp32"
        out.assumed.append("no --bf16/--fp16/--fp8-format: fp32, as Megatron-LM runs by default")


def _rope_numbers(args: dict, model: dict) -> None:
    """--rotary-base and Llama 3.1's --use-rope-scaling (--rope-scaling-factor, default 8.0:
    Megatron-LM arguments.py), kept on the model for `plan --emit megatron`; no cost."""
    if "--rotary-base" in args:
        model["rotary_base"] = float_value(args, "--rotary-base")
    if "--use-rope-scaling" in args:
        scaling = "--rope-scaling-factor" in args
        model["rope_scaling_factor"] = (
            float_value(args, "--rope-scaling-factor") if scaling else 8.0
        )


def _layout(args: dict, model: dict, parallel: dict) -> None:
    """--pipeline-model-parallel-layout as the first and last stage layers it gives."""
    given = [
        f
        for f in ("--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers")
        if f in args
    ]
    if given:
        raise PerfModelError(f"{LAYOUT} and {given[0]} together: Megatron-LM takes one of them")
    layers = read_layout(
        one_value(args, LAYOUT),
        parallel["pp"],
        parallel.get("vp", 1),
        int(model.get("mtp_num_layers") or 0),
    )
    if sum(layers) != model.get("num_layers"):
        raise PerfModelError(
            f"{LAYOUT} places {sum(layers)} layers; --num-layers is {model.get('num_layers')}"
        )
    if len(set(layers)) > 1:
        first, last = first_last(layers)
        parallel["decoder_first_pipeline_num_layers"] = first
        parallel["decoder_last_pipeline_num_layers"] = last


def _system_and_vocab(
    args: dict, out: Imported, num_gpus: int | None, vocab_size: int | None
) -> None:
    system, model = out.plan["system"], out.plan["model"]
    per_node = next(
        (int_value(args, f) for f in ("--nproc_per_node", "--nproc-per-node") if f in args), None
    )
    nodes = int_value(args, "--nnodes") if "--nnodes" in args else None
    if per_node:
        system["gpus_per_node"] = per_node
    if num_gpus:
        system["num_gpus"] = num_gpus
        if per_node and nodes and per_node * nodes != num_gpus:
            out.assumed.append(
                f"--gpus {num_gpus} replaces the file's {per_node} x {nodes} = {per_node * nodes}"
                " GPUs (--nproc_per_node x --nnodes)"
            )
    elif per_node and nodes:
        system["num_gpus"] = per_node * nodes
    else:
        raise PerfModelError(
            "the GPU count is not in the arguments (torchrun's --nproc_per_node and --nnodes); "
            "pass --gpus N"
        )
    if vocab_size:
        if model.get("vocab_size") not in (None, vocab_size):
            out.assumed.append(
                f"--vocab-size {vocab_size} replaces the file's --vocab-size {model['vocab_size']}"
            )
        model["vocab_size"] = vocab_size
    elif "vocab_size" not in model:
        tok = one_value(args, "--tokenizer-type") if "--tokenizer-type" in args else ""
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
