"""Every elementwise primitive's CUDA template compiles as device code (nvcc, no GPU needed)."""
import shutil
import subprocess

import pytest

from tracegrad.ops import PRIMITIVES

PARAMS = {"exponent": "3.0", "min": "-1.0", "max": "1.0", "dtype": "double", "decimals": "0"}
INTEGER_ONLY = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_not"}


def elementwise_prims():
    return sorted(name for name, p in PRIMITIVES.items() if p.kind == "elementwise")


def kernel_source(name, ctype):
    prim = PRIMITIVES[name]
    n_args = len(prim.args)
    args = [f"a{i}[i]" for i in range(n_args)]
    arg_types = [ctype] * n_args
    if name == "where":
        arg_types[0] = "bool"
    expr = prim.cuda_template.format(*args, **PARAMS)
    params = ", ".join(f"const {t}* a{i}" for i, t in enumerate(arg_types))
    return (f'extern "C" __global__ void k_{name}_{ctype.replace(" ", "_")}({params}, {ctype}* out, int n) {{\n'
            f"    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"    if (i < n) out[i] = ({ctype})({expr});\n}}\n")


def test_every_elementwise_primitive_has_both_templates():
    for name in elementwise_prims():
        prim = PRIMITIVES[name]
        assert prim.np_template and prim.cuda_template, name


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_cuda_templates_compile(tmp_path):
    parts = ["#include <cuda_runtime.h>\n#include <math.h>\n"]
    for name in elementwise_prims():
        types = ("int", "long long") if name in INTEGER_ONLY else ("float", "double")
        parts.extend(kernel_source(name, t) for t in types)
    src = tmp_path / "templates.cu"
    src.write_text("".join(parts))
    res = subprocess.run(["nvcc", "-c", str(src), "-o", str(tmp_path / "templates.o")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
