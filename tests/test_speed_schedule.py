"""The simulator replays one walk per p, m, v and schedule (issue 41, speed): each step, with its
own times, must be the one a plain event simulation of the same schedule gives, block by block,
whatever step of the same shape ran before it."""

import random

import pytest

from perfmodel.engine import schedule
from perfmodel.engine.schedule import simulate


def _orders(p, m, v, name):
    """Megatron's per-stage orders written out directly (schedules.py): warm-up forwards, one
    forward one backward, cool-down backwards; GPipe all forwards then all backwards."""
    out = []
    for s in range(p):
        if name == "gpipe":
            out.append([("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)[::-1]])
            continue
        total = m * v
        warm = min(p - s - 1, m) if name == "1f1b" else min((p - s - 1) * 2 + (v - 1) * p, total)

        def fwd(k, back=False):
            c = (k // p) % v
            return ("B" if back else "F", (k // (p * v)) * p + k % p, v - 1 - c if back else c)

        seq = [fwd(k) for k in range(warm)]
        for k in range(total - warm):
            seq += [fwd(warm + k), fwd(k, True)]
        out.append(seq + [fwd(k, True) for k in range(total - warm, total)])
    return out


def _reference(p, m, v, name, tf, tb, lat, blocking):
    """Round-robin over stages until every block ran: a block starts when its stage is free and
    its inputs have arrived (F(u, i) after F(u - 1, i) + latency; B(u, i) after B(u + 1, i) +
    latency and its own F(u, i)); blocking: the sender holds its stage for the latency."""
    n, orders = p * v, _orders(p, m, v, name)
    end, pos, clock, blocks = {}, [0] * p, [0.0] * p, []
    while any(pos[s] < len(orders[s]) for s in range(p)):
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i, c = orders[s][pos[s]]
                u = c * p + s
                if kind == "F":
                    deps = [(("F", u - 1, i), lat)] if u > 0 else []
                    tail = u != n - 1
                else:
                    deps = [(("F", u, i), 0.0)] + ([(("B", u + 1, i), lat)] if u < n - 1 else [])
                    tail = u != 0
                if any(d not in end for d, _ in deps):
                    break
                ready = max([clock[s]] + [end[d] + x * (not blocking) for d, x in deps])
                dur = (tf if kind == "F" else tb)[u]
                send = lat if blocking and tail else 0.0
                end[(kind, u, i)] = ready + dur + send
                clock[s] = end[(kind, u, i)]
                blocks.append((s, kind, i, c, ready, ready + dur))
                pos[s] += 1
    return max(clock), sorted(blocks)


CASES = [(p, m, v, name) for p in (1, 2, 3, 4, 5) for m in (1, 2, 4, 6) for v, name in
         ((1, "gpipe"), (1, "1f1b"), (2, "interleaved"), (3, "interleaved"))
         if name != "interleaved" or m % p == 0]  # fmt: skip


@pytest.mark.parametrize("p,m,v,name", CASES)
def test_every_step_is_the_plain_simulations(p, m, v, name):
    rng = random.Random(p * 1000 + m * 10 + v)
    schedule._walk.cache_clear()
    for blocking in (False, True, False):  # the second and third replay the first one's walk
        tf = [rng.uniform(0.5, 2.0) for _ in range(p * v)]
        tb = [rng.uniform(1.0, 4.0) for _ in range(p * v)]
        lat = rng.choice([0.0, 0.05, 0.7])
        sim = simulate(p, m, v, name, tf, tb, lat, keep_blocks=True, blocking=blocking)
        step, blocks = _reference(p, m, v, name, tf, tb, lat, blocking)
        assert sim.step_time == pytest.approx(step, rel=1e-12)
        got = sorted((b.stage, b.kind, b.micro_batch, b.chunk, b.start, b.end) for b in sim.blocks)
        assert [g[:4] for g in got] == [r[:4] for r in blocks]
        assert [x for g in got for x in g[4:]] == pytest.approx([x for r in blocks for x in r[4:]])
        # busy: each stage's compute, m passes of its chunks' F and B
        per_stage = [m * sum(tf[c * p + s] + tb[c * p + s] for c in range(v)) for s in range(p)]
        assert list(sim.busy) == pytest.approx(per_stage, rel=1e-12)
        cached = simulate(p, m, v, name, tf, tb, lat, keep_blocks=False, blocking=blocking)
        assert cached.step_time == sim.step_time


def test_a_walk_is_shared_by_steps_of_one_shape():
    schedule._walk.cache_clear()
    schedule._run_cached.cache_clear()  # an earlier test's step of the same shape is kept there
    simulate(4, 8, 2, "interleaved", 1.0, 2.0, keep_blocks=False)
    simulate(4, 8, 2, "interleaved", [1.0, 1.1, 1.2, 1.3], 2.5, 0.01, keep_blocks=False)
    simulate(4, 8, 1, "1f1b", 1.0, 2.0, keep_blocks=False)
    info = schedule._walk.cache_info()
    assert (info.misses, info.hits) == (2, 1)


@pytest.mark.parametrize("name,v", [("1f1b", 1), ("interleaved", 2), ("zb-h1", 1), ("zbv", 2)])
@pytest.mark.parametrize("blocking", [False, True])
def test_a_pair_is_the_two_steps(name, v, blocking):
    """simulate_pair: the step without the latency and with it, each simulate()'s."""
    p, m = 4, 8
    tf, tb = [1.0, 1.2, 0.9, 1.4], [2.0, 2.5, 1.8, 3.0]
    for lat in (0.0, 0.05, 0.6):
        alone, real = schedule.simulate_pair(p, m, v, name, tf, tb, lat, blocking, t_w=0.5)
        ref = simulate(p, m, v, name, tf, tb, 0.0, False, t_w=0.5)
        assert alone.step_time == ref.step_time
        assert list(alone.busy) == pytest.approx(list(ref.busy), rel=1e-12)
        ref = simulate(p, m, v, name, tf, tb, lat, False, blocking, t_w=0.5)
        assert real.step_time == ref.step_time
        assert real.step_time >= alone.step_time or name.startswith("zb")
