"""The profiler's reports: PyTorch's table (``EventList.table``, column for column as
``torch.autograd.profiler_util``'s, with its number formats) and the Chrome trace-event
JSON (``EventList.export_chrome_trace``: Perfetto, chrome://tracing)."""
import os

_US_IN_SECOND = 1000.0 * 1000.0
_US_IN_MS = 1000.0


def _format_time(time_us):
    if time_us >= _US_IN_SECOND:
        return f"{time_us / _US_IN_SECOND:.3f}s"
    if time_us >= _US_IN_MS:
        return f"{time_us / _US_IN_MS:.3f}ms"
    return f"{time_us:.3f}us"


def _format_time_share(time_us, total_time_us):
    if total_time_us == 0:
        return "NaN"
    return f"{time_us * 100.0 / total_time_us:.2f}%"


def _format_memory(nbytes):
    kb, mb, gb = 1024, 1024 ** 2, 1024 ** 3
    if abs(nbytes) >= gb:
        return f"{nbytes * 1.0 / gb:.2f} GB"
    if abs(nbytes) >= mb:
        return f"{nbytes * 1.0 / mb:.2f} MB"
    if abs(nbytes) >= kb:
        return f"{nbytes * 1.0 / kb:.2f} KB"
    return f"{nbytes} B"


SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "cpu_time", "self_cpu_time", "count",
             "cpu_memory_usage", "self_cpu_memory_usage", "device_time_total",
             "self_device_time_total", "cuda_time_total", "self_cuda_time_total",
             "device_time", "cuda_time", "device_memory_usage", "self_device_memory_usage",
             "cuda_memory_usage", "self_cuda_memory_usage")


def _sort_value(evt, sort_by):
    if sort_by not in SORT_KEYS:
        raise ValueError(f"table: unknown sort_by {sort_by!r}; expected one of "
                         f"{', '.join(SORT_KEYS)}")
    return getattr(evt, sort_by)


def _build_table(events, sort_by, row_limit, max_src_column_width, max_name_column_width,
                 max_shapes_column_width, header, top_level_events_only, time_unit,
                 profile_memory, use_device=None):
    """The text of PyTorch's ``_build_table``, column for column (device columns where an
    event has device time, as PyTorch's)."""
    if len(events) == 0:
        return ""
    has_device_time = bool(use_device) and any(e.self_device_time_total > 0 for e in events)
    has_device_mem = bool(use_device) and any(e.self_device_memory_usage > 0 for e in events)
    dev = (use_device or "None").upper()
    if sort_by is not None:
        events = sorted(events, key=lambda e: _sort_value(e, sort_by), reverse=True)
    has_shapes = any(e.input_shapes is not None and len(e.input_shapes) > 0 for e in events)
    name_width = max(len(e.key) for e in events) + 4
    if max_name_column_width is not None:
        name_width = min(name_width, max_name_column_width)
    shapes_width = max(len(str(e.input_shapes)) for e in events) + 4
    if max_shapes_column_width is not None:
        shapes_width = min(shapes_width, max_shapes_column_width)
    stacks = [e.stack for e in events if e.stack]
    src_width = None
    if stacks:
        src_width = max(len(s) for stack in stacks for s in stack) + 4
        if max_src_column_width is not None:
            src_width = min(src_width, max_src_column_width)

    headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
    if has_device_time:
        headers += [f"Self {dev}", f"Self {dev} %", f"{dev} total", f"{dev} time avg"]
    if profile_memory:
        headers += ["CPU Mem", "Self CPU Mem"]
        if has_device_mem:
            headers += [f"{dev} Mem", f"Self {dev} Mem"]
    headers.append("# of Calls")
    widths = [name_width] + [12] * (len(headers) - 1)
    aligns = [">"] * len(headers)
    if has_shapes:
        headers.append("Input Shapes")
        widths.append(shapes_width)
        aligns.append(">")
    if stacks:
        headers.append("Source Location")
        widths.append(src_width)
        aligns.append("<")
    row_format = "".join("{: " + a + str(w) + "}  " for a, w in zip(aligns, widths))
    header_sep = "".join("-" * w + "  " for w in widths)
    line_length = sum(w + 2 for w in widths) - 2

    def fmt_time(us):
        if time_unit == "s":
            return f"{us / _US_IN_SECOND:.3f}s"
        if time_unit == "ms":
            return f"{us / _US_IN_MS:.3f}ms"
        if time_unit == "us":
            return f"{us:.3f}us"
        return _format_time(us)

    def trim_path(path):
        if len(path) > src_width:
            path = path[len(path) - src_width:]
            if len(path) > 3:
                path = "..." + path[3:]
        return path

    total = sum(e.self_cpu_time_total for e in events)
    device_total = sum(e.self_device_time_total for e in events)
    out = []
    if header is not None:
        out += ["=" * line_length, header]
    if top_level_events_only:
        out += ["=" * line_length, "This report only display top-level ops statistics"]
    out += [header_sep, row_format.format(*headers), header_sep]
    shown = 0
    for evt in events:
        if shown == row_limit:
            break
        if top_level_events_only and evt.cpu_parent is not None:
            continue
        shown += 1
        name = evt.key
        if max_name_column_width is not None and len(name) >= max_name_column_width - 3:
            name = name[:max_name_column_width - 3] + "..."
        row = [name, _format_time_share(evt.self_cpu_time_total, total),
               fmt_time(evt.self_cpu_time_total),
               _format_time_share(evt.cpu_time_total, total), fmt_time(evt.cpu_time_total),
               fmt_time(evt.cpu_time)]
        if has_device_time:
            row += [fmt_time(evt.self_device_time_total),
                    _format_time_share(evt.self_device_time_total, device_total),
                    fmt_time(evt.device_time_total), fmt_time(evt.device_time)]
        if profile_memory:
            row += [_format_memory(evt.cpu_memory_usage),
                    _format_memory(evt.self_cpu_memory_usage)]
            if has_device_mem:
                row += [_format_memory(evt.device_memory_usage),
                        _format_memory(evt.self_device_memory_usage)]
        row.append(evt.count)
        if has_shapes:
            row.append(str(evt.input_shapes)[:shapes_width])
        if stacks:
            stack = evt.stack or []
            row.append(trim_path(stack[0]) if stack else "")
        out.append(row_format.format(*row))
        if stacks:
            blanks = [""] * (len(headers) - 1)
            for entry in (evt.stack or [])[1:]:
                out.append(row_format.format(*blanks, trim_path(entry)))
            out.append(row_format.format(*blanks, ""))
    out += [header_sep, f"Self CPU time total: {fmt_time(total)}"]
    if has_device_time:
        out.append(f"Self {dev} time total: {fmt_time(device_total)}")
    return "\n".join(out) + "\n"


# Chrome trace ---------------------------------------------------------------------------

_CATEGORY = {"op": "cpu_op", "node": "cpu_op", "annotation": "user_annotation"}


def _category(evt):
    # The compiler runtime reports through record_function; its names pick its category.
    if evt.kind == "annotation":
        if evt.name.startswith("compiled:"):
            return "kernel"
        if evt.name.startswith("compile:"):
            return "compile"
    return _CATEGORY[evt.kind]


def chrome_trace(events, meta, trace_name=None):
    """The trace-event JSON object: one complete ("X") event per recorded interval, ts and dur
    in microseconds since the profiler started; nested events share their parent's tid."""
    pid = meta.get("pid", os.getpid())
    trace = []
    threads = sorted({e.thread for e in events})
    trace.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
                  "args": {"name": "python"}})
    for tid in threads:
        trace.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                      "args": {"name": f"thread {tid} (python)"}})
    for evt in sorted(events, key=lambda e: (e.start_ns, -e.end_ns)):
        args = {"External id": evt.id}
        if evt.input_shapes is not None:
            args["Input Dims"] = evt.input_shapes
            args["Input type"] = evt.input_types or []
        if meta.get("profile_memory"):
            args["Self CPU Mem (bytes)"] = evt.self_cpu_memory_usage
        if evt.stack:
            args["Source Location"] = evt.stack
        trace.append({"ph": "X", "cat": _category(evt), "name": evt.name, "pid": pid,
                      "tid": evt.thread, "ts": evt.start_ns / 1000.0,
                      "dur": (evt.end_ns - evt.start_ns) / 1000.0, "args": args})
    trace += _device_track(events)
    out = {"schemaVersion": 1, "displayTimeUnit": "ms", "traceEvents": trace,
           "record_shapes": int(bool(meta.get("record_shapes"))),
           "baseTimeNanoseconds": meta.get("base_time_ns", 0)}
    if trace_name is not None:
        out["traceName"] = str(trace_name)
    return out


_STREAM = 7     # the tid of a device's track: Kineto names the default stream "stream 7"


def _device_track(events):
    """One process per GPU ("GPU 0", pid = the device ordinal, as Kineto writes it) with the
    measured device intervals: "kernel" events, and "gpu_memcpy" for copies between
    devices, each tied to its host event by "External id"."""
    measured = [e for e in events if e.device_start_ns is not None]
    trace = []
    for idx in sorted({e.device_index for e in measured}):
        trace.append({"ph": "M", "name": "process_name", "pid": idx, "tid": 0, "ts": 0,
                      "args": {"name": f"GPU {idx}"}})
        trace.append({"ph": "M", "name": "thread_name", "pid": idx, "tid": _STREAM, "ts": 0,
                      "args": {"name": f"stream {_STREAM}"}})
    for evt in sorted(measured, key=lambda e: e.device_start_ns):
        cat = "gpu_memcpy" if evt.name in ("to", "cpu", "cuda", "convert", "copy_") \
            else "kernel"
        trace.append({"ph": "X", "cat": cat, "name": evt.name, "pid": evt.device_index,
                      "tid": _STREAM, "ts": evt.device_start_ns / 1000.0,
                      "dur": evt.device_ns / 1000.0,
                      "args": {"External id": evt.id, "device": evt.device_index,
                               "stream": _STREAM}})
    return trace
