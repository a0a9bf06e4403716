"""Tensor-parallel LLM inference on a roofline GPU with a modelled All-Reduce: TTFT and TPOT.

A transformer layer under tensor parallelism (TP) runs two All-Reduces of ``tokens x hidden x 2``
bytes (after attention and after the MLP; the SCIN paper, section II), on the critical path and
not overlapped with compute (the default of vLLM, SGLang and TensorRT-LLM, as the paper says).
Compute is a roofline: per layer and GPU, ``max(FLOPs / achieved FLOP rate, bytes / achieved
memory bandwidth)``. Nothing else (norms, rotary embedding, sampling, launch gaps, the logits'
gather) is counted, so the All-Reduce's share here is an upper estimate of what a real serving
stack shows (section "LLM inference" of docs/SCALE.md).

* TTFT: one prefill of ``batch`` prompts of ``prompt`` tokens (All-Reduces of
  ``batch x prompt x hidden x 2`` bytes), plus the LM head for the last token of each prompt.
* TPOT: one decode step of ``batch`` sequences at context ``prompt`` (All-Reduces of
  ``batch x hidden x 2`` bytes), plus the LM head.

Model shapes are the published configurations (each :class:`ModelConfig` names its source);
the GPU is :data:`H200` (its figures and the achieved fractions are stated there).
"""

from dataclasses import dataclass

__all__ = ["ModelConfig", "Gpu", "MODELS", "H200", "PAPER_MODELS", "layer_time", "ttft", "tpot",
           "allreduce_bytes", "INQ_RATIO"]

#: INT8 INQ moves 1 byte per element plus a 2-byte scale per 64: (1 + 2/64) / 2 of FP16.
INQ_RATIO = (1 + 2 / 64) / 2


@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer's shape (the fields of its published ``config.json``)."""
    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    experts: int = 1
    experts_per_token: int = 1
    source: str = ""

    @property
    def head_dim(self):
        return self.hidden // self.heads

    @property
    def attn_params(self):
        """Q, K, V and O projections of one layer."""
        kv = self.kv_heads * self.head_dim
        return 2 * self.hidden * self.hidden + 2 * self.hidden * kv

    @property
    def expert_params(self):
        """One SwiGLU MLP (gate, up, down)."""
        return 3 * self.hidden * self.ffn


_HF = "https://huggingface.co/{}/blob/main/config.json"
#: The models of the study. LLaMA-2: Touvron et al. 2023 (arXiv:2307.09288), Table 1 and the
#: Hugging Face configs; Mixtral: Jiang et al. 2024 (arXiv:2401.04088), Table 1; Llama 3: the
#: Hugging Face configs of Meta-Llama-3-8B/70B (Meta, April 2024).
MODELS = {m.name: m for m in (
    ModelConfig("LLaMA-2-7B", 32, 4096, 11008, 32, 32, 32000,
                source=_HF.format("meta-llama/Llama-2-7b-hf")),
    ModelConfig("LLaMA-2-13B", 40, 5120, 13824, 40, 40, 32000,
                source=_HF.format("meta-llama/Llama-2-13b-hf")),
    ModelConfig("LLaMA-2-70B", 80, 8192, 28672, 64, 8, 32000,
                source=_HF.format("meta-llama/Llama-2-70b-hf")),
    ModelConfig("Mixtral-8x7B", 32, 4096, 14336, 32, 8, 32000, experts=8, experts_per_token=2,
                source=_HF.format("mistralai/Mixtral-8x7B-v0.1")),
    ModelConfig("Llama-3-8B", 32, 4096, 14336, 32, 8, 128256,
                source=_HF.format("meta-llama/Meta-Llama-3-8B")),
    ModelConfig("Llama-3-70B", 80, 8192, 28672, 64, 8, 128256,
                source=_HF.format("meta-llama/Meta-Llama-3-70B")),
)}
#: The models the paper's Fig. 10 reports.
PAPER_MODELS = ("LLaMA-2-7B", "LLaMA-2-13B", "LLaMA-2-70B", "Mixtral-8x7B")


@dataclass(frozen=True)
class Gpu:
    """A roofline GPU: peak dense 16-bit tensor rate, HBM bandwidth, and the fractions of each
    that kernels achieve (assumptions, stated in docs/SCALE.md)."""
    name: str
    peak_flops: float
    hbm_bytes_per_s: float
    flops_efficiency: float
    hbm_efficiency: float
    weight_bytes: float = 2.0
    source: str = ""

    def __post_init__(self):
        for name in ("peak_flops", "hbm_bytes_per_s", "weight_bytes"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)!r}")
        for name in ("flops_efficiency", "hbm_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name} must be in (0, 1], not {getattr(self, name)!r}")


#: NVIDIA H200 SXM: 989 TFLOPS dense BF16/FP16 tensor (1,979 with sparsity), 4.8 TB/s HBM3e,
#: 141 GB (NVIDIA H200 Tensor Core GPU datasheet, 2024). Achieved: 70% of peak in GEMMs and
#: 80% of HBM bandwidth in streaming weights and KV cache (assumptions, not measurements).
H200 = Gpu("H200 (SXM)", peak_flops=989e12, hbm_bytes_per_s=4.8e12, flops_efficiency=0.70,
           hbm_efficiency=0.80,
           source="https://www.nvidia.com/en-us/data-center/h200/ (datasheet)")


def allreduce_bytes(model, tokens):
    """Bytes of one TP All-Reduce over ``tokens`` tokens: ``tokens x hidden x 2`` (FP16/BF16)."""
    return tokens * model.hidden * 2


def _check(model, tp, batch, prompt):
    if not isinstance(model, ModelConfig):
        raise ValueError(f"model must be a ModelConfig, not {model!r}")
    for name, value in (("tp", tp), ("batch", batch), ("prompt", prompt)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    if model.heads % tp:
        raise ValueError(f"tp must divide the {model.heads} attention heads of {model.name}, "
                         f"not {tp}")


def layer_time(model, tp, gpu, tokens, context, batch, decode):
    """Seconds one layer's compute takes on one GPU of a TP group (roofline, no All-Reduce).

    ``tokens`` tokens are processed (``batch`` sequences); in decode each attends to
    ``context`` cached tokens, in prefill to its prompt (causal: ``context / 2`` on average).
    """
    h, hd = model.hidden, model.head_dim
    kv_per_gpu = max(model.kv_heads / tp, 1) * hd      # K/V heads are replicated when kv < tp
    if model.experts > 1:
        # Each token runs experts_per_token experts; the weights read are those of the experts
        # any token of the step picked (uniform routing: the expected distinct count).
        k, e = model.experts_per_token, model.experts
        touched = e * (1 - (1 - k / e) ** tokens)
        mlp_flops = 2 * tokens * k * model.expert_params
        mlp_weights = touched * model.expert_params
    else:
        mlp_flops = 2 * tokens * model.expert_params
        mlp_weights = model.expert_params
    attn_ctx = context if decode else context / 2
    flops = (2 * tokens * model.attn_params + mlp_flops) / tp \
        + 4 * tokens * attn_ctx * h / tp
    weights = (model.attn_params + mlp_weights) * gpu.weight_bytes / tp
    kv_bytes = 2 * batch * context * kv_per_gpu * 2      # K and V, FP16, read (decode) or written
    act_bytes = 4 * tokens * h * 2                      # the layer's input and output, twice
    compute = flops / (gpu.peak_flops * gpu.flops_efficiency)
    memory = (weights + kv_bytes + act_bytes) / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency)
    return max(compute, memory)


def _lm_head(model, tp, gpu, tokens):
    flops = 2 * tokens * model.hidden * model.vocab / tp
    weights = model.hidden * model.vocab * gpu.weight_bytes / tp
    return max(flops / (gpu.peak_flops * gpu.flops_efficiency),
               weights / (gpu.hbm_bytes_per_s * gpu.hbm_efficiency))


def _phase(model, tp, gpu, allreduce, tokens, context, batch, decode, inq):
    compute = model.layers * layer_time(model, tp, gpu, tokens, context, batch, decode) \
        + _lm_head(model, tp, gpu, batch)
    size = allreduce_bytes(model, tokens)
    comm = 2 * model.layers * allreduce(size, tp, inq) if tp > 1 else 0.0
    return {"compute_s": compute, "allreduce_s": comm, "total_s": compute + comm,
            "allreduce_bytes": size, "allreduce_fraction": comm / (compute + comm)}


def ttft(model, tp, batch, prompt, allreduce, gpu=H200, inq=False):
    """Time to first token: one prefill. ``allreduce(size, endpoints, inq)`` gives the seconds of
    one All-Reduce of ``size`` bytes (FP16 form) over ``endpoints`` GPUs. Returns a dict:
    ``compute_s``, ``allreduce_s``, ``total_s``, ``allreduce_bytes`` (one All-Reduce) and
    ``allreduce_fraction``."""
    _check(model, tp, batch, prompt)
    return _phase(model, tp, gpu, allreduce, batch * prompt, prompt, batch, False, inq)


def tpot(model, tp, batch, prompt, allreduce, gpu=H200, inq=False):
    """Time per output token: one decode step at context ``prompt``; as :func:`ttft`."""
    _check(model, tp, batch, prompt)
    return _phase(model, tp, gpu, allreduce, batch, prompt, batch, True, inq)
