"""The fused (``foreach``) eager optimizer steps (``tracegrad/optim/_foreach.py``): the same
results as the per-parameter loop (``foreach=False``) to the bit, or one ulp, and as
PyTorch's single-tensor step to rounding; the same state, state dicts and version counts;
the loop wherever the fused step can't run exactly (a trace, ``differentiable``, a tensor
option, a 0-d or odd parameter)."""
import copy

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import optim
from tracegrad.optim import _foreach

from test_compile_train_step import _train_step

STEPS = 7       # RAdam's rectification switches on at step 6
SHAPES = [(3, 4), (5,), (2, 3, 2), (1,)]

CONFIGS = {     # name -> (optimizer class name, options): each option the fused step honours
    "sgd": ("SGD", dict(lr=0.1)),
    "sgd_momentum_dampening": ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3)),
    "sgd_nesterov_wd_maximize": ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True,
                                             weight_decay=0.01, maximize=True)),
    "adam": ("Adam", dict(lr=0.01)),
    "adam_amsgrad_wd_maximize": ("Adam", dict(lr=0.01, betas=(0.8, 0.9), amsgrad=True,
                                              weight_decay=0.1, maximize=True)),
    "adamw": ("AdamW", dict(lr=0.01, weight_decay=0.1)),
    "adamw_amsgrad_maximize": ("AdamW", dict(lr=0.01, amsgrad=True, maximize=True)),
    "rmsprop": ("RMSprop", dict(lr=0.01)),
    "rmsprop_centered_momentum_wd_maximize": ("RMSprop", dict(
        lr=0.01, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.1, maximize=True)),
    "rmsprop_momentum": ("RMSprop", dict(lr=0.01, momentum=0.3)),
    "adagrad": ("Adagrad", dict(lr=0.1)),
    "adagrad_decay_wd_maximize": ("Adagrad", dict(lr=0.1, lr_decay=0.01, weight_decay=0.1,
                                                  initial_accumulator_value=0.1, maximize=True)),
    "adamax": ("Adamax", dict(lr=0.01)),
    "adamax_wd_maximize": ("Adamax", dict(lr=0.01, betas=(0.8, 0.9), weight_decay=0.1,
                                          maximize=True)),
    "nadam": ("NAdam", dict(lr=0.01)),
    "nadam_decoupled_maximize": ("NAdam", dict(lr=0.01, weight_decay=0.1, momentum_decay=0.01,
                                               decoupled_weight_decay=True, maximize=True)),
    "nadam_wd": ("NAdam", dict(lr=0.01, weight_decay=0.1)),
    "radam": ("RAdam", dict(lr=0.01)),
    "radam_decoupled_maximize": ("RAdam", dict(lr=0.01, betas=(0.9, 0.99), weight_decay=0.1,
                                               decoupled_weight_decay=True, maximize=True)),
    "radam_wd": ("RAdam", dict(lr=0.01, betas=(0.9, 0.9), weight_decay=0.1)),  # never rectified
    "adadelta": ("Adadelta", dict(lr=0.5)),
    "adadelta_wd_maximize": ("Adadelta", dict(lr=0.5, rho=0.8, weight_decay=0.1,
                                              maximize=True)),
}
DTYPES = {"float32": np.float32, "float64": np.float64}
TORCH_RTOL = {"float32": 1e-6, "float64": 1e-12}


def _arrays(dtype, seed=0, shapes=SHAPES):
    """Initial values and ``STEPS`` gradients for each shape, drawn from a fixed seed."""
    rng = np.random.default_rng(seed)
    init = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(STEPS)]
    return init, grads


def _run(lib, opt, params, grads):
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = None if g is None else lib.tensor(g)
        opt.step()


def _train(name, dtype, foreach, steps=None, seed=0):
    cls, kw = CONFIGS[name]
    init, grads = _arrays(dtype, seed)
    params = [tg.tensor(a, requires_grad=True) for a in init]
    opt = getattr(optim, cls)(params, foreach=foreach, **kw)
    _run(tg, opt, params, grads[:steps])
    return params, opt


def _assert_ulp(a, b, maxulp=1):
    np.testing.assert_array_max_ulp(np.asarray(a), np.asarray(b), maxulp=maxulp)


def _assert_same_state(opt_a, opt_b):
    a, b = opt_a.state_dict()["state"], opt_b.state_dict()["state"]
    assert a.keys() == b.keys()
    for k in a:
        assert list(a[k]) == list(b[k])     # the same entries, made in the same order
        for name in a[k]:
            assert a[k][name].dtype == b[k][name].dtype
            _assert_ulp(a[k][name]._data, b[k][name]._data)


@pytest.fixture
def fused_calls(monkeypatch):
    """How many times a group ran fused (``_foreach.split``), per test."""
    calls = []
    split = _foreach.split

    def counting(group, make_state):
        calls.append(group)
        return split(group, make_state)
    monkeypatch.setattr(_foreach, "split", counting)
    return calls


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fused_matches_the_loop(name, dtype, fused_calls):
    loop_params, loop_opt = _train(name, np.dtype(dtype).type, foreach=False)
    assert not fused_calls
    fused_params, fused_opt = _train(name, np.dtype(dtype).type, foreach=True)
    assert len(fused_calls) == STEPS
    for a, b in zip(fused_params, loop_params):
        assert a.dtype == b.dtype
        _assert_ulp(a._data, b._data)
        assert a._version == b._version > 0
    _assert_same_state(fused_opt, loop_opt)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_fused_matches_pytorch_single_tensor(name, dtype):
    torch = pytest.importorskip("torch")
    cls, kw = CONFIGS[name]
    init, grads = _arrays(DTYPES[dtype])
    params, _ = _train(name, DTYPES[dtype], foreach=None)
    t_params = [torch.tensor(a, requires_grad=True) for a in init]
    _run(torch, getattr(torch.optim, cls)(t_params, foreach=False, **kw), t_params, grads)
    for p, tp in zip(params, t_params):
        # an entry the steps moved near 0 keeps the absolute rounding of the larger numbers
        # it was computed from (PyTorch's kernels fuse some multiply-adds): rtol relative
        # to the tensor's largest entry, as well as to the entry's own magnitude
        expected = tp.detach().numpy()
        np.testing.assert_allclose(p._data, expected, rtol=TORCH_RTOL[dtype],
                                   atol=TORCH_RTOL[dtype] * np.abs(expected).max())


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("first,second", [(True, False), (False, True)])
def test_state_dict_round_trip_between_fused_and_loop(name, first, second):
    """An optimizer that steps one way, saved halfway and loaded into one that steps the
    other way, continues as the first would have."""
    cls, kw = CONFIGS[name]
    init, grads = _arrays(np.float32, seed=1)
    params = [tg.tensor(a, requires_grad=True) for a in init]
    opt = getattr(optim, cls)(params, foreach=first, **kw)
    _run(tg, opt, params, grads[:2])
    params2 = [p.detach().clone().requires_grad_() for p in params]
    opt2 = getattr(optim, cls)(params2, foreach=second, **kw)
    opt2.load_state_dict(copy.deepcopy(opt.state_dict()))
    assert opt2.param_groups[0]["foreach"] is first      # the options come with the state
    opt2.param_groups[0]["foreach"] = second
    _run(tg, opt, params, grads[2:])
    _run(tg, opt2, params2, grads[2:])
    for p, q in zip(params, params2):
        _assert_ulp(p._data, q._data)
    _assert_same_state(opt, opt2)
    state = opt2.state.get(params2[0], {})
    assert state["step"].item() == STEPS if "step" in state else cls == "SGD"


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_a_parameter_without_a_gradient_is_skipped(name):
    def train(foreach):
        cls, kw = CONFIGS[name]
        init, grads = _arrays(np.float32)
        for step_grads in grads:
            step_grads[1] = None
        params = [tg.tensor(a, requires_grad=True) for a in init]
        opt = getattr(optim, cls)(params, foreach=foreach, **kw)
        _run(tg, opt, params, grads)
        return params, opt
    (fused, fused_opt), (loop, loop_opt) = train(True), train(False)
    np.testing.assert_array_equal(fused[1]._data, _arrays(np.float32)[0][1])
    assert fused[1]._version == loop[1]._version == 0
    for a, b in zip(fused, loop):
        _assert_ulp(a._data, b._data)
    _assert_same_state(fused_opt, loop_opt)     # Adagrad alone made its state up front


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_mixed_dtypes_in_one_group(name):
    def train(foreach):
        cls, kw = CONFIGS[name]
        init32, grads32 = _arrays(np.float32, seed=2)
        init64, grads64 = _arrays(np.float64, seed=3)
        init = [a for pair in zip(init32, init64) for a in pair]
        grads = [[g for pair in zip(a, b) for g in pair] for a, b in zip(grads32, grads64)]
        params = [tg.tensor(a, requires_grad=True) for a in init]
        opt = getattr(optim, cls)(params, foreach=foreach, **kw)
        _run(tg, opt, params, grads)
        return params, opt
    (fused, fused_opt), (loop, loop_opt) = train(True), train(False)
    assert [p.dtype for p in fused] == [tg.float32, tg.float64] * len(SHAPES)
    for a, b in zip(fused, loop):
        _assert_ulp(a._data, b._data)
    _assert_same_state(fused_opt, loop_opt)
    for p in fused:
        for name_, t in fused_opt.state[p].items():
            # the counters (step, NAdam's mu_product) are float32 scalars, as in PyTorch
            assert t.dtype == (tg.float32 if t.dim() == 0 else p.dtype)


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_versions_move_as_the_loops_do(name):
    """Every parameter, and every state tensor, counts the writes the loop's in-place ops
    count; a view of a parameter sees its base's version move."""
    fused, fused_opt = _train(name, np.float32, foreach=True)
    loop, loop_opt = _train(name, np.float32, foreach=False)
    views = [p.detach().view(-1) for p in fused]
    before = [p._version for p in fused]
    _run(tg, fused_opt, fused, _arrays(np.float32, seed=4)[1][:1])
    _run(tg, loop_opt, loop, _arrays(np.float32, seed=4)[1][:1])
    for p, q, v, b in zip(fused, loop, views, before):
        assert p._version == q._version > b
        assert v._version == p._version
    for p, q in zip(fused, loop):
        for key in loop_opt.state[q]:
            assert fused_opt.state[p][key]._version == loop_opt.state[q][key]._version


def test_none_means_fused_and_false_the_loop(fused_calls):
    _train("adam", np.float32, foreach=None, steps=1)
    assert len(fused_calls) == 1
    _train("adam", np.float32, foreach=False, steps=1)
    assert len(fused_calls) == 1


@pytest.mark.parametrize("cls", ["SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax",
                                 "NAdam", "RAdam", "Adadelta"])
def test_every_optimizer_takes_the_foreach_keyword(cls):
    p = tg.zeros(3, requires_grad=True)
    for foreach in (None, True, False):
        opt = getattr(optim, cls)([p], lr=0.1, foreach=foreach)
        assert opt.param_groups[0]["foreach"] is foreach


def test_differentiable_and_tensor_options_run_the_loop(fused_calls):
    def train(foreach, **kw):
        init, grads = _arrays(np.float32)
        # a differentiable step writes its parameters in place: leaves that require no grad
        params = [tg.tensor(a, requires_grad=not kw.get("differentiable")) for a in init]
        _run(tg, optim.Adam(params, foreach=foreach, **kw), params, grads)
        return params
    for kw in (dict(lr=0.01, differentiable=True), dict(lr=tg.tensor(0.01)),
               dict(lr=0.01, betas=(tg.tensor(0.9), tg.tensor(0.999)))):
        for a, b in zip(train(None, **kw), train(False, **kw)):
            np.testing.assert_array_equal(a._data, b._data)
    assert not fused_calls


def test_a_bind_hook_sees_the_loops_ops(fused_calls):
    """While a bind hook (a profiler) watches, the step runs the ops it can see."""
    from tracegrad import _hooks
    seen = []

    def hook(prim, args, params, inner):
        seen.append(prim.name)
        return inner(prim, args, params)
    with _hooks.bind_hook_installed(hook):
        params, _ = _train("adam", np.float32, foreach=True)
    ref, _ = _train("adam", np.float32, foreach=False)
    for a, b in zip(params, ref):
        np.testing.assert_array_equal(a._data, b._data)
    assert not fused_calls and "sqrt" in seen


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_0d_parameters_go_to_the_loop(name):
    def train(foreach):
        cls, kw = CONFIGS[name]
        shapes = [(), (4,), ()]
        init, grads = _arrays(np.float64, seed=5, shapes=shapes)
        params = [tg.tensor(a, requires_grad=True) for a in init]
        opt = getattr(optim, cls)(params, foreach=foreach, **kw)
        _run(tg, opt, params, grads)
        return params, opt
    (fused, fused_opt), (loop, loop_opt) = train(True), train(False)
    for a, b in zip(fused, loop):
        _assert_ulp(a._data, b._data)
        assert a._version == b._version
    _assert_same_state(fused_opt, loop_opt)


def test_state_of_another_dtype_goes_to_the_loop(fused_calls):
    """A state tensor of another dtype than its parameter (set by hand) is the loop's: the
    fused ufuncs' temporaries would round otherwise."""
    def train(foreach):
        init, grads = _arrays(np.float32)
        params = [tg.tensor(a, requires_grad=True) for a in init]
        opt = optim.Adam(params, lr=0.01, foreach=foreach)
        _run(tg, opt, params, grads[:1])
        opt.state[params[0]]["exp_avg_sq"] = opt.state[params[0]]["exp_avg_sq"].double()
        _run(tg, opt, params, grads[1:])
        return params
    for a, b in zip(train(True), train(False)):
        _assert_ulp(a._data, b._data)


def _model():
    tg.manual_seed(0)
    return tg.nn.Sequential(tg.nn.Linear(4, 8), tg.nn.Tanh(), tg.nn.Linear(8, 1))


@pytest.mark.parametrize("name", ["sgd_nesterov_wd_maximize", "adamw", "adam_amsgrad_wd_maximize",
                                  "rmsprop_centered_momentum_wd_maximize", "adagrad",
                                  "adamax_wd_maximize", "nadam_decoupled_maximize",
                                  "adadelta_wd_maximize"])
def test_compiled_step_with_a_fused_optimizer_matches_eager(name, fused_calls):
    """Compiled, the step traces the loop (and the variant replays it); eagerly the same
    optimizer runs fused: the two agree step for step."""
    rng = np.random.default_rng(0)
    x = tg.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    y = tg.tensor(rng.standard_normal((16, 1)).astype(np.float32))

    def train(compiled):
        cls, kw = CONFIGS[name]
        model = _model()
        opt = getattr(optim, cls)(model.parameters(), foreach=True, **kw)
        train_step = _train_step(model, opt)
        step = tg.compile(train_step) if compiled else train_step
        losses = [step(x, y).item() for _ in range(6)]
        return losses, [p.detach().clone() for p in model.parameters()], step
    e_loss, e_params, _ = train(False)
    eager_fused = len(fused_calls)
    assert eager_fused == 6
    c_loss, c_params, step = train(True)
    np.testing.assert_allclose(c_loss, e_loss, rtol=1e-5, atol=1e-6)
    for a, b in zip(c_params, e_params):
        np.testing.assert_allclose(a._data, b._data, rtol=1e-5, atol=1e-6)
    assert step.stats["compiles"] == 1, step.explain()
    # the trace runs the loop, and so does the first call's rest, run eagerly under the
    # abandoned trace after the state is made
    assert len(fused_calls) == eager_fused
