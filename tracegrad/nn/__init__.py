"""``tracegrad.nn``: modules, parameters, layers, losses, ``functional`` and ``init``.

Everything is written with tracegrad ops, so a model runs eagerly with
autograd and traces unchanged under ``tracegrad.compile``.
"""
from . import functional, init
from . import utils
from .activation import (
    CELU, ELU, GELU, GLU, SELU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU,
    LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, RReLU, Sigmoid, SiLU, Softmax, Softmax2d,
    Softmin, Softplus, Softshrink, Softsign, Tanh, Tanhshrink, Threshold,
)
from .attention import MultiheadAttention
from .channelshuffle import ChannelShuffle
from .container import (
    Container, ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential,
)
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import (
    AlphaDropout, Dropout, Dropout1d, Dropout2d, Dropout3d, FeatureAlphaDropout,
)
from .fold import Fold, Unfold
from .lazy import (
    LazyBatchNorm1d, LazyBatchNorm2d, LazyBatchNorm3d, LazyConv1d, LazyConv2d, LazyConv3d,
    LazyConvTranspose1d, LazyConvTranspose2d, LazyConvTranspose3d, LazyInstanceNorm1d,
    LazyInstanceNorm2d, LazyInstanceNorm3d, LazyLinear,
)
from .linear import Bilinear, Flatten, Identity, Linear, Unflatten
from .loss import (
    BCELoss, BCEWithLogitsLoss, CTCLoss, CosineEmbeddingLoss, CrossEntropyLoss, GaussianNLLLoss,
    HingeEmbeddingLoss, HuberLoss, KLDivLoss, L1Loss, MarginRankingLoss, MSELoss,
    MultiLabelMarginLoss, MultiLabelSoftMarginLoss, MultiMarginLoss, NLLLoss, NLLLoss2d,
    PoissonNLLLoss,
    SmoothL1Loss, SoftMarginLoss, TripletMarginLoss, TripletMarginWithDistanceLoss,
)
from .module import Module
from .normalization import (
    BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, InstanceNorm1d, InstanceNorm2d,
    InstanceNorm3d, LayerNorm, LocalResponseNorm, RMSNorm,
)
from .padding import (
    CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d, ConstantPad3d,
    ReflectionPad1d, ReflectionPad2d, ReflectionPad3d, ReplicationPad1d, ReplicationPad2d,
    ReplicationPad3d, ZeroPad1d, ZeroPad2d, ZeroPad3d,
)
from .parameter import Parameter, UninitializedBuffer, UninitializedParameter
from .pixelshuffle import PixelShuffle, PixelUnshuffle
from .rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase
from .pooling import (
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveAvgPool3d, AdaptiveMaxPool1d, AdaptiveMaxPool2d,
    AdaptiveMaxPool3d, AvgPool1d, AvgPool2d, AvgPool3d, FractionalMaxPool2d, FractionalMaxPool3d,
    LPPool1d, LPPool2d, LPPool3d, MaxPool1d, MaxPool2d, MaxPool3d, MaxUnpool1d, MaxUnpool2d,
    MaxUnpool3d,
)
from .sparse import Embedding, EmbeddingBag
from .syncbatchnorm import SyncBatchNorm
from . import parallel
from .parallel import DataParallel
from .transformer import (
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
    TransformerEncoderLayer,
)
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d
from . import modules  # noqa: E402 - PyTorch's nn.modules.<file> paths to the layers above

__all__ = [
    "Module", "Parameter", "Sequential", "ModuleList", "ModuleDict", "Linear", "Identity",
    "Flatten", "ReLU", "GELU", "Sigmoid", "Tanh", "SiLU", "Softmax", "LogSoftmax", "Dropout",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "Embedding", "MSELoss", "L1Loss", "NLLLoss",
    "CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss", "LeakyReLU", "ELU", "Softplus", "Mish",
    "Hardswish", "Hardsigmoid", "PReLU", "GLU", "SmoothL1Loss", "HuberLoss", "KLDivLoss",
    "functional", "init", "SyncBatchNorm", "parallel", "DataParallel",
]
__all__ += ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d",
            "Fold", "Unfold", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d", "ConstantPad1d",
            "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
            "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
            "CircularPad1d", "CircularPad2d", "CircularPad3d"]
__all__ += ["MaxPool1d", "MaxPool2d", "MaxPool3d", "AvgPool1d", "AvgPool2d", "AvgPool3d",
            "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "AdaptiveAvgPool3d", "AdaptiveMaxPool1d",
            "AdaptiveMaxPool2d", "AdaptiveMaxPool3d", "Upsample", "UpsamplingNearest2d",
            "UpsamplingBilinear2d", "PixelShuffle", "PixelUnshuffle", "BatchNorm3d", "GroupNorm",
            "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm",
            "FractionalMaxPool2d", "FractionalMaxPool3d"]
__all__ += ["RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell",
            "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerDecoder",
            "TransformerEncoderLayer", "TransformerDecoderLayer", "ParameterList",
            "ParameterDict", "Unflatten", "Dropout1d", "Dropout2d", "Dropout3d", "modules"]
__all__ += ["ReLU6", "Hardtanh", "SELU", "CELU", "Softsign", "Softmin", "Threshold", "Hardshrink",
            "Softshrink", "Tanhshrink", "LogSigmoid", "Softmax2d", "RReLU", "RMSNorm",
            "PairwiseDistance", "CosineSimilarity", "Bilinear", "MarginRankingLoss",
            "HingeEmbeddingLoss", "CosineEmbeddingLoss", "SoftMarginLoss",
            "MultiLabelSoftMarginLoss", "MultiLabelMarginLoss", "MultiMarginLoss",
            "GaussianNLLLoss", "PoissonNLLLoss", "TripletMarginLoss",
            "TripletMarginWithDistanceLoss"]
__all__ += ["LazyLinear", "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
            "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
            "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d", "LazyInstanceNorm3d",
            "UninitializedParameter", "UninitializedBuffer", "EmbeddingBag", "MaxUnpool1d",
            "MaxUnpool2d", "MaxUnpool3d", "LPPool1d", "LPPool2d", "LPPool3d", "AlphaDropout",
            "FeatureAlphaDropout", "ChannelShuffle", "NLLLoss2d", "Container", "CTCLoss"]
