"""The catalogue of `perfmodel check`: every rule with its ID, severity, title and why it matters,
and the finding a rule produces (its cost in numbers and the cheapest fix)."""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR, WARNING, INFO = "error", "warning", "info"


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    title: str
    why: str


RULES = {
    r.id: r
    for r in (
        Rule(
            "PM101",
            ERROR,
            "the plan does not fit in HBM or host memory",
            "Model states (16-18 B per parameter) plus activations must fit on the most loaded GPU "
            "(Rajbhandari et al. 2020, ZeRO, Sec. 3.1; Korthikanti et al. 2022, Table 2).",
        ),
        Rule(
            "PM102",
            ERROR,
            "tp x pp x dp != number of GPUs",
            "Every GPU belongs to exactly one TP, PP and DP group (Narayanan et al. 2021, Sec. 3:"
            " 512 = 8 x 8 x 8).",
        ),
        Rule(
            "PM103",
            ERROR,
            "attention heads not divisible by TP",
            "Megatron splits attention by heads: each TP rank needs whole heads (Shoeybi et al."
            " 2019, Megatron-LM, Sec. 3).",
        ),
        Rule(
            "PM104",
            ERROR,
            "layers do not fill the pipeline stages",
            "Each pipeline stage, and each virtual chunk, holds whole layers (Narayanan 2021, Sec."
            " 2.2); Megatron-Core splits them unevenly when asked"
            " (decoder_first/last_pipeline_num_layers).",
        ),
        Rule(
            "PM105",
            ERROR,
            "global batch not divisible by DP x micro-batch",
            "Each replica runs a whole number m = B / (dp b) of micro-batches (Narayanan 2021, Sec."
            " 2.2).",
        ),
        Rule(
            "PM106",
            ERROR,
            "interleaving with m not a multiple of PP",
            "The interleaved 1F1B schedule cycles through the stages in groups of p micro-batches "
            "(Narayanan 2021, Sec. 2.2.2).",
        ),
        Rule(
            "PM107",
            ERROR,
            "knobs that contradict one another",
            "SP needs TP > 1; interleaving needs PP > 1, VP > 1 and the interleaved schedule.",
        ),
        Rule(
            "PM108",
            ERROR,
            "context parallelism cannot split this sequence",
            "Causal load balancing cuts each sequence into 2 cp chunks, inside fused attention;"
            " Ulysses all-to-all splits heads over tp x cp (Megatron-Core CP; Jacobs et al. 2023).",
        ),
        Rule(
            "PM109",
            ERROR,
            "experts cannot be split this way",
            "Each EP rank holds whole experts, EP x ETP folds into the tp x cp x dp ranks of a"
            " stage, and MoE with TP needs sequence parallelism (Megatron-Core MoE).",
        ),
        Rule(
            "PM110",
            ERROR,
            "the named framework cannot run this configuration",
            "Megatron's distributed optimizer is ZeRO-1 and Megatron-FSDP has no pipeline;"
            " DeepSpeed's PipelineEngine accepts ZeRO-1 only; Megatron-LM before Megatron-Core"
            " splits layers evenly and has neither context nor expert parallelism (each profile's"
            " facts: specs/framework.py).",
        ),
        Rule(
            "PM201",
            WARNING,
            "TP group crosses the node boundary",
            "TP runs 4 collectives per layer on the critical path: off NVLink it slows every layer "
            "several-fold (Narayanan et al. 2021, Sec. 3.2 and Fig. 13).",
        ),
        Rule(
            "PM202",
            WARNING,
            "pipeline bubble above 15% of the step",
            "The fill and drain of the pipeline, (p-1)/(m+p-1) of the step, is idle time (Narayanan"
            " et al. 2021, Sec. 2.2).",
        ),
        Rule(
            "PM203",
            WARNING,
            "a layer GEMM is memory-bound at this micro-batch",
            "Below the ridge point the GEMM waits on HBM, so more micro-batches cost compute"
            " efficiency (Williams et al. 2009, the roofline model: on A100, AI 61 vs ridge 153 at"
            " 64 tokens).",
        ),
        Rule(
            "PM204",
            WARNING,
            "communication-frequency rule broken",
            "The most frequent communication goes on the fastest link: TP on NVLink, PP across"
            " nodes, DP outermost (Narayanan et al. 2021, Sec. 3.2).",
        ),
        Rule(
            "PM205",
            WARNING,
            "GPipe where 1F1B needs less activation memory",
            "GPipe keeps all m micro-batches' activations, 1F1B about p, for the same bubble"
            " (Narayanan et al. 2021, Sec. 2.2.1).",
        ),
        Rule(
            "PM206",
            WARNING,
            "pipeline stages unbalanced by the embedding or output layer",
            "Every stage waits for the slowest: an extra output layer and loss on the last stage"
            " stretch each of the m steps (Narayanan et al. 2021, Sec. 3).",
        ),
        Rule(
            "PM207",
            WARNING,
            "expert all-to-all crosses nodes and dominates the MoE layer",
            "Token dispatch and combine move k copies of every token four times a layer; across"
            " nodes they run at NIC speed, not NVLink's (Megatron-Core MoE; DeepSeek-V3 report,"
            " Sec. 3.2.2).",
        ),
        Rule(
            "PM208",
            WARNING,
            "context-parallel K/V exchange not hidden",
            "The ring passes K and V cp-1 times, each under 1/cp of the attention; a short s/cp"
            " leaves too little attention to hide it (Liu et al. 2023, Ring Attention).",
        ),
        Rule(
            "PM209",
            WARNING,
            "pipeline degree does not divide the layers",
            "Megatron-Core splits the layers evenly unless its first/last stage flags or a"
            " pipeline layout say otherwise (TransformerConfig asserts that the middle stages share"
            " the rest evenly); the estimate assumes the balanced uneven split (cost/stages.py),"
            " which the launch must then name. Information only where the search chose pp (the"
            " plan leaves it free): the split is then the answer's, and the finding its flags.",
        ),
        Rule(
            "PM301",
            INFO,
            "TP > 1 without sequence parallelism",
            "SP shards LayerNorm/dropout activations t ways for the same communication volume"
            " (Korthikanti et al. 2022, Sec. 4.2.2).",
        ),
        Rule(
            "PM302",
            INFO,
            "DP > 1 without ZeRO-1",
            "Each DP replica keeps the same 12 B/param of optimizer state; ZeRO-1 shards it"
            " (Rajbhandari et al. 2020, ZeRO, Sec. 5).",
        ),
        Rule(
            "PM303",
            INFO,
            "TP communication above 30% of compute",
            "TP comm / compute = 8(t-1)P / (24 h BW), independent of batch: only h, t or the link"
            " change it (Narayanan et al. 2021, Sec. 3.2; alpha-beta ring costs).",
        ),
    )
}


@dataclass
class Finding:
    rule: str
    message: str
    fix: str
    figures: dict = field(default_factory=dict)
    # a rule whose fix would not help (it was tried) reports what it saw as information only
    demoted: bool = False

    @property
    def severity(self) -> str:
        return INFO if self.demoted else RULES[self.rule].severity

    def to_json(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "title": RULES[self.rule].title,
            "message": self.message,
            "fix": self.fix,
            "figures": self.figures,
        }
