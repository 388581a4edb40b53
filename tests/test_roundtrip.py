"""Faithful imports and emits (issue 40, item 2): what changes the cost is read or refused by name,
and an emitted launch file or job file reads back to the step and memory it was emitted for, or
its comments name what it does not carry."""

import pytest

from perfmodel.errors import PerfModelError
from perfmodel.inputs.megatron import read_args
from perfmodel.inputs.torchtitan import read_job

LAUNCH = (
    "--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 8192"
    " --max-position-embeddings 8192 --micro-batch-size 1 --global-batch-size 64 --bf16"
    " --vocab-size 128256 --context-parallel-size 2 "
)


def test_megatron_cp_comm_type_read_or_refused_by_name():
    assert (
        read_args(LAUNCH + "--cp-comm-type a2a", "h100-sxm", 16).plan["parallel"]["cp_comm_type"]
        == "a2a"
    )
    absent = read_args(LAUNCH, "h100-sxm", 16)
    assert absent.plan["parallel"]["cp_comm_type"] == "p2p"
    assert any("no --cp-comm-type: p2p" in a for a in absent.assumed)
    for kind in ("allgather", "a2a+p2p", "p2p a2a"):
        with pytest.raises(PerfModelError, match=r"--cp-comm-type .*perfmodel models one of"):
            read_args(LAUNCH + f"--cp-comm-type {kind}", "h100-sxm", 16)
    with pytest.raises(PerfModelError, match="Megatron-LM accepts p2p, a2a, allgather"):
        read_args(LAUNCH + "--cp-comm-type ring", "h100-sxm", 16)


def test_megatron_gpu_count_from_the_emitted_comment():
    text = LAUNCH + "\n# perfmodel: num_gpus 64 (x)\n# perfmodel: gpus_per_node 4 (y)\n"
    system = read_args(text, "h100-sxm").plan["system"]
    assert (system["num_gpus"], system["gpus_per_node"]) == (64, 4)
    # torchrun's own values win over the comment
    launched = read_args("torchrun --nproc_per_node 8 --nnodes 2 x.py " + text, "h100-sxm")
    assert (launched.plan["system"]["num_gpus"], launched.plan["system"]["gpus_per_node"]) == (
        16,
        8,
    )


@pytest.mark.parametrize(
    "text, compiled",
    [
        ("[training]\ncompile = true\n", True),
        ("[compile]\nenable = true\n", True),
        ('[compile]\nenable = true\ncomponents = ["loss"]\n', False),
        ("", False),
    ],
)
def test_torchtitan_compile_in_both_spellings(text, compiled):
    base = '[model]\nname = "llama3"\nflavor = "8B"\n[activation_checkpoint]\nmode = "none"\n'
    imp = read_job(base + text, "h100-sxm", 8)
    assert imp.plan["training"]["torch_compile"] is compiled
    assert "training.compile" not in imp.unrecognized + imp.ignored


def test_torchtitan_on_an_amd_gpu_reads_as_torchtitan_rocm():
    base = '[model]\nname = "llama3"\nflavor = "8B"\n'
    assert read_job(base, "mi300x", 8).plan["training"]["framework"] == "torchtitan-rocm"
    assert read_job(base, "h100-sxm", 8).plan["training"]["framework"] == "fsdp"
    marked = read_job(base + "# perfmodel: framework fsdp\n", "mi300x", 8)
    assert marked.plan["training"]["framework"] == "fsdp"
