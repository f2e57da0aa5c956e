"""Smoke calls for torch.nn's classes that the ModuleInfo sweep leaves out (containers,
dropouts, lazy modules, unpooling, upsampling...), nn.functional's functions with no OpInfo,
nn.init, and the odd names of torch.linalg and torch.special. Modules get fixed parameters
(``fill_parameters``) so both libraries compute the same function. Random initialisers and
dropouts are compared by what every draw shares: a range, or statistics of 20000 draws
normalised by the distribution's own (within 0.03: four standard errors). The entry type
and helpers are ``smoke_calls``'."""
import math

import numpy as np

from smoke_calls import Smoke, drawn, fill_parameters, in_range, ints, seeded, stats, t

NN, F, INIT = "torch.nn", "torch.nn.functional", "torch.nn.init"
STATISTICAL = 0.03


def _run(lib, module, *inputs, train=False):
    """``module`` with fixed parameters, in train or eval mode, called on ``inputs``."""
    fill_parameters(lib, module)
    module.train(train)
    return module(*inputs)


def _raises(fn, error):
    try:
        fn()
    except error:
        return True
    return False


# ---- containers and base classes --------------------------------------------------------

def _module(lib):
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(3, 2)
            self.register_buffer("scale", lib.tensor(2.0))

        def forward(self, x):
            return self.fc(x) * self.scale

    net = Net()
    out = _run(lib, net, t(lib, 4, 3))
    return (out, list(net.state_dict()), [n for n, _ in net.named_parameters()],
            net.training, [n for n, _ in net.named_modules()])


def _sequential(lib):
    seq = lib.nn.Sequential(lib.nn.Linear(3, 4), lib.nn.Tanh(), lib.nn.Linear(4, 2))
    out = _run(lib, seq, t(lib, 5, 3))
    tail = seq[1:]
    seq.append(lib.nn.ReLU())
    return out, len(seq), type(tail).__name__, len(tail), type(seq[-1]).__name__


def _module_list(lib):
    layers = lib.nn.ModuleList([lib.nn.Linear(2, 2)])
    layers.append(lib.nn.Linear(2, 3))
    layers.extend([lib.nn.ReLU()])
    layers.insert(0, lib.nn.Identity())
    x = t(lib, 4, 2)
    fill_parameters(lib, layers)
    for layer in layers:
        x = layer(x)
    return x, len(layers), len(list(layers.parameters())), type(layers[2]).__name__


def _module_dict(lib):
    layers = lib.nn.ModuleDict({"a": lib.nn.Linear(2, 3)})
    layers.update({"b": lib.nn.Tanh()})
    layers["c"] = lib.nn.Linear(3, 1)
    fill_parameters(lib, layers)
    x = t(lib, 4, 2)
    for key in layers:
        x = layers[key](x)
    popped = type(layers.pop("b")).__name__
    kept = list(layers.keys()), "b" in layers, len(list(layers.parameters()))
    layers.clear()
    return x, popped, kept, len(layers)


def _parameter_list(lib):
    params = lib.nn.ParameterList([lib.nn.Parameter(t(lib, 2)), lib.nn.Parameter(t(lib, 3))])
    params.append(lib.nn.Parameter(t(lib, 1, seed=1)))
    return len(params), [tuple(p.shape) for p in params.parameters()], params[2]


def _parameter_dict(lib):
    params = lib.nn.ParameterDict({"w": lib.nn.Parameter(t(lib, 2, 2))})
    params["b"] = lib.nn.Parameter(t(lib, 2, seed=1))
    return sorted(params.keys()), [n for n, _ in params.named_parameters()], params["b"]


def _container(lib):
    holder = lib.nn.Container(fc=lib.nn.Linear(2, 2), act=lib.nn.ReLU())
    return [n for n, _ in holder.named_children()], len(list(holder.parameters()))


def _rnn_base(lib):
    rnn = lib.nn.RNNBase("LSTM", 3, 4, num_layers=2, bidirectional=True)
    return [(n, tuple(p.shape)) for n, p in rnn.named_parameters()], len(rnn.all_weights)


def _rnn_cell_base(lib):
    cell = lib.nn.RNNCellBase(3, 4, True, 4)
    return [(n, tuple(p.shape)) for n, p in cell.named_parameters()]


# ---- modules ----------------------------------------------------------------------------

def _lazy(lib, cls, x, **kwargs):
    """A lazy module takes its size from the first input and becomes its eager class."""
    module = getattr(lib.nn, cls)(**kwargs)
    module(x)
    out = _run(lib, module, x, train=True)
    return type(module).__name__, [tuple(p.shape) for p in module.parameters()], out


def _unpool(lib, nd):
    x = t(lib, 1, 2, *[6] * nd)
    pool = getattr(lib.nn, f"MaxPool{nd}d")(2, return_indices=True)
    values, indices = pool(x)
    unpool = getattr(lib.nn, f"MaxUnpool{nd}d")(2)
    return unpool(values, indices), unpool(values, indices, output_size=(1, 2, *[7] * nd))


def _dropout_module(lib, cls, shape, whole_channels):
    """Eval: the identity. Train: each value (or channel) zeroed or scaled by 2, some of
    each (the share kept, about a half, is far from 0 and 1 in every draw)."""
    x = t(lib, *shape, low=0.5, high=1.0)
    module = getattr(lib.nn, cls)(0.5)
    y = drawn(lib, lambda: module(x))
    kept = y != 0
    if whole_channels:
        flat = kept.reshape(shape[0], shape[1], -1)
        same = bool((flat.all(-1) | ~flat.any(-1)).all())
    else:
        same = True
    scaled = bool(lib.allclose(y[kept], x[kept] * 2))
    share = float(kept.double().mean())
    return module.eval()(x[:2]), scaled, same, 0.2 < share < 0.8


def _alpha_module(lib, cls):
    x = lib.tensor(np.random.default_rng(0).standard_normal((200, 100)).astype(np.float32))
    module = getattr(lib.nn, cls)(0.2)
    return stats(drawn(lib, lambda: module(x))), module.eval()(x[:2, :3])


def _embedding_bag(lib):
    bag = fill_parameters(lib, lib.nn.EmbeddingBag(6, 3, mode="mean"))
    summed = fill_parameters(lib, lib.nn.EmbeddingBag(6, 3, mode="max"))
    idx, offsets = ints(lib, 1, 2, 4, 5, 4, 3), ints(lib, 0, 2, 2)
    return bag(idx, offsets), summed(idx.reshape(2, 3)), bag(idx, offsets,
                                                            per_sample_weights=None)


def _triplet_with_distance(lib):
    anchor, pos, neg = (t(lib, 4, 3, seed=s) for s in range(3))
    cosine = lib.nn.TripletMarginWithDistanceLoss(
        distance_function=lambda a, b: 1 - lib.nn.functional.cosine_similarity(a, b),
        margin=0.5, reduction="none")
    return lib.nn.TripletMarginWithDistanceLoss()(anchor, pos, neg), cosine(anchor, pos, neg)


def _transformer_decoder(lib):
    layer = lib.nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
    decoder = lib.nn.TransformerDecoder(layer, num_layers=2, norm=lib.nn.LayerNorm(8))
    tgt, memory = t(lib, 2, 3, 8), t(lib, 2, 4, 8, seed=1)
    mask = lib.nn.Transformer.generate_square_subsequent_mask(3)
    return _run(lib, decoder, tgt, memory, mask)


def _sync_batch_norm(lib):
    """Without a process group it normalises over the local batch, as BatchNorm does."""
    norm = lib.nn.SyncBatchNorm(3)
    out = _run(lib, norm, t(lib, 4, 3, 2), train=True)
    return out, norm.running_mean, norm.running_var, norm.num_batches_tracked


# ---- nn.functional and nn.init ----------------------------------------------------------

def _gumbel_softmax(lib):
    """Rows of a soft draw sum to one; a hard draw is one-hot."""
    logits = t(lib, 5, 4)
    soft = drawn(lib, lambda: lib.nn.functional.gumbel_softmax(logits, tau=0.5))
    hard = drawn(lib, lambda: lib.nn.functional.gumbel_softmax(logits, hard=True))
    return (soft.sum(-1), bool((soft >= 0).all()), hard.sum(-1),
            bool(((hard == 0) | (hard == 1)).all()))


def _boolean_dispatch(lib):
    fn = lib.nn.functional.boolean_dispatch(
        "flag", 1, False, lambda x, flag=False: ("true", x), lambda x, flag=False: ("false", x),
        None, "fn")
    return fn(1, True), fn(2), fn(3, flag=False), fn(4, flag=True)


def _assert_int_or_pair(lib):
    check = lib.nn.functional.assert_int_or_pair
    return (check(2, "kernel", "{} must be an int or a pair"), check((2, 3), "kernel", "{}"),
            _raises(lambda: check((1, 2, 3), "kernel", "{} must be an int or a pair"),
                    AssertionError))


def _init_stats(lib, name, scale, shape=(200, 100), **kwargs):
    """(shape, dtype, mean / scale, sample std / scale) after the initialiser fills
    ``shape``: scale is the std the distribution should have."""
    w = lib.empty(*shape)
    with seeded(lib, 3):
        out = getattr(lib.nn.init, name)(w, **kwargs)
    mean, sample_std = stats(w)
    return out is w, tuple(w.shape), w.dtype, mean / scale, sample_std / scale


def _fans(shape):
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def _xavier_std(shape, gain=1.0):
    fan_in, fan_out = _fans(shape)
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def _uniform_bounds(lib, name, bound, shape=(200, 100), **kwargs):
    w = getattr(lib.nn.init, name)(lib.empty(*shape), **kwargs)
    return in_range(w, -bound, bound)


def _init_entries():
    shape = (200, 100)
    fan_in, fan_out = _fans(shape)
    xavier = _xavier_std(shape, gain=2.0)
    entries = {}
    for name in ("uniform", "uniform_"):
        entries[name] = lambda lib, n=name: (
            _init_stats(lib, n, 3 / math.sqrt(12), a=-1.0, b=2.0),
            in_range(getattr(lib.nn.init, n)(lib.empty(50), -1.0, 2.0), -1.0, 2.0))
    for name in ("normal", "normal_"):
        entries[name] = lambda lib, n=name: _init_stats(lib, n, 0.5, mean=0.0, std=0.5)
    for name in ("xavier_uniform", "xavier_uniform_"):
        entries[name] = lambda lib, n=name: (
            _init_stats(lib, n, xavier, gain=2.0),
            _uniform_bounds(lib, n, xavier * math.sqrt(3), gain=2.0))
    for name in ("xavier_normal", "xavier_normal_"):
        entries[name] = lambda lib, n=name: _init_stats(lib, n, xavier, gain=2.0)
    for name in ("kaiming_uniform", "kaiming_uniform_"):
        std = math.sqrt(2.0 / (1 + 0.2 ** 2)) / math.sqrt(fan_in)
        entries[name] = lambda lib, n=name, s=std: (
            _init_stats(lib, n, s, a=0.2), _uniform_bounds(lib, n, s * math.sqrt(3), a=0.2))
    for name in ("kaiming_normal", "kaiming_normal_"):
        std = math.sqrt(2.0) / math.sqrt(fan_out)
        entries[name] = lambda lib, n=name, s=std: _init_stats(
            lib, n, s, mode="fan_out", nonlinearity="relu")
    for name in ("orthogonal", "orthogonal_"):
        entries[name] = lambda lib, n=name: _orthogonal(lib, n)
    for name in ("constant", "constant_"):
        entries[name] = lambda lib, n=name: getattr(lib.nn.init, n)(lib.empty(2, 3), 1.5)
    for name in ("eye", "eye_"):
        entries[name] = lambda lib, n=name: (getattr(lib.nn.init, n)(lib.empty(3, 4)),
                                             getattr(lib.nn.init, n)(lib.empty(4, 2)))
    for name in ("dirac", "dirac_"):
        entries[name] = lambda lib, n=name: (getattr(lib.nn.init, n)(lib.empty(4, 2, 3)),
                                             getattr(lib.nn.init, n)(lib.empty(4, 2, 3, 3), 2))
    entries["ones_"] = lambda lib: lib.nn.init.ones_(lib.empty(2, 3))
    entries["zeros_"] = lambda lib: lib.nn.init.zeros_(lib.empty(2, 3))
    entries["trunc_normal_"] = lambda lib: (
        _init_stats(lib, "trunc_normal_", 1.0, mean=0.5, std=1.0, a=-1.0, b=2.0),
        in_range(lib.nn.init.trunc_normal_(lib.empty(500), 0.5, 1.0, -1.0, 2.0), -1.0, 2.0))
    entries["calculate_gain"] = lambda lib: [lib.nn.init.calculate_gain(*args) for args in (
        ("linear",), ("relu",), ("leaky_relu", 0.2), ("tanh",), ("selu",), ("conv2d",),
        ("sigmoid",), ("leaky_relu",))]
    drawing = ("uniform", "normal", "xavier_uniform", "xavier_normal", "kaiming_uniform",
               "kaiming_normal", "trunc_normal")
    return {(INIT, name): Smoke(call, atol=STATISTICAL) if name.rstrip("_") in drawing else call
            for name, call in entries.items()}


def _orthogonal(lib, name):
    """Rows of a wide matrix come out orthonormal (times the gain)."""
    w = getattr(lib.nn.init, name)(lib.empty(3, 5), gain=2.0)
    return w @ w.T, tuple(w.shape)


def _linalg_error(lib):
    return issubclass(lib.linalg.LinAlgError, RuntimeError), _raises(
        lambda: lib.linalg.cholesky(-lib.eye(3)), lib.linalg.LinAlgError)


SMOKE = {
    **{(NN, name): entry for name, entry in {
        "Module": _module,
        "Sequential": _sequential,
        "ModuleList": _module_list,
        "ModuleDict": _module_dict,
        "ParameterList": _parameter_list,
        "ParameterDict": _parameter_dict,
        "Container": _container,
        "RNNBase": _rnn_base,
        "RNNCellBase": _rnn_cell_base,
        "Identity": lambda lib: lib.nn.Identity(3, unused=True)(t(lib, 2, 3)),
        "Flatten": lambda lib: (lib.nn.Flatten()(t(lib, 2, 3, 4)),
                                lib.nn.Flatten(0, 1)(t(lib, 2, 3, 4))),
        "Unflatten": lambda lib: lib.nn.Unflatten(1, (2, 3))(t(lib, 4, 6)),
        "Fold": lambda lib: lib.nn.Fold((4, 5), 2)(t(lib, 1, 12, 12)),
        "Unfold": lambda lib: lib.nn.Unfold(2, padding=1, stride=2)(t(lib, 1, 2, 3, 4)),
        "CosineSimilarity": lambda lib: lib.nn.CosineSimilarity(dim=1)(t(lib, 4, 3),
                                                                       t(lib, 4, 3, seed=1)),
        "PairwiseDistance": lambda lib: lib.nn.PairwiseDistance(p=1.0, keepdim=True)(
            t(lib, 4, 3), t(lib, 4, 3, seed=1)),
        "PixelShuffle": lambda lib: lib.nn.PixelShuffle(2)(t(lib, 1, 8, 2, 3)),
        "PixelUnshuffle": lambda lib: lib.nn.PixelUnshuffle(2)(t(lib, 1, 2, 4, 6)),
        "ChannelShuffle": lambda lib: lib.nn.ChannelShuffle(3)(t(lib, 1, 6, 2, 2)),
        "Hardsigmoid": lambda lib: lib.nn.Hardsigmoid()(t(lib, 8, low=-4.0, high=4.0)),
        "RReLU": lambda lib: (lib.nn.RReLU(0.1, 0.3).eval()(t(lib, 6)),
                              in_range(drawn(lib, lambda: lib.nn.RReLU(0.1, 0.3)(
                                  -t(lib, 50, low=1.0, high=2.0))), -0.6, -0.1)),
        "NLLLoss2d": lambda lib: lib.nn.NLLLoss2d()(
            lib.log_softmax(t(lib, 2, 3, 2, 2), 1), ints(lib, 0, 2, 1, 1, 2, 0, 0, 1).reshape(
                2, 2, 2)),
        "TripletMarginLoss": lambda lib: lib.nn.TripletMarginLoss(margin=0.5, p=1.0)(
            t(lib, 4, 3), t(lib, 4, 3, seed=1), t(lib, 4, 3, seed=2)),
        "TripletMarginWithDistanceLoss": _triplet_with_distance,
        "EmbeddingBag": _embedding_bag,
        "TransformerDecoder": _transformer_decoder,
        "SyncBatchNorm": _sync_batch_norm,
        "LazyLinear": lambda lib: _lazy(lib, "LazyLinear", t(lib, 2, 3), out_features=4),
        **{f"Lazy{kind}Norm{nd}d": (lambda kind, nd: lambda lib: _lazy(
            lib, f"Lazy{kind}Norm{nd}d", t(lib, 2, 3, *[4] * nd), affine=True))(kind, nd)
           for kind in ("Batch", "Instance") for nd in (1, 2, 3)},
        **{f"MaxUnpool{nd}d": (lambda nd: lambda lib: _unpool(lib, nd))(nd) for nd in (1, 2, 3)},
        "Dropout": lambda lib: _dropout_module(lib, "Dropout", (40, 50), False),
        "Dropout1d": lambda lib: _dropout_module(lib, "Dropout1d", (4, 30, 5), True),
        "Dropout2d": lambda lib: _dropout_module(lib, "Dropout2d", (4, 30, 2, 3), True),
        "Dropout3d": lambda lib: _dropout_module(lib, "Dropout3d", (4, 30, 2, 2, 2), True),
        "AlphaDropout": lambda lib: _alpha_module(lib, "AlphaDropout"),
        "FeatureAlphaDropout": lambda lib: _alpha_module(lib, "FeatureAlphaDropout"),
        "Upsample": lambda lib: (lib.nn.Upsample(scale_factor=2)(t(lib, 1, 2, 3)),
                                 lib.nn.Upsample(size=(4, 5), mode="bilinear")(t(lib, 1, 2, 2, 3))),
        "UpsamplingNearest2d": lambda lib: lib.nn.UpsamplingNearest2d(scale_factor=2)(
            t(lib, 1, 2, 2, 3)),
        "UpsamplingBilinear2d": lambda lib: lib.nn.UpsamplingBilinear2d(size=(4, 5))(
            t(lib, 1, 2, 2, 3)),
    }.items()},
    **{(F, name): entry for name, entry in {
        "affine_grid": lambda lib: (
            lib.nn.functional.affine_grid(t(lib, 2, 2, 3), [2, 1, 3, 4], align_corners=False),
            lib.nn.functional.affine_grid(t(lib, 1, 3, 4), [1, 1, 2, 3, 2], align_corners=True)),
        "fold": lambda lib: lib.nn.functional.fold(t(lib, 2, 8, 6), (3, 4), 2),
        "one_hot": lambda lib: (lib.nn.functional.one_hot(ints(lib, 0, 3, 1)),
                                lib.nn.functional.one_hot(ints(lib, 0, 1), num_classes=4)),
        "upsample": lambda lib: lib.nn.functional.upsample(t(lib, 1, 2, 3), scale_factor=2),
        "native_channel_shuffle": lambda lib: lib.nn.functional.native_channel_shuffle(
            t(lib, 1, 6, 2), 2),
        "dropout1d": lambda lib: (lib.nn.functional.dropout1d(t(lib, 2, 3, 4), 0.5, False),
                                  _dropout_module(lib, "Dropout1d", (4, 30, 5), True)),
        "gumbel_softmax": _gumbel_softmax,
        "boolean_dispatch": _boolean_dispatch,
        "assert_int_or_pair": _assert_int_or_pair,
        **{f"lp_pool{nd}d": (lambda nd: lambda lib: (
            getattr(lib.nn.functional, f"lp_pool{nd}d")(t(lib, 1, 2, *[4] * nd, low=0.1), 2.0, 2),
            getattr(lib.nn.functional, f"lp_pool{nd}d")(t(lib, 1, 2, *[5] * nd, low=0.1), 3.0,
                                                        3, 2, True)))(nd) for nd in (1, 2, 3)},
    }.items()},
    **_init_entries(),
    ("torch.linalg", "LinAlgError"): _linalg_error,
    ("torch.special", "gammainc"): lambda lib: lib.special.gammainc(
        t(lib, 6, low=0.5, high=3.0), t(lib, 6, seed=1, low=0.1, high=4.0)),
    ("torch.special", "gammaincc"): lambda lib: lib.special.gammaincc(
        t(lib, 6, low=0.5, high=3.0), t(lib, 6, seed=1, low=0.1, high=4.0)),
}
SMOKE.update({(NN, name): Smoke(SMOKE[(NN, name)], atol=STATISTICAL)
              for name in ("AlphaDropout", "FeatureAlphaDropout")})
SMOKE[(NN, "TransformerDecoder")] = Smoke(_transformer_decoder, rtol=1e-4, atol=1e-5)
