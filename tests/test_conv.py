"""Convolution, padding and unfold/fold: functional forms and layers against PyTorch.

The op table (``op_table_conv.py``) checks each primitive against NumPy, finite differences
and PyTorch; this file covers a wider grid of arguments against PyTorch (values and
gradients), the layers (initialisation, ``extra_repr``, ``state_dict``, ``padding_mode``),
PyTorch's error messages, ``grad_fn`` names, dtypes, and compiled against eager.
"""
import math

import numpy as np
import pytest

import tracegrad as tg
import tracegrad.nn as nn
import tracegrad.nn.functional as F

from tolerances import close, ulps

# The convolutions here sum at most a few hundred products (the widest: a Conv3d weight's
# gradient, batch x positions = 240 terms), which PyTorch's kernels and NumPy's matmul add in
# different orders. A sum of n terms rounds within n ulps of the sum of their magnitudes;
# the inputs are standard normal, so that sum is at most about n.
F64 = close("float64", n_ops=256, scale=256)


def _np(t):
    return t.detach().numpy() if hasattr(t, "detach") else np.asarray(t)


def _both(fn, arrays, requires_grad=True):
    """``fn(lib, *tensors)`` in PyTorch and tracegrad, then each input's gradient of one fixed
    random weighting of the output: ``(torch_out, tg_out, torch_grads, tg_grads)``."""
    torch = pytest.importorskip("torch")
    t_in = [torch.tensor(a, requires_grad=requires_grad) for a in arrays]
    g_in = [tg.tensor(a, requires_grad=requires_grad) for a in arrays]
    t_out, g_out = fn(torch, *t_in), fn(tg, *g_in)
    if not requires_grad:
        return t_out, g_out, [], []
    w = np.random.default_rng(3).standard_normal(tuple(t_out.shape))
    (t_out * torch.tensor(w, dtype=t_out.dtype)).sum().backward()
    (g_out * tg.tensor(w, dtype=g_out.dtype)).sum().backward()
    return t_out, g_out, [t.grad for t in t_in], [g.grad for g in g_in]


def _assert_match(fn, arrays, rtol=F64["rtol"], atol=F64["atol"]):
    t_out, g_out, t_grads, g_grads = _both(fn, arrays)
    assert tuple(g_out.shape) == tuple(t_out.shape)
    np.testing.assert_allclose(_np(g_out), _np(t_out), rtol=rtol, atol=atol)
    for i, (t, g) in enumerate(zip(t_grads, g_grads)):
        np.testing.assert_allclose(_np(g), _np(t), rtol=rtol, atol=atol, err_msg=f"grad {i}")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


# a grid of convolutions against PyTorch ----------------------------------------------------------

_CONV_GRID = [
    # nd, batch, in, out, spatial, kernel, stride, padding, dilation, groups
    (1, 2, 3, 4, (9,), 3, 1, 0, 1, 1),
    (1, 1, 4, 4, (8,), 2, 3, 1, 2, 4),
    (1, 3, 2, 6, (7,), 4, 2, 0, 1, 2),
    (1, 2, 4, 2, (7,), 4, 1, "same", 3, 2),
    (2, 2, 3, 5, (7, 5), (3, 2), (2, 1), (1, 0), 1, 1),
    (2, 1, 4, 8, (6, 6), 3, 1, "same", 2, 4),
    (2, 2, 6, 6, (5, 7), 3, 2, 1, 1, 6),
    (2, 1, 2, 3, (8, 9), (2, 4), 1, "same", (2, 1), 1),
    (2, 1, 3, 2, (11, 10), 2, 4, 0, 3, 1),
    (2, 2, 2, 2, (4, 4), 1, 1, 0, 1, 1),
    (2, 1, 2, 4, (6, 5), 3, 1, "valid", 1, 2),
    (3, 1, 2, 3, (4, 5, 4), 3, (1, 2, 1), 1, 1, 1),
    (3, 2, 2, 2, (5, 4, 4), (2, 2, 1), 1, "same", (1, 2, 1), 2),
]


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # PyTorch's note on even kernels
@pytest.mark.parametrize("nd,n,cin,cout,size,k,stride,padding,dilation,groups", _CONV_GRID,
                         ids=[f"conv{c[0]}d-{i}" for i, c in enumerate(_CONV_GRID)])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_conv_grid_matches_torch(nd, n, cin, cout, size, k, stride, padding, dilation, groups,
                                 bias):
    kernel = (k,) * nd if isinstance(k, int) else k
    arrays = [_rand(n, cin, *size), _rand(cout, cin // groups, *kernel, seed=1)]
    if bias:
        arrays.append(_rand(cout, seed=2))

    def fn(lib, x, w, b=None):
        conv = getattr(lib.nn.functional, f"conv{nd}d")
        return conv(x, w, b, stride=stride, padding=padding, dilation=dilation, groups=groups)
    _assert_match(fn, arrays)


_CONVT_GRID = [
    # nd, batch, in, out, spatial, kernel, stride, padding, output_padding, dilation, groups
    (1, 2, 3, 2, (5,), 3, 2, 1, 1, 1, 1),
    (1, 1, 4, 6, (4,), 2, 3, 0, 2, 1, 2),
    (2, 2, 4, 2, (3, 4), 3, 2, 1, 1, 1, 2),
    (2, 1, 3, 3, (4, 3), (2, 3), (3, 1), (1, 0), (2, 0), (1, 2), 3),
    (2, 1, 2, 4, (3, 3), 2, 2, 0, 2, 3, 1),        # output_padding >= stride, < dilation
    (2, 2, 2, 2, (5, 5), 3, 1, 2, 0, 1, 1),
    (3, 1, 2, 2, (2, 3, 2), 2, (2, 1, 2), (0, 1, 1), (1, 0, 1), 1, 1),
]


@pytest.mark.parametrize("nd,n,cin,cout,size,k,stride,padding,opad,dilation,groups", _CONVT_GRID,
                         ids=[f"convT{c[0]}d-{i}" for i, c in enumerate(_CONVT_GRID)])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_conv_transpose_grid_matches_torch(nd, n, cin, cout, size, k, stride, padding, opad,
                                           dilation, groups, bias):
    kernel = (k,) * nd if isinstance(k, int) else k
    arrays = [_rand(n, cin, *size), _rand(cin, cout // groups, *kernel, seed=1)]
    if bias:
        arrays.append(_rand(cout, seed=2))

    def fn(lib, x, w, b=None):
        conv = getattr(lib.nn.functional, f"conv_transpose{nd}d")
        return conv(x, w, b, stride=stride, padding=padding, output_padding=opad, groups=groups,
                    dilation=dilation)
    _assert_match(fn, arrays)


_PAD_GRID = [
    ("constant", (3, 4), (1, 2)),
    ("constant", (2, 3, 4), (0, 1, 2, 1)),
    ("constant", (2, 2, 3, 4), (1, 1, 0, 2, 1, 0, 2, 1)),
    ("constant", (3, 5), (-1, 2, 2, -1)),
    ("reflect", (3, 6), (5, 4)),
    ("reflect", (2, 3, 6), (2, 3)),
    ("reflect", (3, 4, 5), (1, 4, 3, 2)),
    ("reflect", (1, 2, 4, 5), (4, 0, 0, 3)),
    ("reflect", (2, 3, 4, 3), (1, 2, 3, 0, 2, 2)),
    ("reflect", (1, 2, 3, 4, 3), (2, 1, 1, 3, 0, 2)),
    ("replicate", (2, 5), (3, 7)),
    ("replicate", (2, 3, 4), (2, 1, 0, 5)),
    ("replicate", (1, 2, 3, 4), (3, 0, 1, 2)),
    ("replicate", (1, 1, 2, 3, 2), (1, 2, 3, 0, 2, 1)),
    ("circular", (2, 4), (4, 2)),
    ("circular", (1, 3, 4), (1, 3)),
    ("circular", (1, 2, 3, 4), (4, 1, 3, 2)),
    ("circular", (2, 3, 3, 2), (1, 2, 0, 3, 2, 1)),
    ("circular", (1, 1, 2, 3, 4), (2, 2, 1, 1, 0, 2)),
]


@pytest.mark.parametrize("mode,shape,pad", _PAD_GRID,
                         ids=[f"{m}-{len(s)}D-{len(p)}" for m, s, p in _PAD_GRID])
def test_pad_matches_torch(mode, shape, pad):
    _assert_match(lambda lib, x: lib.nn.functional.pad(x, pad, mode=mode), [_rand(*shape)])


def test_pad_value_and_float32():
    x = _rand(2, 3).astype(np.float32)
    y = F.pad(tg.tensor(x), (1, 2), value=-3.5)
    assert y.dtype is tg.float32
    np.testing.assert_array_equal(_np(y), np.pad(x, ((0, 0), (1, 2)), constant_values=-3.5))


@pytest.mark.parametrize("args", [
    dict(kernel_size=2), dict(kernel_size=(2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
    dict(kernel_size=3, stride=3), dict(kernel_size=(1, 2), padding=(2, 0), stride=2),
], ids=["k2", "k23-d21-p1-s12", "k3-s3", "k12-p20-s2"])
def test_unfold_fold_match_torch(args):
    x = _rand(2, 3, 7, 6)
    _assert_match(lambda lib, x: lib.nn.functional.unfold(x, **args), [x])
    torch = pytest.importorskip("torch")
    cols = torch.nn.functional.unfold(torch.tensor(x), **args).numpy()
    _assert_match(lambda lib, c: lib.nn.functional.fold(c, (7, 6), **args), [cols])
    # fold(unfold(x)) counts each pixel once per block that covers it
    got = F.fold(F.unfold(tg.tensor(x), **args), (7, 6), **args)
    ones = F.fold(F.unfold(tg.ones(1, 1, 7, 6, dtype=tg.float64), **args), (7, 6), **args)
    # fold sums each pixel's copies (at most a few): x * count to an ulp per copy
    np.testing.assert_allclose(_np(got), x * _np(ones), rtol=ulps("float64", 8))


def test_unbatched_inputs_match_torch():
    _assert_match(lambda lib, x, w: lib.nn.functional.conv1d(x, w, padding=1),
                  [_rand(3, 6), _rand(2, 3, 3)])
    _assert_match(lambda lib, x, w: lib.nn.functional.conv_transpose2d(x, w, stride=2),
                  [_rand(2, 3, 3), _rand(2, 3, 2, 2)])
    _assert_match(lambda lib, x: lib.nn.functional.unfold(x, 2), [_rand(2, 4, 5)])
    _assert_match(lambda lib, c: lib.nn.functional.fold(c, (3, 4), 2), [_rand(8, 6)])


def test_empty_batch_matches_torch():
    _assert_match(lambda lib, x, w: lib.nn.functional.conv2d(x, w, padding=1, groups=2),
                  [_rand(0, 4, 5, 5), _rand(6, 2, 3, 3)])
    _assert_match(lambda lib, x, w: lib.nn.functional.conv_transpose1d(x, w, stride=2),
                  [_rand(0, 3, 4), _rand(3, 2, 3)])
    _assert_match(lambda lib, x: lib.nn.functional.unfold(x, 2), [_rand(0, 2, 3, 3)])


def test_non_contiguous_input():
    x = _rand(2, 5, 3, 6)
    _assert_match(lambda lib, x, w: lib.nn.functional.conv2d(x.transpose(1, 2), w, padding=1),
                  [x, _rand(4, 3, 3, 3)])


# dtypes and grad_fn names -------------------------------------------------------------------

def test_float32_stays_float32_and_matches_torch():
    torch = pytest.importorskip("torch")
    x, w = _rand(2, 3, 6, 6).astype(np.float32), _rand(4, 3, 3, 3).astype(np.float32)
    got = F.conv2d(tg.tensor(x), tg.tensor(w), stride=2, padding=1)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), stride=2, padding=1)
    assert got.dtype is tg.float32
    # 27 products per output (3 channels x 3 x 3), summed in float32 in either order
    np.testing.assert_allclose(_np(got), want.numpy(), **close("float32", n_ops=32, scale=32))


def test_integer_convolution_matches_torch():
    torch = pytest.importorskip("torch")
    x = np.arange(2 * 3 * 5 * 5).reshape(2, 3, 5, 5) % 7
    w = np.arange(4 * 3 * 2 * 2).reshape(4, 3, 2, 2) % 5
    got = F.conv2d(tg.tensor(x), tg.tensor(w), padding=1)
    want = torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), padding=1)
    assert got.dtype is tg.int64
    np.testing.assert_array_equal(_np(got), want.numpy())


def test_grad_fn_names_match_torch():
    torch = pytest.importorskip("torch")
    cases = [
        lambda lib, x: lib.nn.functional.conv2d(x, lib.ones(2, 3, 2, 2, dtype=x.dtype)),
        lambda lib, x: lib.nn.functional.conv_transpose2d(x, lib.ones(3, 2, 2, 2, dtype=x.dtype)),
        lambda lib, x: lib.nn.functional.conv1d(x[:, :, 0], lib.ones(2, 3, 2, dtype=x.dtype)),
        lambda lib, x: lib.nn.functional.pad(x, (1, 1)),
        lambda lib, x: lib.nn.functional.pad(x[0], (1, 1), mode="reflect"),
        lambda lib, x: lib.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"),
        lambda lib, x: lib.nn.functional.pad(x, (1, 1, 1, 1, 1, 1), mode="reflect"),
        lambda lib, x: lib.nn.functional.pad(x[0], (1, 1), mode="replicate"),
        lambda lib, x: lib.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate"),
        lambda lib, x: lib.nn.functional.pad(x, (1, 1, 1, 1, 1, 1), mode="replicate"),
        lambda lib, x: lib.nn.functional.pad(x, (1, 1, 1, 1), mode="circular"),
        lambda lib, x: lib.nn.functional.unfold(x, 2),
        lambda lib, x: lib.nn.functional.fold(x.reshape(2, 12, 5)[:, :, :4], (3, 3), 2),
    ]
    x = _rand(2, 3, 4, 5)
    for fn in cases:
        t = fn(torch, torch.tensor(x, requires_grad=True))
        g = fn(tg, tg.tensor(x, requires_grad=True))
        assert type(g.grad_fn).__name__ == type(t.grad_fn).__name__


def test_biased_convolution_is_one_node():
    """The convolution and its bias show as one ConvolutionBackward0 over input, weight and
    bias, as PyTorch's fused kernel."""
    x = tg.ones(1, 2, 4, 4, requires_grad=True)
    w, b = tg.ones(3, 2, 3, 3, requires_grad=True), tg.ones(3, requires_grad=True)
    y = F.conv2d(x, w, b)
    assert type(y.grad_fn).__name__ == "ConvolutionBackward0"
    assert [type(f).__name__ for f, _ in y.grad_fn.next_functions] == ["AccumulateGrad"] * 3


def test_second_derivative_of_conv_matches_torch():
    torch = pytest.importorskip("torch")
    x, w = _rand(1, 2, 5, 5), _rand(3, 2, 3, 3, seed=4)
    res = []
    for lib in (torch, tg):
        xt = lib.tensor(x, requires_grad=True)
        wt = lib.tensor(w, requires_grad=True)
        y = lib.nn.functional.conv2d(xt, wt, stride=2, padding=1) ** 2
        gx, gw = lib.autograd.grad(y.sum(), (xt, wt), create_graph=True)
        hx, hw = lib.autograd.grad((gx ** 2).sum() + (gw ** 3).sum(), (xt, wt))
        res.append([_np(t) for t in (gx, gw, hx, hw)])
    # two backward passes through the conv and the powers: four sums of <= 50 terms deep,
    # on values up to a few hundred (the cubes of the weight's gradient)
    for a, b in zip(*res):
        np.testing.assert_allclose(b, a, **close("float64", n_ops=4 * 64, scale=1000))


# errors, with PyTorch's wording ---------------------------------------------------------------

_ERRORS = [
    lambda lib: lib.nn.functional.conv2d(lib.ones(5, 5), lib.ones(4, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv1d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 2, 3, 3)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3), groups=2),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3,
                                                                        dtype=lib.float64)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3),
                                         padding="same", stride=2),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3),
                                         padding="foo"),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 2, 5), lib.ones(4, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3),
                                         bias=lib.ones(3)),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3), stride=0),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3),
                                         padding=-1),
    lambda lib: lib.nn.functional.conv2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3), groups=0),
    lambda lib: lib.nn.functional.conv1d(lib.ones(2, 3, 5), lib.ones(4, 3, 3), padding=(1, 1)),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(2, 3, 5, 5), lib.ones(4, 3, 3, 3)),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(2, 3, 5, 5), lib.ones(3, 4, 3, 3),
                                                   output_padding=1),
    lambda lib: lib.nn.functional.conv_transpose1d(lib.ones(2, 3, 5), lib.ones(3, 4, 3),
                                                   output_padding=1),
    lambda lib: lib.nn.functional.conv_transpose3d(lib.ones(1, 3, 2, 2, 2),
                                                   lib.ones(3, 4, 1, 1, 1), output_padding=1),
    lambda lib: lib.nn.functional.conv_transpose2d(lib.ones(5, 5), lib.ones(3, 4, 3, 3)),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 5, 5), (1, 1, 1)),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 5, 5), (1, 1), mode="reflect"),
    lambda lib: lib.nn.functional.pad(lib.ones(5), (1, 1), mode="replicate"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 5, 5), (1,) * 8, mode="circular"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 5, 5), (1,) * 10),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3, 5, 5), (1, 1), mode="foo"),
    lambda lib: lib.nn.functional.pad(lib.ones(2, 3), (1, 1), mode="reflect", value=1.0),
    lambda lib: lib.nn.functional.unfold(lib.ones(1, 2, 3, 5, 5), 2),
    lambda lib: lib.nn.functional.fold(lib.ones(2, 5, 4), (3, 3), 2),
    lambda lib: lib.nn.functional.fold(lib.ones(2, 4, 5), (3, 3), 2),
    lambda lib: lib.nn.functional.fold(lib.ones(1, 2, 12, 4), (3, 3), 2),
    lambda lib: lib.nn.Conv2d(3, 4, 3, groups=2),
    lambda lib: lib.nn.Conv2d(4, 3, 3, groups=2),
    lambda lib: lib.nn.Conv2d(3, 4, 3, padding="same", stride=2),
    lambda lib: lib.nn.ConvTranspose2d(3, 4, 3, padding_mode="reflect"),
    lambda lib: lib.nn.ConvTranspose1d(3, 4, 3, padding_mode="circular"),
    lambda lib: lib.nn.Conv2d(3, 4, 3)(lib.ones(2, 2, 5, 5)),
    lambda lib: lib.nn.Conv1d(3, 4, 3)(lib.ones(2, 3, 5, 5)),
    lambda lib: lib.nn.ConvTranspose2d(3, 4, 3, stride=2)(lib.ones(1, 3, 4, 4),
                                                          output_size=(12, 12)),
]


@pytest.mark.parametrize("fn", _ERRORS, ids=[f"error{i}" for i in range(len(_ERRORS))])
def test_errors_match_torch(fn):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as t_exc:
        fn(torch)
    with pytest.raises(type(t_exc.value)) as g_exc:
        fn(tg)
    assert str(t_exc.value).replace("torch.Size", "tracegrad.Size") in str(g_exc.value)


def test_reflect_pad_too_large_names_the_dimension():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as t_exc:
        torch.nn.functional.pad(torch.ones(2, 3, 4), (1, 1, 4, 0), mode="reflect")
    with pytest.raises(RuntimeError) as g_exc:
        F.pad(tg.ones(2, 3, 4), (1, 1, 4, 0), mode="reflect")
    want = str(t_exc.value).split(": ", 1)[1]     # PyTorch's text after "Argument #N"
    assert want in str(g_exc.value)


def test_error_names_the_user_line():
    with pytest.raises(RuntimeError) as exc:
        F.conv2d(tg.ones(2, 3, 5, 5), tg.ones(4, 2, 3, 3))
    assert "test_conv.py" in str(exc.value)


# layers -------------------------------------------------------------------------------------

def _copy_params(src, dst, torch):
    with torch.no_grad():
        for name, p in src.named_parameters():
            dict(dst.named_parameters())[name].copy_(torch.tensor(_np(p)))


_LAYERS = [
    lambda lib: lib.nn.Conv1d(3, 4, 3, stride=2, padding=1),
    lambda lib: lib.nn.Conv1d(4, 4, 2, padding="same", groups=4, bias=False),
    lambda lib: lib.nn.Conv1d(3, 2, 3, padding=2, padding_mode="circular"),
    lambda lib: lib.nn.Conv2d(3, 6, (3, 2), stride=(2, 1), padding=(1, 0), dilation=(1, 2),
                              groups=3),
    lambda lib: lib.nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"),
    lambda lib: lib.nn.Conv2d(3, 4, 4, padding="same", padding_mode="replicate"),
    lambda lib: lib.nn.Conv2d(3, 4, 2, padding="same", padding_mode="circular", dilation=2),
    lambda lib: lib.nn.Conv2d(3, 4, 3, padding="valid", bias=False),
    lambda lib: lib.nn.Conv3d(3, 2, 2, stride=(1, 2, 1), padding=1),
    lambda lib: lib.nn.Conv3d(3, 3, 3, padding=1, padding_mode="replicate", groups=3),
    lambda lib: lib.nn.ConvTranspose1d(3, 2, 3, stride=2, output_padding=1),
    lambda lib: lib.nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1),
    lambda lib: lib.nn.ConvTranspose2d(4, 2, (2, 3), stride=(2, 3), groups=2, bias=False,
                                       dilation=(2, 1)),
    lambda lib: lib.nn.ConvTranspose3d(3, 2, 2, stride=2),
]


def _layer_input(module):
    nd = len(module.kernel_size)
    return _rand(2, module.in_channels, *(6, 5, 4)[:nd], seed=9)


@pytest.mark.parametrize("make", _LAYERS, ids=[f"layer{i}" for i in range(len(_LAYERS))])
def test_layer_matches_torch_with_copied_weights(make):
    torch = pytest.importorskip("torch")
    g_mod = make(tg).double()
    t_mod = make(torch).double()
    _copy_params(g_mod, t_mod, torch)
    assert repr(g_mod) == repr(t_mod)
    assert list(g_mod.state_dict()) == list(t_mod.state_dict())
    for name, p in g_mod.named_parameters():
        assert tuple(p.shape) == tuple(dict(t_mod.named_parameters())[name].shape)
    x = _layer_input(g_mod)
    xt, xg = torch.tensor(x, requires_grad=True), tg.tensor(x, requires_grad=True)
    yt, yg = t_mod(xt), g_mod(xg)
    np.testing.assert_allclose(_np(yg), _np(yt), **F64)
    w = np.random.default_rng(5).standard_normal(tuple(yt.shape))
    (yt * torch.tensor(w)).sum().backward()
    (yg * tg.tensor(w)).sum().backward()
    np.testing.assert_allclose(_np(xg.grad), _np(xt.grad), **F64)
    for name, p in g_mod.named_parameters():
        np.testing.assert_allclose(_np(p.grad), _np(dict(t_mod.named_parameters())[name].grad),
                                   **F64, err_msg=name)


def test_layer_loads_torch_state_dict():
    torch = pytest.importorskip("torch")
    t_mod = torch.nn.Conv2d(3, 4, 3, padding=1).double()
    g_mod = nn.Conv2d(3, 4, 3, padding=1).double()
    g_mod.load_state_dict({k: tg.tensor(v.numpy()) for k, v in t_mod.state_dict().items()})
    x = _rand(1, 3, 5, 5)
    np.testing.assert_allclose(_np(g_mod(tg.tensor(x))), t_mod(torch.tensor(x)).detach().numpy(),
                               **F64)


def test_conv_transpose_output_size_matches_torch():
    torch = pytest.importorskip("torch")
    g_mod = nn.ConvTranspose2d(2, 3, 3, stride=3, padding=1).double()
    t_mod = torch.nn.ConvTranspose2d(2, 3, 3, stride=3, padding=1).double()
    _copy_params(g_mod, t_mod, torch)
    x = _rand(1, 2, 3, 4)
    for size in [(7, 10), (9, 12), (1, 3, 8, 11)]:
        got = g_mod(tg.tensor(x), output_size=size)
        want = t_mod(torch.tensor(x), output_size=size)
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(_np(got), want.detach().numpy(), **F64)


@pytest.mark.parametrize("cls,args", [
    ("Conv1d", (4, 6, 3)), ("Conv2d", (3, 8, (3, 2))), ("Conv2d", (6, 4, 5, 1, 0, 1, 2)),
    ("Conv3d", (2, 4, 2)), ("ConvTranspose1d", (4, 6, 3)), ("ConvTranspose2d", (6, 4, 3)),
])
def test_default_init_bounds(cls, args):
    """kaiming_uniform_(a=sqrt(5)) gives weights in +-1/sqrt(fan_in); the bias uses the same
    bound; both fill their range (the draw is uniform, not clipped)."""
    tg.manual_seed(0)
    m = getattr(nn, cls)(*args)
    fan_in = m.weight.shape[1] * math.prod(m.weight.shape[2:])
    bound = 1 / math.sqrt(fan_in)
    w, b = _np(m.weight), _np(m.bias)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert np.abs(w).max() > 0.8 * bound and w.std() > 0.45 * bound
    assert abs(w.mean()) < 0.2 * bound


def test_padding_mode_validation_lists_modes():
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(3, 4, 3, padding_mode="foo")
    with pytest.raises(ValueError, match="Invalid padding string 'full'"):
        nn.Conv2d(3, 4, 3, padding="full")


_PAD_LAYERS = [
    (lambda lib: lib.nn.ZeroPad1d((1, 2)), (2, 3, 4)),
    (lambda lib: lib.nn.ZeroPad2d(1), (2, 3, 4)),
    (lambda lib: lib.nn.ZeroPad3d((1, 0, 2, 1, 0, 1)), (1, 2, 2, 3, 2)),
    (lambda lib: lib.nn.ConstantPad1d(2, 3.5), (3, 4)),
    (lambda lib: lib.nn.ConstantPad2d((1, 0, 2, 1), -1.0), (1, 2, 3, 4)),
    (lambda lib: lib.nn.ConstantPad3d(1, 0.5), (1, 2, 2, 2)),
    (lambda lib: lib.nn.ReflectionPad1d(2), (2, 3, 4)),
    (lambda lib: lib.nn.ReflectionPad2d((1, 3, 2, 0)), (1, 2, 4, 5)),
    (lambda lib: lib.nn.ReflectionPad3d(1), (1, 2, 3, 3, 3)),
    (lambda lib: lib.nn.ReplicationPad1d((1, 3)), (2, 3, 4)),
    (lambda lib: lib.nn.ReplicationPad2d(2), (2, 3, 4)),
    (lambda lib: lib.nn.ReplicationPad3d((1, 2, 0, 1, 2, 0)), (1, 1, 2, 3, 2)),
    (lambda lib: lib.nn.CircularPad1d((2, 1)), (2, 3, 4)),
    (lambda lib: lib.nn.CircularPad2d(1), (1, 2, 3, 4)),
    (lambda lib: lib.nn.CircularPad3d((1, 1, 0, 2, 1, 0)), (1, 1, 2, 3, 2)),
    (lambda lib: lib.nn.Unfold((2, 3), dilation=1, padding=1, stride=2), (2, 3, 5, 6)),
    (lambda lib: lib.nn.Fold((4, 5), 2), (2, 12, 12)),
]


@pytest.mark.parametrize("make,shape", _PAD_LAYERS, ids=[f"pad_layer{i}" for i in
                                                          range(len(_PAD_LAYERS))])
def test_pad_and_fold_layers_match_torch(make, shape):
    torch = pytest.importorskip("torch")
    assert repr(make(tg)) == repr(make(torch))
    _assert_match(lambda lib, x: make(lib)(x), [_rand(*shape)])


# compiled against eager --------------------------------------------------------------------------

def test_compiled_conv_relu_matches_eager():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 7))
    w, b = rng.standard_normal((4, 3, 3, 3)), rng.standard_normal(4)
    w2 = rng.standard_normal((2, 4, 2, 2))

    def f(x, w, b, w2):
        h = F.relu(F.conv2d(x, w, b, stride=1, padding=1))
        h = F.pad(h, (1, 1, 1, 1), mode="reflect")
        return F.conv_transpose2d(h, w2.transpose(0, 1), stride=2).sum() + (h ** 2).mean()

    compiled = tg.compile(f)
    results = []
    for fn in (f, compiled, compiled):
        ts = [tg.tensor(a, requires_grad=True) for a in (x, w, b, w2)]
        out = fn(*ts)
        out.backward()
        results.append([_np(out)] + [_np(t.grad) for t in ts])
    # compiled code may fuse and reorder the same sums: the same bound as against PyTorch
    for got in results[1:]:
        for a, b_ in zip(got, results[0]):
            np.testing.assert_allclose(a, b_, **F64)
    assert compiled.stats["compiles"] == 1 and compiled.stats["cache_hits"] == 1


def test_compiled_module_matches_eager():
    tg.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1, padding_mode="circular"), nn.ReLU(),
                          nn.Conv2d(4, 2, 2, stride=2), nn.Flatten(), nn.Linear(2 * 3 * 3, 1))
    x = tg.tensor(_rand(3, 2, 6, 6)).float()
    want = model(x)
    want.sum().backward()
    grads = [_np(p.grad).copy() for p in model.parameters()]
    model.zero_grad()
    got = tg.compile(model)(x)
    got.sum().backward()
    # float32 sums of <= 108 products (a weight's gradient over 3 x 6 x 6 positions), which
    # the compiled code may group differently
    tol = close("float32", n_ops=128, scale=4)
    np.testing.assert_allclose(_np(got), _np(want), **tol)
    for p, g in zip(model.parameters(), grads):
        np.testing.assert_allclose(_np(p.grad), g, **tol)


def test_profiler_names_the_functional_ops():
    x = tg.randn(1, 2, 5, 5, requires_grad=True)
    with tg.profiler.profile() as prof:
        F.conv2d(F.pad(x, (1, 1, 1, 1), mode="replicate"), tg.ones(3, 2, 3, 3)).sum().backward()
    names = {e.key for e in prof.key_averages()}
    assert {"conv2d", "pad", "ConvolutionBackward0", "ReplicationPad2DBackward0"} <= names


def test_grid_is_wide():
    """The grids above cover the cases the primitives special-case."""
    assert {c[0] for c in _CONV_GRID} == {1, 2, 3}
    assert any(c[-1] == c[2] and c[2] > 1 for c in _CONV_GRID)              # depthwise
    assert any(c[7] == "same" and any(k % 2 == 0 for k in np.atleast_1d(c[5]))
               for c in _CONV_GRID)
    assert {m for m, _, _ in _PAD_GRID} == {"constant", "reflect", "replicate", "circular"}
    assert any(any(np.atleast_1d(c[6]) > np.atleast_1d(c[5])) for c in _CONV_GRID)  # stride > k
    assert any(any(np.atleast_1d(c[8]) > 0) for c in _CONVT_GRID)           # output_padding


@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("pad", [(-1, 1), (1, -2), (-1, 2), (2, -1), (-1, 1, 1, -1)])
def test_negative_padding_crops_as_torch(mode, pad):
    torch = pytest.importorskip("torch")
    x = np.arange(20.0).reshape(1, 1, 4, 5)
    if len(pad) == 2:
        x = x[0]
    got = tg.nn.functional.pad(tg.tensor(x), pad, mode=mode)
    want = torch.nn.functional.pad(torch.tensor(x), pad, mode=mode)
    np.testing.assert_array_equal(got.numpy(), want.numpy())
