"""torchtitan's job-file keys as perfmodel sorts them (inputs/torchtitan.py reads the file): the
model flavors it has presets for, the pipeline schedules, the keys that never change the cost and
the ones whose cost is not modelled. Names and defaults: torchtitan/config/job_config.py at 238fa99
(2026-02)."""

from perfmodel.errors import PerfModelError

# ([model] name, flavor) -> the bundled preset with torchtitan's shapes (torchtitan/models/*/
# __init__.py: llama3 8B dim 4096, 32 layers, 8 KV heads, FFN 1.3 x 8/3 x 4096 rounded up to
# 1024 = 14336, vocab 128256; 70B, 405B likewise; deepseek_v3 671B without MTP)
MODELS = {
    ("llama3", "8B"): "llama3-8b",
    ("llama3", "70B"): "llama3-70b",
    ("llama3", "405B"): "llama3.1-405b",
    ("llama2", "7B"): "llama2-7b",
    ("llama2", "13B"): "llama2-13b",
    ("llama2", "70B"): "llama2-70b",
    ("deepseek_v3", "671B"): "deepseek-v3",
    ("qwen3", "30B-A3B"): "qwen3-30b-a3b",
    ("qwen3", "235B-A22B"): "qwen3-235b-a22b",
    ("llama4", "17bx16e"): "llama4-scout",
    ("llama4", "17bx128e"): "llama4-maverick",
}

# torch.distributed.pipelining's names (get_schedule_class): ZBVZeroBubble and DualPipeV run two
# stages a rank in a V (Qi et al. 2024; deepseek-ai/DualPipe), as the fsdp profile lists them
SCHEDULES = {
    "1F1B": "1f1b",
    "GPipe": "gpipe",
    "Interleaved1F1B": "interleaved",
    "ZBVZeroBubble": "zbv",
    "DualPipeV": "dualpipev",
    "InterleavedZeroBubble": "interleaved-zb",
}
LOOPED = ("Interleaved1F1B", "ZBVZeroBubble", "DualPipeV", "InterleavedZeroBubble")

# sections whose keys never change the step's cost (logging, checkpoint files, data, the learning
# rate); a key here with any value is listed as ignored
IGNORED_SECTIONS = (
    "job",
    "profiling",
    "metrics",
    "lr_scheduler",
    "checkpoint",
    "comm",
    "validation",
    "memory_estimation",
    "debug",
)
IGNORED = {
    "model": ("hf_assets_path", "tokenizer_path", "print_after_conversion"),
    "optimizer": ("lr", "eps", "weight_decay", "implementation", "beta1", "beta2"),
    "training": (
        "dataset",
        "dataset_path",
        "max_norm",
        "gc_freq",
        "gc_debug",
        "dataloader",
    ),
    # the expert-parallel options do nothing at expert_parallel_degree 1 (a larger one is an error)
    "parallelism": ("pipeline_parallel_expert_parallel_overlap", "expert_parallel_comm_backend"),
    "compile": ("backend",),
    "float8": ("precompute_float8_dynamic_scale_for_fsdp",),
    "activation_checkpoint": (
        "preserve_rng_state",
        "determinism_check",
        "debug",
        "early_stop",
        "visualize_memory_budget_pareto",
        "per_op_sac_force_recompute_mm_shapes_by_fqns",
    ),
}
# a key whose cost is not modelled: an error unless it has torchtitan's default (what it does)
CANNOT = {
    ("training", "enable_cpu_offload"): (False, "FSDP2's CPU offload of parameters"),
    ("training", "dtype"): ("float32", "master weights and optimizer states in bfloat16"),
    ("optimizer", "early_step_in_backward"): (False, "the optimizer step inside the backward"),
    ("parallelism", "disable_loss_parallel"): (False, "the loss without loss parallelism"),
    ("parallelism", "module_fqns_per_model_part"): (None, "a hand-written stage split"),
    ("parallelism", "pipeline_parallel_schedule_csv"): ("", "a pipeline schedule from a CSV"),
    ("parallelism", "context_parallel_load_balancer"): ("headtail", "unbalanced CP chunks"),
    ("fault_tolerance", "enable"): (False, "torchft's fault-tolerant replicas"),
    ("experimental", "custom_import"): ("", "a custom model module"),
    ("experimental", "custom_args_module"): ("", "custom job-config arguments"),
    ("float8", "emulate"): (False, "emulated FP8"),
}


def account(job, out) -> None:
    """Every key of the job (inputs/torchtitan._Job) its readers did not read: ignored, an
    error, or not recognized."""
    for section, key, value in job.entries():
        name = f"{section}.{key}" if section else key
        if (section, key) in job.read:
            continue
        if (section, key) in CANNOT:
            default, what = CANNOT[(section, key)]
            if value != default and not (default is None and value in ([], None)):
                raise PerfModelError(
                    f"{job.label}: [{section}] {key} = {value!r}: {what} is not modelled"
                    f" (torchtitan's default {default!r} is)"
                )
            out.ignored.append(name)
        elif (
            section in IGNORED_SECTIONS
            or key in IGNORED.get(section, ())
            or section in ("fault_tolerance", "experimental")  # off: the checks above
        ):
            out.ignored.append(name)
        elif section.startswith("quantize.grouped_mm") and out.plan["training"]["dtype"] != "bf16":
            out.ignored.append(name)
            out.assumed.append(
                f"[{section}] {key}: the experts' grouped GEMMs in the training's dtype"
            )
        elif section.startswith(("quantize", "float8")):
            out.ignored.append(name)  # a converter's options, the converter off
        else:
            out.unrecognized.append(name)
