"""NeMo recipes into plans (issue 15, item 4): a NeMo 1 Megatron config (trainer + model sections,
as examples/nlp/language_modeling/conf/megatron_*_config.yaml) or a Megatron-Bridge / NeMo 2 config
dump (model + train + optimizer/ddp sections, Megatron-Core's TransformerConfig names).

As for Megatron-LM arguments (megatron.py), every key is accounted for: set into the plan, ignored
as having no effect on the cost, named as not recognized, or refused when it changes the cost in a
way perfmodel cannot model. A key whose value is null or false is the feature left off and costs
nothing."""

from __future__ import annotations

import re
from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron import read_fp8, read_offloading, read_recompute
from perfmodel.inputs.megatron_args import Imported, megatron_defaults, megatron_rules
from perfmodel.inputs.megatron_moe import NEMO_KEYS as MOE_KEYS
from perfmodel.inputs.megatron_moe import args_of_config, read_moe
from perfmodel.inputs.megatron_optimizer import read_optimizer
from perfmodel.inputs.megatron_profiles import read_sharding
from perfmodel.inputs.nemo_keys import (
    BOOL_KEYS,
    CANNOT,
    CHOICES,
    DDP_KEYS,
    FIRST_LAST_BF16,
    FLOAT_KEYS,
    INT_KEYS,
    MIXED_PRECISION,
    MODEL_KEYS,
    NO_COST,
    PARALLEL_KEYS,
    PRECISION_FIELDS,
    READ_ELSEWHERE,
    SECTIONS_NO_COST,
    STRATEGY_KEYS_NO_COST,
    TRAINER_KEYS_NO_COST,
    TRAINING_KEYS,
)

_TRUE = {"true", "yes", "on", "y", "1"}
_FALSE = {"false", "no", "off", "n", "0"}


def typed(key: str, value: Any, where: str) -> Any:
    """A recipe value as OmegaConf's typed nodes read it (BooleanNode, IntegerNode, FloatNode):
    "false", "Off" or 0 is false, "0.0" is 0.0; '???' is OmegaConf's mandatory value, left unset,
    which NeMo would stop on when it reads it."""
    if isinstance(value, str) and value.strip() == "???":
        raise PerfModelError(
            f"{where}.{key}: ??? is OmegaConf's mandatory value, left unset (NeMo stops on it):"
            " give the value"
        )
    if value is None:
        return None
    if key in BOOL_KEYS:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) or (
            isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE
        ):
            return str(value).strip().lower() in _TRUE if isinstance(value, str) else value != 0
        raise PerfModelError(f"{where}.{key}: {value!r} is not true or false")
    if key in INT_KEYS and not isinstance(value, bool):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        if not isinstance(value, int):
            raise PerfModelError(f"{where}.{key}: {value!r} is not a whole number")
    if key in FLOAT_KEYS and not isinstance(value, bool):
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            raise PerfModelError(f"{where}.{key}: {str(value)[:40]!r} is not a number") from None
        if number != number or abs(number) == float("inf"):
            raise PerfModelError(f"{where}.{key}: {value!r} is not a finite number")
        return number
    if key in CHOICES and value not in CHOICES[key]:
        raise PerfModelError(f"{where}.{key}: {value!r}; NeMo accepts {', '.join(CHOICES[key])}")
    return value


def read_recipe(
    data: Any, gpu: str, num_gpus: int | None = None, vocab_size: int | None = None
) -> Imported:
    """A plan mapping from a NeMo recipe (parsed YAML)."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise PerfModelError(
            "a NeMo recipe is a mapping with a 'model' section (NeMo 1 config or Megatron-Bridge "
            "config dump)"
        )
    model_cfg = data["model"]
    train = _section(data, "train")
    out = megatron_defaults(str(data.get("name") or "nemo"), gpu)
    model, parallel, training = out.plan["model"], out.plan["parallel"], out.plan["training"]

    def get(key):
        where = "model" if key in model_cfg else "train"
        return typed(key, _resolve(model_cfg.get(key, train.get(key)), model_cfg, key), where)

    for key, value in {**train, **model_cfg}.items():
        value = get(key)
        if key in CANNOT and value not in (None, False, 0):
            raise PerfModelError(
                f"model.{key}: {value!r} turns on {CANNOT[key]}, which perfmodel cannot model; "
                "set it to null or plan without it"
            )
        if value is None:
            continue
        if key in MODEL_KEYS:
            model[MODEL_KEYS[key]] = value
        elif key in PARALLEL_KEYS:
            parallel[PARALLEL_KEYS[key]] = value
        elif key in TRAINING_KEYS:
            training[TRAINING_KEYS[key]] = value
        elif key in READ_ELSEWHERE or key in MOE_KEYS:
            continue
        elif key in NO_COST or key in (
            "train_iters",
            "eval_iters",
            "eval_interval",
            "exit_interval",
            "manual_gc",
            "manual_gc_interval",
            "rampup_batch_size",
        ):
            out.ignored.append(f"model.{key}" if key in model_cfg else f"train.{key}")
        else:
            out.unrecognized.append(f"model.{key}" if key in model_cfg else f"train.{key}")
    _architecture(get, model)
    read_moe(args_of_config({k: get(k) for k in MOE_KEYS if k in model_cfg or k in train}), out)
    _recompute(get, parallel)
    _precision_and_optimizer(data, get, out)
    _as_megatron_reads(data, get, out)
    megatron_rules(out, "sequence_parallel", "Megatron")
    _strategy(data, out)
    _system(data, out, num_gpus)
    if vocab_size:
        model["vocab_size"] = vocab_size
    elif "vocab_size" not in model:
        raise PerfModelError(
            "the vocabulary size is not in the recipe (it comes from the tokenizer); "
            "pass --vocab-size N"
        )
    _sections(data, out)
    return out


def _sections(data: dict, out: Imported) -> None:
    """Every section accounted for: the ones read, the ones known to have no effect on the cost
    (ignored), and the rest (not recognized: an unknown section may well change the cost)."""
    read = ("model", "train", "trainer", "name", "optimizer", "ddp", "mixed_precision")
    for section in data:
        if section in read or data[section] is None:
            continue
        label = f"{section}.*" if isinstance(data[section], dict) else section
        (out.ignored if section in SECTIONS_NO_COST else out.unrecognized).append(label)
    for key in _section(data, "ddp"):
        if key not in DDP_KEYS:
            out.unrecognized.append(f"ddp.{key}")
    for key in _section(data, "trainer"):
        if key not in ("devices", "num_nodes", "precision", "strategy", *TRAINER_KEYS_NO_COST):
            out.unrecognized.append(f"trainer.{key}")


def _strategy(data: dict, out: Imported) -> None:
    """NeMo 2's MegatronStrategy holds the parallel layout: trainer.strategy.tensor_model_
    parallel_size and the rest, read as the model section's keys are."""
    strategy = _section(_section(data, "trainer"), "strategy")
    for key, value in strategy.items():
        value = typed(key, value, "trainer.strategy")
        if key in PARALLEL_KEYS:
            if value is not None:
                out.plan["parallel"][PARALLEL_KEYS[key]] = value
        elif key not in STRATEGY_KEYS_NO_COST:
            out.unrecognized.append(f"trainer.strategy.{key}")


def _section(data: dict[str, Any], key: str) -> dict[str, Any]:
    """A recipe's sub-mapping, or an empty one where the recipe has none (or not a mapping)."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def _resolve(value, section: dict, key: str):
    """OmegaConf's ${.key} and ${model.key} interpolations, one level deep ('???', mandatory and
    unset, is left for `typed` to refuse)."""
    if isinstance(value, str):
        m = re.fullmatch(r"\$\{(?:model)?\.?([A-Za-z_]\w*)\}", value.strip())
        if m and m.group(1) != key:
            return section.get(m.group(1))
    return value


def _architecture(get, model: dict) -> None:
    norm = get("normalization")
    if norm is not None:
        if str(norm).lower() not in ("layernorm", "rmsnorm"):
            raise PerfModelError(
                f"model.normalization: {norm!r}; perfmodel models layernorm and rmsnorm"
            )
        model["normalization"] = str(norm).lower()
    bias = get("bias") if get("bias") is not None else get("add_bias_linear")  # typed by get
    if bias is not None:
        model["add_bias_linear"] = bool(bias)
    act = str(get("activation") or get("activation_func") or "gelu").lower().removeprefix("fast-")
    gated = get("gated_linear_unit")
    kinds = {
        "gelu": "gelu",
        "swiglu": "swiglu",
        "geglu": "geglu",
        "squared-relu": "squared-relu",
        "silu": "swiglu",
    }
    if act not in kinds:
        raise PerfModelError(
            f"model.activation: {act!r}; perfmodel models gelu, swiglu, geglu and squared-relu"
        )
    model["mlp"] = kinds[act] if act != "gelu" or not gated else "geglu"
    if act == "silu" and gated is False:
        raise PerfModelError(
            "model.activation_func silu without gated_linear_unit: an ungated SiLU MLP is not"
            " modelled"
        )
    pos = get("position_embedding_type")
    if pos is not None:
        if pos not in ("learned_absolute", "rope", "none"):
            raise PerfModelError(
                f"model.position_embedding_type: {pos!r}; perfmodel models learned_absolute and"
                " rope"
            )
        model["position_embedding"] = {"learned_absolute": "learned"}.get(pos, pos)
    tied = get("share_embeddings_and_output_weights")
    if tied is not None:
        model["tied_embeddings"] = bool(tied)
    drops = [
        get(k) for k in ("hidden_dropout", "attention_dropout", "ffn_dropout") if get(k) is not None
    ]
    if drops and not any(drops):
        model["dropout"] = False


def _recompute(get, parallel: dict) -> None:
    gran = get("activations_checkpoint_granularity") or get("recompute_granularity")
    method = get("activations_checkpoint_method") or get("recompute_method")
    n = get("activations_checkpoint_num_layers") or get("recompute_num_layers")
    if gran:
        if gran not in ("full", "selective"):
            raise PerfModelError(
                f"model.activations_checkpoint_granularity: {gran!r}; full or selective"
            )
        parallel["recompute"] = gran
    if gran == "full" and (method == "block" or (method == "uniform" and n not in (None, 1))):
        raise PerfModelError(
            f"recompute method {method} with {n} layers: only recomputing every layer "
            "(uniform, 1) is modelled"
        )


def _precision_and_optimizer(data: dict, get, out: Imported) -> None:
    training, parallel = out.plan["training"], out.plan["parallel"]
    fields = _precision(data, get, out)
    training["dtype"] = (
        "bf16" if fields.get("bf16") else "fp16" if fields.get("fp16") else fields["base"]
    )
    if training["dtype"] == "fp32":
        out.assumed.append(f"precision {fields['name'] or 'unset'}: fp32")
    # FP8 as Megatron-LM's arguments read it (--fp8-format, --fp8-recipe), one reader for both
    args = {
        flag: [str(fields[key])]
        for flag, key in (("--fp8-format", "fp8"), ("--fp8-recipe", "fp8_recipe"))
        if fields.get(key)
    }
    ignored: list[str] = []
    read_fp8(args, training, ignored)
    if ignored and fields["where"] == "model":
        out.ignored.append("model.fp8_recipe (read only with fp8 set; FP8 is off)")
    if fields.get("fp4"):
        # Transformer Engine's NVFP4BlockScaling (fp4 e2m1, fp4_recipe nvfp4)
        training["dtype"] = "nvfp4"
    if fields.get("fp8_param_gather") and training["dtype"] in ("fp8", "mxfp8"):
        training["fp8_param_gather"] = True
    _optimizer(data, out)
    optim = get("optim")
    name = optim.get("name") if isinstance(optim, dict) else None
    ddp = _section(data, "ddp")
    opt = _section(data, "optimizer")
    if (
        name == "distributed_fused_adam"
        or ddp.get("use_distributed_optimizer")
        or opt.get("use_distributed_optimizer")
    ):
        parallel["zero_stage"] = 1
    for key in ("overlap_grad_reduce", "overlap_param_gather"):
        value = typed(key, ddp.get(key), "ddp")
        if value is not None:
            training[key] = value


# recipe keys (section, key) that Megatron-LM's readers take as these launch arguments
# (Megatron-Core's TransformerConfig, OptimizerConfig and DistributedDataParallelConfig fields)
AS_ARGUMENTS = {
    ("model", "recompute_modules"): "--recompute-modules",
    ("model", "cpu_offloading"): "--cpu-offloading",
    ("model", "cpu_offloading_num_layers"): "--cpu-offloading-num-layers",
    ("optimizer", "use_precision_aware_optimizer"): "--use-precision-aware-optimizer",
    ("optimizer", "exp_avg_dtype"): "--exp-avg-dtype",
    ("optimizer", "exp_avg_sq_dtype"): "--exp-avg-sq-dtype",
    ("optimizer", "main_params_dtype"): "--main-params-dtype",
    ("optimizer", "main_grads_dtype"): "--main-grads-dtype",
    ("ddp", "use_megatron_fsdp"): "--use-megatron-fsdp",
    ("ddp", "data_parallel_sharding_strategy"): "--data-parallel-sharding-strategy",
}
SWITCH_KEYS = ("cpu_offloading", "use_precision_aware_optimizer", "use_megatron_fsdp")
# OptimizerConfig's dtypes as a dump writes them (torch.dtype), in Megatron-LM's names
TORCH_DTYPES = {
    "torch.float32": "fp32",
    "torch.float": "fp32",
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.half": "fp16",
    "torch.uint8": "fp8",
}


def _as_megatron_reads(data: dict, get, out: Imported) -> None:
    """Recompute modules, activation offloading, the precision-aware optimizer and Megatron-FSDP
    through Megatron-LM's own readers: the recipe's keys as the arguments they are, and every
    message naming the recipe's key, not the argument."""
    args: dict[str, list[str]] = {}
    names = {flag: f"{section}.{key}" for (section, key), flag in AS_ARGUMENTS.items()}
    for (section, key), flag in AS_ARGUMENTS.items():
        value = get(key) if section == "model" else _section(data, section).get(key)
        if section != "model":
            value = typed(key, value, section)
        if value is None:
            continue
        if key in SWITCH_KEYS:
            if value:
                args[flag] = []
            elif key == "cpu_offloading":
                out.ignored.append("model.cpu_offloading")
            continue
        values = value if isinstance(value, list) else [value]
        args[flag] = [TORCH_DTYPES.get(str(v), str(v)) for v in values]
    before = {k: len(getattr(out, k)) for k in ("ignored", "assumed")}
    try:
        read_recompute(args, out)
        read_offloading(args, out)
        read_optimizer(args, out)
        if "--use-megatron-fsdp" in args or "--data-parallel-sharding-strategy" in args:
            read_sharding(args, out.plan["parallel"], out.ignored, out.assumed)
    except PerfModelError as e:
        raise PerfModelError(_in_recipe_words(str(e), names)) from None
    for kind, n in before.items():
        notes = getattr(out, kind)
        notes[n:] = [_in_recipe_words(x, names) for x in notes[n:]]


def _in_recipe_words(text: str, names: dict[str, str]) -> str:
    for flag in sorted(names, key=len, reverse=True):
        text = text.replace(flag, names[flag])
    return text


def _fp8_format(value: Any, where: str) -> str | None:
    """Megatron-Core's fp8: a format string (e4m3, hybrid) or None; NeMo 1's fp8: a bool (its
    format then fp8_e4m3 / fp8_hybrid, hybrid by default; alike in cost)."""
    if value is None or value is False:
        return None
    text = str(value).strip().lower()
    if value is True or text in _TRUE:
        return "hybrid"
    if text in _FALSE or text in ("null", "none", ""):
        return None
    if text in ("e4m3", "hybrid"):
        return text
    raise PerfModelError(
        f"{where}.fp8: {value!r}; Megatron-Core takes e4m3 or hybrid (NeMo 1: true or false)"
    )


def _precision(data: dict, get, out: Imported) -> dict[str, Any]:
    """The precision fields the recipe sets: the model section's (bf16, fp16, fp8, fp8_recipe),
    then Megatron-Bridge's mixed_precision over them, a recipe name (MIXED_PRECISION) or a mapping
    (Bridge applies it over the model config: update_config_with_precision_overrides); the base
    dtype else from NeMo 1's trainer.precision (bf16-mixed, 16-mixed, 32)."""
    trainer = str(_section(data, "trainer").get("precision", "") or "").lower()
    fields: dict[str, Any] = {"where": "model", "name": trainer}
    fields["base"] = (
        "bf16"
        if "bf16" in trainer
        else "fp16" if trainer.startswith("16") or "fp16" in trainer else "fp32"
    )
    fields.update(bf16=get("bf16"), fp16=get("fp16"), fp8=_fp8_format(get("fp8"), "model"))
    fields["fp8_recipe"] = get("fp8_recipe")
    mixed = data.get("mixed_precision")
    given: dict[str, Any] = {}
    if isinstance(mixed, str) and mixed.strip():
        name = mixed.strip().replace("-", "_")
        if name not in MIXED_PRECISION:
            raise PerfModelError(
                f"mixed_precision: {mixed!r} is not a Megatron-Bridge recipe perfmodel knows;"
                f" it knows {', '.join(MIXED_PRECISION)}"
            )
        given = dict(MIXED_PRECISION[name])
        if name in FIRST_LAST_BF16:
            out.assumed.append(
                f"mixed_precision {name}: its first and last layers in BF16 costed as the rest"
            )
        fields["name"] = name
    elif isinstance(mixed, dict):
        given = {k: mixed[k] for k in PRECISION_FIELDS if k in mixed}
        for key in ("bf16", "fp16", "fp8_param_gather"):
            if key in given:
                given[key] = typed(key, given[key], "mixed_precision")
        if "fp8" in given:
            given["fp8"] = _fp8_format(given["fp8"], "mixed_precision")
        fields["name"] = "mixed_precision"
    if given:
        if fields["fp8"] and not given.get("fp8", fields["fp8"]):
            out.assumed.append(
                f"model.fp8 {fields['fp8']} is off under mixed_precision {fields['name']}, which"
                " Megatron-Bridge applies over the model config"
            )
        fields.update(given, where="mixed_precision")
    return fields


def _optimizer(data: dict, out: Imported) -> None:
    """Megatron-Bridge's optimizer.optimizer: adam or sgd (Megatron-Core OptimizerConfig)."""
    name = _section(data, "optimizer").get("optimizer")
    if name is None:
        return
    if name not in ("adam", "sgd"):
        raise PerfModelError(f"optimizer.optimizer: {name!r}; Megatron-Core offers adam and sgd")
    out.plan["training"]["optimizer"] = name


def _system(data: dict, out: Imported, num_gpus: int | None) -> None:
    trainer = _section(data, "trainer")
    devices, nodes = trainer.get("devices"), trainer.get("num_nodes")
    for key, value in (("devices", devices), ("num_nodes", nodes)):
        if isinstance(value, bool):
            raise PerfModelError(f"trainer.{key}: {value!r} is not a count; give a whole number")
    system = out.plan["system"]
    if isinstance(devices, int) and devices > 0:
        system["gpus_per_node"] = devices
    if num_gpus:
        system["num_gpus"] = num_gpus
    elif isinstance(devices, int) and isinstance(nodes, int) and devices > 0 and nodes > 0:
        system["num_gpus"] = devices * nodes
    else:
        raise PerfModelError(
            "the GPU count is not in the recipe (trainer.devices x trainer.num_nodes); pass"
            " --gpus N"
        )
