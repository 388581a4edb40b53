"""How unevenly a router spreads tokens over the experts, by router family (SPEC 11: the busiest
expert rank receives the mean times an imbalance factor, which sets the pace of the expert GEMMs
and of the all-to-all).

Each family's figure is the busiest expert rank's load over the mean, dimensionless, read off the
published runs where that family routed without dropping tokens (benchmarks/moe_imbalance.py fits
and prints each, with its error on the runs left out):

- aux_loss: softmax top-k trained with an auxiliary load-balancing loss (Fedus et al. 2021, Switch
  eq. 4; Megatron-Core --moe-router-load-balancing-type aux_loss): Qwen3, Mixtral, Grok-1. Fitted
  on the Megatron-Core MoE model zoo's Qwen3-235B-A22B long-context runs (EP 8, 256 H100), each run
  dropless and with the router forced to balance: the dropless/forced step ratio (9-25%) is
  matched by 1.5 within 2 points on all four.
- aux_free_bias: DeepSeek-V3's auxiliary-loss-free balancing (report Sec. 2.1.2, eq. 16: a bias
  per expert added to the sigmoid scores for the top-k choice only, nudged by gamma after each
  step; Megatron-Core --moe-router-enable-expert-bias) with its small sequence-wise loss. Fitted
  on the one published step of it as it trained, without token dropping: the DeepSeek-V3
  report's whole run on 2,048 H800 (1.40, below aux_loss's figure as the report says the bias
  balances better; at the prior, aux_loss's 1.5, that run is 3.5% slow: its out-of-sample
  error; the fit moved from 1.68 when the H800 took the Hopper generation's one FP8 fraction,
  0.50, instead of its own 0.60). The DGX Cloud DeepSeek-V3 benchmark on 1,024 H100 is not one: its
  NeMo recipe drops tokens at capacity 1 with padding (scripts/performance/llm/
  pretrain_deepseek_v3.py at NeMo 7a8f1cc, the benchmark's commit: MegatronTokenDropCallback,
  which accepts seq_aux_loss), so it runs at the capacity's load.
- llama4: Llama 4's top-1 sigmoid router beside a shared expert. No published dropless Llama 4
  step (the DGX Cloud Maverick run drops tokens at capacity 1): it takes the aux_loss figure, and
  every output says so (Model.moe_router_family's description).
- balanced: the router forced to spread tokens evenly (Megatron-Core
  --moe-router-force-load-balancing, the benchmark mode of Megatron-Bridge's performance tables).

Dropping at a capacity factor c (--moe-expert-capacity-factor) caps every expert at c times its
balanced share; padding to capacity (--moe-pad-expert-input-to-capacity) makes every expert compute
exactly that: the load is then c, whatever the router (Megatron-Core moe_utils
topk_softmax_with_capacity; NeMo's MegatronTokenDropCallback sets c = 1 with padding).
"""

from __future__ import annotations

from typing import Literal, get_args

RouterFamily = Literal["aux_loss", "aux_free_bias", "llama4", "balanced"]
ROUTER_FAMILIES: tuple[str, ...] = get_args(RouterFamily)

# busiest expert rank's tokens over the mean, dimensionless; written by benchmarks/moe_imbalance.py
# (its --fit prints each figure and the runs it comes from)
ROUTER_LOAD: dict[str, float] = {
    # zoo Qwen3-235B long context, dropless vs forced balance (4 runs, within 2 points each)
    "aux_loss": 1.5,
    # the DeepSeek-V3 report's whole run (benchmarks/moe_imbalance.py --fit: in the fit -0.0%;
    # at the prior, aux_loss's 1.5, +3.7%)
    "aux_free_bias": 1.40,
    # no dropless Llama 4 step published: the aux_loss figure, said as assumed
    "llama4": 1.5,
    "balanced": 1.0,
}
MEASURED = ("aux_loss", "aux_free_bias", "balanced")  # the families whose figure a run pins down


def load_imbalance(
    family: str,
    given: float | None = None,
    capacity_factor: float | None = None,
    pad_to_capacity: bool = False,
) -> float:
    """The busiest expert rank's load over the mean: the plan's own figure, or its router family's,
    capped at the capacity factor when tokens are dropped, and equal to it when the experts' inputs
    are padded to capacity (dimensionless, >= 1 except for a capacity factor below 1)."""
    load = ROUTER_LOAD[family] if given is None else given
    if capacity_factor is None:
        return load
    return capacity_factor if pad_to_capacity else min(load, capacity_factor)
