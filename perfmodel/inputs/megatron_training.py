"""Megatron-LM's training arguments whose meaning depends on others, as Megatron-LM reads them
(megatron/training/arguments.py, TransformerConfig): FP8 (--fp8-format, --fp8-recipe), activation
offloading (--cpu-offloading, --fine-grained-activation-offloading) and recompute
(--recompute-granularity, --recompute-modules). The NeMo reader passes its recipes' keys through
these as the arguments they are."""

from __future__ import annotations

from typing import get_args

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron_args import Imported, int_value, one_value
from perfmodel.specs.training import Training


def read_fp8(
    args: dict, training: dict, ignored: list[str], words: dict[str, str] | None = None
) -> None:
    """--fp8-format (e4m3, hybrid) turns FP8 on, with --fp8-recipe's scaling; the recipe alone
    does nothing (Megatron-LM's TransformerConfig reads fp8_recipe only when fp8 is set). The
    NeMo reader passes its recipe's fields through here as these arguments."""
    if "--fp8-format" not in args:
        if "--fp8-recipe" in args:
            ignored.append("--fp8-recipe (read only with --fp8-format; FP8 is off)")
        return
    if one_value(args, "--fp8-format") not in ("e4m3", "hybrid"):
        raise PerfModelError(
            f"--fp8-format {one_value(args, '--fp8-format')}: perfmodel models e4m3 and hybrid"
        )
    training["dtype"] = "fp8"
    _fp8_recipe(args, training)
    if words is not None:
        # the plan's errors in the arguments' words (presets._format_runs_on)
        fmt = f"--fp8-format {one_value(args, '--fp8-format')}"
        recipe = one_value(args, "--fp8-recipe") if "--fp8-recipe" in args else None
        words["training.dtype fp8"] = fmt
        words["training.dtype mxfp8"] = f"{fmt} --fp8-recipe mxfp8"
        if recipe:
            words[f"training.fp8_recipe {recipe}"] = f"--fp8-recipe {recipe}"
        words["use dtype mxfp8"] = "use --fp8-recipe mxfp8"


def _fp8_recipe(args: dict, training: dict) -> None:
    """Megatron-LM's --fp8-recipe (delayed, tensorwise, mxfp8, blockwise): MXFP8 is its own
    format here; blockwise sets the recipe; the per-tensor ones cost alike."""
    if "--fp8-recipe" not in args:
        return
    recipe = one_value(args, "--fp8-recipe")
    if recipe == "mxfp8":
        training["dtype"] = "mxfp8"
    elif recipe in ("delayed", "tensorwise", "blockwise"):
        training["fp8_recipe"] = recipe
    else:
        raise PerfModelError(
            f"--fp8-recipe {recipe}: Megatron-LM takes delayed, tensorwise, mxfp8 or blockwise"
        )


def read_offloading(args: dict, out: Imported) -> None:
    """Megatron-LM's activation offloading: --cpu-offloading turns it on for
    --cpu-offloading-num-layers layers (default 0); the count alone does nothing
    (megatron/training/arguments.py, TransformerConfig.cpu_offloading); and the fine-grained
    one (_read_module_offloading)."""
    n = (
        int_value(args, "--cpu-offloading-num-layers")
        if "--cpu-offloading-num-layers" in args
        else 0
    )
    if "--cpu-offloading" in args:
        out.plan["training"]["cpu_offloading_num_layers"] = n
    elif n:
        out.assumed.append(
            f"--cpu-offloading-num-layers {n} without --cpu-offloading: Megatron-LM offloads"
            " nothing, nor does the plan"
        )
    _read_module_offloading(args, out)


# Megatron-Core's --offload-modules choices perfmodel prices (TransformerConfig.offload_modules, as
# Training.offload_modules lists them; gdp_qkv, GatedDeltaProduct's, has no layer here)
OFFLOAD_MODULES: tuple[str, ...] = get_args(
    get_args(Training.model_fields["offload_modules"].annotation)[0]
)


def _read_module_offloading(args: dict, out: Imported) -> None:
    """Megatron-Core's fine-grained activation offloading: --fine-grained-activation-offloading
    with the --offload-modules it offloads (TransformerConfig asserts at least one); the modules
    alone do nothing (TransformerConfig reads them only with the switch)."""
    modules = list(args.get("--offload-modules", []))
    if "--fine-grained-activation-offloading" not in args:
        if modules:
            out.assumed.append(
                f"--offload-modules {' '.join(modules)} without"
                " --fine-grained-activation-offloading: Megatron-LM offloads nothing, nor does"
                " the plan"
            )
        return
    if not modules:
        raise PerfModelError(
            "--fine-grained-activation-offloading without --offload-modules: Megatron-Core"
            " asserts at least one module; name them (e.g. --offload-modules core_attn attn_proj)"
        )
    for m in modules:
        if m not in OFFLOAD_MODULES:
            raise PerfModelError(
                f"--offload-modules {' '.join(modules)}: perfmodel prices"
                f" {', '.join(OFFLOAD_MODULES)} ({m} is not among them)"
            )
    out.plan["training"]["offload_modules"] = modules


# Megatron-Core's --recompute-modules choices (TransformerConfig.recompute_modules; arguments.py
# nargs="*")
RECOMPUTE_MODULES = (
    "core_attn",
    "moe_act",
    "layernorm",
    "mla_up_proj",
    "mlp",
    "moe",
    "shared_experts",
)


def read_recompute(args: dict, out: Imported) -> None:
    parallel, training = out.plan["parallel"], out.plan["training"]
    if "--recompute-granularity" in args:
        g = one_value(args, "--recompute-granularity")
        if g not in ("full", "selective"):
            raise PerfModelError(f"--recompute-granularity {g}: Megatron accepts full or selective")
        parallel["recompute"] = g
    if "--recompute-activations" in args:
        # megatron/training/arguments.py: "if args.recompute_activations:
        # args.recompute_granularity = 'selective'", over any --recompute-granularity
        if parallel["recompute"] == "full":
            out.assumed.append(
                "--recompute-activations with --recompute-granularity full: selective, as"
                " Megatron-LM reads it (the switch sets the granularity)"
            )
        parallel["recompute"] = "selective"
    if "--recompute-modules" in args:
        modules = args["--recompute-modules"]
        for m in modules:
            if m not in RECOMPUTE_MODULES:
                fix = (
                    f"takes them space-separated (--recompute-modules {' '.join(m.split(','))})"
                    if "," in m
                    else f"takes {', '.join(RECOMPUTE_MODULES)}"
                )
                raise PerfModelError(f"--recompute-modules {' '.join(modules)}: Megatron-LM {fix}")
        training["recompute_modules"] = modules
    method = one_value(args, "--recompute-method") if "--recompute-method" in args else None
    n = int_value(args, "--recompute-num-layers") if "--recompute-num-layers" in args else None
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
