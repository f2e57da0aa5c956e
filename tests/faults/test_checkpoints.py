"""Hostile, damaged and half-written checkpoints, injected on purpose.

- Hand-written pickles that try to change the library through an allowed global (BUILD on
  ``float32``, ``Size``, ``device``; SETITEM, APPEND on things the pickle did not create; the
  memo as a detour; calls of non-callables; huge allocations): each is refused with an
  UnpicklingError naming what was refused, and nothing in the library changes.
- A fuzz loop over real checkpoints (bit flips, truncation, inserted opcodes, forged storage
  sizes, ``..`` names, zip bombs): every load either raises a clear error (UnpicklingError or
  RuntimeError, never a crash, a MemoryError or a stray exception type) or returns the original
  data, no global changes and no file is written. ``TRACEGRAD_FUZZ_SCALE=10`` runs a ten times
  bigger sweep (the default stays under a few seconds).
- Atomic save: threads saving one path while another loads it, and processes killed by SIGKILL
  mid-save, leave a complete checkpoint (or none) under the real name.
"""
import collections
import io
import os
import pickle
import random
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
import zipfile
import zlib

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import nn, serialization
from tracegrad._archive import LoadedStorage
from tracegrad.serialization import load, save

CLEAR_ERRORS = (pickle.UnpicklingError, RuntimeError)
SCALE = int(os.environ.get("TRACEGRAD_FUZZ_SCALE", "1"))


# what a hostile load could change --------------------------------------------------------
def library_state():
    """Everything a pickle could reach through the allow-list, as comparable values."""
    from tracegrad.autograd.graph import _HookDict
    classes = (tg.Size, tg.device, tg.dtype, tg.Tensor, nn.Parameter, _HookDict,
               collections.OrderedDict, collections.Counter, set, frozenset, bytearray, bytes)
    return {
        "dtypes": [(repr(d), d.name, d.np, d.itemsize, d.is_floating_point, d.is_signed)
                   for d in tg.dtypes.ALL],
        "classes": {c.__qualname__: {k: id(v) for k, v in vars(c).items()} for c in classes},
        "allowed": {k: id(v) for k, v in serialization._SAFE_GLOBALS.items()},
        "user_allowed": serialization.get_safe_globals(),
        "reprs": (repr(tg.Size([2, 3])), repr(tg.device("cpu")), repr(tg.float32)),
    }


@pytest.fixture
def unchanged_library():
    """The test body must leave the library as it found it, and backward must still work."""
    before = library_state()
    yield
    assert library_state() == before
    x = tg.ones(2, requires_grad=True)
    (x * 3.0).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


# writing pickles by hand -------------------------------------------------------------------
def text(s):
    b = s.encode()
    return b"X" + struct.pack("<I", len(b)) + b


def glob(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


P2 = b"\x80\x02"


def archive(pkl, records=(), prefix="archive"):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(f"{prefix}/data.pkl", pkl)
        z.writestr(f"{prefix}/byteorder", "little")
        for name, data in records:
            z.writestr(name, data)
        z.writestr(f"{prefix}/version", "3\n")
    return buf.getvalue()


def slot_build(target, attr, value):
    """``target`` then BUILD with the slot state ``{attr: value}`` (how setattr is reached)."""
    return P2 + target + b"N}" + text(attr) + value + b"s\x86b."


FLOAT32 = glob("torch", "float32")
HOSTILE = {   # name -> pickle; every one of these changed the library before
    "build_float32_name": slot_build(FLOAT32, "name", text("PWNED")),
    "build_float32_dict": P2 + glob("tracegrad.dtypes", "float32") + b"}" + text("name")
    + text("PWNED") + b"sb.",
    "build_float32_itemsize": slot_build(glob("tracegrad.dtypes", "float32"), "itemsize",
                                         b"K\x07"),
    "build_size_repr": slot_build(glob("torch", "Size"), "__repr__", FLOAT32),
    "build_size_numel": slot_build(glob("tracegrad.tensor", "Size"), "numel", FLOAT32),
    "build_device_eq": slot_build(glob("torch", "device"), "__eq__", FLOAT32),
    "build_device_init": slot_build(glob("tracegrad.device", "device"), "__init__", FLOAT32),
    "build_ordereddict_class": slot_build(glob("collections", "OrderedDict"), "keys", FLOAT32),
    "build_rebuild_fn": P2 + glob("tracegrad.serialization", "_rebuild_tensor") + b"}"
    + text("__defaults__") + b"N" + b"sb.",
    # the memo must not launder an allowed global into something mutable
    "build_via_memo": P2 + FLOAT32 + b"q\x00" + b"0" + b"h\x00" + b"N}" + text("name")
    + text("PWNED") + b"s\x86b.",
    # protocol 4: STACK_GLOBAL and MEMOIZE
    "build_stack_global": b"\x80\x04" + b"\x8c\x05torch\x94\x8c\x07float32\x94\x93\x94" + b"N}"
    + b"\x8c\x04name\x8c\x05PWNED" + b"s\x86b.",
    # SETITEM(S) / APPEND(S) / ADDITEMS on things the pickle did not create
    "setitem_on_class": P2 + glob("collections", "OrderedDict") + text("k") + b"K\x01s.",
    "setitems_on_counter_class": P2 + glob("collections", "Counter") + b"(" + text("k")
    + b"K\x01u.",
    "setitem_on_dtype": P2 + FLOAT32 + text("name") + text("PWNED") + b"s.",
    "append_on_size": P2 + glob("torch", "Size") + b"(K\x01t\x85R" + b"K\x02a.",
    "appends_on_dict": P2 + b"}(K\x01e.",
    "additems_on_frozenset": b"\x80\x04" + b"(K\x01\x91" + b"(K\x02\x90.",
    "additems_on_set_class": b"\x80\x04" + glob("builtins", "set") + b"(K\x02\x90.",
    # BUILD on objects the pickle did create, but of types that take no state
    "build_on_device_instance": P2 + glob("torch", "device") + text("cpu") + b"\x85R"
    + b"N}" + text("type") + text("cuda") + b"s\x86b.",
    "build_on_size_instance": P2 + glob("torch", "Size") + b")R" + b"}" + text("x") + b"K\x01sb.",
    # calls of values and of things outside the allow-list
    "call_a_dtype": P2 + FLOAT32 + b")R.",
    "fake_storage": P2 + glob("torch._utils", "_rebuild_tensor_v2") + b"(]K\x00K\x01\x85K\x01"
    + b"\x85\x89tR.",
    "huge_bytearray": P2 + glob("builtins", "bytearray") + b"\x8a\x06\x00\x00\x00\x00\x00\x01"
    + b"\x85R.",
    "huge_bytes": P2 + glob("builtins", "bytes") + b"\x8a\x06\x00\x00\x00\x00\x00\x01\x85R.",
    "codec_zlib": P2 + glob("_codecs", "encode") + text("x") + text("zlib_codec") + b"\x86R.",
    "os_system": P2 + glob("os", "system") + text("touch pwned") + b"\x85R.",
    "posix_system": P2 + glob("posix", "system") + text("touch pwned") + b"\x85R.",
    "builtins_eval": P2 + glob("builtins", "eval") + text("1") + b"\x85R.",
    "newobj_on_value": P2 + FLOAT32 + b")\x81.",
    # opcodes PyTorch refuses too
    "inst": b"(ibuiltins\nset\n.",
    "obj": b"(" + glob("builtins", "set") + b"o.",
    "ext1": P2 + b"\x82\x01.",
    "next_buffer": b"\x80\x05\x97.",
    # malformed streams
    "no_stop": P2 + b"K\x01",
    "stack_underflow": P2 + b"s.",
    "no_mark": P2 + b"t.",
    "huge_unicode8": b"\x80\x04\x8d" + struct.pack("<Q", 2**62) + b"x.",
    "huge_long4": P2 + b"\x8b" + struct.pack("<i", 2**31 - 1) + b"x.",
    "bad_memo": P2 + b"j\xff\xff\xff\x7f.",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_pickle_refused(name, unchanged_library, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "hostile.pt"
    path.write_bytes(archive(HOSTILE[name]))
    with pytest.raises(pickle.UnpicklingError) as e:
        load(path)
    msg = str(e.value)
    assert msg.startswith("Weights only load failed.") and "WeightsUnpickler error: " in msg
    if name.startswith(("build", "setitem", "append", "additems")):
        assert f"opcode {name.split('_')[0].upper()}" in msg
    if "float32" in name or name == "build_via_memo":
        assert "tracegrad.float32" in msg and "allowed global" in msg
    assert sorted(os.listdir(tmp_path)) == ["hostile.pt"]


def test_refusals_name_what_was_refused():
    def err(pkl):
        with pytest.raises(pickle.UnpicklingError) as e:
            load(io.BytesIO(archive(pkl)))
        return str(e.value).split("WeightsUnpickler error: ")[1]
    assert err(HOSTILE["build_size_repr"]) == (
        "Can only BUILD instances of OrderedDict or of classes allowlisted via "
        "`add_safe_globals` that this load created, but got class tracegrad.tensor.Size "
        "(an allowed global) (opcode BUILD, stopped at byte 47)")
    assert "Unsupported global: GLOBAL os.system" not in err(HOSTILE["os_system"])
    assert "whose module os is blocked" in err(HOSTILE["os_system"])
    assert "bytearray() from a size is not allowed" in err(HOSTILE["huge_bytearray"])
    assert "Unsupported operand 105 (b'i')" in err(HOSTILE["inst"])
    assert "unrecognized function tracegrad.float32" in err(HOSTILE["call_a_dtype"])
    assert "truncated" in err(HOSTILE["huge_unicode8"])


def test_hostile_pickle_refused_by_torch_too(unchanged_library):
    """The same BUILD that rewrote tracegrad.float32 is refused by PyTorch's own loader."""
    torch = pytest.importorskip("torch")
    for name in ("build_float32_name", "build_size_repr", "build_device_eq"):
        with pytest.raises(pickle.UnpicklingError, match="Can only build"):
            torch.load(io.BytesIO(archive(HOSTILE[name])))
        with pytest.raises(pickle.UnpicklingError, match="Can only BUILD"):
            load(io.BytesIO(archive(HOSTILE[name])))
    assert repr(torch.float32) == "torch.float32" and repr(torch.Size([1])) == "torch.Size([1])"


class Trusted:
    def method(self):
        return "method"


def test_allowlisted_class_built_but_not_rewritten(unchanged_library):
    """BUILD fills an instance of an allow-listed class that this load created; it can
    neither touch the class itself nor shadow its methods."""
    good = P2 + glob(__name__, "Trusted") + b")\x81" + b"}" + text("value") + b"K\x05sb."
    on_class = slot_build(glob(__name__, "Trusted"), "method", FLOAT32)
    shadow = P2 + glob(__name__, "Trusted") + b")\x81" + b"}" + text("method") + b"K\x05sb."
    with serialization.safe_globals([Trusted]):
        assert load(io.BytesIO(archive(good))).value == 5
        for pkl in (on_class, shadow):
            with pytest.raises(pickle.UnpicklingError, match="BUILD"):
                load(io.BytesIO(archive(pkl)))
    assert Trusted().method() == "method"


# fuzzing real checkpoints ------------------------------------------------------------------
def base_checkpoints():
    """name -> (bytes, the object it holds)."""
    tg.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    out = {}
    for name, obj in (("state_dict", model.state_dict()),
                      ("nested", {"step": 7, "w": tg.arange(6.0).reshape(2, 3),
                                  "meta": [b"\x00\x01", "s", 1.5, (tg.int8, tg.Size([2]))],
                                  "od": collections.OrderedDict(a=tg.ones(2, dtype=tg.int64)),
                                  "set": {1, 2}, "dev": tg.device("cpu")})):
        buf = io.BytesIO()
        save(obj, buf)
        out[name] = (buf.getvalue(), obj)
    return out


def same(a, b):
    """Structural equality, tensors bit for bit."""
    if isinstance(a, tg.Tensor):
        return (type(a) is type(b) and a.dtype is b.dtype and a.shape == b.shape
                and a.requires_grad == b.requires_grad
                and np.ascontiguousarray(a._data).tobytes() == b._data.tobytes())
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(same(x, y) for x, y in zip(a, b)))
    return type(a) is type(b) and a == b


DATA_TYPES = (dict, list, tuple, set, frozenset, collections.OrderedDict, collections.Counter,
              str, bytes, bytearray, int, float, complex, bool, type(None), tg.Tensor,
              nn.Parameter, tg.Size, tg.device, tg.dtype,
              LoadedStorage)   # a storage record itself (PyTorch's loader returns a storage)


def only_data(obj, seen=None):
    """Whether ``obj`` is built from data types and allowed globals only (what a weights_only
    load may return)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return True
    seen.add(id(obj))
    if any(obj is v for v in serialization._SAFE_GLOBALS.values()):
        return True          # an allowed global itself, as PyTorch's loader may return too
    if type(obj) not in DATA_TYPES:
        return False
    if isinstance(obj, dict):
        return all(only_data(k, seen) and only_data(v, seen) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)):
        return all(only_data(x, seen) for x in obj)
    return True


def try_load(raw, tmp_path):
    """The object loaded from ``raw`` through a path, or the clear error it raised; anything
    else (a MemoryError, a KeyError, a struct.error) fails the test."""
    path = tmp_path / "fuzz.pt"
    path.write_bytes(raw)
    try:
        return load(path), None
    except CLEAR_ERRORS as e:
        assert str(e), "an error must say what went wrong"
        return None, e


def check_error_or_original(raw, original, tmp_path):
    got, err = try_load(raw, tmp_path)
    assert err is not None or same(original, got)


def test_fuzz_bit_flips_and_truncation(tmp_path, unchanged_library, monkeypatch):
    monkeypatch.chdir(tmp_path)
    rng = random.Random(1)
    for raw, original in base_checkpoints().values():
        for _ in range(150 * SCALE):
            b = bytearray(raw)
            for _ in range(rng.choice((1, 1, 2, 8))):
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            check_error_or_original(bytes(b), original, tmp_path)
        for cut in sorted(rng.sample(range(len(raw)), min(len(raw), 60 * SCALE))):
            got, err = try_load(raw[:cut], tmp_path)
            assert err is not None
    assert sorted(os.listdir(tmp_path)) == ["fuzz.pt"]


OPCODES = [bytes([c]) for c in range(256) if c in {ord(op.code) for op in
                                                    __import__("pickletools").opcodes}]


def test_fuzz_inserted_opcodes(tmp_path, unchanged_library, monkeypatch):
    """Opcodes inserted into data.pkl (the archive rewritten with a valid CRC, so the
    unpickler itself meets them): a clear error, or an object made of data types only."""
    monkeypatch.chdir(tmp_path)
    rng = random.Random(2)
    for raw, original in base_checkpoints().values():
        src = zipfile.ZipFile(io.BytesIO(raw))
        records = [(n, src.read(n)) for n in src.namelist()]
        pkl = dict(records)["archive/data.pkl"]
        for _ in range(250 * SCALE):
            at = rng.randrange(2, len(pkl))
            junk = b"".join(rng.choice(OPCODES) + bytes(rng.randrange(256)
                                                        for _ in range(rng.randrange(5)))
                            for _ in range(rng.randrange(1, 4)))
            bad = pkl[:at] + junk + pkl[at:]
            out = io.BytesIO()
            with zipfile.ZipFile(out, "w") as dst:
                for n, d in records:
                    dst.writestr(n, bad if n == "archive/data.pkl" else d)
            got, err = try_load(out.getvalue(), tmp_path)
            assert err is not None or only_data(got)
    assert sorted(os.listdir(tmp_path)) == ["fuzz.pt"]


@pytest.fixture
def save_forged(monkeypatch):
    """``save_forged(obj, edit)``: the checkpoint bytes of ``obj`` whose storage ids were
    passed through ``edit`` (the records hold the true bytes)."""
    real = serialization._Pickler.persistent_id

    def go(obj, edit):
        def forged(self, o):
            pid = real(self, o)
            return pid and edit(pid)
        monkeypatch.setattr(serialization._Pickler, "persistent_id", forged)
        buf = io.BytesIO()
        save(obj, buf)
        monkeypatch.undo()
        return buf.getvalue()
    return go


def with_numel(numel):
    return lambda pid: pid[:4] + (numel,)


def test_forged_storage_sizes(save_forged, unchanged_library):
    """A storage id or a zip header claiming more elements than the record holds is refused
    before anything that size is allocated."""
    obj = {"w": tg.ones(4)}
    for numel, match in ((2**40, "holds 16 bytes, expected 4398046511104"),
                         (2**62, "holds 16 bytes, expected"), (-1, "invalid size -1"),
                         (float("inf"), "invalid size inf"), ("4", "invalid size '4'")):
        with pytest.raises(CLEAR_ERRORS, match=match):
            load(io.BytesIO(save_forged(obj, with_numel(numel))))
    # the pickle and the record's headers agree on 2**31 bytes that the file does not hold
    raw = save_forged(obj, with_numel(2**29))
    head = struct.pack("<II", 16, 16)                   # compressed and plain size, 2 headers
    assert raw.count(head) == 2
    forged = raw.replace(head, struct.pack("<II", 2**31, 2**31))
    with pytest.raises(RuntimeError, match="'archive/data/0' declares 2147483648 bytes in an "
                                           "archive of"):
        load(io.BytesIO(forged))
    # a view far beyond its storage
    buf = io.BytesIO()
    save(obj, buf)
    bad = rezip(buf.getvalue(), lambda d: d.replace(b"K\x04\x85",
                                                    b"\x8a\x05\x00\x00\x00\x00\x01\x85"))
    with pytest.raises(pickle.UnpicklingError, match="out of bounds"):
        load(io.BytesIO(bad))


def rezip(raw, edit):
    """The archive ``raw`` with its data.pkl passed through ``edit`` (with a fresh CRC)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as src, zipfile.ZipFile(out, "w") as dst:
        for n in src.namelist():
            dst.writestr(n, edit(src.read(n)) if n.endswith("data.pkl") else src.read(n))
    return out.getvalue()


def deflated_record(name, size, declared=None):
    """``(name, deflated body, declared size, CRC)`` of ``size`` zero bytes: the CRC is the
    true content's; the declared size may lie."""
    z, chunk, crc = zlib.compressobj(1, zlib.DEFLATED, -15), bytes(1 << 20), 0
    body = []
    for _ in range(size >> 20):
        body.append(z.compress(chunk))
        crc = zlib.crc32(chunk, crc)
    rest = bytes(size % (1 << 20))
    body += [z.compress(rest), z.flush()]
    return name, zipfile.ZIP_DEFLATED, b"".join(body), size if declared is None else declared, \
        zlib.crc32(rest, crc)


def zip_by_hand(entries):
    """A zip of ``(name, method, body, declared size, crc)`` records, headers written as given
    (zipfile would refuse to write a lie)."""
    out, central = io.BytesIO(), []
    for name, method, body, declared, crc in entries:
        name, offset = name.encode(), out.tell()
        out.write(struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(body),
                              declared, len(name), 0) + name + body)
        central.append(struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc,
                                   len(body), declared, len(name), 0, 0, 0, 0, 0, offset) + name)
    start = out.tell()
    out.write(b"".join(central))
    out.write(struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, len(central), len(central),
                          out.tell() - start, start, 0))
    return out.getvalue()


def test_zip_bombs(save_forged, unchanged_library):
    """A deflated record that inflates far beyond what the checkpoint needs, or claims more
    than DEFLATE can produce, is refused without inflating it: memory stays small."""
    def bomb_in(raw, record):
        src = zipfile.ZipFile(io.BytesIO(raw))
        kept = [(n, zipfile.ZIP_STORED, src.read(n), src.getinfo(n).file_size,
                 src.getinfo(n).CRC) for n in src.namelist() if n != record[0]]
        return zip_by_hand(kept + [record])
    honest = save_forged({"w": tg.ones(6)}, lambda pid: pid)
    huge = 2**32 - 4                                     # the most a plain zip header holds
    cases = {
        # 32 MiB of zeros (146 KiB deflated) where the pickle expects 24 bytes
        "inflates beyond the pickle's size": bomb_in(
            honest, deflated_record("archive/data/0", 32 << 20)),
        # the pickle and the header both claim 4 GiB behind 1 MiB of zeros deflated
        "claims more than DEFLATE holds": bomb_in(
            save_forged({"w": tg.ones(6)}, with_numel(huge // 4)),
            deflated_record("archive/data/0", 1 << 20, declared=huge)),
        # declares 24 bytes that inflate to 32 MiB: the read stops at 24, the CRC fails
        "lies small": bomb_in(honest, deflated_record("archive/data/0", 32 << 20, 24)),
    }
    for what, raw in cases.items():
        tracemalloc.start()
        try:
            with pytest.raises(RuntimeError, match="archive/data/0"):
                load(io.BytesIO(raw))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 4 << 20, (what, peak)
    # an honest deflated checkpoint still loads (PyTorch reads those too)
    ok = deflated_record("archive/data/0", 24)
    assert load(io.BytesIO(bomb_in(honest, ok)))["w"].tolist() == [0.0] * 6


def test_path_names_and_keys(tmp_path, save_forged, unchanged_library, monkeypatch):
    """Names with ``..`` are never followed: nothing is extracted, a storage key must be a
    plain name, and the archive folder must be one."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    buf = io.BytesIO()
    save({"w": tg.ones(2)}, buf)
    raw = buf.getvalue()
    # a stray record pointing outside is ignored: the file loads and nothing appears
    src = zipfile.ZipFile(io.BytesIO(raw))
    extra = archive(src.read("archive/data.pkl"), [(n, src.read(n)) for n in src.namelist()
                                                   if "/data/" in n]
                    + [("../../outside.txt", b"x"), ("/abs.txt", b"y")])
    assert load(io.BytesIO(extra))["w"].tolist() == [1.0, 1.0]
    # a storage key that climbs out of the archive folder
    bad = save_forged({"w": tg.ones(2)}, lambda pid: pid[:2] + ("../../etc/x",) + pid[3:])
    with pytest.raises(RuntimeError, match="storage key '../../etc/x' is not a plain name"):
        load(io.BytesIO(bad))
    # data.pkl under ".."
    with pytest.raises(RuntimeError, match="not a plain name"):
        load(io.BytesIO(archive(P2 + b"N.", prefix="..")))
    after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert after == before


# atomic save -------------------------------------------------------------------------------
def test_threads_saving_one_path(tmp_path):
    """Four threads save different checkpoints to one path while a fifth loads it: every load
    sees one whole checkpoint (before, 23 of 60 rounds left a file with a bad CRC)."""
    path = tmp_path / "shared.pt"
    save({"who": -1, "w": tg.full((50_000,), -1.0)}, path)
    stop, seen, errors = threading.Event(), [], []

    def saver(k):
        try:
            for r in range(8):
                v = float(k * 100 + r)
                save({"who": v, "w": tg.full((50_000,), v)}, path)
        except Exception as e:   # noqa: BLE001 - reported below
            errors.append(e)

    def reader():
        while not stop.is_set():
            try:
                got = load(path)
                assert (got["w"]._data == got["who"]).all()
                seen.append(got["who"])
            except Exception as e:   # noqa: BLE001 - reported below
                errors.append(e)
                return
    threads = [threading.Thread(target=saver, args=(k,)) for k in range(4)]
    watcher = threading.Thread(target=reader)
    watcher.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    watcher.join()
    assert not errors, errors
    final = load(path)
    assert final["who"] in {float(k * 100 + 7) for k in range(4)}
    assert (final["w"]._data == final["who"]).all() and seen
    assert os.listdir(tmp_path) == ["shared.pt"]      # no temporary file left behind


CHILD = textwrap.dedent("""
    import sys, time
    import tracegrad as tg
    path = sys.argv[1]
    w = tg.zeros(2_000_000)             # 8 MB: a save takes long enough to be cut short
    for i in range(1, 10_000):
        w._data[:] = i
        t = time.perf_counter()
        print("saving", i, flush=True)
        tg.save({"i": i, "w": w}, path)
        print("saved", i, time.perf_counter() - t, flush=True)
""")


def test_killed_mid_save(tmp_path):
    """SIGKILL during a save leaves the last complete checkpoint under the real name, or no
    file when the first save is cut; before, a half-written zip stayed there."""
    script = tmp_path / "saver.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    # (the save to cut, when: a fraction of the last save's duration after it starts)
    plans = [(1, 0.05), (2, 0.4), (3, 0.8)]
    results = [None] * len(plans)

    def drive(k, cut, fraction):
        target = tmp_path / f"ckpt{k}.pt"
        proc = subprocess.Popen([sys.executable, str(script), str(target)],
                                stdout=subprocess.PIPE, text=True, env=env)
        last, lines = 0.05, []
        for line in proc.stdout:
            lines.append(line)
            word, i, *took = line.split()
            if word == "saved":
                last = float(took[0])
            elif int(i) == cut:
                time.sleep(fraction * last)
                os.kill(proc.pid, signal.SIGKILL)
                break
        lines += proc.stdout.read().splitlines()     # what it printed before dying
        proc.wait(timeout=60)
        proc.stdout.close()
        results[k] = (proc.returncode, target, [ln.split()[:2] for ln in lines if ln.strip()])

    threads = [threading.Thread(target=drive, args=(k, *plan)) for k, plan in enumerate(plans)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    cut_mid_save = 0
    for returncode, target, lines in results:
        assert returncode == -signal.SIGKILL
        started = max(int(i) for word, i in lines if word == "saving")
        done = max((int(i) for word, i in lines if word == "saved"), default=0)
        leftovers = [p for p in os.listdir(tmp_path) if p.startswith(f".{target.name}.")]
        cut_mid_save += done < started and bool(leftovers)
        if not target.exists():
            assert done == 0, "a completed save must stay on disk"
            continue
        got = load(target)                      # complete: the last save, or the one cut
        assert got["i"] in (done, started) and (got["w"]._data == got["i"]).all()
    assert cut_mid_save, "no child was killed inside a save: the test proved nothing"
