"""How an estimate counts FLOPs for MFU and HFU (SPEC 5), in the words its output gives."""

from __future__ import annotations


def flop_convention(
    recompute: str,
    peak: str = "bf16",
    compute: str = "bf16",
    peak_flops: float = 0.0,
    mtp: int = 0,
) -> str:
    """How MFU and HFU count FLOPs (SPEC 5), and the peak they are measured against."""
    hw = {
        "full": "Narayanan 2021 eq. 3 (4x forward)",
        "selective": "Korthikanti 2022 eq. 8",
        "none": "= model FLOPs",
    }[recompute]
    against = f"; both against the {peak.upper()} peak" + (
        f" ({peak_flops / 1e12:,.0f} TFLOP/s)" if peak_flops else ""
    )
    if peak != compute:
        against += (
            f", as NeMo and Megatron-LM report {compute.upper()} runs: {compute.upper()} GEMMs run"
            " above that peak, so these can exceed 100%"
        )
    mtp_text = (
        f", the {mtp} MTP layer{'s' if mtp > 1 else ''} with {'their' if mtp > 1 else 'its'}"
        " projection and logits included (as Megatron-Bridge's flop_utils counts them)"
        if mtp
        else ""
    )
    return (
        f"MFU: model FLOPs, Korthikanti 2022 eq. 7 (3x forward, no recompute){mtp_text}; HFU:"
        f" {hw}{against}"
    )
