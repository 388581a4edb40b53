"""What the search says when it has no answer: why no configuration is valid (a fixed knob that
cannot work is named first), and when nothing fits, the smallest change that does, in the plan's
own words (issue 29: full recompute, a micro-batch of 1, ZeRO-3, more pipeline stages, or more
GPUs)."""

from __future__ import annotations

from typing import Any

import numpy as np

from perfmodel.engine.evaluate import evaluate_chunked
from perfmodel.engine.knobs import Knobs
from perfmodel.engine.reserve import reserve_bytes
from perfmodel.engine.space import enumerate_space
from perfmodel.errors import PerfModelError
from perfmodel.specs import Plan
from perfmodel.specs.framework import PROFILES


def no_valid_space(plan: Plan, rejected: dict[str, Any]) -> str:
    """Why no configuration is left: a fixed knob that cannot work on its own is named first."""
    n, par, layers = plan.system.num_gpus, plan.parallel, plan.model.num_layers
    fixed = {k: getattr(par, k) for k in ("tp", "pp", "cp") if getattr(par, k)}
    product = int(np.prod(list(fixed.values()))) if fixed else 1
    if n % product:
        given = (
            f"parallel.{next(iter(fixed))} {product}"
            if len(fixed) == 1
            else "parallel " + " x ".join(f"{k}({v})" for k, v in fixed.items()) + f" = {product}"
        )
        return (
            f"{given} does not divide num_gpus({n}): tp x pp x cp x dp must fill the GPUs; fix"
            f" values whose product divides {n}"
        )
    for end in ("first", "last"):
        k = f"decoder_{end}_pipeline_num_layers"
        v = getattr(par, k)
        if v and v >= layers:
            return (
                f"parallel.{k}: {v} layers on the {end} stage, but the model has {layers}: give"
                " fewer, leaving the other stages a layer each"
            )
    why = "; ".join(f"{k}: {v}" for k, v in rejected.items()) or "the fixed knobs leave nothing"
    why += _framework_text(plan, rejected)
    fill = (
        "Use a GPU count that tp x pp x dp can fill (e.g. a multiple of"
        f" {plan.system.gpus_per_node}) or relax"
        if n % plan.system.gpus_per_node
        else "Relax"
    )
    return f"no valid configuration for {n} GPUs ({why}). {fill} the fixed knobs"


def _framework_text(plan: Plan, rejected: dict[str, Any]) -> str:
    """Where the framework's rules (PM110) set configurations aside: the profile, the rule's words
    for the first one, and the bundled profiles under which some configuration of the plan is
    valid (each one's space enumerated again; '' when no PM110 rule rejected anything)."""
    own = plan.training.framework
    said = [getattr(k, "example", "") for k in rejected if getattr(k, "rule", "") == "PM110"]
    if not said:
        return ""
    others = []
    for name in PROFILES:
        if name == own:
            continue
        try:
            if len(enumerate_space(plan.with_training(framework=name)).knobs):
                others.append(name)
        except PerfModelError:
            continue
    can = (
        f"; profiles that can run the plan: {', '.join(others)} (training.framework)"
        if others
        else "; no bundled profile runs it as fixed"
    )
    example = next((e for e in said if e), "")
    return f"; framework profile {own} cannot run it (PM110): {example}{can}"


def nothing_fits(plan: Plan, knobs: Knobs, res: dict[str, Any]) -> str:
    i = int(np.argmin(res["total_bytes"]))
    need, cap = res["total_bytes"][i], plan.system.gpu.hbm_capacity_bytes
    usable = cap - reserve_bytes(plan.system)
    cfg = knobs.config(i, plan.training.global_batch_size)
    msg = (
        f"nothing fits in the {usable / 1e9:.1f} GB usable ({cap / 1e9:.1f} GB HBM less the"
        " reserve; --memory-reserve): the leanest configuration (tp="
        f"{cfg.tp}"
        + "".join(f" {k}={getattr(cfg, k)}" for k in ("cp", "ep", "etp") if getattr(cfg, k) > 1)
        + f" pp={cfg.pp} dp={cfg.dp} mbs={cfg.micro_batch_size} sp={cfg.sequence_parallel}"
        f" recompute={cfg.recompute} zero={cfg.zero_stage}) needs {need / 1e9:.1f} GB"
    )
    change = _smallest_fixed_change(plan)
    if change:
        return msg + f"; the smallest change that fits: {change}"
    n = plan.system.num_gpus
    gpn = plan.system.gpus_per_node
    lean = {
        k: v
        for k, v in (("micro_batch_size", 1), ("recompute", "full"))
        if getattr(plan.parallel, k) is None
    }
    for factor in (2, 4, 8, 16):
        if n * factor > gpn and (n * factor) % gpn:
            continue  # not whole nodes
        # memory only falls with a smaller micro-batch and full recompute: try the leanest of those
        # alone
        bigger = plan.with_system(num_gpus=n * factor).with_parallel(**lean)
        space = enumerate_space(bigger)
        if len(space.knobs) and evaluate_chunked(bigger, space.knobs)["fits"].any():
            return (
                msg
                + f"; the smallest change that fits: {n * factor} GPUs (x{factor}), or a GPU with"
                " more HBM"
            )
    return msg + "; even 16x the GPUs does not fit: use a GPU with more HBM or a shorter sequence"


def _fixed_changes(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """One-knob changes to what the plan fixes that lower memory, in the user's words: full
    recompute, a micro-batch of 1, ZeRO-3 (ZeRO-1 first), twice the pipeline stages, activation
    offloading is not among them (it is a training setting: cpu_offloading_num_layers)."""
    par = plan.parallel
    out: list[tuple[str, dict[str, Any]]] = []
    if par.recompute is not None and par.recompute != "full":
        out.append(("recompute: full", {"recompute": "full"}))
    if par.micro_batch_size is not None and par.micro_batch_size > 1:
        out.append(("micro_batch_size: 1", {"micro_batch_size": 1}))
    if par.zero_stage is not None:
        for z in range(par.zero_stage + 1, 4):
            out.append((f"zero_stage: {z}", {"zero_stage": z}))
    if par.pp is not None:
        dp = {"dp": par.dp // 2} if par.dp is not None and par.dp % 2 == 0 else {}
        if par.dp is None or dp:
            grow = {"pp": 2 * par.pp, **dp}
            label = f"pp: {2 * par.pp}" + (f" (dp {dp['dp']})" if dp else "")
            out.append((label, grow))
    return out


def _smallest_fixed_change(plan: Plan) -> str:
    """The fastest single change to a fixed knob under which some configuration fits, with its
    figures; '' when none does (or the plan fixes none of those knobs)."""
    best: tuple[float, str] | None = None
    for label, change in _fixed_changes(plan):
        try:
            changed = plan.with_parallel(**change)
            space = enumerate_space(changed)
        except PerfModelError:
            continue
        if not len(space.knobs):
            continue
        res = evaluate_chunked(changed, space.knobs)
        fits = np.asarray(res["fits"], dtype=bool)
        if not fits.any():
            continue
        i = int(np.flatnonzero(fits)[np.argmin(np.asarray(res["step_time_s"])[fits])])
        text = (
            f"{label} ({res['total_bytes'][i] / 1e9:.1f} GB a GPU, step"
            f" {res['step_time_s'][i]:.3g} s)"
        )
        if best is None or res["step_time_s"][i] < best[0]:
            best = (float(res["step_time_s"][i]), text)
    return best[1] if best else ""
