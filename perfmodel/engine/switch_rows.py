"""The memory switch sets tried on the configurations that need them (issue 37; the sets and their
gates: engine/memory_switches.py): the search's step between pricing the plain configurations and
ranking them (engine/search.py)."""

from __future__ import annotations

import numpy as np

from perfmodel.cost.memory import RECOMPUTE_CODES
from perfmodel.engine import memory_switches
from perfmodel.engine.evaluate import KEEP, evaluate_chunked
from perfmodel.engine.knobs import Knobs
from perfmodel.engine.memory import memory_lower_bound, switchless_bytes
from perfmodel.engine.memory_verdict import MEMORY_BAND, fits_mask, margin_mask
from perfmodel.engine.reserve import usable_bytes
from perfmodel.specs import Plan

# where a plan turns the gradient accumulation's fusion off, the switches' BF16 main gradients
# also shorten the backward's accumulation passes: a switched step is then bounded as this much
# faster than the plain one at most (elsewhere, by what they change: switchable_s)
SWITCH_MARGIN = 0.10
SELECTIVE = RECOMPUTE_CODES["selective"]
# rows x further fine-grained sets past which the largest set is priced first, alone, to drop the
# rows it cannot fit (one evaluation more, of fewer rows in all: _module_offload)
PREPASS_ROWS = 2000


def with_switches(
    plan: Plan, knobs: Knobs, res: dict[str, np.ndarray]
) -> tuple[Knobs, dict[str, np.ndarray]]:
    """The configurations and their figures, with the memory switch sets the plan's framework runs
    (engine/memory_switches.py) where memory asks for them. A row that is tight or does not fit
    without them, can run a set (memory_switches.runs_with), fits with margin with it and is then
    faster than the fastest plain configuration that fits so takes the first such set (fewest
    switches first) in place of its plain figures; a slower one could not come first (annotate).
    The sets are priced in order as arrays, each on the rows no earlier set rescued and where its
    memory bound leaves room (engine/memory.memory_lower_bound); the rescued rows' step time and
    memory are what `estimate` gives for the plan with the set's fields. The activation
    offloading sets are one step of that order, priced together (_offload), and so are the
    fine-grained ones (_module_offload). A row no set rescues keeps its plain figures; a tight one
    a set rescues at a slower step keeps them too, beside its switched twin (_twins)."""
    sets = memory_switches.usable_sets(plan)
    if not sets:  # the framework runs none, or the plan sets their fields itself
        return knobs, res
    usable = usable_bytes(plan.system)
    plain_knobs, plain = knobs, res

    def safe(x: np.ndarray) -> np.ndarray:
        return np.asarray(margin_mask(x, usable), dtype=bool)

    step = res["step_time_s"]
    good = safe(res["total_bytes"]) & res["fits"] & np.isfinite(step)
    best = float(step[good].min()) if good.any() else np.inf
    rows, floor, acts, unrecomputed = _candidates(plan, knobs, res, sets, good, best)
    if rows.size == 0:
        return knobs, res
    # what a row must shed to fit with margin (margin_mask), from its plain total
    need = res["total_bytes"] - usable / (1 + MEMORY_BAND)
    offloads = [n for n in sets if memory_switches.is_offload(n)]
    module_sets = [n for n in sets if memory_switches.is_module_offload(n)]
    knobs = knobs.take(slice(None))
    knobs.memory_switch = knobs.memory_switch.copy()
    res = {key: v.copy() for key, v in res.items()}
    for name in sets:
        if memory_switches.is_offload(name):
            if name == offloads[0]:  # every offload set in one pass (_offload)
                done = _offload(plan, knobs, res, rows, offloads, need, best)
                rows = np.setdiff1d(rows, done, assume_unique=True)
            continue
        if memory_switches.is_module_offload(name):
            if name == module_sets[0]:  # every fine-grained set in one pass (_module_offload)
                done = _module_offload(plan, knobs, res, rows, module_sets, best)
                rows = np.setdiff1d(rows, done, assume_unique=True)
            continue
        recompute = memory_switches.is_recompute(name)
        ok = memory_switches.runs_with(
            name, knobs.zero_stage[rows], knobs.recompute[rows], knobs.pp[rows]
        )
        if recompute:
            ok &= unrecomputed[rows] < best
        else:
            ok &= (floor[rows] < best) & safe(acts[rows])
        tried = rows[ok]
        code = memory_switches.SET_CODES[name]
        priced, done, got = _price(plan, knobs, res, tried, np.full(tried.size, code), best)
        if not recompute:
            acts[priced] = got["activations_bytes"]
            floor[priced] = got["step_time_s"] - got["switchable_s"]
        rows = np.setdiff1d(rows, priced[done], assume_unique=True)
        if rows.size == 0:
            break
    return _twins(plain_knobs, plain, knobs, res)


def _candidates(
    plan: Plan,
    knobs: Knobs,
    res: dict[str, np.ndarray],
    sets: list[str],
    good: np.ndarray,
    best: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """with_switches' rows a set may bring first (``good``: the rows that fit with margin, the
    fastest of them ``best``), and what gates each set on them: (those rows, each row's floor on a
    switched step, its activations, its step without recompute)."""
    step, usable = res["step_time_s"], usable_bytes(plan.system)
    # a switched step is no faster than the plain one less what the switches change; one that
    # cannot be faster than the fastest plain configuration that fits with margin cannot come
    # first (annotate gives that one the answer unless beaten by more than its band). Unpriced
    # rows (their memory bound did not fit) are bounded once a set prices them.
    if plan.training.grad_accumulation_fusion:
        floor = step - res["switchable_s"]
    else:
        floor = step * (1 - SWITCH_MARGIN)
    floor = np.where(np.isfinite(step), floor, -np.inf)
    # the optimizer's switches leave the activations as they are: a row whose activations alone
    # do not fit with margin is left to the recompute modules (0: not priced, not known)
    acts = res["activations_bytes"].copy()
    # the recompute modules replace the attention core's recompute: a selective step with them
    # is no faster than the plain one without any recompute
    unrecomputed = np.where(np.isfinite(step), step - res["recompute"], -np.inf)
    modules = any(memory_switches.is_recompute(n) for n in sets)
    selective = (knobs.recompute == SELECTIVE) & modules & (unrecomputed < best)
    # a row whose head's input and logits alone do not fit fits under no set (they shed neither)
    rows = np.flatnonzero(
        ~good & ((floor < best) | selective) & fits_mask(switchless_bytes(plan, knobs), usable)
    )
    return rows, floor, acts, unrecomputed


def _twins(
    plain_knobs: Knobs, plain: dict[str, np.ndarray], knobs: Knobs, res: dict[str, np.ndarray]
) -> tuple[Knobs, dict[str, np.ndarray]]:
    """A tight row that a set fits with margin at a slower step is kept twice: as it was (tight:
    production recipes run there, and annotate ranks it first where it is faster than every
    configuration that fits by more than the step band) and, appended, with the set (then the
    fastest that fits, named beside it, may be this twin). A row that did not fit at all takes
    its set in place of its figures."""
    switched = knobs.memory_switch != plain_knobs.memory_switch
    rows = np.flatnonzero(switched & plain["fits"] & (res["step_time_s"] > plain["step_time_s"]))
    if rows.size == 0:
        return knobs, res
    twins = knobs.take(rows)
    twin_res = {key: v[rows] for key, v in res.items()}
    knobs.memory_switch[rows] = plain_knobs.memory_switch[rows]
    for key, v in res.items():
        v[rows] = plain[key][rows]
    return knobs.plus(twins), {key: np.concatenate([v, twin_res[key]]) for key, v in res.items()}


def _price(
    plan: Plan,
    knobs: Knobs,
    res: dict[str, np.ndarray],
    tried: np.ndarray,
    codes: np.ndarray,
    best: float,
) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Price rows ``tried`` with the switch sets ``codes`` (one evaluation a set; the activation
    offloading sets together) where their memory bound leaves room, and give a row its set where it
    then fits with margin and beats ``best``, the fastest plain configuration that fits so (only
    such a one could come first): (the rows priced, which of them fit with margin, their figures).
    """
    usable = usable_bytes(plan.system)
    room, got = _evaluated(plan, knobs, tried, codes)
    priced = tried[room]
    done = margin_mask(got["total_bytes"], usable) & got["fits"]
    win = done & (got["step_time_s"] < best)
    _adopt(knobs, res, priced[win], codes[room][win], got, np.flatnonzero(win))
    return priced, np.asarray(done, dtype=bool), got


def _evaluated(
    plan: Plan, knobs: Knobs, rows: np.ndarray, codes: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``rows`` with the switch sets ``codes``, priced where their memory bound leaves room in HBM
    (engine/memory.memory_lower_bound): (the positions in ``rows`` priced, their figures)."""
    k = knobs.take(rows)
    k.memory_switch = codes
    if not rows.size:
        return rows, evaluate_chunked(plan, k)
    room = np.flatnonzero(fits_mask(memory_lower_bound(plan, k), usable_bytes(plan.system)))
    return room, evaluate_chunked(plan, k.take(room))


def _adopt(
    knobs: Knobs,
    res: dict[str, np.ndarray],
    rows: np.ndarray,
    codes: np.ndarray,
    got: dict[str, np.ndarray],
    at: np.ndarray,
) -> None:
    """``rows`` take the switch sets ``codes`` and, in place of their plain figures, ``got``'s
    entries ``at``."""
    knobs.memory_switch[rows] = codes
    for key in KEEP:
        res[key][rows] = got[key][at]


def _offload(
    plan: Plan,
    knobs: Knobs,
    res: dict[str, np.ndarray],
    rows: np.ndarray,
    names: list[str],
    need: np.ndarray,
    best: float,
) -> np.ndarray:
    """The activation offloading sets (``names``, fewest layers first) on ``rows``: each row is
    priced at the fewest layers that could shed what it ``need``s (_offload_frees_enough), then,
    while it does not fit with margin, at the next count; all rows of a round in one evaluation
    (the layers offloaded are read row by row). The copy only adds to the plain step, so a row no
    faster than ``best`` is not tried. Returns the rows that fit with margin."""
    code = np.array([memory_switches.SET_CODES[n] for n in names])
    ok = memory_switches.runs_with(
        names[0], knobs.zero_stage[rows], knobs.recompute[rows], knobs.pp[rows]
    )
    rows = rows[ok & (res["step_time_s"][rows] < best)]
    per_layer = res["layer_activations_bytes"][rows]
    frees = np.stack([_offload_frees_enough(plan, n, per_layer, need[rows]) for n in names], 1)
    at = np.where(frees.any(axis=1), frees.argmax(axis=1), len(names)) if rows.size else rows
    fitted: list[np.ndarray] = []
    while rows.size and (at < len(names)).any():
        live = at < len(names)
        rows, at = rows[live], at[live]
        priced, done, got = _price(plan, knobs, res, rows, code[at], best)
        fitted.append(priced[done])
        # a row whose states leave no room, that fits now, or whose HBM fits but not its host's
        # memory (more layers only fill it further) is through; the rest go one up
        short = ~margin_mask(got["total_bytes"], usable_bytes(plan.system))
        again = np.isin(rows, priced[short])
        rows, at = rows[again], at[again] + 1
    return np.concatenate(fitted) if fitted else np.zeros(0, dtype=np.int64)


def _module_offload(
    plan: Plan,
    knobs: Knobs,
    res: dict[str, np.ndarray],
    rows: np.ndarray,
    names: list[str],
    best: float,
) -> np.ndarray:
    """The fine-grained offloading sets (``names``, fewest modules first) on ``rows``, every row
    at every set in one evaluation (the modules are read row by row: memory_switches.
    MODULE_INDEX): a row takes the first set that fits it with margin, where that is faster than
    ``best``. The copy only adds to the plain step, so a row no faster than ``best`` is not
    tried. Returns the rows that fit with margin at some set."""
    ok = memory_switches.runs_with(
        names[0], knobs.zero_stage[rows], knobs.recompute[rows], knobs.pp[rows]
    )
    rows = rows[ok & (res["step_time_s"][rows] < best)]
    if rows.size == 0:
        return rows
    codes = np.array([memory_switches.SET_CODES[n] for n in names])
    usable = usable_bytes(plan.system)
    if rows.size * (codes.size - 1) > PREPASS_ROWS:
        # the sets are nested (each offloads what the one before does and more), so a row whose
        # HBM the last does not fit with margin fits with none: many rows are priced at it first
        room, last = _evaluated(plan, knobs, rows, np.full(rows.size, codes[-1]))
        rows = rows[room[margin_mask(last["total_bytes"], usable)]]
        if rows.size == 0:
            return rows
    tried = np.repeat(rows, codes.size)  # each row at each set, the sets in order
    tiled = np.tile(codes, rows.size)
    room, got = _evaluated(plan, knobs, tried, tiled)
    done = np.zeros(tried.size, dtype=bool)
    done[room] = margin_mask(got["total_bytes"], usable) & got["fits"]
    grid = done.reshape(rows.size, codes.size)
    fitted = grid.any(axis=1)
    first = np.flatnonzero(fitted) * codes.size + grid.argmax(axis=1)[fitted]  # into ``tried``
    at = np.searchsorted(room, first)  # into ``got``: a fitted entry was priced
    win = got["step_time_s"][at] < best
    _adopt(knobs, res, tried[first[win]], tiled[first[win]], got, at[win])
    return rows[fitted]


def _offload_frees_enough(
    plan: Plan, name: str, per_layer: np.ndarray, need: np.ndarray
) -> np.ndarray:
    """Whether offloading N layers (activation-offload-K) sheds ``need`` bytes: at pp 1 it frees
    N - 1 layers' kept activations, ``per_layer`` each (cost/offload.resident_saving), so a row's
    first set is the one that fits it on HBM; only the host's memory can then refuse it."""
    n = memory_switches.offloaded_layers(
        plan.model.num_layers, memory_switches.SWITCHES[name].eighths
    )
    return np.asarray(per_layer * (n - 1) >= need, dtype=bool)
