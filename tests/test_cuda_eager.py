"""Eager CUDA: devices, copies, the same-device check, ``tracegrad.cuda``, the profiler.

Three groups:

- Without a GPU (CuPy absent, or no device): asking for cuda is one clear error that leaves
  tensors and modules as they were, and everything PyTorch's CPU build answers quietly
  (``is_available``, ``memory_allocated``, ``manual_seed``, ``pin_memory=True``, CUDA
  profiler activity) is answered the same way, compared with the installed PyTorch.
- With ``fake_cupy`` (a NumPy-backed double of CuPy, see its docstring): tracegrad's device
  bookkeeping, on any machine. These say nothing about CuPy's kernels.
- On a real GPU (skipped without one): the op table forward and backward against the CPU,
  gradcheck in float64, and the same checks as with the double.
"""
import json
import warnings

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn
from tracegrad.profiler import ProfilerActivity, profile
from tracegrad.utils.data import DataLoader, TensorDataset

import fake_cupy
from op_device import lib_on
from op_table import TABLE

GPU = tg.cuda.is_available()        # a real one: read before any test installs the double
needs_no_gpu = pytest.mark.skipif(GPU, reason="checks what happens without a GPU")
needs_gpu = pytest.mark.skipif(not GPU, reason="needs CuPy and an NVIDIA GPU")
SAME_DEVICE = ("Expected all tensors to be on the same device, but found at least two "
               "devices, {} and {}!")


@pytest.fixture
def fake(monkeypatch):
    """CuPy replaced by the double, with two devices (see fake_cupy.py)."""
    return fake_cupy.install(monkeypatch, n_devices=2)


def _same(msg_devices):
    import re
    return re.escape(SAME_DEVICE.format(*msg_devices))


# without a GPU ------------------------------------------------------------------------------

@needs_no_gpu
def test_cuda_is_unavailable_quietly():
    assert tg.cuda.is_available() is False
    assert tg.cuda.device_count() == 0
    assert tg.cuda.is_initialized() is False
    assert tg.profiler.supported_activities() == {ProfilerActivity.CPU}


ASK_FOR_CUDA = [
    ("tensor", lambda x, m: tg.tensor([1.0], device="cuda")),
    ("zeros", lambda x, m: tg.zeros(2, device="cuda")),
    ("randn", lambda x, m: tg.randn(2, device="cuda:0")),
    ("randperm", lambda x, m: tg.randperm(3, device="cuda")),
    (".cuda()", lambda x, m: x.cuda()),
    (".to('cuda')", lambda x, m: x.to("cuda")),
    (".to(device, dtype)", lambda x, m: x.to("cuda", tg.float64)),
    ("Module.cuda()", lambda x, m: m.cuda()),
    ("Module.to('cuda')", lambda x, m: m.to("cuda")),
    ("cuda.current_device", lambda x, m: tg.cuda.current_device()),
    ("cuda.synchronize", lambda x, m: tg.cuda.synchronize()),
    ("cuda.get_device_name", lambda x, m: tg.cuda.get_device_name()),
    ("cuda.set_device", lambda x, m: tg.cuda.set_device(0)),
    ("cuda.Event", lambda x, m: tg.cuda.Event(enable_timing=True)),
    ("cuda.Stream", lambda x, m: tg.cuda.Stream()),
    ("cuda.initial_seed", lambda x, m: tg.cuda.initial_seed()),
]


@needs_no_gpu
@pytest.mark.parametrize("ask", [pytest.param(f, id=i) for i, f in ASK_FOR_CUDA])
def test_asking_for_cuda_is_a_clear_error_that_changes_nothing(ask):
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    m = nn.Linear(2, 1)
    weight, before = m.weight, m.weight.detach().clone()
    with pytest.raises(RuntimeError, match="device 'cuda' needs CuPy and an NVIDIA GPU"):
        ask(x, m)
    assert x.device == tg.device("cpu") and x.tolist() == [1.0, 2.0] and x.grad is None
    assert m.weight is weight and m.weight.device.type == "cpu"
    assert m.weight.detach().equal(before)


QUIET_IN_TORCH = ["is_available", "device_count", "memory_allocated", "max_memory_allocated",
                  "memory_reserved", "empty_cache", "is_initialized"]
RAISES_IN_TORCH = ["current_device", "synchronize", "get_device_name"]


@needs_no_gpu
def test_cuda_functions_answer_as_torch_cpu_build_does():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the installed PyTorch sees a GPU")
    for name in QUIET_IN_TORCH:
        assert getattr(tg.cuda, name)() == getattr(torch.cuda, name)(), name
    assert tg.cuda.manual_seed(1) is None and tg.cuda.manual_seed_all(2) is None
    for name in RAISES_IN_TORCH:
        with pytest.raises(Exception):
            getattr(torch.cuda, name)()
        with pytest.raises(RuntimeError, match="cuda"):
            getattr(tg.cuda, name)()


@needs_no_gpu
def test_seeds_for_cuda_are_kept_without_a_gpu():
    from tracegrad import creation
    tg.cuda.manual_seed_all(11)
    assert creation.cuda_generator(0).initial_seed() == 11
    tg.cuda.manual_seed(12)                         # the current device: 0 before any use
    assert creation.cuda_generator(0).initial_seed() == 12
    gen = tg.manual_seed(13)                        # the CPU's and every device's
    assert gen is tg.default_generator and tg.initial_seed() == 13
    assert creation.cuda_generator(0).initial_seed() == 13
    assert creation.cuda_generator(3).initial_seed() == 13     # made later, seeded alike


@needs_no_gpu
def test_pin_memory_without_gpu_warns_per_epoch_as_torch_does():
    x, y = tg.arange(8.0).reshape(4, 2), tg.arange(4)
    plain = list(DataLoader(TensorDataset(x, y), batch_size=3))
    loader = DataLoader(TensorDataset(x, y), batch_size=3, pin_memory=True)
    for _ in range(2):
        with pytest.warns(UserWarning) as seen:
            pinned = list(loader)
        assert len(seen) == 1
    assert [[t.tolist() for t in b] for b in pinned] == [[t.tolist() for t in b] for b in plain]
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        return
    tds = torch.utils.data.TensorDataset(torch.arange(8.0).reshape(4, 2))
    with pytest.warns(UserWarning) as want:
        list(torch.utils.data.DataLoader(tds, batch_size=3, pin_memory=True))
    assert str(seen[0].message) == str(want[0].message)


@needs_no_gpu
def test_tensor_pin_memory_without_gpu():
    x = tg.ones(2)
    assert x.is_pinned() is False
    with pytest.raises(RuntimeError, match="Cannot access accelerator device when none is "
                                           "available"):
        x.pin_memory()


def _warnings_of(fn):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        out = fn()
    return out, [(w.category, str(w.message)) for w in seen]


@needs_no_gpu
def test_cuda_profiling_without_gpu_profiles_the_cpu_as_torch_does():
    def run(lib):
        x = lib.ones(4, requires_grad=True)
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CPU,
                                              lib.profiler.ProfilerActivity.CUDA]) as prof:
            (x * 2).sum().backward()
        return prof.key_averages().table(sort_by="cuda_time_total")

    table, seen = _warnings_of(lambda: run(tg))
    assert seen == [(UserWarning, "CUDA is not available, disabling CUDA profiling")]
    header = table.splitlines()[1]
    assert "Self CPU" in header and "CUDA" not in header
    assert "Self CUDA time total" not in table
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        return
    t_table, t_seen = _warnings_of(lambda: run(torch))
    assert seen == t_seen
    assert t_table.splitlines()[1].split() == header.split()


@needs_no_gpu
def test_cuda_only_profiling_without_gpu_raises_as_torch_does():
    def run(lib):
        with lib.profiler.profile(activities=[lib.profiler.ProfilerActivity.CUDA]):
            pass

    with pytest.warns(UserWarning, match="CUDA is not available"):
        with pytest.raises(AssertionError, match="No activities specified for the profiler"):
            run(tg)
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        with pytest.warns(UserWarning, match="CUDA is not available"):
            with pytest.raises(AssertionError, match="No activities specified for the profiler"):
                run(torch)


@needs_no_gpu
@pytest.mark.parametrize("kwargs", [{"use_cuda": True}, {"use_device": "cuda"}],
                         ids=["use_cuda", "use_device"])
def test_autograd_profiler_use_cuda_without_gpu_warns_as_torch_does(kwargs):
    prof, seen = _warnings_of(lambda: tg.autograd.profiler.profile(**kwargs))
    with prof:
        tg.ones(2).exp()
    assert "CUDA" not in prof.key_averages().table().splitlines()[1]
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        _, t_seen = _warnings_of(lambda: torch.autograd.profiler.profile(**kwargs))
        assert seen == t_seen


@needs_no_gpu
def test_emit_nvtx_without_gpu_raises_on_entry():
    nvtx = tg.autograd.profiler.emit_nvtx()         # making one is fine, as in PyTorch
    with pytest.raises(RuntimeError, match="cuda"):
        nvtx.__enter__()
    with tg.autograd.profiler.emit_nvtx(enabled=False):
        tg.ones(2).exp()


# with the double ----------------------------------------------------------------------------

def test_cuda_copies_keep_ops_on_the_device(fake):
    x = tg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.cuda()
    assert y.is_cuda and y.device == tg.device("cuda", 0) and str(y.device) == "cuda:0"
    assert repr(y) == "tensor([1., 2., 3.], device='cuda:0', grad_fn=<ToCopyBackward0>)"
    z = (y * 2).exp().sum()
    assert z.is_cuda and z.grad_fn.name() == "SumBackward0"
    back = y.detach().cpu()
    assert not back.is_cuda and back.tolist() == [1.0, 2.0, 3.0]
    assert y.to("cuda:1").device == tg.device("cuda:1")
    assert y.to("cuda") is y and y.cuda() is y
    assert x.cuda(non_blocking=True).is_cuda and x.cuda(1).device == tg.device("cuda:1")
    assert x.to("cuda", tg.float64).dtype is tg.float64
    with pytest.raises(TypeError, match="Use Tensor.cpu"):
        y.detach().numpy()


def test_to_copy_backward_brings_the_gradient_to_the_cpu_leaf(fake):
    x = tg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x.to("cuda")
    assert y.grad_fn.name() == "ToCopyBackward0"
    assert y.grad_fn.next_functions[0][0].name() == "torch::autograd::AccumulateGrad"
    loss = (y * y).sum()
    (g,) = tg.autograd.grad(loss, x, create_graph=True)
    assert not g.is_cuda and g.tolist() == [2.0, -4.0, 6.0]
    g.sum().backward()                  # second order through the copies
    assert not x.grad.is_cuda and x.grad.tolist() == [2.0, 2.0, 2.0]
    w = tg.ones(3, device="cuda", requires_grad=True)
    (w.cpu() * 3).sum().backward()      # and the other way
    assert w.grad.is_cuda and w.grad.cpu().tolist() == [3.0, 3.0, 3.0]


MIXED = [
    ("cuda + cpu", lambda c, h, c1: c + h, ("cuda:0", "cpu")),
    ("cpu + cuda", lambda c, h, c1: h + c, ("cuda:0", "cpu")),
    ("cuda:0 * cuda:1", lambda c, h, c1: c * c1, ("cuda:0", "cuda:1")),
    ("matmul", lambda c, h, c1: c.reshape(3, 1) @ h.reshape(1, 3), ("cuda:0", "cpu")),
    ("cat", lambda c, h, c1: tg.cat([c, h]), ("cuda:0", "cpu")),
    ("where", lambda c, h, c1: tg.where(c > 0, c, h), ("cuda:0", "cpu")),
    ("add_ into cpu", lambda c, h, c1: h.add_(c), ("cuda:0", "cpu")),
    ("mul_ into cuda", lambda c, h, c1: c.mul_(h), ("cuda:0", "cpu")),
    ("no_grad add_", lambda c, h, c1: h.detach().add_(c.detach()), ("cuda:0", "cpu")),
]


@pytest.mark.parametrize("op,devices", [pytest.param(f, d, id=i) for i, f, d in MIXED])
def test_mixed_devices_raise_pytorch_message_and_change_nothing(fake, op, devices):
    c = tg.tensor([1.0, 2.0, 3.0], device="cuda")
    h = tg.tensor([4.0, 5.0, 6.0])
    c1 = tg.tensor([7.0, 8.0, 9.0], device="cuda:1")
    with pytest.raises(RuntimeError, match=_same(devices)):
        op(c, h, c1)
    assert c.cpu().tolist() == [1.0, 2.0, 3.0] and h.tolist() == [4.0, 5.0, 6.0]
    assert c._version == 0 and h._version == 0


def test_mixed_device_message_is_torch_wording():
    torch = pytest.importorskip("torch")
    # A CPU build still checks devices; "meta" stands in for cuda. The wording of the
    # TensorIterator check is the one tracegrad copies, with "cuda:0" for "meta".
    from pathlib import Path
    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    if not lib.exists():
        pytest.skip("no libtorch_cpu.so to read the message from")
    assert SAME_DEVICE.split("{}")[0].encode() in lib.read_bytes()


def test_cpu_scalar_tensors_join_an_elementwise_cuda_op(fake):
    c = tg.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    out = c * tg.tensor(3.0)
    assert out.is_cuda and out.cpu().tolist() == [3.0, 6.0]
    out.sum().backward()
    assert c.grad.is_cuda and c.grad.cpu().tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match=_same(("cuda:0", "cpu"))):
        c * tg.tensor(3.0, requires_grad=True)      # its gradient would come back on cuda
    with pytest.raises(RuntimeError, match=_same(("cuda:0", "cpu"))):
        c @ tg.tensor([1.0, 1.0])                   # not elementwise, not a scalar


def test_indexing_takes_cpu_indices(fake):
    x = tg.arange(6.0, device="cuda").reshape(2, 3)
    assert x[[1, 0]].is_cuda and x[[1, 0]].cpu().tolist() == [[3.0, 4.0, 5.0], [0.0, 1.0, 2.0]]
    assert x[tg.tensor([True, False])].cpu().tolist() == [[0.0, 1.0, 2.0]]
    x[tg.tensor([0])] = 9.0
    assert x.cpu()[0].tolist() == [9.0, 9.0, 9.0]
    with pytest.raises(RuntimeError, match="indices should be either on cpu or on the same"):
        tg.arange(3.0)[tg.tensor([0], device="cuda")]


CREATE = [
    ("tensor", lambda d: tg.tensor([[1, 2]], device=d)),
    ("zeros", lambda d: tg.zeros(2, 3, device=d)),
    ("ones", lambda d: tg.ones(2, device=d, dtype=tg.float64)),
    ("full", lambda d: tg.full((2,), 7, device=d)),
    ("empty", lambda d: tg.empty(2, device=d)),
    ("eye", lambda d: tg.eye(2, device=d)),
    ("arange", lambda d: tg.arange(5, device=d)),
    ("linspace", lambda d: tg.linspace(0, 1, 5, device=d)),
    ("rand", lambda d: tg.rand(3, device=d)),
    ("randn", lambda d: tg.randn(3, device=d)),
    ("randint", lambda d: tg.randint(0, 5, (3,), device=d)),
    ("randperm", lambda d: tg.randperm(4, device=d)),
    ("zeros_like", lambda d: tg.zeros_like(tg.ones(2), device=d)),
    ("rand_like", lambda d: tg.rand_like(tg.ones(2, device=d))),
]


@pytest.mark.parametrize("make", [pytest.param(f, id=i) for i, f in CREATE])
@pytest.mark.parametrize("dev", ["cuda", "cuda:1"])
def test_creation_functions_take_device(fake, make, dev):
    t = make(dev)
    assert t.is_cuda and t.device == tg.device(dev)
    assert t.cpu().device.type == "cpu"


def test_cuda_generator_is_seeded_apart_from_the_cpu_one(fake):
    tg.manual_seed(0)
    a, cpu_a = tg.randn(4, device="cuda"), tg.randn(4)
    tg.manual_seed(0)
    b, cpu_b = tg.randn(4, device="cuda"), tg.randn(4)
    assert a.cpu().tolist() == b.cpu().tolist() and cpu_a.tolist() == cpu_b.tolist()
    assert a.cpu().tolist() != cpu_a.tolist()       # its own stream, as PyTorch's
    tg.cuda.manual_seed(5)                          # the device's only
    c = tg.randn(4, device="cuda")
    tg.cuda.manual_seed(5)
    assert tg.randn(4, device="cuda").cpu().tolist() == c.cpu().tolist()
    assert tg.cuda.initial_seed() == 5
    tg.cuda.manual_seed_all(6)
    d0, d1 = tg.rand(3, device="cuda:0"), tg.rand(3, device="cuda:1")
    assert d0.cpu().tolist() == d1.cpu().tolist()   # same seed on both devices
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but "
                                           "found 'cpu'"):
        tg.randn(2, device="cuda", generator=tg.Generator())
    drop = nn.functional.dropout(tg.ones(100, device="cuda"), 0.5)
    assert drop.is_cuda and 0 < float((drop == 0).sum()) < 100


def test_module_cuda_moves_parameters_buffers_and_grads(fake):
    m = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.ReLU(), nn.Linear(4, 2))
    m(tg.randn(5, 3)).sum().backward()
    params = list(m.parameters())
    assert m.cuda() is m
    assert [p is q for p, q in zip(params, m.parameters())] == [True] * len(params)
    assert all(p.is_cuda and p.grad.is_cuda and p.is_leaf for p in m.parameters())
    assert all(b.is_cuda for b in m.buffers())
    out = m(tg.randn(5, 3, device="cuda"))
    assert out.is_cuda
    with pytest.raises(RuntimeError, match=_same(("cuda:0", "cpu"))):
        m(tg.randn(5, 3))
    m.to("cpu")
    assert not any(t.is_cuda for t in list(m.parameters()) + list(m.buffers()))
    m.to("cuda:1", tg.float64)
    assert all(p.device == tg.device("cuda:1") and p.dtype is tg.float64 for p in m.parameters())


@pytest.mark.parametrize("make_opt", [
    lambda ps: tg.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01),
    lambda ps: tg.optim.Adam(ps, lr=0.1, amsgrad=True),
    lambda ps: tg.optim.AdamW(ps, lr=0.1)], ids=["SGD", "Adam", "AdamW"])
def test_optimizer_state_follows_the_parameters(fake, make_opt):
    tg.manual_seed(0)
    cpu = nn.Linear(3, 2)
    gpu = nn.Linear(3, 2)
    gpu.load_state_dict(cpu.state_dict())
    gpu.cuda()
    x = tg.randn(4, 3)
    opts = make_opt(cpu.parameters()), make_opt(gpu.parameters())
    for _ in range(3):
        for model, opt, inp in ((cpu, opts[0], x), (gpu, opts[1], x.cuda())):
            opt.zero_grad()
            model(inp).pow(2).mean().backward()
            opt.step()
    for p, q in zip(cpu.parameters(), gpu.parameters()):
        assert q.is_cuda
        np.testing.assert_allclose(q.detach().cpu().numpy(), p.detach().numpy(), rtol=1e-6)
    for state in opts[1].state.values():
        for k, v in state.items():
            if isinstance(v, tg.Tensor) and k != "step":
                assert v.is_cuda, k
    loaded = make_opt(gpu.parameters())
    loaded.load_state_dict(opts[0].state_dict())    # a CPU state onto cuda parameters
    for state in loaded.state.values():
        assert all(v.is_cuda for k, v in state.items() if isinstance(v, tg.Tensor)
                   and k != "step")


def test_cuda_module_api_reads_cupy(fake):
    assert tg.cuda.is_available() and tg.cuda.device_count() == 2
    assert tg.cuda.current_device() == 0
    assert tg.cuda.get_device_name() == "Fake GPU (tests/fake_cupy.py)"
    assert tg.cuda.get_device_capability(1) == (9, 0)
    with tg.cuda.device(1):
        assert tg.cuda.current_device() == 1
    assert tg.cuda.current_device() == 0
    tg.cuda.set_device("cuda:1")
    assert tg.cuda.current_device() == 1
    tg.cuda.set_device(0)
    tg.cuda.synchronize()
    assert fake.synchronized == 1
    before = tg.cuda.memory_allocated()
    t = tg.zeros(1000, device="cuda", dtype=tg.float64)
    assert tg.cuda.memory_allocated() == before + 8000
    assert tg.cuda.max_memory_allocated() >= before + 8000
    assert tg.cuda.memory_allocated(1) == 0
    del t
    assert tg.cuda.memory_allocated() == before
    tg.cuda.reset_peak_memory_stats()
    assert tg.cuda.max_memory_allocated() == before
    tg.cuda.empty_cache()
    assert fake.pool.freed == 1
    start, end = tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)
    start.record()
    tg.ones(10, device="cuda").exp()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0 and end.query()
    s = tg.cuda.Stream()
    with tg.cuda.stream(s):
        tg.ones(2, device="cuda")
    s.synchronize()
    assert tg.cuda.current_stream() == tg.cuda.default_stream()


def test_pin_memory_with_a_gpu(fake):
    x = tg.arange(6.0).reshape(3, 2)
    p = x.pin_memory()
    assert p.is_pinned() and not x.is_pinned() and p.tolist() == x.tolist()
    with pytest.raises(RuntimeError, match="only dense CPU tensors can be pinned"):
        x.cuda().pin_memory()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        batches = list(DataLoader(TensorDataset(x, tg.arange(3)), batch_size=2,
                                  pin_memory=True))
    assert all(t.is_pinned() for b in batches for t in b)


def test_gradcheck_runs_on_cuda(fake):
    x = tg.tensor([0.3, -1.2, 2.0], dtype=tg.float64, device="cuda", requires_grad=True)
    assert tg.autograd.gradcheck(lambda a: (a * a).sin().sum(), (x,))
    assert tg.autograd.gradgradcheck(lambda a: (a * a).sin(), (x,))


def _profile_cuda_work():
    x = tg.randn(16, 16, device="cuda", requires_grad=True)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                 profile_memory=True) as prof:
        loss = (x @ x).relu().sum()
        loss.backward()
        tg.ones(3).exp()                # a CPU op: no device time
    return prof


def test_profiler_cuda_columns(fake, tmp_path):
    prof = _profile_cuda_work()
    table = prof.key_averages().table(sort_by="cuda_time_total")
    lines = table.splitlines()
    header = lines[1]
    for col in ("Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg", "CUDA Mem",
                "Self CUDA Mem"):
        assert col in header
    assert lines[-1].startswith("Self CUDA time total: ")
    avgs = {e.key: e for e in prof.key_averages()}
    assert avgs["matmul"].self_cuda_time_total > 0
    assert avgs["matmul"].count == 3           # the forward's and two in its backward
    assert avgs["matmul"].self_device_memory_usage == 3 * 16 * 16 * 4
    assert avgs["exp"].device_time_total == 0 and avgs["exp"].self_cpu_memory_usage == 12
    node = avgs["MmBackward0"]          # not measured itself: its ops' device time
    assert node.self_device_time_total == 0 and node.device_time_total > 0
    rows = [line.split()[0] for line in lines[3:-3]]
    totals = [avgs[name].device_time_total for name in rows if name in avgs]
    assert totals == sorted(totals, reverse=True)
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    events = json.load(open(path))["traceEvents"]
    assert {"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "ts": 0,
            "args": {"name": "GPU 0"}} in events
    kernels = [e for e in events if e.get("cat") == "kernel"]
    host = {e["args"]["External id"]: e["name"] for e in events
            if e.get("cat") == "cpu_op" and e["ph"] == "X"}
    assert kernels and all(host[k["args"]["External id"]] == k["name"] for k in kernels)


def test_record_function_on_a_device_is_timed_there(fake):
    """The compiled runtime's blocks launch kernels outside ops: ``device="cuda"`` times
    them; a plain block only totals the ops inside it."""
    x = tg.randn(8, device="cuda")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with tg.profiler.record_function("compiled:f:forward", device=x.device):
            pass                        # no op inside: only its own device time
        with tg.profiler.record_function("block"):
            x.exp()
    avgs = {e.key: e for e in prof.key_averages()}
    assert avgs["compiled:f:forward"].self_device_time_total > 0
    assert avgs["block"].self_device_time_total == 0
    assert avgs["block"].device_time_total == avgs["exp"].device_time_total > 0


def test_profiler_times_each_op_on_its_own_gpu(fake, tmp_path):
    """An op on cuda:1 with device 0 current is timed by events on cuda:1 (CUDA times a pair
    of events on one device only), against cuda:1's own reference event."""
    x0, x1 = tg.randn(8, device="cuda:0"), tg.randn(8, device="cuda:1")
    tg.cuda.set_device(0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        x1.exp()
        x0.tanh()
        with tg.profiler.record_function("compiled:f:forward", device="cuda:1"):
            tg.cuda.set_device(0)
    avgs = {e.key: e for e in prof.key_averages()}
    assert avgs["exp"].self_device_time_total > 0 and avgs["tanh"].self_device_time_total > 0
    assert avgs["compiled:f:forward"].self_device_time_total > 0
    events = json.load(open(prof.export_chrome_trace(str(tmp_path / "t.json"))))["traceEvents"]
    on_gpus = {e["name"]: e["pid"] for e in events if "device" in e.get("args", {})}
    assert on_gpus == {"exp": 1, "tanh": 0, "compiled:f:forward": 1}


def test_profiler_without_cuda_activity_has_no_cuda_columns(fake):
    x = tg.randn(4, device="cuda")
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        x.exp()
    assert "CUDA" not in prof.key_averages().table()
    assert tg.profiler.supported_activities() == {ProfilerActivity.CPU, ProfilerActivity.CUDA}


def test_autograd_profiler_use_device(fake):
    x = tg.randn(4, device="cuda")
    with pytest.warns(FutureWarning, match="use_cuda"):
        prof = tg.autograd.profiler.profile(use_cuda=True)
    with prof:
        x.exp()
    assert "Self CUDA" in prof.key_averages().table()


def test_emit_nvtx_ranges(fake):
    x = tg.randn(3, device="cuda", requires_grad=True)
    with tg.autograd.profiler.emit_nvtx(record_shapes=True):
        (x * 2).sum().backward()
    log = fake.nvtx_log
    assert log[0] == ("push", "mul, sizes = [[3], []]")
    assert ("push", "SumBackward0, sizes = [[]]") in log
    depth = 0
    for kind, _ in log:
        depth += 1 if kind == "push" else -1
        assert depth >= 0
    assert depth == 0 and fake.synchronized == 2
    with pytest.raises(RuntimeError, match="not reentrant"):
        with tg.autograd.profiler.emit_nvtx() as nvtx:
            nvtx.__enter__()


# the op table on a device ---------------------------------------------------------------------

def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _host(t):
    return t.detach().cpu().numpy()


def check_entry_on_cuda(entry, rtol=1e-5):
    """One table entry on cuda against the CPU: outputs, gradients (of a fixed weighting of
    the outputs) and second derivatives stay on the device and agree."""
    arrays = entry.sample()
    xc = [tg.tensor(a, requires_grad=entry.grad) for a in arrays]
    xg = [tg.tensor(a, requires_grad=entry.grad, device="cuda") for a in arrays]
    oc, og = _outputs(entry.fn(tg, *xc)), _outputs(entry.fn(lib_on("cuda"), *xg))
    assert len(oc) == len(og)
    for k, (c, g) in enumerate(zip(oc, og)):
        assert g.is_cuda and g.dtype is c.dtype, f"output {k}"
        np.testing.assert_allclose(_host(g), _host(c), rtol=rtol, atol=rtol, equal_nan=True)
    if not entry.grad:
        return

    def loss(outs):
        terms = [(o * (k + 1.5)).sum() for k, o in enumerate(outs) if o.requires_grad]
        return sum(terms) if terms else None
    lc, lg = loss(oc), loss(og)
    if lc is None:
        return
    gc = tg.autograd.grad(lc, xc, allow_unused=True, create_graph=entry.gradgrad)
    gg = tg.autograd.grad(lg, xg, allow_unused=True, create_graph=entry.gradgrad)
    for i, (c, g) in enumerate(zip(gc, gg)):
        assert (c is None) == (g is None), f"grad {i}"
        if c is not None:
            assert g.is_cuda, f"grad {i}"
            np.testing.assert_allclose(_host(g), _host(c), rtol=rtol, atol=rtol)
    if not entry.gradgrad:
        return
    sc = [g.sum() for g in gc if g is not None and g.requires_grad]
    sg = [g.sum() for g in gg if g is not None and g.requires_grad]
    if sc:
        g2c = tg.autograd.grad(sum(sc), xc, allow_unused=True)
        g2g = tg.autograd.grad(sum(sg), xg, allow_unused=True)
        for i, (c, g) in enumerate(zip(g2c, g2g)):
            if c is not None:
                assert g is not None and g.is_cuda, f"second-order grad {i}"
                np.testing.assert_allclose(_host(g), _host(c), rtol=rtol, atol=rtol)


def _entries(keep=lambda e: True, test=None):
    """The op table's entries as params; with ``test``, an entry that expects ``test`` to
    fail (its ``xfail``, as in test_ops.py) is marked so here too."""
    return [pytest.param(e, id=e.name, marks=[pytest.mark.xfail(reason=e.xfail[test],
                                                                strict=True)]
                         if test in e.xfail else []) for e in TABLE if keep(e)]


@pytest.mark.parametrize("entry", _entries())
def test_op_table_entry_on_the_double(fake, entry):
    """Device bookkeeping of every primitive: results, gradients and second derivatives stay
    on the device, and no op mixes host and device arrays."""
    with np.errstate(all="ignore"):
        check_entry_on_cuda(entry, rtol=1e-6)


# on a real GPU ------------------------------------------------------------------------------------

@needs_gpu
@pytest.mark.parametrize("entry", _entries())
def test_op_table_entry_on_gpu(entry):
    with np.errstate(all="ignore"):
        check_entry_on_cuda(entry)


@needs_gpu
@pytest.mark.parametrize("entry", _entries(lambda e: e.grad, test="gradcheck"))
def test_op_table_gradcheck_on_gpu(entry):
    xs = [tg.tensor(a, requires_grad=True, device="cuda") for a in entry.sample()]
    assert tg.autograd.gradcheck(lambda *a: entry.fn(lib_on("cuda"), *a), xs, **entry.gc)


@needs_gpu
def test_gpu_basics():
    c = tg.tensor([1.0, 2.0], device="cuda", requires_grad=True)
    with pytest.raises(RuntimeError, match=_same(("cuda:0", "cpu"))):
        c + tg.ones(2)
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    (x.cuda() ** 2).sum().backward()
    assert not x.grad.is_cuda and x.grad.tolist() == [2.0, 4.0]
    before = tg.cuda.memory_allocated()
    t = tg.empty(1 << 20, device="cuda")
    assert tg.cuda.memory_allocated() >= before + (1 << 22)
    assert tg.cuda.max_memory_allocated() >= tg.cuda.memory_allocated()
    del t
    tg.manual_seed(0)
    a = tg.randn(5, device="cuda")
    tg.manual_seed(0)
    assert a.equal(tg.randn(5, device="cuda"))
    start, end = tg.cuda.Event(enable_timing=True), tg.cuda.Event(enable_timing=True)
    start.record()
    tg.randn(256, 256, device="cuda").mm(tg.randn(256, 256, device="cuda"))
    end.record()
    tg.cuda.synchronize()
    assert start.elapsed_time(end) > 0
    assert tg.ones(2).pin_memory().is_pinned()
    assert isinstance(tg.cuda.get_device_name(), str)


@needs_gpu
def test_gpu_profiler_and_nvtx():
    prof = _profile_cuda_work()
    table = prof.key_averages().table(sort_by="cuda_time_total")
    assert "Self CUDA" in table.splitlines()[1]
    assert {e.key: e for e in prof.key_averages()}["matmul"].self_cuda_time_total > 0
    with tg.autograd.profiler.emit_nvtx():
        (tg.ones(3, device="cuda", requires_grad=True) * 2).sum().backward()


# the default device -------------------------------------------------------------------------

def test_default_device_is_the_cpu_and_follows_set_default_device(fake):
    assert tg.get_default_device() == tg.device("cpu")
    try:
        tg.set_default_device("cuda:1")
        assert tg.get_default_device() == tg.device("cuda", 1)
        made = [tg.zeros(2), tg.ones(2, 3), tg.randn(3), tg.arange(4), tg.tensor([1.0, 2.0]),
                tg.full((2,), 7.0), tg.eye(2), tg.empty(1), tg.rand(2)]
        assert all(t.device == tg.device("cuda", 1) for t in made), [t.device for t in made]
        assert tg.zeros(2, device="cpu").device == tg.device("cpu")     # an explicit device
        assert tg.from_numpy(np.ones(2)).device == tg.device("cpu")     # shares host memory
        assert tg.nn.Linear(2, 3).weight.device == tg.device("cuda", 1)
    finally:
        tg.set_default_device(None)
    assert tg.zeros(2).device == tg.device("cpu")


def test_a_device_is_a_context_manager_for_the_default_device(fake):
    with tg.device("cuda") as d:
        assert d == tg.device("cuda", 0) and tg.zeros(1).device == d
        with tg.device("cuda:1"):
            assert tg.randn(2).device == tg.device("cuda", 1)
        assert tg.ones(1).device == d
    assert tg.get_default_device() == tg.device("cpu") and tg.ones(1).device.type == "cpu"


def test_the_default_device_is_per_thread(fake):
    import threading
    seen = []
    with tg.device("cuda"):
        th = threading.Thread(target=lambda: seen.append(tg.zeros(1).device))
        th.start()
        th.join()
        assert tg.zeros(1).device.type == "cuda"
    assert seen == [tg.device("cpu")]


def test_default_device_matches_torch():
    torch = pytest.importorskip("torch")
    assert repr(tg.get_default_device()) == repr(torch.get_default_device())
    with tg.device("cpu"), torch.device("cpu"):
        assert str(tg.zeros(1).device) == str(torch.zeros(1).device)


@pytest.mark.parametrize("reduce", ["amax", "amin"])
@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "int32"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_extremes_on_the_double_match_the_cpu(fake, reduce, dtype, include_self):
    """scatter_reduce's amax/amin on a GPU sort instead of CuPy's scatter_max/min (which
    round float64 through float32): places hit many times, once and never, ties, NaN and
    infinities, each the same as on the CPU, bit for bit."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 6)) * 1e3 + 1 / 3
    src = rng.standard_normal((5, 9)) * 1e3 + 1 / 7
    index = rng.integers(0, 4, size=(5, 9))         # columns 4, 5: never scattered to
    src[1, :3] = src[1, 3]                           # ties
    if dtype.startswith("float"):
        x[2, 1], src[0, 0], src[3, 2] = np.inf, np.nan, -np.inf
        index[0, 0] = index[0, 1]                    # a NaN shares its place with a number
    x, src = x.astype(dtype), src.astype(dtype)
    want = tg.tensor(x).scatter_reduce(1, tg.tensor(index), tg.tensor(src), reduce,
                                       include_self=include_self)
    got = tg.tensor(x, device="cuda").scatter_reduce(
        1, tg.tensor(index, device="cuda"), tg.tensor(src, device="cuda"), reduce,
        include_self=include_self)
    np.testing.assert_array_equal(_host(got), want.numpy())
