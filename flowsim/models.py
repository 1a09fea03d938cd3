"""Transformer shapes, their FLOPs, and the per-layer compute and message sizes of a training
step that follow from a shape, a GPU's peak and a model FLOP utilization (MFU).

FLOPs (per microbatch of ``b`` sequences of ``s`` tokens, one layer, forward pass)
    Two FLOPs per multiply-accumulate: ``2 b s P`` for the layer's ``P`` matrix parameters
    (attention: ``h^2`` for Q and for the output, ``h * h_kv`` for K and for V, ``h_kv = h
    * kv_heads / heads``; MLP: ``2 h f``, or ``3 h f`` for a gated MLP such as SwiGLU, times
    ``top_k`` experts per token in a mixture of experts' layers, once in its dense ones
    (``moe_layers``)), plus ``4 b s^2 h`` for the
    attention scores and their weighted sum (no saving from the causal mask). The last
    layer adds the logits, ``2 b s h V``. The backward pass takes twice the forward
    (gradients of the inputs and of the weights). With ``f = 4h``, ``kv_heads = heads``, no
    gating and one expert this is Narayanan et al., "Efficient Large-Scale Language Model
    Training on GPU Clusters Using Megatron-LM" (SC 2021), eq. 3 without activation
    recomputation: ``72 b s l h^2 (1 + s / (6h)) + 6 b s h V`` per step and microbatch.
Time
    A rank's share of a layer's FLOPs (``1 / tp``) at ``mfu`` times the GPU's peak dense
    BF16 FLOP/s (:data:`flowsim.hardware.GPU_PEAK_BF16_FLOPS`).
Messages (``dtype_bytes`` per value, 2 for BF16; gradients ``grad_dtype_bytes``)
    A TP all-reduce and a pipeline send each carry the ``[s, b, h]`` activations, ``b s h``
    values. With sequence parallelism (Megatron's ``--sequence-parallel``) the TP calls (an
    all-gather and a reduce-scatter in place of each all-reduce) carry as many, and a rank
    holds, sends to the next stage and dispatches to experts its ``s / tp`` tokens only. A
    rank's gradients per layer are its parameters: the layer's attention and one expert's
    MLP (or, in an MoE layer, ``experts / ep`` of them, the layer's expert gradients, which
    the expert-data-parallel group reduces) over ``tp``; the first and the last layer
    also hold the embedding and the output matrix, ``V h / tp`` each. An expert
    dispatch sends each of a rank's ``b s`` tokens (``b s / tp`` with sequence parallelism)
    to ``top_k`` experts, ``b s h top_k`` values, and the combine brings as many back.
    Gradients are reduced at ``grad_dtype_bytes`` a value, by default 4: Megatron-LM with
    ``--bf16`` accumulates and reduces them in FP32 ("bfloat16 requires gradient accumulation
    and all-reduce to be done in fp32", ``megatron/training/arguments.py`` at d98e8a64;
    ``--grad-reduce-in-bf16`` opts out), while the distributed optimizer gathers the
    parameters at ``dtype_bytes`` (``megatron/core/distributed/param_and_grad_buffer.py``:
    ``grad_dtype = torch.float if grad_reduce_in_fp32 else param.dtype``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from flowsim.errors import InputError, whole_number

__all__ = ["MODEL_PRESETS", "ModelShape", "StepShape", "model_preset", "step_shape"]


@dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's shape.

    Attributes
    ----------
    layers, hidden, ffn, heads, kv_heads, vocab : int
        Layer count, hidden size ``h``, MLP inner size ``f``, attention heads, key/value
        heads (fewer than ``heads`` for grouped-query attention) and vocabulary size.
    gated_mlp : bool
        Three MLP matrices (SwiGLU, as Llama) instead of two (GPT).
    experts, top_k : int
        Experts per MoE layer and experts each token goes to (1 and 1: a dense model).
    seq_len : int
        The context length the model was trained with (the default sequence length).
    """

    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    gated_mlp: bool = True
    experts: int = 1
    top_k: int = 1
    seq_len: int = 2048

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "ffn", "heads", "kv_heads", "vocab", "experts", "top_k", "seq_len"):
            whole_number(name, getattr(self, name))
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise InputError(
                f"heads ({self.heads}) must divide hidden ({self.hidden}) and kv_heads ({self.kv_heads}) divide heads"
            )
        if self.top_k > self.experts:
            raise InputError(f"top_k ({self.top_k}) is more than the {self.experts} experts")

    @property
    def attention_params(self) -> int:
        """Matrix parameters of one layer's attention: Q, K, V and the output projection."""
        kv = self.hidden * self.kv_heads // self.heads
        return 2 * self.hidden * self.hidden + 2 * self.hidden * kv

    @property
    def expert_params(self) -> int:
        """Matrix parameters of one MLP (one expert)."""
        return (3 if self.gated_mlp else 2) * self.hidden * self.ffn

    def layer_forward_flops(self, micro_batch: int, seq_len: int, dense: bool = False) -> float:
        """FLOPs of one layer's forward pass over one microbatch (module docstring); with
        ``dense``, of a layer whose MLP is one MLP rather than experts."""
        tokens = micro_batch * seq_len
        matrices = self.attention_params + (1 if dense else self.top_k) * self.expert_params
        return 2.0 * tokens * matrices + 4.0 * micro_batch * seq_len * seq_len * self.hidden

    def logits_forward_flops(self, micro_batch: int, seq_len: int) -> float:
        """FLOPs of the output layer (the logits) over one microbatch."""
        return 2.0 * micro_batch * seq_len * self.hidden * self.vocab


#: Public shapes: Llama 3 from Dubey et al., "The Llama 3 Herd of Models" (2024), Table 3
#: (vocabulary 128,256: the released config.json); GPT-3 175B from Brown et al., "Language
#: Models are Few-Shot Learners" (2020), Table 2.1 (MLP four times the model width, GPT-2's
#: 50,257-token vocabulary); Mixtral 8x7B from Jiang et al., "Mixtral of Experts" (2024),
#: Table 1. See docs/hardware.md §9.2.
MODEL_PRESETS = {
    "llama3_8b": ModelShape(32, 4096, 14336, 32, 8, 128256, seq_len=8192),
    "llama3_70b": ModelShape(80, 8192, 28672, 64, 8, 128256, seq_len=8192),
    "gpt3_175b": ModelShape(96, 12288, 49152, 96, 96, 50257, gated_mlp=False, seq_len=2048),
    "mixtral_8x7b": ModelShape(32, 4096, 14336, 32, 8, 32000, experts=8, top_k=2, seq_len=32768),
}


def model_preset(name: str) -> ModelShape:
    """The shape of a preset of :data:`MODEL_PRESETS`, named as people write it ('-' and '_'
    alike, case ignored: ``Llama3-8B`` is llama3_8b)."""
    key = name.strip().lower().replace("-", "_") if isinstance(name, str) else name
    if key not in MODEL_PRESETS:
        raise InputError(f"unknown model {name!r}; presets: {', '.join(MODEL_PRESETS)}")
    return MODEL_PRESETS[key]


@dataclass(frozen=True)
class StepShape:
    """What a model shape makes of a 3D-parallel step's inputs (:func:`step_shape`); the
    fields are keyword arguments of :func:`flowsim.training.parallel_step`."""

    layer_forward_s: tuple[float, ...]
    layer_backward_s: tuple[float, ...]
    layer_grad_bytes: tuple[float, ...]
    layer_expert_grad_bytes: tuple[float, ...]
    activation_bytes: float
    tp_all_reduce_bytes: float
    ep_all_to_all_bytes: float
    cp_kv_bytes: float = 0.0
    param_to_grad_bytes: float = 1.0

    def as_arguments(self) -> dict[str, object]:
        """The fields as a dict, for ``parallel_step(**...)``."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def step_shape(
    model: ModelShape,
    *,
    peak_flops: float,
    mfu: float,
    tp: int = 1,
    ep: int = 1,
    micro_batch: int = 1,
    seq_len: int | None = None,
    dtype_bytes: float = 2.0,
    sequence_parallel: bool = False,
    cp: int = 1,
    grad_dtype_bytes: float = 4.0,
    moe_layers: Sequence[bool] | None = None,
) -> StepShape:
    """Per-layer compute and message sizes of one rank of a step (module docstring).

    Parameters
    ----------
    model : ModelShape
    peak_flops : float
        The GPU's peak FLOP/s (> 0).
    mfu : float
        The fraction of it the step's compute reaches, in (0, 1].
    tp, ep : int
        Tensor- and expert-parallel sizes; ``ep`` divides ``model.experts``.
    micro_batch : int
        Sequences per microbatch.
    seq_len : int, optional
        Tokens per sequence; default ``model.seq_len``.
    dtype_bytes : float
        Bytes per parameter and activation value (2: BF16).
    grad_dtype_bytes : float
        Bytes per gradient value as the data-parallel group reduces it (4: FP32, Megatron-LM's
        default with BF16; 2 for ``--grad-reduce-in-bf16``, or for PyTorch FSDP, whose
        ``MixedPrecision`` reduces in ``param_dtype`` unless ``reduce_dtype`` is given). The
        parameters the distributed optimizer and FSDP gather stay at ``dtype_bytes``:
        ``param_to_grad_bytes`` is ``dtype_bytes / grad_dtype_bytes``.
    moe_layers : sequence of bool, optional
        Per layer, with ``model.experts`` > 1: whether its MLP is the experts (default every
        layer), as :func:`flowsim.training.parallel_step`'s. A dense layer's MLP is one MLP of
        the model's ``ffn``: one MLP's FLOPs, its gradients all the DP group's to reduce.
    sequence_parallel : bool
        Whether the step runs Megatron's sequence parallelism (``seq_len`` then a multiple
        of ``tp``): a rank's pipeline sends and expert dispatches carry its ``1 / tp`` of the
        tokens.
    cp : int
        Context-parallel size: each rank computes and sends its ``1 / cp`` of each sequence's
        tokens (``seq_len`` a multiple of ``2 cp``, as Megatron's load-balanced split of
        causal attention into ``2 cp`` chunks needs), its attention still over the whole
        sequence; ``cp_kv_bytes`` is the keys and values of its tokens, ``2 x tokens x
        kv_heads x head size / tp x dtype_bytes``.

    Returns
    -------
    StepShape

    Examples
    --------
    Llama 3 70B on H100s at 40% of peak, tp = 8, one 8192-token sequence per microbatch: a
    layer's forward is 2 * 8192 * 855,638,016 matrix FLOPs plus 4 * 8192^2 * 8192, 16.2
    TFLOP, at 0.4 * 989 TFLOP/s on each of 8 GPUs 5.124 ms; a TP all-reduce carries
    8192 * 8192 * 2 B = 128 MiB; a rank reduces 855,638,016 / 8 * 4 B = 408 MiB of a layer's
    FP32 gradients.

    >>> shape = step_shape(model_preset("llama3_70b"), peak_flops=989e12, mfu=0.4, tp=8)
    >>> round(shape.layer_forward_s[0] * 1e3, 3), shape.tp_all_reduce_bytes / 2**20, shape.layer_grad_bytes[1] / 2**20
    (5.124, 128.0, 408.0)
    """
    tp, ep, micro_batch = whole_number("tp", tp), whole_number("ep", ep), whole_number("micro_batch", micro_batch)
    cp = whole_number("cp", cp)
    s = model.seq_len if seq_len is None else whole_number("seq_len", seq_len)
    for value, what in ((peak_flops, "peak_flops"), (dtype_bytes, "dtype_bytes"),
                        (grad_dtype_bytes, "grad_dtype_bytes")):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
            raise InputError(f"{what} must be a finite number > 0, got {value!r}")
    if isinstance(mfu, bool) or not isinstance(mfu, (int, float)) or not 0 < mfu <= 1:
        raise InputError(f"mfu must lie in (0, 1], got {mfu!r}")
    if model.experts % ep:
        raise InputError(f"ep = {ep} does not divide the model's {model.experts} experts")
    if s % (2 * cp) and cp > 1:
        raise InputError(f"context parallelism splits each sequence into 2 x cp = {2 * cp} chunks: seq_len {s} is not "
                         "a multiple of it")
    if sequence_parallel and s % tp:
        raise InputError(f"sequence parallelism splits each sequence over the tp = {tp} ranks: seq_len {s} is not a "
                         "multiple of tp")
    moe = [model.experts > 1] * model.layers
    if moe_layers is not None:
        if isinstance(moe_layers, (str, bytes)) or len(moe_layers) != model.layers:
            raise InputError(f"moe_layers needs one value per layer ({model.layers}), got {moe_layers!r}")
        moe = [model.experts > 1 and bool(m) for m in moe_layers]
    rate = peak_flops * mfu * tp * cp  # FLOP/s of the TP x CP ranks a layer's FLOPs are split over
    forward = [model.layer_forward_flops(micro_batch, s, dense=not m) / rate for m in moe]
    forward[-1] += model.logits_forward_flops(micro_batch, s) / rate
    experts = model.experts // ep * model.expert_params
    mlp = [experts if m else model.expert_params for m in moe]
    grads = [(model.attention_params + p) / tp * grad_dtype_bytes for p in mlp]
    # A dense MLP's gradients are the DP group's to reduce; experts' their own group's.
    expert_grads = [(p if m else 0) / tp * grad_dtype_bytes for p, m in zip(mlp, moe, strict=True)]
    embedding = model.vocab * model.hidden / tp * grad_dtype_bytes
    grads[0] += embedding
    grads[-1] += embedding
    tokens = micro_batch * s / cp  # a rank's share of a microbatch's tokens
    activations = float(tokens * model.hidden * dtype_bytes)
    held = activations / tp if sequence_parallel else activations  # what one rank sends on
    kv = 2 * tokens * model.kv_heads * (model.hidden // model.heads) / tp * dtype_bytes if cp > 1 else 0.0
    return StepShape(
        tuple(forward), tuple(2 * f for f in forward), tuple(grads), tuple(expert_grads), held, activations,
        held * model.top_k if model.experts > 1 else 0.0, float(kv), dtype_bytes / grad_dtype_bytes,
    )
