"""What-if sweeps (issue 15, item 2): one field of a plan varied over values, and at each value the
configuration `plan` recommends (or, fixed, the plan's own), with its figures.

A field is a dotted path into the plan (``system.inter_node_link.bandwidth_bytes_per_s``) or one of
the short names below. Each value is validated as the plan file's would be, so "25 GB/s", a GPU
preset's name or a framework profile are accepted where the field takes them, and a bad one is an
error naming the field. Nothing here computes a cost: each point is `plan`'s search or `estimate`
on the changed plan (engine/answer.py), once for the values that give one plan (same_answer_key);
values that change only the global batch are searched side by side, their evaluations pooled
(engine/pooled.py), with the answers each search gives alone.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ValidationError

from perfmodel.engine import pooled, uncertainty
from perfmodel.engine.answer import estimate_or_search, plan_search
from perfmodel.engine.estimate import Estimate
from perfmodel.engine.space import enumerate_space
from perfmodel.errors import PerfModelError
from perfmodel.inputs import presets
from perfmodel.specs import Plan
from perfmodel.specs.base import format_validation_error
from perfmodel.specs.calibrated_plan import with_calibration, without_calibration

SHORT = {
    "gpus": "system.num_gpus",
    "num_gpus": "system.num_gpus",
    "gpu": "system.gpu",
    "gbs": "training.global_batch_size",
    "global_batch_size": "training.global_batch_size",
    "seq": "training.seq_length",
    "seq_length": "training.seq_length",
    "framework": "training.framework",
    "dtype": "training.dtype",
    "inter_node_bandwidth": "system.inter_node_link.bandwidth_bytes_per_s",
    "intra_node_bandwidth": "system.intra_node_link.bandwidth_bytes_per_s",
    "gpus_per_node": "system.gpus_per_node",
}
SECTIONS = ("model", "system", "training", "parallel")


@dataclass
class Point:
    value: str
    num_gpus: int
    est: Estimate | None
    error: str = ""

    def to_json(self) -> dict:
        if self.est is None:
            return {"value": self.value, "num_gpus": self.num_gpus, "error": self.error}
        j = self.est.to_json()
        return {
            "value": self.value,
            "config": j["config"],
            "step_time_s": j["step_time_s"],
            "tokens_per_s": j["tokens_per_s"],
            "tokens_per_s_per_gpu": j["tokens_per_s_per_gpu"],
            "mfu": j["mfu"],
            "mfu_peak": j["mfu_peak"],
            "memory_total_bytes": j["memory"]["total_bytes"],
            "fits": j["memory"]["fits"],
            "num_gpus": self.num_gpus,
            "assumed": j["assumed"],
            "training_run": j["training_run"],
            "expected_error": j["expected_error"],
        }


@dataclass
class Sweep:
    field: str
    fixed: bool
    points: list[Point]

    def to_json(self) -> dict:
        return {
            "field": self.field,
            "fixed": self.fixed,
            "points": [p.to_json() for p in self.points],
        }


# `plan`'s search a value (its pool of 50 and their bands: 0.1-1 s on a laptop's core, several
# times the bare search's 10-70 ms): 1,000 take minutes
MAX_VALUES = 1000


def parse_vary(text: str) -> tuple[str, list[str]]:
    """``FIELD=V1,V2,...`` -> (dotted path, values)."""
    name, sep, values = text.partition("=")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or not name.strip() or not vals:
        raise PerfModelError(
            f"--vary {text!r}: write FIELD=V1,V2,... (e.g. --vary gpus=256,512,1024)"
        )
    path = SHORT.get(name.strip(), name.strip())
    if path.split(".")[0] not in SECTIONS or "." not in path:
        raise PerfModelError(
            f"--vary {name.strip()!r}: name a field as section.field ({', '.join(SECTIONS)}) "
            f"or one of {', '.join(sorted(SHORT))}"
        )
    if len(vals) > MAX_VALUES:
        raise PerfModelError(
            f"--vary {name.strip()}: {len(vals)} values; a sweep takes at most {MAX_VALUES} (each"
            " is `plan`'s search of its own, 0.1-1 s): sweep a coarser grid, then a finer one"
            " where it turns"
        )
    if len(set(vals)) < len(vals):
        dup = next(v for v in vals if vals.count(v) > 1)
        raise PerfModelError(f"--vary {name.strip()}: {dup} is given twice; give each value once")
    return path, vals


def changed(plan: Plan, path: str, value: str) -> Plan:
    """A copy of the plan with the field at ``path`` set to ``value`` (a string, parsed as YAML
    would be), validated as a plan file is. A calibrated plan is changed as the presets have it,
    then calibrated again (specs/calibration.py)."""
    if plan.calibration is not None:
        return with_calibration(changed(without_calibration(plan), path, value), plan.calibration)
    section, *rest = path.split(".")
    parsed = presets.parse_yaml(value, f"--vary {path}={value}")
    if rest == ["gpu"] and section == "system" and isinstance(parsed, str):
        if plan.system.links_from:  # the plan named no links: each GPU brings its usual ones
            return presets.plan_from_mapping(_with_gpu(plan, parsed), f"--vary gpu={parsed}")
        parsed = presets.gpu(parsed)
    elif (
        section == "system"
        and rest[0].endswith("_link")
        and len(rest) == 1
        and isinstance(parsed, str)
    ):
        parsed = presets.link(parsed)
    if section == "model":
        return plan.model_copy(update={"model": _set(plan.model, rest, parsed, path)})
    top, deeper = rest[0], rest[1:]
    part = getattr(plan, section)
    if top not in type(part).model_fields:
        raise PerfModelError(f"--vary {path}: {section} has no field {top!r}")
    if deeper:
        parsed = _set(getattr(part, top), deeper, parsed, path)
    return getattr(plan, f"with_{section}")(**{top: parsed})


def _with_gpu(plan: Plan, gpu: str) -> dict:
    """The plan as a mapping with another GPU preset and no links, so that the loader gives it
    that GPU's usual links (and says so), as it did for the plan's own GPU."""
    system = {
        k: v
        for k, v in plan.system.model_dump(exclude_none=True).items()
        if k not in ("gpu", "intra_node_link", "inter_node_link", "links_from")
    }
    return {
        "model": plan.model.model_dump(exclude_none=True),
        "system": {**system, "gpu": gpu},
        "training": plan.training.given(),
        "parallel": plan.parallel.model_dump(exclude_none=True),
        "run": plan.run.model_dump(exclude_unset=True),
        "ignore": list(plan.ignore),
    }


def _set(obj: BaseModel, keys: list[str], value, path: str) -> BaseModel:
    if not isinstance(obj, BaseModel) or keys[0] not in type(obj).model_fields:
        raise PerfModelError(f"--vary {path}: no field {keys[0]!r} there")
    inner = value if len(keys) == 1 else _set(getattr(obj, keys[0]), keys[1:], value, path)
    try:
        return type(obj).model_validate({**dict(obj), keys[0]: inner})
    except ValidationError as e:
        raise PerfModelError(
            format_validation_error(e, path.rsplit(".", len(keys))[0], type(obj))
        ) from None


def sweep(
    plan: Plan,
    path: str,
    values: list[str],
    fixed: bool = False,
    progress: Callable[[int, int], None] | None = None,
    jobs: int = 1,
) -> Sweep:
    """Each value: the changed plan's answer, as `plan` gives it (``fixed``: the plan's own
    knobs, free ones chosen as `plan` chooses them). A value that cannot run is a row with its
    reason. Every value is read and checked first (a bad one stops the sweep: it is the user's
    error, not a result); then each distinct plan is answered once, in ``jobs`` processes.
    ``progress(done, total)`` is called as the answers come."""
    plans = []
    for v in values:
        try:
            plans.append(changed(plan, path, v))
        except PerfModelError as e:
            raise PerfModelError(
                f"--vary {path}={v}: {e}".replace(f": --vary {path}: ", ": ")
            ) from None
    keys = [same_answer_key(p) for p in plans]
    distinct = dict(zip(keys, plans))  # by the changed plan: computed once
    answers = dict(zip(distinct, _answers(list(distinct.values()), fixed, jobs, progress)))
    points = [Point(v, p.system.num_gpus, *answers[key]) for v, p, key in zip(values, plans, keys)]
    return Sweep(path, fixed, points)


# below this many distinct plans a sweep runs in one process: starting a worker (a fresh Python
# importing perfmodel and numpy) costs about as much as a search or two
PARALLEL_FROM = 8
# a worker's share of the plans is answered in parts of at most this many, side by side
# (engine/pooled.py), so that the progress bar moves as each part ends
PART = 64
# and of at most this many rows of the searches' spaces in all: each search holds its space's
# figures while it runs (some 800 bytes a row: 64 searches of DeepSeek-V3 on GB200, 317,000 rows
# each, would hold 16 GB; a plan of one node's 6,000 rows, 300 MB)
POOL_ROWS = 1_000_000


def _answers(
    plans: list[Plan],
    fixed: bool,
    jobs: int,
    progress: Callable[[int, int], None] | None,
) -> list[tuple[Estimate | None, str]]:
    """_answer for each plan, in order: in this process, or over ``jobs`` worker processes (_start),
    each answering its part of the plans with _answer_all; each answer is the same function's
    either way, so the answers are the same."""
    n = len(plans)
    workers = min(jobs, n)
    if workers <= 1 or n < PARALLEL_FROM:
        return _answer_all(plans, fixed, progress)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    size = max(1, min(PART, -(-n // workers)))
    parts = [list(range(a, min(n, a + size))) for a in range(0, n, size)]
    results: list[tuple[Estimate | None, str]] = [(None, "")] * n
    context = multiprocessing.get_context(_start())
    done = 0
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {
            pool.submit(_answer_all, [plans[i] for i in part], fixed): part for part in parts
        }
        for future in as_completed(futures):
            for i, answer in zip(futures[future], future.result()):
                results[i] = answer
            done += len(futures[future])
            if progress is not None:
                progress(done, n)
    return results


def _start() -> str:
    """How the workers start: forked on Linux from a process with no other thread (they begin with
    perfmodel imported and its presets read: some 2 s less of a 500-value sweep on 2 cores),
    else spawned, so that no lock another thread holds is inherited."""
    import threading

    return "fork" if sys.platform.startswith("linux") and threading.active_count() == 1 else "spawn"


def _answer_all(
    plans: list[Plan], fixed: bool, progress: Callable[[int, int], None] | None = None
) -> list[tuple[Estimate | None, str]]:
    """_answer for each plan, in order; ``progress(done, n)`` from (0, n) to (n, n) as they end.
    Plans that differ only in the global batch are searched side by side, up to PART at a time
    (_pool_size), their evaluations pooled (engine/pooled.py: the same figures, to the bit, at a
    fraction of the fixed cost); others one after another."""
    n = len(plans)
    finished = [0]

    def done(_: int = 0) -> None:
        finished[0] += 1
        if progress is not None:
            progress(finished[0], n)

    if progress is not None:
        progress(0, n)
    if n == 1 or fixed or not pooled.poolable(plans):
        out = []
        for p in plans:
            out.append(_answer(p, fixed))
            done()
        return out
    size = min(_pool_size(plans[0]), _pool_size(plans[-1]))
    answers: list[tuple[Estimate | None, str]] = []
    for a in range(0, n, size):
        part = plans[a : a + size]
        if len(part) == 1:
            answers.append(_answer(part[0], fixed))
            done()
        else:
            answers += pooled.side_by_side(lambda p: _answer(p, fixed), part, done)
    return answers


def _pool_size(plan: Plan) -> int:
    """How many searches of plans like this one run side by side: PART, fewer where their spaces
    would hold more than POOL_ROWS rows in all (asked of a sweep's first and last values: the
    space grows with the batch, as its micro-batch sizes do)."""
    try:
        rows = len(enumerate_space(plan).knobs)
    except PerfModelError:  # no space: each search ends at once
        return PART
    return max(1, min(PART, POOL_ROWS // max(rows, 1)))


def same_answer_key(p: Plan) -> str:
    """Equal for two plans that get one answer: equal plans ("25GB/s" and "25 GB/s", 8 and 8.0),
    and plans that differ only in figures the model never reads. Those: the inter-node link of a
    plan inside one NVLink domain (no group spans nodes, and engine/mesh.py prices a group on the
    inter-node link only where it does; the slower-link probe changes only that link), so a sweep
    of its bandwidth is one answer (tests/test_sweep_equals_plan.py holds each row to `plan`'s)."""
    data = p.model_dump(mode="json")
    if p.system.num_gpus <= p.system.domain:
        data["system"].pop("inter_node_link")
    return json.dumps(data, sort_keys=True)


def _answer(p: Plan, fixed: bool) -> tuple[Estimate | None, str]:
    """The changed plan's answer as `plan` (or, ``fixed``, `estimate`) gives it, with its band; or
    why there is none."""
    try:
        if fixed:
            est = estimate_or_search(p, presets.error_bands())[0]
        else:
            # the configuration `plan` recommends (engine/answer.py: one answer, issue 37)
            result = plan_search(p, presets.error_bands(), top=1)
            if not result.results:
                raise PerfModelError(result.hint or "no configuration fits")
            est = result.results[0]
        # each row's band: the out-of-sample error of the runs of its class (issue 28); plan's
        # answer has it already (search.annotate)
        if est.band is None:
            est.band = uncertainty.of_estimate(p, presets.error_bands(), est)
        return est, ""
    except PerfModelError as e:
        return None, str(e)
