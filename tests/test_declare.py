"""What a primitive's declaration generates (functions, methods, in-place methods) and
checks (a VJP rule reads only what eager autograd saves), and the names that must stay."""
import string

import numpy as np
import pytest

import tracegrad as tg
from tracegrad import Tensor
from tracegrad import ops
from tracegrad.ops import PRIMITIVES, Primitive, declare, elementwise
from tracegrad.ops.rules import promote, same_shape

# The names before functions and methods were generated from the declarations: the
# public names of ``tracegrad``, the Tensor methods listed in ops/__init__.py's old
# ``_METHODS`` (by function name), the methods it set one by one, and the in-place methods.
TRACEGRAD_NAMES = """
    BoolTensor DoubleTensor FloatTensor Function Generator HalfTensor IntTensor LongTensor
    Size Tensor abs absolute add addmm all amax amin any arange argmax argmin as_tensor
    autograd bitwise_and bitwise_not bitwise_or bitwise_xor bmm bool broadcast_tensors
    broadcast_to builtins_int cat ceil chunk clamp clip clone compile concat concatenate
    contiguous cos creation cuda detach device div divide dot double dtype dtypes empty
    empty_like enable_grad eq erf exp expand expand_as expm1 eye flatten flip float float16
    float32 float64 floor floor_divide from_numpy full full_like gather ge gelu
    get_default_dtype greater greater_equal gt half index_select inference_mode initial_seed
    int int16 int32 int64 int8 is_anomaly_check_nan_enabled is_anomaly_enabled
    is_floating_point is_grad_enabled is_inference_mode_enabled is_tensor isinf isnan le lerp
    less less_equal linspace log log1p log_softmax logical_and logical_not logical_or
    logsumexp long lt manual_seed masked_fill masked_select matmul max maximum mean min
    minimum mm movedim mul multiply mv narrow ne neg negative nn no_grad nonzero norm
    not_equal numel ones ones_like ops optim outer permute pow prod profiler rand rand_like
    randint randint_like randn randn_like randperm relu remainder reshape reshape_as round
    rsqrt rsub scatter_add seed set_default_dtype set_grad_enabled set_printoptions short
    sigmoid sign silu sin softmax softplus split sqrt square squeeze stack std std_mean sub
    subtract sum swapaxes swapdims t take_along_dim tanh tensor transpose true_divide trunc
    typename uint8 unbind unflatten unsqueeze utils var var_mean view view_as viz where zeros
    zeros_like
""".split()
METHODS = """
    abs add all amax amin any argmax argmin bitwise_and bitwise_not bitwise_or bitwise_xor
    bmm broadcast_to ceil chunk clamp clone contiguous cos div dot eq erf exp expand_as
    expm1 flatten flip floor floor_divide gather ge gelu gt index_select isinf isnan le lerp
    log log1p log_softmax logical_and logical_not logical_or logsumexp lt masked_fill
    masked_select matmul max maximum mean min minimum mm movedim mul mv narrow ne neg
    nonzero norm outer pow prod relu remainder reshape_as round rsqrt scatter_add sigmoid
    sign silu sin softmax softplus split sqrt square squeeze std sub sum t take_along_dim
    tanh transpose true_divide trunc unbind unflatten unsqueeze var view_as
    reshape view permute expand where clamp_min clamp_max type_as
    new_zeros new_ones new_empty new_full new_tensor
""".split()
INPLACE_METHODS = """
    abs_ add_ ceil_ clamp_ copy_ cos_ detach_ div_ exp_ fill_ floor_ log_ masked_fill_ mul_
    neg_ pow_ relu_ requires_grad_ sigmoid_ sin_ sqrt_ sub_ tanh_ zero_
""".split()
OPERATORS = """
    __add__ __radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__
    __rfloordiv__ __mod__ __pow__ __rpow__ __matmul__ __rmatmul__ __neg__ __pos__ __abs__
    __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __and__ __rand__ __or__ __ror__ __xor__ __rxor__
    __invert__ __getitem__ __setitem__ __iadd__ __isub__ __imul__ __itruediv__ __ipow__
""".split()
OPS_ALL = """
    abs absolute add addmm all amax amin any argmax argmin argwhere bitwise_and bitwise_not
    bitwise_or bitwise_xor bmm broadcast_tensors broadcast_to cat ceil chunk clamp clip
    clone concat concatenate contiguous cos detach div divide dot eq erf exp expand isfinite
    expand_as expm1 flatten flip floor floor_divide fmod gather ge gelu greater greater_equal gt
    index_select isinf isnan le lerp less less_equal log log1p log_softmax logical_and
    logical_not logical_or logsumexp lt masked_fill masked_select matmul max maximum mean
    min minimum mm movedim mul multiply mv narrow ne neg negative nonzero norm not_equal
    outer permute pow prod relu remainder reshape reshape_as round rsqrt rsub scatter_add
    sigmoid sign silu sin softmax softplus split sqrt square squeeze stack std std_mean sub
    subtract sum swapaxes swapdims t take_along_dim tanh transpose true_divide trunc unbind
    unflatten unique unsqueeze var var_mean view view_as where
    index_fill scatter tril_indices triu_indices
""".split()


# the names that must stay -------------------------------------------------------------

def test_every_public_name_of_tracegrad_is_still_there():
    missing = [n for n in TRACEGRAD_NAMES if not hasattr(tg, n)]
    assert not missing


def test_every_method_in_place_method_and_operator_is_still_on_tensor():
    missing = [n for n in METHODS + INPLACE_METHODS + OPERATORS
               if not callable(getattr(Tensor, n, None))]
    assert not missing
    assert isinstance(Tensor.__dict__["T"], property)
    assert isinstance(Tensor.__dict__["mT"], property)


def test_the_ops_namespace_keeps_every_name_it_exported():
    """Declaring ops through the table lost no name the namespace had (new ops add names)."""
    assert set(OPS_ALL) <= set(ops.__all__)
    assert not [n for n in ops.__all__ if n.startswith("_")]


def test_functions_and_methods_are_one_object():
    for name in ("exp", "mul", "sum", "reshape", "matmul", "gelu", "clamp", "add", "remainder"):
        assert getattr(Tensor, name) is getattr(tg, name), name
    assert tg.multiply is tg.mul and tg.negative is tg.neg and tg.absolute is tg.abs
    assert Tensor.__iadd__ is Tensor.add_ and Tensor.__imul__ is Tensor.mul_


def test_every_declared_public_function_is_in_tracegrad():
    declared = {p.public: p for p in PRIMITIVES.values() if p.public}
    assert {"exp", "sin", "erf", "mul", "eq", "bitwise_not", "relu"} <= set(declared)
    for name, prim in declared.items():
        assert getattr(tg, name) is prim.function, name
        assert getattr(ops, name) is prim.function, name


def test_methods_still_behave():
    x = tg.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert x.reshape(4).shape == (4,) and x.reshape(1, 4).shape == (1, 4)
    assert x.view(-1).shape == (4,) and x.permute(1, 0).shape == (2, 2)
    assert x.T.tolist() == [[1.0, 3.0], [-2.0, 4.0]] and x.mT.tolist() == x.T.tolist()
    assert x.where(x > 0, 0.0).tolist() == [[1.0, 0.0], [3.0, 4.0]]
    assert x.clamp_min(0).tolist() == [[1.0, 0.0], [3.0, 4.0]]
    assert x.clamp_max(2).tolist() == [[1.0, -2.0], [2.0, 2.0]]
    assert x.type_as(tg.zeros(1, dtype=tg.float64)).dtype is tg.float64
    assert x.exp().tolist() == tg.exp(x).tolist()
    y = x.clone()
    assert y.add_(1, alpha=2) is y and y.tolist() == [[3.0, 0.0], [5.0, 6.0]]
    y.zero_()
    assert y.tolist() == [[0.0, 0.0], [0.0, 0.0]]


# what a declaration generates -----------------------------------------------------------

@pytest.fixture
def declared():
    """Declare test primitives under unique names; take them out of the table, off Tensor
    and out of this module afterwards."""
    table, attrs, names = set(PRIMITIVES), set(vars(Tensor)), set(globals())
    methods = dict(declare.TENSOR_METHODS)
    yield lambda name, **kw: Primitive(name, **kw)
    for name in set(PRIMITIVES) - table:
        del PRIMITIVES[name]
    for name in set(vars(Tensor)) - attrs:
        delattr(Tensor, name)
    declare.TENSOR_METHODS.clear()
    declare.TENSOR_METHODS.update(methods)
    for name in set(globals()) - names:
        del globals()[name]


def _twice(declared, name, **kw):
    return declared(name, impl=lambda xp, x: x * 2, dtype=promote, shape=same_shape,
                    vjp=(lambda g, x, out: g * 2,), np="{self} * 2", c="{self} * 2",
                    kind="elementwise", inplace=lambda xp, x: xp.multiply(x, 2, out=x), **kw)


def test_a_primitive_declared_with_method_is_a_tensor_method(declared):
    prim = _twice(declared, "twice_test_", public=True, method=True, doc="2 x.")
    fn = prim.function
    assert fn.__name__ == "twice_test_" and fn.__doc__ == "2 x." and fn.__module__ == __name__
    assert globals()["twice_test_"] is fn            # placed in the declaring module
    assert Tensor.twice_test_ is fn
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x.twice_test_()
    assert y.tolist() == [2.0, 4.0] and type(y.grad_fn).__name__ == "TwiceTestBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_an_inplace_method_writes_into_self_bumps_the_version_and_returns_self(declared):
    _twice(declared, "twice_inplace_test", method="twice_m_test_",
           inplace_method="twice_inplace_test_")
    assert Tensor.twice_m_test_(tg.tensor([1.5])).tolist() == [3.0]
    x = tg.tensor([1.0, 3.0])
    v0 = x._version
    assert x.twice_inplace_test_() is x
    assert x.tolist() == [2.0, 6.0] and x._version == v0 + 1
    # with history: the node is the primitive's, and the gradient flows through it
    a = tg.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1
    assert b.twice_inplace_test_() is b
    assert type(b.grad_fn).__name__ == "TwiceInplaceTestBackward0"
    b.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0]
    # PyTorch's checks: a leaf that requires grad refuses in-place writes
    with pytest.raises(RuntimeError, match="leaf Variable"):
        a.twice_inplace_test_()


def test_a_binary_declaration_generates_input_other(declared):
    prim = declared("plus_test", impl=lambda xp, a, b: a + b, args=("self", "other"),
                    dtype=promote, shape=lambda a, b: np.broadcast_shapes(a, b),
                    vjp=(lambda g, a, b, out: g, lambda g, a, b, out: g),
                    kind="elementwise", public=True, inplace_method="plus_test_")
    assert list(prim.function.__code__.co_varnames[:2]) == ["input", "other"]
    x = tg.tensor([1.0, 2.0])
    assert plus_test(x, other=tg.tensor([1.0, 1.0])).tolist() == [2.0, 3.0]  # noqa: F821
    assert x.plus_test_(tg.tensor(3.0)) is x and x.tolist() == [4.0, 5.0]


def test_generated_functions_need_plain_tensor_args(declared):
    with pytest.raises(TypeError, match="write its function by hand"):
        declared("three_test", impl=lambda xp, a, b, c: a, args=("a", "b", "c"),
                 dtype=promote, shape=same_shape, public=True)


def test_a_declared_method_may_not_replace_the_tensor_class_own(declared):
    with pytest.raises(TypeError, match="Tensor.numel"):
        _twice(declared, "numel_test", method="numel")


def test_a_method_name_is_declared_once(declared):
    with pytest.raises(TypeError, match="Tensor.exp is declared twice"):
        _twice(declared, "exp_twice_test", method="exp")
    with pytest.raises(TypeError, match="Tensor.add_ is declared twice"):
        _twice(declared, "add_twice_test", inplace_method="add_")
    assert Tensor.exp is tg.exp


def test_the_table_primitives_inplace_methods_are_the_generated_ones():
    x = tg.tensor([0.0, 1.0])
    for name in ("exp_", "log_", "sqrt_", "tanh_", "sigmoid_", "sin_", "cos_", "abs_",
                 "floor_", "ceil_", "relu_", "neg_"):
        y = x.clone() + 1
        v0 = y._version
        expect = getattr(tg, name[:-1])(y)
        assert getattr(y, name)() is y and y._version == v0 + 1, name
        assert np.allclose(y.numpy(), expect.numpy()), name


# helpers --------------------------------------------------------------------------------

def test_erf_declares_the_helper_its_template_calls():
    prim = PRIMITIVES["erf"]
    assert prim.helpers == {"_erf": elementwise._erf}
    assert "_erf(" in prim.np_template
    assert PRIMITIVES["exp"].helpers == {}


# templates use named slots ----------------------------------------------------------------

def test_no_template_has_a_positional_slot():
    for prim in PRIMITIVES.values():
        for template in (prim.np_template, prim.np_out, prim.c_template, prim.cuda_template):
            for t in template if isinstance(template, tuple) else (template,):
                if not isinstance(t, str):
                    continue
                fields = [f for _, f, _, _ in string.Formatter().parse(t) if f is not None]
                assert all(f and not f[0].isdigit() for f in fields), (prim.name, t)


# the VJP rule reads what is saved ----------------------------------------------------------

def _bad(declared, name, **kw):
    base = dict(impl=lambda xp, x: x, dtype=promote, shape=same_shape, kind="elementwise")
    base.update(kw)
    return declared(name, **base)


def test_a_rule_that_reads_out_needs_result_saved(declared):
    with pytest.raises(TypeError) as e:
        _bad(declared, "reads_out_test", vjp=(lambda g, x, out: g * out,), saves=("self",))
    assert "'reads_out_test'" in str(e.value) and "'out'" in str(e.value)
    assert "reads_out_test" not in PRIMITIVES
    _bad(declared, "reads_out_ok_test", vjp=(lambda g, x, out: g * out,), saves=("result",))


def test_an_elementwise_rule_that_reads_an_unsaved_input_fails(declared):
    with pytest.raises(TypeError) as e:
        _bad(declared, "reads_x_test", vjp=(lambda g, x, out: g * x,))
    assert "'reads_x_test'" in str(e.value) and "'x'" in str(e.value)
    assert "'self'" in str(e.value)
    with pytest.raises(TypeError, match="'b'"):       # the second input, by position
        _bad(declared, "reads_b_test", impl=lambda xp, a, b: a, args=("self", "other"),
             vjp=(lambda g, a, b, out: g, lambda g, a, b, out: g * b), saves=("self",))
    with pytest.raises(TypeError, match="'x'"):       # read inside a nested function
        _bad(declared, "reads_nested_test", vjp=(lambda g, x, out: (lambda: g * x)(),))
    _bad(declared, "reads_saved_test", vjp=(lambda g, x, out: g * x,), saves=("self",))


def test_other_kinds_may_read_an_unsaved_inputs_shape(declared):
    declared("reads_shape_test", impl=lambda xp, x: x.sum(), dtype=promote,
             shape=lambda s: (), vjp=(lambda g, x, out: g.expand(x.shape),), kind="reduction")


def test_reads_sees_loads_of_parameters_only_before_they_are_assigned():
    assert declare.reads(lambda g, x, out: g * out) == {"g", "out"}
    assert declare.reads(lambda g, a, b, out: [a for a in g]) == {"g"}
    assert declare.reads(len) is None

    def rule(g, x, out):
        y = g
        return y + (lambda: out)()
    assert declare.reads(rule) == {"g", "out"}


def test_the_table_passes_the_check():
    for prim in PRIMITIVES.values():
        declare.check_vjp_reads(prim)


@pytest.mark.parametrize("rule, positional", [
    (lambda g, x, out: g * 3 * out / x, True),          # the usual shape: out after the inputs
    (lambda g, x, *, out: g * 3 * out / x, False),      # keyword-only: passed by keyword
    (lambda g, x, out, **params: g * 3 * out / x, True),
])
def test_backward_passes_out_by_position_only_where_every_rule_takes_it(declared, rule,
                                                                        positional):
    prim = declared("cube_test", impl=lambda xp, x: x * x * x, dtype=promote,
                    shape=same_shape, vjp=(rule,), saves=("self", "result"), kind="other",
                    public=True)
    assert prim.out_positional is positional
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    cube_test(x).sum().backward()  # noqa: F821
    assert x.grad.tolist() == [3.0, 12.0]
