"""The trace reader (perfmodel/inputs/trace.py): kernel classes as Holistic Trace Analysis has them,
exposed communication and idle time, streaming in bounded memory, an nsys summary, bad input.

Synthetic traces are generated here with known kernel times; the real one is Holistic Trace
Analysis's sample trace (tests/data/traces/README.md)."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from pathlib import Path

import pytest

from perfmodel.errors import PerfModelError
from perfmodel.inputs import trace

DATA = Path(__file__).parent / "data" / "traces"

NAMES = {
    "gemm_bf16": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64",
    "gemm_fp8": "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128",
    "gemm_fp4": "cutlass3x_sm100_bstensorop_gemm_ue4m3xe2m1_ue4m3xe2m1_f32_bf16",
    "attention": "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>",
    "elementwise": "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor>",
    "comm": "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
    "memcpy": "Memcpy HtoD (Pinned -> Device)",
}


# kernel names (argument lists abridged) from DeepSeek's DualPipe training trace
# (deepseek-ai/profile-data train.json, H800, DeepSeek-V3 EP64; tests/data/traces/README.md):
# DeepEP's all-to-all is communication though not NCCL's, the FP8 grouped GEMMs are GEMMs and
# their library's helpers are not
DEEPSEEK = [
    ("void dpsk::ep::internode::combine<false, 8, __nv_bfloat16, 8, 2, 16, 24>(int4*)", "comm"),
    ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*, float*, long*)", "comm"),
    ("void dpsk::ep::internode::cached_notify<false>(int, int, int, int, int*)", "comm"),
    (
        (
            "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel>"
            "(dpsk::grouped_gemm::cuda::fp8_dptp128c_acc::GemmKernel::Params)"
        ),
        "gemm_fp8",
    ),
    (
        (
            "void cutlass::device_kernel<dpsk::grouped_gemm::cuda::"
            "m_grouped_fp8_ptp128c::GemmKernel>"
            "(dpsk::grouped_gemm::cuda::m_grouped_fp8_ptp128c::GemmKernel::Params)"
        ),
        "gemm_fp8",
    ),
    (
        (
            "void dpsk::grouped_gemm::cuda::utils::transpose<512, 128, 4, 4>(unsigned char const*,"
            " unsigned char*, int, int, int, int)"
        ),
        "elementwise",
    ),
    (
        (
            "dpsk::grouped_gemm::cuda::utils::fill_tensormaps_kernel(CUtensorMap_st,"
            " CUtensorMap_st*, void*, int, long)"
        ),
        "elementwise",
    ),
    (
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x128x64_warpgroupsize1x1x1_execute"
            "_segment_k_off_kernel__5x_cublas"
        ),
        "gemm_bf16",
    ),
    (
        (
            "void flash::compute_attn_ws<Flash_fwd_kernel_traits<192, 128, 128, 12, 2, false, 1,"
            " cutlass::bfloat16_t, 128>, true>(flash::CollectiveMainloopFwd)"
        ),
        "attention",
    ),
    (
        (
            "void cuda::per_token_cast_to_fp8_with_channels<__nv_bfloat16, 128, false, 128, false>"
            "(__nv_bfloat16 const*, int)"
        ),
        "elementwise",
    ),
]
# and from TraceLens's B200 vLLM trace (tests/data/traces/tracelens_b200_vllm_kernels.json.gz):
# TensorRT-LLM's generated MXFP4 GEMMs, a symmetric-memory all-reduce, names whose argument types
# or template types mention flashinfer or cutlass
TRACELENS_B200 = [
    ("bmm_MxE4m3_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1", "gemm_fp4"),
    ("bmm_Bfloat16_MxE2m1MxE4m3_Fp32_t128x16x256u2_s3_et128x16_m128x16x32_cga1x1x1", "gemm_fp4"),
    (
        (
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>"
            "(c10::BFloat16*, unsigned long)"
        ),
        "comm",
    ),
    (
        (
            "void tensorrt_llm::kernels::quantize_with_block_size<"
            "(tensorrt_llm::BlockScaleQuantizationType)2,"
            " __nv_bfloat16, 32, true>(int, int, flashinfer::QuantizationSFLayout)"
        ),
        "elementwise",
    ),
    (
        (
            "void moe::dev::finalize::finalizeKernelVecLoad<"
            "moe::dev::finalize::KernelParams<cutlass::bfloat16_t,"
            " cutlass::bfloat16_t>>(moe::dev::finalize::KernelParams)"
        ),
        "elementwise",
    ),
    (
        (
            "void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16, unsigned char>(__nv_bfloat16"
            " const*)"
        ),
        "elementwise",
    ),
    (
        "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
        "attention",
    ),
]


def kernel(name: str, ts: float, dur: float, stream: int = 7) -> dict:
    cat = "gpu_memcpy" if name.startswith("Memcpy") else "kernel"
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": stream,
        "ts": ts,
        "dur": dur,
        "args": {"device": 0, "stream": stream},
    }


def synthetic(steps: int = 2) -> tuple[list[dict], dict]:
    """A trace of ``steps`` steps, each (microseconds): GEMMs 300 bf16 + 100 fp8 + 50 fp4,
    attention 200, elementwise 80, a 100 us memcpy, and an all-gather of 150 on a second stream of
    which 50 overlap compute; 70 us idle inside each step."""
    events: list[dict] = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 5}
    ]
    t = 1000.0
    for s in range(steps):
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s}",
                "pid": 1,
                "tid": 1,
                "ts": t - 10,
                "dur": 1100,
            }
        )
        start = t
        for cls, dur in (("gemm_bf16", 300), ("gemm_fp8", 100), ("gemm_fp4", 50)):
            events.append(kernel(NAMES[cls], t, dur))
            t += dur
        events.append(kernel(NAMES["attention"], t, 200))
        t += 200
        events.append(kernel(NAMES["elementwise"], t, 80))
        t += 80
        # the all-gather starts 50 us before compute ends, on another stream
        events.append(kernel(NAMES["comm"], t - 50, 150, stream=20))
        t += 100
        events.append(kernel(NAMES["memcpy"], t, 100))
        t += 100
        t += 70  # idle
        assert t - start == 1000
    known = {
        "gemm_bf16": 300e-6,
        "gemm_fp8": 100e-6,
        "gemm_fp4": 50e-6,
        "attention": 200e-6,
        "elementwise": 80e-6,
        "comm": 150e-6,
        "memcpy": 100e-6,
        "exposed_comm": 100e-6,
        # the last step ends at its memcpy: the span stops there, so its trailing 70 us are not in
        # it: 70 us in every step but the last
        "idle": 70e-6 * (steps - 1) / steps,
    }
    return events, known


def write(path: Path, events: list[dict], bare: bool = False) -> Path:
    body = events if bare else {"schemaVersion": 1, "deviceProperties": [], "traceEvents": events}
    text = json.dumps(body, indent=1)
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


@pytest.mark.parametrize(
    "name,cls",
    [(NAMES[c], c) for c in NAMES]
    + [
        ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t", "comm"),
        ("Memset (Device)", "memcpy"),
        ("void fmha_cutlassF_f16_aligned_64x64_rf_sm80", "attention"),
        ("nvjet_tst_128x256_64x4_1x2_h_bz_coopA_NNT", "gemm_bf16"),
        ("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn", "gemm_bf16"),
        ("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0", "gemm_bf16"),
        # fbgemm's embedding and cast kernels are not GEMMs
        ("void fbgemm_gpu::embedding_forward_kernel<float>", "elementwise"),
        ("void at::native::reduce_kernel<512, 1>", "elementwise"),
        *DEEPSEEK,
        *TRACELENS_B200,
    ],
)
def test_kernel_classes(name: str, cls: str) -> None:
    assert trace.kernel_class(name) == cls


@pytest.mark.parametrize("suffix,bare", [(".json", False), (".json.gz", False), (".json", True)])
def test_synthetic_trace_known_times(tmp_path: Path, suffix: str, bare: bool) -> None:
    events, known = synthetic(steps=3)
    s = trace.read(write(tmp_path / f"t{suffix}", events, bare))
    assert s.steps == 3
    got = s.per_step()
    for key, value in known.items():
        assert got[key] == pytest.approx(value, abs=1e-9), key
    assert s.collectives_s == {"AllGather": pytest.approx(3 * 150e-6)}


def test_small_chunks_cross_every_boundary(tmp_path: Path) -> None:
    """An event split across reads is read whole: the same figures at 7-character chunks."""
    events, _known = synthetic(steps=2)
    path = write(tmp_path / "t.json", events)
    whole = list(trace.iter_events(path))
    assert list(trace.iter_events(path, chunk=7)) == whole == events


def test_large_trace_streams_in_bounded_memory(tmp_path: Path, monkeypatch) -> None:
    """A 2 MB trace read 64 KB at a time takes under a quarter of its size in Python memory: the
    events stream (at the default 1 MB chunks a 1 GB trace takes a few MB the same way)."""
    monkeypatch.setattr(trace, "CHUNK", 1 << 16)
    events, _ = synthetic(steps=2)
    filler = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::add",
        "pid": 1,
        "tid": 1,
        "dur": 3,
        "args": {"Input Dims": [[4096, 4096], [4096, 4096]], "External id": 1},
    }
    path = tmp_path / "big.json"
    with open(path, "w") as fh:
        fh.write('{"traceEvents": [')
        for e in events:
            fh.write(json.dumps(e) + ",\n")
        piece = ",\n".join(json.dumps({**filler, "ts": i}) for i in range(1000))
        while fh.tell() < 2e6:
            fh.write(piece + ",\n")
        fh.write(json.dumps({**filler, "ts": 0}) + "]}")
    tracemalloc.start()
    s = trace.read(path)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert s.steps == 2 and s.kernels["gemm_bf16"] == 2
    assert peak < 0.5e6, f"peak {peak / 1e6:.1f} MB reading a 2 MB trace"


def test_hta_sample_trace() -> None:
    """HTA's sampled rank-0 trace (128-rank training job): two ProfilerSteps, cutlass TF32 GEMMs
    and NCCL send/receive kernels; figures checked against a direct json.load of the file."""
    path = DATA / "hta_sampled_rank-0.json.gz"
    s = trace.read(path)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    nccl = sum(e["dur"] for e in kernels if "nccl" in e["name"].lower()) * 1e-6
    assert s.steps == 2
    assert sum(s.kernels.values()) == len(kernels)
    assert s.kernel_s["comm"] == pytest.approx(nccl)
    assert set(s.collectives_s) == {"SendRecv"}
    assert sum(s.kernel_s.values()) == pytest.approx(sum(e["dur"] for e in kernels) * 1e-6)
    assert s.kernels["gemm_bf16"] > 100 and s.kernels["attention"] == 0
    assert 0 < s.exposed_comm_s <= s.kernel_s["comm"]
    assert 0 < s.idle_s < s.span_s


def test_nsys_summary(tmp_path: Path) -> None:
    rows = [
        (
            '"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med (ns)","Min (ns)","Max (ns)",'
            '"StdDev (ns)","Name"'
        ),
        f'60.0,"6,000,000",30,200000,200000,100,300000,10,"{NAMES["gemm_bf16"]}"',
        f'30.0,3000000,10,300000,300000,100,300000,10,"{NAMES["attention"]}"',
        f'10.0,1000000,5,200000,200000,100,300000,10,"{NAMES["comm"]}"',
    ]
    path = tmp_path / "kern_sum.csv"
    path.write_text("\n".join(["Processing report...", *rows]) + "\n")
    s = trace.read(path, steps=2)
    got = s.per_step()
    assert got["gemm_bf16"] == pytest.approx(3e-3)
    assert got["attention"] == pytest.approx(1.5e-3)
    assert got["comm"] == pytest.approx(0.5e-3)
    assert got["idle"] is None and got["exposed_comm"] is None
    with pytest.raises(PerfModelError, match="trace_steps"):
        trace.read(path)


@pytest.mark.parametrize(
    "text,message",
    [
        ('{"traceEvents": [{"ph": "X", "cat": "kernel"', "truncated"),
        ('{"schemaVersion": 1}', "no traceEvents"),
        ('{"traceEvents": []}', "ProfilerStep"),
        ('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "a"}]}', "numeric ts"),
    ],
)
def test_bad_traces_name_the_fault(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(PerfModelError, match=message):
        trace.read(path)


def test_trace_without_kernels_and_two_gpus(tmp_path: Path) -> None:
    step = {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "ts": 0, "dur": 1}
    with pytest.raises(PerfModelError, match="no GPU kernel"):
        trace.read(write(tmp_path / "a.json", [step]))
    two = [step, kernel("k", 0, 1), {**kernel("k", 0, 1), "args": {"device": 1}}]
    with pytest.raises(PerfModelError, match="2 GPUs"):
        trace.read(write(tmp_path / "b.json", two))
    with pytest.raises(PerfModelError, match="must be a PyTorch"):
        trace.read(tmp_path / "x.txt")


def test_hta_amd_trace() -> None:
    """HTA's ROCm sample: Tensile GEMMs are GEMMs; two steps; totals as a direct read has them."""
    path = DATA / "hta_mi250_minitoy_train_ROCm6_2_kineto.json.gz"
    s = trace.read(path)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    gemms = [e for e in kernels if e["name"].startswith("Cijk_")]
    assert s.steps == 2
    assert s.kernels["gemm_bf16"] == len(gemms) == 2
    assert s.kernel_s["gemm_bf16"] == pytest.approx(sum(e["dur"] for e in gemms) * 1e-6)
    assert s.kernels["comm"] == 0 and s.exposed_comm_s == 0


@pytest.mark.parametrize(
    "name,kind",
    [
        (
            "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            "ReduceScatter",
        ),
        ("void dpsk::ep::internode::dispatch<false, 8, true, 8>(int4*)", "AllToAll"),
        ("void deep_ep::intranode::combine<__nv_bfloat16, 8, 768>(int4*)", "AllToAll"),
        (
            "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(x)",
            "AllReduce",
        ),
    ],
)
def test_collective_kinds(name: str, kind: str) -> None:
    assert trace.kernel_class(name) == "comm"
    assert trace.collective_kind(name) == kind


def _hta_class(name: str) -> str:
    """Holistic Trace Analysis's three classes (hta/common/types.py, get_kernel_type)."""
    import re

    if re.search(r"^nccl|ncclKernel|^hccl", name):
        return "communication"
    if re.search(r"^Memcpy|^Memset|^dma", name):
        return "memory"
    return "computation"


def test_tracelens_b200_trace() -> None:
    """TraceLens's B200 vLLM trace (MIT): every kernel in the class HTA gives it, except the
    symmetric-memory all-reduce, which HTA counts as computation and which moves data between
    GPUs; the computation split by kernel name; totals as a direct read of the file has them."""
    path = DATA / "tracelens_b200_vllm_kernels.json.gz"
    s = trace.read(path, steps=1)
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    kernels = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]

    def seconds(pred) -> float:
        return sum(e["dur"] for e in kernels if pred(e["name"])) * 1e-6

    multimem = seconds(lambda n: "multimem_all_reduce" in n)
    assert multimem > 1e-3  # 2.1 ms of it
    assert s.kernel_s["comm"] == pytest.approx(
        seconds(lambda n: _hta_class(n) == "communication") + multimem
    )
    assert s.kernel_s["memcpy"] == pytest.approx(seconds(lambda n: _hta_class(n) == "memory"))
    computation = sum(s.kernel_s[c] for c in trace.COMPUTE_CLASSES)
    assert computation == pytest.approx(
        seconds(lambda n: _hta_class(n) == "computation") - multimem
    )
    assert s.kernel_s["gemm_fp4"] == pytest.approx(seconds(lambda n: n.startswith("bmm_")))
    assert s.kernel_s["gemm_bf16"] == pytest.approx(seconds(lambda n: n.startswith("nvjet")))
    assert s.kernel_s["attention"] == pytest.approx(seconds(lambda n: n.startswith("fmha")))
    assert s.kernels["gemm_fp8"] == 0
    assert set(s.collectives_s) == {"AllReduce", "AllGather"}
    # one decode step of a server: its GPU idles between kernels most of the span
    assert 0 < s.idle_s < s.span_s and s.exposed_comm_s == pytest.approx(s.kernel_s["comm"])
