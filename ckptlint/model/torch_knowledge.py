"""What the analysis knows about torch's modules and functions, by qualified name."""

from __future__ import annotations

_NN = "torch.nn"
_F = "torch.nn.functional"


def _names(prefix: str, *names: str) -> frozenset[str]:
    return frozenset(f"{prefix}.{name}" for name in names)


# Modules without parameters: their output requires grad only if their input does.
PARAMETER_FREE_MODULES = _names(
    _NN,
    "ReLU", "ReLU6", "GELU", "SiLU", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Softplus", "Mish",
    "LeakyReLU", "ELU", "SELU", "CELU", "Hardtanh", "Hardswish", "Hardsigmoid", "Tanhshrink",
    "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout",
    "Identity", "Flatten", "Unflatten", "MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d",
    "AvgPool2d", "AvgPool3d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d",
    "AdaptiveMaxPool1d", "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Upsample", "UpsamplingNearest2d",
    "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d",
    "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
    "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d", "ChannelShuffle",
)  # fmt: skip

# torch's `_BatchNorm` subclasses (Lightning's `BaseFinetuning.freeze` keeps them trainable).
BATCH_NORMS = _names(_NN, "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d")

# Modules that own trainable parameters by default.
PARAMETER_MODULES = _names(
    _NN,
    "Linear", "Bilinear", "LazyLinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d",
    "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d", "LazyConv2d", "LazyConv3d", "Embedding",
    "EmbeddingBag", "LayerNorm", "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
    "SyncBatchNorm", "MultiheadAttention", "LSTM", "GRU", "RNN", "LSTMCell", "GRUCell", "RNNCell",
    "Transformer", "TransformerEncoder", "TransformerDecoder", "TransformerEncoderLayer",
    "TransformerDecoderLayer", "PReLU", "Parameter",
) | frozenset({"torch.nn.parameter.Parameter"})  # fmt: skip

# The names of built-in layers' parameters (relative to the layer), for freezing by parameter name.
PARAMETER_NAMES = {
    **{name: ("weight", "bias") for name in _names(
        _NN, "Linear", "Bilinear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
        "ConvTranspose3d", "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm",
    )},
    **{name: ("weight",) for name in _names(_NN, "Embedding", "EmbeddingBag", "RMSNorm", "PReLU")},
}  # fmt: skip

CONTAINERS = _names(_NN, "Sequential", "ModuleList", "ModuleDict")
# Containers whose call runs their elements in order, the first one on the input.
SEQUENTIALS = _names(_NN, "Sequential")

# Built-in layers that return a tuple of float tensors, by its shape: the number of tensors at each
# position (`out, weights = attn(q, k, v)`; `out, (h, c) = lstm(x)`).
TUPLE_OUTPUTS: dict[str, tuple[int, ...]] = {
    **{name: (1, 1) for name in _names(_NN, "MultiheadAttention", "GRU", "RNN")},
    **{name: (1, 2) for name in _names(_NN, "LSTM")},
}
MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})

# Functions that create tensors from nothing: never requiring grad unless told to.
TENSOR_FACTORIES = _names(
    "torch",
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full", "arange", "linspace",
    "logspace", "eye", "rand", "randn", "randint", "randperm", "zeros_like", "ones_like",
    "empty_like", "full_like", "rand_like", "randn_like", "randint_like", "normal", "bernoulli",
)  # fmt: skip
DATA_LOADERS = frozenset({"torch.utils.data.DataLoader", "torch.utils.data.dataloader.DataLoader"})

# Randomness that torch's checkpoint replays when preserve_rng_state=True (the default).
DROPOUT_MODULES = _names(_NN, "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout") | frozenset(
    {"timm.layers.DropPath", "timm.layers.drop.DropPath", "timm.models.layers.DropPath", "torchvision.ops.StochasticDepth"}
)
# Each dropout module's probability parameter and its default: a module built with p=0 draws
# nothing (measured on torch 2.13: `nn.Dropout(p=0.0)` in train mode leaves the CPU generator as is).
DROPOUT_MODULE_P = {
    **{name: ("p", 0.5) for name in _names(_NN, "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")},
    **{name: ("drop_prob", 0.0) for name in ("timm.layers.DropPath", "timm.layers.drop.DropPath", "timm.models.layers.DropPath")},
    "torchvision.ops.StochasticDepth": ("p", None),
}
TORCH_RNG_FUNCTIONS = _names(
    _F, "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout",
) | _names(
    "torch", "dropout", "rand", "randn", "rand_like", "randn_like", "randint", "randint_like",
    "randperm", "bernoulli", "multinomial", "normal", "poisson",
) | frozenset({"timm.layers.drop_path", "timm.layers.drop.drop_path", "timm.models.layers.drop_path", "torchvision.ops.stochastic_depth"})  # fmt: skip
# Dropout functions (positional index of `p`, `training`/`train`): p=0 or training=False draws nothing
# (measured on torch 2.13: the CPU generator state is unchanged).
DROPOUT_FUNCTION_ARGS = {
    **{name: (1, "training") for name in _names(_F, "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")},
    **{name: (1, "train") for name in _names("torch", "dropout")},
}
TORCH_RNG_METHODS = frozenset(
    {"normal_", "uniform_", "bernoulli_", "exponential_", "random_", "geometric_", "cauchy_", "log_normal_"}
)
# Randomness that checkpoint never replays, whatever preserve_rng_state says.
UNREPLAYED_RNG_MODULES = ("random", "numpy.random")

# Tensor methods that do not change whether the result requires grad.
GRAD_NEUTRAL_METHODS = frozenset(
    {
        "to", "float", "half", "double", "bfloat16", "cuda", "cpu", "view", "reshape", "permute",
        "transpose", "flatten", "unsqueeze", "squeeze", "contiguous", "clone", "expand", "expand_as",
        "repeat", "mean", "sum", "softmax", "type", "type_as", "view_as", "narrow",
        "masked_fill", "pow", "abs", "exp", "log", "sqrt", "relu", "sigmoid", "tanh", "max", "min",
        # Differentiable reductions, elementwise and shape ops (not argmax/argsort/comparisons/detach:
        # their results never require grad).
        "var", "std", "norm", "prod", "cumsum", "amax", "amin", "logsumexp", "log_softmax", "square", "neg",
        "add", "sub", "mul", "div", "matmul", "mm", "bmm", "clamp", "clip", "sin", "cos", "log1p", "rsqrt",
        "reciprocal", "gather", "index_select", "t", "roll", "flip", "tile", "repeat_interleave", "movedim",
        "unflatten", "tril", "triu", "diagonal",
    }
)  # fmt: skip
# Tensor methods whose result never requires grad: comparisons, indices and integer or boolean casts.
GRAD_FREE_METHODS = frozenset(
    {
        "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isinf", "isfinite", "isclose", "logical_not", "logical_and",
        "logical_or", "logical_xor", "argmax", "argmin", "argsort", "nonzero", "long", "int", "bool", "byte", "short",
    }
)  # fmt: skip
# Tensor methods and torch functions that cut a tensor into a tuple of slices, each like the whole.
SPLITTING_METHODS = frozenset({"chunk", "split", "unbind", "tensor_split", "hsplit", "vsplit", "dsplit", "split_with_sizes"})
SPLITTING_FUNCTIONS = frozenset(f"torch.{name}" for name in SPLITTING_METHODS)
# Methods that return the object itself for a module and a converted copy for a tensor.
MODULE_SELF_METHODS = frozenset({"to", "cuda", "cpu", "float", "half", "double", "bfloat16", "type", "train", "eval", "requires_grad_"})
# Names transformers gives activations that carry grad between layers: even as inputs of a
# top-level model they come from another model, not from data.
ACTIVATION_NAMES = frozenset({"hidden_states", "encoder_hidden_states"})
# Fields of transformers' ModelOutput that hold the module's own activation: reading one from a
# module's output keeps that output's requires_grad.
MODEL_OUTPUT_ACTIVATIONS = frozenset({"last_hidden_state", "pooler_output", "logits"})
# Functions whose result requires grad iff one of their tensor arguments does.
GRAD_NEUTRAL_PREFIXES = ("torch.", "torch.nn.functional.")
