"""The configuration space of a plan as arrays (STYLE.md "Speed is a feature"): every valid
combination of the knobs the plan leaves free, built stage by stage, each stage masked by the
validity rules (perfmodel/engine/rules.py) and its rejections counted by reason."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from perfmodel.cost import Array
from perfmodel.cost.memory import RECOMPUTE_CODES
from perfmodel.cost.pipeline import LOOPED, SCHEDULE_CODES, V_SHAPED
from perfmodel.engine import moe_switches
from perfmodel.engine.facts import Facts
from perfmodel.engine.knobs import CP_COMM_CODES, Knobs
from perfmodel.engine.rules import apply_masks, facts, knob_contradictions
from perfmodel.errors import PerfModelError
from perfmodel.specs import Parallel, Plan


def divisors(n: int) -> list[int]:
    """The divisors of n, ascending, from its prime factors (trial division stops once the rest is
    prime)."""
    factors: dict[int, int] = {}
    rest, d = n, 2
    while d * d <= rest:
        while rest % d == 0:
            factors[d] = factors.get(d, 0) + 1
            rest //= d
        d += 1 if d == 2 else 2
    if rest > 1:
        factors[rest] = factors.get(rest, 0) + 1
    out = [1]
    for prime, power in factors.items():
        out = [x * prime**k for x in out for k in range(power + 1)]
    return sorted(out)


@dataclass
class Space:
    knobs: Knobs
    rejected: Counter[str] = field(default_factory=Counter)
    # when the global batch alone left no layout: that, in the batch's words ('' otherwise)
    batch_text: str = ""


def _fixed_contradictions(fx: Parallel) -> None:
    problems = knob_contradictions(fx.tp, fx.pp, fx.vp, fx.sequence_parallel, fx.schedule)
    if problems:
        raise PerfModelError("fixed knobs contradict: " + "; ".join(msg for _, msg in problems))


def _keep(cols: dict[str, Array], mask: Array) -> dict[str, Array]:
    """The rows where ``mask`` holds (the mask turned into indices once, not once per column)."""
    mask = np.asarray(mask, dtype=bool)
    if mask.all():
        return cols
    idx = np.flatnonzero(mask)
    return {k: v.take(idx) for k, v in cols.items()}


def _expand(cols: dict[str, Array], name: str, values: Iterable[int]) -> dict[str, Array]:
    """Every row of ``cols`` once for each value of a new column (rows stay in order)."""
    values = np.asarray(values)
    out = {k: np.repeat(v, values.size) for k, v in cols.items()}
    out[name] = np.tile(values, len(next(iter(cols.values()))) if cols else 0)
    return out


# cp is searched while each rank keeps at least this many tokens of a sequence: the smallest CP
# chunk of any published run the project holds (cp 2 at 8,192 tokens: NeMo 24.07's Llama 3 8B and
# 70B, MLPerf's and Megatron-Bridge's Llama 3.1 405B, DGX Cloud's Grok-1); below it CP is a layout
# no run validated, and at a 4K sequence it quadrupled the search of a MoE plan. A plan or --cp
# that fixes cp is taken as given.
CP_MIN_TOKENS = 4096
# where nothing fits with those, the search tries CP down to this many tokens a rank (Megatron-Core
# runs it; memory may need it at a short sequence) and says so of each result below CP_MIN_TOKENS
CP_FLOOR_TOKENS = 1024


def enumerate_space(
    plan: Plan, allow_cross_node_tp: bool = False, cp_min_tokens: int = CP_MIN_TOKENS
) -> Space:
    """Every valid configuration as Knobs arrays, and what was rejected, by reason.

    Candidates are built stage by stage as arrays (tp; (tp, cp, pp); (ep, etp); (mbs, vp); then SP,
    recompute, ZeRO and schedule), and each stage drops what the rules (perfmodel/engine/rules.py)
    reject, counted by reason in that stage's unit. The rest hold by construction: dp is num_gpus /
    (tp cp pp), SP only with tp > 1 (and always with MoE and tp > 1), ZeRO only with dp > 1,
    interleaving only with vp > 1. cp is searched when attention is fused (Megatron-Core's CP needs
    it) while each rank keeps CP_MIN_TOKENS tokens; ep and etp (1 or tp) only for mixture-of-experts
    models.
    """
    _fixed_contradictions(plan.parallel)
    if plan.training.cpu_offloading_num_layers:
        # Megatron-Core runs activation offloading with pp 1 and no recompute only
        # (TransformerConfig.__post_init__ refuses either): the plan's validator checked what it
        # gives, the search pins what it leaves free
        plan = plan.with_parallel(pp=1, recompute="none")
    b = _Builder(plan)
    # the plan's parallel.tp_across_nodes allows what --allow-cross-node-tp does
    c = b.layouts(allow_cross_node_tp or bool(plan.parallel.tp_across_nodes), cp_min_tokens)
    c = b.experts(c)
    c = b.micro(c)
    knobs = _categorical(c, plan.parallel, b.experts_n > 0, b.facts_of, b.counts)
    # the MoE switches last: the fastest the profile runs where the plan leaves them free
    knobs = moe_switches.choose(
        plan, knobs, np.array(list(SCHEDULE_CODES))[knobs["schedule"]], b.counts
    )
    # the memory-saving switches are tried by the search where memory asks (memory_switches.py)
    knobs["memory_switch"] = np.zeros(knobs["tp"].size, dtype=np.int64)
    return Space(Knobs(**knobs), Counter(b.counts), b.batch_text)


_FACT_KNOBS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "etp",
    "vp",
    "micro_batch_size",
    "first_stage_layers",
    "last_stage_layers",
    "zero_stage",
    "sequence_parallel",
)


class _Builder:
    """The stages of enumerate_space over one plan: candidates as dicts of arrays, the rules applied
    as masks after each stage, and what each stage rejects counted by reason."""

    def __init__(self, plan: Plan) -> None:
        self.plan, self.fx, self.tr = plan, plan.parallel, plan.training
        self.n, self.gbs = plan.system.num_gpus, plan.training.global_batch_size
        self.experts_n = plan.model.num_moe_experts or 0
        self.counts: dict[str, int] = {}
        self.batch_text = ""

    def facts_of(self, c: dict[str, Any]) -> Facts:
        knobs = {k: c[k] for k in _FACT_KNOBS if k in c}
        if "recompute" in c:  # the rules read the names (codes: cost/memory.RECOMPUTE_CODES)
            knobs["recompute"] = np.asarray(list(RECOMPUTE_CODES))[c["recompute"]]
        cp_comm = self.fx.cp_comm_type or "p2p"
        p = self.plan
        return facts(
            p.model,
            p.system,
            self.gbs,
            p.seq_length,
            self.tr,
            cp_comm=cp_comm,
            schedule=self.fx.schedule,
            **knobs,
        )

    def fixed(self, values: Iterable[int], knob: str) -> Array:
        v = getattr(self.fx, knob)
        return np.asarray([x for x in values if v is None or x == v], dtype=np.int64)

    def masked(self, c: dict[str, Any], stage: str, unit: str, **kw: Any) -> dict[str, Any]:
        alive = np.ones(c["tp"].size, bool)
        return _keep(c, apply_masks(stage, self.facts_of(c), alive, self.counts, unit, **kw))

    def layouts(self, allow_cross_node_tp: bool, cp_min_tokens: int) -> dict[str, Any]:
        """(tp, cp, pp) with dp = num_gpus / (tp cp pp); cp only with fused attention
        (Megatron-Core's CP needs it) while each rank keeps CP_MIN_TOKENS tokens."""
        fx, n, seq = self.fx, self.n, self.plan.seq_length
        c = self.masked(
            {"tp": self.fixed(divisors(n), "tp")},
            "tp",
            "tp values",
            cross_node_tp=allow_cross_node_tp,
        )
        flash = self.tr.flash_attention
        cps = (
            [fx.cp]
            if fx.cp
            else [d for d in divisors(n) if d == 1 or (flash and seq // d >= cp_min_tokens)]
        )
        c = _expand(_expand(c, "cp", cps), "pp", self.fixed(divisors(n), "pp"))
        c = _keep(c, n % (c["tp"] * c["cp"] * c["pp"]) == 0)
        c["dp"] = n // (c["tp"] * c["cp"] * c["pp"])
        c["first_stage_layers"] = np.full(c["tp"].size, fx.decoder_first_pipeline_num_layers or 0)
        c["last_stage_layers"] = np.full(c["tp"].size, fx.decoder_last_pipeline_num_layers or 0)
        c = self.masked(c, "pair", "(tp, cp, pp) combinations")
        c = _keep(c, (fx.dp is None) | (c["dp"] == (fx.dp or 0)))
        kept = self.masked(c, "batch", "(tp, cp, pp) combinations")
        # the batch alone left nothing: say so in the batch's words (other rules too: the
        # search's accounting of every reason)
        if (
            c["tp"].size
            and not kept["tp"].size
            and {getattr(k, "rule", "") for k in self.counts} == {"PM105"}
        ):
            self.batch_text = _batch_text(c, self.gbs, fx.micro_batch_size or 1)
        return kept

    def experts(self, c: dict[str, Any]) -> dict[str, Any]:
        """ep over the divisors of the expert count, etp 1 or tp (Megatron's default), for MoE
        only."""
        fx, e = self.fx, self.experts_n
        eps = self.fixed(divisors(e) if e else [1], "ep") if fx.ep is None else [fx.ep]
        c = _expand(c, "ep", eps)
        c = _expand(c, "etp", [fx.etp] if fx.etp is not None else [1, 0] if e else [1])
        c["etp"] = np.where(c["etp"] == 0, c["tp"], c["etp"])  # 0 stands for "etp = tp"
        return self.masked(_dedupe_etp(c), "expert", "(ep, etp) pairs")

    def micro(self, c: dict[str, Any]) -> dict[str, Any]:
        """Micro-batch sizes dividing global batch / dp; vp candidates the divisors of floor(L/p)
        and of ceil(L/p), so chunks are as even as they go."""
        fx, gbs, L = self.fx, self.gbs, self.plan.model.num_layers
        c = _expand(c, "micro_batch_size", self.fixed(divisors(gbs), "micro_batch_size"))
        c = _keep(c, (gbs // c["dp"]) % c["micro_batch_size"] == 0)
        # the vp candidates depend on pp alone: one list per distinct pp, each row repeated once
        # for each of its pp's candidates (rows stay in order, vp ascending within a row)
        vps = self.fixed(range(1, L + 1), "vp")
        pps, where = np.unique(c["pp"], return_inverse=True)
        near = ((L // pps[:, None]) % vps == 0) | ((-(-L // pps[:, None])) % vps == 0)
        given = (fx.vp is not None) & (vps == (fx.vp or 0))
        ok = (vps == 1) | (near & (pps[:, None] * vps <= L)) | given
        counts = ok.sum(axis=1)
        table = np.zeros((len(pps), max(int(counts.max(initial=0)), 1)), dtype=np.int64)
        for i in range(len(pps)):
            table[i, : counts[i]] = vps[ok[i]]
        per_row = counts[where.ravel()]
        rows = np.repeat(np.arange(per_row.size), per_row)
        offset = np.arange(rows.size) - np.repeat(np.cumsum(per_row) - per_row, per_row)
        c = {k: v[rows] for k, v in c.items()}
        c["vp"] = table[where.ravel()[rows], offset]
        return self.masked(c, "micro", "(mbs, vp) pairs")


def _batch_text(c: dict[str, Any], gbs: int, mbs: int) -> str:
    """No layout left but for the batch (PM105): the dp of each, and the nearest batch one takes."""
    seen: dict[int, list[str]] = {}
    for tp, pp, cp, dp in sorted(
        {(int(a), int(b), int(d), int(e)) for a, b, d, e in zip(c["tp"], c["pp"], c["cp"], c["dp"])}
    ):
        seen.setdefault(dp, []).append(f"tp {tp} pp {pp} cp {cp}")
    where = ", ".join(f"{dp} at {' / '.join(v)}" for dp, v in sorted(seen.items(), reverse=True))
    use = min(-(-gbs // (dp * mbs)) * dp * mbs for dp in seen)
    return (
        f"training.global_batch_size {gbs} is not a multiple of dp x micro_batch_size ({where};"
        f" micro_batch_size {mbs}): every data-parallel rank takes whole micro-batches; use {use}"
    )


def _dedupe_etp(c: dict[str, Any]) -> dict[str, Any]:
    """etp 1 and etp = tp are the same candidate when tp = 1."""
    key = np.stack([c[k] for k in c], axis=1)
    _, first = np.unique(key, axis=0, return_index=True)
    keep = np.zeros(len(key), bool)
    keep[first] = True
    return _keep(c, keep)


def _categorical(
    c: dict[str, Any],
    fx: Parallel,
    moe: bool,
    facts_of: Callable[[dict[str, Any]], Facts],
    counts: dict[str, int],
) -> dict[str, Any]:
    """Expand SP, recompute, ZeRO and schedule over the combinations, keeping what is runnable (each
    mask right after its expansion, so the arrays never hold the discarded products)."""
    c = _expand(c, "sequence_parallel", np.array([False, True]))
    sp = c["sequence_parallel"].astype(bool)
    ok = (c["tp"] > 1) | ~sp
    if fx.sequence_parallel is not None:
        ok &= sp == fx.sequence_parallel
    elif moe:
        ok &= sp | (c["tp"] == 1)  # Megatron requires SP for MoE with TP
    c = _keep(c, ok)
    c = _expand(
        c, "recompute", np.array([RECOMPUTE_CODES[fx.recompute]] if fx.recompute else [0, 1, 2])
    )
    c = _expand(
        c, "zero_stage", np.asarray([z for z in (0, 1, 2, 3) if fx.zero_stage in (None, z)])
    )
    # ZeRO shards over the dp x cp replicas: with one it shards nothing, the same as stage 0; a
    # plan that asks for it runs so (Megatron's distributed optimizer and DeepSpeed accept it, and
    # the estimate says so), the search does not propose it
    c = _keep(c, (c["dp"] * c["cp"] > 1) | (c["zero_stage"] == 0) | (fx.zero_stage is not None))
    c = _keep(
        c,
        apply_masks(
            "framework", facts_of(c), np.ones(c["tp"].size, bool), counts, "configurations"
        ),
    )
    # the schedules the framework runs (Megatron and DeepSpeed have no GPipe: the search never
    # proposes it), or the plan's own (check's PM205 says what GPipe costs and that it is not there)
    # a framework without pipeline parallelism runs one stage: 1F1B's code stands for "none"
    runs = facts_of(c).profile["schedules"] or ("1f1b",)
    names = (
        [fx.schedule]
        if fx.schedule
        else [
            s
            for s in SCHEDULE_CODES
            if s in runs or (s == "interleaved" and facts_of(c).profile["interleaved"])
        ]
    )
    c = _expand(c, "schedule", np.array(sorted(SCHEDULE_CODES[s] for s in names)))
    # interleaved (1F1B or zero-bubble) at vp > 1, the V-shaped schedules at vp 2, the others at 1
    ok = np.where(
        np.isin(c["schedule"], V_SHAPED),
        c["vp"] == 2,
        (c["vp"] > 1) == np.isin(c["schedule"], LOOPED),
    )
    # what each schedule needs of pp and m (DualPipe's PM106 and PM107), read with the names
    named = replace(facts_of(c), schedule=np.array(list(SCHEDULE_CODES))[c["schedule"]])
    ok = apply_masks("schedule", named, ok, counts, "configurations")
    if fx.schedule is not None:
        ok &= c["schedule"] == SCHEDULE_CODES[fx.schedule]
    c = _keep(c, ok)
    c["sequence_parallel"] = c["sequence_parallel"].astype(bool)
    return _dp_shard(_cp_comm(c, fx, facts_of), fx, facts_of)


def _dp_shard(
    c: dict[str, Any], fx: Parallel, facts_of: Callable[[dict[str, Any]], Facts]
) -> dict[str, Any]:
    """HSDP's shard group: the plan's dp_shard where it divides dp, else dp (full sharding); where
    the framework runs HSDP (torchtitan's dp_replicate x dp_shard, FSDP1's HYBRID_SHARD) the
    ZeRO-2/3 rows are also tried with every divisor of dp above 1 as the shard group, and where it
    shards the optimizer over a group (Megatron-Core's --num-distributed-optimizer-instances,
    InternEvo's zero1) so are the ZeRO-1 rows."""
    dp = c["dp"]
    if fx.dp_shard is not None:
        c = _keep(c, c["dp"] % fx.dp_shard == 0)
        # 0 stands for "all of dp" (Config.dp_shard)
        c["dp_shard"] = np.where(c["dp"] == fx.dp_shard, 0, fx.dp_shard).astype(np.int64)
        return c
    c["dp_shard"] = np.zeros(dp.size, dtype=np.int64)
    facts = facts_of({"tp": c["tp"][:1]})
    profile = facts.profile
    hsdp = (c["zero_stage"] >= 2) & profile["hsdp"]
    zero1 = (c["zero_stage"] == 1) & profile["zero1_shard_group"]
    # each candidate row once for each proper divisor of its dp, as row indices (one take per
    # column at the end, not one boolean mask over every row per divisor)
    cand = np.flatnonzero(hsdp | zero1)
    rows, shards = [], []
    for value in np.unique(dp[cand]):
        of_value = cand[dp[cand] == value]
        width = c["tp"][of_value] * c["cp"][of_value]
        for d in divisors(int(value))[1:-1]:
            # a ZeRO-1 group is tried inside one node (InternEvo's advice: zero1 <= 8 for
            # smaller models); its point is to keep the parameter sync off the network
            ok = hsdp[of_value] | (d * width <= facts.gpus_per_node)
            rows.append(of_value[ok])
            shards.append(np.full(int(ok.sum()), d, dtype=np.int64))
    if not rows or not sum(r.size for r in rows):
        return c
    # rows grouped by dp value, then divisor, then original order, as before
    idx = np.concatenate(rows)
    out = {k: np.concatenate([v, v.take(idx)]) for k, v in c.items() if k != "dp_shard"}
    out["dp_shard"] = np.concatenate([c["dp_shard"], *shards])
    return {k: out[k] for k in c}


def _cp_comm(
    c: dict[str, Any], fx: Parallel, facts_of: Callable[[dict[str, Any]], Facts]
) -> dict[str, Any]:
    """CP's exchange: the plan's, or both Megatron-Core offers where cp > 1 (the K/V ring, p2p, and
    Ulysses' all-to-all, a2a, which splits the heads over tp x cp: only where they divide)."""
    if fx.cp_comm_type is not None:
        c["cp_comm_type"] = np.full(c["tp"].size, CP_COMM_CODES[fx.cp_comm_type])
        return c
    c["cp_comm_type"] = np.full(c["tp"].size, CP_COMM_CODES["p2p"])
    facts = facts_of({"tp": c["tp"][:1]})
    ulysses = (c["cp"] > 1) & (facts.heads % (c["tp"] * c["cp"]) == 0)
    if "p2p" not in facts.profile["cp_comm_types"]:  # Ulysses only (DeepSpeed)
        keep = (c["cp"] == 1) | ulysses
        c = {k: v[keep] for k, v in c.items()}
        c["cp_comm_type"] = np.where(c["cp"] > 1, CP_COMM_CODES["a2a"], CP_COMM_CODES["p2p"])
        return c
    if not ulysses.any() or "a2a" not in facts.profile["cp_comm_types"]:
        return c
    extra = {k: v[ulysses] for k, v in c.items()}
    extra["cp_comm_type"] = np.full(int(ulysses.sum()), CP_COMM_CODES["a2a"])
    return {k: np.concatenate([c[k], extra[k]]) for k in c}
