"""Transformer shape (SPEC section 2; SPEC 11 for mixture-of-experts and MLA).

Field names follow Megatron-Core's TransformerConfig where one exists (num_moe_experts,
moe_router_topk, moe_ffn_hidden_size, kv_channels, q_lora_rank, ...), with the Hugging Face
config.json names as aliases; perfmodel/inputs/presets.py maps the config.json dialects onto these.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import AliasChoices, Field, model_validator

from .base import Spec
from .router import RouterFamily, load_imbalance

# Upper bounds on a model's sizes: far beyond any real model (the largest published have ~200
# layers, h ~ 2^15, 256 experts, ~256K vocabularies, 10M-token contexts), and small enough that
# products of sizes stay exact in int64 and float64 and that no array the model builds grows past
# memory.
MAX_LAYERS = 100_000
MAX_WIDTH = 2**20
MAX_HEADS = 2**16
MAX_VOCAB = 2**24
MAX_TOKENS = 2**27

MlpKind = Literal["gelu", "swiglu", "geglu", "squared-relu"]
MLP_KINDS: tuple[str, ...] = get_args(MlpKind)


class Model(Spec):
    """A decoder-only transformer: dense or mixture-of-experts, multi-head/GQA or MLA attention."""

    name: str = Field("custom", description="What the outputs call the model.")
    num_layers: int = Field(
        gt=0,
        le=MAX_LAYERS,
        validation_alias=AliasChoices("num_layers", "layers", "num_hidden_layers"),
        description="Transformer layers L.",
    )
    hidden_size: int = Field(
        gt=0,
        le=MAX_WIDTH,
        validation_alias=AliasChoices("hidden_size", "hidden"),
        description="Hidden size h.",
    )
    num_attention_heads: int = Field(
        gt=0,
        le=MAX_HEADS,
        validation_alias=AliasChoices("num_attention_heads", "heads"),
        description="Attention heads a.",
    )
    num_query_groups: int | None = Field(
        None,
        gt=0,
        le=MAX_HEADS,
        validation_alias=AliasChoices("num_query_groups", "num_key_value_heads", "kv_heads"),
        description="Key/value heads g (GQA); defaults to a (MHA).",
    )
    kv_channels: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        validation_alias=AliasChoices("kv_channels", "head_dim"),
        description="Head dimension d; defaults to h / a (Gemma and Qwen3 set their own).",
    )
    ffn_hidden_size: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        validation_alias=AliasChoices("ffn_hidden_size", "ffn", "intermediate_size"),
        description="MLP inner size f of the dense layers; defaults to 4h.",
    )
    vocab_size: int = Field(
        gt=0,
        le=MAX_VOCAB,
        validation_alias=AliasChoices("vocab_size", "vocab"),
        description="Vocabulary V.",
    )
    seq_length: int = Field(
        gt=0,
        le=MAX_TOKENS,
        validation_alias=AliasChoices("seq_length", "seq_len", "max_position_embeddings"),
        description="Sequence length s (tokens).",
    )
    mlp: MlpKind = Field(
        "gelu",
        description="gelu: 2 MLP GEMMs; squared-relu (Nemotron-4): 2; swiglu and geglu (gated): 3.",
    )
    tied_embeddings: bool = Field(
        True, description="Output layer shares the word-embedding matrix."
    )
    position_embedding: Literal["learned", "rope", "yarn", "none"] = Field(
        "learned",
        description=(
            "learned adds s*h parameters; rope adds none; yarn is RoPE with YaRN's scaling"
            " (Peng et al. 2023; config.json rope_scaling type yarn), which some frameworks run"
            " unfused."
        ),
    )
    rotary_base: float | None = Field(
        None,
        gt=0,
        le=1e12,
        validation_alias=AliasChoices("rotary_base", "rope_theta"),
        description="RoPE's base (config.json rope_theta, Megatron-LM --rotary-base); no cost.",
    )
    rope_scaling_factor: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description="Llama 3.1's RoPE scaling factor (rope_type llama3; --rope-scaling-factor).",
    )
    add_bias_linear: bool | None = Field(
        None,
        validation_alias=AliasChoices("add_bias_linear", "bias"),
        description=(
            "Linear layers carry biases (Megatron-core's name); defaults to yes for gelu "
            "(GPT), no otherwise."
        ),
    )
    normalization: Literal["layernorm", "rmsnorm"] | None = Field(
        None,
        description=(
            "Norm kind: LayerNorm (gamma and beta) or RMSNorm (gamma); defaults to layernorm "
            "for gelu (GPT), rmsnorm otherwise."
        ),
    )
    dropout: bool | None = Field(
        None,
        description=(
            "Hidden and attention dropout (a mask kernel and 1 byte per element kept); defaults "
            "to yes for gelu (GPT, p = 0.1), no otherwise (Llama-style models train without it)."
        ),
    )
    qk_layernorm: bool = Field(
        False,
        description=(
            "A norm on each head's queries and keys (Qwen3, OLMo 2; Megatron's --qk-layernorm)."
        ),
    )
    sandwich_norm: bool = Field(
        False, description="Norms after the attention and the MLP too, four per layer (Gemma 2)."
    )
    sliding_window: int | None = Field(
        None,
        gt=0,
        le=MAX_TOKENS,
        description=(
            "Keys a query attends to in a sliding-window layer (Mistral, Gemma 2); None: "
            "full attention everywhere."
        ),
    )
    sliding_window_fraction: float = Field(
        1.0,
        gt=0,
        le=1,
        description=(
            "Share of the layers that use the sliding window (Gemma 2: every other layer, 0.5)."
        ),
    )
    attention_chunk_size: int | None = Field(
        None,
        gt=0,
        le=MAX_TOKENS,
        description=(
            "Chunked attention (Llama 4): a query attends only within its chunk of this "
            "many tokens in the chunked layers."
        ),
    )
    chunked_attention_fraction: float = Field(
        0.75,
        gt=0,
        le=1,
        description="Share of the layers with chunked attention (Llama 4: 3 of 4).",
    )
    # --- mixture of experts (Megatron-Core MoE; SPEC 11) ---
    num_moe_experts: int | None = Field(
        None,
        gt=0,
        le=MAX_HEADS,
        validation_alias=AliasChoices("num_moe_experts", "num_experts"),
        description="Routed experts e per MoE layer; None: a dense model.",
    )
    moe_router_topk: int = Field(
        2,
        gt=0,
        le=MAX_HEADS,
        validation_alias=AliasChoices("moe_router_topk", "top_k"),
        description="Experts each token is routed to (k).",
    )
    moe_ffn_hidden_size: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        description="Inner size f_e of each routed expert; defaults to ffn_hidden_size.",
    )
    moe_shared_expert_intermediate_size: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        validation_alias=AliasChoices("moe_shared_expert_intermediate_size", "shared_expert_ffn"),
        description=(
            "Inner size of the shared experts, all together (DeepSeek: n_shared x f_e); None: none."
        ),
    )
    moe_layer_freq: int | list[int] = Field(
        1,
        description=(
            "Which layers are MoE: every k-th (an int, Megatron's --moe-layer-freq), or a 0/1 "
            "pattern with one entry per layer."
        ),
    )
    moe_first_k_dense: int = Field(
        0,
        ge=0,
        le=MAX_LAYERS,
        description="The first k layers are dense (DeepSeek's first_k_dense_replace).",
    )
    moe_router_num_groups: int | None = Field(
        None,
        gt=0,
        le=MAX_HEADS,
        validation_alias=AliasChoices("moe_router_num_groups", "n_group"),
        description=(
            "Group-limited routing (DeepSeek-V3; Megatron's --moe-router-num-groups): the experts"
            " in this many groups, a token routed within moe_router_group_topk of them."
        ),
    )
    moe_router_group_topk: int | None = Field(
        None,
        gt=0,
        le=MAX_HEADS,
        validation_alias=AliasChoices("moe_router_group_topk", "topk_group"),
        description=(
            "Groups a token may reach (DeepSeek-V3: 4 of 8, one node each: 'each token is sent to"
            " at most 4 nodes', report Sec. 2.1.2)."
        ),
    )
    mtp_num_layers: int = Field(
        0,
        ge=0,
        le=MAX_LAYERS,
        validation_alias=AliasChoices("mtp_num_layers", "num_nextn_predict_layers"),
        description=(
            "Multi-token prediction layers (DeepSeek-V3: 1; Megatron's --mtp-num-layers): each a"
            " transformer layer of the last layer's kind with its input projection (2h -> h), two"
            " norms and a pass through the shared output head, on the last pipeline stage."
        ),
    )
    moe_router_family: RouterFamily | None = Field(
        None,
        description=(
            "How the router balances the experts' load, which sets moe_load_imbalance"
            " (specs/router.py): aux_loss (softmax top-k with the auxiliary loss: Qwen3, Mixtral;"
            " 1.5), aux_free_bias (DeepSeek-V3's bias-adjusted, auxiliary-loss-free routing;"
            " 1.49), llama4 (no dropless run published: takes aux_loss's 1.5), balanced (forced"
            " balance, benchmark mode: 1.0). None: aux_loss."
        ),
    )
    moe_load_imbalance: float | None = Field(
        None,
        ge=1.0,
        le=MAX_HEADS,
        description=(
            "Tokens the busiest expert rank receives over the mean, which sets the pace of the"
            " expert GEMMs and of the all-to-all. None: the router family's figure"
            " (moe_router_family; benchmarks/moe_imbalance.py fits each); 1.0 is forced balance."
        ),
    )
    moe_expert_capacity_factor: float | None = Field(
        None,
        gt=0,
        le=MAX_HEADS,
        description=(
            "Token dropping (Megatron-Core --moe-expert-capacity-factor): each expert takes at"
            " most this times its balanced share, so the load is capped there. None: dropless."
        ),
    )
    moe_pad_expert_input_to_capacity: bool = Field(
        False,
        description=(
            "With a capacity factor, every expert's input is padded to capacity"
            " (--moe-pad-expert-input-to-capacity; NeMo's MegatronTokenDropCallback): each"
            " expert computes capacity-factor times its balanced share, whatever the router."
        ),
    )
    # --- multi-head latent attention (DeepSeek-V2 and V3; Megatron-Core MLA) ---
    q_lora_rank: int | None = Field(
        None, gt=0, le=MAX_WIDTH, description="MLA: rank of the query compression; None: none."
    )
    kv_lora_rank: int | None = Field(
        None, gt=0, le=MAX_WIDTH, description="MLA: rank of the key/value compression."
    )
    qk_head_dim: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        validation_alias=AliasChoices("qk_head_dim", "qk_nope_head_dim"),
        description="MLA: per-head query/key dimension without RoPE.",
    )
    qk_pos_emb_head_dim: int | None = Field(
        None,
        gt=0,
        le=MAX_WIDTH,
        validation_alias=AliasChoices("qk_pos_emb_head_dim", "qk_rope_head_dim"),
        description="MLA: per-head RoPE dimension (the key's is shared by all heads).",
    )
    v_head_dim: int | None = Field(
        None, gt=0, le=MAX_WIDTH, description="MLA: per-head value dimension."
    )
    source: str = Field("", description="Where the shape comes from (model card, paper).")

    @model_validator(mode="after")
    def _shape(self) -> Model:
        if (
            self.kv_channels is None
            and self.kv_lora_rank is None
            and self.hidden_size % self.num_attention_heads
        ):
            raise ValueError(
                f"hidden_size({self.hidden_size}) is not divisible by num_attention_heads"
                f"({self.num_attention_heads}); give kv_channels (head_dim) or whole heads"
            )
        if self.num_attention_heads % self.groups:
            raise ValueError(
                f"num_attention_heads({self.num_attention_heads}) is not divisible by "
                f"num_query_groups({self.groups})"
            )
        if self.num_moe_experts is not None and self.moe_router_topk > self.num_moe_experts:
            raise ValueError(
                f"moe_router_topk({self.moe_router_topk}) exceeds num_moe_experts"
                f"({self.num_moe_experts})"
            )
        if isinstance(self.moe_layer_freq, list):
            if len(self.moe_layer_freq) != self.num_layers or set(self.moe_layer_freq) - {0, 1}:
                raise ValueError(
                    f"moe_layer_freq as a list needs one 0 or 1 per layer ({self.num_layers})"
                )
        elif self.moe_layer_freq < 1:
            raise ValueError("moe_layer_freq must be at least 1 (every k-th layer is MoE)")
        mla = (self.kv_lora_rank, self.qk_head_dim, self.qk_pos_emb_head_dim, self.v_head_dim)
        if any(x is not None for x in mla) and not all(x is not None for x in mla):
            raise ValueError(
                "MLA needs kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim and v_head_dim together"
            )
        g, reach = self.moe_router_num_groups, self.moe_router_group_topk
        if (g is None) != (reach is None):
            raise ValueError(
                "moe_router_num_groups and moe_router_group_topk go together (group-limited"
                " routing: the groups, and how many a token may reach); give both or neither"
            )
        if g is not None and reach is not None:
            if reach > g:
                raise ValueError(
                    f"moe_router_group_topk({reach}) exceeds moe_router_num_groups({g})"
                )
            if self.num_moe_experts and self.num_moe_experts % g:
                raise ValueError(
                    f"num_moe_experts({self.num_moe_experts}) is not divisible by"
                    f" moe_router_num_groups({g}); the groups split the experts evenly"
                )
            # Megatron-Core's group_limited_topk keeps the best group_topk groups and picks the
            # top-k experts among their experts (torch.topk of topk // group_topk per group)
            each = (self.num_moe_experts or 0) // g
            if self.num_moe_experts and self.moe_router_topk > reach * each:
                raise ValueError(
                    f"moe_router_topk({self.moe_router_topk}) exceeds the {reach * each} experts a"
                    f" token can reach: moe_router_group_topk({reach}) groups of {each}"
                    f" ({self.num_moe_experts} experts / moe_router_num_groups({g})); raise"
                    " moe_router_group_topk or lower moe_router_num_groups"
                )
        if self.moe_first_k_dense > self.num_layers:
            raise ValueError(
                f"moe_first_k_dense({self.moe_first_k_dense}) exceeds num_layers({self.num_layers})"
            )
        return self

    @property
    def groups(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def has_bias(self) -> bool:
        return self.mlp == "gelu" if self.add_bias_linear is None else self.add_bias_linear

    @property
    def norm(self) -> Literal["layernorm", "rmsnorm"]:
        if self.normalization is not None:
            return self.normalization
        return "layernorm" if self.mlp == "gelu" else "rmsnorm"

    @property
    def has_dropout(self) -> bool:
        return self.mlp == "gelu" if self.dropout is None else self.dropout

    @property
    def gated(self) -> bool:
        return self.mlp in ("swiglu", "geglu")

    @property
    def ffn(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def head_dim(self) -> int:
        return self.kv_channels or self.hidden_size // self.num_attention_heads

    @property
    def load_imbalance(self) -> float:
        """The busiest expert rank's load over the mean (specs/router.py), dimensionless."""
        return load_imbalance(
            self.moe_router_family or "aux_loss",
            self.moe_load_imbalance,
            self.moe_expert_capacity_factor,
            self.moe_pad_expert_input_to_capacity,
        )

    @property
    def is_moe(self) -> bool:
        return self.num_moe_experts is not None

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank is not None

    @property
    def mtp_is_moe(self) -> bool:
        """An MTP layer is built from the last decoder layer's spec (Megatron-Core
        get_gpt_mtp_block_spec): MoE where that layer is."""
        return bool(self.mtp_num_layers) and bool(self.moe_pattern()[-1])

    def moe_pattern(self) -> list[int]:
        """1 for each MoE layer, 0 for each dense one (Megatron-Core's moe_layer_freq rule, after
        the first moe_first_k_dense layers, which are dense)."""
        if not self.is_moe:
            return [0] * self.num_layers
        freq = self.moe_layer_freq
        pattern = (
            list(freq)
            if isinstance(freq, list)
            else [1 if i % freq == 0 else 0 for i in range(self.num_layers)]
        )
        return [0 if i < self.moe_first_k_dense else x for i, x in enumerate(pattern)]
