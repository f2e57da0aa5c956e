"""The OptimizerInfo sweep's two sides and their comparison: the same parameters,
gradients and optimizer in PyTorch and in tracegrad (``Side``, ``sides``, ``draws``), and
the tolerances each comparison allows (the reasons are in ``optiminfo_sweep``'s docstring
and beside the constants here). torch is imported lazily: this module imports without it."""
import numpy as np

import opinfo_convert as convert
import tracegrad as tg

STEPS = 5
SHAPES = {"Muon": [(3, 4), (4, 2)]}     # Muon orthogonalises matrices: 2-D parameters only
DEFAULT_SHAPES = [(3, 4), (4,), ()]
F64_TOL = 1e-10
F32_ULPS = 8
EXACT = {np.float64: 0.0, np.float32: 0.0, "floor": 1e-300}
# LBFGS's history, compared in structure (types, lengths, shapes, dtypes) only: its
# quadratic (17 unknowns, curvatures in [0.5, 4]) converges within the first step's 20
# iterations, after which the last direction, the gradient differences and the ratios of
# their dot products (``ro``, ``al``, ``H_diag``) are rounding noise of either library.
# The parameters (the minimiser) and the counters (``func_evals``, ``n_iter``) compare.
NOISE = {"d", "t", "old_dirs", "old_stps", "ro", "al", "H_diag", "prev_flat_grad",
         "prev_loss"}
# LBFGS's parameters converge to the minimiser, whose entries (the targets) are O(1): they
# are compared in units of at least 1.
LBFGS_SCALE = 1.0
# (entry, flag) whose step, with the flag on, computes a coefficient in float32 from
# float32 state: float32 tolerance throughout. PyTorch's foreach ASGD computes ``eta`` and
# ``mu`` in float32 tensor arithmetic, its for-loop in Python floats rounded once (which
# tracegrad's foreach follows); the differentiable Adam and NAdam compute their bias
# corrections from the float32 ``step`` (``mu_product``) tensor, where a float32 ``pow``
# may round either way by an ulp (the C library's).
FLOAT32_ROUNDING = {("ASGD", "foreach"), ("Adam", "differentiable"),
                    ("AdamW", "differentiable"), ("NAdam", "differentiable")}


def torch():
    import torch as _torch
    return _torch


# ---- the two sides -------------------------------------------------------------------

def attempt(fn, *args):
    """Call ``fn``: the exception it raised, else None (compared with the other side's)."""
    try:
        fn(*args)
    except Exception as error:  # noqa: BLE001 - compared with the other library's
        return error
    return None


class Side:
    """One library's run (``lib``: torch or tracegrad): its parameters, the leaves they
    were cloned from (``differentiable``), and its optimizer."""

    def __init__(self, lib, params, roots=None):
        self.lib, self.params, self.roots, self.optimizer = lib, params, roots, None

    def build(self, cls, params, kwargs):
        self.optimizer = cls(params, **kwargs)

    def step(self, grads, data):
        """One step: with the LBFGS closure where ``data`` (targets, weights) is given,
        else after setting the gradients ``grads`` (None: the gradients as they are)."""
        if data is not None:
            return self.optimizer.step(self.closure(*data))
        for p, g in zip(self.params, grads or ()):
            p.grad = self.lib.tensor(g.copy())
        return self.optimizer.step()

    def closure(self, targets, weights):
        """The LBFGS closure: half the weighted squared distance to fixed targets."""
        targets, weights = ([self.lib.tensor(a) for a in arrays] for arrays in (targets, weights))

        def closure():
            self.optimizer.zero_grad()
            loss = sum(((p - t) ** 2 * w).sum() for p, t, w in
                       zip(self.params, targets, weights)) / 2
            loss.backward()
            return loss
        return closure


def draws(info, dtype, steps=STEPS, seed=0):
    """(initial values, gradients per step, LBFGS data or None) as NumPy arrays; the LBFGS
    data are its quadratic's targets and weights (curvatures, in [0.5, 4])."""
    rng = np.random.default_rng(seed)
    np_dtype = np.float64 if dtype == torch().float64 else np.float32
    shapes = SHAPES.get(info.name, DEFAULT_SHAPES)
    draw = lambda: [rng.standard_normal(s).astype(np_dtype) for s in shapes]  # noqa: E731
    init, grads, targets = draw(), [draw() for _ in range(steps)], draw()
    weights = [np.minimum(np.abs(w), 3.5) + np_dtype(0.5) for w in draw()]
    return init, grads, (targets, weights) if info.step_requires_closure else None


def sides(init, differentiable=False):
    """(torch side, tracegrad side) of the same values: leaves, or (``differentiable``)
    clones of leaves, whose gradient is then taken through the steps."""
    out = []
    for lib in (torch(), tg):
        roots = [lib.tensor(a.copy(), requires_grad=True) for a in init]
        params = [r.clone() for r in roots] if differentiable else roots
        out.append(Side(lib, params, roots if differentiable else None))
    return out


def convert_kwargs(kwargs):
    return {k: convert.to_tg(v) for k, v in kwargs.items()}


def input_params(spec, torch_side, tg_side):
    """The parameters each optimizer is given: an input's own ``params`` (tensors, named
    tensors or groups; converted, a tensor listed twice staying one tensor), whose tensors
    the sides then step, else the sides' own."""
    if spec is None:
        return torch_side.params, tg_side.params
    memo = {}

    def converted(value):
        if isinstance(value, torch().Tensor):
            return memo.setdefault(id(value), convert.to_tg_tensor(value, requires_grad=True))
        if isinstance(value, dict):
            return {k: converted(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(converted(v) for v in value)
        return value
    tg_spec = converted(spec)
    if not isinstance(spec, torch().Tensor):
        torch_side.params, tg_side.params = _flat(spec), _flat(tg_spec)
    return spec, tg_spec


def _flat(params):
    """The tensors of a ``params`` argument, in order."""
    out = []
    for p in params:
        if isinstance(p, dict):
            group = p["params"]
            out += _flat(group if isinstance(group, (list, tuple)) else [group])
        else:
            out.append(p[1] if isinstance(p, tuple) else p)
    return out


def same_error(want, got, where):
    """PyTorch raised ``want`` (or nothing): tracegrad must raise the same type (or not)."""
    if want is None:
        assert got is None, f"{where}: tracegrad raised {type(got).__name__}: {got}"
        return
    assert got is not None, (f"{where}: PyTorch raises {type(want).__name__} ({want}), "
                             f"tracegrad does not")
    assert isinstance(got, type(want)), (
        f"{where}: tracegrad raised {type(got).__name__} ({got}), PyTorch "
        f"{type(want).__name__} ({want})")


# ---- comparison ----------------------------------------------------------------------

def tolerance(info, kwargs, dtype, steps):
    """The difference allowed after ``steps`` steps, in units of the value's magnitude, by
    the NumPy dtype of the value (a float64 run keeps float32 state: step counts, ASGD's
    ``eta``): per step, F64_TOL or F32_ULPS float32 ulps (float32's for every value of a
    float32 run or of a FLOAT32_ROUNDING flag), times LBFGS's iterations a step
    (``max_iter``); Muon's Newton-Schulz output is bfloat16, whose rounding (2**-8 of an
    update entry, at most ~1.5 lr) may land either way: two of them per step. The key
    "floor" is the least magnitude a value is compared in units of."""
    f32 = F32_ULPS * float(np.finfo(np.float32).eps)
    rounds_in_f32 = any(kwargs.get(flag) for name, flag in FLOAT32_ROUNDING if name == info.name)
    f64 = F64_TOL if dtype == torch().float64 and not rounds_in_f32 else f32
    factor = max(steps, 1) * (kwargs.get("max_iter", 20) if info.name == "LBFGS" else 1)
    least = 2 * 2 ** -8 * 1.5 * float(kwargs.get("lr", 1e-3)) if info.name == "Muon" else 0
    return {np.float64: max(f64, least) * factor, np.float32: max(f32, least) * factor,
            "floor": LBFGS_SCALE if info.name == "LBFGS" else 1e-300}


def _array(tensor):
    """(NumPy array, dtype name) of a torch or tracegrad tensor."""
    if isinstance(tensor, tg.Tensor):
        return np.array(convert.to_numpy(tensor.detach())), str(tensor.dtype).rsplit(".", 1)[-1]
    return tensor.detach().numpy(), str(tensor.dtype).rsplit(".", 1)[-1]


def compare(want, got, tol, where, dtypes=True):
    """``got`` (tracegrad's) against ``want`` (PyTorch's, or tracegrad's): tensors of the
    same dtype (unless not ``dtypes``) and shape, and values within ``tol`` of the
    largest magnitude; numbers equal (floats within ``tol`` relative); through dicts,
    lists and tuples."""
    if isinstance(want, (torch().Tensor, tg.Tensor)):
        assert isinstance(got, tg.Tensor), f"{where}: {type(got).__name__}, expected a tensor"
        (w, w_dtype), (g, g_dtype) = _array(want), _array(got)
        assert not dtypes or w_dtype == g_dtype, f"{where}: dtype {g_dtype}, expected {w_dtype}"
        assert w.shape == g.shape, f"{where}: shape {g.shape}, expected {w.shape}"
        if w.dtype.kind == "f":
            scale = max(float(np.max(np.abs(w), initial=0.0)), tol["floor"])
            err = float(np.max(np.abs(w - g.astype(w.dtype)), initial=0.0))
            allowed = tol[w.dtype.type] * scale
            assert err <= allowed, f"{where}: off by {err:.3g} (allowed {allowed:.3g})"
        else:
            assert np.array_equal(w, g), f"{where}: {g} != {w}"
    elif isinstance(want, dict):
        assert isinstance(got, dict) and sorted(map(str, got)) == sorted(map(str, want)), (
            f"{where}: {got!r}, expected the keys {sorted(want)}")
        for k in want:
            compare(want[k], got[k], tol, f"{where}[{k!r}]", dtypes)
    elif isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (
            f"{where}: {got!r}, expected {len(want)} items")
        for i, (w, g) in enumerate(zip(want, got)):
            compare(w, g, tol, f"{where}[{i}]", dtypes)
    elif isinstance(want, float):
        assert isinstance(got, (int, float)) and abs(got - want) <= tol[np.float64] * max(
            abs(want), 1e-300), f"{where}: {got!r}, expected {want!r}"
    else:
        assert got == want, f"{where}: {got!r}, expected {want!r}"


def compare_sides(want_side, got_side, tol, where, dtypes=True):
    """The parameters and ``state_dict()["state"]`` of two sides' optimizers (LBFGS's
    NOISE entries in structure only)."""
    for i, (w, g) in enumerate(zip(want_side.params, got_side.params)):
        compare(w, g, tol, f"{where} param {i}")
    noise = NOISE if type(got_side.optimizer).__name__ == "LBFGS" else ()
    compare(*(_skeleton(side.optimizer.state_dict()["state"], noise)
              for side in (want_side, got_side)), tol, f"{where} state", dtypes)


def _skeleton(state, noise):
    """``state`` with the values of the ``noise`` entries replaced by their structure: a
    tensor by its shape and dtype, a number by its type."""
    def skeleton(value):
        if isinstance(value, (list, tuple)):
            return [skeleton(v) for v in value]
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            return tuple(value.shape), str(value.dtype).rsplit(".", 1)[-1]
        return type(value).__name__
    return {index: {key: skeleton(value) if key in noise else value
                    for key, value in entry.items()} for index, entry in state.items()}
