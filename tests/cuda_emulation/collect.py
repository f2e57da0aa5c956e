"""Every kernel lowered while the tests run, rendered by the CUDA language.

``install()`` (from ``conftest.py``) wraps ``codegen.kernel.lower``, so each kernel the
compile tests and the property test's programs lower is rendered for CUDA at once;
``test_cuda_codegen`` compiles them all with nvcc in one go. Texts are kept once (the
same kernel in many tests is one entry), each kernel renamed ``k<n>_<name>`` so that one
translation unit holds them all. A renderer error that is not ``Unsupported`` is kept
too, with the kernel's IR, and fails that test.
"""
import re
import traceback

from tracegrad.codegen import kernel as kernel_ir
from tracegrad.codegen import cuda

sources = {}        # renamed source -> the Kernel (its reductions make the preamble)
unsupported = {}    # reason -> how many kernels
errors = []         # (kernel IR text, traceback)
_lang = cuda.CUDA()
_seen = set()


def record(k):
    try:
        src = _lang.render_kernel(k)
    except cuda.Unsupported as e:
        unsupported[str(e)] = unsupported.get(str(e), 0) + 1
        return
    except Exception:       # noqa: BLE001 - kept for the test to report
        errors.append((str(k), traceback.format_exc()))
        return
    if src in _seen:
        return
    _seen.add(src)
    unique = f"k{len(sources)}_{k.name}"
    sources[re.sub(rf"\b{re.escape(k.name)}(?=(_combine)?\()", unique, src)] = k


def install():
    lower = kernel_ir.lower
    if getattr(lower, "collects", False):
        return

    def lower_and_record(*args, **kwargs):
        k = lower(*args, **kwargs)
        record(k)
        return k
    lower_and_record.collects = True
    kernel_ir.lower = lower_and_record


def translation_unit():
    """One ``.cu`` text holding every collected kernel, after the preamble they share."""
    head = cuda.declarations(list(sources.values()))
    return head + "\n\n" + "\n\n".join(sources) + "\n"
