"""codegen/python.py's ``load``: a generated function with a frame of nearly one of CPython's
16 KiB frame-stack chunks gets a chunk of its own per call, so that the Python calls it makes
do not each map a new chunk and unmap it (a page fault each)."""
import resource
import threading

from tracegrad.codegen import python as py

CALLS = 200
CHUNK_SLOTS = 16 * 1024 // 8    # CPython's chunk, in 8-byte slots


def _big(n_locals):
    """A function of ``n_locals`` locals that calls ``f`` ``CALLS`` times."""
    body = [f"t{i} = {i}" for i in range(n_locals - 2)]
    body += [f"for k in range({CALLS}):", "    f()", f"return t{n_locals - 3} + k"]
    return py.function("big", ["f"], [(None, line) for line in body])


def _callee():
    a = b = c = d = e = g = h = 1      # a frame of some 20 slots
    return a + b + c + d + e + g + h


def _faults_in_fresh_thread(fn):
    """Minor page faults while ``fn(_callee)`` runs in a thread of its own: a new thread's
    frame stack starts from an empty chunk, so where a frame lands is the same every run."""
    out = {}

    def run():
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        out["result"] = fn(_callee)
        out["faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    t = threading.Thread(target=run)
    t.start()
    t.join()
    return out


def test_big_frames_get_a_chunk_of_their_own():
    loaded = {n: py.load(_big(n), f"frames_{n}", {})[0]["big"]
              for n in range(1600, CHUNK_SLOTS, 16)}
    faults = {}
    for n, fn in loaded.items():
        got = _faults_in_fresh_thread(fn)
        assert got["result"] == n - 3 + CALLS - 1
        faults[n] = got["faults"]
    # without a chunk of its own, one of these sizes leaves too little room after the frame,
    # and each of the calls faults in a fresh chunk (CALLS faults and more)
    assert max(faults.values()) < CALLS // 4, faults
    assert all(fn.__code__.co_nlocals + fn.__code__.co_stacksize > CHUNK_SLOTS
               for fn in loaded.values())
    small, _ = py.load(_big(50), "frames_small", {})
    assert small["big"].__code__.co_stacksize < 10          # a small frame is left as it is
