"""Each published run's out-of-sample error (the error a band is made of): leave its
SOURCE (its validation table, the `table:` key of configs/validation/*.yaml) out of every fit that
touches it, refit those fits on what is left, and predict the run with the refitted values.

The fits are the calibration scripts' own (benchmarks/calibrate_gpu.py, calibrate_overheads.py),
called with the same grids; one pass: each fit that touches the left-out source is refitted with the
other fitted values as shipped. A fit that no other source informs falls back to its prior, the
value the model would carry had the source never been transcribed:

  fit (script)                               fitted on                         prior when empty
  H100 BF16 gemm_efficiency (calibrate_gpu)  llm-foundry, dgxc-moe-2505       -
  Hopper FP8 fraction (calibrate_gpu         nemo2407-fp8, moe-2026,           the BF16 fraction
    --gpu h100-sxm-fp8)                        llm-foundry, torchtitan-2506
  H100-96GB clock (calibrate_gpu)            torchtitan-2412                   (500/700)^(1/3):
                                                                                 the clock its
                                                                                 power limit
                                                                                 leaves (0.89)
  megatron-core overheads                    nemo2407-fp8,                     -
    (calibrate_overheads)                      moezoo-long-context
  megatron-2022 overheads                    korthikanti2022-table5            none (0 s)
  megatron-2021 overheads                    narayanan2021-table1              none (0 s)
  Blackwell FP8 fraction, NVFP4 speedup      mbridge-blackwell                 H100's FP8 fraction,
    and clocks (calibrate_gpu --gpu                                              NVFP4 likewise,
    blackwell)                                                                   clocks 1.0
  megatron-core expert_call_overhead_s       moezoo-qwen3-235b,                -
    (calibrate_overheads --moe)                moezoo-long-context, moe-2026
  AMD CDNA GEMM fractions, per               amd-instinct, amd-perf-results    H100's BF16
    generation and format                                                      fraction; a
    (calibrate_cdna)                                                           generation with no
                                                                               run: the other's
  InternEvo's RoCE efficiency                internevo-1024-a100               a link's default
    (calibrate_internevo_network)                                                efficiency
  aux_free_bias router load (moe_imbalance)  deepseek-v3-report                aux_loss's load

Not fitted at all: DeepSpeed 2021's host time per rank of a ZeRO-3 collective and its staging
passes (specs/framework_extra.py, cost/sharded.py ZERO3_HBM_PASSES), counted from its code and
priced at published per-call costs; Narayanan 2021 Table 2 is out of sample as shipped.

Not refitted: the A100 efficiencies, fitted on Korthikanti 2022 Table 4's per-layer times (table
korthikanti2022-table4, which has no step-time run: every step time is out of its sample, though
Table 5 shares its paper and cluster). Runs of a source no fit touches (the MLPerf runs, IBM's
fms-fsdp runs) are out of sample as shipped.

Run: python benchmarks/oos_errors.py   (prints each run; benchmarks/refresh_error_bands.py writes
them into configs/error_bands.yaml; several minutes)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import calibrate_cdna as cc
import calibrate_gpu as cg
import calibrate_overheads as co
import numpy as np

from perfmodel.cost.clock import power_limited_clock
from perfmodel.inputs import presets
from perfmodel.review.validate import run_case
from perfmodel.specs.router import ROUTER_LOAD

Case = dict
Transform = Callable[[Case], Case]


def _gpu_is(case: Case, key: str) -> bool:
    return bool(case["plan"].system.gpu.name == presets.gpu(key).name)


def _framework(case: Case) -> str:
    return str(case["plan"].training.framework)


@dataclass(frozen=True)
class Fit:
    """One calibration: the tables it is fitted on, how to refit it on a subset of their runs (a
    transform to apply to a left-out run), and the transform when no run is left (the prior)."""

    name: str
    tables: tuple[str, ...]
    refit: Callable[[list[Case]], Transform] | None
    prior: Transform | None
    prior_text: str = ""


def _unchanged(case: Case) -> Case:
    return case


# --- Hopper's BF16 and FP8 GEMM fractions ---------------------------------------------------------
def _gpu_fit(fit: str) -> Callable[[list[Case]], Transform]:
    """Refit calibrate_gpu's ``fit`` on the runs of its parts among ``cases``."""

    def refit(cases: list[Case]) -> Transform:
        what = cg.FITS[fit][0]
        fit_on = [c for c in cases if cg.on_gpu(c, fit)]
        value, _ = cg.fit(fit_on, fit, what)

        def apply(c: Case) -> Case:
            return cg.with_value(c, fit, what, value) if cg.on_gpu(c, fit) else c

        apply.__doc__ = f"{fit} {what} {value:.2f}"
        return apply

    return refit


def _fp8_prior(c: Case) -> Case:
    """No FP8 Hopper run: FP8 GEMMs at the BF16 fraction of their peak."""
    if not cg.on_gpu(c, "h100-sxm-fp8"):
        return c
    return cg.with_value(
        c, "h100-sxm-fp8", "fp8_gemm_efficiency", presets.gpu("h100-sxm").gemm_efficiency
    )


# --- the 500 W H100's clock ------------------------------------------------------------------
def _clock_prior(c: Case) -> Case:
    """No run on the part: the clock its 500 W limit leaves on a chip whose peaks are quoted at
    700 W, (500 / 700)^(1/3) (cost/clock.py: dynamic power as the clock cubed)."""
    if not _gpu_is(c, "h100-sxm-96gb"):
        return c
    gpu = presets.gpu("h100-sxm-96gb")
    return cg.with_value(
        c, "h100-sxm-96gb", "clock", power_limited_clock(gpu.tdp_w, gpu.peak_power_w)
    )


# --- megatron-core overheads with the H100 FP8 fraction ----------------------------------------
OVERHEADS = ("step_overhead_s", "microbatch_overhead_s", "hop_overhead_s")


def _zeroed(c: Case) -> Case:
    return {**c, "plan": c["plan"].with_training(**dict.fromkeys(OVERHEADS, 0.0))}


def _mcore(cases: list[Case]) -> Transform:
    params, _ = co.fit(cases)

    def apply(c: Case) -> Case:
        return co.with_params(c, params) if _framework(c) == "megatron-core" else c

    apply.__doc__ = "megatron-core " + ", ".join(f"{k} {v:g}" for k, v in params.items())
    return apply


def _no_overheads(framework: str) -> Transform:
    def apply(c: Case) -> Case:
        return _zeroed(c) if _framework(c) == framework else c

    return apply


# --- Blackwell FP8 and NVFP4 fractions ---------------------------------------------------------
def _with_gpu(c: Case, parts: tuple[str, ...], update: dict[str, float]) -> Case:
    """The case with its GPU's fields replaced, where the GPU is one of ``parts``."""
    if not any(_gpu_is(c, k) for k in parts):
        return c
    plan = c["plan"]
    g = plan.system.gpu.model_copy(update=update)
    return {
        **c,
        "plan": plan.model_copy(update={"system": plan.system.model_copy(update={"gpu": g})}),
    }


def _blackwell_prior(c: Case) -> Case:
    """No Blackwell run: every part at its data sheet's clock and at the H100's FP8 fraction of its
    own peaks, FP8 and NVFP4."""
    f = presets.gpu("h100-sxm").fp8_gemm_efficiency
    return _with_gpu(
        c,
        cg.BLACKWELL,
        {"fp8_gemm_efficiency": f, "fp4_gemm_efficiency": f, "sustained_clock": 1.0},
    )


# --- AMD CDNA GEMM fractions and InternEvo's network ------------------------------------------
def _cdna(cases: list[Case]) -> Transform:
    """The CDNA fractions refitted on the AMD runs left (calibrate_cdna.fit); a generation left
    with no run takes the other generation's fractions."""
    f = cc.fit(cases)

    def apply(c: Case) -> Case:
        return cc.with_fractions(c, f)

    apply.__doc__ = cc._say(f)
    return apply


def _cdna_prior(c: Case) -> Case:
    """No AMD run: every CDNA part at the H100's BF16 fraction of its own peaks (the MI300X and
    the MI350X at their clocks: calibrate_cdna.Fractions with nothing fitted)."""
    return cc.with_fractions(c, cc.Fractions())


def _network_prior(c: Case) -> Case:
    """No InternEvo run: its 4 x 100G RoCE network at a link's default efficiency (specs.Link),
    not the one benchmarks/calibrate_internevo_network.py fits on InternEvo's runs."""
    plan = c["plan"]
    link = plan.system.inter_node_link
    if link.name != presets.link("roce-100g-x4").name:
        return c
    default = type(link).model_fields["efficiency"].default
    system = plan.system.model_copy(
        update={"inter_node_link": link.model_copy(update={"efficiency": default})}
    )
    return {**c, "plan": plan.model_copy(update={"system": system})}


# --- the aux_free_bias router family's load ---------------------------------------------------
def _router_prior(c: Case) -> Case:
    """No run of DeepSeek-V3's auxiliary-loss-free routing: its family at the aux_loss figure, what
    it took before a run fitted it (benchmarks/moe_imbalance.py --fit prints the same error)."""
    model = c["plan"].model
    if model.moe_router_family != "aux_free_bias" or model.moe_load_imbalance is not None:
        return c
    m = model.model_copy(update={"moe_load_imbalance": ROUTER_LOAD["aux_loss"]})
    return {**c, "plan": c["plan"].model_copy(update={"model": m})}


# --- megatron-core's per-expert host time -------------------------------------------------------
def _expert(cases: list[Case]) -> Transform:
    value = co._fit_expert(cases)

    def apply(c: Case) -> Case:
        if _framework(c) != "megatron-core" or not c["plan"].model.is_moe:
            return c
        return {**c, "plan": c["plan"].with_training(expert_call_overhead_s=value)}

    apply.__doc__ = f"expert_call_overhead_s {value * 1e6:.0f} us"
    return apply


FITS = (
    Fit("h100-gemm", cg.FITS["h100-sxm"][1], _gpu_fit("h100-sxm"), None),
    Fit(
        "h100-fp8",
        cg.FITS["h100-sxm-fp8"][1],
        _gpu_fit("h100-sxm-fp8"),
        _fp8_prior,
        "the BF16 fraction",
    ),
    Fit(
        "h100-96gb-clock",
        cg.FITS["h100-sxm-96gb"][1],
        None,
        _clock_prior,
        "the power limit's clock, 0.89",
    ),
    Fit("megatron-core-overheads", co.FITS["megatron-core"][0], _mcore, None),
    Fit(
        "megatron-2022-overheads",
        co.FITS["megatron-2022"][0],
        None,
        _no_overheads("megatron-2022"),
        "no overheads",
    ),
    Fit(
        "megatron-2021-overheads",
        co.FITS["megatron-2021"][0],
        None,
        _no_overheads("megatron-2021"),
        "no overheads",
    ),
    Fit(
        "blackwell-fractions",
        ("mbridge-blackwell",),
        None,
        _blackwell_prior,
        "H100's FP8 fraction",
    ),
    Fit("expert-call-overhead", co.MOE_TABLES, _expert, None),
    Fit("cdna-fractions", cc.TABLES, _cdna, _cdna_prior, "H100's BF16 fraction"),
    Fit("aux-free-bias-load", ("deepseek-v3-report",), None, _router_prior, "aux_loss's load"),
    Fit(
        "internevo-network",
        ("internevo-1024-a100",),
        None,
        _network_prior,
        "a link's default efficiency",
    ),
)


def without_source(source: str, every: list[Case]) -> tuple[Transform, list[str]]:
    """The transform that takes a run of ``source`` to the model fitted without ``source`` (each
    fit that touches it refitted on the other sources of ``every``, or at its prior where none is
    left), and what was refitted, in words."""
    moves: list[Transform] = []
    said: list[str] = []
    for f in FITS:
        if source not in f.tables:
            continue
        rest = [c for c in every if c["table"] in f.tables and c["table"] != source]
        if f.refit is not None and rest:
            move = f.refit(rest)
            said.append(f"{f.name} refitted without it ({move.__doc__})")
        elif f.prior is not None:
            move = f.prior
            said.append(f"{f.name} at its prior ({f.prior_text}): no other source")
        else:
            continue
        moves.append(move)

    def leave_out(case: Case) -> Case:
        for move in moves:
            case = move(case)
        return case

    return leave_out, said


def _log_error(case: Case) -> float:
    r = run_case(case)
    return math.log(r.predicted_s / r.measured_s)


def out_of_sample(cases: list[Case] | None = None) -> dict[str, dict]:
    """{run: {table, log error in sample, log error out of sample, what was refitted}}."""
    every = [c for c in cases or presets.validation_cases() if "measured" in c]
    out: dict[str, dict] = {}
    for source in sorted({c["table"] for c in every}):
        own = [c for c in every if c["table"] == source]
        leave_out, said = without_source(source, every)
        for c in own:
            left_out = leave_out(c)
            out[c["name"]] = {
                "table": source,
                "log_error": round(_log_error(c), 5),
                "oos_log_error": round(_log_error(left_out), 5),
                "refit": "; ".join(said) or "no fit touches this source",
            }
        print(f"{source}: {len(own)} runs; " + ("; ".join(said) or "no fit touches it"), flush=True)
    return out


def main() -> None:
    runs = out_of_sample()
    for name, r in runs.items():
        print(
            f"  {name:<44} in {100 * math.expm1(r['log_error']):+6.1f}%"
            f"  out {100 * math.expm1(r['oos_log_error']):+6.1f}%"
        )
    oos = np.abs([r["oos_log_error"] for r in runs.values()])
    print(f"{len(runs)} runs: median |log error| out of sample {100 * np.median(oos):.1f}%")


if __name__ == "__main__":
    main()
