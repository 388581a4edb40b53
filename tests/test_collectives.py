"""Alpha-beta collectives: SPEC 9 worked numbers (seed 000, sections 3.1, 4.2, 4.5)."""

import pytest

from perfmodel.cost import collectives as coll
from perfmodel.inputs import load_plan
from perfmodel.units import GB, MB, US, KiB


def test_64k_allreduce_on_ib_8_ranks():  # seed 000, 3.1: 112 KB per rank, 4.5 us + 28 us
    assert coll.bytes_per_rank("all-reduce", 64 * KiB, 8) == 112 * KiB
    lat, bw = coll.collective_time("all-reduce", 64 * KiB, 8, 25 * GB, 2 * US)
    assert lat == pytest.approx(28 * US)
    assert bw == pytest.approx(4.5 * US, rel=0.02)


def test_64k_allreduce_on_ib_32_ranks():  # seed 000, 3.1: 124 us latency + 5 us
    lat, bw = coll.collective_time("all-reduce", 64 * KiB, 32, 25 * GB, 2 * US)
    assert lat == pytest.approx(124 * US)
    assert bw == pytest.approx(5 * US, rel=0.03)


# seed 000, 4.2: 67.1 MB message, 117 MB per GPU, 0.87 ms per layer
def test_tp_layer_allreduce_on_nvlink():
    message = 8192 * 4096 * 2
    assert message == pytest.approx(67.1 * MB, rel=1e-3)
    assert coll.bytes_per_rank("all-reduce", message, 8) == pytest.approx(117 * MB, rel=5e-3)
    lat, bw = coll.collective_time("all-reduce", message, 8, 300 * GB, 3 * US)
    assert 2 * bw == pytest.approx(0.78e-3, rel=0.01)  # 235 MB / 300 GB/s
    assert 2 * lat == pytest.approx(0.084e-3)  # 28 steps x 3 us
    assert 2 * (lat + bw) == pytest.approx(0.87e-3, rel=0.01)


def test_other_collectives():  # SPEC 3
    assert (
        coll.ring_steps("all-gather", 8) == 7 and coll.wire_fraction("reduce-scatter", 8) == 7 / 8
    )
    assert coll.collective_time("p2p", 1e6, 2, 1e9, 1e-6) == pytest.approx((1e-6, 1e-3))
    assert coll.collective_time("all-to-all", 8e6, 8, 1e9, 0) == pytest.approx((0, 7e-3))


def test_allreduce_is_reduce_scatter_plus_all_gather():  # SPEC 3 identity used by SP
    ar = sum(coll.collective_time("all-reduce", 1e8, 8, 1e11, 1e-6))
    rs = sum(coll.collective_time("reduce-scatter", 1e8, 8, 1e11, 1e-6))
    ag = sum(coll.collective_time("all-gather", 1e8, 8, 1e11, 1e-6))
    assert ar == pytest.approx(rs + ag)


def test_group_spanning_nodes_uses_inter_node_link():
    import numpy as np

    from perfmodel.engine.mesh import Mesh

    system = load_plan("gpt3-175b.yaml").system  # 8 A100 per node, NVLink3 inside, HDR between
    mesh = Mesh(np.array([8, 16]), np.array([1, 1]), np.array([64, 32]), system)
    link = mesh.link("tp", efficiency=False)
    assert list(link.bandwidth) == [300 * GB, 25 * GB] and list(link.latency) == [3 * US, 2 * US]


def test_single_rank_costs_nothing():
    assert coll.collective_time("all-reduce", 1e9, 1, 1e9, 1e-6) == (0, 0)


def test_overlapped_collective_pays_its_excess_and_a_contention_share():
    # 3 ms of all-reduce hidden under 10 ms of compute with penalty 0.6: 1.8 ms on the critical path
    assert coll.overlapped_time(3e-3, 10e-3, 0.6) == pytest.approx(1.8e-3)
    # 10 ms under a 4 ms window, penalty 0.5: 6 ms exposed + 0.5 x 4 ms
    assert coll.overlapped_time(10e-3, 4e-3, 0.5) == pytest.approx(8e-3)
    assert coll.overlapped_time(10e-3, 4e-3, 1.0) == pytest.approx(
        10e-3
    )  # penalty 1: no gain at all


def test_deepep_nic_carries_the_node_load_not_the_rank_load():
    """Issue 21, DeepEP across nodes: a token crosses to the GPU of the same in-node index on each
    target node and is forwarded over NVLink there (DeepSeek-V3 report Sec. 3.2.2), so a NIC
    receives its node's share of the routed tokens. Qwen3-235B's zoo layout: EP 32 on 4 nodes of
    8, 2,048 tokens a rank, top-8, hidden 4,096, BF16, the busiest rank at 1.5x the mean: the node
    sums 8 ranks, its excess 0.5 / sqrt(8), so 1.177x. The NIC carries 24/32 of the copies, 0.450
    of them after the node dedup: 2048 x 8 x 4096 x 2 B x 1.177 x 0.75 x 0.450 = 53.3 MB, 1.25 ms
    at 42.5 GB/s, 1.26 ms with 3 x 2 us of latency (one RDMA message to each of the 3 other
    nodes' GPU of its index, issue 38); NCCL's all-to-all keeps the busiest rank's 1.5x and
    its 24 remote peers' latencies.
    """
    from perfmodel.cost.layer import Link

    assert float(coll.node_imbalance(1.5, 32, 8)) == pytest.approx(1 + 0.5 / 8**0.5)
    assert float(coll.node_imbalance(1.5, 8, 8)) == pytest.approx(1 + 0.5 / 8**0.5)
    assert float(coll.node_imbalance(1.0, 32, 8)) == 1.0
    link = Link(42.5 * GB, 2 * US, 382.5 * GB, 3 * US, ranks_per_node=8, spans=True)
    sent = 2048 * 8 * 4096 * 2 * 1.5  # bytes a rank dispatches, the busiest rank's load
    nic = 2048 * 8 * 4096 * 2 * (1 + 0.5 / 8**0.5) * 24 / 32 * float(coll.node_dedup(32, 8, 8))
    assert nic == pytest.approx(53.3 * MB, rel=2e-3)
    deepep = float(link.seconds("all-to-all", sent, 32, dedup_k=8, imbalance=1.5))
    assert deepep == pytest.approx(nic / (42.5 * GB) + 3 * 2 * US)
    assert deepep == pytest.approx(1.26e-3, rel=0.01)
    nccl = float(link.seconds("all-to-all", sent, 32, imbalance=1.5))
    assert nccl == pytest.approx(sent * 24 / 32 / (42.5 * GB) + 24 * 2 * US)
