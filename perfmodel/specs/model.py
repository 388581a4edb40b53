"""Transformer shape (SPEC section 2)."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, model_validator

from .base import Spec


class Model(Spec):
    """A decoder-only transformer: GPT (gelu, 2 MLP GEMMs) or Llama (swiglu, 3 GEMMs)."""

    name: str = "custom"
    num_layers: int = Field(gt=0, validation_alias=AliasChoices("num_layers", "layers", "num_hidden_layers"),
                            description="Transformer layers L.")
    hidden_size: int = Field(gt=0, validation_alias=AliasChoices("hidden_size", "hidden"),
                             description="Hidden size h.")
    num_attention_heads: int = Field(gt=0, validation_alias=AliasChoices("num_attention_heads", "heads"),
                                     description="Attention heads a.")
    num_query_groups: int | None = Field(
        None, gt=0, validation_alias=AliasChoices("num_query_groups", "num_key_value_heads", "kv_heads"),
        description="Key/value heads g (GQA); defaults to a (MHA).")
    ffn_hidden_size: int | None = Field(
        None, gt=0, validation_alias=AliasChoices("ffn_hidden_size", "ffn", "intermediate_size"),
        description="MLP inner size f; defaults to 4h.")
    vocab_size: int = Field(gt=0, validation_alias=AliasChoices("vocab_size", "vocab"), description="Vocabulary V.")
    seq_length: int = Field(gt=0, validation_alias=AliasChoices("seq_length", "seq_len", "max_position_embeddings"),
                            description="Sequence length s (tokens).")
    mlp: Literal["gelu", "swiglu"] = Field("gelu", description="gelu: 2 MLP GEMMs; swiglu: 3.")
    tied_embeddings: bool = Field(True, description="Output layer shares the word-embedding matrix.")
    position_embedding: Literal["learned", "rope"] = Field(
        "learned", description="learned adds s*h parameters; rope adds none.")
    add_bias_linear: bool | None = Field(
        None, validation_alias=AliasChoices("add_bias_linear", "bias"),
        description="Linear layers carry biases (Megatron-core's name); defaults to yes for gelu "
        "(GPT), no for swiglu (Llama).")
    normalization: Literal["layernorm", "rmsnorm"] | None = Field(
        None, description="Norm kind: LayerNorm (gamma and beta) or RMSNorm (gamma); defaults to layernorm "
        "for gelu (GPT), rmsnorm for swiglu (Llama).")
    source: str = ""

    @model_validator(mode="after")
    def _shape(self) -> "Model":
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"hidden_size({self.hidden_size}) is not divisible by num_attention_heads"
                             f"({self.num_attention_heads}); head dim must be whole")
        if self.num_attention_heads % self.groups:
            raise ValueError(f"num_attention_heads({self.num_attention_heads}) is not divisible by "
                             f"num_query_groups({self.groups})")
        return self

    @property
    def groups(self) -> int:
        return self.num_query_groups or self.num_attention_heads

    @property
    def has_bias(self) -> bool:
        return self.mlp == "gelu" if self.add_bias_linear is None else self.add_bias_linear

    @property
    def norm(self) -> str:
        if self.normalization is not None:
            return self.normalization
        return "layernorm" if self.mlp == "gelu" else "rmsnorm"

    @property
    def ffn(self) -> int:
        return self.ffn_hidden_size or 4 * self.hidden_size

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads
