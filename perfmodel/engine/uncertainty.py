"""How sure a result is: a band on a step time from the model's error on published runs it never
saw (issue 28; SPEC 13 "Error bands that hold").

configs/error_bands.yaml (benchmarks/refresh_error_bands.py) lists every published run with what it
was and its out-of-sample error e = log(predicted / measured): its source (validation table) left
out of every fit that touches it (benchmarks/oos_errors.py). A plan's band is split conformal
(Vovk et al. 2005; Angelopoulos and Bates 2021, Sec. 1): the ceil((n+1) q)-th smallest |e| of the n
runs of its class, q = 0.68 (typical) and 0.95 (worst). The class is the framework, the GPU
generation and dense or MoE; with fewer than MIN_RUNS runs, the framework and the generation.
A class too small for a 95% rank (n < 19) takes typical x RATIO, RATIO being the 95% rank of
|e| / typical over every run, each with the band its class gives without its own source
(normalized conformal scores; Lei et al. 2018, Sec. 5.2).

What no run validated widens the band: a framework never run on the GPU generation, a format never
run on the GPU, a parallel dimension or a pair of them (PP with sharded parameters, CP with EP, EP
over a rack-scale NVLink domain) that no run of the framework combined. Each such ingredient adds
the typical out-of-sample error of the runs that have it, in quadrature (independent log errors add
their variances); benchmarks/band_coverage.py measures how often the widened bands hold.
"""

from __future__ import annotations

import itertools
import math
from functools import cache
from typing import Any

import numpy as np

from perfmodel.engine.band import Band as Band
from perfmodel.engine.band import gpu_family as gpu_family
from perfmodel.specs import Plan

TYPICAL, WORST = 0.68, 0.95
MIN_RUNS = 3  # the least a class needs for a 68% rank: ceil((n + 1) 0.68) <= n
# and from two sources at least: one source's runs share their software and transcription, so one
# source says little of the next (benchmarks/band_coverage.py: with one, typical bands hold 70% at a
# median half-width of 17%; with two, 68% at 13%)
MIN_SOURCES = 2


# GPU generations: the tensor cores, HBM and NVLink a family shares with its siblings
ARCHITECTURES = {
    "v100": "volta",
    "a100": "ampere",
    "h100": "hopper",
    "h200": "hopper",
    "h800": "hopper",
    "b200": "blackwell",
    "b300": "blackwell",
    "gb200": "blackwell",
    "gb300": "blackwell",
    "mi300": "cdna3",
    "mi325": "cdna3",
    "mi350": "cdna4",
    "mi355": "cdna4",
}
TAGS = {
    "pp": "pipeline parallelism",
    "cp": "context parallelism",
    "ep": "expert parallelism",
    "sharded": "sharded parameters (FSDP / ZeRO-3)",
    "rack": "a rack-scale NVLink domain",
}


def features(plan: Plan, config: Any) -> dict[str, Any]:
    """What a configuration is, in the terms the runs are keyed by."""
    gpu = gpu_family(plan.system.gpu.name)
    s = plan.system
    tags = {
        "pp": config.pp > 1,
        "cp": config.cp > 1,
        "ep": config.ep > 1,
        "sharded": config.zero_stage >= 2,
        "rack": s.domain > s.gpus_per_node and s.num_gpus > s.gpus_per_node,
    }
    return {
        "framework": plan.training.framework,
        "gpu": gpu,
        "arch": ARCHITECTURES.get(gpu, gpu),
        "dtype": plan.training.dtype,
        "moe": bool(plan.model.is_moe),
        "tags": [t for t, on in tags.items() if on],
    }


def runs_from_report(report: Any) -> dict[str, dict[str, Any]]:
    """{run: {table, what it was, log(predicted/measured) with the shipped constants}} from a
    validate Report (the out-of-sample errors are benchmarks/oos_errors.py's)."""
    return {
        c.name: {
            "table": c.table,
            **features(c.plan, c.estimate.config),
            "log_error": round(math.log(c.predicted_s / c.measured_s), 5),
        }
        for c in report.cases
    }


def conformal(scores: list[float] | np.ndarray, level: float) -> float | None:
    """The ceil((n+1) level)-th smallest score: split conformal's quantile; None when n is too
    small for the level."""
    s = np.sort(np.abs(np.asarray(scores, dtype=float)))
    k = math.ceil((s.size + 1) * level)
    return float(s[k - 1]) if 0 < k <= s.size else None


# Runs of one software lineage share their kernels and schedules: a profile's successors are of its
# family (the framework profiles of specs/framework.py; a framework not listed is its own)
FAMILIES = {
    "megatron-2021": "Megatron",
    "megatron-2022": "Megatron",
    "megatron-core": "Megatron",
    "fsdp": "PyTorch FSDP",
    "fsdp1": "PyTorch FSDP",
}
# formats that run the tensor cores at one rate (FP16 and BF16; FP8 and MXFP8)
FORMATS = {
    "fp16": "16-bit",
    "bf16": "16-bit",
    "fp8": "FP8",
    "mxfp8": "FP8",
    "nvfp4": "FP4",
    "mxfp4": "FP4",
}
# the class of a configuration, most specific first: the first with MIN_RUNS runs is its class;
# what a coarser class drops is an ingredient no run of the finer one validated. Dense or MoE
# before the generation: a model's MoE layers (routing, all-to-alls, grouped GEMMs) move its
# error more than the GPU generation does (benchmarks/band_coverage.py: dense Megatron on Hopper,
# one source, took the Hopper class of MoE runs before; see docs/bands.md section 2)
LEVELS = (("family", "arch", "moe"), ("family", "moe"), ("family", "arch"), ("family",))


def _full(r: dict[str, Any]) -> dict[str, Any]:
    return {
        **r,
        "family": FAMILIES.get(r["framework"], r["framework"]),
        "format": FORMATS.get(r["dtype"], r["dtype"]),
    }


def _words(f: dict[str, Any], keys: tuple[str, ...]) -> str:
    parts = {
        "moe": "MoE" if f["moe"] else "dense",
        "family": f["family"],
        "arch": f"on {f['arch'].capitalize()}",
    }
    return " ".join(parts[k] for k in parts if k in keys)


class Runs:
    """The published runs of configs/error_bands.yaml, and the bands they give."""

    def __init__(self, runs: dict[str, dict[str, Any]]) -> None:
        self.runs = {n: _full(r) for n, r in runs.items() if "oos_log_error" in r}
        # band() of each configuration kind seen: a search asks for the bands of its pool of 50,
        # a sweep for each value's, and they share a handful of kinds (Band is frozen)
        self._bands: dict[tuple[tuple[str, Any], ...], Band] = {}

    def without(self, table: str) -> Runs:
        return Runs({n: r for n, r in self.runs.items() if r["table"] != table})

    def _match(self, **want: Any) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if all(r[k] == v for k, v in want.items())]

    def _typical(self, runs: list[dict[str, Any]]) -> float:
        """The 68% rank of these runs' |e|, or of every run's where they are too few."""
        pool = runs if len(runs) >= MIN_RUNS else list(self.runs.values())
        return conformal([r["oos_log_error"] for r in pool], TYPICAL) or 0.0

    def _class(self, f: dict[str, Any]) -> tuple[list[dict[str, Any]], str, list[str]]:
        """The runs of ``f``'s class, its name, and what of ``f`` its class does not hold: the
        first level of LEVELS whose runs number MIN_RUNS from MIN_SOURCES sources, else every
        run."""
        for level in LEVELS:
            runs = self._match(**{k: f[k] for k in level})
            if len(runs) >= MIN_RUNS and len({r["table"] for r in runs}) >= MIN_SOURCES:
                return runs, _words(f, level), [k for k in LEVELS[0] if k not in level]
        return list(self.runs.values()), "every run", ["family", "arch"]

    def _ingredient(self, what: str, f: dict[str, Any]) -> tuple[float, str]:
        """The typical out-of-sample error of the runs that have ``what``, and what it says."""
        if what in ("framework", "family", "arch", "format"):
            runs = self._match(**{what: f[what]})
            text = {
                "framework": f["framework"],
                "family": f["family"],
                "arch": f["arch"].capitalize(),
                "format": f["format"],
            }[what]
            text += " runs"
        elif what == "moe":
            runs, text = self._match(moe=f["moe"]), ("MoE" if f["moe"] else "dense") + " runs"
        else:  # parallel dimensions: the runs that combine them, under any framework
            need = set(what.split("+"))
            runs = [r for r in self.runs.values() if need <= set(r["tags"])]
            text = " with ".join(t.upper() if t in ("pp", "cp", "ep") else t for t in sorted(need))
            text += " runs"
        many = len(runs) >= MIN_RUNS
        return self._typical(runs), f"{text} ({len(runs)})" if many else f"all runs (no {text})"

    def _missing(self, f: dict[str, Any], why: list[str]) -> list[tuple[str, str]]:
        """(ingredient, the words for what no run validated) for a configuration ``f``."""
        out = []

        def said(keys: tuple[str, ...]) -> str:
            """What the finer class held: no run, or the runs of one source."""
            runs = self._match(**{k: f[k] for k in keys})
            return _words(f, keys) + (" by two sources" if runs else "")

        if "family" in why:
            out += [("family", said(("family", "arch"))), ("arch", said(("family", "arch")))]
        elif "arch" in why:
            out.append(("arch", said(("family", "arch") if "moe" in why else LEVELS[0])))
        if "family" not in why and not self._match(framework=f["framework"], arch=f["arch"]):
            # the family's runs on this generation ran other profiles of it (megatron-core on
            # A100: the runs are Megatron-LM 2021 and 2022). Said, not added: across the family's
            # profiles the bands hold (benchmarks/band_coverage.py: Korthikanti's megatron-2022
            # runs all inside the band of Narayanan's megatron-2021 ones, and back); adding the
            # framework's own runs' error widened the median band from 13% to 17% and held none
            # more
            out.append(("framework", f"{f['framework']} on {f['arch'].capitalize()}"))
        if "moe" in why and "arch" not in why:
            out.append(("moe", said(("moe", "family", "arch"))))
        if not self._match(gpu=f["gpu"], format=f["format"]):
            out.append(("format", f"{f['format']} on {f['gpu'].upper()}"))
        done = [set(r["tags"]) for r in self._match(family=f["family"])]
        for n in (1, 2):
            for combo in itertools.combinations(f["tags"], n):
                if not any(set(combo) <= d for d in done):
                    words = " with ".join(TAGS[t] for t in combo)
                    out.append(("+".join(combo), f"{words} under {f['family']}"))
        # a pair is unvalidated only where each of its parts was validated on its own
        singles = {k for k, _ in out if k in TAGS}
        return [(k, t) for k, t in out if "+" not in k or not singles & set(k.split("+"))]

    def _widened(
        self, f: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], str, float, list[tuple[str, str, str]]]:
        """The class runs, their name, the typical half-width with every ingredient no run
        validated added in quadrature, and those ingredients (key, words, what widened). What the
        class itself does not hold (the framework family, the generation, dense or MoE) is
        already in its coarser pool; it is said, not added."""
        runs, name, why = self._class(f)
        square = self._typical(runs) ** 2
        missing = []
        for what, words in dict(self._missing(f, why)).items():
            text = ""
            if what not in (*LEVELS[0], "framework"):
                w, text = self._ingredient(what, f)
                square += w**2
            missing.append((what, words, text))
        return runs, name, math.sqrt(square), missing

    def band(self, f: dict[str, Any]) -> Band:
        """The band of a configuration ``f`` (features()), once per kind of configuration."""
        key = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in sorted(f.items()))
        if key not in self._bands:
            self._bands[key] = self._band(f)
        return self._bands[key]

    def _band(self, f: dict[str, Any]) -> Band:
        f = _full(f)
        runs, name, typical, missing = self._widened(f)
        sources = len({r["table"] for r in runs})
        basis = f"{name}: {len(runs)} runs of {sources} sources, out of sample"
        worst = None if missing else conformal([r["oos_log_error"] for r in runs], WORST)
        if missing:
            said = sorted({words for _, words, _ in missing})
            added = [text for _, _, text in missing if text]
            basis += "; no run validated " + ", ".join(said)
            basis += (": widened by " + ", ".join(added)) if added else ""
        if worst is None or worst < typical:
            worst = typical * self.ratio()
        return Band(typical, worst, basis, len(runs), tuple(sorted({w for _, w, _ in missing})))

    @cache  # noqa: B019 (one Runs per file, kept for the process)
    def ratio(self) -> float:
        """The 95% rank of every run's |e| over its 68% rank: a class too small for a 95% rank
        (or widened) scales its typical half-width by it (the shape of the error distribution
        shared, its scale the class's own)."""
        every = [r["oos_log_error"] for r in self.runs.values()]
        return (conformal(every, WORST) or 0.0) / max(conformal(every, TYPICAL) or 0.0, 1e-6)


_RUNS: dict[int, Runs] = {}


def _runs(bands: dict[str, Any]) -> Runs:
    key = id(bands)
    if key not in _RUNS:
        _RUNS[key] = Runs(bands["runs"])
    return _RUNS[key]


def band(plan: Plan, bands: dict[str, Any], config: Any) -> Band:
    """The band of ``config`` of ``plan``, from the runs of configs/error_bands.yaml (``bands``)."""
    return _runs(bands).band(features(plan, config))


def of_estimate(plan: Plan, bands: dict[str, Any], est: Any) -> Band:
    """The band of one estimate (engine/estimate.Estimate); a calibrated plan's is its
    calibration's out-of-sample error (engine/calibrated.py)."""
    published = band(plan, bands, est.config)
    if plan.calibration is not None:
        from perfmodel.engine.calibrated import band as calibrated_band

        return calibrated_band(plan, est.config, published)
    return published


def coverage(runs: Runs) -> dict[str, Any]:
    """How often the bands hold on runs they never saw: each run's out-of-sample error against the
    band its configuration gets from the runs of every other source (leave one source out of the
    band as well as of the fits). Shares inside the typical and the worst band, and the median
    half-widths (fractions of log step time)."""
    typical, worst, inside_t, inside_w, rows = [], [], 0, 0, []
    for name, r in runs.runs.items():
        b = runs.without(r["table"]).band(r)
        e = abs(r["oos_log_error"])
        inside_t += e <= b.typical
        inside_w += e <= b.worst
        typical.append(b.typical)
        worst.append(b.worst)
        rows.append(
            {
                "run": name,
                "table": r["table"],
                "error": r["oos_log_error"],
                "typical": b.typical,
                "worst": b.worst,
                "basis": b.basis,
            }
        )
    n = len(rows)
    return {
        "runs": n,
        "typical_coverage": inside_t / n,
        "worst_coverage": inside_w / n,
        "median_typical_half_width": float(np.median(typical)),
        "median_worst_half_width": float(np.median(worst)),
        "rows": rows,
    }
