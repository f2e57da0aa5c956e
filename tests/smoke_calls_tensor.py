"""Smoke calls for the ``Tensor`` attributes and methods that no sweep exercises: sizes and
metadata, conversion (``tolist``, ``numpy``, ``type``), autograd state and hooks, in-place
copies and fills, and the integer ops (the OpInfo sweep runs float dtypes only). The entry
type and helpers are ``smoke_calls``'."""
import numpy as np

from smoke_calls import Smoke, drawn, ints, t, xfail

NS = "torch.Tensor"


def _leaf_and_grad(lib):
    x = t(lib, 3, dtype=np.float64, requires_grad=True)
    y = x * x
    y.retain_grad()
    y.sum().backward()
    return (x.is_leaf, y.is_leaf, x.grad, y.grad, x.requires_grad, y.requires_grad,
            y.retains_grad, x.retains_grad, y.grad_fn.name(), x.grad_fn is None)


def _backward(lib):
    x = t(lib, 3, dtype=np.float64, requires_grad=True)
    (x.sin() * x).backward(lib.ones(3, dtype=lib.float64))
    first = x.grad.clone()
    (x * 3).sum().backward()        # a second backward accumulates into .grad
    return first, x.grad


def _requires_grad_(lib):
    x = t(lib, 3)
    out = x.requires_grad_()
    flags = (out is x, x.requires_grad, x.is_leaf)
    x.requires_grad_(False)
    return flags, x.requires_grad


def _register_hook(lib):
    """A hook that returns a value replaces the gradient; its handle removes it."""
    x = t(lib, 3, dtype=np.float64, requires_grad=True)
    handle = x.register_hook(lambda g: g * 2)
    (x * x).sum().backward()
    doubled = x.grad.clone()
    handle.remove()
    x.grad = None
    (x * x).sum().backward()
    return doubled, x.grad


def _post_accumulate_hook(lib):
    """The hook sees the leaf after its ``.grad`` is written."""
    x = t(lib, 3, dtype=np.float64, requires_grad=True)
    seen = []
    x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.clone()))
    (x * 3).sum().backward()
    return seen


def _detach(lib):
    x = t(lib, 3, requires_grad=True)
    y = x.detach()
    y[0] = 7.0                      # shares storage with x
    return y.requires_grad, y.is_leaf, x.detach().grad_fn is None, x.detach()


def _detach_(lib):
    y = t(lib, 3, requires_grad=True) * 2
    out = y.detach_()
    return out is y, y.requires_grad, y.grad_fn is None, y


def _data(lib):
    x = t(lib, 3, requires_grad=True)
    d = x.data
    d[1] = 4.0
    return d.requires_grad, x.detach()


def _numpy(lib):
    """An ndarray over the tensor's memory."""
    x = t(lib, 2, 3)
    a = x.numpy()
    a[0, 0] = 9.0
    return isinstance(a, np.ndarray), a.dtype == np.float32, a.tolist(), x


def _type(lib):
    x = t(lib, 2)
    return (x.type().split(".")[-1], x.type(lib.float64), x.type(lib.int64),
            ints(lib, 1).type().split(".")[-1], x.type("torch.DoubleTensor"),
            x.type(lib.LongTensor))


def _copy_(lib):
    """Broadcast and converted into the target's dtype."""
    x = lib.zeros(2, 3, dtype=lib.int64)
    out = x.copy_(lib.tensor([1.7, -2.5, 3.2]))
    y = lib.zeros(2)
    y.copy_(lib.tensor([True, False]))
    return out is x, x, y


def _output_nr(lib):
    x = t(lib, 6, requires_grad=True)
    parts = x.split(2)
    return x.output_nr, [p.output_nr for p in parts], (x * 2).output_nr


def _random_(lib):
    """Integers in [from, to), drawn in place."""
    x = drawn(lib, lambda: lib.zeros(200).random_(2, 7))
    y = drawn(lib, lambda: lib.zeros(200, dtype=lib.int64).random_(4))
    whole = bool((x == x.floor()).all())
    return (whole, float(x.min()) >= 2, float(x.max()) <= 6, int(y.min()) >= 0,
            int(y.max()) <= 3, y.dtype)


SMOKE = {(NS, name): entry for name, entry in {
    # sizes and metadata
    "shape": lambda lib: (t(lib, 2, 3).shape, lib.tensor(1.0).shape),
    "size": lambda lib: (t(lib, 2, 3).size(), t(lib, 2, 3).size(1), t(lib, 2, 3).size(-2)),
    "dim": lambda lib: (t(lib, 2, 3).dim(), lib.tensor(1.0).dim()),
    "ndim": lambda lib: (t(lib, 2, 3, 4).ndim, lib.tensor(1.0).ndim),
    "ndimension": lambda lib: t(lib, 2, 3).ndimension(),
    "numel": lambda lib: (t(lib, 2, 3).numel(), lib.tensor(1.0).numel()),
    "nelement": lambda lib: t(lib, 2, 3, 4).nelement(),
    "stride": lambda lib: (t(lib, 3, 4).stride(), t(lib, 3, 4).t().stride(),
                           t(lib, 3, 4).stride(0), t(lib, 2, 3, 4)[:, 1].stride()),
    "is_contiguous": lambda lib: (t(lib, 3, 4).is_contiguous(), t(lib, 3, 4).t().is_contiguous(),
                                  t(lib, 3, 4).t().contiguous().is_contiguous()),
    "dtype": lambda lib: (t(lib, 2).dtype, ints(lib, 1).dtype, lib.tensor([True]).dtype),
    "device": lambda lib: str(t(lib, 2).device),
    "get_device": lambda lib: t(lib, 2).get_device(),
    "is_cpu": lambda lib: t(lib, 2).is_cpu,
    "is_meta": lambda lib: t(lib, 2).is_meta,
    "is_maia": lambda lib: t(lib, 2).is_maia,
    "is_nested": lambda lib: t(lib, 2).is_nested,
    "element_size": lambda lib: (t(lib, 2).element_size(), ints(lib, 1).element_size(),
                                 lib.tensor([True]).element_size(),
                                 lib.ones(1, dtype=lib.float16).element_size()),
    "itemsize": lambda lib: (t(lib, 2).itemsize, ints(lib, 1).itemsize,
                             lib.ones(1, dtype=lib.float64).itemsize),
    "nbytes": lambda lib: (t(lib, 2, 3).nbytes, ints(lib, 1, 2).nbytes,
                           t(lib, 4, 3).t().nbytes),
    "is_floating_point": lambda lib: (t(lib, 2).is_floating_point(),
                                      ints(lib, 1).is_floating_point()),
    "is_signed": lambda lib: (t(lib, 2).is_signed(), ints(lib, 1).is_signed(),
                              lib.tensor([True]).is_signed()),
    "is_nonzero": lambda lib: (lib.tensor([2.0]).is_nonzero(), lib.tensor(0).is_nonzero()),
    "is_same_size": lambda lib: (t(lib, 2, 3).is_same_size(t(lib, 2, 3, seed=1)),
                                 t(lib, 2, 3).is_same_size(t(lib, 3, 2))),
    "is_inference": lambda lib: t(lib, 2).is_inference(),
    # conversion and construction
    "tolist": lambda lib: (t(lib, 2, 3).tolist(), ints(lib, 1, 2).tolist(),
                           lib.tensor(2.5).tolist()),
    "numpy": _numpy,
    "type": _type,
    "type_as": lambda lib: (t(lib, 3).type_as(ints(lib, 1)),
                            ints(lib, 1, 2).type_as(lib.ones(1, dtype=lib.float64))),
    "new_tensor": lambda lib: (t(lib, 2).new_tensor([1, 2]),
                               ints(lib, 1).new_tensor([1.5, 2.5]),
                               t(lib, 2).new_tensor([1, 2], dtype=lib.int64)),
    "data": _data,
    # autograd state and hooks
    "is_leaf": _leaf_and_grad,
    "grad": _leaf_and_grad,
    "grad_fn": _leaf_and_grad,
    "requires_grad": _leaf_and_grad,
    "retain_grad": _leaf_and_grad,
    "retains_grad": _leaf_and_grad,
    "backward": _backward,
    "requires_grad_": _requires_grad_,
    "register_hook": _register_hook,
    "register_post_accumulate_grad_hook": _post_accumulate_hook,
    "detach": _detach,
    "detach_": _detach_,
    "output_nr": xfail("multi-output ops (split, unbind, eigh, var_mean...) are composites "
                       "of single-output nodes: every output's output_nr is 0", _output_nr),
    # in place
    "copy_": _copy_,
    "fill_diagonal_": lambda lib: (lib.zeros(3, 3).fill_diagonal_(5.0),
                                   lib.zeros(7, 3).fill_diagonal_(2.0, wrap=True),
                                   lib.zeros(7, 3).fill_diagonal_(2.0)),
    "random_": _random_,
    "float_power_": lambda lib: (t(lib, 4, dtype=np.float64, low=0.5).float_power_(2.5),
                                 t(lib, 4, dtype=np.float64).float_power_(lib.tensor(
                                     [1.0, 2.0, 3.0, 0.0], dtype=lib.float64))),
    # ops the OpInfo sweep leaves out: integer dtypes, matrix functions under old names
    "prelu": lambda lib: t(lib, 2, 3, 4).prelu(lib.tensor([0.1, -0.2, 0.3])),
    "slogdet": lambda lib: t(lib, 2, 3, 3).slogdet(),
    "bincount": lambda lib: (ints(lib, 1, 3, 3, 0).bincount(),
                             ints(lib, 2, 2).bincount(lib.tensor([0.5, 1.0]), minlength=4)),
    "gcd": lambda lib: ints(lib, 12, 0, -18).gcd(ints(lib, 8, 5, 12)),
    "gcd_": lambda lib: ints(lib, 12, 0, -18).gcd_(ints(lib, 8, 5, 12)),
    "lcm": lambda lib: ints(lib, 4, 0, -6).lcm(ints(lib, 6, 5, 4)),
    "lcm_": lambda lib: ints(lib, 4, 0, -6).lcm_(ints(lib, 6, 5, 4)),
    **{f"bitwise_{op}{suffix}": (lambda method: lambda lib: (
        getattr(ints(lib, 12, 10, -3), method)(ints(lib, 10, 6, 5)),
        getattr(lib.tensor([True, False, True]), method)(lib.tensor([True, True, False])),
        getattr(ints(lib, 12, 10), method)(3)))(f"bitwise_{op}{suffix}")
       for op in ("and", "or", "xor") for suffix in ("", "_")},
    "bitwise_not": lambda lib: (ints(lib, 12, 0, -3).bitwise_not(),
                                lib.tensor([True, False]).bitwise_not()),
    "bitwise_not_": lambda lib: ints(lib, 12, 0, -3).bitwise_not_(),
}.items()}
SMOKE[(NS, "float_power_")] = Smoke(SMOKE[(NS, "float_power_")], rtol=1e-12, atol=1e-12)
