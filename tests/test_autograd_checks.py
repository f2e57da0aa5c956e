"""gradcheck/gradgradcheck, anomaly mode, and autograd.functional against PyTorch."""
import importlib
import warnings

import numpy as np
import pytest

import tracegrad as tg

from tolerances import close


def _bad_square(lib):
    class BadSquare(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x             # wrong: should be 2 * x
    return BadSquare


# gradcheck -------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [
    lambda x, y: (x * y).sin().sum(),
    lambda x, y: x.exp() / (y * y + 1),
    lambda x, y: (x @ y.t()).tanh(),
    lambda x, y: (x.sigmoid() * y, x - y),
    lambda x, y: (x ** 3 + y.abs() + 0.5).log(),
])
def test_gradcheck_and_gradgradcheck_pass(fn):
    g = tg.Generator().manual_seed(0) if hasattr(tg, "Generator") else None
    x = tg.randn(2, 3, dtype=tg.float64, generator=g, requires_grad=True)
    y = tg.randn(2, 3, dtype=tg.float64, generator=g, requires_grad=True)
    assert tg.autograd.gradcheck(fn, (x, y))
    assert tg.autograd.gradgradcheck(fn, (x, y))


def test_gradcheck_mismatch_names_input_output_and_jacobians():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        err = importlib.import_module(lib.__name__ + ".autograd.gradcheck").GradcheckError
        with pytest.raises(err) as info:
            lib.autograd.gradcheck(_bad_square(lib).apply, (x,))
        assert isinstance(info.value, RuntimeError)
        msgs.append(str(info.value))
    msg = msgs[0]
    assert "Jacobian mismatch for output 0 with respect to input 0" in msg
    assert "numerical" in msg and "analytical" in msg
    assert msg.replace("tracegrad", "torch") == msgs[1]


def test_gradcheck_names_the_right_input():
    def f(a, b):
        return a * 2 + _bad_square(tg).apply(b)
    a = tg.tensor([1.0], dtype=tg.float64, requires_grad=True)
    b = tg.tensor([1.0, 3.0], dtype=tg.float64, requires_grad=True)
    with pytest.raises(tg.autograd.GradcheckError, match="output 0 with respect to input 1"):
        tg.autograd.gradcheck(f, (a, b))
    assert tg.autograd.gradcheck(f, (a, b), raise_exception=False) is False


def test_gradgradcheck_catches_wrong_second_derivative():
    class BadCube(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            # right value, wrong derivative: x.detach() hides x from the second order
            return g * 3 * x * x.detach()

    x = tg.tensor([0.5, 1.5], dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(BadCube.apply, (x,))
    with pytest.raises(tg.autograd.GradcheckError, match="Jacobian mismatch"):
        tg.autograd.gradgradcheck(BadCube.apply, (x,))


def test_gradcheck_output_without_grad_must_be_constant_vs_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64, requires_grad=True)
        err = importlib.import_module(lib.__name__ + ".autograd.gradcheck").GradcheckError
        with pytest.raises(err, match="Numerical gradient for function expected to be zero"):
            lib.autograd.gradcheck(lambda t: t.detach() * 2, (x,))
        assert lib.autograd.gradcheck(lambda t: (t * 2, lib.ones(2, dtype=lib.float64)), (x,))


def test_gradcheck_non_tensor_and_constant_args():
    x = tg.tensor([1.0, 2.0], dtype=tg.float64, requires_grad=True)
    c = tg.tensor([3.0, -1.0], dtype=tg.float64)
    assert tg.autograd.gradcheck(lambda t, k, u: (t * k * u).exp(), (x, 0.5, c))
    assert tg.autograd.gradgradcheck(lambda t, k, u: (t * k * u).exp(), (x, 0.5, c))


def test_gradcheck_non_contiguous_and_empty_inputs():
    x = tg.randn(3, 4, dtype=tg.float64).t().requires_grad_()
    y = tg.randn(4, 6, dtype=tg.float64)[:, ::2].requires_grad_()
    assert not x.is_contiguous() and not y.is_contiguous()
    assert tg.autograd.gradcheck(lambda a, b: (a * b).sin(), (x, y))
    assert tg.autograd.gradgradcheck(lambda a, b: (a * b).sin(), (x, y))
    e = tg.ones(0, 3, dtype=tg.float64, requires_grad=True)
    assert tg.autograd.gradcheck(lambda a, b: tg.cat([a, b]).exp(), (e, y))


def test_gradcheck_refuses_overlapping_inputs_like_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.ones(1, dtype=lib.float64).expand(3).requires_grad_()
        with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0. "
                                               "gradcheck only supports inputs that are "
                                               "non-overlapping"):
            lib.autograd.gradcheck(lambda t: t * 2, (x,))


def test_gradcheck_needs_an_input_requiring_grad():
    with pytest.raises(ValueError, match="at least one input tensor to require gradient"):
        tg.autograd.gradcheck(lambda x: x * 2, (tg.ones(2, dtype=tg.float64),))


# anomaly mode -------------------------------------------------------------------------

def _anomaly_enabled(lib):
    # PyTorch has it as torch.is_anomaly_enabled; tracegrad as tracegrad.autograd.is_anomaly_enabled
    if lib.__name__ == "torch":
        return lib.is_anomaly_enabled()
    return lib.autograd.is_anomaly_enabled()


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_detect_anomaly_nan_names_node_vs_torch():
    torch = pytest.importorskip("torch")
    msgs = []
    for lib in (tg, torch):
        x = lib.tensor([0.0, 1.0], requires_grad=True)
        with pytest.warns(UserWarning):
            ctx = lib.autograd.detect_anomaly()
        with ctx:
            assert _anomaly_enabled(lib)
            y = (x * 0).sqrt() * 0           # sqrt'(0) = inf, times 0: nan
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with pytest.raises(RuntimeError) as info:
                    y.sum().backward()
        assert not _anomaly_enabled(lib)
        msgs.append(str(info.value))
    assert msgs[0] == "Function 'SqrtBackward0' returned nan values in its 0th output."
    assert msgs[0] == msgs[1]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_without_anomaly_nan_passes_silently():
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    ((x * 0).sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_set_detect_anomaly_function_and_context():
    x = tg.tensor([0.0], requires_grad=True)
    tg.autograd.set_detect_anomaly(True)
    try:
        assert tg.autograd.is_anomaly_enabled()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(RuntimeError, match=r"Function 'LogBackward0' returned nan values "
                                                   r"in its 0th output\."):
                ((x * 0).log() * 0).sum().backward()
    finally:
        tg.autograd.set_detect_anomaly(False)
    assert not tg.autograd.is_anomaly_enabled()
    with tg.autograd.set_detect_anomaly(True):
        assert tg.autograd.is_anomaly_enabled()
    assert not tg.autograd.is_anomaly_enabled()


def test_anomaly_error_in_custom_backward_warns_with_forward_traceback():
    class Boom(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1

        @staticmethod
        def backward(ctx, g):
            raise ValueError("boom")

    x = tg.tensor([1.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = tg.autograd.detect_anomaly()
    with ctx:
        y = Boom.apply(x)   # the user's forward line
        with pytest.warns(UserWarning) as rec:
            with pytest.raises(ValueError, match="boom"):
                y.sum().backward()
    texts = [str(w.message) for w in rec]
    hit = [t for t in texts if "Error detected in BoomBackward" in t]
    assert hit, texts
    assert "Traceback of forward call that caused the error" in hit[0]
    assert "y = Boom.apply(x)   # the user's forward line" in hit[0]
    assert "test_autograd_checks.py" in hit[0]


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_anomaly_nan_also_reports_forward_traceback():
    x = tg.tensor([0.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = tg.autograd.detect_anomaly()
    with ctx:
        y = (x * 0).sqrt() * 0   # nan-producing line
        with pytest.warns(UserWarning, match="Error detected in SqrtBackward0") as rec:
            with pytest.raises(RuntimeError, match="returned nan values"):
                y.sum().backward()
    assert any("nan-producing line" in str(w.message) for w in rec)


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_anomaly_check_nan_false():
    x = tg.tensor([0.0], requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ctx = tg.autograd.detect_anomaly(check_nan=False)
    with ctx:
        ((x * 0).sqrt() * 0).sum().backward()
    assert np.isnan(x.grad.item())


# functional -------------------------------------------------------------------------

def _pair(lib, data):
    return lib.tensor(data, dtype=lib.float64)


def _fns(lib):
    return {
        "single": (lambda x: (x ** 2).sin() * x.exp(), ([0.3, -0.6, 1.1],)),
        "matrix": (lambda x: x @ x.t(), ([[0.3, -0.6], [1.1, 0.5]],)),
        "tuple_in": (lambda x, y: x * y.sum() + y.exp().sum(), ([0.3, 1.2], [0.5, -1.0, 2.0])),
        "tuple_out": (lambda x: (x.sin(), (x * x).sum()), ([0.3, -0.7],)),
        "tuple_both": (lambda x, y: (x * y, x.exp() - y), ([0.3, 1.2], [0.5, -1.0])),
    }


def _to_np(r):
    if isinstance(r, tuple):
        return tuple(_to_np(e) for e in r)
    return r.detach().numpy()


def _close(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for u, v in zip(a, b):
            _close(u, v)
    else:
        assert a.shape == b.shape
        # the functions below, with jacobians, hessians and their products: a few dozen
        # float64 operations (sin, exp, products, sums of at most 3), values up to ~10
        np.testing.assert_allclose(a, b, **close("float64", n_ops=32, scale=10))


def _call(lib, op, name, extra=None, create_graph=False):
    fn, data = _fns(lib)[name]
    ins = tuple(_pair(lib, d) for d in data)
    ins = ins if len(ins) > 1 or name == "tuple_both" else ins[0]
    args = (fn, ins) if extra is None else (fn, ins, extra(lib, ins))
    return getattr(lib.autograd.functional, op)(*args, create_graph=create_graph)


@pytest.mark.parametrize("name", ["single", "matrix", "tuple_in", "tuple_out", "tuple_both"])
def test_jacobian_vs_torch(name):
    torch = pytest.importorskip("torch")
    _close(_to_np(_call(tg, "jacobian", name)), _to_np(_call(torch, "jacobian", name)))


def _like_outputs(lib, name):
    fn, data = _fns(lib)[name]
    ins = tuple(_pair(lib, d) for d in data)
    outs = fn(*ins)
    if isinstance(outs, tuple):
        return tuple(lib.ones_like(o) * (k + 0.5) for k, o in enumerate(outs))
    return lib.ones_like(outs) * 0.5


def _like_inputs(lib, ins):
    if isinstance(ins, tuple):
        return tuple(lib.ones_like(i) * (k + 1.5) for k, i in enumerate(ins))
    return lib.ones_like(ins) * 1.5


@pytest.mark.parametrize("name", ["single", "tuple_in", "tuple_out", "tuple_both"])
def test_vjp_vs_torch(name):
    torch = pytest.importorskip("torch")
    res = [_to_np(_call(lib, "vjp", name, lambda lib, ins: _like_outputs(lib, name)))
           for lib in (tg, torch)]
    _close(*res)


@pytest.mark.parametrize("name", ["single", "tuple_in", "tuple_out", "tuple_both"])
def test_jvp_vs_torch(name):
    torch = pytest.importorskip("torch")
    res = [_to_np(_call(lib, "jvp", name, _like_inputs)) for lib in (tg, torch)]
    _close(*res)


def _scalar_fns(lib):
    return {
        "single": (lambda x: (x ** 3).sum() + (x[0] * x[1]).sin(), ([0.3, -0.6],)),
        "tuple": (lambda x, y: (x.exp().sum() * y).sum() + (y ** 2).sum() * x[0],
                  ([0.3, 1.2], [0.5, -1.0, 2.0])),
    }


@pytest.mark.parametrize("op", ["hessian", "vhp", "hvp"])
@pytest.mark.parametrize("name", ["single", "tuple"])
def test_hessian_vhp_hvp_vs_torch(op, name):
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        fn, data = _scalar_fns(lib)[name]
        ins = tuple(_pair(lib, d) for d in data)
        ins = ins if len(ins) > 1 else ins[0]
        F = lib.autograd.functional
        if op == "hessian":
            res.append(_to_np(F.hessian(fn, ins)))
        else:
            res.append(_to_np(getattr(F, op)(fn, ins, _like_inputs(lib, ins))))
    _close(*res)


def test_functional_create_graph_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        x = lib.tensor([0.3, -0.6, 1.1], dtype=lib.float64, requires_grad=True)
        F = lib.autograd.functional
        j = F.jacobian(lambda t: t.sin() * t, x, create_graph=True)
        assert j.requires_grad
        (gj,) = lib.autograd.grad(j.sum(), x)
        h = F.hessian(lambda t: (t ** 3).sum(), x, create_graph=True)
        (gh,) = lib.autograd.grad(h.sum(), x)
        _, v = F.vjp(lambda t: t.exp(), x, lib.ones_like(x), create_graph=True)
        (gv,) = lib.autograd.grad(v.sum(), x)
        _, u = F.jvp(lambda t: t ** 2, x, lib.ones_like(x), create_graph=True)
        (gu,) = lib.autograd.grad(u.sum(), x)
        res.append(tuple(g.numpy().copy() for g in (gj, gh, gv, gu)))
        # without create_graph the results are detached
        assert not F.jacobian(lambda t: t.sin(), x).requires_grad
        assert not F.vjp(lambda t: t.exp(), x, lib.ones_like(x))[1].requires_grad
    _close(*res)


def test_functional_argument_errors_match_torch():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        F = lib.autograd.functional
        x2 = lib.ones(2, dtype=lib.float64)
        v3 = lib.ones(3, dtype=lib.float64)
        for call in (lambda: F.vjp(lambda x: x * 2, x2, v3),
                     lambda: F.jvp(lambda x: x * 2, x2, v3),
                     lambda: F.vhp(lambda x: (x * x).sum(), x2, v3),
                     lambda: F.hvp(lambda x: (x * x).sum(), x2, v3)):
            with pytest.raises(RuntimeError, match=r"v has invalid size: should be \S+\(\[2\]\) "
                                                   r"but got \S+\(\[3\]\)\."):
                call()
        with pytest.raises(RuntimeError, match="The Tensor returned by the function given to "
                                               "hessian should contain a single element"):
            F.hessian(lambda x: x * x, x2)
        with pytest.raises(RuntimeError, match="The vector v can only be None if the input to the "
                                               "user-provided function is a single Tensor with a "
                                               "single element"):
            F.hvp(lambda x: (x * x).sum(), x2)
        with pytest.raises(RuntimeError, match="The vector v can only be None if the user-provided "
                                               "function returns a single Tensor with a single "
                                               "element"):
            F.vjp(lambda x: x * 2, x2)


def test_functional_v_none_for_single_element_vs_torch():
    torch = pytest.importorskip("torch")
    res = []
    for lib in (tg, torch):
        F = lib.autograd.functional
        x = lib.tensor([1.5], dtype=lib.float64)
        res.append(_to_np((F.vjp(lambda t: (t ** 3).sum(), x)[1],
                           F.jvp(lambda t: t ** 3, x)[1],
                           F.hvp(lambda t: (t ** 3).sum(), x)[1],
                           F.vhp(lambda t: (t ** 3).sum(), x))))
    _close(*res)


def test_jacobian_strict_independent_raises():
    torch = pytest.importorskip("torch")
    for lib in (tg, torch):
        x = lib.tensor([1.0, 2.0], dtype=lib.float64)
        y = lib.tensor([1.0], dtype=lib.float64)
        with pytest.raises(RuntimeError, match="is independent of input 1"):
            lib.autograd.functional.jacobian(lambda a, b: a * 2, (x, y), strict=True)
        j = lib.autograd.functional.jacobian(lambda a, b: a * 2, (x, y))
        assert float(j[1].abs().sum()) == 0.0 and tuple(j[1].shape) == (2, 1)
