"""What `plan` and `estimate` print: the top configurations, the per-iteration breakdown, throughput
and memory of one estimate."""

from __future__ import annotations

from perfmodel.engine import memory_switches
from perfmodel.output import render_run
from perfmodel.output.console import kv, line, pct, table
from perfmodel.output.render import config_short, config_text, memory
from perfmodel.output.render_answer import answer
from perfmodel.units import fmt_bytes, fmt_time


def estimate(plan, est, ops=None, verbose: bool = False, head: bool = True) -> None:
    """The answer (with ``head``), the per-layer table (optional), the per-iteration breakdown,
    throughput and memory of one estimate."""
    from perfmodel.engine.estimate import ops_json
    from perfmodel.engine.reserve import usable_text

    j = est.to_json()
    c = j["config"]
    title = (
        f"{plan.model.name} on {plan.system.num_gpus} x {plan.system.gpu.name}:"
        f" {config_text(c, j['stage_layers'])}"
    )
    if not j["memory"]["fits"]:  # the verdict before the figures
        m = j["memory"]
        line(
            "[red]DOES NOT FIT:[/red] "
            + usable_text(m["total_bytes"], m["capacity_bytes"], m["reserve_bytes"])
        )
    if head:
        answer(j, plan.training.framework)
    if ops is not None:
        _per_layer(ops_json(ops))
    _breakdown(j, title)
    _throughput(j, verbose)
    render_run.training_run(j["training_run"])
    m = j["memory"]
    memory(
        m,
        "Memory per GPU (most loaded stage); model states = weights + gradients + optimizer "
        f"= {fmt_bytes(m['weights_bytes'] + m['gradients_bytes'] + m['optimizer_bytes'])}",
    )
    for a in j["assumed"]:
        line(f"assumed: {a}")
    for w in j["warnings"]:
        line(f"[yellow]warning:[/yellow] {w}")


def _per_layer(op_rows: list[dict]) -> None:
    """`estimate --per-layer`: every operation of one layer, forward and backward."""
    rows = [
        (
            r["name"],
            f"{r['flops']:.3g}" if r["flops"] else "-",
            fmt_bytes(r["bytes"]),
            r["bound"],
            fmt_time(r["forward_s"]),
            fmt_time(r["backward_s"]),
        )
        for r in op_rows
    ]
    tf = sum(r["forward_s"] for r in op_rows)
    tb = sum(r["backward_s"] for r in op_rows)
    rows.append(("total", "", "", "", fmt_time(tf), fmt_time(tb)))
    table(
        "One layer on one GPU, one micro-batch",
        ["operation", "FLOP", "bytes", "bound", "forward", "backward"],
        rows,
        right=[False, True, True, False, True, True],
        caption=(
            "comm bytes: per rank on the wire; backward comm: the part not hidden; --json gives"
            " each op's kind"
        ),
    )


def _breakdown(j: dict, head: str) -> None:
    """Where the step time goes, component by component."""
    step = j["step_time_s"]
    bd = j["breakdown_s"]
    labels = {
        "forward": "forward (compute)",
        "backward": "backward (compute)",
        "recompute": "recompute",
        "bubble": "pipeline bubble",
        "tp_comm": "TP comm (critical path)",
        "cp_comm": "CP comm (critical path)",
        "ep_comm": "EP comm (critical path)",
        "pp_comm": "PP point-to-point",
        "dp_comm": "DP grad sync (not hidden)",
        "zero_comm": "FSDP/ZeRO-3 traffic (not hidden)",
        "optimizer": "optimizer step",
        "overhead": "framework overheads (fitted)",
    }
    table(
        f"Per-iteration breakdown: {head}",
        ["component", "time", "share"],
        [(labels[k], fmt_time(v), pct(v / step)) for k, v in bd.items()]
        + [("step time", fmt_time(step), "100%")],
        right=[False, True, True],
        caption=(
            f"slowest stage: {j['slowest_stage']} (first {fmt_time(j['stage_time_s']['first'])},"
            f" middle {fmt_time(j['stage_time_s']['middle'])}, last"
            f" {fmt_time(j['stage_time_s']['last'])} per micro-batch)"
        ),
    )


def _throughput(j: dict, verbose: bool = False) -> None:
    """Step time with its expected error, tokens/s, MFU and HFU, the bubble, the FLOP convention."""
    step = j["step_time_s"]
    sched = j["config"].get("schedule")
    dual = sched in ("dualpipe", "dualpipev")
    split = sched in ("zb-h1", "zb-h2", "zbv", "v-half", "v-min")
    band = j.get("expected_error")
    band_text = (
        ""
        if not band
        else (
            f" (expected {fmt_time(band['step_time_range_s'][0])} to"
            f" {fmt_time(band['step_time_range_s'][1])}: +-{100 * band['typical_half_width']:.0f}%"
            f" typical, +-{100 * band['worst_half_width']:.0f}% worst; {band['basis']})"
        )
    )
    kv(
        "Throughput",
        [
            ("step time", fmt_time(step) + band_text),
            ("tokens/s", f"{j['tokens_per_s']:,.0f} ({j['tokens_per_s_per_gpu']:,.0f} per GPU)"),
            (
                "model TFLOP/s per GPU",
                f"{j['model_tflops_per_gpu']:,.1f} TFLOP/s (MFU {pct(j['mfu'])})",
            ),
            (
                "hardware TFLOP/s per GPU",
                f"{j['hardware_tflops_per_gpu']:,.1f} TFLOP/s (HFU {pct(j['hfu'])})",
            ),
            (
                "pipeline bubble",
                (
                    f"{pct(j['bubble_share_of_step'])} of the step: the time the schedule adds"
                    " beyond m x the slowest stage "
                    + (
                        "(DualPipe's closed form, (p/2-1)(F&B+B-3W): DeepSeek-V3 report Table 2)"
                        if dual
                        else (
                            "(simulated; B and W split, Qi et al. 2023/2024: docs/schedules.md)"
                            if split
                            else "(simulated)"
                        )
                    )
                ),
            ),
            *(
                [
                    (
                        "closed forms (equal stages)",
                        (
                            f"(p-1)/(m v+p-1) = {pct(j['bubble_over_step'])} of a step, (p-1)/(m v)"
                            f" = {pct(j['bubble_over_ideal'])} of the ideal compute (Narayanan"
                            " 2021)"
                        ),
                    )
                ]
                if verbose and not (dual or split)
                else []
            ),
            ("FLOP convention", j["flop_convention"]),
        ],
    )


def plan(plan_obj, result, verbose: bool = False) -> None:
    """The top configurations, the best one's breakdown, and the search's accounting."""
    rows = []
    marks = ["~" if e.equivalent_to_best else "" for e in result.results]
    for i, e in enumerate(result.results, 1):
        j = e.to_json()
        c = j["config"]
        # the schedule's name where vp does not already say it (1f1b, interleaved)
        sched = "" if c["schedule"] in ("1f1b", "interleaved") else " " + c["schedule"]
        rows.append(
            (
                f"{i}{marks[i - 1]}",
                config_short(c) + sched,
                fmt_time(j["step_time_s"]),
                f"{j['tokens_per_s_per_gpu']:,.0f}",
                pct(j["mfu"]),
                pct(j["bubble_share_of_step"]),
                fmt_bytes(j["memory"]["total_bytes"])
                + ("!" if j["memory"].get("verdict") == "tight" else ""),
            )
        )
    tight = [e.to_json()["memory"] for e in result.results]
    tight = [m for m in tight if m.get("verdict") == "tight"]
    if rows:
        answer(result.results[0].to_json(), plan_obj.training.framework)
        if result.safest is not None:  # a tight answer: the safe one beside it (issue 37)
            from perfmodel.engine.answer import tight_pick_text

            line("[yellow]tight:[/yellow] " + tight_pick_text(result.results[0], result.safest))
        table(
            f"Top {len(rows)} of {result.feasible:,}: {plan_obj.model.name},"
            f" {plan_obj.system.num_gpus} x {plan_obj.system.gpu.name}, batch"
            f" {plan_obj.training.global_batch_size}, {plan_obj.training.dtype}",
            ["#", "configuration", "step", "tok/s", "MFU", "bubble", "mem/GPU"],
            rows,
            right=[True, False, True, True, True, True, True],
            caption=(
                "tp pp dp (cp ep) vp; dpRxS: HSDP (R replicas x S shards); cpNa2a: Ulysses CP;\n"
                "b: micro-batch; sp: sequence parallel; sel, full: recompute; z: ZeRO stage;\n"
                "tok/s: tokens/s per GPU; MFU against the "
                f"{(plan_obj.training.mfu_peak or plan_obj.training.dtype).upper()} peak;"
                f" framework: {plan_obj.training.framework}"
                + (
                    f"\n!: tight, the peak within the memory band (+-{100 * tight[0]['band']:.1f}%)"
                    " of the usable memory"
                    if tight
                    else ""
                )
                + (
                    "\n" + memory_switches.LEGEND
                    if any(e.config.memory_switch for e in result.results)
                    else ""
                )
            ),
        )
        _equivalents(plan_obj, result)
        estimate(plan_obj, result.results[0], verbose=verbose, head=False)
    line(
        f"evaluated {result.evaluated:,} configurations in {result.search_time_s:.2f} s"
        f" ({result.evaluated / max(result.search_time_s, 1e-9):,.0f} per second); feasible"
        f" {result.feasible:,}"
    )
    # each candidate is counted once: under the first rule it breaks before evaluation, or as
    # not fitting among the evaluated
    for reason, count in result.rejected.items():
        when = (
            "evaluated, rejected" if getattr(reason, "rule", None) == "PM101" else "not evaluated"
        )
        line(f"  {when}: {reason}: {count:,}")
    if result.hint:
        line(f"[red]{result.hint}[/red]")


def _equivalents(plan_obj, result) -> None:
    """How many configurations the model cannot rank (~: inside the fastest one's typical band,
    out of sample), the one listed first (nearest validated practice: engine/practice.py), and
    what separates the others from it; identical descriptions are printed once."""
    from perfmodel.engine import practice
    from perfmodel.engine import search as srch

    same = [(i, e) for i, e in enumerate(result.results, 1) if e.equivalent_to_best]
    if len(same) < 2 or same[0][1].band is None:
        return
    fastest = min((e for _, e in same), key=lambda e: e.values["step_time_s"])
    count = result.equivalents or len(same)
    # every configuration ranked was inside the band: there may be more beyond those
    more = "at least " if count >= srch.RANK_POOL else ""
    line(
        f"~ {more}{count} configurations within +-{100 * fastest.band.typical:.0f}% of the fastest"
        f"{' (the first ' + str(len(same)) + ' listed)' if count > len(same) else ''}; the model"
        " cannot rank them. #1 is the nearest validated practice"
        + (
            " among those whose memory fits with margin."
            if any(e.values["tight"] for _, e in same) and not same[0][1].values["tight"]
            else "."
        )
    )
    shared, texts = practice.separates(plan_obj, [e for _, e in same])
    if shared:
        line(f"  all: {', '.join(shared)}")
    groups: dict[str, list[int]] = {}
    for (i, e), text in zip(same, texts):
        slow = e.slower_link_step_s
        text += (
            f", {100 * (slow / e.values['step_time_s'] - 1):+.0f}% with a 20% slower inter-node"
            " link"
            if slow
            else ""
        )
        groups.setdefault(text, []).append(i)
    for text, ids in groups.items():
        line(f"  {', '.join(f'#{i}' for i in ids)}: {text}")
