"""Event simulator of the zero-bubble family (issue 30): ZB-H1 and ZB-H2 (Qi et al. 2023, "Zero
Bubble Pipeline Parallelism", arXiv 2401.10241, Sec. 2) and the V-shaped ZB-V, V-Half and V-Min
(Qi et al. 2024, "Pipeline Parallelism with Controllable Memory", arXiv 2405.15362, Sec. 3-4).

The backward splits into B (the input gradient, which the stage before waits for) and W (the weight
gradient, which nothing waits for). Dependencies, with virtual stage u (one chunk of one rank):
    F(u, i) after F(u-1, i); B(u, i) after B(u+1, i) and F(u, i); W(u, i) after B(u, i),
plus the point-to-point time between ranks (none where the V turns on one rank). With two chunks a
rank (the V), rank r holds virtual stages r and 2p - 1 - r, so the first rank also runs the loss.

Each rank runs, whenever it is free, the first of (Qi et al. 2023 Sec. 3.2, their greedy rule):
the oldest ready B (the critical path), then a ready F if the rank's activation limit allows it
(the chunk nearer the loss first), then the oldest pending W, which fills what would idle. The
limit is what defines each schedule, in micro-batches of a rank's activations, a micro-batch's
activations held from its first F to its last W:
    zb-h1  p - s (1F1B's at stage s)              Qi 2023 Sec. 2.1: "no greater than 1F1B"
    zb-h2  2(p - s) - 1                           Qi 2023 Sec. 2.2: "(2p - 1) M_B"
    zbv    p                                      Qi 2023 Sec. 6 / Qi 2024 V-ZB: 1F1B's peak
    v-half (p + 2) // 2                           Qi 2024 V-Half; sail-sg's table "(p+2)//2"
    v-min  (p + 4) // 3                           Qi 2024 V-Min; "(p+4)//3"
A micro-batch is admitted (its first F) only where the whole of it fits: the V's second chunk then
always runs, and the walk cannot deadlock.

Two schedules run a fixed order instead: ZB-H1 (zb_h1_order) and interleaved zero-bubble
(interleaved_zb_order, PyTorch's ScheduleInterleavedZeroBubble): v chunks a rank looped as in
interleaved 1F1B (virtual stage u on rank u mod p), the backward split into B and W and each W
deferred behind its B to fill the ramp. Times in seconds (or any unit).
"""

from __future__ import annotations

import heapq
from typing import Any

from perfmodel.errors import PerfModelError

V_SHAPED = ("zbv", "v-half", "v-min")
LOOPED = ("interleaved-zb",)  # v chunks a rank, virtual stage u on rank u mod p
ZERO_BUBBLE = ("zb-h1", "zb-h2", *V_SHAPED, *LOOPED)


def chunks(schedule: str) -> int:
    """Chunks (virtual stages) a rank runs: two in the V, one otherwise (the looped schedules take
    the plan's vp; this is the least they need)."""
    return 2 if schedule in V_SHAPED or schedule in LOOPED else 1


def activation_limit(schedule: str, p: int, s: int) -> float:
    """Micro-batches of activations rank ``s`` may hold (module docstring's table)."""
    return float(
        {
            "zb-h1": p,
            "zb-h2": 2 * p - 1,
            "zbv": p,
            "v-half": (p + 2) // 2,
            "v-min": (p + 4) // 3,
        }[schedule]
    )


def rank_of(u: int, p: int, v: int, looped: bool = False) -> int:
    """The rank that runs virtual stage u: the V folds the second half back (u -> 2p - 1 - u); the
    looped (interleaved) schedules place chunk c of rank s at u = c p + s."""
    if looped:
        return u % p
    return u if v == 1 or u < p else 2 * p - 1 - u


def run(
    p: int, m: int, schedule: str, tf: list[float], tb: list[float], tw: list[float],
    latency: float, send: float, keep: bool, v: int = 0,
) -> tuple[float, list[float], list[float], list[tuple[Any, ...]]]:  # fmt: skip
    """Walk the schedule: (step time, busy time per rank, peak micro-batches held per rank,
    blocks as (rank, kind, micro-batch, chunk, start, end)). ``tf``, ``tb``, ``tw``: F, B and W
    seconds per virtual stage; ``latency`` delays the receiver, ``send`` holds the sender; ``v``
    the chunks a rank of a looped schedule runs (the others' are fixed)."""
    looped = schedule in LOOPED
    v = v if looped and v else chunks(schedule)
    last = p * v - 1
    ranks = [rank_of(u, p, v, looped) for u in range(p * v)]
    share = 1.0 / v  # a chunk's share of a micro-batch's activations on its rank
    limit = [] if looped else [activation_limit(schedule, p, s) for s in range(p)]
    f_cand: list[list[tuple[float, int, int]]] = [[] for _ in range(p)]  # (ready, u, i)
    b_cand: list[list[tuple[float, int, int]]] = [[] for _ in range(p)]
    w_queue: list[list[tuple[int, int]]] = [[] for _ in range(p)]
    f_done: list[list[float | None]] = [[None] * m for _ in range(p * v)]
    admitted, held, reserved = [0] * p, [0.0] * p, [0.0] * p
    peak, busy, free_at = [0.0] * p, [0.0] * p, [0.0] * p
    blocks: list[tuple[Any, ...]] = []
    todo = 3 * m * v * p
    wake = [(0.0, s) for s in range(p)]
    orders = fixed_orders(schedule, p, m, v)
    pos = [0] * p
    clock = 0.0
    while wake:
        t, s = heapq.heappop(wake)
        if free_at[s] > t:
            continue
        if orders:
            op = _next_in_order(orders[s], pos[s], t, f_cand[s], b_cand[s], w_queue[s])
            pos[s] += op is not None
        else:
            op = _pick(s, t, f_cand, b_cand, w_queue, admitted, m, reserved, limit, p, v)
        if op is None:
            future = [c[0] for c in f_cand[s] + b_cand[s] if c[0] > t]
            if future:
                heapq.heappush(wake, (min(future), s))
            continue
        kind, u, i = op
        dur = (tf if kind == "F" else tb if kind == "B" else tw)[u]
        nxt = u + 1 if kind == "F" else u - 1
        crosses = kind != "W" and 0 <= nxt <= last and ranks[nxt] != s
        end = t + dur
        free_at[s] = end + (send if crosses else 0.0)
        busy[s] += dur
        todo -= 1
        clock = max(clock, free_at[s])
        if keep:
            blocks.append((s, kind, i, u // p if looped else int(u >= p), t, end))
        arrive = free_at[s] + (latency if crosses else 0.0)
        if kind == "F":
            held[s] += share
            peak[s] = max(peak[s], held[s])
            f_done[u][i] = end
            if u == last:
                b_cand[s].append((end, u, i))
            else:
                f_cand[ranks[nxt]].append((arrive, nxt, i))
                heapq.heappush(wake, (arrive, ranks[nxt]))
        elif kind == "B":
            w_queue[s].append((u, i))
            if u > 0:  # F(u-1, i) ended before F(u, i) began
                ready = max(arrive, f_done[nxt][i] or 0.0)
                b_cand[ranks[nxt]].append((ready, nxt, i))
                heapq.heappush(wake, (ready, ranks[nxt]))
        else:
            held[s] -= share
            reserved[s] -= share
        heapq.heappush(wake, (free_at[s], s))
    if todo:
        raise PerfModelError(f"the {schedule} schedule deadlocked at p({p}), m({m})")
    return clock, busy, peak, blocks


def fixed_orders(schedule: str, p: int, m: int, v: int) -> list[list[tuple[str, int, int]]]:
    """Each rank's fixed order where the schedule has one (ZB-H1, interleaved zero-bubble); none
    for the greedy ones."""
    if schedule == "zb-h1":
        return [zb_h1_order(p, m, s) for s in range(p)]
    if schedule in LOOPED:
        return [interleaved_zb_order(p, m, v, s) for s in range(p)]
    return []


def _pick(
    s: int,
    t: float,
    f_cand: list[list[tuple[float, int, int]]],
    b_cand: list[list[tuple[float, int, int]]],
    w_queue: list[list[tuple[int, int]]],
    admitted: list[int],
    m: int,
    reserved: list[float],
    limit: list[float],
    p: int,
    v: int,
) -> tuple[str, int, int] | None:
    """The op rank ``s`` starts at ``t`` (the module docstring's rule), removed from its lists."""
    ready_b = [c for c in b_cand[s] if c[0] <= t]
    if ready_b:
        c = min(ready_b, key=lambda c: (c[2], -c[1]))
        b_cand[s].remove(c)
        return ("B", c[1], c[2])
    # a new micro-batch enters rank 0's first chunk whenever the limit allows
    ready_f = [c for c in f_cand[s] if c[0] <= t]
    if s == 0 and admitted[0] < m:
        ready_f.append((0.0, 0, admitted[0]))
    fits = reserved[s] + 1.0 <= limit[s] + 1e-9
    # the first chunk of a micro-batch on this rank reserves the whole micro-batch; the V's second
    # chunk on the rank was reserved with the first
    ok = [c for c in ready_f if (c[1] >= p and v == 2) or fits]
    if ok:
        c = max(ok, key=lambda c: (c[1], -c[2]))
        if c[1] == 0 and s == 0 and c[2] == admitted[0]:
            admitted[0] += 1
        else:
            f_cand[s].remove(c)
        if not (c[1] >= p and v == 2):
            reserved[s] += 1.0
        return ("F", c[1], c[2])
    if w_queue[s]:
        u, i = w_queue[s].pop(0)
        return ("W", u, i)
    return None


def zb_h1_order(p: int, m: int, s: int) -> list[tuple[str, int, int]]:
    """Stage s's order in ZB-H1 (Qi et al. 2023 Sec. 2.1, Figure 3): 1F1B's (p - s - 1 warm-up
    forwards, then one forward and one B), each W deferred by s micro-batches behind its B, so
    every stage holds p micro-batches, 1F1B's first-stage peak; the deferred W's fill the
    cool-down."""
    warm = min(p - s - 1, m)
    seq = [("F", 0, i) for i in range(warm)]
    w = 0
    for k in range(m):
        if warm + k < m:
            seq.append(("F", 0, warm + k))
        seq.append(("B", 0, k))
        if k >= s:
            seq.append(("W", 0, w))
            w += 1
    seq += [("W", 0, i) for i in range(w, m)]
    return [(kind, s, i) for kind, _, i in seq]


def interleaved_zb_order(p: int, m: int, v: int, s: int) -> list[tuple[str, int, int]]:
    """Rank s's order in PyTorch's ScheduleInterleavedZeroBubble ("the ZB1P schedule" of Qi et
    al. 2023 over v looped chunks; torch/distributed/pipelining/schedules.py, pytorch/pytorch
    commit 00722e648b740f91d0e71494baa17891749fd291, _calculate_single_rank_operations with
    _get_warmup_ops(multiply_factor=1) and _get_1f1b_rank_ops(enable_zero_bubble=True)): rounds
    of r = m / max(1, m // p) micro-batches; (v - 1) r + p - 1 - s warm-up forwards; then a
    forward and a B each step, each W deferred by s steps behind its B (num_1f1b_microbatches =
    rank); the cool-down's B's, then the W's left. The k-th forward runs chunk (k // r) mod v,
    the k-th B chunk v - 1 - (k // r) mod v, each chunk's micro-batches in turn."""
    rounds = max(1, m // p)
    per_round = m // rounds
    total = m * v
    warm = min((v - 1) * per_round + p - 1 - s, total)
    nxt = {"F": [0] * v, "B": [0] * v, "W": [0] * v}

    def op(kind: str, c: int) -> tuple[str, int, int]:
        i = nxt[kind][c]
        nxt[kind][c] += 1
        return (kind, c * p + s, i)

    def bwd_chunk(k: int) -> int:
        return v - 1 - ((k - warm) // per_round) % v

    seq: list[tuple[str, int, int]] = []
    backs: list[int] = []
    for k in range(total + warm):
        if k < total:
            seq.append(op("F", (k // per_round) % v))
        if k >= warm:
            seq.append(op("B", bwd_chunk(k)))
            backs.append(k)
            if k - warm >= s:
                seq.append(op("W", bwd_chunk(backs[len(backs) - 1 - s])))
    done_w = max(0, len(backs) - s)
    seq += [op("W", bwd_chunk(k)) for k in backs[done_w:]]
    return seq


def _next_in_order(
    order: list[tuple[str, int, int]],
    k: int,
    t: float,
    f_cand: list[tuple[float, int, int]],
    b_cand: list[tuple[float, int, int]],
    w_queue: list[tuple[int, int]],
) -> tuple[str, int, int] | None:
    """The next op of a fixed order if its inputs are there by ``t`` (removed from its list)."""
    if k >= len(order):
        return None
    kind, u, i = order[k]
    if kind == "W":
        if (u, i) in w_queue:
            w_queue.remove((u, i))
            return order[k]
        return None
    if kind == "F" and u == 0:
        return order[k]
    cands = f_cand if kind == "F" else b_cand
    for c in cands:
        if c[1] == u and c[2] == i and c[0] <= t:
            cands.remove(c)
            return order[k]
    return None
