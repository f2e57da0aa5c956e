"""Shape primitives (reshape, permute, broadcast_to, cat) and their composites.

reshape, permute and broadcast_to return views that share storage (and the
version counter) with their input, as PyTorch's do.
"""
import math

from .. import _hooks
from ..tensor import Tensor
from . import prim_node
from .core import LINEAR, Primitive, _xp, bind, op_error
from .declare import backward_name, method
from .elementwise import clone, convert
from .index_ops import index, index_p
from .rules import norm_dim, promote
from ..symbolic import SymInt, concrete


def infer_shape(shape, numel):
    """Resolve one -1 in ``shape`` (PyTorch's wording for impossible shapes)."""
    shape = tuple(s if type(s) is SymInt else int(s) for s in shape)   # a traced size stays
    if shape.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0 or numel % known:
            raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
        shape = tuple(numel // known if s == -1 else s for s in shape)
    elif known != numel:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {numel}")
    return shape


reshape_p = Primitive(
    "reshape", lambda xp, x, shape: x.reshape(shape), dtype=lambda x, shape: x.dtype,
    shape=lambda s, shape: infer_shape(shape, math.prod(s)),
    vjp=(lambda g, x, out, shape: reshape(g, x.shape),), node="ViewBackward0",
    np="{self}.reshape({shape})", view=True, kind="shape", jvp=LINEAR)


def _check_perm(s, dims):
    if sorted(dims) != list(range(len(s))):
        raise RuntimeError(f"permute(sparse_coo): number of dimensions in the tensor input does "
                           f"not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {len(s)} is not equal to len(dims) = {len(dims)}"
                           if len(dims) != len(s) else f"permute(): duplicate dims in {dims}")
    return tuple(s[d] for d in dims)


def _inverse(dims):
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d] = i
    return tuple(inv)


permute_p = Primitive(
    "permute", lambda xp, x, dims: x.transpose(dims), dtype=lambda x, dims: x.dtype,
    shape=_check_perm, vjp=(lambda g, x, out, dims: permute(g, _inverse(dims)),),
    np="{self}.transpose({dims})", view=True, kind="shape", jvp=LINEAR)


def _broadcast_shape(s, shape):
    if len(shape) < len(s):
        raise RuntimeError(f"expand: the number of sizes provided ({len(shape)}) must be greater "
                           f"or equal to the number of dimensions in the tensor ({len(s)})")
    lead = len(shape) - len(s)
    for i, n in enumerate(s):
        if n != 1 and n != shape[lead + i]:
            raise RuntimeError(
                f"The expanded size of the tensor ({shape[lead + i]}) must match the existing "
                f"size ({n}) at non-singleton dimension {lead + i}.  Target sizes: {list(shape)}."
                f"  Tensor sizes: {list(s)}")
    return tuple(shape)


broadcast_to_p = Primitive(
    "broadcast_to", lambda xp, x, shape: xp.broadcast_to(x, shape),
    dtype=lambda x, shape: x.dtype, shape=_broadcast_shape,
    vjp=(lambda g, x, out, shape: g,),   # sum_to_shape in the node undoes the broadcast
    node="ExpandBackward0", np="np.broadcast_to({self}, {shape})", view=True, kind="shape",
    jvp=LINEAR)


def _cat_shape(*shapes, dim):
    ref = next((s for s in shapes if s != (0,)), shapes[0])
    total = 0
    for k, s in enumerate(shapes):
        if s == (0,) and ref != (0,):
            continue
        if len(s) != len(ref):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(ref)} and "
                               f"{len(s)}")
        for i, (a, b) in enumerate(zip(ref, s)):
            if i != dim and a != b:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. "
                                   f"Expected size {a} but got size {b} for tensor number {k} in "
                                   f"the list.")
        total += s[dim]
    return ref[:dim] + (total,) + ref[dim + 1:]


def _cat_grad(g, *xs, out, dim):
    grads, start = [], 0
    for x in xs:
        n = x.shape[dim] if len(x.shape) == g.ndim else 0
        grads.append(narrow(g, dim, start, n) if len(x.shape) == g.ndim else None)
        start += n
    return grads


cat_p = Primitive(
    "cat", lambda xp, *xs, dim: xp.concatenate([x for x in xs if x.shape != (0,)] or xs,
                                               axis=dim),
    args=("*tensors",), dtype=lambda *xs, dim: promote(*xs), shape=_cat_shape, vjp=_cat_grad,
    np="np.concatenate([{args}], axis={dim})", kind="shape", jvp=LINEAR)


# public functions --------------------------------------------------------------------

def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        return tuple(shape[0])
    return tuple(s if type(s) is SymInt else int(s) for s in shape)


@method
def reshape(input, *shape):
    return bind(reshape_p, input, shape=infer_shape(_shape_arg(shape), input.numel()))


@method
def view(input, *shape):
    if len(shape) == 1 and not isinstance(shape[0], (int, tuple, list)):
        if isinstance(shape[0], Tensor):
            return reshape(input, shape[0].shape)
        return convert(input, dtype=shape[0])
    target = infer_shape(_shape_arg(shape), input.numel())
    if target != input.shape and not _viewable(input._data, concrete(target)):
        raise op_error("view", "view size is not compatible with input tensor's size and stride "
                               "(at least one dimension spans across two contiguous subspaces). "
                               "Use .reshape(...) instead.")
    return bind(reshape_p, input, shape=target)


def _viewable(a, shape):
    """Whether ``a`` reshapes to ``shape`` without a copy: PyTorch's rule for ``view``, which
    looks at strides, so a stride-0 (expanded) or transposed input may still be viewed."""
    if a.size == 0 or a.flags.c_contiguous:
        return True
    xp = _xp([a])
    return bool(xp.may_share_memory(a.reshape(shape), a))   # a copy shares nothing


@method
def view_as(input, other):
    return view(input, other.shape)


@method
def reshape_as(input, other):
    return reshape(input, other.shape)


@method
def flatten(input, start_dim=0, end_dim=-1):
    if input.ndim == 0:
        return reshape(input, (1,))
    s = norm_dim(start_dim, input.ndim)
    e = norm_dim(end_dim, input.ndim)
    if s > e:
        raise op_error("flatten", "flatten() has invalid args: start_dim cannot come after end_dim")
    shape = input.shape
    return reshape(input, shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])


@method
def unflatten(input, dim, sizes):
    d = norm_dim(dim, input.ndim)
    shape = input.shape
    sizes = infer_shape(sizes, shape[d])
    return reshape(input, shape[:d] + tuple(sizes) + shape[d + 1:])


@method
def squeeze(input, dim=None):
    shape = input.shape
    if dim is None:
        dims = [i for i, n in enumerate(shape) if n == 1]
    else:
        dims = [norm_dim(d, input.ndim) for d in (dim if isinstance(dim, (tuple, list))
                                                    else (dim,))]
        dims = [d for d in dims if input.ndim and shape[d] == 1]
    return reshape(input, tuple(n for i, n in enumerate(shape) if i not in dims))


@method
def unsqueeze(input, dim):
    d = norm_dim(dim, input.ndim + 1)
    shape = input.shape
    return reshape(input, shape[:d] + (1,) + shape[d:])


@method
def permute(input, *dims):
    dims = _shape_arg(dims)
    return bind(permute_p, input, dims=tuple(norm_dim(d, input.ndim) for d in dims))


@method
@backward_name("TransposeBackward0", collapse=False)
def transpose(input, dim0, dim1):
    n = input.ndim
    if n == 0:
        return input
    d0, d1 = norm_dim(dim0, n), norm_dim(dim1, n)
    dims = list(range(n))
    dims[d0], dims[d1] = dims[d1], dims[d0]
    return bind(permute_p, input, dims=tuple(dims))


swapaxes = swapdims = transpose


@method("T")
@property
def _T(self):
    """``x.T``: the dims reversed."""
    return permute(self, tuple(reversed(range(self.ndim))))


@method("mT")
@property
def _mT(self):
    """``x.mT``: the last two dims swapped."""
    return transpose(self, -2, -1)


@method
@backward_name("TBackward0", collapse=False)
def t(input):
    if input.ndim > 2:
        raise op_error("t", f"t() expects a tensor with <= 2 dimensions, but self is "
                            f"{input.ndim}D")
    return transpose(input, 0, 1) if input.ndim == 2 else input


@method
def movedim(input, source, destination):
    n = input.ndim
    if not isinstance(source, (tuple, list)):
        source, destination = (source,), (destination,)
    elif not isinstance(destination, (tuple, list)):
        destination = (destination,)
    if len(source) != len(destination):
        raise op_error("movedim", f"movedim: Invalid source or destination dims: source "
                                  f"({list(source)} dims) should contain the same number of "
                                  f"dims as destination ({list(destination)} dims)")
    src = [norm_dim(d, n) for d in source]
    dst = [norm_dim(d, n) for d in destination]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise op_error("movedim", "movedim: repeated dim in `source` or `destination`")
    # the moved dims land at their destinations; the rest keep their order in the gaps
    order = [None] * n
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(n) if d not in src)
    order = [next(rest) if o is None else o for o in order]
    return permute(input, tuple(order))


@method
def broadcast_to(input, shape):
    """A view of ``input`` broadcast to ``shape``: a new tensor even when the shape is its
    own, as PyTorch's ``expand`` gives."""
    return bind(broadcast_to_p, input, shape=tuple(shape))


def broadcast_if_needed(input, shape):
    """``input`` itself when it has ``shape`` already, else ``broadcast_to`` (for rules and
    helpers that need the values, not a new tensor)."""
    shape = tuple(shape)
    return input if shape == input.shape else bind(broadcast_to_p, input, shape=shape)


@method
def expand(input, *sizes):
    sizes = _shape_arg(sizes)
    lead = len(sizes) - input.ndim
    if lead < 0:
        raise op_error("expand", f"the number of sizes provided ({len(sizes)}) must be greater or "
                                 f"equal to the number of dimensions in the tensor ({input.ndim})")
    shape = tuple(input.shape[i - lead] if s == -1 and i >= lead else s
                  for i, s in enumerate(sizes))
    return broadcast_to(input, shape)


@method
def expand_as(input, other):
    return broadcast_to(input, other.shape)


def broadcast_tensors(*tensors):
    from .rules import broadcast
    shape = broadcast(*[t.shape for t in tensors])
    return tuple(broadcast_if_needed(t, shape) for t in tensors)


def cat(tensors, dim=0):
    tensors = tuple(tensors)
    if not tensors:
        raise op_error("cat", "expected a non-empty list of Tensors")
    ref = next((x for x in tensors if x.shape != (0,)), tensors[0])
    d = norm_dim(dim, ref.ndim)
    return bind(cat_p, *tensors, dim=d)


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = tuple(tensors)
    if not tensors:
        raise op_error("stack", "stack expects a non-empty TensorList")
    for k, x in enumerate(tensors[1:], 1):
        if x.shape != tensors[0].shape:
            raise op_error("stack", f"stack expects each tensor to be equal size, but got "
                                    f"{list(tensors[0].shape)} at entry 0 and {list(x.shape)} at "
                                    f"entry {k}")
    d = norm_dim(dim, tensors[0].ndim + 1)
    if _hooks.state.tracer is None:     # eager: one StackBackward0 node, as PyTorch's
        return bind(stack_p, *tensors, dim=d)
    return cat([unsqueeze(x, d) for x in tensors], d)


# Eager ``stack`` is one primitive, for PyTorch's node; a trace records the cat of unsqueezes,
# which the compiler already knows.
stack_p = Primitive(
    "stack", lambda xp, *xs, dim: xp.stack(xs, axis=dim), args=("*tensors",),
    dtype=lambda *xs, dim: promote(*xs),
    shape=lambda *shapes, dim: _cat_shape(*(s[:dim] + (1,) + s[dim:] for s in shapes), dim=dim),
    vjp=lambda g, *xs, out, dim: list(unbind(g, dim)), node="StackBackward0", kind="shape",
    jvp=LINEAR)


@method
def narrow(input, dim, start, length):
    d = norm_dim(dim, input.ndim)
    if hasattr(start, "item"):      # a 0-d tensor start (PyTorch's narrow.Tensor overload)
        start = int(start)
    size = input.shape[d]
    if type(start) is not int or type(size) is not int or type(length) is not int:
        return index(input, (slice(None),) * d + (slice(start, start + length),))
    if not -size <= start <= size:
        raise op_error("narrow", f"start out of range (expected to be in range of [{-size}, "
                                 f"{size}], but got {start})")
    if start < 0:                   # counts from the end, as PyTorch's
        start += size
    if length < 0 or start + length > size:
        raise op_error("narrow", f"start ({start}) + length ({length}) exceeds dimension size "
                                 f"({size}).")
    return index(input, (slice(None),) * d + (slice(start, start + length),))


@method
def split(tensor, split_size_or_sections, dim=0):
    d = norm_dim(dim, tensor.ndim)
    n = tensor.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        if step < 0:
            raise op_error("split", f"split expects split_size be non-negative, but got "
                                    f"split_size={step}")
        if step == 0 and n:
            raise op_error("split", f"split_size can only be 0 if dimension size is 0, but got "
                                    f"dimension size of {n}")
        sizes = [min(step, n - i) for i in range(0, n, step)] if step else [0]
        sizes = sizes or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise op_error("split", f"split_with_sizes expects split_sizes to sum exactly to {n} "
                                    f"(input tensor's size at dimension {d}), but got "
                                    f"split_sizes={sizes}")
    out, start = [], 0
    for s in sizes:
        out.append(narrow(tensor, d, start, s))
        start += s
    return tuple(out)


@method
def chunk(input, chunks, dim=0):
    if chunks <= 0:
        raise op_error("chunk", f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = norm_dim(dim, input.ndim)
    n = input.shape[d]
    size = -(-n // chunks) if n else 1
    return split(input, max(size, 1), d)


@method
def unbind(input, dim=0):
    d = norm_dim(dim, input.ndim)
    return tuple(squeeze(x, d) for x in split(input, 1, d))


@method
def contiguous(input, memory_format=None):
    if input.is_contiguous():
        return input
    return clone(input)   # NumPy's copy is C-ordered


@method
def flip(input, dims):
    """A reversed copy (PyTorch's flip copies); a user's key refuses negative steps."""
    dims = [norm_dim(d, input.ndim) for d in (dims if isinstance(dims, (list, tuple))
                                              else (dims,))]
    spec = tuple(("s", None, None, -1 if i in dims else None) for i in range(input.ndim))
    return clone(bind(index_p, input, spec=spec))


prim_node.reshape = reshape     # ``sum_to_shape`` reshapes with it (prim_node sits below)
