"""Megatron-LM's mixture-of-experts launch arguments as Megatron-LM reads them
(megatron/training/arguments.py, Megatron-Core 0.13-0.15): the token dispatcher, DeepEP and
HybridEP behind the flex dispatcher, the expert all-to-all overlap, and the MoE kernel switches."""

from __future__ import annotations

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron_args import SWITCHES, Imported, one_value

FLAGS = (
    "--moe-token-dispatcher-type",
    "--moe-flex-dispatcher-backend",
    "--moe-enable-deepep",
    "--overlap-moe-expert-parallel-comm",
    "--moe-grouped-gemm",
    "--moe-permute-fusion",
    "--moe-router-fusion",
    "--moe-router-force-load-balancing",
    "--moe-expert-capacity-factor",
    "--moe-pad-expert-input-to-capacity",
    "--moe-router-enable-expert-bias",
)
# the same, as NeMo and Megatron-Bridge configs name them (TransformerConfig's fields)
NEMO_KEYS = {f[2:].replace("-", "_"): f for f in FLAGS}


def args_of_config(values: dict) -> dict[str, list[str]]:
    """A NeMo / Megatron-Bridge config's MoE keys (NEMO_KEYS, their read values) as the launch
    arguments read_moe reads: a true switch is the flag alone, a false one is absent."""
    out: dict[str, list[str]] = {}
    for key, value in values.items():
        flag = NEMO_KEYS[key]
        if value is None or value is False:
            continue
        out[flag] = [] if flag in SWITCHES else [str(value)]
    return out


def read_moe(args: dict, out: Imported) -> None:
    """The dispatcher: alltoall (Megatron's default), allgather, or flex, which needs a backend:
    --moe-enable-deepep (0.13) or --moe-flex-dispatcher-backend deepep | hybridep (0.14+).
    HybridEP, NVIDIA's dispatcher for NVLink domains, is costed as DeepEP's (a token crosses to
    each NVLink domain once) and said so. --overlap-moe-expert-parallel-comm is
    training.moe_a2a_overlap, --moe-router-force-load-balancing (benchmark mode) a balanced load
    (model.moe_router_family balanced), --moe-router-enable-expert-bias DeepSeek-V3's
    auxiliary-loss-free family, --moe-expert-capacity-factor and
    --moe-pad-expert-input-to-capacity the token dropping that caps (or fixes) the load; the
    grouped GEMM and the permute and router fusions are what the model's MoE layer already is, said
    as assumed."""
    training = out.plan["training"]
    kind = (
        one_value(args, "--moe-token-dispatcher-type")
        if "--moe-token-dispatcher-type" in args
        else "alltoall"
    )
    backend = (
        one_value(args, "--moe-flex-dispatcher-backend")
        if "--moe-flex-dispatcher-backend" in args
        else None
    )
    if backend is not None and backend not in ("deepep", "hybridep"):
        raise PerfModelError(
            f"--moe-flex-dispatcher-backend {backend}: Megatron-LM takes deepep or hybridep"
        )
    if "--moe-enable-deepep" in args:
        backend = backend or "deepep"
    if kind not in ("alltoall", "allgather", "flex"):
        raise PerfModelError(
            f"--moe-token-dispatcher-type {kind}: Megatron-LM takes alltoall, allgather or flex"
        )
    if kind == "flex":
        if backend is None:
            raise PerfModelError(
                "--moe-token-dispatcher-type flex needs its backend: --moe-enable-deepep or"
                " --moe-flex-dispatcher-backend deepep|hybridep (Megatron-LM asserts it)"
            )
        training["moe_token_dispatcher_type"] = backend
        if backend == "hybridep":
            out.assumed.append(
                "--moe-flex-dispatcher-backend hybridep: costed as DeepEP's dispatch, each token"
                " crossing to an NVLink domain once"
            )
    else:
        if "--moe-enable-deepep" in args:
            raise PerfModelError(
                f"--moe-enable-deepep needs --moe-token-dispatcher-type flex (got {kind});"
                " Megatron-LM asserts it"
            )
        if "--moe-flex-dispatcher-backend" in args:
            out.ignored.append(
                "--moe-flex-dispatcher-backend (Megatron reads it only with"
                " --moe-token-dispatcher-type flex)"
            )
        if "--moe-token-dispatcher-type" in args:
            training["moe_token_dispatcher_type"] = kind
    if "--overlap-moe-expert-parallel-comm" in args:
        training["moe_a2a_overlap"] = True
    _read_load(args, out.plan["model"])
    if "--moe-router-force-load-balancing" in args:
        # benchmark mode: the router spreads the tokens evenly over the experts
        out.plan["model"]["moe_router_family"] = "balanced"
    kernels = [
        f
        for f in ("--moe-grouped-gemm", "--moe-permute-fusion", "--moe-router-fusion")
        if f in args
    ]
    if kernels:
        out.assumed.append(
            f"{', '.join(kernels)}: the MoE layer is costed with grouped expert GEMMs and the"
            " router, permute and unpermute as memory-bound kernels either way"
        )


def _read_load(args: dict, model: dict) -> None:
    """The router's load as the launch sets it (specs/router.py): the expert bias is DeepSeek-V3's
    auxiliary-loss-free family; a capacity factor caps the load, and padding fixes it there."""
    if "--moe-router-enable-expert-bias" in args:
        # DeepSeek-V3's auxiliary-loss-free balancing (specs/router.py)
        model["moe_router_family"] = "aux_free_bias"
    if "--moe-expert-capacity-factor" in args:
        model["moe_expert_capacity_factor"] = float(one_value(args, "--moe-expert-capacity-factor"))
    if "--moe-pad-expert-input-to-capacity" in args:
        if "--moe-expert-capacity-factor" not in args:
            raise PerfModelError(
                "--moe-pad-expert-input-to-capacity needs --moe-expert-capacity-factor (Megatron-LM"
                " asserts it)"
            )
        model["moe_pad_expert_input_to_capacity"] = True
