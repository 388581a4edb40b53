"""Activation offloading to host memory (Megatron-Core --cpu-offloading-num-layers;
megatron/core/cpu_offload.py): the kept activations of the first N layers leave for host memory
on a side stream as the forward goes, and come back ahead of the backward that needs them. The
copy hides behind the pass's compute; what does not fit in that window is exposed.

    bytes moved per micro-batch  = kept bytes per layer x min(N, layers on the rank)      (B)
    transfer                     = latency x layers + bytes / (bandwidth x efficiency)     (s)
    exposed, each pass           = max(0, transfer - the pass's compute)                  (s)

The bandwidth is the GPU's host link per direction (NVLink-C2C on Grace superchips, PCIe
elsewhere: System.host_link). On the GPU, the offloaded layers of the micro-batches in flight are
gone but for the one layer in transit (its double buffer). Hiding is taken as complete where the
window is long enough: the copy engines run beside the SMs (no SM or HBM contention modelled).
"""

from __future__ import annotations

import numpy as np

from perfmodel.cost import Array, Num


def moved_bytes(kept_per_layer: Num, layers: Num, offloaded: Num) -> Array:
    """Bytes per micro-batch a rank sends to host memory (and reads back), bytes."""
    return np.asarray(kept_per_layer * np.minimum(offloaded, layers), dtype=float)


def transfer_seconds(
    moved: Num, layers: Num, offloaded: Num, bandwidth: float, latency: float, efficiency: float
) -> Array:
    """One pass's copy over the host link, seconds: one message per layer."""
    n = np.minimum(offloaded, layers)
    return np.asarray(latency * n + moved / (bandwidth * efficiency), dtype=float)


def exposed_seconds(transfer: Num, window: Num) -> Array:
    """What of the copy the pass's compute does not hide, seconds."""
    return np.asarray(np.maximum(np.asarray(transfer) - window, 0.0))


def resident_saving(kept_per_layer: Num, layers: Num, offloaded: Num, in_flight: Num) -> Array:
    """Activation bytes the GPU no longer holds at the peak: the offloaded layers of every
    micro-batch in flight, less the one layer in transit, bytes."""
    n = np.minimum(offloaded, layers) * in_flight
    return np.asarray(kept_per_layer * np.maximum(n - 1, 0), dtype=float)
