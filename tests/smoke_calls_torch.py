"""Smoke calls for the functions of the torch namespace that no sweep exercises: creation
and conversion, dtypes and promotion, global state (seeds, default dtype and device, thread
counts, flags), integer ops (the OpInfo sweep runs float dtypes only), the aten spellings of
nn functions, and serialization. The entry type and helpers are ``smoke_calls``'."""
import io

import numpy as np

from smoke_calls import (Smoke, arr, drawn, in_range, ints, own, restoring, same_draws,
                         seeded, stats, t)

NS = "torch (functions)"


def _normal(lib, n=20000):
    return lib.tensor(np.random.default_rng(0).standard_normal(n).astype(np.float32))


def _dropout_kept(lib, fn, p=0.5):
    """A training dropout keeps each value scaled by 1/(1-p) or zeroes it: whether that
    holds everywhere, and the share kept (about 1-p)."""
    x = t(lib, 4000, low=0.5, high=1.0)
    y = drawn(lib, lambda: fn(x.clone(), p, True))
    kept = y != 0
    scaled = bool(lib.allclose(y[kept], x[kept] / (1 - p)))
    return scaled, float(kept.double().mean())


def _alpha_dropout_stats(lib, fn):
    """Alpha dropout keeps a standard normal input's mean and std (self-normalising); in
    eval mode it is the identity."""
    x = _normal(lib)
    y = drawn(lib, lambda: fn(x.clone(), 0.3, True))
    return stats(y), fn(x[:5].clone(), 0.3, False)


def _deterministic(lib):
    def body():
        lib.use_deterministic_algorithms(True, warn_only=True)
        return (lib.are_deterministic_algorithms_enabled(),
                lib.is_deterministic_algorithms_warn_only_enabled(),
                lib.get_deterministic_debug_mode())
    return restoring(lambda: (lib.are_deterministic_algorithms_enabled(),
                              lib.is_deterministic_algorithms_warn_only_enabled()),
                     lambda old: lib.use_deterministic_algorithms(old[0], warn_only=old[1]),
                     body)


def _debug_mode(lib):
    def body():
        lib.set_deterministic_debug_mode("warn")
        return lib.get_deterministic_debug_mode(), lib.are_deterministic_algorithms_enabled()
    return restoring(lib.get_deterministic_debug_mode, lib.set_deterministic_debug_mode, body)


def _matmul_precision(lib):
    def body():
        lib.set_float32_matmul_precision("high")
        return lib.get_float32_matmul_precision()
    return (lib.get_float32_matmul_precision(),
            restoring(lib.get_float32_matmul_precision, lib.set_float32_matmul_precision, body))


def _threads(lib):
    def body():
        lib.set_num_threads(1)
        return lib.get_num_threads()
    return restoring(lib.get_num_threads, lib.set_num_threads, body)


def _interop_threads(lib):
    """Set once (PyTorch allows a single call per process, so tracegrad's alone)."""
    before = lib.get_num_interop_threads()
    lib.set_num_interop_threads(before)
    return isinstance(before, int) and before >= 1 and lib.get_num_interop_threads() == before


def _rng_state(lib):
    """A saved state replays the same draws."""
    state = lib.get_rng_state()
    first = lib.rand(5)
    lib.set_rng_state(state)
    return bool(lib.equal(first, lib.rand(5)))


def _seed(lib):
    with seeded(lib):
        chosen = lib.seed()
        return isinstance(chosen, int) and lib.initial_seed() == chosen


def _default_dtype(lib):
    def body():
        lib.set_default_dtype(lib.float64)
        return (lib.get_default_dtype(), lib.ones(2).dtype, lib.tensor([1.5]).dtype,
                lib.tensor([1]).dtype, lib.arange(0.0, 1.0, 0.5).dtype)
    return restoring(lib.get_default_dtype, lib.set_default_dtype, body)


def _default_device(lib):
    """Set, then unset (None: PyTorch's way back to no default; restoring ``cpu`` would
    leave its device mode active for every later test)."""
    try:
        lib.set_default_device("cpu")
        return lib.get_default_device(), lib.zeros(2).device
    finally:
        lib.set_default_device(None)


def _warn_always(lib):
    def body():
        lib.set_warn_always(True)
        return lib.is_warn_always_enabled()
    return lib.is_warn_always_enabled(), restoring(lib.is_warn_always_enabled,
                                                   lib.set_warn_always, body)


def _printoptions(lib):
    x = lib.tensor([1.23456, 2.5, 0.125])
    try:
        lib.set_printoptions(precision=2)
        short = repr(x)
        lib.set_printoptions(sci_mode=True)
        scientific = repr(x)
        lib.set_printoptions(threshold=5, edgeitems=2, sci_mode=False)
        summarised = repr(lib.arange(10.0))
    finally:
        lib.set_printoptions(profile="default")
    return short, scientific, summarised, repr(x)


def _from_numpy(lib):
    """The tensor shares the array's memory: a write to the array shows in it."""
    a = arr(3)
    x = lib.from_numpy(a)
    a[0] = 5.0
    return x, x.dtype, lib.from_numpy(np.arange(3)).dtype


def _save_load(lib):
    buffer = io.BytesIO()
    lib.save({"w": t(lib, 2, 3), "step": 3}, buffer)
    buffer.seek(0)
    loaded = lib.load(buffer)
    return loaded["w"], loaded["step"]


def _compile(lib):
    """A compiled function computes what the eager one does, and keeps its gradient."""
    fn = lib.compile(lambda x: (x.sin() * x).sum())
    x = lib.tensor(arr(5, dtype=np.float64), requires_grad=True)
    out = fn(x)
    out.backward()
    expected = arr(5, dtype=np.float64)
    return (abs(float(out) - float((np.sin(expected) * expected).sum())) < 1e-12 and
            np.allclose(x.grad.numpy(), np.sin(expected) + expected * np.cos(expected)))


def _detach_inplace(lib):
    y = t(lib, 3, requires_grad=True) * 2
    lib.detach_(y)
    return y, y.requires_grad, y.grad_fn is None


def _inplace(lib, fn, x, *args):
    """An in-place function's result, and whether it is its input, written."""
    out = fn(x, *args)
    return out, out is x


def _inference_made(lib):
    with lib.inference_mode():
        return lib.is_inference(lib.ones(1))


def _anomaly(lib):
    with lib.autograd.set_detect_anomaly(True, check_nan=False):
        inside = lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled()
    return lib.is_anomaly_enabled(), lib.is_anomaly_check_nan_enabled(), inside


SMOKE = {(NS, name): entry for name, entry in {
    # creation and conversion
    "tensor": lambda lib: (lib.tensor([[1, 2], [3, 4]]), lib.tensor(2.5),
                           lib.tensor([True, False]), lib.tensor([1, 2], dtype=lib.float64)),
    "as_tensor": lambda lib: (lib.as_tensor([1.5, 2.0]), lib.as_tensor(arr(2, 2)),
                              lib.as_tensor([1, 2], dtype=lib.float32)),
    "asarray": lambda lib: (lib.asarray(arr(3)), lib.asarray([1, 2]),
                            lib.asarray([1, 2], dtype=lib.float64)),
    "from_numpy": _from_numpy,
    "range": lambda lib: (lib.range(0, 4), lib.range(1, 2, 0.25)),
    "rand": lambda lib: in_range(drawn(lib, lambda: lib.rand(3, 4)), 0, 1),
    "randperm": lambda lib: (drawn(lib, lambda: lib.randperm(7)).sort().values,
                             same_draws(lib, lambda: lib.randperm(20))),
    "vander": lambda lib: (lib.vander(t(lib, 4)), lib.vander(t(lib, 3), N=5, increasing=True)),
    **{f"{kind}_window": (lambda kind: lambda lib: (
        getattr(lib, f"{kind}_window")(8), getattr(lib, f"{kind}_window")(7, periodic=False)))(
        kind) for kind in ("bartlett", "blackman", "hamming", "hann")},
    "kaiser_window": lambda lib: (lib.kaiser_window(8), lib.kaiser_window(7, False, beta=5.0)),
    # dtypes, predicates, sizes
    "is_tensor": lambda lib: (lib.is_tensor(lib.ones(1)), lib.is_tensor([1.0])),
    "is_floating_point": lambda lib: (lib.is_floating_point(lib.ones(1)),
                                      lib.is_floating_point(lib.tensor([1]))),
    "is_nonzero": lambda lib: (lib.is_nonzero(lib.tensor([1.5])), lib.is_nonzero(ints(lib, 0))),
    "is_same_size": lambda lib: (lib.is_same_size(lib.ones(2, 3), lib.zeros(2, 3)),
                                 lib.is_same_size(lib.ones(2, 3), lib.zeros(3, 2))),
    "is_inference": lambda lib: (lib.is_inference(lib.ones(1)), _inference_made(lib)),
    "numel": lambda lib: (lib.numel(lib.ones(2, 3, 4)), lib.numel(lib.tensor(1.0))),
    "promote_types": lambda lib: (lib.promote_types(lib.int32, lib.float32),
                                  lib.promote_types(lib.bool, lib.int64),
                                  lib.promote_types(lib.float16, lib.float64)),
    "result_type": lambda lib: (lib.result_type(ints(lib, 1), 1.0),
                                lib.result_type(lib.ones(1), lib.ones(1, dtype=lib.float64)),
                                lib.result_type(ints(lib, 1), True)),
    "can_cast": lambda lib: (lib.can_cast(lib.float32, lib.int32),
                             lib.can_cast(lib.int32, lib.float32),
                             lib.can_cast(lib.bool, lib.int64)),
    # global state
    "set_default_dtype": _default_dtype,
    "get_default_dtype": lambda lib: lib.get_default_dtype(),
    "set_default_device": _default_device,
    "get_default_device": lambda lib: lib.get_default_device(),
    "manual_seed": lambda lib: same_draws(lib, lambda: lib.rand(6)),
    "initial_seed": lambda lib: drawn(lib, lib.initial_seed, seed=1234),
    "seed": _seed,
    "get_rng_state": own(_rng_state),
    "set_rng_state": own(_rng_state),
    "use_deterministic_algorithms": _deterministic,
    "are_deterministic_algorithms_enabled": _deterministic,
    "is_deterministic_algorithms_warn_only_enabled": _deterministic,
    "set_deterministic_debug_mode": _debug_mode,
    "get_deterministic_debug_mode": _debug_mode,
    "set_float32_matmul_precision": _matmul_precision,
    "get_float32_matmul_precision": _matmul_precision,
    "set_num_threads": _threads,
    "get_num_threads": own(lambda lib: isinstance(lib.get_num_threads(), int) and
                           lib.get_num_threads() >= 1),
    "get_num_interop_threads": own(_interop_threads),
    "set_num_interop_threads": own(_interop_threads),
    "is_anomaly_enabled": lambda lib: _anomaly(lib),
    "is_anomaly_check_nan_enabled": lambda lib: _anomaly(lib),
    "set_warn_always": _warn_always,
    "is_warn_always_enabled": _warn_always,
    "set_printoptions": _printoptions,
    # autograd and views
    "detach": lambda lib: (lib.detach(t(lib, 3, requires_grad=True) * 2),
                           lib.detach(t(lib, 3, requires_grad=True)).requires_grad),
    "detach_": _detach_inplace,
    "detach_copy": lambda lib: lib.detach_copy(t(lib, 3, requires_grad=True) * 2),
    "select_copy": lambda lib: (lib.select_copy(t(lib, 3, 4), 1, 2),
                                lib.select_copy(t(lib, 3, 4), 0, -1)),
    "slice_copy": lambda lib: (lib.slice_copy(t(lib, 5, 2), 0, 1, 4),
                               lib.slice_copy(t(lib, 5, 2), 1, 0, 1)),
    "split_copy": lambda lib: (lib.split_copy(t(lib, 5, 2), 2), lib.split_copy(t(lib, 4, 3), 2, 1)),
    "unravel_index": lambda lib: lib.unravel_index(ints(lib, 4, 7, 11), (3, 4)),
    # integer ops (the OpInfo sweep runs float dtypes only)
    "bincount": lambda lib: (lib.bincount(ints(lib, 1, 3, 3, 0)),
                             lib.bincount(ints(lib, 1, 1), weights=lib.tensor([0.5, 2.0]),
                                          minlength=4)),
    "bitwise_and": lambda lib: (lib.bitwise_and(ints(lib, 12, 10, -3), ints(lib, 10, 6, 5)),
                                lib.bitwise_and(lib.tensor([True, False]), True)),
    "bitwise_or": lambda lib: lib.bitwise_or(ints(lib, 12, 10, -3), ints(lib, 10, 6, 5)),
    "bitwise_xor": lambda lib: lib.bitwise_xor(ints(lib, 12, 10, -3), ints(lib, 10, 6, 5)),
    "bitwise_not": lambda lib: (lib.bitwise_not(ints(lib, 12, 0, -3)),
                                lib.bitwise_not(lib.tensor([True, False]))),
    "gcd": lambda lib: lib.gcd(ints(lib, 12, 0, -18, 7), ints(lib, 8, 5, 12, 0)),
    "gcd_": lambda lib: _inplace(lib, lib.gcd_, ints(lib, 12, 0, -18), ints(lib, 8, 5, 12)),
    "lcm": lambda lib: lib.lcm(ints(lib, 4, 0, -6, 7), ints(lib, 6, 5, 4, 3)),
    "lcm_": lambda lib: _inplace(lib, lib.lcm_, ints(lib, 4, 0, -6), ints(lib, 6, 5, 4)),
    # norms and linear algebra under their old names
    "chain_matmul": lambda lib: lib.chain_matmul(t(lib, 2, 3), t(lib, 3, 4, seed=1),
                                                 t(lib, 4, 2, seed=2)),
    "frobenius_norm": lambda lib: (lib.frobenius_norm(t(lib, 3, 4), dim=(0, 1)),
                                   lib.frobenius_norm(t(lib, 2, 3, 4), dim=(1, 2), keepdim=True)),
    "nuclear_norm": lambda lib: (lib.nuclear_norm(t(lib, 3, 4)),
                                 lib.nuclear_norm(t(lib, 2, 3, 4), dim=(1, 2))),
    "slogdet": lambda lib: lib.slogdet(t(lib, 2, 3, 3)),
    # aten spellings of nn functions
    "adaptive_avg_pool1d": lambda lib: lib.adaptive_avg_pool1d(t(lib, 2, 3, 7), 3),
    "adaptive_max_pool1d": lambda lib: lib.adaptive_max_pool1d(t(lib, 2, 3, 7), 3),
    "max_pool1d": lambda lib: (lib.max_pool1d(t(lib, 2, 3, 7), 2),
                               lib.max_pool1d(t(lib, 2, 3, 7), 3, 2, 1, 1, True)),
    "max_pool2d": lambda lib: (lib.max_pool2d(t(lib, 2, 3, 6, 5), 2),
                               lib.max_pool2d(t(lib, 1, 5, 6), (3, 2), (2, 1), 1)),
    "max_pool3d": lambda lib: lib.max_pool3d(t(lib, 1, 2, 4, 5, 4), 2, 1, 1, 1, True),
    "celu": lambda lib: lib.celu(t(lib, 6), 0.5),
    "celu_": lambda lib: _inplace(lib, lib.celu_, t(lib, 6), 1.5),
    "selu": lambda lib: lib.selu(t(lib, 6)),
    "selu_": lambda lib: _inplace(lib, lib.selu_, t(lib, 6)),
    "rrelu": lambda lib: lib.rrelu(t(lib, 6), 0.1, 0.3, False),
    "rrelu_": lambda lib: _inplace(lib, lib.rrelu_, t(lib, 6), 0.1, 0.3, False),
    "threshold": lambda lib: lib.threshold(t(lib, 6), 0.5, -1.0),
    "threshold_": lambda lib: _inplace(lib, lib.threshold_, t(lib, 6), 0.5, -1.0),
    "prelu": lambda lib: lib.prelu(t(lib, 2, 3, 4), lib.tensor([0.1, -0.2, 0.3])),
    "embedding": lambda lib: lib.embedding(t(lib, 5, 3), ints(lib, 4, 0, 2, 4)),
    "instance_norm": lambda lib: lib.instance_norm(t(lib, 2, 3, 5), t(lib, 3, seed=1),
                                                   t(lib, 3, seed=2), None, None, True, 0.1,
                                                   1e-5, False),
    "layer_norm": lambda lib: lib.layer_norm(t(lib, 2, 3, 4), (4,), t(lib, 4, seed=1),
                                             t(lib, 4, seed=2), 1e-5, True),
    "group_norm": lambda lib: lib.group_norm(t(lib, 2, 4, 3), 2, t(lib, 4, seed=1),
                                             t(lib, 4, seed=2), 1e-5, True),
    "pairwise_distance": lambda lib: (lib.pairwise_distance(t(lib, 4, 3), t(lib, 4, 3, seed=1)),
                                      lib.pairwise_distance(t(lib, 4, 3), t(lib, 3, seed=1),
                                                            1.0, 1e-6, True)),
    "pdist": lambda lib: (lib.pdist(t(lib, 4, 3)), lib.pdist(t(lib, 4, 3), 1.0)),
    "pixel_shuffle": lambda lib: lib.pixel_shuffle(t(lib, 1, 8, 2, 3), 2),
    "pixel_unshuffle": lambda lib: lib.pixel_unshuffle(t(lib, 1, 2, 4, 6), 2),
    "channel_shuffle": lambda lib: lib.channel_shuffle(t(lib, 1, 6, 2, 2), 3),
    "native_channel_shuffle": lambda lib: lib.native_channel_shuffle(t(lib, 1, 6, 2, 2), 2),
    "dropout": lambda lib: (_dropout_kept(lib, lib.dropout), lib.dropout(t(lib, 5), 0.5, False)),
    "dropout_": lambda lib: _dropout_kept(lib, lib.dropout_),
    "feature_alpha_dropout": lambda lib: lib.feature_alpha_dropout(t(lib, 2, 3, 4), 0.5, False),
    "feature_alpha_dropout_": lambda lib: lib.feature_alpha_dropout_(t(lib, 2, 3), 0.5, False),
    "alpha_dropout": lambda lib: _alpha_dropout_stats(lib, lib.alpha_dropout),
    "alpha_dropout_": lambda lib: _alpha_dropout_stats(lib, lib.alpha_dropout_),
    # serialization and compilation
    "save": _save_load,
    "load": _save_load,
    "compile": own(_compile),
}.items()}

# the share kept of 4000 draws and the statistics of 20000 (standard errors under 0.01):
# within 0.05 of PyTorch's
STATISTICAL = ("dropout", "dropout_", "alpha_dropout", "alpha_dropout_")
SMOKE.update({(NS, name): Smoke(SMOKE[(NS, name)], atol=0.05) for name in STATISTICAL})
