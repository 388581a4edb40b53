"""Sequence parallelism: seed 002 worked numbers (70B example, shape trace, equal bytes)."""

import pytest

from perfmodel.cost import sp
from perfmodel.units import GB, MB


def test_70b_norm_inputs():  # seed 002: h=8192, L=80, t=8, s=16384, b=1
    tp_only = sp.norm_input_bytes(16384, 8192, 1, 8, False)
    with_sp = sp.norm_input_bytes(16384, 8192, 1, 8, True)
    assert tp_only == pytest.approx(268.4 * MB, rel=1e-3)
    assert 80 * tp_only == pytest.approx(21.5 * GB, rel=2e-3)
    assert with_sp == pytest.approx(33.55 * MB, rel=1e-3)
    assert 80 * with_sp == pytest.approx(2.68 * GB, rel=2e-3)


def test_shape_trace_peaks():  # seed 002: s=4096, h=4096, t=8 -> 33.6 MB vs 4.2 MB (= 1/t)
    tp = sp.shape_trace(4096, 4096, 8, False)
    tsp = sp.shape_trace(4096, 4096, 8, True)
    assert sp.resident_peak_bytes(tp) == pytest.approx(33.6 * MB, rel=2e-3)
    assert sp.resident_peak_bytes(tsp) == pytest.approx(4.2 * MB, rel=2e-3)
    assert sp.resident_peak_bytes(tsp) * 8 == sp.resident_peak_bytes(tp)
    assert sp.transient_peak_bytes(tsp) == sp.resident_peak_bytes(
        tp
    )  # g, row_out are full-size buffers


def test_sp_moves_the_same_bytes_with_twice_the_operations():  # seed 002, section 4
    tp = sp.block_comm(4096, 4096, 1, 8, False)
    tsp = sp.block_comm(4096, 4096, 1, 8, True)
    expected = 4 * 7 / 8 * 4096 * 4096 * 2
    assert tp["bytes_per_rank"] == pytest.approx(expected)
    assert tsp["bytes_per_rank"] == pytest.approx(expected)
    assert tsp["num_operations"] == 2 * tp["num_operations"] == 4


def test_linear_layer_dp_vs_tp_volume():  # seed 000, 2.3: C_in = 4096, B = 8 -> 512x
    r = sp.linear_layer_comm(4096, 4096, 8)
    assert r["dp_over_tp"] == 512
    assert r["tp_partition_output"] == 8 * 4096 and r["data_parallel"] == 4096 * 4096


def test_tp_comm_compute_ratio():  # seed 000, 4.2: 8(t-1)P/(24 h BW) = 28.5% on NVLink; 3.4x on IB
    nv = sp.tp_comm_compute_ratio(8, 150e12, 4096, 300e9)
    assert nv == pytest.approx(0.285, abs=5e-4)
    ib = sp.tp_comm_compute_ratio(8, 150e12, 4096, 25e9)
    assert ib == pytest.approx(9.4e-3 / 2.75e-3, rel=0.01)  # 9.4 ms of comm over 2.75 ms of compute
    layer_nv = 2.75e-3 + 0.87e-3
    layer_ib = 2.75e-3 + 2.75e-3 * ib
    assert layer_ib == pytest.approx(12.2e-3, rel=0.01) and layer_ib / layer_nv == pytest.approx(
        3.4, abs=0.05
    )
