"""torcia-nn's layers, one module per kind; :mod:`torcia.nn` re-exports them."""

from torcia.nn.modules.activation import (
    ELU,
    GELU,
    SELU,
    Hardswish,
    Hardtanh,
    LeakyReLU,
    LogSoftmax,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softmax,
    Softplus,
    Tanh,
)
from torcia.nn.modules.container import (
    ModuleDict,
    ModuleList,
    ParameterDict,
    ParameterList,
    Sequential,
)
from torcia.nn.modules.conv import Conv1d, Conv2d, ConvTranspose2d
from torcia.nn.modules.dropout import Dropout, Dropout2d
from torcia.nn.modules.flatten import Flatten, Unflatten
from torcia.nn.modules.linear import Bilinear, Identity, Linear
from torcia.nn.modules.loss import (
    BCELoss,
    BCEWithLogitsLoss,
    CosineEmbeddingLoss,
    CrossEntropyLoss,
    HuberLoss,
    KLDivLoss,
    L1Loss,
    MarginRankingLoss,
    MSELoss,
    NLLLoss,
    SmoothL1Loss,
    TripletMarginLoss,
)
from torcia.nn.modules.module import Module
from torcia.nn.modules.normalization import BatchNorm1d, BatchNorm2d, GroupNorm, LayerNorm
from torcia.nn.modules.pixelshuffle import PixelShuffle, PixelUnshuffle
from torcia.nn.modules.pooling import (
    AdaptiveAvgPool2d,
    AdaptiveMaxPool2d,
    AvgPool1d,
    AvgPool2d,
    MaxPool1d,
    MaxPool2d,
)
from torcia.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell
from torcia.nn.modules.sparse import Embedding
from torcia.nn.modules.transformer import (
    MultiheadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from torcia.nn.modules.upsampling import Upsample

__all__ = [
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d", "AvgPool1d", "AvgPool2d", "BCELoss",
    "BCEWithLogitsLoss", "BatchNorm1d", "BatchNorm2d", "Bilinear", "Conv1d", "Conv2d",
    "ConvTranspose2d", "CosineEmbeddingLoss", "CrossEntropyLoss", "Dropout", "Dropout2d",
    "ELU", "Embedding", "Flatten", "GELU", "GroupNorm", "Hardswish", "Hardtanh", "HuberLoss",
    "Identity", "KLDivLoss", "L1Loss", "LayerNorm", "LeakyReLU", "Linear", "LogSoftmax",
    "MSELoss", "MarginRankingLoss", "MaxPool1d", "MaxPool2d", "Mish", "Module", "ModuleDict",
    "ModuleList", "NLLLoss", "PReLU", "ParameterDict", "ParameterList", "PixelShuffle",
    "PixelUnshuffle", "ReLU", "ReLU6", "SELU", "Sequential", "SiLU", "Sigmoid",
    "SmoothL1Loss", "Softmax", "Softplus", "Tanh", "TripletMarginLoss", "Unflatten",
    "Upsample", "RNNBase", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
    "MultiheadAttention", "Transformer", "TransformerEncoder", "TransformerEncoderLayer",
    "TransformerDecoder", "TransformerDecoderLayer",
]
