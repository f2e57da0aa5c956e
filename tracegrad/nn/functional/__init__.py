"""``nn.functional``: activations, linear, dropout, normalisation, embedding, losses, convolution,
pooling and resampling, as PyTorch's ``torch.nn.functional`` (``import tracegrad.nn.functional
as F``).

A package whose modules each hold one family; this file only gathers their names, so every
function stays ``F.name``. The modules import what they share from ``_base`` (never from
here), so none of them depends on the whole of ``F``. Every function is a composition of
tracegrad ops: it has no derivative of its own and traces into the compiler's IR like user
code does.
"""
from ...autograd.grad_mode import no_grad  # noqa: F401 - names F has always exposed
from ...ops import (  # noqa: F401 - the ops F has always exposed beside its own functions
    abs, exp, expm1, index_select, log1p, matmul, minimum, norm, rsqrt, softplus, where,
)
from ...ops.core import op_error  # noqa: F401
from ...ops.declare import backward_name  # noqa: F401
from ...ops.linalg import mm  # noqa: F401
from ...ops.nn_ops import addmm  # noqa: F401
from ._attention import scaled_dot_product_attention  # noqa: F401 - attention
from ._base import (  # noqa: F401 - activations, softmax, linear, dropout, embedding, norms
    batch_norm, cosine_similarity, dropout, elu, embedding, gelu, glu, hardsigmoid, hardswish,
    layer_norm, leaky_relu, linear, log_sigmoid, log_softmax, logsigmoid, mish, normalize,
    one_hot, prelu, relu, sigmoid, silu, softmax, tanh,
)
from ._conv import (  # noqa: F401 - F.conv2d, F.pad, F.unfold, ...
    conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d, conv_transpose3d, fold, pad,
    unfold,
)
from ._ctc import ctc_loss  # noqa: F401 - the CTC loss
from ._dropout import dropout1d, dropout2d, dropout3d, feature_dropout  # noqa: F401
from ._extra import (  # noqa: F401 - embedding_bag, unpooling, lp pools, more
    alpha_dropout, channel_shuffle, embedding_bag, feature_alpha_dropout, gumbel_softmax,
    lp_pool1d, lp_pool2d, lp_pool3d, max_unpool1d, max_unpool2d, max_unpool3d,
    native_channel_shuffle,
)
from ._grid import affine_grid, grid_sample  # noqa: F401 - spatial transformers
from ._loss import (  # noqa: F401 - the losses are F.mse_loss and so on, as PyTorch's
    _reduction, binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,
    huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss,
)
from ._loss_more import (  # noqa: F401 - the margin, embedding, NLL, triplet losses
    cosine_embedding_loss, gaussian_nll_loss, hinge_embedding_loss, margin_ranking_loss,
    multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, poisson_nll_loss,
    soft_margin_loss, triplet_margin_loss, triplet_margin_with_distance_loss,
)
from ._more import (  # noqa: F401 - more activations, distances, rms_norm, bilinear
    bilinear, celu, celu_, elu_, hardshrink, hardtanh, hardtanh_, leaky_relu_, pairwise_distance,
    pdist, relu6, relu_, rms_norm, rrelu, rrelu_, selu, selu_, softmin, softshrink, softsign,
    tanhshrink, threshold, threshold_,
)
from ._norm import (  # noqa: F401 - the per-sample norms
    group_norm, instance_norm, local_response_norm,
)
from ._pool import (  # noqa: F401 - max, average and adaptive pooling
    adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool1d,
    adaptive_max_pool2d, adaptive_max_pool3d, avg_pool1d, avg_pool2d, avg_pool3d, max_pool1d,
    max_pool1d_with_indices, max_pool2d, max_pool2d_with_indices, max_pool3d,
    max_pool3d_with_indices,
)
from ._fractional import (  # noqa: F401 - fractional max pooling, F's helpers
    assert_int_or_pair, boolean_dispatch, fractional_max_pool2d,
    fractional_max_pool2d_with_indices, fractional_max_pool3d, fractional_max_pool3d_with_indices,
)
from ._resample import (  # noqa: F401 - interpolation and pixel shuffle
    interpolate, pixel_shuffle, pixel_unshuffle, upsample, upsample_bilinear, upsample_nearest,
)
