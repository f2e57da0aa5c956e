"""tracegrad.serialization: save/load round trips (through a path and through a BytesIO), every
dtype bit for bit, the weights_only unpickler, map_location, and files written by torch.save."""
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


def test_add_safe_globals(roundtrip, monkeypatch):
    monkeypatch.setattr(serialization, "_SAFE_GLOBALS", dict(serialization._SAFE_GLOBALS))
    serialization.add_safe_globals([UserThing])
    assert roundtrip(UserThing(5)).value == 5


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
    np.testing.assert_allclose(model(tg.tensor(x.numpy())).detach().numpy(),
                               lin(x).detach().numpy(), rtol=1e-6)
    assert out["size"] == (2, 3) and out["dtype"] is tg.int8 and out["n"] == 3
    assert out["device"] == tg.device("cpu")
    torch.save({"b": torch.ones(2, dtype=torch.bfloat16)}, tmp_path / "bf16.pt")
    with pytest.raises(pickle.UnpicklingError, match="BFloat16"):
        load(tmp_path / "bf16.pt")
