"""Fuzzing as a hostile or careless user would (issue 14): generated plans, Hugging Face configs and
CLI arguments, run in-process. The contract: a clean one-line error (exit 1 or 2, never "internal
error"), or a result whose numbers are finite; never NaN or Infinity in an exit-0 output.

CI runs a bounded number of examples; set PERFMODEL_FUZZ_EXAMPLES=2000 to run more locally."""

import json
import math
import os
import re

import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from perfmodel.cli import main
from perfmodel.engine.answer import LAYOUT_KNOBS
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets

EXAMPLES = int(os.environ.get("PERFMODEL_FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
NONFINITE = re.compile(r"\b(nan|inf|infinity)\b", re.IGNORECASE)

BASE = {
    "model": {
        "name": "fuzz",
        "num_layers": 8,
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "vocab_size": 32000,
        "seq_length": 2048,
        "mlp": "swiglu",
    },
    "system": {
        "gpu": "h100-sxm",
        "num_gpus": 16,
        "gpus_per_node": 8,
        "intra_node_link": "nvlink4",
        "inter_node_link": "ib-ndr",
    },
    "training": {"global_batch_size": 64, "dtype": "bf16"},
    "parallel": {"tp": 2, "pp": 2, "micro_batch_size": 1},
}
NASTY = st.one_of(
    st.booleans(),
    st.none(),
    st.integers(-3, 3),
    st.integers(10**6, 10**30),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e-300, 1e308, 5e-324, -0.0]),
    st.sampled_from(
        [
            "yes",
            "no",
            "on",
            "8:32",
            "0b1000000000",
            "01000",
            "",
            "80 GB",
            "1e400",
            "abc",
            "nan",
            "inf",
            "2039 GB/s",
            "312 TFLOPS",
            "2 us",
            "megatron-2021",
            "fp8",
            "-4",
        ]
    ),
    st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(st.sampled_from(["a", "tp"]), st.integers(0, 2), max_size=2),
)
FIELDS = {
    "model": [
        "num_layers",
        "hidden_size",
        "num_attention_heads",
        "num_query_groups",
        "vocab_size",
        "seq_length",
        "mlp",
        "num_moe_experts",
        "moe_router_topk",
        "kv_channels",
        "unknown_key",
    ],
    "system": [
        "gpu",
        "num_gpus",
        "gpus_per_node",
        "intra_node_link",
        "inter_node_link",
        "placement",
    ],
    "training": [
        "global_batch_size",
        "dtype",
        "framework",
        "seq_length",
        "flash_attention",
        "optimizer",
    ],
    "parallel": list(LAYOUT_KNOBS),
}
mutation = st.tuples(st.sampled_from(sorted(FIELDS)), st.data())


def mutate(data, n):
    plan = json.loads(json.dumps(BASE))
    for _ in range(n):
        section = data.draw(st.sampled_from(sorted(FIELDS)))
        key = data.draw(st.sampled_from(FIELDS[section]))
        plan[section][key] = data.draw(NASTY)
    return plan


def to_yaml(plan) -> str:
    def scalar(v):
        if isinstance(v, float) and math.isnan(v):
            return ".nan"
        if isinstance(v, float) and math.isinf(v):
            return ".inf" if v > 0 else "-.inf"
        return json.dumps(v)

    lines = []
    for section, body in plan.items():
        lines.append(f"{section}:")
        for k, v in body.items():
            lines.append(
                f"  {k}: {scalar(v) if not isinstance(v, (list, dict)) else json.dumps(v)}"
            )
    return "\n".join(lines) + "\n"


def assert_contract(r, args):
    assert r.exit_code in (0, 1, 2), (args, r.exit_code, r.output[-400:])
    assert "internal error" not in r.output, (args, r.output[-600:])
    assert not isinstance(r.exception, Exception) or isinstance(r.exception, SystemExit), (
        args,
        r.exception,
    )
    if r.exit_code == 0:
        assert not NONFINITE.search(r.output), (args, NONFINITE.search(r.output), r.output[-400:])
    for line in r.output.splitlines():
        assert len(line) < 2000, (args, len(line))


@FUZZ
@given(
    data=st.data(), n=st.integers(1, 3), command=st.sampled_from(["estimate", "memory", "check"])
)
def test_generated_plans(tmp_path_factory, data, n, command):
    f = tmp_path_factory.mktemp("fuzz") / "plan.yaml"
    f.write_text(to_yaml(mutate(data, n)), encoding="utf-8")
    args = [command, str(f), "--json"] if command != "check" else [command, str(f)]
    r = CliRunner().invoke(main, args)
    assert_contract(r, args)
    if r.exit_code == 0 and command != "check":
        json.loads(r.output, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))


HF = {
    "model_type": "mixtral",
    "hidden_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 4,
    "intermediate_size": 2048,
    "vocab_size": 32000,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
}
HF_KEYS = sorted(HF) + [
    "head_dim",
    "text_config",
    "num_nextn_predict_layers",
    "mlp_only_layers",
    "decoder_sparse_step",
    "n_routed_experts",
    "kv_lora_rank",
    "hidden_act",
    "layer_types",
]


@FUZZ
@given(data=st.data(), n=st.integers(1, 3))
def test_generated_hf_configs(data, n):
    cfg = dict(HF)
    for _ in range(n):
        cfg[data.draw(st.sampled_from(HF_KEYS))] = data.draw(NASTY)
    try:
        m = presets.model_from_hf_config(cfg)
    except PerfModelError as e:
        assert len(str(e)) < 2000
        return
    assert m.num_layers >= 1 and m.hidden_size >= 1


NUMBER = st.one_of(
    st.integers(-5, 10**6),
    st.just(10**400),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["nan", "inf", "-1", "0", "5e-324", "1e308", "abc", ""]),
)


@FUZZ
@given(
    command=st.sampled_from(["bubble", "roofline", "comm", "sp", "schedule"]),
    a=NUMBER,
    b=NUMBER,
    c=NUMBER,
)
def test_generated_cli_arguments(command, a, b, c):
    s = [str(x) for x in (a, b, c)]
    args = {
        "bubble": ["bubble", "-m", s[0], "-p", s[1], "--target", s[2], "--json"],
        "roofline": ["roofline", "--mbs", s[0], "--seq-len", s[1], "--tp", "8", "--json"],
        "comm": [
            "comm",
            "all-reduce",
            "--size",
            s[0],
            "--ranks",
            s[1],
            "--latency",
            s[2],
            "--json",
        ],
        "sp": ["sp", "--seq", s[0], "--hidden", s[1], "--tp", s[2], "--json"],
        "schedule": ["schedule", "-m", s[0], "-p", s[1], "--latency", s[2], "--json"],
    }[command]
    r = CliRunner().invoke(main, args)
    assert_contract(r, args)


def test_issue_14_regressions(tmp_path):
    """The failing examples the issue lists, each a clean error or a correct answer."""
    runner = CliRunner()
    bomb = "a: &a [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi")
    )
    cases = {
        "alias bomb in gpu": "model: gpt3-175b\nsystem:\n  gpu: {x: *i}\n",
        "deep nesting": "model: " + "[" * 1000 + "]" * 1000 + "\n",
        "bool as number": (
            "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 8, intra_node_link: nvlink3, "
            "inter_node_link: ib-hdr}\ntraining: {global_batch_size: 8, seq_length: yes}\n"
        ),
        "octal": (
            "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 8, intra_node_link: nvlink3, "
            "inter_node_link: ib-hdr}\ntraining: {global_batch_size: 0b1000}\n"
        ),
        "duplicate key": "model: gpt3-175b\nmodel: llama3-8b\n",
        "400-digit quantity": (
            "model: gpt3-175b\nsystem: {gpu: {name: x, peak_flops_per_s: {bf16: "
            + "9" * 400
            + "}, hbm_capacity_bytes: 80 GB, hbm_bandwidth_bytes_per_s: 2 TB/s, num_sms: 100, "
            "l2_bytes: 40 MB}, num_gpus: 8, intra_node_link: nvlink3, inter_node_link: ib-hdr}\n"
            "training: {global_batch_size: 8}\n"
        ),
        "tiny HBM": (
            "model: gpt3-175b\nsystem: {gpu: {name: x, peak_flops_per_s: {bf16: 312 TFLOPS},"
            " hbm_capacity_bytes: 5e-324, hbm_bandwidth_bytes_per_s: 2 TB/s, num_sms: 100,"
            " l2_bytes: 40 MB}, num_gpus: 8, intra_node_link: nvlink3, inter_node_link:"
            " ib-hdr}\ntraining: {global_batch_size: 8}\n"
        ),
        "slow link": (
            "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 8, intra_node_link: {name: x, "
            "bandwidth_bytes_per_s: 1e-300, latency_s: 1us}, inter_node_link: ib-hdr}\n"
            "training: {global_batch_size: 8}\n"
        ),
        "huge latency": (
            "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 8, intra_node_link: {name: x, "
            "bandwidth_bytes_per_s: 300 GB/s, latency_s: 1.7e308}, inter_node_link: ib-hdr}\n"
            "training: {global_batch_size: 8}\n"
        ),
        "huge batch": (
            "model: gpt3-175b\nsystem: {gpu: a100-80gb, num_gpus: 8, intra_node_link: nvlink3, "
            "inter_node_link: ib-hdr}\ntraining: {global_batch_size: 1000000000000}\n"
        ),
    }
    cases["alias bomb in gpu"] = bomb + "model: gpt3-175b\nsystem:\n  gpu: {x: *i}\n"
    for name, text in cases.items():
        f = tmp_path / "p.yaml"
        f.write_text(text, encoding="utf-8")
        for command in (["estimate", str(f)], ["check", str(f)]):
            r = runner.invoke(main, command)
            assert r.exit_code in (0, 1) and "internal error" not in r.output, (
                name,
                r.output[-300:],
            )
            assert max(len(x) for x in r.output.splitlines() or [""]) < 1000, name
            if r.exit_code == 0:
                assert not NONFINITE.search(r.output), name
    r = runner.invoke(main, ["schedule", "-m", "8", "-p", "4", "--latency", "nan"])
    assert r.exit_code == 2 and "finite" in r.output
    r = runner.invoke(main, ["schedule", "-m", "8", "-p", "4", "--json"])
    sim = json.loads(r.output)
    assert (
        sim["step_time"] == 33 and round(100 * sim["bubble_over_step"], 1) == 27.3
    )  # SPEC 9: m=8, p=4
    r = runner.invoke(main, ["schedule", "-m", "100000000", "-p", "4"])
    assert r.exit_code == 1 and "blocks exceed" in r.output
    for args in (
        ["bubble", "-m", "8", "-p", "4", "--target", "5e-324"],
        ["bubble", "-m", "1" + "0" * 400, "-p", "4"],
        ["roofline", "--mbs", "1" + "0" * 400],
        ["plan", "gpt3-175b.yaml", "--gpus", "1099511627776"],
    ):
        r = runner.invoke(main, args)
        assert r.exit_code in (1, 2) and "internal error" not in r.output, args
    (tmp_path / "x.txt").write_text("")
    r = runner.invoke(main, ["bubble", "-m", "8", "-p", "4", "--plot", str(tmp_path / "x.txt")])
    # a usage error (exit 2), refused before any work
    assert r.exit_code == 2 and "--plot" in r.output and "internal error" not in r.output
    f = tmp_path / "config.json"
    f.write_text(json.dumps({**HF, "tie_word_embeddings": "false"}))
    r = runner.invoke(main, ["roofline", "--mbs", "1", "--model", str(f)])
    assert r.exit_code == 1 and "tie_word_embeddings must be true or false" in r.output
    f = tmp_path / "bom.yaml"
    f.write_text("\ufeff" + yaml.safe_dump(BASE), encoding="utf-8")
    assert runner.invoke(main, ["estimate", str(f)]).exit_code == 0


def test_huge_model_sizes_are_refused_before_they_exhaust_memory(tmp_path):
    """Found by a 200-example fuzz run: num_layers = 10^30 ran the estimate out of memory (24 GB),
    and 10^60 overflowed int64. Sizes are bounded far above any real model; at the bounds the tool
    still answers.
    """
    runner = CliRunner()
    for key, value, ok in (
        ("num_layers", 10**30, False),
        ("num_layers", 100_001, False),
        ("seq_length", 2**27 + 1, False),
        ("num_layers", 100_000, True),
        ("vocab_size", 2**24, True),
        ("hidden_size", 2**20, True),
    ):
        plan = json.loads(json.dumps(BASE))
        plan["model"][key] = value
        if key == "hidden_size":
            plan["model"]["num_attention_heads"] = 2**16
        f = tmp_path / "p.yaml"
        f.write_text(to_yaml(plan), encoding="utf-8")
        r = runner.invoke(main, ["memory", str(f)])
        assert (
            "internal error" not in r.output and max(len(x) for x in r.output.splitlines()) < 300
        ), (key, value)
        if ok:
            assert r.exit_code == 0 and "fits" in r.output, (key, value, r.output[-300:])
        else:
            assert (
                r.exit_code == 1
                and f"model: {key}: Input should be less than or equal to" in r.output
            ), r.output
