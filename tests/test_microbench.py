"""Calibration from microbenchmarks (issue 39 item 4): nccl-tests' output and a GEMM sweep read,
fitted per link tier and per format, and the probe script that writes both, run on the CPU."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import says

from perfmodel import inputs
from perfmodel.cli import main
from perfmodel.cost import collectives as coll
from perfmodel.errors import PerfModelError
from perfmodel.inputs import gemm_sweep, nccl_tests
from perfmodel.review import calibrate_micro as cm

DATA = Path(__file__).parent / "data" / "microbench"
ROOT = Path(__file__).parents[1]
PUBLISHED = DATA / "all_reduce_perf_2x8_h100.txt"
HEADER = (
    "# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5\n"
    "#       size         count      type   redop    root     time   algbw   busbw #wrong"
    "     time   algbw   busbw #wrong\n"
    "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
    "            (us)  (GB/s)  (GB/s)\n"
)


@pytest.fixture(scope="module")
def plan():
    return inputs.load("llama3-8b-h100").plan


def synthetic(path: Path, kind: str, n: int, bw: float, alpha: float) -> Path:
    """An nccl-tests table on one node from SPEC 3's ring: steps x alpha + wire bytes / bw."""
    rows = []
    for e in range(3, 31):
        size = 2.0**e
        t = float(coll.ring_steps(kind, n)) * alpha + float(coll.wire_fraction(kind, n)) * size / bw
        alg = size / t / 1e9
        bus = alg * nccl_tests.bus_factor(kind, n)
        rows.append(
            f"{int(size):12d} {int(size) // 4:12d} float sum -1 {t * 1e6:9.2f} {alg:7.2f}"
            f" {bus:7.2f} 0 {t * 1e6:9.2f} {alg:7.2f} {bus:7.2f} 0"
        )
    path.write_text(HEADER + "\n".join(rows) + "\n")
    return path


def test_published_nccl_tests_output_is_read():
    """The A3 Mega run (16 H100 on two hosts): ranks and nodes from its '#  Rank' lines, the
    out-of-place columns as printed, the collective from the file's name."""
    t = nccl_tests.read(PUBLISHED)
    assert (t.collective, t.ranks, t.nodes) == ("all-reduce", 16, 2)
    assert t.gpu == "NVIDIA H100 80GB HBM3"
    assert len(t.sizes) == 31 and t.sizes[0] == 8 and t.sizes[-1] == 8589934592
    assert t.times_s[-1] == pytest.approx(47535e-6) and t.busbw[-1] == pytest.approx(338.82e9)


def test_the_collective_is_told_by_busbw_over_algbw(tmp_path):
    """Without the name, busbw / algbw = 2 (n-1)/n = 1.875 on 16 ranks says all-reduce
    (nccl-tests doc/PERFORMANCE.md); (n-1)/n fits three collectives and is asked for."""
    plain = tmp_path / "run16.txt"
    shutil.copy(PUBLISHED, plain)
    assert nccl_tests.read(plain).collective == "all-reduce"
    ag = synthetic(tmp_path / "eight.txt", "all-gather", 8, 300e9, 3e-6)
    with pytest.raises(PerfModelError, match="say which"):
        nccl_tests.read(ag, ranks=8)
    assert nccl_tests.read(ag, "all_gather_perf", ranks=8).collective == "all-gather"


def test_older_header_without_root_is_read(tmp_path):
    """nccl-tests before the root column (and rccl-tests): size count type redop time algbw busbw
    error, twice."""
    f = tmp_path / "all_gather_perf.txt"
    f.write_text(
        "# nThread 1 nGpus 8\n#  size count type redop time algbw busbw error time algbw busbw"
        " error\n#  (B) (elements) (us) (GB/s) (GB/s) (us) (GB/s) (GB/s)\n"
        "  1048576 32768 float none 20.0 52.43 45.88 0 20.0 52.43 45.88 0\n"
    )
    t = nccl_tests.read(f)
    assert (t.collective, t.ranks) == ("all-gather", 8) and t.times_s == pytest.approx((20e-6,))


def test_not_nccl_output_is_one_line(tmp_path):
    f = tmp_path / "x.txt"
    f.write_text("hello\n")
    with pytest.raises(PerfModelError, match="not nccl-tests output"):
        nccl_tests.read(f)


def test_the_link_fit_recovers_a_known_tier(plan, tmp_path):
    """An intra-node all-gather measured at 1/1.25 of the modelled bus bandwidth and twice the
    modelled alpha gives comm_intra 1.25 and latency_intra 2.0 (time multipliers)."""
    link = plan.system.intra_node_link
    bw = link.bandwidth_bytes_per_s * link.efficiency / 1.25
    f = synthetic(tmp_path / "all_gather_perf.txt", "all-gather", 8, bw, 2 * link.latency_s)
    d = cm._fit_link(plan, nccl_tests.read(f, ranks=8))
    assert d["tier"] == "intra"
    assert d["bandwidth_factor"] == pytest.approx(1.25, rel=0.01)
    assert d["latency_factor"] == pytest.approx(2.0, rel=0.02)


def test_the_published_run_fits_the_inter_node_tier(plan):
    """Two nodes of eight: the NICs bound the model's rings (8 x 400 Gb/s x 0.85 = 340 GB/s);
    measured 327 GB/s at 1-8 GiB, so comm_inter is 1.04; its 123 us at small sizes, above the 84 us
    of the 28 intra-node steps, is the network's."""
    d = cm._fit_link(plan, nccl_tests.read(PUBLISHED))
    assert d["tier"] == "inter"
    assert d["model_busbw_GBps"] == pytest.approx(340.0)
    assert d["bandwidth_factor"] == pytest.approx(1.04, abs=0.01)
    assert d["latency_factor"] > 1


def test_bandwidth_above_the_links_is_refused(plan, tmp_path):
    f = synthetic(tmp_path / "all_gather_perf.txt", "all-gather", 8, 2000e9, 3e-6)
    with pytest.raises(PerfModelError, match="more than the 450 GB/s"):
        cm._fit_link(plan, nccl_tests.read(f, ranks=8))


def sweep(plan, path: Path, factor: float, k_scale: float) -> Path:
    """A GEMM sweep as the model times it, slowed by ``factor``, its K overhead x ``k_scale``."""
    shapes = [(m, n, k) for m in (2048, 8192) for n in (4096, 8192) for k in (128, 512, 4096)]
    pts = [gemm_sweep.GemmPoint(m, n, k, "bf16", 1.0) for m, n, k in shapes]
    times = cm._gemm_model(plan, pts, k_scale) * factor
    lines = ["M,N,K,dtype,time_us"] + [
        f"{p.M},{p.N},{p.K},bf16,{t * 1e6:.6f}" for p, t in zip(pts, times)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_gemm_fit_recovers_rate_and_k_overhead(plan, tmp_path):
    pts = gemm_sweep.read(sweep(plan, tmp_path / "g.csv", 1.15, 2.0))
    g = cm._fit_gemms(plan, pts)
    assert g["gemm_k"] == pytest.approx(2.0, rel=0.05)
    assert g["formats"]["gemm_bf16"]["factor"] == pytest.approx(1.15, rel=0.01)
    assert g["formats"]["gemm_bf16"]["rms_log_residual"] < 0.01


def test_a_gemm_faster_than_the_peak_is_refused(plan, tmp_path):
    f = tmp_path / "g.csv"
    f.write_text("M,N,K,dtype,tflops\n8192,8192,8192,bf16,1500\n")
    with pytest.raises(PerfModelError, match="above the 989 TFLOP/s peak"):
        cm._fit_gemms(plan, gemm_sweep.read(f))


@pytest.mark.parametrize(
    "text, needle",
    [
        ("M,N,tflops\n1,2,3\n", "missing k"),
        ("M,N,K,dtype,tflops\n1,2,3,int4,3\n", "dtype 'int4'"),
        ("M,N,K,dtype,tflops\n1,2,x,bf16,3\n", "K: 'x' is not a whole number"),
        ("M,N,K,dtype,tflops\n1,2,3,bf16,-3\n", "must be a finite number above 0"),
    ],
)
def test_gemm_sweep_errors_name_the_line(tmp_path, text, needle):
    f = tmp_path / "g.csv"
    f.write_text(text)
    with pytest.raises(PerfModelError, match=needle):
        gemm_sweep.read(f)


def test_calibrate_reads_microbenchmarks_and_a_plan_takes_them(plan, tmp_path):
    """MICRO.yaml -> CAL.yaml with per-tier link factors and the GEMM factor; a plan estimated with
    it is slower where the cluster measured slower, and says it is calibrated."""
    link = plan.system.intra_node_link
    synthetic(
        tmp_path / "all_gather_perf.txt",
        "all-gather",
        8,
        link.bandwidth_bytes_per_s * link.efficiency / 1.25,
        link.latency_s,
    )
    shutil.copy(PUBLISHED, tmp_path / "all_reduce_perf_2x8.txt")
    sweep(plan, tmp_path / "gemm.csv", 1.15, 1.0)
    (tmp_path / "micro.yaml").write_text(
        "plan: llama3-8b-h100\nnccl_tests:\n  - {file: all_gather_perf.txt, ranks: 8}\n"
        "  - all_reduce_perf_2x8.txt\ngemm_sweep: gemm.csv\n"
    )
    r = CliRunner().invoke(
        main, ["calibrate", str(tmp_path / "micro.yaml"), "-o", str(tmp_path / "cal.yaml")]
    )
    assert r.exit_code == 0, r.output
    assert says(r.output, "fitted on 3 microbenchmarks")
    r = CliRunner().invoke(
        main,
        ["estimate", "llama3-8b-h100", "--calibration", str(tmp_path / "cal.yaml"), "--json"],
    )
    assert r.exit_code == 0, r.output
    cal = json.loads(r.stdout)
    base = json.loads(CliRunner().invoke(main, ["estimate", "llama3-8b-h100", "--json"]).stdout)
    assert cal["step_time_s"] > base["step_time_s"]
    assert any("microbenchmarks" in a for a in cal["assumed"])


def test_probe_samples_read_back():
    """The probe's committed CPU samples are in the formats the readers take."""
    t = nccl_tests.read(DATA / "probe_cpu_all_reduce.txt")
    assert (t.collective, t.ranks, t.nodes) == ("all-reduce", 2, 1)
    pts = gemm_sweep.read(DATA / "probe_cpu_gemm.csv")
    assert {p.dtype for p in pts} == {"bf16"} and len(pts) == 12


def test_probe_runs_on_the_cpu(tmp_path):
    """benchmarks/probe/probe.py at toy sizes on the CPU (gloo, two processes): what it writes,
    perfmodel reads."""
    pytest.importorskip("torch", reason="the probe needs PyTorch (pip install torch)")
    probe = str(ROOT / "benchmarks" / "probe" / "probe.py")
    gemm, comm = tmp_path / "gemm.csv", tmp_path / "all_reduce_perf.txt"
    for args in (
        ["gemm", "--device", "cpu", "--dtypes", "bf16", "--repeat", "1", "--out", str(gemm)],
        [
            "comm",
            "--device",
            "cpu",
            "--world",
            "2",
            "--max-bytes",
            "4096",
            "--repeat",
            "1",
            "--out",
            str(comm),
        ],
    ):
        subprocess.run([sys.executable, probe, *args], check=True, timeout=300, cwd=tmp_path)
    assert len(gemm_sweep.read(gemm)) == 12
    t = nccl_tests.read(comm)
    assert (t.collective, t.ranks) == ("all-reduce", 2) and math.isfinite(np.sum(t.times_s))


def test_output_never_names_a_microbenchmark_input(plan, tmp_path):
    """-o naming one of MICRO.yaml's files (here the GEMM sweep) is refused before anything is
    written, as for RUNS.yaml's plans and traces."""
    sweep(plan, tmp_path / "gemm.csv", 1.0, 1.0)
    before = (tmp_path / "gemm.csv").read_text()
    (tmp_path / "micro.yaml").write_text("plan: llama3-8b-h100\ngemm_sweep: gemm.csv\n")
    r = CliRunner().invoke(
        main, ["calibrate", str(tmp_path / "micro.yaml"), "-o", str(tmp_path / "gemm.csv")]
    )
    assert r.exit_code == 1 and says(r.output, "gemm_sweep[0], an input of this calibration")
    assert (tmp_path / "gemm.csv").read_text() == before


def test_micro_plan_is_taken_beside_micro_yaml_never_from_the_cwd(tmp_path, monkeypatch):
    """plan: p.yaml names the file beside MICRO.yaml or a bundled plan; a p.yaml in the working
    directory is not read in its place (reproducer cal_plan_path_falls_back_to_cwd, for
    RUNS.yaml, holds the same rule)."""
    sub = tmp_path / "sub"
    sub.mkdir()
    shutil.copy(PUBLISHED, sub / "all_reduce_perf.txt")
    (sub / "micro.yaml").write_text("plan: p.yaml\nnccl_tests: [all_reduce_perf.txt]\n")
    (tmp_path / "p.yaml").write_text("model: llama3-8b\nsystem: {gpu: h100-sxm, num_gpus: 16}\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(PerfModelError, match=r"plan: no sub/p\.yaml"):
        cm.load("sub/micro.yaml")


@pytest.mark.parametrize(
    "entry, needle",
    [
        ("nccl_tests: [{file: a.txt, ranks: abc}]", "nccl_tests[0].ranks: a whole number"),
        ("nccl_tests: [{file: a.txt, ranks: 0}]", "nccl_tests[0].ranks: a whole number"),
        ("nccl_tests: [{file: a.txt, nodes: x}]", "nccl_tests[0].nodes: a whole number"),
        ("nccl_tests: [{file: a.txt, collective: 5}]", "nccl_tests[0].collective: a name"),
        ("gemm_sweep: {file: g.csv, dtype: 5}", "gemm_sweep.dtype: a name"),
        ("gemm_sweep: {file: g.csv, dtyp: bf16}", "unknown key 'dtyp'; allowed: file, dtype"),
    ],
)
def test_micro_yaml_entries_are_checked_by_name(tmp_path, entry, needle):
    (tmp_path / "m.yaml").write_text(f"plan: llama3-8b-h100\n{entry}\n")
    r = CliRunner().invoke(main, ["calibrate", str(tmp_path / "m.yaml"), "-o", str(tmp_path / "c")])
    assert r.exit_code == 1 and "internal error" not in r.output
    assert says(r.output, needle), r.output
