"""``nn.utils.weight_norm`` and ``nn.utils.spectral_norm``: PyTorch's forward pre-hook forms.

Each replaces a module's parameter (``weight``) by the parameters it is computed from and
recomputes it before every forward, in a pre-hook of its own:

- weight norm: ``weight = g * v / ||v||``, the norm over every dim but ``dim`` (the whole
  tensor for ``dim=None``), from the parameters ``weight_g`` and ``weight_v``;
- spectral norm: ``weight = weight_orig / sigma``, ``sigma`` the largest singular value of
  ``weight_orig`` viewed as a matrix (rows along ``dim``), estimated as ``u . W v`` from the
  buffers ``weight_u`` and ``weight_v``, which ``n_power_iterations`` of the power method
  refine in place at each forward in training mode (without grad; in eval mode they stay).

The state-dict keys are PyTorch's (``weight_g``, ``weight_v``; ``weight_orig``,
``weight_u``, ``weight_v``). ``remove_weight_norm``/``remove_spectral_norm`` put a plain
parameter back. The hooks are tracegrad's own, so a compiled call records them as the ops
they are.
"""
import warnings

from ...autograd.grad_mode import no_grad
from ..functional import normalize
from ..parameter import Parameter

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm"]


def _norm_except_dim(v, dim):
    """The 2-norm of ``v`` over every dim but ``dim`` (all of them for -1), kept as size-1
    dims so that it broadcasts against ``v``."""
    if dim == -1:
        return v.norm()
    return v.norm(dim=[d for d in range(v.ndim) if d != dim % v.ndim], keepdim=True)


def _hooks_of(module, kind, name):
    """The (handle id, hook) of ``module``'s pre-hook of class ``kind`` on ``name``."""
    return [(k, entry[0]) for k, entry in module._forward_pre_hooks.items()
            if isinstance(entry[0], kind) and entry[0].name == name]


class WeightNorm:
    """The pre-hook of ``weight_norm``: sets ``module.<name>`` from ``<name>_g``/``_v``."""

    def __init__(self, name, dim):
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module):
        g, v = getattr(module, self.name + "_g"), getattr(module, self.name + "_v")
        return v * (g / _norm_except_dim(v, self.dim))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Reparametrize ``module.<name>`` as ``g * v / ||v||`` (see the module docstring)."""
    warnings.warn("`nn.utils.weight_norm` is deprecated in PyTorch in favor of "
                  "`nn.utils.parametrizations.weight_norm`, which tracegrad does not have; "
                  "this form keeps working.", FutureWarning, stacklevel=2)
    if _hooks_of(module, WeightNorm, name):
        raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter "
                           f"{name}")
    fn = WeightNorm(name, dim)
    weight = getattr(module, name)
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, fn.dim).data))
    module.register_parameter(name + "_v", Parameter(weight.data))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn)
    return module


def remove_weight_norm(module, name="weight"):
    """Put ``module.<name>`` back as a plain parameter holding the current weight."""
    for k, fn in _hooks_of(module, WeightNorm, name):
        weight = fn.compute_weight(module)
        delattr(module, name)
        del module._parameters[name + "_g"]
        del module._parameters[name + "_v"]
        setattr(module, name, Parameter(weight.data))
        del module._forward_pre_hooks[k]
        return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")


class SpectralNorm:
    """The pre-hook of ``spectral_norm``: sets ``module.<name>`` to ``<name>_orig / sigma``."""

    def __init__(self, name, n_power_iterations, dim, eps):
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim = name, dim
        self.n_power_iterations, self.eps = n_power_iterations, eps

    def matrix(self, weight):
        """``weight`` as a matrix whose rows run along ``dim``."""
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.ndim) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.matrix(weight)
        if do_power_iteration:
            with no_grad():     # refines the buffers in place
                for _ in range(self.n_power_iterations):
                    v.copy_(normalize(mat.t().mv(u), dim=0, eps=self.eps))
                    u.copy_(normalize(mat.mv(v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()     # what the backward saves is not moved by the next
        return weight / u.dot(mat.mv(v))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, module.training))


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """Divide ``module.<name>`` by its spectral norm before every forward (see the module
    docstring). ``dim``: 1 for transposed convolutions, else 0, unless given."""
    from ..conv import ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d, ConvTranspose3d)) \
            else 0
    if _hooks_of(module, SpectralNorm, name):
        raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter "
                           f"{name}")
    fn = SpectralNorm(name, n_power_iterations, dim, eps)
    weight = module._parameters.get(name)
    if weight is None:
        raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
    with no_grad():
        h, w = fn.matrix(weight).shape
        u = normalize(weight.new_empty(h).normal_(0, 1), dim=0, eps=eps)
        v = normalize(weight.new_empty(w).normal_(0, 1), dim=0, eps=eps)
    delattr(module, name)
    module.register_parameter(name + "_orig", weight)
    setattr(module, name, weight.data)
    module.register_buffer(name + "_u", u)
    module.register_buffer(name + "_v", v)
    module.register_forward_pre_hook(fn)
    return module


def remove_spectral_norm(module, name="weight"):
    """Put ``module.<name>`` back as a plain parameter holding the normalized weight."""
    for k, fn in _hooks_of(module, SpectralNorm, name):
        with no_grad():
            weight = fn.compute_weight(module, do_power_iteration=False)
        delattr(module, name)
        delattr(module, name + "_u")
        delattr(module, name + "_v")
        delattr(module, name + "_orig")
        module.register_parameter(name, Parameter(weight.detach()))
        del module._forward_pre_hooks[k]
        return module
    raise ValueError(f"spectral_norm of '{name}' not found in {module}")
