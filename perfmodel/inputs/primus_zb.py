"""AMD Primus's zero-bubble schedules as launch arguments, written (`plan --emit megatron` under the
primus profile) and read back (`import megatron`).

Primus runs Sea AI Lab's zero-bubble runtime on its Megatron-LM backend, switched by its own keys
(AMD-AGI/Primus, primus/configs/modules/megatron/zero_bubble.yaml and
primus/backends/megatron/core/pipeline_parallel/zerobubble/README.md, whose table gives each
strategy's flags in this underscore form):
  zb1p (ZB-H1)  --patch_zero_bubble true --enable_zero_bubble true, pending backward = pp
  zb2p (ZB-H2)  the same with --zero_bubble_max_pending_backward 2 pp (zero_bubble.yaml: "when
                number of stages are 8, setting to 16 will use zb2p and setting to 8 will use zb1p")
  zbv, v-half, v-min  --patch_zero_bubble true --zero_bubble_v_schedule true
                --zero_bubble_v_schedule_mem_setup zb | half | min, 2 virtual stages a rank
                (Primus' argument check: mem_setup in {"min", "half", "zb"}; default half)
Interleaved zero-bubble has no key there: it is refused, naming what to set by hand.
"""

from __future__ import annotations

from perfmodel.errors import PerfModelError

V_SETUP = {"zbv": "zb", "v-half": "half", "v-min": "min"}
PENDING = {"zb-h1": 1, "zb-h2": 2}  # pending backward passes, in pipeline stages
KEYS = (
    "patch_zero_bubble",
    "enable_zero_bubble",
    "zero_bubble_max_pending_backward",
    "zero_bubble_v_schedule",
    "zero_bubble_v_schedule_mem_setup",
)
# Primus' documented underscore form, and Megatron-LM's dashed form of the same keys
FLAGS = tuple(f"--{k}" for k in KEYS) + tuple(f"--{k.replace('_', '-')}" for k in KEYS)


def emits(schedule: str | None) -> bool:
    """Whether Primus has keys for ``schedule`` (a zero-bubble one)."""
    return schedule in V_SETUP or schedule in PENDING


def primus_args(c: dict) -> list[str]:
    """Primus's keys for the configuration's zero-bubble schedule (none for another schedule)."""
    s = c.get("schedule")
    if s in PENDING:
        return [
            "--patch_zero_bubble true",
            "--enable_zero_bubble true",
            f"--zero_bubble_max_pending_backward {PENDING[s] * c['pp']}",
        ]
    if s in V_SETUP:
        return [
            "--patch_zero_bubble true",
            "--zero_bubble_v_schedule true",
            f"--zero_bubble_v_schedule_mem_setup {V_SETUP[s]}",
        ]
    return []


def refusal(schedule: str, title: str, framework: str) -> str:
    """Why a schedule cannot be written as arguments, and what to set by hand."""
    if framework == "primus":
        return (
            f"the configuration runs {title}, for which Primus's zero-bubble keys"
            " (zero_bubble.yaml: zb1p, zb2p, zbv, v-half, v-min) have no setting: set Primus's"
            " pipeline schedule by hand (its primus_pipeline.yaml: patch_primus_pipeline: true"
            " and a pp_algorithm), or plan with --schedule zb-h1, zb-h2, zbv, v-half, v-min,"
            " 1f1b or interleaved"
        )
    return (
        f"the configuration runs {title}, which Megatron-LM has no schedule for (docs/schedules.md"
        " says which frameworks run it): plan with --schedule 1f1b or interleaved to emit"
        " Megatron-LM arguments, or with --framework primus for its zero-bubble keys"
    )


def _value(args: dict, key: str) -> str | None:
    for flag in (f"--{key}", f"--{key.replace('_', '-')}"):
        if flag in args:
            vals = args[flag]
            if len(vals) != 1:
                raise PerfModelError(f"{flag} takes one value (got {' '.join(vals) or 'none'})")
            return vals[0]
    return None


def _on(args: dict, key: str) -> bool:
    v = _value(args, key)
    if v is None or v.lower() in ("false", "0"):
        return False
    if v.lower() in ("true", "1"):
        return True
    raise PerfModelError(f"--{key} {v}: Primus takes true or false")


def read_schedule(args: dict, parallel: dict, assumed: list[str]) -> None:
    """The zero-bubble schedule Primus's keys select, into ``parallel`` (after Megatron's rules,
    which take vp > 1 as interleaved)."""
    if not _on(args, "patch_zero_bubble"):
        if any(f in args for f in FLAGS):
            assumed.append("Primus's zero-bubble keys without --patch_zero_bubble true: not run")
        return
    if _on(args, "zero_bubble_v_schedule"):
        setup = _value(args, "zero_bubble_v_schedule_mem_setup") or "half"
        names = {v: k for k, v in V_SETUP.items()}
        if setup not in names:
            raise PerfModelError(
                f"--zero_bubble_v_schedule_mem_setup {setup}: Primus takes zb, half or min"
            )
        parallel["schedule"], parallel["vp"] = names[setup], 2
        return
    if not _on(args, "enable_zero_bubble"):
        return
    pending, pp = _value(args, "zero_bubble_max_pending_backward"), parallel.get("pp", 1)
    by_pending = {n * pp: s for s, n in PENDING.items()}
    if pending is None or not pending.isdigit() or int(pending) not in by_pending:
        raise PerfModelError(
            f"--zero_bubble_max_pending_backward {pending or 'auto'}: perfmodel models {pp}"
            f" (zb1p, ZB-H1) or {2 * pp} (zb2p, ZB-H2) at pp {pp}, not Primus's adaptive limit"
        )
    parallel["schedule"] = by_pending[int(pending)]
