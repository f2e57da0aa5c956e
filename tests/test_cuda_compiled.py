"""Compiled functions on a GPU, checked without one: the strict CuPy double.

``fake_cupy`` (two devices) stands in for CuPy: device arrays refuse host arrays, and an op
or kernel on an array of a device other than the current one fails, as on a GPU without peer
access; its ``RawModule`` runs the CUDA tier's kernels on the emulation
(``cuda_emulation``: each CUDA thread an OS thread). Each program runs compiled on
``cuda:1`` (not the current device, so nothing may lean on device 0), forward and backward,
against eager on the same device and eager on the CPU. Then what a variant on a GPU owns:
its constants copied to its device once, its random draws from that device's generator, no
NumPy-tier scratch for the kernels the CUDA tier replaced, one variant per device.
"""
import numpy as np
import pytest

import tracegrad as tg

import fake_cupy
from cuda_emulation import emulator

pytestmark = pytest.mark.skipif(emulator.CXX is None, reason="g++ (C++20) is not installed")
DEV = tg.device("cuda", 1)


@pytest.fixture
def fake(monkeypatch):
    return fake_cupy.install(monkeypatch, n_devices=2)


def _host(t):
    return t.detach().cpu().numpy()


def _leaves(shapes, seed=0, grad=True):
    rng = np.random.default_rng(seed)
    return [tg.tensor(rng.uniform(0.5, 1.5, s), dtype=tg.float32, requires_grad=grad)
            for s in shapes]


def _on(args, dev):
    return [a.detach().to(dev).requires_grad_(a.requires_grad) for a in args]


def _run(fn, args):
    tg.cuda.set_device(0)       # nothing may rely on the current device being the tensors'
    out = fn(*args)
    tg.cuda.set_device(0)
    out.backward()
    return [out] + [a.grad for a in args if a.requires_grad]


def check(c, fn, args, dev=DEV, cpu=True, seed=None):
    """``c`` (compiled ``fn``) on ``dev`` against ``fn`` eager on ``dev`` and on the CPU:
    the result and every gradient, each on ``dev``."""
    runs = {}
    for name, f, where in (("compiled", c, dev), ("eager", fn, dev), ("cpu", fn, "cpu")):
        if name == "cpu" and not cpu:
            continue
        if seed is not None:
            tg.manual_seed(seed)
        runs[name] = _run(f, _on(args, where))
    assert all(t.device == dev for t in runs["compiled"])
    for got, want in zip(runs["compiled"], runs["eager"]):
        np.testing.assert_allclose(_host(got), _host(want), rtol=1e-5, atol=1e-6)
    for got, want in zip(runs["compiled"], runs.get("cpu", ())):
        np.testing.assert_allclose(_host(got), _host(want), rtol=1e-4, atol=1e-5)
    return runs["compiled"]


# programs ----------------------------------------------------------------------------------

def _chain(x, y):
    return (tg.exp(tg.tanh(x * y + 1) - y) * 0.5 + x ** 2).sum()


def _layer_norm_softmax(x, w, b):
    mu = x.mean(dim=1, keepdim=True)
    h = (x - mu) / tg.sqrt(((x - mu) ** 2).mean(dim=1, keepdim=True) + 1e-5) * w + b
    return (tg.softmax(h, dim=1) * h).sum()


def _mlp(x, w, b):
    return tg.relu(x @ w + b).sum()


RAMP = [k / 50.0 for k in range(80)]                       # a global: an 80-element constant


def _make_scaled():
    mix = np.linspace(-1.0, 1.0, 80 * 3).reshape(80, 3)    # a closure's: 240 elements

    def scaled(x):
        ramp = tg.tensor(RAMP, device=x.device)
        return tg.tanh((x * ramp) @ tg.as_tensor(mix, dtype=x.dtype, device=x.device)).sum()
    return scaled


PROGRAMS = {"elementwise": (_chain, [(5, 3), (3,)]),
            "layer_norm_softmax": (_layer_norm_softmax, [(6, 40), (40,), (40,)]),
            "matmul_bias_relu": (_mlp, [(6, 5), (5, 4), (4,)]),
            "constants": (_make_scaled(), [(4, 80)])}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_compiled_matches_eager_on_the_device_and_on_the_cpu(fake, name):
    fn, shapes = PROGRAMS[name]
    c = tg.compile(fn, backend="cuda")
    for seed in (0, 1):        # the second call is a cache hit
        check(c, fn, _leaves(shapes, seed))
    v = c._last
    assert (c.stats["compiles"], v.tier, v.device_index) == (1, "cuda", 1)
    launched = {dev for _, dev in fake.launches}
    assert launched == {1} and len(fake.launches) >= 2


def test_dynamic_sizes_over_three_sizes(fake):
    c = tg.compile(_layer_norm_softmax, backend="cuda", dynamic=True)
    for n in (6, 9, 13):
        check(c, _layer_norm_softmax, _leaves([(n, 40), (40,), (40,)], n))
    assert c.stats["compiles"] <= 2 and "s0" in c._last.cuda_source


def test_double_backward_through_a_compiled_function(fake):
    """create_graph runs the joint graph through eager ops on the device, constants too."""
    fn = _make_scaled()
    c = tg.compile(fn, backend="cuda")
    grads = {}
    for name, f in (("compiled", c), ("eager", fn)):
        x, = _on(_leaves([(4, 80)]), DEV)
        g, = tg.autograd.grad(f(x), x, create_graph=True)
        (g ** 2).sum().backward()
        assert g.device == DEV and x.grad.device == DEV
        grads[name] = (_host(g), _host(x.grad))
    for got, want in zip(grads["compiled"], grads["eager"]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# what a variant on a GPU owns ---------------------------------------------------------------

def test_constants_are_copied_to_the_variant_device_once(fake):
    c = tg.compile(_make_scaled(), backend="cuda")
    c(*_on(_leaves([(4, 80)]), DEV))
    ns = c._last.namespace
    consts = {k: ns[k] for k in ns if k.startswith("_const")}
    assert consts and all(type(a) is fake_cupy.FakeArray and a.device.id == 1
                          for a in consts.values())
    assert "copied to the GPU once" in c.code
    c(*_on(_leaves([(4, 80)], 1), DEV))
    assert all(ns[k] is a for k, a in consts.items())


def _dropout(x):
    return (tg.nn.functional.dropout(x, 0.5, training=True) * x).sum()


def test_random_ops_draw_from_the_device_generator(fake):
    """Seeded alike, compiled and eager draw the same mask on the device, each call anew."""
    c = tg.compile(_dropout, backend="cuda")
    grads = [check(c, _dropout, _leaves([(50,)]), cpu=False, seed=s)[1] for s in (0, 0, 1)]
    assert (_host(grads[0]) == _host(grads[1])).all()
    assert (_host(grads[0]) != _host(grads[2])).any()
    assert c.stats["compiles"] == 1


def test_no_numpy_scratch_for_kernels_on_the_cuda_tier(fake):
    c = tg.compile(_layer_norm_softmax, backend="cuda")
    check(c, _layer_norm_softmax, _leaves([(6, 40), (40,), (40,)]))
    v = c._last
    assert v.cuda_kernels
    for name in v.workspaces:
        buffers = v.namespace[name].take()
        assert not any(hasattr(buffers, k) for k in v.cuda_kernels)
    assert v.workspace_bytes == 0 and "0 bytes of buffers" in c.explain()


def test_the_cuda_tier_is_shown_and_dumped(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("TRACEGRAD_DUMP", str(tmp_path))
    c = tg.compile(_layer_norm_softmax, backend="cuda")
    check(c, _layer_norm_softmax, _leaves([(6, 40), (40,), (40,)]), cpu=False)
    v = c._last
    assert v.cuda_kernels == [k.name for k in v.kernel_ir]
    assert "import cupy as np" in c.code and "// ---- the CUDA tier ----" in c.code
    assert (tmp_path / f"{v.label}.cu").read_text() == v.cuda_source
    launched = {name for name, _ in fake.launches}
    assert {"forward_fused0", "backward_fused0"} <= launched
    assert any(name.endswith("_combine") for name in launched)
    assert "on the CUDA tier" in c.explain() and "tier: cuda" in str(c.kernels)


def test_explain_says_how_each_part_runs_as_a_cuda_graph(fake):
    """A CUDA variant's forward and backward each say whether they replay a CUDA graph, or
    why not: here the double refuses to record, once the two warm calls have run."""
    c = tg.compile(_chain, backend="cuda")
    args = _on(_leaves([(5, 3), (3,)]), DEV)
    for _ in range(4):
        c(*args).backward()
    text = c.explain()
    for part in ("forward", "backward"):
        assert (f"{part}: runs without a CUDA graph: recording failed (RuntimeError: the "
                "CuPy double records no graph to replay)") in text, text
    with tg.no_grad():      # a variant without a backward: its forward alone
        c(*args)
    assert "backward: runs" not in c.explain().split("variant 1")[1]


def test_each_device_gets_its_own_variant(fake):
    c = tg.compile(_mlp, backend="cuda")
    args = _leaves([(6, 5), (5, 4), (4,)])
    check(c, _mlp, args, dev=tg.device("cuda", 0), cpu=False)
    v0 = c._last
    check(c, _mlp, args, dev=DEV, cpu=False)
    v1 = c._last
    assert v0 is not v1 and (v0.device_index, v1.device_index) == (0, 1)
    assert c.stats["compiles"] == 2
    assert "device of x changed: cuda:0 -> cuda:1" in c.explain()
    check(c, _mlp, args, dev=tg.device("cuda", 0), cpu=False)
    assert c._last is v0 and c.stats["compiles"] == 2


def test_cpu_and_cuda_variants_of_one_function_coexist(fake):
    c = tg.compile(_mlp, backend="auto")       # each variant on its tensors' device
    args = _leaves([(6, 5), (5, 4), (4,)])
    want = c(*args).item()
    v_cpu = c._last
    check(c, _mlp, args, cpu=False)
    assert c(*args).item() == want and c._last is v_cpu
    assert {v.device for v in c._variants} == {"cpu", "cuda"}
    assert "import numpy as np" in v_cpu.code and v_cpu.cuda_source is None


def test_cuda_backend_with_cpu_tensors_raises(fake):
    c = tg.compile(lambda x, y: x * y, backend="cuda")
    with pytest.raises(RuntimeError, match=r"compile\(backend='cuda'\).*tensors on the CPU "
                                           r"\(tensor argument\(s\) 0, 1 of 2\)") as err:
        c(tg.ones(3), tg.ones(3))
    assert "test_cuda_compiled.py" in str(err.value) and "c(tg.ones(3), tg.ones(3))" in \
        str(err.value)      # the user's call line


def _where_cupy_differs(x, y):
    big = tg.remainder(x * 1e7, y) + tg.floor_divide(x * 1e3, y * 1e-3)
    low = tg.amin(x, dim=1, keepdim=True) + tg.linalg.vector_norm(x, float("-inf"), dim=1,
                                                                   keepdim=True)
    nan_bound = tg.nan_to_num(tg.clamp(x, max=float("nan")), nan=2.0)     # 2.0: NaN made
    return (big * 1e-3 + low + tg.gather(x, 1, tg.tensor([[1, 0]] * 4, device=x.device))
            .sum(1, keepdim=True)).sum() + nan_bound.sum()


@pytest.mark.parametrize("backend", ["numpy", "cuda"])
def test_calls_where_cupy_differs_from_numpy(fake, backend):
    """remainder, floor division, amin into a buffer, gather and a NaN clamp bound: the calls
    a real GPU showed CuPy to answer differently from NumPy (the double copies those
    differences), compiled on either tier against the CPU."""
    c = tg.compile(_where_cupy_differs, backend=backend)
    check(c, _where_cupy_differs, _leaves([(4, 3), (3,)]))
