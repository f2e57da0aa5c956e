"""The OpInfo sweep's machinery: PyTorch's own sample inputs, run through tracegrad.

``test_opinfo.py`` parametrizes one test per (OpInfo entry, stage) over what is here;
``python tests/opinfo_sweep.py`` prints the counts (``-v``: and each failure's first
error line; ``--stage`` and ``--only`` pick stages and entries). An entry maps by name to
``tracegrad.<name>`` (dotted names through submodules), else to the Tensor method or
dunder of that name; an entry with no counterpart is "absent". Stages:

- ``forward``: float32 samples, tracegrad against ``opinfo.op``;
- ``grad``: float64 samples with requires_grad, the vector-Jacobian product for one
  fixed cotangent, through ``tracegrad.autograd.grad`` against ``torch.autograd.grad``;
- ``compiled``: float32 samples, ``tracegrad.compile`` of a call of the op (tensors as
  arguments, the rest closed over) against tracegrad eager;
- ``reference``: ``forward`` on PyTorch's reference inputs (``reference_inputs``: the
  samples plus extremes, NaN/inf, non-contiguous and type-promoting ones), the first 64.

A sample on which PyTorch raises is skipped; so is a stage whose dtype the OpInfo does
not support on the CPU, and a sample outside tracegrad's scope (``OutOfScope``: complex
dtypes and scalars, bfloat16, sparse gradients), counted in ``SKIPPED``. A float32 value
of a ``FLOAT64_ARBITRATED`` entry that differs from PyTorch's passes if it is at least as
close to the op's float64 evaluation as PyTorch's (``arbitrated``). The compiled stage
runs each entry's first 16 samples only (``SAMPLE_CAP``: the order ``sample_inputs``
gives, from a fixed seed), to keep the sweep within CI's time; the eager stages run every
sample.
torch is imported lazily: this module imports without it.
"""
import argparse
import collections
import itertools
import os
import warnings

import numpy as np

import tracegrad as tg
from opinfo_convert import (
    OutOfScope, _as_array, compare_leaf, compare_outputs, convert_sample,
    leaves, replace_tensors, tensors_of, tg_call, torch, torch_call,
)

STAGES = ("forward", "grad", "compiled", "reference")
# Samples per entry, the first ones in the order sample_inputs gives: every one for the
# eager stages (about 15 s for all of them), the first 16 for compiled, where each sample
# is a trace and a code generation (max_pool alone has hundreds of samples, half a minute)
SAMPLE_CAP = {"forward": None, "grad": None, "compiled": 16, "reference": 64}

# Ops whose values are random or uninitialised (by OpInfo name): only shapes and dtypes
# are compared, as for a sample with a nonzero dropout_p.
VALUES_UNDEFINED = {
    "bernoulli", "normal", "rand_like", "randn", "randn_like", "randint_like", "randint",
    "multinomial", "empty", "empty_like", "new_empty", "empty_permuted", "new_empty_strided",
    "empty_strided",
    "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
    "nn.functional.feature_alpha_dropout", "nn.functional.alpha_dropout", "uniform",
    "exponential", "cauchy", "geometric", "log_normal",
}
RANDOM_WHEN_TRAINING = {"nn.functional.rrelu"}   # random slopes with training=True

# Entries whose outputs are unique only up to sign (eigenvectors, singular vectors): both
# sides go through the sample's output_process_fn_grad (abs of the vectors) before the
# forward comparison, as PyTorch's own gradient tests do.
SIGN_AMBIGUOUS = {"linalg.eigh", "linalg.svd", "svd", "linalg.eig", "qr", "linalg.qr"}

# Entries whose OpInfo ``op`` is a lambda that reorders or post-processes its arguments:
# tracegrad's op is called the same way.
ADAPTERS = {
    "T": lambda x: x.T,
    "mT": lambda x: x.mT,
    "where": lambda self, condition, other, **kwargs: tg.where(condition, self, other,
                                                                **kwargs),
    "einsum": lambda tensors, equation: tg.einsum(equation, tensors),
    "nn.functional.embedding": lambda weight, idx, **kwargs: tg.nn.functional.embedding(
        idx, weight, **kwargs),
    "linalg.lstsq[grad_oriented]": lambda a, b, driver: tg.linalg.lstsq(a, b,
                                                                       driver=driver)[:2],
    "normal[number_mean]": lambda std, mean, *args, **kwargs: tg.normal(mean, std, *args,
                                                                        **kwargs),
    "normal[in_place]": lambda inp, *args, **kwargs: inp.normal_(*args, **kwargs),
    "zero_": lambda x: x.clone().zero_(),
    "H": lambda x: x.H,
    "mH": lambda x: x.mH,
    "linalg.pinv[singular]": lambda a, b: tg.linalg.pinv(a @ b.mT),
    "nn.functional.embedding_bag": lambda weight, idx, **kwargs: (
        tg.nn.functional.embedding_bag(idx, weight, **kwargs)),
    "resize_": lambda x, shape: x.clone().resize_(shape),
    "resize_as_": lambda x, other: tg.resize_as_(x.clone(), other),
    **{f"polygamma[polygamma_n_{n}]": lambda x, n, **kwargs: tg.polygamma(n, x, **kwargs)
       for n in range(5)},
    "special.polygamma[special_polygamma_n_0]": lambda x, n, **kwargs: (
        tg.special.polygamma(n, x, **kwargs)),
    # torch.ops.aten.slice.Tensor(self, dim, start, end, step): a view, as slice_copy's
    "slice": lambda x, *args, **kwargs: tg.torch_functions.slice_view(x, *args, **kwargs),
    # the random in-place methods, called (under a seed) on the sample's input
    **{name: (lambda method: lambda inp, *args, **kwargs: getattr(inp.clone(), method)(
        *args, **kwargs))(f"{name}_")
       for name in ("uniform", "exponential", "cauchy", "geometric", "log_normal")},
}

# Adapted entries whose OpInfo name is no function or method in PyTorch either (aten's
# ``slice``; ``uniform`` and the other random fills are ``Tensor.uniform_``...): present
# through their adapter alone.
UNNAMED = {"slice", "uniform", "exponential", "cauchy", "geometric", "log_normal"}


def _fractional_max_pool(nd):
    """F.fractional_max_pool{nd}d given the pooling samples PyTorch's OpInfo draws: its op is
    wrapped in ``wrapper_set_seed`` (seed 42), so without ``_random_samples`` torch pools over
    windows from ``torch.rand(N, C, nd)`` under that seed, which tracegrad's generator cannot
    reproduce; the same samples make the same windows."""
    def call(x, *args, **kwargs):
        if kwargs.get("_random_samples") is None:
            from torch.testing._utils import freeze_rng_state
            with freeze_rng_state():
                torch().manual_seed(42)
                n = 1 if x.dim() == nd + 1 else x.size(0)
                u = torch().rand(n, x.size(-nd - 1), nd,
                                 dtype=getattr(torch(), str(x.dtype).split(".")[-1]))
            kwargs["_random_samples"] = tg.tensor(u.numpy())
        return getattr(tg.nn.functional, f"fractional_max_pool{nd}d")(x, *args, **kwargs)
    return call


ADAPTERS.update({f"nn.functional.fractional_max_pool{nd}d": _fractional_max_pool(nd)
                 for nd in (2, 3)})

# float32 (rtol, atol) per entry where the op's arithmetic amplifies rounding beyond
# atol 1e-5; every other entry passes at rtol 1e-5, atol 1e-5. A conv3d output sums 64
# products of terms up to ~10**2, an attention output a softmax-weighted sum of values up
# to ~10: an output near zero (the terms cancelling) carries the terms' rounding, ~1e-5
# of them, in absolute terms.
ACCUMULATED_SUM = (1e-5, 1e-4)
# polygamma's sample puts x = -7.95 near the pole at -8, where the relative condition
# number is ~300: PyTorch's float32 kernel is 2e-5 off there (tracegrad matches float64).
NEAR_POLE = (1e-4, 1e-5)
FLOAT32_TOLERANCE = {
    **{f"polygamma[polygamma_n_{n}]": NEAR_POLE for n in range(5)},
    "special.polygamma[special_polygamma_n_0]": NEAR_POLE,
    "nn.functional.conv3d": ACCUMULATED_SUM,
    "nn.functional.conv_transpose3d": ACCUMULATED_SUM,
    "nn.functional.scaled_dot_product_attention": ACCUMULATED_SUM,
}

# Gradients compare at rtol 1e-7, atol 1e-9; a float64 sample may hold a float32 tensor
# (cov's aweights), whose gradient is float32 and compares at float32's tolerance.
GRAD_TOLERANCE = {"torch.float32": (1e-5, 1e-5)}

# Entries whose float32 atol is 1e-5 times the output's largest magnitude: exp of a matrix
# of norm ~10 sums terms up to ~1e5, so a small entry is the difference of huge ones and
# carries their rounding (PyTorch's float32 is itself 3e-4 off float64 there).
MAGNITUDE_SCALED = {"matrix_exp"}

# Entries whose float32 results are arbitrated by the float64 evaluation where they differ
# from PyTorch's beyond the tolerance: PyTorch's float32 kernels run their series in
# float32 (Bessel functions and Airy's Ai at large arguments, polygamma beside its poles,
# the Chebyshev polynomials' trigonometric forms near a root, antialiasing weights), while
# tracegrad's evaluate those in float64 and round. Such a value passes when it is no
# further from ``opinfo.op`` on the float64-cast sample than PyTorch's float32 value is
# (plus one float32 rounding of it: ``arbitrated``); NaN positions and infinities must
# still match exactly.
FLOAT64_ARBITRATED = {
    "special.airy_ai", "special.bessel_j1", "special.bessel_y0",
    *(f"special.{shifted}chebyshev_polynomial_{kind}" for shifted in ("", "shifted_")
      for kind in "tuvw"),
    *(f"polygamma[polygamma_n_{n}]" for n in range(5)),
    "special.polygamma[special_polygamma_n_0]",
    # antialiased resampling: PyTorch computes the taps' centres and weights in float32,
    # tracegrad in float64 (then applies them in float32)
    "nn.functional.interpolate[bilinear]", "nn.functional.interpolate[bicubic]",
}

# (entry id, stage) -> why it fails today; the tests mark these xfail (not strict).
KNOWN = {}


# (stage, reason) -> samples skipped as OutOfScope in this process
SKIPPED = collections.Counter()


def op_db():
    from torch.testing._internal.common_methods_invocations import op_db as _op_db
    return _op_db


def entry_id(opinfo):
    """``name`` or ``name[variant]``: unique over op_db."""
    variant = opinfo.variant_test_name
    return f"{opinfo.name}[{variant}]" if variant else opinfo.name


def tracegrad_op(opinfo):
    """The callable that mirrors ``opinfo.op`` in tracegrad, or None (absent)."""
    if resolve(opinfo.name) is None and entry_id(opinfo) not in UNNAMED:
        return None
    return ADAPTERS.get(entry_id(opinfo), resolve(opinfo.name))


def resolve(name):
    """The tracegrad function, method or dunder named ``name``, or None."""
    if name.startswith("__"):
        return getattr(tg.Tensor, name, None)
    target = tg
    for part in name.split("."):
        target = getattr(target, part, None)
        if target is None:
            break
    if target is not None and callable(target):
        return target
    if "." not in name:
        return getattr(tg.Tensor, name, None)
    return None


def stage_dtype(stage):
    t = torch()
    return t.float64 if stage == "grad" else t.float32


def stage_in_scope(opinfo, stage):
    """Whether the OpInfo runs this stage on the CPU at all (dtype, autograd support)."""
    if stage_dtype(stage) not in opinfo.supported_dtypes("cpu"):
        return False
    return stage != "grad" or opinfo.supports_autograd


def in_scope(opinfo):
    return any(stage_in_scope(opinfo, stage) for stage in STAGES)


def entries():
    """Every in-scope OpInfo, by entry id (sorted), with its tracegrad callable or None."""
    found = {}
    for opinfo in op_db():
        if in_scope(opinfo):
            found[entry_id(opinfo)] = (opinfo, tracegrad_op(opinfo))
    return dict(sorted(found.items()))


def samples(opinfo, stage):
    """The stage's samples (its first SAMPLE_CAP), drawn from a fixed seed."""
    grad = stage == "grad"
    torch().manual_seed(0)
    draw = opinfo.reference_inputs if stage == "reference" else opinfo.sample_inputs
    generated = draw(device="cpu", dtype=stage_dtype(stage), requires_grad=grad)
    return list(itertools.islice(generated, SAMPLE_CAP[stage]))


def float32_tolerance(opinfo, expected):
    """(rtol, atol): FLOAT32_TOLERANCE's or 1e-5 and 1e-5; for MAGNITUDE_SCALED entries
    atol times the output's largest magnitude."""
    rtol, atol = FLOAT32_TOLERANCE.get(entry_id(opinfo), (1e-5, 1e-5))
    if entry_id(opinfo) in MAGNITUDE_SCALED:
        atol *= max(1.0, _largest_magnitude(expected))
    return rtol, atol


def _largest_magnitude(value):
    arrays = [_as_array(leaf)[0] for leaf in leaves(value)]
    finite = [np.abs(a[np.isfinite(a)]) for a in arrays
              if a is not None and np.issubdtype(a.dtype, np.inexact)]
    return max((float(a.max()) for a in finite if a.size), default=0.0)


# ---- the stages ---------------------------------------------------------------------

def values_defined(opinfo, sample):
    """False for random or uninitialised outputs, whose values no two runs share."""
    training = opinfo.name in RANDOM_WHEN_TRAINING and sample.kwargs.get("training")
    return (opinfo.name not in VALUES_UNDEFINED and not training
            and not sample.kwargs.get("dropout_p", 0))


def check_forward(opinfo, fn, sample, where):
    """tracegrad's outputs on the float32 sample against PyTorch's; False if PyTorch
    rejects the sample."""
    tg_sample = convert_sample(sample)   # before torch runs: the op may write its input
    expected = torch_call(opinfo.op, sample)
    if expected is None:
        return False
    actual = tg_call(fn, tg_sample)
    if entry_id(opinfo) in SIGN_AMBIGUOUS:
        expected, actual = (sample.output_process_fn_grad(expected),
                            sample.output_process_fn_grad(actual))
    rtol, atol = float32_tolerance(opinfo, expected)
    values = values_defined(opinfo, sample)
    try:
        compare_outputs(expected, actual, rtol, atol, values, where)
    except AssertionError:
        if entry_id(opinfo) not in FLOAT64_ARBITRATED:
            raise
        *args, kwargs = _float64_sample(sample)
        truth = opinfo.op(*args, **kwargs)
        compare_outputs(expected, actual, rtol, atol, values, where, truth=truth)
    return True


def _float64_sample(sample):
    """(input, *args, kwargs) with every float tensor (and a float dtype) cast to
    float64; integer and bool tensors as they are."""
    t = torch()

    def widen(value):
        if isinstance(value, t.dtype):
            return t.float64 if value.is_floating_point else value
        return value.double() if value.is_floating_point() else value
    wide = sample.transform(widen)
    return wide.input, *wide.args, wide.kwargs


def check_grad(opinfo, fn, sample, where):
    """The VJP for one cotangent per float output that requires grad in PyTorch; an output
    that tracegrad leaves out of the graph contributes zero (a real gap shows as a
    gradient that differs)."""
    torch_op, fn = _hermitian_wrapped(opinfo, fn)
    tg_sample = convert_sample(sample, requires_grad=True)
    expected = torch_call(torch_op, sample)
    if expected is None:
        return False
    torch_inputs = [x for x in tensors_of(_sample_tuple(sample), torch().Tensor)
                    if x.requires_grad]
    torch_outputs = _output_tensors(expected, sample, torch().Tensor)
    wanted = [i for i, o in enumerate(torch_outputs) if _differentiable(o)]
    if not torch_inputs or not wanted:
        return False
    cotangents = {i: _cotangent(i, torch_outputs[i]) for i in wanted}
    want = torch().autograd.grad(
        [torch_outputs[i] for i in wanted], torch_inputs,
        [torch().from_numpy(c).to(torch_outputs[i].dtype) for i, c in cotangents.items()],
        allow_unused=True)
    tg_inputs = [x for x in tensors_of(tg_sample, tg.Tensor) if x.requires_grad]
    tg_outputs = _output_tensors(tg_call(fn, tg_sample), sample, tg.Tensor)
    assert len(tg_outputs) == len(torch_outputs), (
        f"{where}: {len(tg_outputs)} tensor outputs, expected {len(torch_outputs)}")
    got = _tg_vjp([(tg_outputs[i], c) for i, c in cotangents.items()
                   if _differentiable(tg_outputs[i])], tg_inputs)
    for i, (w, g) in enumerate(zip(want, got)):
        if w is None or g is None:
            assert _all_zero(w) and _all_zero(g), f"{where}: grad {i} None on one side only"
        else:
            rtol, atol = GRAD_TOLERANCE.get(str(w.dtype), (1e-7, 1e-9))
            compare_leaf(w, g, rtol, atol, values_defined(opinfo, sample), f"{where} grad {i}")
    return True


def _tg_vjp(outputs_and_cotangents, inputs):
    if not outputs_and_cotangents:
        return [None] * len(inputs)
    outputs = [o for o, _ in outputs_and_cotangents]
    cotangents = [tg.tensor(c, dtype=o.dtype) for o, c in outputs_and_cotangents]
    return tg.autograd.grad(outputs, inputs, cotangents, allow_unused=True)


def _cotangent(index, output):
    """Fixed per output position: numpy's default_rng seeded by the position."""
    return np.random.default_rng(index).standard_normal(tuple(output.shape))


def _hermitian_wrapped(opinfo, fn):
    """(torch op, tracegrad op) for the gradient: where PyTorch's gradcheck calls the op
    on ``A + A.mH`` (eigh, cholesky: off the symmetric matrices their gradients are a
    convention), both are called so."""
    if opinfo.gradcheck_wrapper.__name__ != "gradcheck_wrapper_hermitian_input":
        return opinfo.op, fn
    return (lambda a, *args, **kwargs: opinfo.op(a + a.mT, *args, **kwargs),
            lambda a, *args, **kwargs: fn(a + a.mT, *args, **kwargs))


def _differentiable(output):
    return output.requires_grad and output.is_floating_point()


def _sample_tuple(sample):
    return (sample.input, list(sample.args), dict(sample.kwargs))


def _output_tensors(output, sample, tensor_type):
    """The tensor outputs after the sample's ``output_process_fn_grad`` (e.g. abs of
    eigenvectors, whose sign is arbitrary)."""
    processed = sample.output_process_fn_grad(output)
    return tensors_of(processed if isinstance(processed, (list, tuple)) else [processed],
                      tensor_type)


def _all_zero(grad):
    return grad is None or not np.any(_as_array(grad)[0])


def check_compiled(opinfo, fn, sample, where):
    """The compiled call against the eager one (a copy of the sample each), float32."""
    tg_sample, eager_sample = convert_sample(sample), convert_sample(sample)
    if torch_call(opinfo.op, sample) is None:
        return False
    eager = tg_call(fn, eager_sample)
    inputs = tensors_of(tg_sample, tg.Tensor)

    def call(*tensors):
        return tg_call(fn, replace_tensors(tg_sample, tg.Tensor, iter(tensors)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = tg.compile(call)(*inputs)
    compare_outputs(eager, compiled, 1e-5, 1e-6, values_defined(opinfo, sample), where)
    return True


CHECKS = {"forward": check_forward, "grad": check_grad, "compiled": check_compiled,
          "reference": check_forward}


def run_stage(opinfo, fn, stage):
    """Check every sample of the stage; the number checked (PyTorch's rejects are not)."""
    checked = 0
    tg.manual_seed(0)
    for index, sample in enumerate(samples(opinfo, stage)):
        try:
            checked += bool(CHECKS[stage](opinfo, fn, sample,
                                          f"{entry_id(opinfo)} sample {index}"))
        except OutOfScope as reason:
            SKIPPED[stage, str(reason).split(" (")[0]] += 1
    return checked


# ---- counts -------------------------------------------------------------------------

def outcome(opinfo, fn, stage):
    """'pass', 'fail: <why>', 'absent', 'out of scope' or 'no samples'."""
    if not stage_in_scope(opinfo, stage):
        return "out of scope"
    if fn is None:
        return "absent"
    try:
        checked = run_stage(opinfo, fn, stage)
    except Exception as error:  # noqa: BLE001 - any error is the entry's failure
        first_line = (str(error).splitlines() or [""])[0]
        return f"fail: {type(error).__name__}: {first_line[:90]}"
    return "pass" if checked else "no samples"


def main():
    parser = argparse.ArgumentParser(description="The OpInfo sweep's counts per stage.")
    parser.add_argument("--stage", choices=STAGES, action="append",
                        help="run this stage only (repeatable; default: all)")
    parser.add_argument("--only", nargs="+", metavar="ENTRY",
                        help="run these entry ids only (e.g. igamma 'polygamma[polygamma_n_1]')")
    parser.add_argument("-v", action="store_true", help="print each failure's first line")
    options = parser.parse_args()
    os.environ.setdefault("TRACEGRAD_BACKEND", "numpy")   # as the tests run (conftest)
    warnings.simplefilter("ignore")                       # PyTorch's samples warn
    table = entries()
    print(f"OpInfo entries: {len(op_db())}; in scope (float32/float64 on the CPU): "
          f"{len(table)}; present in tracegrad: "
          f"{sum(fn is not None for _, fn in table.values())}")
    if options.only:
        table = {name: table[name] for name in options.only}
    for stage in options.stage or STAGES:
        outcomes = {name: outcome(opinfo, fn, stage) for name, (opinfo, fn) in table.items()}
        failing = sorted(n for n, o in outcomes.items() if o.startswith("fail"))
        counts = {kind: sum(o.startswith(kind) for o in outcomes.values())
                  for kind in ("pass", "fail", "absent", "no samples", "out of scope")}
        print(f"\n{stage}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
        print(f"  failing ({len(failing)}): " + ", ".join(failing))
        untriaged = [name for name in failing if (name, stage) not in KNOWN]
        print(f"  failing, not in KNOWN ({len(untriaged)}): " + ", ".join(untriaged))
        skipped = {reason: n for (at, reason), n in SKIPPED.items() if at == stage}
        print("  samples skipped as out of scope: " + (", ".join(
            f"{reason} {n}" for reason, n in sorted(skipped.items())) or "none"))
        if options.v:
            for name in failing:
                print(f"    {name}: {outcomes[name]}")


if __name__ == "__main__":
    main()
