"""The links each GPU generation usually ships with (NVLink and the network, the host link),
for plans that name a GPU but not its links (presets.py)."""

from __future__ import annotations

from perfmodel.inputs import names

# The interconnect each GPU generation ships with, for quick cases without a plan file.
_LINKS_FOR = {
    "a100": ("nvlink3", "ib-hdr"),
    "h100": ("nvlink4", "ib-ndr"),
    "h200": ("nvlink4", "ib-ndr"),
    "h800": ("nvlink4-h800", "ib-ndr"),
    "b200": ("nvlink5", "ib-ndr"),
    "b300": ("nvlink5", "cx8-800g"),
    "gb200": ("nvlink5-nvl72", "ib-ndr"),
    "gb300": ("nvlink5-nvl72", "cx8-800g"),
    "mi300x": ("infinity-fabric", "pollara-400"),
    "mi325x": ("infinity-fabric", "pollara-400"),
    "mi350x": ("infinity-fabric-4", "pollara-400"),
    "mi355x": ("infinity-fabric-4", "pollara-400"),
    "v100": ("nvlink2", "ib-hdr"),
}


def _gpu_key(gpu_name: str) -> str:
    """A GPU name as the tables above key it: the preset an alias names (v100 -> v100-32gb)."""
    key = names.norm(gpu_name)
    return names.ALIASES["gpus"].get(key, key)


# GPUs on one NVLink fabric for the rack-scale links: a GB200 / GB300 NVL72 rack joins 72 GPUs
# (18 compute trays of 4) through its NVLink Switch trays (NVIDIA GB200 NVL72 data sheet)
RACK_DOMAIN = {"nvlink5-nvl72": 72}


def host_link_of(gpu_name: str) -> str:
    """The GPU's usual link to host memory, per GPU: NVLink-C2C on Grace superchips (GB200, GB300);
    on 8-GPU HGX boards a PCIe switch's x16 uplink, which two GPUs share (Gen5 on Hopper and
    Blackwell, Gen4 on A100, Gen3 on the DGX-1's V100). AMD's platforms keep a Gen5 x16 link a
    GPU, unshared, as before: their hosts' PCIe trees vary by vendor, and no run here offloads."""
    key = _gpu_key(gpu_name)
    if key.startswith("gb"):
        return "nvlink-c2c"
    if key.startswith("mi"):
        return "pcie-gen5"
    if key.startswith("v100"):
        return "pcie-gen3-shared"
    return "pcie-gen4-shared" if key.startswith("a100") else "pcie-gen5-shared"


# A GPU's share of its usual host's memory bandwidth, bytes/s: the sockets' DRAM channels at their
# data-sheet peak (channels x transfers/s x 8 B) over the node's GPUs. DGX-1 (V100): 2 Xeon
# E5-2698 v4, 4 x DDR4-2400 each; DGX A100: 2 EPYC 7742, 8 x DDR4-3200 each; DGX H100 / H200:
# 2 Xeon Platinum 8480C, 8 x DDR5-4800 each; DGX B200: 2 Xeon Platinum 8570, 8 x DDR5-5600 each
# (NVIDIA DGX data sheets; the CPUs' product pages for their channels); GB200 / GB300: one Grace
# for two GPUs, LPDDR5X at up to 512 GB/s (NVIDIA GB200 NVL72 data sheet); MI300X / MI325X
# platforms: 2 EPYC 9654, 12 x DDR5-4800 each; MI350X / MI355X: 2 EPYC 9005, 12 x DDR5-6400 each
# (AMD Instinct platform briefs), each over 8 GPUs.
_HOST_MEMORY_GB_S = {
    "v100": 2 * 4 * 2.4 * 8 / 8,
    "a100": 2 * 8 * 3.2 * 8 / 8,
    "h": 2 * 8 * 4.8 * 8 / 8,  # h100, h200, h800
    "b": 2 * 8 * 5.6 * 8 / 8,  # b200, b300
    "gb": 512 / 2,
    "mi30": 2 * 12 * 4.8 * 8 / 8,  # mi300x, mi325x
    "mi35": 2 * 12 * 6.4 * 8 / 8,  # mi350x, mi355x
}


def host_memory_of(gpu_name: str) -> float | None:
    """The GPU's share of its usual host's memory bandwidth, bytes/s (None for a GPU this table
    lacks)."""
    key = _gpu_key(gpu_name)
    found = [k for k in _HOST_MEMORY_GB_S if key.startswith(k)]
    return round(_HOST_MEMORY_GB_S[max(found, key=len)], 1) * 1e9 if found else None


def _usual_links(gpu_name: str) -> dict[str, str] | None:
    """The links a GPU preset's generation ships with, or None for a GPU this table lacks."""
    key = _gpu_key(gpu_name)
    found = next((v for k, v in _LINKS_FOR.items() if key.startswith(k)), None)
    return None if found is None else {"intra_node_link": found[0], "inter_node_link": found[1]}


def default_links(gpu_name: str) -> dict[str, str]:
    """intra_node_link and inter_node_link presets for a GPU preset name (NVLink3/HDR when
    unknown)."""
    key = _gpu_key(gpu_name)
    intra, inter = next(
        (v for k, v in _LINKS_FOR.items() if key.startswith(k)), ("nvlink3", "ib-hdr")
    )
    return {"intra_node_link": intra, "inter_node_link": inter}


# A GPU's share of its usual host's DRAM, bytes: the system memory of the vendor's 8-GPU node over
# its GPUs. DGX-1 (V100): 512 GB; DGX A100 640 GB (A100 80GB): 2 TB, DGX A100 320 GB (40GB): 1 TB;
# DGX H100 / H200: 2 TB; DGX B200 and B300: 2 TB (the data sheets' base configuration; NVIDIA DGX
# data sheets); GB200 / GB300: one Grace's 480 GB LPDDR5X for two GPUs (NVIDIA GB200 NVL72 data
# sheet: 17 TB over 72 GPUs). AMD's platforms vary by vendor: not known (not checked).
_HOST_DRAM_GB = {
    "v100": 512 / 8,
    "a100-40": 1024 / 8,
    "a100": 2048 / 8,
    "h": 2048 / 8,  # h100, h200, h800
    "b": 2048 / 8,  # b200, b300
    "gb": 480 / 2,
}


def host_dram_of(gpu_name: str) -> float | None:
    """The GPU's share of its usual host's DRAM, bytes (None for a GPU this table lacks)."""
    key = _gpu_key(gpu_name)
    found = [k for k in _HOST_DRAM_GB if key.startswith(k)]
    return _HOST_DRAM_GB[max(found, key=len)] * 1e9 if found else None
