"""The profiler: events and their names, nesting, the table's layout, memory, the Chrome trace.

Timings are never pinned; the table is pinned by its header row and its row
names, and compared with torch.profiler's header where PyTorch is installed.
"""
import json
import re
import time

import pytest

import tracegrad as tg
from tracegrad import _hooks
from tracegrad.autograd import engine
from tracegrad.autograd.profiler_util import _format_memory, _format_time
from tracegrad.profiler import ProfilerActivity, profile, record_function

BASE_HEADER = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]


def _program(lib):
    """x ** 2, then mm, then sum, then backward: the small program the tables come from."""
    x = lib.ones(3, 4, requires_grad=True)
    w = lib.ones(4, 5, requires_grad=True)
    y = (x ** 2).mm(w).sum()
    y.backward()
    return x, w


def _profile(**kwargs):
    x = tg.ones(3, 4, requires_grad=True)
    w = tg.ones(4, 5, requires_grad=True)
    with profile(**kwargs) as prof:
        y = (x ** 2).mm(w).sum()
        y.backward()
    return prof


def _split(line):
    return [c for c in re.split(r"\s{2,}", line.strip()) if c]


def _header_and_rows(table):
    lines = table.rstrip("\n").split("\n")
    assert set(lines[0]) == {"-", " "} and lines[2] == lines[0] and lines[-2] == lines[0]
    return _split(lines[1]), [_split(line) for line in lines[3:-2]], lines[-1]


def _names(events):
    return [e.key for e in events]


# names and nesting -------------------------------------------------------------------------

def test_forward_ops_appear_under_the_names_the_user_called():
    x = tg.ones(3, 4, requires_grad=True)
    w = tg.ones(4, 5, requires_grad=True)
    with profile() as prof:
        y = (x ** 2).mm(w).sum()
    # ``mm`` and ``pow`` bind the primitives "matmul" and "pow_scalar": the user's names win.
    assert _names(prof.events()) == ["pow", "mm", "sum"]
    assert all(e.cpu_parent is None and not e.cpu_children for e in prof.events())
    assert y.grad_fn is not None


def test_backward_nodes_appear_with_the_ops_of_their_derivatives_inside():
    prof = _profile()
    names = _names(prof.events())
    for node in ("SumBackward0", "MmBackward0", "PowBackward0",
                 "torch::autograd::AccumulateGrad"):
        assert node in names
    assert names.count("torch::autograd::AccumulateGrad") == 2
    mm_node = next(e for e in prof.events() if e.key == "MmBackward0")
    assert mm_node.cpu_children and all(c.cpu_parent is mm_node for c in mm_node.cpu_children)
    assert mm_node.kind == "node"


def test_a_composite_is_one_event_enclosing_its_ops():
    x = tg.ones(3, 4, requires_grad=True)
    with profile() as prof:
        x.mean()
        tg.softmax(x, dim=1)
    top = [e for e in prof.events() if e.cpu_parent is None]
    assert _names(top) == ["mean", "softmax"]
    assert _names(top[0].cpu_children) == ["sum", "div"]
    assert "exp" in _names(top[1].cpu_children)
    for parent in top:
        for child in parent.cpu_children:
            assert parent.start_ns <= child.start_ns <= child.end_ns <= parent.end_ns


def test_in_place_op_under_its_method_name():
    x = tg.ones(3, requires_grad=True)
    with profile() as prof:
        y = x * 2
        y.add_(1)
    assert _names(prof.events()) == ["mul", "add_"]


def test_in_place_op_through_a_view_is_one_event_enclosing_its_ops():
    # add_ on a view of a tensor with history makes the op call, then rebases the view's base:
    # the event named after the first call must become the parent of all of them.
    x = tg.ones(3, 4, requires_grad=True)
    with profile(record_shapes=True) as prof:
        y = x * 1
        v = y[0]
        v.add_(1)
        y.sum().backward()
    events = prof.events()
    assert len({e.id for e in events}) == len(events)          # each event listed once
    top = [e for e in events if e.cpu_parent is None]
    assert _names(top)[:4] == ["mul", "index", "add_", "sum"]
    add_ = top[2]
    assert add_.input_shapes == [[4], []]
    assert "add" in _names(add_.cpu_children) and len(add_.cpu_children) >= 2
    assert "torch::autograd::CopySlices" in _names(events)
    assert x.grad is not None


def test_record_function_total_includes_children_and_self_time_excludes_them():
    x = tg.ones(3, 4)
    with profile() as prof:
        with record_function("outer"):
            with record_function("inner"):
                time.sleep(0.02)
                y = x * 2
            y + 1
    outer, inner, mul, add = prof.events()
    assert _names([outer, inner, mul, add]) == ["outer", "inner", "mul", "add"]
    assert inner.cpu_parent is outer and mul.cpu_parent is inner and add.cpu_parent is outer
    assert inner.cpu_time_total >= 20000            # us: the sleep is in the block
    assert outer.cpu_time_total >= inner.cpu_time_total + add.cpu_time_total
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - inner.cpu_time_total - add.cpu_time_total)
    assert inner.self_cpu_time_total == pytest.approx(inner.cpu_time_total - mul.cpu_time_total)
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["outer"].self_cpu_time_total < avg["outer"].cpu_time_total
    assert avg["inner"].is_user_annotation and not avg["mul"].is_user_annotation


def test_record_function_as_decorator_and_without_a_profiler():
    @record_function("step")
    def step(x):
        return x * 3

    assert not tg.profiler._active()
    step(tg.ones(2))                        # no profiler: nothing to record, no error
    with profile() as prof:
        assert tg.profiler._active()
        step(tg.ones(2))
        step(tg.ones(2))
    assert _names(prof.events()) == ["step", "mul", "step", "mul"]
    assert {e.key: e.count for e in prof.key_averages()} == {"step": 2, "mul": 2}


def test_nothing_is_recorded_after_the_block_and_the_hooks_are_gone():
    x = tg.ones(3, requires_grad=True)
    with profile() as prof:
        (x * 2).sum().backward()
    n = len(prof.events())
    assert _hooks.bind_hook is None and engine.node_hook is None
    assert not tg.profiler._active()
    (x * 2).sum().backward()
    with record_function("late"):
        x + 1
    assert len(prof.events()) == n
    assert "late" not in _names(prof.events())


def test_hooks_are_removed_when_the_block_raises():
    with pytest.raises(ZeroDivisionError):
        with profile():
            tg.ones(2) * 2
            1 / 0
    assert _hooks.bind_hook is None and engine.node_hook is None


def test_an_op_that_raises_is_recorded():
    with profile() as prof:
        with pytest.raises(RuntimeError, match="mm"):
            tg.ones(2, 3).mm(tg.ones(2, 3))
        tg.ones(2) + 1
    assert _names(prof.events()) == ["mm", "add"]


def test_each_thread_has_its_own_events():
    import threading
    out = {}

    def work():
        out["tid"] = threading.get_native_id()
        with record_function("worker"):
            tg.ones(2) * 2

    with profile() as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
        tg.ones(2) + 1
    by_name = {e.key: e for e in prof.events()}
    assert by_name["worker"].thread == out["tid"] != by_name["add"].thread
    assert by_name["mul"].cpu_parent is by_name["worker"]
    assert by_name["add"].cpu_parent is None


def test_start_stop_and_autograd_profiler_alias():
    prof = tg.autograd.profiler.profile(record_shapes=True)
    prof.start()
    tg.ones(2, 3) + 1
    prof.stop()
    assert _names(prof.events()) == ["add"]
    assert prof.events()[0].input_shapes == [[2, 3], [], []]     # input, other, alpha
    off = tg.autograd.profiler.profile(enabled=False)
    with off:
        tg.ones(2) + 1
    assert len(off.events()) == 0 and str(off) == ""


def test_only_one_profiler_records_at_a_time():
    with profile():
        with pytest.raises(RuntimeError, match="already recording"):
            with profile():
                pass
    assert _hooks.bind_hook is None


def test_schedule_records_active_steps_and_calls_on_trace_ready():
    ready = []
    sched = tg.profiler.schedule(wait=1, warmup=1, active=2)
    x = tg.ones(2)
    with profile(activities=[ProfilerActivity.CPU], schedule=sched,
                 on_trace_ready=lambda p: ready.append(_names(p.events()))) as prof:
        for _ in range(4):
            x * 2
            prof.step()
    assert ready == [["ProfilerStep#2", "mul", "ProfilerStep#3", "mul"]]


# the table ----------------------------------------------------------------------------------

def test_table_header_rows_and_footer():
    prof = _profile()
    header, rows, footer = _header_and_rows(prof.key_averages().table(row_limit=-1))
    assert header == BASE_HEADER + ["# of Calls"]
    names = [r[0] for r in rows]
    assert names[:3] == ["pow", "mm", "sum"]        # first appearance order when unsorted
    for node in ("SumBackward0", "MmBackward0", "PowBackward0",
                 "torch::autograd::AccumulateGrad"):
        assert node in names
    assert len(names) == len(set(names))             # one row per name
    for r in rows:
        assert len(r) == len(header)
        assert re.fullmatch(r"-?\d+\.\d\d%", r[1]) and re.fullmatch(r"\d+\.\d{3}(us|ms|s)", r[2])
    assert re.fullmatch(r"Self CPU time total: \d+\.\d{3}(us|ms|s)", footer)
    acc = next(r for r in rows if r[0] == "torch::autograd::AccumulateGrad")
    assert acc[-1] == "2"


def test_table_sort_keys_and_row_limit():
    prof = _profile()
    avgs = prof.key_averages()
    for key in ("cpu_time_total", "self_cpu_time_total", "cpu_time", "self_cpu_time", "count",
                "cpu_memory_usage", "self_cpu_memory_usage"):
        _, rows, _ = _header_and_rows(avgs.table(sort_by=key, row_limit=-1))
        by_name = {e.key: getattr(e, key) for e in avgs}
        values = [by_name[r[0]] for r in rows]
        assert values == sorted(values, reverse=True), key
    _, rows, _ = _header_and_rows(avgs.table(sort_by="count", row_limit=2))
    assert len(rows) == 2 and rows[0][-1] == "2"
    with pytest.raises(ValueError, match="sort_by"):
        avgs.table(sort_by="wall_time")


def test_self_cpu_percentages_add_up_and_footer_is_the_sum():
    prof = _profile()
    avgs = prof.key_averages()
    _, rows, footer = _header_and_rows(avgs.table())
    assert sum(float(r[1][:-1]) for r in rows) == pytest.approx(100, abs=0.1)
    assert footer == f"Self CPU time total: {_format_time(avgs.self_cpu_time_total)}"


def test_input_shapes_column_with_group_by_input_shape():
    prof = _profile(record_shapes=True)
    header, _, _ = _header_and_rows(prof.key_averages().table())
    assert "Input Shapes" not in header
    header, rows, _ = _header_and_rows(prof.key_averages(group_by_input_shape=True).table())
    assert header == BASE_HEADER + ["# of Calls", "Input Shapes"]
    shapes = {(r[0], r[-1]) for r in rows}
    assert ("mm", "[[3, 4], [4, 5]]") in shapes
    assert ("pow", "[[3, 4], []]") in shapes
    assert ("MmBackward0", "[[3, 5]]") in shapes
    # the two AccumulateGrad calls have different shapes, so they are two rows now
    assert [r[0] for r in rows].count("torch::autograd::AccumulateGrad") == 2


def test_memory_columns():
    prof = _profile(profile_memory=True)
    header, rows, _ = _header_and_rows(prof.key_averages().table())
    assert header == BASE_HEADER + ["CPU Mem", "Self CPU Mem", "# of Calls"]
    row = {r[0]: r for r in rows}
    assert row["mm"][6:8] == ["60 B", "60 B"]        # a 3x5 float32 result
    assert row["sum"][6:8] == ["4 B", "4 B"]
    mm_node = next(e for e in prof.events() if e.key == "MmBackward0")
    assert mm_node.self_cpu_memory_usage == 0
    assert mm_node.cpu_memory_usage == sum(c.cpu_memory_usage for c in mm_node.cpu_children) > 0
    assert _format_memory(2048) == "2.00 KB" and _format_memory(3 * 1024 ** 2) == "3.00 MB"


def test_time_format_matches_pytorch():
    for us, text in ((12.0, "12.000us"), (1500.0, "1.500ms"), (2_500_000.0, "2.500s")):
        assert _format_time(us) == text
    pytest.importorskip("torch")
    from torch.autograd import profiler_util
    for us in (0.5, 999.9994, 1000.0, 1234.5678, 7_654_321.0):
        assert _format_time(us) == profiler_util._format_time(us)
        assert _format_memory(int(us)) == profiler_util._format_memory(int(us))


def test_print_prof_is_the_event_table():
    prof = _profile()
    header, rows, _ = _header_and_rows(str(prof))
    assert header == BASE_HEADER + ["# of Calls"]
    assert [r[0] for r in rows] == _names(prof.events())


def test_with_stack_source_location():
    with profile(with_stack=True) as prof:
        tg.ones(2) * 2
    evt = prof.events()[0]
    assert any("test_profiler.py" in s for s in evt.stack)
    header, _, _ = _header_and_rows(prof.key_averages(group_by_stack_n=1).table())
    assert header[-1] == "Source Location"


def _torch_table_header(torch, **kwargs):
    from torch.profiler import profile as torch_profile
    group = kwargs.pop("group_by_input_shape", False)
    with torch_profile(activities=[torch.profiler.ProfilerActivity.CPU], **kwargs) as prof:
        _program(torch)
    return _header_and_rows(prof.key_averages(group_by_input_shape=group).table())


@pytest.mark.parametrize("kwargs", [
    {},
    {"profile_memory": True},
    {"record_shapes": True, "group_by_input_shape": True},
    {"record_shapes": True, "profile_memory": True, "group_by_input_shape": True},
])
def test_header_and_layout_match_torch_profiler(kwargs):
    torch = pytest.importorskip("torch")
    t_header, t_rows, t_footer = _torch_table_header(torch, **dict(kwargs))
    kw = dict(kwargs)
    group = kw.pop("group_by_input_shape", False)
    table = _profile(**kw).key_averages(group_by_input_shape=group).table()
    header, rows, footer = _header_and_rows(table)
    assert header == t_header
    assert footer.split(":")[0] == t_footer.split(":")[0]
    # Column widths after the name column are PyTorch's (12, and the shapes column's rule).
    sep = table.split("\n")[0]
    assert [len(s) for s in sep.split()][1:len(BASE_HEADER)] == [12] * (len(BASE_HEADER) - 1)
    names = {r[0] for r in t_rows}
    assert {"MmBackward0", "PowBackward0", "torch::autograd::AccumulateGrad"} <= names
    assert {"MmBackward0", "PowBackward0", "torch::autograd::AccumulateGrad"} <= {
        r[0] for r in rows}


# the Chrome trace --------------------------------------------------------------------------

def test_chrome_trace_nests_and_loads(tmp_path):
    x = tg.ones(3, 4, requires_grad=True)
    with profile(record_shapes=True) as prof:
        with record_function("model"):
            y = (x ** 2).mean()
        with record_function("compiled:f:forward"):
            z = x * 3
        (y + z.sum()).backward()
    path = prof.export_chrome_trace(str(tmp_path / "trace.json"))
    with open(path) as f:
        trace = json.load(f)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(prof.events())
    for e in events:
        assert e["dur"] >= 0 and e["ts"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
    names = [e["name"] for e in events]
    assert {"model", "mean", "pow", "PowBackward0", "torch::autograd::AccumulateGrad"} <= set(
        names)
    cats = {e["name"]: e["cat"] for e in events}
    assert cats["model"] == "user_annotation" and cats["pow"] == "cpu_op"
    assert cats["compiled:f:forward"] == "kernel"
    pow_event = next(e for e in events if e["name"] == "pow")
    assert pow_event["args"]["Input Dims"] == [[3, 4], []]
    assert pow_event["args"]["Input type"] == ["float", "Scalar"]
    # Intervals on one thread either nest or are disjoint: what Perfetto needs to stack them.
    eps = 1e-3
    by_tid = {}
    for e in events:
        by_tid.setdefault(e["tid"], []).append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for intervals in by_tid.values():
        intervals.sort(key=lambda iv: (iv[0], -iv[1]))
        open_ = []
        for start, end, name in intervals:
            while open_ and open_[-1][1] <= start + eps:
                open_.pop()
            if open_:
                assert end <= open_[-1][1] + eps, (name, open_[-1][2])
            open_.append((start, end, name))
    model = next(e for e in events if e["name"] == "model")
    mean = next(e for e in events if e["name"] == "mean")
    assert model["ts"] <= mean["ts"] and mean["ts"] + mean["dur"] <= model["ts"] + model[
        "dur"] + eps


def test_chrome_trace_gzip(tmp_path):
    import gzip
    prof = _profile()
    path = prof.export_chrome_trace(tmp_path / "trace.json.gz")
    with gzip.open(path, "rt") as f:
        assert "traceEvents" in json.load(f)
