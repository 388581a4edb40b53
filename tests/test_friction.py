"""Issue 23's friction: what a new user wrote that was refused or silently misread."""

import json

import pytest
from click.testing import CliRunner

from perfmodel.cli import main
from perfmodel.engine.estimate import assumptions
from perfmodel.inputs import presets
from perfmodel.units import parse_quantity


def invoke(*args):
    return CliRunner().invoke(main, list(args))


def test_links_default_from_the_gpu_preset_and_the_output_says_so():
    plan = presets.plan_from_mapping(
        {
            "model": "llama3-8b",
            "system": {"gpu": "h100-sxm", "num_gpus": 16},
            "training": {"global_batch_size": 64},
        },
        "t",
    )
    assert plan.system.intra_node_link.name.startswith("NVLink 4")
    assert any("h100-sxm's usual nvlink4 on NVLink" in a for a in assumptions(plan))
    named = presets.plan_from_mapping(
        {
            "model": "llama3-8b",
            "system": {
                "gpu": "h100-sxm",
                "num_gpus": 16,
                "intra_node_link": "nvlink4",
                "inter_node_link": "roce-400g",
            },
            "training": {"global_batch_size": 64},
        },
        "t",
    )
    assert not any(a.startswith("links:") for a in assumptions(named))


def test_an_inline_model_takes_the_training_sequence_length():
    plan = presets.plan_from_mapping(
        {
            "model": {
                "num_layers": 2,
                "hidden_size": 256,
                "num_attention_heads": 4,
                "vocab_size": 1000,
            },
            "system": {"gpu": "a100-80gb", "num_gpus": 8},
            "training": {"global_batch_size": 8, "seq_length": 512},
        },
        "t",
    )
    assert plan.model.seq_length == 512 == plan.seq_length


def test_bits_and_bytes_per_second_and_percentages():
    assert parse_quantity("400 Gbps", "bytes_per_s") == 50e9
    assert parse_quantity("400 Gb/s", "bytes_per_s") == 50e9
    assert parse_quantity("50 GBps", "bytes_per_s") == 50e9
    r = invoke("bubble", "-m", "48", "-p", "8", "--target", "10%", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["target"] == pytest.approx(0.10)


def test_a_size_without_a_unit_is_an_error_naming_the_units():
    r = invoke("comm", "all-reduce", "--size", "67.1")
    assert r.exit_code == 2 and "has no unit" in r.output and "80 GB" in r.output
    assert invoke("comm", "all-reduce", "--size", "67.1MB").exit_code == 0


def test_import_and_report_speak_json(tmp_path):
    from pathlib import Path

    script = Path(__file__).parent / "data" / "megatron" / "train_gpt3_175b_distributed.sh"
    r = invoke("import", "megatron", str(script), "--gpu", "a100-80gb", "--gpus", "128", "--json")
    assert r.exit_code == 0, r.output
    j = json.loads(r.output)
    assert j["plan"]["system"]["num_gpus"] == 128 and isinstance(j["ignored"], list)
    rep = invoke("report", "gpt3-175b.yaml", "-o", str(tmp_path / "r.html"), "--json")
    assert rep.exit_code == 0
    out = json.loads(rep.stdout)
    assert out["written"].endswith("r.html") and out["results"][0]["step_time_s"] > 0


def test_help_shows_no_machine_ranges_and_errors_name_the_bound():
    assert "1099511627776" not in invoke("plan", "--help").output
    r = invoke("plan", "gpt3-175b.yaml", "--tp", "0")
    assert r.exit_code == 2 and "below 1" in r.output


def test_a_gpu_sweep_keeps_each_gpus_caveats_and_its_usual_links(tmp_path):
    """Issue 22's Hopper bug: H200 had no FP8 efficiency (98% MFU, 1.17x an H100) and a sweep
    dropped the caveats plan prints; links the plan does not name follow each GPU."""
    h100, h200 = presets.gpu("h100-sxm"), presets.gpu("h200")
    assert h200.fp8_gemm_efficiency == h100.fp8_gemm_efficiency
    assert h200.gemm_efficiency == h100.gemm_efficiency  # the same chip, the same basis
    path = tmp_path / "p.yaml"
    path.write_text(
        "model: llama3-70b\nsystem: {gpu: h100-sxm, num_gpus: 64}\n"
        "training: {global_batch_size: 128, dtype: fp8}\n"
    )
    r = invoke("sweep", str(path), "--vary", "gpu=h100-sxm,b200")
    assert r.exit_code == 0
    # B200's FP8 and NVFP4 GEMM fractions are fitted on Megatron-Bridge's runs; the rest assumed
    assert "assumed (at b200): B200-SXM-180GB: efficiencies fitted FP8/NVFP4" in r.output
    assert "BF16 and attention assumed" in r.output
    assert "links follow each GPU's usual ones" in r.output
    j = json.loads(invoke("sweep", str(path), "--vary", "gpu=h100-sxm,b200", "--json").output)
    b200 = j["points"][1]
    assert any("b200's usual nvlink5 on NVLink" in a for a in b200["assumed"])


def _rack(num_gpus, domain, tp=8):
    return presets.plan_from_mapping(
        {
            "model": "llama3-70b",
            "system": {
                "gpu": "b200",
                "num_gpus": num_gpus,
                "gpus_per_node": 4,
                "nvlink_domain": domain,
                "intra_node_link": "nvlink5",
                "inter_node_link": "ib-ndr",
            },
            "training": {"global_batch_size": 256},
            "parallel": {"tp": tp, "pp": 1, "cp": 1, "micro_batch_size": 1},
        },
        "t",
    )


def test_an_nvlink_domain_larger_than_a_node_keeps_tp_on_nvlink():
    """Issue 22's rack-scale NVLink (the rest of that issue is not done): 4 GPUs a tray, 72 on
    one NVLink fabric; TP 8 spans two trays and stays on NVLink; without the domain it leaves."""
    from perfmodel.engine.mesh import Mesh

    rack = _rack(144, 72)
    assert Mesh(8, 1, 18, rack.system).crossing("tp") == "intra"
    trays = rack.with_system(nvlink_domain=None)
    assert Mesh(8, 1, 18, trays.system).crossing("tp") != "intra"
    from perfmodel.review.check import check

    assert not [f for f in check(rack) if f.rule in ("PM201", "PM110")]


def test_a_domain_must_hold_whole_nodes_and_the_placement_is_said():
    with pytest.raises(Exception, match=r"nvlink_domain\(70\) is not a multiple of gpus_per_node"):
        _rack(144, 70)
    assert (
        _rack(144, 64).system.placement_note()
        == "144 GPUs on 2 full 64-GPU NVLink domains and one of 16"
    )
    assert _rack(32, 72).system.placement_note() == "32 GPUs inside one 72-GPU NVLink domain"
    assert any(a.startswith("placement:") for a in assumptions(_rack(144, 64)))
    assert _rack(144, 72).system.placement_note() is None


def test_the_blackwell_and_h800_presets_load_and_plan_a_rack():
    """Issue 22's presets (what of their efficiencies is fitted and what assumed, said in every
    output): GB200 and GB300 as they run in an NVL72 rack, B300, H800 with its cut NVLink."""
    for name in ("b300", "gb200", "gb300", "h800"):
        g = presets.gpu(name)
        assert g.peak("fp8") == pytest.approx(2 * g.peak("bf16"), rel=1e-3) and g.source
    assert presets.link("nvlink4-h800").bandwidth_bytes_per_s == 200e9
    assert presets.link("cx8-800g").bandwidth_bytes_per_s == 100e9
    plan = presets.plan_from_mapping(
        {
            "model": "llama3-70b",
            "system": {"gpu": "gb200", "num_gpus": 144, "gpus_per_node": 4, "nvlink_domain": 72},
            "training": {"global_batch_size": 256, "dtype": "fp8"},
        },
        "t",
    )
    assert plan.system.intra_node_link.name.startswith("NVLink 5 + NVLink Switch, NVL72")
    notes = assumptions(plan)
    assert any(
        "efficiencies fitted FP8/MXFP8/NVFP4" in a and "attention assumed" in a for a in notes
    )
    b300 = plan.with_system(gpu=presets.gpu("b300"), nvlink_domain=None, gpus_per_node=8)
    assert any("efficiencies assumed" in a and "GB300's" in a for a in assumptions(b300))


def test_mxfp8_and_nvfp4_run_at_their_peaks_with_their_scales_where_the_gpu_has_them():
    """Issue 22's formats: MXFP8 at the FP8 rate with a scale per 32 elements, NVFP4 at the FP4
    rate with a scale per 16; Hopper has neither, and the error names the GPUs that do; a GPU with
    no NVFP4 figure takes FP8's and says so."""
    from perfmodel.engine.estimate import estimate, resolve_config
    from perfmodel.errors import PerfModelError
    from perfmodel.specs import Precision

    mx, n4 = Precision.of("mxfp8", True, "adam"), Precision.of("nvfp4", True, "adam")
    assert (mx.gemm_bytes, mx.scale_bytes) == (1, 1 / 32)
    assert (n4.gemm_bytes, n4.scale_bytes) == (0.5, 1 / 16)
    assert n4.fp8_weight_bytes == pytest.approx(0.5625)

    def plan(dtype, gpu="gb200"):
        return presets.plan_from_mapping(
            {
                "model": "llama3-8b",
                "system": {"gpu": gpu, "num_gpus": 8, "gpus_per_node": 4, "nvlink_domain": 8},
                "training": {"global_batch_size": 32, "dtype": dtype},
                "parallel": {"tp": 1, "pp": 1, "cp": 1, "micro_batch_size": 1, "zero_stage": 1},
            },
            "t",
        )

    steps = {}
    for d in ("bf16", "fp8", "mxfp8", "nvfp4"):
        p = plan(d)
        steps[d] = estimate(p, resolve_config(p)).values["step_time_s"]
    assert steps["nvfp4"] < steps["mxfp8"] < steps["bf16"]
    assert steps["mxfp8"] >= steps["fp8"]  # the same rate, plus the block scales
    p4 = plan("nvfp4")
    bare = p4.with_system(gpu=p4.system.gpu.model_copy(update={"fp4_gemm_efficiency": None}))
    assert any("NVFP4 GEMM efficiency taken as the FP8" in a for a in assumptions(bare))
    assert not any("NVFP4 GEMM efficiency taken" in a for a in assumptions(p4))
    with pytest.raises(PerfModelError, match="no nvfp4 tensor cores; GPUs that have them: b200"):
        plan("nvfp4", gpu="h100-sxm")


def test_activation_offloading_is_read_as_megatron_reads_it(tmp_path):
    """Issue 22 item 4: --cpu-offloading with --cpu-offloading-num-layers offloads that many
    layers; the count alone does nothing in Megatron-LM, and the import says so."""
    script = tmp_path / "run.sh"
    base = (
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096"
        " --num-attention-heads 32 --seq-length 4096 --max-position-embeddings 4096"
        " --micro-batch-size 1 --global-batch-size 64 --cpu-offloading-num-layers 4"
        " --vocab-size 32000"
    )
    script.write_text(base + " --cpu-offloading\n")
    r = invoke("import", "megatron", str(script), "--gpu", "gb200", "--gpus", "8", "--json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["plan"]["training"]["cpu_offloading_num_layers"] == 4
    script.write_text(base + "\n")
    r = invoke("import", "megatron", str(script), "--gpu", "gb200", "--gpus", "8")
    assert r.exit_code == 0 and "without --cpu-offloading" in r.output and "offloads" in r.output
