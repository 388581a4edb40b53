"""Megatron-Core's precision-aware optimizer as Megatron-LM reads its launch arguments
(megatron/training/arguments.py): --use-precision-aware-optimizer with the dtypes of Adam's moments
(--exp-avg-dtype, --exp-avg-sq-dtype) and of the master weights and gradients (--main-params-dtype,
--main-grads-dtype); and --num-distributed-optimizer-instances, the distributed optimizer sharded
over dp / N ranks and replicated N times (Megatron-Core 0.10+, partial distributed optimizer)."""

from __future__ import annotations

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron_args import Imported, one_value

MOMENTS = {"--exp-avg-dtype": "exp_avg_dtype", "--exp-avg-sq-dtype": "exp_avg_sq_dtype"}
MAINS = ("--main-params-dtype", "--main-grads-dtype")
INSTANCES = "--num-distributed-optimizer-instances"
# the optimizer's CPU offload (Megatron-Core 0.11+, HybridDeviceOptimizer): a switch, the fraction
# of the states offloaded (default 1.0) and the copies' overlap with the CPU's step (default off)
OFFLOAD, FRACTION, OVERLAP = (
    "--optimizer-cpu-offload",
    "--optimizer-offload-fraction",
    "--overlap-cpu-optimizer-d2h-h2d",
)
FLAGS = ("--use-precision-aware-optimizer", *MOMENTS, *MAINS, INSTANCES, OFFLOAD, FRACTION, OVERLAP)


# Megatron-LM's choices for the master weights (fp32, fp16) and the main gradients (fp32, bf16)
MAIN_CHOICES = {"--main-params-dtype": ("fp32", "fp16"), "--main-grads-dtype": ("fp32", "bf16")}


def read_optimizer(args: dict, out: Imported) -> None:
    """The moments' dtypes into the plan (fp32, fp16, bf16, fp8: Megatron-LM's choices), and the
    master weights' (fp32, fp16: main_params_dtype) and main gradients' (fp32, bf16: bf16 is
    grad_accum_fp32 false); a moment or master dtype other than fp32 needs
    --use-precision-aware-optimizer (Megatron-LM asserts it)."""
    aware = "--use-precision-aware-optimizer" in args
    training = out.plan["training"]
    for flag, key in MOMENTS.items():
        if flag not in args:
            continue
        dtype = one_value(args, flag)
        if dtype not in ("fp32", "fp16", "bf16", "fp8"):
            raise PerfModelError(f"{flag} {dtype}: Megatron-LM takes fp32, fp16, bf16 or fp8")
        _needs_aware(flag, dtype, aware)
        training[key] = dtype
    for flag, choices in MAIN_CHOICES.items():
        if flag not in args:
            continue
        dtype = one_value(args, flag)
        if dtype not in choices:
            raise PerfModelError(f"{flag} {dtype}: Megatron-LM takes {' or '.join(choices)}")
        if flag == "--main-params-dtype":
            _needs_aware(flag, dtype, aware)
            training["main_params_dtype"] = dtype
        elif dtype == "bf16":
            # bf16 main gradients: Megatron-LM then leaves accumulate_allreduce_grads_in_fp32 off
            # (arguments.py, the bf16 branch of validate_args)
            training["grad_accum_fp32"] = False


def read_offload(args: dict, out: Imported) -> None:
    """--optimizer-cpu-offload as training.optimizer_cpu_offload, the fraction
    --optimizer-offload-fraction gives (Megatron-LM's default 1.0), and
    --overlap-cpu-optimizer-d2h-h2d as optimizer_offload_overlap (its default off); the offload
    needs --use-precision-aware-optimizer (Megatron-LM asserts it)."""
    for flag in (OFFLOAD, OVERLAP):
        if args.get(flag):
            got = " ".join(args[flag])
            raise PerfModelError(f"{flag} is a switch and takes no value (got {got})")
    if OFFLOAD not in args:
        if FRACTION in args:
            out.assumed.append(f"{FRACTION} without {OFFLOAD}: no offload, as Megatron-LM reads it")
        return
    _aware_or_refuse(OFFLOAD, "--use-precision-aware-optimizer" in args)
    fraction = one_value(args, FRACTION) if FRACTION in args else "1.0"
    try:
        f = float(fraction)
    except ValueError:
        f = -1.0
    if not 0.0 <= f <= 1.0:
        raise PerfModelError(f"{FRACTION} {fraction}: give a fraction from 0 to 1, e.g. 0.5")
    training = out.plan["training"]
    training["optimizer_cpu_offload"] = f
    training["optimizer_offload_overlap"] = OVERLAP in args


def _needs_aware(flag: str, dtype: str, aware: bool) -> None:
    if dtype != "fp32":
        _aware_or_refuse(f"{flag} {dtype}", aware)


def _aware_or_refuse(what: str, aware: bool) -> None:
    """Megatron-LM's assert: ``what`` (the arguments as written) needs the precision-aware
    optimizer."""
    if not aware:
        raise PerfModelError(
            f"{what} needs --use-precision-aware-optimizer (Megatron-LM asserts it)"
        )


def read_instances(args: dict, out: Imported) -> None:
    """--num-distributed-optimizer-instances N as the plan's dp_shard = dp / N (its ZeRO-1
    sharding group; dp = GPUs / (tp x pp x cp)); it needs --use-distributed-optimizer and an N
    that divides dp, as Megatron-LM asserts (megatron/training/arguments.py)."""
    if INSTANCES not in args:
        return
    value = one_value(args, INSTANCES)
    if not value.isdigit() or int(value) < 1:
        raise PerfModelError(f"{INSTANCES} {value}: give a whole number of instances, e.g. 2")
    n, par = int(value), out.plan["parallel"]
    if n == 1:
        return
    if par.get("zero_stage") != 1:
        raise PerfModelError(f"{INSTANCES} {n} needs --use-distributed-optimizer (ZeRO-1)")
    model_parallel = par.get("tp", 1) * par.get("pp", 1) * par.get("cp", 1)
    dp = out.plan["system"]["num_gpus"] // model_parallel
    if dp % n:
        raise PerfModelError(
            f"{INSTANCES} {n} does not divide the data-parallel size {dp} (GPUs / (tp x pp x cp));"
            " pick a divisor"
        )
    par["dp_shard"] = dp // n
