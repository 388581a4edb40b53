"""What a whole training run costs beyond its step time (a plan's `run` section, issue 23): the
power its GPUs, nodes and facility draw, the price of a GPU-hour, and what failures and
checkpoints take. Every default cites its source; the output names each default it used.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from ..units import parse_quantity
from .base import BytesPerSecond, Seconds, Spec, _quantity

Watts = Annotated[float, _quantity("watts"), Field(gt=0, le=1e7)]

# Llama 3 (Dubey et al. 2024, Sec. 3.3.4, Table 5): 419 unexpected interruptions in 54 days of
# pre-training on 16,384 H100, per GPU-hour
LLAMA3_FAILURES_PER_GPU_HOUR = 419 / (54 * 24 * 16384)
# Llama 3, Sec. 3.3.4: Tectonic serves checkpoints at 2 TB/s sustained to 16,384 GPUs (2,048 nodes)
LLAMA3_STORAGE_PER_NODE = parse_quantity("2 TB/s", "bytes_per_s") / 2048
DEFAULTS_SOURCE = {
    "pue": (
        "PUE 1.2: a modern hyperscale facility (Google reports a fleet-wide 1.10 for 2023, the"
        " Uptime Institute's 2023 survey averages 1.58)"
    ),
    "failure_rate_per_gpu_hour": (
        "failures: Llama 3's 419 unexpected interruptions in 54 days on 16,384 H100 (Dubey et al."
        " 2024, Table 5)"
    ),
    "checkpoint_bandwidth_per_node": (
        "checkpoint storage: Llama 3's 2 TB/s sustained over 2,048 nodes (1 GB/s a node)"
    ),
    "restart_s": "restart: 10 min to requeue, start NCCL and the data loaders (assumed)",
    "host_bandwidth": "asynchronous save: 25 GB/s device-to-host copy (PCIe Gen4 x16, assumed)",
}


class Run(Spec):
    """Power, price, failures and checkpoints of a training run."""

    gpu_power_w: Watts | None = Field(
        None, description="Power a GPU draws under training load; default its TDP (the preset's)."
    )
    node_power_w_per_gpu: Watts | None = Field(
        None,
        description=(
            "A node's power besides its GPUs (CPUs, memory, NICs, fans), per GPU; default the"
            " system data sheet's maximum less its GPUs' TDP (the GPU preset's system figure)."
        ),
    )
    pue: float = Field(1.2, ge=1.0, le=3.0, description="Facility power usage effectiveness.")
    price_per_gpu_hour: float | None = Field(
        None, ge=0, le=1e4, description="Price of one GPU-hour (USD); no cost without it."
    )
    failure_rate_per_gpu_hour: float = Field(
        LLAMA3_FAILURES_PER_GPU_HOUR,
        ge=0,
        le=1,
        description="Unexpected interruptions per GPU-hour (default: Llama 3's measured rate).",
    )
    checkpoint_bandwidth_per_node: BytesPerSecond = Field(
        LLAMA3_STORAGE_PER_NODE,
        description="Storage bandwidth a node writes (and reads) its checkpoint shard at.",
    )
    async_checkpoint: bool = Field(
        False,
        description=(
            "Asynchronous saving (PyTorch DCP async_save, Megatron --async-save): training pauses"
            " only for the device-to-host copy."
        ),
    )
    host_bandwidth: BytesPerSecond = Field(
        25e9, description="Device-to-host copy bandwidth per GPU for an asynchronous save."
    )
    restart_s: Seconds = Field(
        600.0, description="Time to restart after an interruption, before the checkpoint loads."
    )
    checkpoint_interval_s: Seconds | None = Field(
        None, gt=0, description="Seconds between checkpoints; default the Young/Daly optimum."
    )
