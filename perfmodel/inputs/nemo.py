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
from perfmodel.inputs.megatron_args import Imported, megatron_defaults, megatron_rules
from perfmodel.inputs.megatron_moe import NEMO_KEYS as MOE_KEYS
from perfmodel.inputs.megatron_moe import args_of_config, read_moe
from perfmodel.inputs.megatron_training import read_fp8
from perfmodel.inputs.nemo_keys import (
    CANNOT,
    DDP_KEYS,
    MODEL_KEYS,
    NO_COST,
    PARALLEL_KEYS,
    READ_ELSEWHERE,
    SECTIONS_NO_COST,
    STRATEGY_KEYS_NO_COST,
    TRAINER_KEYS_NO_COST,
    TRAINING_KEYS,
    typed,
)
from perfmodel.inputs.nemo_keys import section as _section
from perfmodel.inputs.nemo_precision import as_megatron_reads, precision_fields, read_cp_comm_key


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
    as_megatron_reads(data, get, out)
    megatron_rules(out, "sequence_parallel", "Megatron")
    _strategy(data, out)
    read_cp_comm_key(get, out)
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
        if pos not in ("learned_absolute", "rope", "yarn", "none"):
            raise PerfModelError(
                f"model.position_embedding_type: {pos!r}; perfmodel models learned_absolute, rope,"
                " yarn and none"
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
    fields = precision_fields(data, get, out)
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
    # the plan's precision errors in the recipe's words (load.plan_of)
    said = (
        f"mixed_precision {fields['name']}"
        if fields["where"] == "mixed_precision" and fields["name"] != "mixed_precision"
        else fields["where"]
    )
    recipe, dtype = fields.get("fp8_recipe"), training["dtype"]
    out.words[f"training.fp8_recipe {recipe}"] = f"{said} (fp8_recipe {recipe})"
    out.words[f"training.dtype {dtype}"] = f"{said} ({dtype})"
    out.words["use dtype mxfp8"] = "use mixed_precision bf16_with_mxfp8_mixed"
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
    if name == "distributed_fused_adam" and get("megatron_amp_O2"):
        _apex_adam(optim, training, bool(get("fp8_params")))
    for key in ("overlap_grad_reduce", "overlap_param_gather"):
        value = typed(key, ddp.get(key), "ddp")
        if value is not None:
            training[key] = value


APEX_DTYPES = {"fp32": "fp32", "float32": "fp32", "32": "fp32", "bf16": "bf16", "bfloat16": "bf16"}


def _apex_adam(optim: dict, training: dict, fp8_params: bool) -> None:
    """NeMo 1.x's distributed_fused_adam over bf16 (O2) weights, as
    MegatronBaseModel.setup_optimization builds apex's DistributedFusedAdam (NeMo v2.0.0rc0): its
    moments in optim.dtype (fp32 unless set); no master copy where that is the weights' bf16, the
    fp32 master's 16 low bits (store_param_remainders) where it is fp32; the contiguous gradient
    buffer in optim.grad_sync_dtype (apex: optim.dtype unless set). With model.fp8_params the
    optimizer keeps a full master copy."""
    dtype = APEX_DTYPES.get(str(optim.get("dtype", "fp32")).lower())
    sync = APEX_DTYPES.get(str(optim.get("grad_sync_dtype", dtype)).lower())
    if dtype is None or sync is None:
        raise PerfModelError(
            f"optim.dtype {optim.get('dtype')!r}, grad_sync_dtype {optim.get('grad_sync_dtype')!r}:"
            " distributed_fused_adam is modelled with fp32 or bf16"
        )
    if dtype == "bf16":
        training.update(exp_avg_dtype="bf16", exp_avg_sq_dtype="bf16", main_params_dtype="none")
    elif not fp8_params:
        training["main_params_dtype"] = "remainders"
    training["grad_accum_fp32"] = sync == "fp32"


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
