"""tracegrad.compile end to end: calling conventions, autograd on compiled outputs,
captured tensors, in-place writes, random ops, guards and retracing, inspection."""
import os
import warnings

import numpy as np
import pytest

import tracegrad as tg

# every test here runs on the NumPy tier and again on the C tier (conftest's backend)
pytestmark = pytest.mark.usefixtures("backend")


def _close(a, b, rtol=1e-6, atol=1e-7):
    np.testing.assert_allclose(np.asarray(a.detach()._data if isinstance(a, tg.Tensor) else a),
                               np.asarray(b.detach()._data if isinstance(b, tg.Tensor) else b),
                               rtol=rtol, atol=atol)


# calling conventions ------------------------------------------------------------------------

def test_decorator_with_and_without_arguments():
    @tg.compile
    def f(x):
        return x * 2

    @tg.compile(backend="numpy")
    def g(x):
        return x + 1

    x = tg.arange(3.0)
    _close(f(x), [0, 2, 4])
    _close(g(x), [1, 2, 3])
    assert f.__name__ == "f" and g.__wrapped__(x).tolist() == [1.0, 2.0, 3.0]


def test_bad_backend_is_refused():
    with pytest.raises(ValueError, match="backend"):
        tg.compile(lambda x: x, backend="tpu")


def test_structures_in_and_out():
    @tg.compile
    def f(pair, table, scale, flag=None):
        a, b = pair
        out = {"sum": a + b * scale, "parts": [a * 2, (b - 1, None)], "n": 3}
        if flag is None:
            out["flag"] = "none"
        return out

    x, y = tg.ones(2), tg.arange(2.0)
    out = f((x, y), {"w": x}, 2.0)
    _close(out["sum"], [1, 3])
    _close(out["parts"][0], [2, 2])
    _close(out["parts"][1][0], [-1, 0])
    assert out["parts"][1][1] is None and out["n"] == 3 and out["flag"] == "none"
    out2 = f((x, y), {"w": x}, 2.0)
    assert f.stats["cache_hits"] == 1 and isinstance(out2["parts"], list)


def test_scalar_arguments_are_guarded():
    @tg.compile
    def f(x, k):
        return x * k

    x = tg.ones(2)
    _close(f(x, 2.0), [2, 2])
    _close(f(x, 3.0), [3, 3])
    assert f.stats["compiles"] == 2
    assert "3.0" in f.stats["retrace_reasons"][0]


def test_an_input_returned_unchanged_is_the_same_object():
    @tg.compile
    def f(x):
        return x, x + 1

    x = tg.ones(2, requires_grad=True)
    a, b = f(x)
    assert a is x
    b.sum().backward()
    _close(x.grad, [1, 1])


def test_lambda_without_source_is_traced_as_it_is():
    f = tg.compile(eval("lambda x: (x * 3).sum()"))
    assert f(tg.ones(4)).item() == 12.0
    assert "def forward(" in f.code


# autograd on compiled outputs --------------------------------------------------------------

def _mlp_params(seed=0):
    g = np.random.default_rng(seed)
    return [tg.tensor(g.standard_normal(s) * 0.5, dtype=tg.float32, requires_grad=True)
            for s in ((4, 8), (8,), (8, 3), (3,))]


def _mlp(x, W1, b1, W2, b2):
    hidden = tg.tanh(x @ W1 + b1)
    return hidden @ W2 + b2


def test_backward_accumulates_into_leaves_like_eager():
    params = _mlp_params()
    x = tg.tensor(np.random.default_rng(1).standard_normal((5, 4)), dtype=tg.float32)
    f = tg.compile(_mlp)
    for p in params:
        p.grad = None
    f(x, *params).sum().backward()
    f(x, *params).sum().backward()          # accumulates
    got = [p.grad.clone() for p in params]
    for p in params:
        p.grad = None
    _mlp(x, *params).sum().backward()
    _mlp(x, *params).sum().backward()
    for a, p in zip(got, params):       # the C tier's tanhf and NumPy's differ by an ulp
        _close(a, p.grad, rtol=1e-5, atol=1e-6)


def test_autograd_grad_and_hooks_on_outputs():
    f = tg.compile(lambda x: (x.exp(), x * 2))
    x = tg.tensor([0.0, 1.0], requires_grad=True)
    a, b = f(x)
    seen = []
    a.register_hook(lambda g: seen.append(g.clone()) or g * 10)
    (gx,) = tg.autograd.grad(a.sum() + b.sum(), x)
    _close(gx, 10 * np.exp([0.0, 1.0]) + 2)
    _close(seen[0], [1, 1])


def test_saved_tensors_hooks_see_a_compiled_functions_residuals():
    # as PyTorch's compiled functions save theirs: packed at the call, unpacked at backward,
    # and what unpack returns is what the backward uses
    def f(x, w):
        return (x @ w).tanh().sum()
    c = tg.compile(f)
    x = tg.ones(3, 4)
    grads = {}
    for name, fn in (("eager", f), ("compiled", c), ("compiled again", c)):
        for zeroed in (False, True):
            packed, unpacked = [], []

            def pack_hook(t):
                packed.append(t.shape)
                return t.detach().numpy().copy()      # held by the hook, not the node

            def unpack_hook(p, zeroed=zeroed):
                unpacked.append(p.shape)
                return tg.tensor(p) * (0 if zeroed else 1)
            w = tg.full((4, 2), 0.1, requires_grad=True)
            with tg.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
                y = fn(x, w)
            assert packed and not unpacked
            y.backward(retain_graph=True)
            n = len(unpacked)
            assert n > 0
            y.backward()
            assert len(unpacked) == 2 * n
            grads[name, zeroed] = w.grad.numpy() / 2
    for name, zeroed in grads:
        _close(grads[name, zeroed], grads["eager", zeroed], rtol=1e-5, atol=1e-6)
        assert (np.abs(grads[name, zeroed]).max() > 0) == (not zeroed)
    packed = []
    with tg.autograd.graph.saved_tensors_hooks(lambda t: packed.append(1) or t, lambda t: t):
        pass
    c(x, tg.full((4, 2), 0.1, requires_grad=True)).backward()     # outside the block: no hook
    assert packed == []


def test_retain_graph_and_the_second_backward_error():
    f = tg.compile(lambda x: (x * x).sum())
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = f(x)
    y.backward(retain_graph=True)
    y.backward()
    _close(x.grad, [4, 8])
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_double_backward_through_a_compiled_function():
    @tg.compile
    def f(x, w):
        return (tg.tanh(x * w) ** 2).sum()

    x = tg.tensor([0.3, -0.2], requires_grad=True)
    w = tg.tensor([1.5, 0.5], requires_grad=True)
    (gx,) = tg.autograd.grad(f(x, w), x, create_graph=True)
    (gw,) = tg.autograd.grad(gx.sum(), w)
    xe, we = x.detach().requires_grad_(), w.detach().requires_grad_()
    (gxe,) = tg.autograd.grad((tg.tanh(xe * we) ** 2).sum(), xe, create_graph=True)
    (gwe,) = tg.autograd.grad(gxe.sum(), we)
    _close(gx, gxe)
    _close(gw, gwe, rtol=1e-5)


def test_in_place_change_of_a_saved_input_is_caught():
    f = tg.compile(lambda x, w: (x * w).sum())
    x = tg.ones(2)
    w = tg.ones(2, requires_grad=True)
    y = f(x, w)
    with tg.no_grad():
        x.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_no_grad_runs_a_forward_only_variant():
    f = tg.compile(lambda x, w: (x @ w).relu().sum())
    x, w = tg.randn(3, 4), tg.randn(4, 2, requires_grad=True)
    with tg.no_grad():
        y = f(x, w)
    assert not y.requires_grad and y.grad_fn is None
    assert "def backward" not in f.code
    y2 = f(x, w)
    assert y2.requires_grad and "def backward" in f.code
    assert f.stats["compiles"] == 2 and "grad mode" in f.stats["retrace_reasons"][0]
    with tg.inference_mode():
        y3 = f(x, w)
    assert y3.is_inference()
    _close(y, y3)


# captured tensors, in-place writes and random ops ------------------------------------------------

def test_training_loop_matches_eager_step_for_step():
    """A small MLP trained with SGD (in-place updates of captured parameters)."""
    results = []
    for compiled in (False, True):
        params = _mlp_params(1)
        W1, b1, W2, b2 = params

        def loss_fn(x, y):
            logits = _mlp(x, W1, b1, W2, b2)
            return ((logits - y) ** 2).mean()
        step = tg.compile(loss_fn) if compiled else loss_fn
        g = np.random.default_rng(5)
        losses = []
        for _ in range(6):
            x = tg.tensor(g.standard_normal((5, 4)), dtype=tg.float32)
            y = tg.tensor(g.standard_normal((5, 3)), dtype=tg.float32)
            loss = step(x, y)
            for p in params:
                p.grad = None
            loss.backward()
            with tg.no_grad():
                for p in params:
                    p.sub_(0.1 * p.grad)
            losses.append(loss.item())
        results.append((losses, [p.detach().clone() for p in params]))
        if compiled:
            assert step.stats["compiles"] == 1 and step.stats["cache_hits"] == 5
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5)
    for a, b in zip(results[0][1], results[1][1]):
        _close(a, b, rtol=1e-5, atol=1e-6)


def test_writes_to_inputs_and_captured_tensors_are_written_back():
    running = tg.zeros(3)

    @tg.compile
    def f(x, acc):
        with tg.no_grad():
            running.mul_(0.5).add_(x.mean(0))
        acc.add_(1)
        return x.sum()

    x = tg.ones(4, 3)
    acc = tg.zeros(2)
    v0 = acc._version
    f(x, acc)
    _close(running, [1, 1, 1])
    _close(acc, [1, 1])
    assert acc._version > v0
    f(x, acc)
    _close(running, [1.5, 1.5, 1.5])
    _close(acc, [2, 2])


def test_write_through_a_view_of_an_input():
    @tg.compile
    def f(x):
        x[0] = x[1] * 2
        row = x[2]
        row.mul_(10)
        return x.sum()

    x = tg.arange(9.0).reshape(3, 3)
    xe = x.clone()
    got = f(x)
    xe[0] = xe[1] * 2
    xe[2].mul_(10)
    _close(x, xe)
    _close(got, xe.sum())


def test_random_ops_draw_fresh_numbers_each_call_and_match_eager():
    def f(x):
        mask = tg.rand(x.shape) > 0.5
        return x * mask
    cf = tg.compile(f)
    x = tg.ones(1000)
    tg.manual_seed(3)
    a1, a2 = cf(x), cf(x)
    tg.manual_seed(3)
    e1, e2 = f(x), f(x)
    _close(a1, e1)
    _close(a2, e2)
    assert not np.array_equal(a1._data, a2._data)


def test_parameters_replaced_by_new_objects_retrace():
    w = tg.ones(2)
    holder = {"w": w}

    def f(x):
        return x * W_GLOBAL

    global W_GLOBAL
    W_GLOBAL = holder["w"]
    cf = tg.compile(f)
    _close(cf(tg.ones(2)), [1, 1])
    W_GLOBAL = tg.full((2,), 3.0)
    _close(cf(tg.ones(2)), [3, 3])
    assert "replaced" in cf.stats["retrace_reasons"][0]


# guards and retracing ---------------------------------------------------------------------------

def test_retrace_on_a_new_shape_names_it():
    f = tg.compile(lambda x: x.sum())
    f(tg.ones(2, 3))
    f(tg.ones(4, 3))
    assert f.stats["compiles"] == 2
    assert f.stats["retrace_reasons"] == ["shape of x changed: [2, 3] -> [4, 3]; sizes changed "
                                          "(dim 0 of x): traced with symbolic sizes from now on"]


def test_data_dependent_branch_both_ways():
    @tg.compile
    def f(x):
        if x.sum() > 0:
            return x * 2
        return x - 1

    _close(f(tg.ones(2)), [2, 2])
    _close(f(-tg.ones(2)), [-2, -2])
    _close(f(tg.ones(2)), [2, 2])
    _close(f(-tg.ones(2)), [-2, -2])
    assert f.stats["compiles"] == 2 and f.stats["cache_hits"] == 2
    reason = f.stats["retrace_reasons"][0]
    assert "guard failed" in reason and "test_compile.py" in reason


def test_item_is_a_guard():
    @tg.compile
    def f(x, n):
        return x * int(n.item())

    _close(f(tg.ones(2), tg.tensor(3)), [3, 3])
    _close(f(tg.ones(2), tg.tensor(4)), [4, 4])
    assert f.stats["compiles"] == 2


def test_too_many_variants_fall_back_to_eager_with_one_warning():
    @tg.compile(max_variants=3)
    def f(x):
        return x * x.sum().item()

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(6):
            _close(f(tg.full((2,), float(k))), [2.0 * k * k] * 2)
    msgs = [str(w.message) for w in caught if "eagerly" in str(w.message)]
    assert len(msgs) == 1 and "test_compile.py" in msgs[0]
    assert f.stats["compiles"] == 3 and f.stats["fallbacks"] == 3


def test_recompile_log(capsys, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_LOG", "recompiles")
    f = tg.compile(lambda x: x + 1)
    f(tg.ones(1))
    f(tg.ones(2))
    assert "retracing" in capsys.readouterr().err


def test_explain_in_words():
    f = tg.compile(lambda x, w: (x @ w).sum())
    f(tg.ones(2, 3), tg.ones(3, 1, requires_grad=True))
    f(tg.ones(5, 3), tg.ones(3, 1, requires_grad=True))
    text = f.explain()
    assert "compiled 2 time(s)" in text and "variant 1" in text and "saves" in text
    assert "shape of x changed" in text


# errors --------------------------------------------------------------------------------------------

def test_a_shape_error_names_the_op_and_the_users_line_and_the_next_call_works():
    @tg.compile
    def f(x, w):
        return x @ w

    with pytest.raises(RuntimeError) as info:
        f(tg.ones(2, 3), tg.ones(4, 5))
    msg = str(info.value)
    assert "matmul" in msg and "test_compile.py" in msg and "return x @ w" in msg
    assert f.stats["compiles"] == 0
    _close(f(tg.ones(2, 3), tg.ones(3, 1)), [[3], [3]])


def test_unsupported_construct_is_named():
    @tg.compile
    def f(x):
        return tg.tensor(x.numpy() * 2)

    with pytest.raises(RuntimeError) as info:
        f(tg.ones(2))
    assert "numpy()" in str(info.value) and "test_compile.py" in str(info.value)


def test_a_call_that_raises_leaves_the_users_tensors_as_eager_leaves_them():
    # the trace run is an eager run: the write before the error stays, as it does eagerly
    def step(x, acc):
        acc.add_(1)
        return x @ x        # a (2, 3) @ (2, 3): the user's own error

    eager_acc, compiled_acc = tg.zeros(2), tg.zeros(2)
    with pytest.raises(RuntimeError) as eager_error:
        step(tg.ones(2, 3), eager_acc)
    with pytest.raises(RuntimeError) as compiled_error:
        tg.compile(step)(tg.ones(2, 3), compiled_acc)
    _close(compiled_acc, eager_acc)
    _close(compiled_acc, [1, 1])
    assert str(eager_error.value).split("(at")[0] == str(compiled_error.value).split("(at")[0]


# inspection --------------------------------------------------------------------------------------

def _body(compiled):
    return compiled.code.split("import numpy as np\n", 1)[1].strip()


def test_generated_code_is_pinned_for_a_small_program(monkeypatch):
    monkeypatch.setenv("TRACEGRAD_FUSE", "0")       # a statement per node (fused: test_fuse.py)

    @tg.compile
    def f(x, w):
        hidden = tg.tanh(x * w)
        return hidden.sum()

    f(tg.ones(3), tg.ones(3, requires_grad=True))
    line = f.__wrapped__.__code__.co_firstlineno
    assert f.code.startswith(f'"""Generated by tracegrad.compile from '
                             f'test_generated_code_is_pinned_for_a_small_program.<locals>.f '
                             f'(test_compile.py:{line}), variant 0.')
    assert _body(f) == f'''def forward(x, w):
    # test_compile.py:{line + 2}: hidden = tg.tanh(x * w)
    t0 = x * w
    hidden = np.tanh(t0)
    del t0
    # test_compile.py:{line + 3}: return hidden.sum()
    out = np.sum(hidden, axis=(0,), keepdims=False)
    del hidden
    return (out, x, w)


def backward(x, w, d_out):
    # test_compile.py:{line + 3}: return hidden.sum()
    t1 = d_out.reshape((1,))
    # test_compile.py:{line + 2}: hidden = tg.tanh(x * w)
    t0 = x * w
    hidden = np.tanh(t0)
    del t0
    t2 = t1 * (1 - hidden * hidden)
    del hidden, t1
    d_w = t2 * x
    del t2
    return (d_w,)'''


def test_generated_code_and_ir_pinned_for_a_branchy_program(monkeypatch):
    monkeypatch.setenv("TRACEGRAD_FUSE", "0")

    @tg.compile
    def f(x):
        total = x.sum()
        if total > 0:
            x = x * 2
        return x

    f(tg.ones(2))
    line = f.__wrapped__.__code__.co_firstlineno
    assert _body(f) == f'''from tracegrad.codegen.support import GuardFailure


def forward(x):
    # test_compile.py:{line + 2}: total = x.sum()
    total = np.sum(x, axis=(0,), keepdims=False)
    # test_compile.py:{line + 3}: if total > 0:
    t0 = total > 0
    if bool(t0) is not True:
        raise GuardFailure(0)
    del t0, total
    # test_compile.py:{line + 4}: x = x * 2
    x_1 = x * 2
    return (x_1,)'''
    # .graph names values as .code and explain() do (t0 in all three)
    assert f.graph == """forward(x:f32[2]) {
  total:f32[] = sum x  dims=(0,) dtype=None keepdim=False
  t0:bool[] = gt total 0
  x_1:f32[2] = mul x 2
  return (x_1)
}"""


def test_generated_module_runs_standalone(tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_DUMP", str(tmp_path))

    @tg.compile
    def f(x, w):
        return (tg.relu(x @ w) ** 2).mean()

    x, w = tg.randn(3, 4), tg.randn(4, 2, requires_grad=True)
    y = f(x, w)
    files = sorted(os.listdir(tmp_path))
    module = [n for n in files if n.endswith(".py")]
    assert len(module) == 1 and any(n.endswith(".ir.txt") for n in files)
    import runpy
    ns = runpy.run_path(str(tmp_path / module[0]))
    outs = ns["forward"](x.numpy(), w.detach().numpy())
    _close(outs[0], y)
    grads = ns["backward"](*outs[1:], np.float32(1.0))
    y.backward()
    _close(grads[0], w.grad)


# custom autograd.Function ------------------------------------------------------------------------

class _ScaledExp(tg.autograd.Function):
    """exp(x) * scale, with a backward that is deliberately 3x the true one, so a test
    can tell that the user's own backward ran."""

    @staticmethod
    def forward(ctx, x, scale):
        y = x.exp() * scale
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, g):
        (y,) = ctx.saved_tensors
        return g * y * 3, None


class _SplitSquare(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x, x * 2

    @staticmethod
    def backward(ctx, ga, gb):
        (x,) = ctx.saved_tensors
        return ga * 2 * x + gb * 2


@pytest.mark.parametrize("create_graph", [False, True])
def test_custom_function_uses_its_own_forward_and_backward(create_graph):
    def f(x):
        a, b = _SplitSquare.apply(x)
        return (_ScaledExp.apply(a * 0.5, 2.0) + b).sum()

    cf = tg.compile(f)
    results = []
    for fn in (f, cf):
        x = tg.tensor([0.2, -0.7, 1.1], requires_grad=True)
        (g,) = tg.autograd.grad(fn(x), x, create_graph=create_graph)
        results.append([g])
        if create_graph:
            results[-1].append(tg.autograd.grad(g.sum(), x)[0])
    for a, b in zip(*results):
        _close(a, b, rtol=1e-5)
    assert "fn=__ScaledExp" in cf.code      # the forward calls the user's Function


# nn.Module ---------------------------------------------------------------------------------------

def _model():
    from tracegrad import nn
    tg.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.BatchNorm1d(8), nn.Dropout(0.25),
                         nn.Linear(8, 3))


def test_compiled_module_matches_eager_with_batchnorm_and_dropout():
    x = tg.randn(16, 4)
    runs = []
    for compiled in (False, True):
        model = _model()
        f = tg.compile(model) if compiled else model
        tg.manual_seed(7)
        outs = [f(x) for _ in range(2)]         # dropout draws a fresh mask each call
        outs[0].pow(2).mean().backward()
        model.eval()
        outs.append(f(x))
        runs.append((outs, model[0].weight.grad.clone(), model[2].running_mean.clone(),
                     model[2].running_var.clone(), model[2].num_batches_tracked.item()))
    (e_outs, e_grad, e_mean, e_var, e_n), (c_outs, c_grad, c_mean, c_var, c_n) = runs
    for a, b in zip(c_outs, e_outs):
        _close(a, b, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(c_outs[0]._data, c_outs[1]._data)
    _close(c_grad, e_grad, rtol=1e-5, atol=1e-6)
    _close(c_mean, e_mean)
    _close(c_var, e_var)
    assert c_n == e_n == 2


def test_module_train_eval_switch_retraces():
    model = _model()
    f = tg.compile(model)
    f(tg.randn(4, 4))
    model.eval()
    f(tg.randn(4, 4))
    assert f.stats["retrace_reasons"] == ["a module switched between train() and eval()"]


def test_an_error_inside_generated_code_names_the_statement_and_the_users_line():
    @tg.compile
    def f(x, idx):
        picked = x.gather(0, idx)
        return picked * 2

    x = tg.arange(4.0)
    _close(f(x, tg.tensor([1, 3])), [2, 6])
    with pytest.raises(RuntimeError) as info:
        f(x, tg.tensor([1, 9]))           # same shapes: the cached variant runs and fails
    msg = str(info.value)
    assert "compiled code" in msg and "picked = x.gather(0, idx)" in msg
    _close(f(x, tg.tensor([0, 2])), [0, 4])


def test_profiler_shows_compile_phases_and_compiled_kernels():
    @tg.compile
    def f(x, w):
        return (x @ w).tanh().sum()

    x, w = tg.randn(3, 4), tg.randn(4, 2, requires_grad=True)
    with tg.profiler.profile() as prof:
        f(x, w).backward()
    names = {e.key for e in prof.key_averages()}
    label = "test_profiler_shows_compile_phases_and_compiled_kernels.<locals>.f"
    for phase in ("compile:{}:trace", "compile:{}:passes", "compile:{}:codegen",
                  "compiled:{}:forward", "compiled:{}:backward"):
        assert phase.format(label) in names
    assert "CompiledFunctionBackward" in names


def test_double_backward_when_an_input_gets_no_gradient():
    @tg.compile
    def f(a, b, c):
        return (a.exp() * c).sum() + b.detach().sum()

    a, b, c = (tg.tensor([0.5, -0.5], requires_grad=True) for _ in range(3))
    ga, gb, gc = tg.autograd.grad(f(a, b, c), (a, b, c), create_graph=True, allow_unused=True)
    assert gb is None
    (gga,) = tg.autograd.grad((ga * gc).sum(), a)     # ga * gc = c * exp(2a)
    _close(gga, 2 * c.detach() * (2 * a.detach()).exp(), rtol=1e-5)


def _layer_cases():
    from tracegrad import nn
    return {
        "Linear": (lambda: nn.Linear(4, 3), lambda: (tg.randn(5, 4),)),
        "LayerNorm": (lambda: nn.LayerNorm(4), lambda: (tg.randn(5, 4),)),
        "BatchNorm2d": (lambda: nn.BatchNorm2d(3), lambda: (tg.randn(2, 3, 4, 4),)),
        "Embedding": (lambda: nn.Embedding(10, 4), lambda: (tg.tensor([[1, 2], [3, 9]]),)),
        "GELU_tanh": (lambda: nn.GELU(approximate="tanh"),
                      lambda: (tg.randn(5, 4, requires_grad=True),)),
        "GELU": (lambda: nn.GELU(), lambda: (tg.randn(5, 4, requires_grad=True),)),
        "Softmax": (lambda: nn.Softmax(1), lambda: (tg.randn(5, 4, requires_grad=True),)),
        "CrossEntropyLoss": (lambda: nn.CrossEntropyLoss(ignore_index=1, label_smoothing=0.1),
                             lambda: (tg.randn(5, 4, requires_grad=True),
                                      tg.tensor([0, 1, 2, 3, 1]))),
        "BCEWithLogitsLoss": (lambda: nn.BCEWithLogitsLoss(pos_weight=tg.ones(4) * 2),
                              lambda: (tg.randn(5, 4, requires_grad=True), tg.rand(5, 4))),
        "MSELoss": (lambda: nn.MSELoss(), lambda: (tg.randn(5, 4, requires_grad=True),
                                                   tg.randn(5, 4))),
    }


@pytest.mark.parametrize("name", sorted(_layer_cases()))
def test_nn_layers_compile_like_eager(name):
    make, inputs = _layer_cases()[name]
    tg.manual_seed(0)
    module, args = make(), inputs()
    compiled = tg.compile(module)
    got, want = compiled(*args), module(*args)
    _close(got, want, rtol=1e-5, atol=1e-6)
    wrt = list(module.parameters()) + [a for a in args if a.requires_grad]
    for a, b in zip(tg.autograd.grad(got.sum(), wrt), tg.autograd.grad(want.sum(), wrt)):
        _close(a, b, rtol=1e-4, atol=1e-6)


def test_double_backward_through_random_ops_reuses_the_forwards_draws():
    @tg.compile
    def f(x):
        return ((x * (tg.rand(x.shape) > 0.5)) ** 3).sum()

    x = tg.ones(64, requires_grad=True)
    y = f(x)                            # at x = 1: the number of kept elements
    state = tg.default_generator.get_state()
    (g,) = tg.autograd.grad(y, x, create_graph=True)
    assert g.sum().item() == 3 * y.item()
    assert tg.default_generator.get_state() == state    # the replay gave the generator back
