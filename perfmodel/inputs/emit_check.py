"""What an emitted file gives back (`plan --emit torchtitan`, `plan --emit megatron`): the file
read as its read-back line says (`perfmodel import` with the GPU preset, the usual links), estimated
and set against the prediction it was emitted for; where the two differ, a comment line names the
plan's fields the file does not carry and what it reads back to."""

from __future__ import annotations

from perfmodel.errors import PerfModelError


def gpu_preset(gpu) -> tuple[str, str | None]:
    """The preset `import --gpu` takes for a plan's GPU, and what differs where it is not a preset
    (a base: extension; None when it is one)."""
    from perfmodel.inputs import presets

    names = presets.preset_names("gpus")
    exact = next((n for n in names if presets.gpu(n) == gpu), None)
    if exact:
        return exact, None
    base = next((n for n in names if presets.gpu(n).name == gpu.name), None)
    if base:
        ref = presets.gpu(base)
        changed = [k for k in type(gpu).model_fields if getattr(gpu, k) != getattr(ref, k)]
        return base, f"{base} with {', '.join(changed)} changed"
    nearest = "mi300x" if gpu.name.startswith("AMD") else "h100-sxm"
    return nearest, f"{gpu.name}, which no preset describes"


def read_back(plan, text: str, kind: str):
    """The emitted text as its read-back line reads it (`import KIND` with the preset GPU and the
    links it assumes; a launch file's vocabulary is the tokenizer's, given), on the plan's own GPU
    where that is no preset (the comment says to set it): the plan the file gives back."""
    from perfmodel.inputs.load import plan_of, read_launch_text
    from perfmodel.specs import Plan

    preset, custom = gpu_preset(plan.system.gpu)
    # a launch file's GPU count is its comment line's (`import megatron` needs no --gpus)
    gpus, vocab = (
        (None, plan.model.vocab_size) if kind == "megatron" else (plan.system.num_gpus, None)
    )
    imp = read_launch_text(text, kind, preset, gpus, "THIS", vocab)  # type: ignore[arg-type]
    back = plan_of(imp, "THIS")
    if custom:
        data = back.model_dump()
        data["system"]["gpu"] = plan.system.gpu.model_dump()
        back = Plan.model_validate(data)
    return back


# fields that name or describe and cost nothing
NOT_COMPARED = ("links_from", "name", "source", "seq_length", "rotary_base", "rope_scaling_factor")


def not_carried(plan, c: dict, back) -> list[str]:
    """The plan's fields, and the configuration's knobs, that the read-back plan has otherwise."""
    from perfmodel.engine.estimate import resolve_config

    out = []
    for section in ("model", "system", "training"):
        mine, theirs = getattr(plan, section).model_dump(), getattr(back, section).model_dump()
        out += [  # a field the plan leaves to its default (None) is the reader's to fill
            f"{section}.{k}"
            for k in mine
            if k not in NOT_COMPARED and mine[k] is not None and mine[k] != theirs.get(k)
        ]
    got = resolve_config(back).as_dict()
    return out + [f"parallel.{k}" for k in c if c[k] != got.get(k)]


def trip_note(plan, best, text: str, kind: str) -> str | None:
    """None where the emitted text reads back to the step and memory predicted; else what it
    reads back to and the plan's fields it does not carry."""
    from perfmodel.engine.estimate import estimate, resolve_config

    try:
        back = read_back(plan, text, kind)
    except PerfModelError as e:  # the text itself is what the user gets; say why it reads badly
        return f"not carried: this file does not read back ({e})"
    got = estimate(back, resolve_config(back)).values
    want = best.values
    same = all(abs(got[k] - want[k]) <= 1e-6 * abs(want[k]) for k in ("step_time_s", "total_bytes"))
    if same:
        return None
    fields = (
        ", ".join(not_carried(plan, best.config.as_dict(), back))
        or "the configuration the search picked"
    )
    return (
        f"not carried: {fields}; read back, this file predicts {got['step_time_s']:.4g} s and"
        f" {got['total_bytes'] / 1e9:.1f} GB a GPU (the plan: {want['step_time_s']:.4g} s,"
        f" {want['total_bytes'] / 1e9:.1f} GB): set them in the imported plan"
    )
