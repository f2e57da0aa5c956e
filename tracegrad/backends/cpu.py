"""``tracegrad.backends.cpu``: ``get_cpu_capability()``, PyTorch's names ("AVX512", "AVX2",
"DEFAULT", ...) for the vector instructions NumPy dispatches to on this machine."""


def get_cpu_capability():
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:     # NumPy 1.x
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return "DEFAULT"
    if all(features.get(f) for f in ("AVX512F", "AVX512BW", "AVX512VL", "AVX512DQ")):
        return "AVX512"
    if features.get("AVX2") and features.get("FMA3"):
        return "AVX2"
    return "DEFAULT"
