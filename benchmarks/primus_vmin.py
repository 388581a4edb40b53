"""What Primus-pipeline's V-Half and V-Min do, step by step, and what that costs against its 1F1B
(issue 30): an analysis, not the engine's walk (engine/schedule_zb.py keeps Qi et al.'s greedy
rule).

AMD-AGI/Primus (fd1eeab; unchanged since the blog's commit 78633ae7) builds both from Qi et al.
2024's repeating building block (arXiv 2405.15362, Sec. 4): primus/core/pipeline_parallel/scheduler/
algorithms/zbv_greedy.py places, for micro-batch i on rank r, F of chunk 0, F of chunk 1, B of
chunk 1 and B of chunk 0 at fixed offsets in time steps of 6 i + offset (V-Min: r, 2p - r - 1,
2p + r, 4p - r - 1, for p not a multiple of 3), fills free steps with the oldest pending W,
then squeezes the warm-up (each op moves to the first free step its inputs and the pattern's peak
memory allow) and the cool-down. This script rebuilds that table in its own code. With F = B = W
it gives Primus's own simulator figures (p 8, m 32: 1F1B 117, V-Half 104.5, V-Min 109 units).

Primus then runs each rank's table in order (scheduler/scheduler.py ScheduleRunner), with the
point-to-point traffic tied to the time steps (algorithms/base.py _insert_compute_node: the send
of an op at step t and its receive both at step t + 1; handlers/communication_handler.py, default
async_p2p): a step's sends and receives are posted together, each waits on the GPU for the work
its rank queued before it (PyTorch ProcessGroupNCCL), the ops between two ranks run in order on
one stream, an op waits for the transfer it reads, and before posting its next batch a rank waits
for its previous sends. Primus's 1F1B (algorithms/basic_1f1b.py) batches send-forward with
receive-backward, as Megatron does. The loss and the output layer sit on rank 0's second chunk in
the V (last_pp_stage_rank 0), on the last rank in 1F1B.

Run: python benchmarks/primus_vmin.py   (about a minute): the step ratios to 1F1B at the model's
stage times and point-to-point time for the blog's Llama 2 runs, then how V-Min's moves with the
weight gradient's share of the backward and with the transfer time; last, the engine's throughput
ratios for the blog's Qwen3-235B runs on 32 MI355X (PP 4, EP 8), whose batch the blog does not
give: they are printed for m 8, 16 and 32, with no recompute (the blog's memory column falls from
1F1B to V-Half to V-Min as activations do: 262, 258, 228 GB; under full recompute the model's
would not move).
"""

from __future__ import annotations

from collections.abc import Callable

from perfmodel.engine.estimate import estimate, resolve_config
from perfmodel.inputs import presets
from perfmodel.review.validate import run_case

MEASURED = {"zbv": 0.886, "v-half": 0.923, "v-min": 1.130}  # the blog's step ratios to 1F1B
# the blog's Qwen3-235B table, tokens/s a GPU over 1F1B's 2,742.4 (its "zero-bubble" is ZB-H1's
# order, vpp 1; "zbv-formatted" is ZB-V)
QWEN_MEASURED = {"zb-h1": 2963.1, "v-half": 2912.9, "v-min": 2200.6, "zbv": 2952.7}
DELTA = {"F": 1, "B": 0, "W": -1}  # activations an op adds (zbv_greedy.py memory_delta)
Op = tuple[str, int, int]  # kind, chunk, micro-batch


def pattern(p: int, mode: str) -> list[list[tuple[str, int, int]]]:
    """Per rank, (kind, chunk, step offset) of one micro-batch's F and B ops (zbv_greedy.py)."""
    if mode == "min":
        iv = 2 if p % 3 == 0 else 0
        return [
            [
                ("F", 0, r),
                ("F", 1, 2 * p - r - 1),
                ("B", 1, 2 * p + iv + r),
                ("B", 0, 4 * p + iv - r - 1),
            ]
            for r in range(p)
        ]
    iv = 3 if p % 2 == 0 else 0
    return [
        [
            ("F", 0, 2 * r),
            ("F", 1, 3 * p - r - 2),
            ("B", 1, 3 * p + iv + 2 * r - 1),
            ("B", 0, 6 * p + iv - r - 2),
        ]
        for r in range(p)
    ]


def upstream(p: int, r: int, op: Op) -> tuple[int, int] | None:
    """(rank, chunk) whose output an F or B op reads; None at the V's start or the loss."""
    kind, c, _ = op
    first_leg = (c == 0) if kind == "F" else (c == 1)
    if first_leg:
        return (r - 1, c) if r > 0 else None
    return (r + 1, c) if r + 1 < p else (r, 1 - c)


def downstream(p: int, r: int, op: Op) -> tuple[int, int] | None:
    """(rank, chunk) an F or B op sends its output to; None at the V's end."""
    kind, c, _ = op
    first_leg = (c == 0) if kind == "F" else (c == 1)
    if first_leg:
        return (r + 1, c) if r + 1 < p else (r, 1 - c)
    return (r - 1, c) if r > 0 else None


def v_table(p: int, m: int, mode: str) -> list[dict[int, list]]:
    """Per rank, step -> [kind, chunk, micro-batch, phase]: the pattern, W in free steps, then the
    squeezed warm-up and cool-down."""
    at: list[dict[int, list]] = [{} for _ in range(p)]
    when: list[dict[tuple[str, int], list[int]]] = [{} for _ in range(p)]
    for r, ops in enumerate(pattern(p, mode)):
        for i in range(m):
            for kind, c, start in ops:
                t = start + 6 * i
                when[r].setdefault((kind, c), [0] * m)[i] = t
                at[r][t] = [kind, c, i, ""]
    memory = []
    for r in range(p):
        when[r][("W", 0)], when[r][("W", 1)] = [0] * m, [0] * m
        queue: list[list] = []
        steps = max(at[r]) + 2
        held = [0] * (steps + 1)
        phase = "warm-up"
        for t in range(steps + 1):
            held[t] = held[t - 1] if t else 0
            if t in at[r]:
                n = at[r][t]
                n[3] = phase
                queue += [n] if n[0] == "B" else []
                held[t] += DELTA[n[0]]
                if n[0] == "B" and n[1] == 0 and n[2] == 0:
                    phase = "steady"
                elif n[0] == "F" and n[1] == 1 and n[2] == m - 1:
                    phase = "cool-down"
            elif queue:
                b = queue.pop(0)
                at[r][t] = ["W", b[1], b[2], phase]
                when[r][("W", b[1])][b[2]] = t
                held[t] -= 1
        memory.append(held)
    _squeeze(p, at, when, memory, cool=False)
    _squeeze(p, at, when, memory, cool=True)
    return at


def _earliest(p: int, when: list[dict], r: int, n: list) -> int:
    kind, c, i = n[0], n[1], n[2]
    e = when[r][(kind, c)][i - 1] if i else 0
    if kind == "W":
        return max(e, when[r][("B", c)][i])
    up = upstream(p, r, (kind, c, i))
    if up is not None:
        e = max(e, when[up[0]][(kind, up[1])][i])
    elif kind == "B":
        e = max(e, when[r][("F", c)][i])
    return e + 1


def _squeeze(p: int, at: list, when: list, memory: list, cool: bool) -> None:
    """zbv_greedy.py squeeze: the warm-up moves each op to its first free step within the peak
    memory; the cool-down moves F and B to their first free step, then places its W after."""
    peak = max(max(h) for h in memory)
    last = max(max(a) for a in at)
    pending: list[list[list]] = [[] for _ in range(p)]
    for t in range(last + 1):
        for r in range(p):
            if t not in at[r] or (cool and at[r][t][3] != "cool-down"):
                continue
            n = at[r][t]
            if cool and n[0] == "W":
                pending[r].append(at[r].pop(t))
                continue
            new = t
            for s in range(_earliest(p, when, r, n), t + 1):
                if s in at[r]:
                    continue
                if not cool:
                    if any(memory[r][j] + DELTA[n[0]] > peak for j in range(s, t)):
                        continue
                    for j in range(s, t):
                        memory[r][j] += DELTA[n[0]]
                new = s
                break
            del at[r][t]
            at[r][new] = n
            when[r][(n[0], n[1])][n[2]] = new
    for r in range(p):
        for n in pending[r]:
            s = _earliest(p, when, r, n)
            while s in at[r]:
                s += 1
            at[r][s] = n
            when[r][(n[0], n[1])][n[2]] = s


def zbv_table(p: int, m: int) -> list[dict[int, list]]:
    """Primus's zbv-formatted order (algorithms/zbv_formatted.py), rank r starting at step r."""
    at: list[dict[int, list]] = []
    for r in range(p):
        seq: list[tuple[str, int, int]] = []
        f, b, w = [0, 0], [0, 0], [0, 0]

        def op(kind: str, c: int, count: list[int]) -> None:
            seq.append((kind, c, count[c]))
            count[c] += 1

        for _ in range(2 * (p - r) - 1):
            op("F", 0, f)
        for _ in range(r):
            op("F", 1, f)
            op("F", 0, f)
        for _ in range(p - r):
            op("F", 1, f), op("B", 1, b), op("W", 1, w)
        while f[1] < f[0] or f[0] < max(2 * p - 1, m):
            if f[0] < max(2 * p - 1, m):
                op("F", 0, f)
            op("B", 0, b), op("W", 0, w), op("F", 1, f), op("B", 1, b), op("W", 1, w)
        for _ in range(r):
            op("B", 0, b), op("B", 1, b)
        for _ in range(p - r):
            op("B", 0, b), op("W", 0, w)
        while w[1] < b[1]:
            op("W", 1, w)
        while w[0] < b[0]:
            op("W", 0, w)
        at.append({r + k: [*o, ""] for k, o in enumerate(seq)})
    return at


def v_items(p: int, at: list[dict[int, list]]) -> list[list]:
    """Each rank's run list: ("comm", [(send | recv, pair, key)]) batches and ("op", Op)."""
    steps: list[dict[int, dict[str, list]]] = [{} for _ in range(p)]
    for r in range(p):
        for t, n in at[r].items():
            steps[r].setdefault(t, {"comm": [], "op": []})["op"].append(tuple(n[:3]))
            if n[0] == "W":
                continue
            to = downstream(p, r, tuple(n[:3]))
            if to is None or to[0] == r:
                continue  # the V's end, or its turn on the last rank (a local copy)
            key, pair = (n[0], to[1], n[2], to[0]), (min(r, to[0]), max(r, to[0]))
            steps[r].setdefault(t + 1, {"comm": [], "op": []})["comm"].append(("send", pair, key))
            steps[to[0]].setdefault(t + 1, {"comm": [], "op": []})["comm"].append(
                ("recv", pair, key)
            )
    out = []
    for r in range(p):
        items: list = []
        for t in sorted(steps[r]):
            if steps[r][t]["comm"]:
                items.append(("comm", steps[r][t]["comm"]))
            items += [("op", o) for o in steps[r][t]["op"]]
        out.append(items)
    return out


def one_f_one_b_items(p: int, m: int) -> list[list]:
    """Primus's 1F1B: receive before an op, send after it, sends batched with the next receive."""
    out = []
    for r in range(p):
        warm = min(p - r - 1, m)
        seq = [("F", i) for i in range(warm)]
        for i in range(warm, m):
            seq += [("F", i), ("B", i - warm)]
        seq += [("B", i) for i in range(m - warm, m)]
        items: list = []
        batch: list = []
        for kind, i in seq:
            frm = r - 1 if kind == "F" else r + 1
            if 0 <= frm < p:
                batch.append(("recv", (min(r, frm), max(r, frm)), (kind, 0, i, r)))
            if batch:
                items.append(("comm", batch))
                batch = []
            items.append(("op", (kind, 0, i)))
            to = r + 1 if kind == "F" else r - 1
            if 0 <= to < p:
                batch.append(("send", (min(r, to), max(r, to)), (kind, 0, i, to)))
        if batch:
            items.append(("comm", batch))
        out.append(items)
    return out


def run(items: list[list], seconds: Callable[[int, Op], float], transfer: float) -> float:
    """The step: each rank's compute stream in list order; a batch's transfers start when both
    ranks have queued the work before them and the pair's previous transfer is done."""
    p = len(items)
    pos, clock = [0] * p, [0.0] * p
    last_sends: list[list] = [[] for _ in range(p)]
    posted: dict[tuple, float] = {}
    count: dict[tuple, int] = {}
    done: dict[tuple, list[float]] = {}
    reading: list[dict] = [{} for _ in range(p)]

    def resolve(pair: tuple) -> None:
        ends = done.setdefault(pair, [])
        while (pair, len(ends), 0) in posted and (pair, len(ends), 1) in posted:
            k = len(ends)
            start = max(posted[(pair, k, 0)], posted[(pair, k, 1)], ends[-1] if ends else 0.0)
            ends.append(start + transfer)

    left = sum(len(x) for x in items)
    while left:
        moved = False
        for r in range(p):
            while pos[r] < len(items[r]):
                kind, what = items[r][pos[r]]
                if kind == "comm":
                    if any(len(done.get(pr, [])) <= k for pr, k in last_sends[r]):
                        break
                    clock[r] = max([clock[r]] + [done[pr][k] for pr, k in last_sends[r]])
                    last_sends[r] = []
                    for role, pair, key in what:
                        k = count.get((r, pair), 0)
                        count[(r, pair)] = k + 1
                        posted[(pair, k, int(r == pair[1]))] = clock[r]
                        (last_sends[r].append((pair, k)) if role == "send" else None)
                        if role == "recv":
                            reading[r][key] = (pair, k)
                        resolve(pair)
                else:
                    key = (*what, r)
                    if key in reading[r]:
                        pair, k = reading[r][key]
                        if len(done.get(pair, [])) <= k:
                            break
                        clock[r] = max(clock[r], done[pair][k])
                    clock[r] += seconds(r, what)
                pos[r] += 1
                left -= 1
                moved = True
        if not moved:
            raise RuntimeError("the tables deadlocked")
    return max(clock)


def ratios(
    p: int, m: int, f: float, b: float, w: float, head: tuple[float, float, float], transfer: float
) -> dict[str, float]:
    """Step ratios to 1F1B: f, b, w a stage's F, B and W seconds (W part of the backward b + w);
    head the output layer's F, B and W, on 1F1B's last rank and the V's rank 0 second chunk."""

    def flat(r: int, o: Op) -> float:
        x = f if o[0] == "F" else b + w
        return x + ((head[0] if o[0] == "F" else head[1] + head[2]) if r == p - 1 else 0.0)

    def v(r: int, o: Op) -> float:
        i = "FBW".index(o[0])
        return (f, b, w)[i] / 2 + (head[i] if r == 0 and o[1] == 1 else 0.0)

    base = run(one_f_one_b_items(p, m), flat, transfer)
    tables = {
        "zbv": zbv_table(p, m),
        "v-half": v_table(p, m, "half"),
        "v-min": v_table(p, m, "min"),
    }
    return {k: run(v_items(p, t), v, transfer) / base for k, t in tables.items()}


def main() -> None:
    cases = {c["name"]: c for c in presets.validation_cases()}
    est = run_case(cases["primus-llama2-7b-16l-1f1b-8gpu"]).estimate
    f, full, w = est.stage_fwd_s[1], est.stage_bwd_s[1], (est.stage_wgrad_s or [0.0] * 8)[1]
    head = (
        est.stage_fwd_s[-1] - f,
        est.stage_bwd_s[-1] - full - ((est.stage_wgrad_s or [0.0] * 8)[-1] - w),
        (est.stage_wgrad_s or [0.0] * 8)[-1] - w,
    )
    transfer = est.values["p2p_s"]
    equal = ratios(8, 32, 1.0, 1.0, 1.0, (0.0, 0.0, 0.0), 0.0)
    print("F = B = W, no transfer time: " + ", ".join(f"{k} {v:.3f}" for k, v in equal.items()))
    print(
        f"the model's stage: F {f * 1e3:.2f} ms, B {(full - w) * 1e3:.2f} ms, W {w * 1e3:.2f} ms,"
        f" p2p {transfer * 1e3:.2f} ms; the output layer adds {head[0] * 1e3:.2f} /"
        f" {head[1] * 1e3:.2f} / {head[2] * 1e3:.2f} ms"
    )
    got = ratios(8, 32, f, full - w, w, head, transfer)
    for k, v in got.items():
        print(f"  {k:<7} {v:.3f}  measured {MEASURED[k]:.3f}  ({v - MEASURED[k]:+.3f})")
    print("V-Min against W's share of the backward and the transfer time (measured 1.130):")
    print("  W share  " + "  ".join(f"p2p x{x:<3}" for x in (0.5, 1, 2)))
    for share in (0.30, 0.35, 0.44):
        row = [
            ratios(8, 32, f, full * (1 - share), full * share, head, transfer * x)["v-min"]
            for x in (0.5, 1, 2)
        ]
        print(f"  {share:.2f}     " + "  ".join(f"{v:8.3f}" for v in row))


def qwen3_mi355x(m: int, schedule: str) -> float:
    """The engine's tokens/s a GPU for the blog's Qwen3-235B layout with m micro-batches of 1."""
    vp = 2 if schedule in ("v-half", "v-min", "zbv") else 1
    plan = presets.plan_from_mapping(
        {
            "model": "qwen3-235b-a22b",
            "system": {
                "gpu": "mi355x",
                "num_gpus": 32,
                "gpus_per_node": 8,
                "intra_node_link": "infinity-fabric-4",
                "inter_node_link": "pollara-400",
            },
            "training": {"global_batch_size": 8 * m, "framework": "primus", "dtype": "bf16"},
            "parallel": {
                **{"tp": 1, "pp": 4, "dp": 8, "ep": 8, "vp": vp, "micro_batch_size": 1},
                **{"schedule": schedule, "recompute": "none", "zero_stage": 1},
            },
        },
        "primus-qwen3",
    )
    return float(estimate(plan, resolve_config(plan)).values["tokens_per_s_per_gpu"])


def qwen() -> None:
    print("Qwen3-235B on 32 MI355X, throughput over 1F1B's (the engine's greedy walk):")
    print("  m   " + "  ".join(f"{k:>7}" for k in QWEN_MEASURED))
    for m in (8, 16, 32):
        base = qwen3_mi355x(m, "1f1b")
        row = [qwen3_mi355x(m, k) / base for k in QWEN_MEASURED]
        print(f"  {m:<3} " + "  ".join(f"{v:7.3f}" for v in row))
    print("  blog" + "".join(f"  {v / 2742.4:7.3f}" for v in QWEN_MEASURED.values()))


if __name__ == "__main__":
    main()
    qwen()
