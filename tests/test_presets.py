"""Presets resolve by name, from files and from Hugging Face config.json (SPEC 1-2)."""

import json

import pytest

from perfmodel.errors import PerfModelError
from perfmodel.inputs import load_plan, presets


@pytest.mark.parametrize(
    "name",
    ["a100-40gb", "a100-80gb", "h100-sxm", "h200", "b200", "v100-16gb", "v100-32gb", "mi300x"],
)
def test_gpu_presets(name):
    g = presets.gpu(name)
    assert g.peak("bf16") > 1e14 and g.hbm_capacity_bytes >= 16e9


# seed 000: A100 312 TFLOP/s bf16, 19.5 fp32, 2039 GB/s, 108 SMs; V100
def test_seed_figures_in_presets():
    a = presets.gpu("A100-80GB")
    assert (a.peak("bf16"), a.peak("fp32"), a.hbm_bandwidth_bytes_per_s, a.num_sms) == (
        312e12,
        19.5e12,
        2039e9,
        108,
    )
    v = presets.gpu("v100_16gb")
    # the seed's "16 GB" is the marketing size; the device reports 16160 MiB (issue 14: capacities
    # as reported)
    assert (v.hbm_bandwidth_bytes_per_s, v.hbm_capacity_bytes, v.num_sms, v.l2_bytes) == (
        900e9,
        16160 * 2**20,
        80,
        6 * 2**20,
    )
    assert a.hbm_capacity_bytes == 81920 * 2**20  # A100-80GB: 80 GiB


@pytest.mark.parametrize(
    "name,bw",
    [
        ("nvlink3", 300e9),
        ("nvlink4", 450e9),
        ("nvlink5", 900e9),
        ("ib-hdr", 25e9),
        ("ib-ndr", 50e9),
        ("pcie-gen4", 32e9),
        ("pcie-gen5", 64e9),
        ("roce-400g", 50e9),
    ],
)
def test_link_presets(name, bw):
    assert presets.link(name).bandwidth_bytes_per_s == bw


@pytest.mark.parametrize(
    "name,layers,hidden",
    [
        ("gpt-1.7b", 24, 2304),
        ("gpt-1t", 128, 25600),
        ("gpt3-175b", 96, 12288),
        ("mt-nlg-530b", 105, 20480),
        ("llama2-7b", 32, 4096),
        ("llama2-13b", 40, 5120),
        ("llama2-70b", 80, 8192),
        ("llama3-8b", 32, 4096),
        ("llama3-70b", 80, 8192),
        ("llama3-405b", 126, 16384),
    ],
)
def test_model_presets(name, layers, hidden):
    m = presets.model(name)
    assert (m.num_layers, m.hidden_size) == (layers, hidden)


def test_narayanan_table1_models_are_all_there():
    names = presets.preset_names("models")
    for n in (
        "gpt-1.7b",
        "gpt-3.6b",
        "gpt-7.5b",
        "gpt-18.4b",
        "gpt-39.1b",
        "gpt-76.1b",
        "gpt-145.6b",
        "gpt-310.1b",
        "gpt-529.6b",
        "gpt-1t",
    ):
        assert n in names


def test_unknown_preset_lists_close_names():
    with pytest.raises(PerfModelError, match="did you mean a100-80gb"):
        presets.gpu("a100-80")


def test_hf_config_json(tmp_path):
    cfg = {
        "model_type": "llama",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
    }
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    m = presets.model(str(f))
    assert (m.mlp, m.groups, m.ffn, m.seq_length, m.tied_embeddings) == (
        "swiglu",
        8,
        14336,
        8192,
        False,
    )
    gpt2 = presets.model_from_hf_config(
        {
            "model_type": "gpt2",
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "vocab_size": 50257,
            "activation_function": "gelu_new",
        }
    )
    assert gpt2.mlp == "gelu" and gpt2.ffn == 3072


def test_bundled_plan_by_name_and_by_file(tmp_path, monkeypatch):
    p = load_plan("gpt3-175b.yaml")
    assert p.system.num_gpus == 512 and p.training.global_batch_size == 1536
    assert p.system.intra_node_link.bandwidth_bytes_per_s == 300e9
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text(
        "model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, vocab_size: 100,"
        " seq_length: 32}\nsystem: {gpu: a100-80gb, num_gpus: 8, intra_node_link: nvlink3,"
        " inter_node_link: ib-hdr}\ntraining: {global_batch_size: 8}\nparallel:"
        " {tensor_model_parallel_size: 2}\n"
    )
    mine = load_plan("mine.yaml")
    assert mine.parallel.tp == 2 and mine.model.num_layers == 2


def test_plan_copies_are_validated():
    """Plan.with_* builds the section anew, so a copy is held to the same rules as a loaded plan."""
    plan = load_plan("gpt3-175b.yaml")
    with pytest.raises(PerfModelError, match=r"training.*global_batch_size"):
        plan.with_training(global_batch_size=-4)
    with pytest.raises(
        PerfModelError, match=r"num_gpus\(13\) is not a multiple of gpus_per_node\(8\)"
    ):
        plan.with_system(num_gpus=13)
    with pytest.raises(PerfModelError, match=r"parallel.*zero_stage"):
        plan.with_parallel(zero_stage=7)
    assert plan.with_parallel(tp=4).parallel.tp == 4 and plan.parallel.tp != 4


def test_one_precision_spec_gives_every_role_its_bytes():
    from perfmodel.specs import Precision

    bf16 = Precision.of("bf16", grad_accum_fp32=True, optimizer="adam")
    assert (bf16.gemm_bytes, bf16.activation_bytes, bf16.weight_bytes, bf16.gradient_bytes) == (
        2,
        2,
        2,
        4,
    )
    assert bf16.optimizer_bytes == 12 and bf16.master_weights and not bf16.loss_scaling
    fp8 = Precision.of("fp8", grad_accum_fp32=False, optimizer="adam")
    assert (fp8.gemm_bytes, fp8.activation_bytes, fp8.weight_bytes) == (
        1,
        2,
        2,
    )  # fp8 GEMMs, bf16 elsewhere
    fp32 = Precision.of("fp32", grad_accum_fp32=False, optimizer="sgd")
    assert (fp32.weight_bytes, fp32.gradient_bytes, fp32.optimizer_bytes, fp32.master_weights) == (
        4,
        4,
        8,
        False,
    )
    assert Precision.of("fp16", False, "adam").loss_scaling
