"""A NeMo / Megatron-Bridge recipe's precision (trainer.precision, the model's bf16/fp16/fp8,
Bridge's named mixed_precision recipes) and the keys Megatron-LM's own readers take as the launch
arguments they are (recompute modules, offloading, the precision-aware optimizer, Megatron-FSDP)."""

from __future__ import annotations

from typing import Any

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron_args import Imported
from perfmodel.inputs.megatron_optimizer import read_optimizer
from perfmodel.inputs.megatron_profiles import read_cp_comm, read_sharding
from perfmodel.inputs.megatron_training import read_offloading, read_recompute
from perfmodel.inputs.nemo_keys import (
    FALSE_WORDS,
    FIRST_LAST_BF16,
    MIXED_PRECISION,
    PRECISION_FIELDS,
    TRUE_WORDS,
    typed,
)
from perfmodel.inputs.nemo_keys import section as _section

# recipe keys (section, key) that Megatron-LM's readers take as these launch arguments
# (Megatron-Core's TransformerConfig, OptimizerConfig and DistributedDataParallelConfig fields)
AS_ARGUMENTS = {
    ("model", "recompute_modules"): "--recompute-modules",
    ("model", "cpu_offloading"): "--cpu-offloading",
    ("model", "cpu_offloading_num_layers"): "--cpu-offloading-num-layers",
    ("model", "fine_grained_activation_offloading"): "--fine-grained-activation-offloading",
    ("model", "offload_modules"): "--offload-modules",
    ("optimizer", "use_precision_aware_optimizer"): "--use-precision-aware-optimizer",
    ("optimizer", "exp_avg_dtype"): "--exp-avg-dtype",
    ("optimizer", "exp_avg_sq_dtype"): "--exp-avg-sq-dtype",
    ("optimizer", "main_params_dtype"): "--main-params-dtype",
    ("optimizer", "main_grads_dtype"): "--main-grads-dtype",
    ("ddp", "use_megatron_fsdp"): "--use-megatron-fsdp",
    ("ddp", "data_parallel_sharding_strategy"): "--data-parallel-sharding-strategy",
}
SWITCH_KEYS = (
    "cpu_offloading",
    "fine_grained_activation_offloading",
    "use_precision_aware_optimizer",
    "use_megatron_fsdp",
)
# OptimizerConfig's dtypes as a dump writes them (torch.dtype), in Megatron-LM's names
TORCH_DTYPES = {
    "torch.float32": "fp32",
    "torch.float": "fp32",
    "torch.bfloat16": "bf16",
    "torch.float16": "fp16",
    "torch.half": "fp16",
    "torch.uint8": "fp8",
}


def as_megatron_reads(data: dict, get, out: Imported) -> None:
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
            elif key in ("cpu_offloading", "fine_grained_activation_offloading"):
                out.ignored.append(f"model.{key}")
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


def read_cp_comm_key(get, out: Imported) -> None:
    """model.cp_comm_type (TransformerConfig's, one value or one a layer) through Megatron-LM's
    reader, once the layout (trainer.strategy's context_parallel_size too) is read."""
    value = get("cp_comm_type")
    args = {} if value is None else {"--cp-comm-type": [str(v) for v in _as_list(value)]}
    names = {"--cp-comm-type": "model.cp_comm_type"}
    n = len(out.assumed)
    try:
        read_cp_comm(args, out.plan["parallel"], out.assumed)
    except PerfModelError as e:
        raise PerfModelError(_in_recipe_words(str(e), names)) from None
    out.assumed[n:] = [_in_recipe_words(x, names) for x in out.assumed[n:]]


def _as_list(value: Any) -> list:
    return value if isinstance(value, list) else [value]


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
    if value is True or text in TRUE_WORDS:
        return "hybrid"
    if text in FALSE_WORDS or text in ("null", "none", ""):
        return None
    if text in ("e4m3", "hybrid"):
        return text
    raise PerfModelError(
        f"{where}.fp8: {value!r}; Megatron-Core takes e4m3 or hybrid (NeMo 1: true or false)"
    )


def precision_fields(data: dict, get, out: Imported) -> dict[str, Any]:
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
