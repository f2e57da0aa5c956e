"""Coverage of PyTorch's surface: per namespace, the names the installed PyTorch exports,
how many tracegrad has, and the names it leaves out on purpose, with the reason.

    python benchmarks/coverage.py            # the table
    python benchmarks/coverage.py --missing  # and the missing names of each namespace

A name counts as present when tracegrad has an attribute of that name in the same
namespace; whether it works is what the op table (``tests/op_table*.py``), the OpInfo
sweep (``tests/test_opinfo.py``) and ``tests/test_smoke_names.py`` (every present name
exercised by a sweep or a smoke call) check. Names left out on purpose are not counted in the
share: complex dtypes, sparse and quantized tensors, named tensors, CUDA/XPU/MPS internals,
TorchScript and export machinery, and ``torch._*``.
"""
import argparse
import inspect
import re
import sys

# why a name is left out, by pattern (the first that matches)
LEFT_OUT = [
    (r"^_", "private"),
    (r"(complex|conj|real$|imag$|angle|polar|view_as_real|view_as_complex|^resolve_conj"
     r"|^resolve_neg|^is_conj|^is_neg|^chalf|^cfloat|^cdouble|isreal"
     r"|^eig$|^eigvals$)", "complex dtypes"),    # linalg.eig/eigvals: complex results
    (r"(sparse|^to_dense|coalesce|indices$|^values$|crow_|col_|ccol_|row_indices|"
     r"^dense_dim|^sspaddmm|^smm$|^hspmm|^saddmm|_coo|_csr|_csc|_bsr|_bsc"
     r"|^SparseAdam$)",          # optim.SparseAdam steps sparse gradients
     "sparse tensors"),
    (r"(quantiz|^q_|^int_repr|^dequantize|fake_quant|^qscheme|per_channel|per_tensor|"
     r"^fbgemm|^quantized_)", "quantized tensors"),
    (r"(^align_|^refine_names|^rename|^names$|^has_names|unflatten_dense)", "named tensors"),
    (r"(cuda|cudnn|mkldnn|miopen|xpu|mps|mtia|ipu|hpu|xla|^is_vulkan|vulkan|^nested|_nnpack|"
     r"^fbgemm|^is_inference_mode|^ipu|^mkl|^cpu$|^share_memory|^is_shared|^storage|"
     r"^untyped_storage|^data_ptr|^const_data_ptr|^mutable_data_ptr|^pin_memory|"
     r"^is_pinned|^record_stream|^set_$|^set_\b|^map_|^map2_|^apply_|^module_load)",
     "devices, storages and internals"),
    (r"(^jit$|^fx$|^export|^compiler$|^onnx$|^package$|^library$|^ops$|^classes$|"
     r"^overrides|^hub$|^profiler$|^testing$|^utils$|^backends$|^distributed$|"
     r"^ao$|^quantization$|^sym_|^Sym|^Generator$|^Stream$|^Event$|^fork|^wait$|"
     r"^is_grad_enabled|^typename|^Tag$|^DispatchKey|^dispatch|^func$|^masked$|"
     r"^signal$|^fft$|^special$|^linalg$|^nn$|^optim$|^autograd$|^random$|^cpu$|^types$|"
     r"^storage$|^version$|^serialization$|^multiprocessing$|^amp$|^accelerator$|^xpu$|"
     r"^mps$|^mtia$|^futures$|^monitor$|^return_types$|^functional$|^hub$|^contrib$|"
     r"^torch_version$|^overrides$|^cuda$|^nested$|^_)", "submodules and machinery"),
]

NAMESPACES = [
    ("torch.nn", "tracegrad.nn", lambda m: m.modules.__all__),
    ("torch.nn.functional", "tracegrad.nn.functional", None),
    ("torch.nn.init", "tracegrad.nn.init", None),
    ("torch.optim", "tracegrad.optim", None),
    ("torch.optim.lr_scheduler", "tracegrad.optim.lr_scheduler", None),
    ("torch.linalg", "tracegrad.linalg", None),
    ("torch.special", "tracegrad.special", None),
    ("torch (functions)", "tracegrad", None),
    ("torch.Tensor", "tracegrad.Tensor", None),
]


def _public(module, names=None):
    """The public callables and classes of ``module`` (or ``names``, when given) that
    PyTorch defines (not ``typing.Any`` or ``Tensor`` imported into it)."""
    if names is None:
        names = [n for n in dir(module) if not n.startswith("_")]
    out = []
    for n in names:
        obj = getattr(module, n, None)
        if obj is None or inspect.ismodule(obj) or n == "Tensor":
            continue
        home = getattr(obj, "__module__", None) or ""
        if callable(obj) and (home.startswith("torch") or home == "" or
                              type(obj).__name__ == "builtin_function_or_method"):
            out.append(n)
    return sorted(set(out))


def _reason(name):
    for pattern, why in LEFT_OUT:
        if re.search(pattern, name):
            return why
    return None


def _resolve(path):
    import importlib
    if path.endswith(".Tensor"):
        return getattr(importlib.import_module(path.rsplit(".", 1)[0]), "Tensor")
    return importlib.import_module(path)


def measure():
    """``[(namespace, theirs, ours_present, left_out {name: why}, missing)]``."""
    import torch
    rows = []
    for theirs_path, ours_path, names_of in NAMESPACES:
        theirs = _resolve(theirs_path.split(" ")[0])
        ours = _resolve(ours_path)
        names = _public(theirs, names_of(theirs) if names_of else None)
        if theirs is torch:         # functions only: classes and types are the dtypes etc.
            names = [n for n in names if inspect.isfunction(getattr(torch, n)) or
                     inspect.isbuiltin(getattr(torch, n)) or type(getattr(torch, n)).__name__
                     in ("builtin_function_or_method", "function", "_VariableFunctionsClass")]
        if theirs is torch.Tensor:
            names = [n for n in dir(torch.Tensor) if not n.startswith("_")]
        left_out = {n: _reason(n) for n in names if _reason(n)}
        scope = [n for n in names if n not in left_out]
        present = [n for n in scope if hasattr(ours, n)]
        missing = [n for n in scope if not hasattr(ours, n)]
        rows.append((theirs_path, len(names), len(scope), len(present), left_out, missing))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--missing", action="store_true", help="list the missing names too")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("benchmarks/coverage.py: PyTorch is not installed; nothing to compare with.")
        return
    sys.path.insert(0, ".")
    rows = measure()
    print(f"tracegrad against PyTorch {torch.__version__}: names present / names in scope "
          f"(exported minus those left out on purpose)")
    print(f"{'namespace':<28}{'exported':>9}{'in scope':>10}{'present':>9}{'share':>8}")
    for ns, n_all, n_scope, n_present, left_out, missing in rows:
        share = n_present / n_scope if n_scope else 1.0
        print(f"{ns:<28}{n_all:>9}{n_scope:>10}{n_present:>9}{share:>8.0%}")
    reasons = {}
    for _, _, _, _, left_out, _ in rows:
        for why in left_out.values():
            reasons[why] = reasons.get(why, 0) + 1
    print("left out on purpose: " + ", ".join(f"{why} ({k})" for why, k in sorted(
        reasons.items(), key=lambda kv: -kv[1])))
    if args.missing:
        for ns, _, _, _, _, missing in rows:
            print(f"\n{ns} missing ({len(missing)}): {' '.join(missing)}")


if __name__ == "__main__":
    main()
