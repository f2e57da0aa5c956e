"""tracegrad.serialization: save/load round trips (through a path and through a BytesIO), every
dtype bit for bit, the weights_only unpickler and its allow-list, whole modules, map_location,
atomic saving, and files written by torch.save. Hostile and damaged files: tests/faults."""
import collections
import io
import pickle
import zipfile

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn, optim, serialization
from tracegrad.serialization import load, save


@pytest.fixture(params=["path", "bytesio"])
def roundtrip(request, tmp_path):
    """``roundtrip(obj, **load_kwargs)``: ``obj`` saved and loaded back through one medium."""
    def go(obj, **kw):
        if request.param == "path":
            save(obj, tmp_path / "ckpt.pt")
            return load(tmp_path / "ckpt.pt", **kw)
        buf = io.BytesIO()
        save(obj, buf)
        buf.seek(0)
        return load(buf, **kw)
    return go


def assert_same(a, b):
    assert type(a) is type(b) and a.dtype is b.dtype and a.shape == b.shape
    assert a.requires_grad == b.requires_grad
    assert a.device == b.device == tg.device("cpu")
    assert a._data.tobytes() == np.ascontiguousarray(b._data).tobytes()


def test_tensor(roundtrip):
    x = tg.randn(3, 4, requires_grad=True)
    y = roundtrip(x)
    assert_same(y, x)
    assert y.is_leaf and y.grad is None


BIT_PATTERNS = {
    tg.float16: np.array([0.0, -0.0, np.inf, -np.inf, 6e-8, 65504], np.float16),
    tg.float32: np.array([0.0, -0.0, np.inf, np.nan, 1e-45, 3.4e38], np.float32),
    tg.float64: np.array([0.0, -0.0, -np.inf, 5e-324, 1.7e308, np.pi], np.float64),
    tg.int8: np.array([-128, -1, 0, 127], np.int8),
    tg.int16: np.array([-32768, 0, 32767], np.int16),
    tg.int32: np.array([-2**31, 0, 2**31 - 1], np.int32),
    tg.int64: np.array([-2**63, 0, 2**63 - 1], np.int64),
    tg.uint8: np.array([0, 1, 255], np.uint8),
    tg.bool: np.array([True, False, True]),
}


@pytest.mark.parametrize("dt", list(BIT_PATTERNS), ids=str)
def test_every_dtype_bit_exact(roundtrip, dt):
    a = BIT_PATTERNS[dt]
    if dt.is_floating_point:   # a NaN with a payload must come back with the same payload
        a = np.concatenate([a, np.array([0x7FFF], np.uint16).view(np.float16).astype(a.dtype)])
        a[-1:].view(np.uint8)[0] ^= 1
    y = roundtrip({"t": tg.from_numpy(a)})["t"]
    assert y.dtype is dt and y._data.tobytes() == a.tobytes()


def test_zero_dim_empty_and_non_contiguous(roundtrip):
    base = tg.arange(24, dtype=tg.float32).reshape(4, 6)
    cases = [tg.tensor(3.5), tg.zeros(0, 3), tg.zeros(0, dtype=tg.int64),
             base.t(), base[::2, 1::3], base[:, 2]]
    out = roundtrip(cases)
    for got, want in zip(out, cases):
        assert got.shape == want.shape and got.is_contiguous()
        np.testing.assert_array_equal(got._data, want._data)


def test_parameter_and_requires_grad(roundtrip):
    p = nn.Parameter(tg.randn(2, 2))
    frozen = nn.Parameter(tg.randn(2), requires_grad=False)
    out = roundtrip({"p": p, "frozen": frozen, "plain": tg.ones(2, requires_grad=True)})
    assert type(out["p"]) is nn.Parameter and out["p"].requires_grad
    assert type(out["frozen"]) is nn.Parameter and not out["frozen"].requires_grad
    assert type(out["plain"]) is tg.Tensor and out["plain"].requires_grad
    assert_same(out["p"], p)


def test_shared_tensors_and_arrays_stay_shared(roundtrip):
    x = tg.randn(3)
    out = roundtrip({"a": x, "b": x, "c": x.detach()})
    assert out["a"] is out["b"] and out["a"] is not out["c"]
    out["c"]._data[0] = 7.0      # one record, one buffer, as the saved tensors had
    assert out["a"]._data[0] == 7.0


def test_nested_containers_and_python_values(roundtrip):
    obj = {"list": [1, 2.5, "s", None, True, b"\x00\xff", 3 + 4j],
           "tuple": (tg.zeros(1), {"deep": [tg.ones(2)]}), "set": {1, 2},
           "od": collections.OrderedDict(b=1, a=2), "counts": collections.Counter("aab"),
           "dtype": tg.float16,
           "device": tg.device("cpu"), "size": tg.Size([2, 3]), "empty": b"", "big": 2**70}
    out = roundtrip(obj)
    assert out["list"] == obj["list"] and out["set"] == {1, 2}
    assert type(out["od"]) is collections.OrderedDict and list(out["od"]) == ["b", "a"]
    assert type(out["counts"]) is collections.Counter and out["counts"] == {"a": 2, "b": 1}
    assert out["dtype"] is tg.float16 and out["device"] == tg.device("cpu")
    assert type(out["size"]) is tg.Size and out["size"] == (2, 3)
    assert out["empty"] == b"" and out["big"] == 2**70
    assert_same(out["tuple"][1]["deep"][0], obj["tuple"][1]["deep"][0])


def mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))


def test_module_state_dict(roundtrip):
    tg.manual_seed(0)
    model = mlp()
    model(tg.randn(5, 4))                  # moves the batch-norm running statistics
    model.eval()
    sd = roundtrip(model.state_dict())
    assert type(sd) is collections.OrderedDict and list(sd) == list(model.state_dict())
    fresh = mlp().eval()
    fresh.load_state_dict(sd)
    x = tg.randn(3, 4)
    assert model(x)._data.tobytes() == fresh(x)._data.tobytes()


def test_optimizer_state_dict_continues_identically(roundtrip):
    tg.manual_seed(0)
    x, y = tg.randn(6, 4), tg.randn(6, 2)

    def steps(model, opt, n):
        for _ in range(n):
            opt.zero_grad()
            ((model(x) - y) ** 2).mean().backward()
            opt.step()

    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    opt = optim.Adam(model.parameters(), lr=1e-2, amsgrad=True)
    steps(model, opt, 3)
    ckpt = roundtrip({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3})
    assert ckpt["epoch"] == 3 and ckpt["opt"]["state"][0]["step"].item() == 3.0
    model2 = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    model2.load_state_dict(ckpt["model"])
    opt2 = optim.Adam(model2.parameters())
    opt2.load_state_dict(ckpt["opt"])
    assert opt2.param_groups[0]["lr"] == 1e-2
    steps(model, opt, 3)
    steps(model2, opt2, 3)
    for p, q in zip(model.parameters(), model2.parameters()):
        assert p._data.tobytes() == q._data.tobytes()


class UserThing:
    def __init__(self, value):
        self.value = value


@pytest.mark.parametrize("make", [lambda: collections.deque([1, 2]), lambda: UserThing(3)],
                         ids=["deque", "user_class"])
def test_weights_only_rejects_other_globals(roundtrip, make):
    obj = {"w": tg.ones(2), "extra": make()}
    with pytest.raises(pickle.UnpicklingError) as e:
        roundtrip(obj)
    name = type(obj["extra"]).__module__ + "." + type(obj["extra"]).__qualname__
    assert f"GLOBAL {name} was not an allowed global" in str(e.value)
    assert "weights_only=False" in str(e.value) and "trust" in str(e.value)
    out = roundtrip(obj, weights_only=False)
    assert type(out["extra"]) is type(obj["extra"])
    content = vars if isinstance(obj["extra"], UserThing) else list
    assert content(out["extra"]) == content(obj["extra"])
    assert_same(out["w"], obj["w"])


def test_weights_only_false_object_holding_tensors(roundtrip):
    out = roundtrip(UserThing(nn.Parameter(tg.ones(2))), weights_only=False)
    assert type(out.value) is nn.Parameter


@pytest.fixture
def no_user_globals():
    """Each test starts and ends with an empty user allow-list (it is process-wide)."""
    serialization.clear_safe_globals()
    yield
    serialization.clear_safe_globals()


def test_add_safe_globals(roundtrip, no_user_globals):
    with pytest.raises(pickle.UnpicklingError, match="safe_globals"):
        roundtrip(UserThing(5))
    serialization.add_safe_globals([UserThing])
    assert serialization.get_safe_globals() == [UserThing]
    out = roundtrip([UserThing(5), UserThing(tg.ones(2))])
    assert type(out[0]) is UserThing and out[0].value == 5
    assert_same(out[1].value, tg.ones(2))
    serialization.clear_safe_globals()
    assert serialization.get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL .*UserThing was not an allowed"):
        roundtrip(UserThing(5))


def test_safe_globals_context_manager(roundtrip, no_user_globals):
    from tracegrad.serialization import safe_globals     # PyTorch's import path
    with safe_globals([UserThing]):
        assert serialization.get_safe_globals() == [UserThing]
        assert roundtrip(UserThing(1)).value == 1
    assert serialization.get_safe_globals() == []
    with pytest.raises(pickle.UnpicklingError):
        roundtrip(UserThing(1))
    serialization.add_safe_globals([UserThing])   # allowed before the block: stays allowed
    with safe_globals([UserThing, collections.deque]):
        pass
    assert serialization.get_safe_globals() == [UserThing]


class Renamed:
    pass


def test_safe_globals_under_another_name(no_user_globals):
    """An ``(object, "module.name")`` entry admits an object saved under another name."""
    buf = io.BytesIO()
    save(UserThing(7), buf)
    raw = _rezip(buf.getvalue(), "archive/data.pkl",
                 lambda d: d.replace(b"UserThing", b"OldThing1"))
    serialization.add_safe_globals([(UserThing, f"{__name__}.OldThing1")])
    assert load(io.BytesIO(raw)).value == 7
    with pytest.raises(ValueError, match="length 2"):
        serialization.add_safe_globals([(UserThing, "a", "b")])
    with pytest.raises(TypeError, match="str of callable full path"):
        serialization.add_safe_globals([(UserThing, 3)])


def test_blocked_modules_stay_refused(no_user_globals):
    import os
    serialization.add_safe_globals([os.getcwd])
    buf = io.BytesIO()
    save(os.getcwd, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="whose module .* is blocked"):
        load(buf)


@pytest.mark.parametrize("protocol", [1, 2, 3, 4, 5])
def test_every_pickle_protocol_weights_only(protocol):
    """The restricted interpreter reads every protocol's opcodes (FRAME, MEMOIZE, STACK_GLOBAL,
    BINBYTES8, EMPTY_SET/ADDITEMS, ...) and rebuilds the same objects as pickle does."""
    x = tg.randn(2, 3)
    obj = {"t": x, "same": x, "p": nn.Parameter(tg.ones(2)), "od": collections.OrderedDict(a=1),
           "set": {1, 2}, "fs": frozenset({3}), "bytes": b"\x00\xff" * 40, "empty": b"",
           "ba": bytearray(b"ab"), "s": "é" * 300, "big": -2**100, "f": -1.5, "c": 1 - 2j,
           "nested": [(1, [2, {"k": None}]), True], "size": tg.Size([4]),
           "dev": tg.device("cpu"), "dt": tg.int16, "counts": collections.Counter("aab")}
    buf = io.BytesIO()
    save(obj, buf, pickle_protocol=protocol)
    buf.seek(0)
    out = load(buf)
    assert out["t"] is out["same"] and type(out["p"]) is nn.Parameter
    assert_same(out["t"], x)
    for k in obj:
        if k not in ("t", "same", "p"):
            assert out[k] == obj[k] and type(out[k]) is type(obj[k]), k


def test_protocol_0_refused_on_save():
    with pytest.raises(pickle.PicklingError, match="pickle_protocol=0"):
        save(tg.ones(1), io.BytesIO(), pickle_protocol=0)
    buf = io.BytesIO()
    save({"n": 1, "s": "x"}, buf, pickle_protocol=0)     # no storages: protocol 0 works
    buf.seek(0)
    assert load(buf) == {"n": 1, "s": "x"}


def test_state_dict_metadata_is_built():
    """BUILD stays allowed on an OrderedDict this load created (``state_dict()._metadata``)."""
    sd = collections.OrderedDict(w=tg.ones(1))
    sd._metadata = {"": {"version": 2}}
    buf = io.BytesIO()
    save(sd, buf)
    buf.seek(0)
    assert load(buf)._metadata == {"": {"version": 2}}


def test_int_tensor_cannot_require_grad():
    buf = io.BytesIO()
    save(tg.ones(2, requires_grad=True), buf)     # int32 has float32's size: only the dtype lies
    raw = _rezip(buf.getvalue(), "archive/data.pkl",
                 lambda d: d.replace(b"tracegrad.dtypes\nfloat32", b"tracegrad.dtypes\nint32"))
    with pytest.raises(pickle.UnpicklingError, match="floating point dtype can require"):
        load(io.BytesIO(raw))


def _rezip(raw, member, edit):
    """The archive ``raw`` with ``member`` passed through ``edit`` (with a fresh CRC)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for n in src.namelist():
            dst.writestr(n, edit(src.read(n)) if n == member else src.read(n))
    return out.getvalue()


# whole modules -------------------------------------------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU())
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.body(x))


NET_CLASSES = [Net, nn.Sequential, nn.Linear, nn.BatchNorm1d, nn.ReLU]


def test_whole_module(roundtrip, no_user_globals):
    """As in PyTorch: a pickled module loads with weights_only=False, or with its classes
    allow-listed; without them the error names the first class to allow."""
    tg.manual_seed(0)
    model = Net()
    model(tg.randn(5, 4))
    model.eval()
    with pytest.raises(pickle.UnpicklingError, match=f"GLOBAL {__name__}.Net was not"):
        roundtrip(model)
    with pytest.raises(pickle.UnpicklingError, match="GLOBAL tracegrad.nn.container.Sequential"):
        with serialization.safe_globals([Net]):
            roundtrip(model)
    x = tg.randn(3, 4)
    for kw, allow in (({"weights_only": False}, []), ({}, NET_CLASSES)):
        with serialization.safe_globals(allow):
            got = roundtrip(model, **kw)
        assert type(got) is Net and not got.training
        assert list(got.state_dict()) == list(model.state_dict())
        assert got(x)._data.tobytes() == model(x)._data.tobytes()
        seen = []                                   # hook tables came back as hook tables
        handle = got.register_forward_hook(lambda m, i, o: seen.append(o.shape))
        got(x)
        handle.remove()
        got(x)
        assert seen == [(3, 2)]
        got.train()
        got(x).sum().backward()                     # its parameters are leaves again
        assert got.head.weight.grad is not None


def test_whole_module_like_torch(tmp_path):
    """PyTorch refuses a whole module unless its classes are allow-listed, and loads it when
    they are: tracegrad does the same for the same program."""
    torch = pytest.importorskip("torch")
    for lib, classes in ((torch, [torch.nn.Sequential, torch.nn.Linear, torch.nn.ReLU]),
                         (tg, [nn.Sequential, nn.Linear, nn.ReLU])):
        model = lib.nn.Sequential(lib.nn.Linear(3, 2), lib.nn.ReLU())
        lib.save(model, tmp_path / "m.pt")
        with pytest.raises(pickle.UnpicklingError, match="Sequential"):
            lib.load(tmp_path / "m.pt")
        with lib.serialization.safe_globals(classes):
            got = lib.load(tmp_path / "m.pt")
        assert type(got) is type(model) and type(got[0]) is lib.nn.Linear
        assert got[0].weight.tolist() == model[0].weight.tolist()


# atomic saving -------------------------------------------------------------------------------
def test_save_replaces_atomically_and_keeps_the_mode(tmp_path):
    import os
    target = tmp_path / "ckpt.pt"
    save(tg.zeros(3), target)
    os.chmod(target, 0o640)
    save(tg.ones(3), target)
    assert load(target).tolist() == [1.0, 1.0, 1.0]
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]          # no temporary left behind
    umask = os.umask(0o022)
    os.umask(umask)
    save(tg.ones(1), tmp_path / "new.pt")
    assert os.stat(tmp_path / "new.pt").st_mode & 0o777 == 0o666 & ~umask


def test_save_through_symlink_writes_the_file(tmp_path):
    real = tmp_path / "real.pt"
    save(tg.zeros(1), real)
    (tmp_path / "link.pt").symlink_to(real)
    save(tg.ones(1), tmp_path / "link.pt")
    assert (tmp_path / "link.pt").is_symlink() and load(real).tolist() == [1.0]


def test_failed_save_leaves_old_file(tmp_path, monkeypatch):
    target = tmp_path / "ckpt.pt"
    save(tg.zeros(2), target)
    with pytest.raises(AttributeError, match="local object"):   # fails while pickling
        save({"ok": tg.ones(2), "bad": lambda: 0}, target)
    real, calls = zipfile.ZipFile.writestr, []

    def disk_full_at_third_record(self, *args, **kw):
        calls.append(args[0])
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kw)
    monkeypatch.setattr(zipfile.ZipFile, "writestr", disk_full_at_third_record)
    with pytest.raises(OSError, match="No space left"):             # fails while writing
        save({"a": tg.ones(2), "b": tg.ones(3)}, target)
    monkeypatch.undo()
    assert len(calls) == 3 and load(target).tolist() == [0.0, 0.0]
    with pytest.raises(RuntimeError, match="Parent directory .*missing does not exist"):
        save(tg.ones(1), tmp_path / "missing" / "x.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


@pytest.fixture
def cuda_file(monkeypatch):
    """A checkpoint whose storages are recorded at ``cuda:0``, written without a GPU."""
    real = serialization._Pickler.persistent_id

    def at_cuda(self, obj):
        pid = real(self, obj)
        return pid and pid[:3] + ("cuda:0",) + pid[4:]
    monkeypatch.setattr(serialization._Pickler, "persistent_id", at_cuda)
    buf = io.BytesIO()
    save({"w": tg.arange(3.0)}, buf)
    monkeypatch.undo()
    return buf


@pytest.mark.parametrize("map_location", [None, "cpu", tg.device("cpu"), {"cuda:0": "cpu"},
                                          {"cuda:0": tg.device("cpu")}],
                         ids=["None", "str", "device", "dict_str", "dict_device"])
def test_map_location_to_cpu(cuda_file, map_location):
    cuda_file.seek(0)
    w = load(cuda_file, map_location=map_location)["w"]
    assert w.device == tg.device("cpu") and w.tolist() == [0.0, 1.0, 2.0]


def test_map_location_callable(cuda_file):
    seen = []

    def where(storage, location):
        seen.append((location, storage.shape))
        return storage * 2
    cuda_file.seek(0)
    assert load(cuda_file, map_location=where)["w"].tolist() == [0.0, 2.0, 4.0]
    assert seen == [("cuda:0", (3,))]


@pytest.mark.skipif(tg.cuda.is_available(), reason="checks the error raised without a GPU")
@pytest.mark.parametrize("map_location", ["cuda", tg.device("cuda", 0), {"cpu": "cuda:0"}])
def test_map_location_cuda_without_gpu(roundtrip, map_location):
    with pytest.raises(RuntimeError, match="device 'cuda'"):
        roundtrip(tg.ones(2), map_location=map_location)


@pytest.mark.skipif(not tg.cuda.is_available(), reason="needs CuPy and a GPU")
def test_cuda_tensors(roundtrip):
    x = tg.randn(3, 2).cuda()
    assert roundtrip(x).device == tg.device("cpu")
    y = roundtrip(x, map_location="cuda:0")
    assert y.device == x.device and (y.cpu()._data == x.cpu()._data).all()


def test_missing_path_and_not_a_checkpoint(tmp_path):
    missing = tmp_path / "nope.pt"
    with pytest.raises(FileNotFoundError, match="nope.pt"):
        load(missing)
    (tmp_path / "junk.pt").write_bytes(b"not a zip")
    with pytest.raises(RuntimeError, match="junk.pt.* not a zip checkpoint"):
        load(tmp_path / "junk.pt")


def test_layout_and_crafted_out_of_bounds_tensor():
    buf = io.BytesIO()
    save({"w": tg.ones(4), "v": tg.zeros(2, dtype=tg.int8)}, buf)
    names = zipfile.ZipFile(buf).namelist()
    assert sorted(names) == ["archive/byteorder", "archive/data.pkl", "archive/data/0",
                             "archive/data/1", "archive/version"]
    # a pickle asking for a view beyond its storage is refused, not read out of bounds
    bad = io.BytesIO()
    with zipfile.ZipFile(buf) as src, zipfile.ZipFile(bad, "w") as dst:
        for n in names:
            data = src.read(n)
            if n.endswith("data.pkl"):
                assert data.count(b"K\x04\x85") == 1      # the shape (4,): BININT1 4, TUPLE1
                data = data.replace(b"K\x04\x85", b"M\x90\x01\x85")   # (400,)
            dst.writestr(n, data)
    bad.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="out of bounds"):
        load(bad)


def test_loads_files_written_by_torch(tmp_path):
    torch = pytest.importorskip("torch")
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    lin = torch.nn.Linear(3, 2)
    obj = {"view": base[:, 1], "base": base, "half": torch.tensor([1.5], dtype=torch.float16),
           "mask": torch.tensor([True, False]), "ids": torch.tensor([-1, 2**40]),
           "scalar": torch.tensor(2.0), "param": torch.nn.Parameter(torch.ones(2)),
           "linear": lin.state_dict(), "size": torch.Size([2, 3]), "dtype": torch.int8,
           "device": torch.device("cpu"), "n": 3}
    torch.save(obj, tmp_path / "t.pt")
    out = load(tmp_path / "t.pt")
    for k in ("view", "base", "half", "mask", "ids", "scalar"):
        assert out[k].tolist() == obj[k].tolist() and out[k].dtype.name == str(obj[k].dtype)[6:]
    assert type(out["param"]) is nn.Parameter and out["param"].requires_grad
    model = nn.Linear(3, 2)
    model.load_state_dict(out["linear"])
    x = torch.randn(4, 3)
    np.testing.assert_allclose(model(tg.tensor(x.numpy())).detach().numpy(),   # float32 sums
                               lin(x).detach().numpy(), rtol=1e-5, atol=1e-6)  # in any order
    assert out["size"] == (2, 3) and out["dtype"] is tg.int8 and out["n"] == 3
    assert out["device"] == tg.device("cpu")
    torch.save({"b": torch.ones(2, dtype=torch.bfloat16)}, tmp_path / "bf16.pt")
    with pytest.raises(pickle.UnpicklingError, match="BFloat16"):
        load(tmp_path / "bf16.pt")


def test_save_in_place_where_no_temporary_can_be_made(tmp_path, monkeypatch):
    """A writable file in a folder that refuses new files is still saved (in place, with a
    warning saying it is not atomic); where the file is not writable either, the error."""
    import tempfile
    target = tmp_path / "ckpt.pt"
    save(tg.zeros(2), target)

    def refuse(*args, **kw):
        raise PermissionError(13, "Permission denied", kw.get("dir"))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.warns(UserWarning, match="overwritten in place"):
        save(tg.ones(2), target)
    assert load(target).tolist() == [1.0, 1.0]
    with pytest.raises(PermissionError):
        save(tg.ones(2), tmp_path / "new.pt")
