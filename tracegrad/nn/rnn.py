"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their one-step cells, as PyTorch's.

Parameters carry PyTorch's names and shapes (``weight_ih_l0``, ``weight_hh_l0``,
``bias_ih_l0``, ``bias_hh_l0``, ``weight_hr_l0`` for a projected LSTM, ``..._reverse`` for
the backward direction) and gate order (LSTM ``i, f, g, o``; GRU ``r, z, n`` with
``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``), so a ``state_dict`` moves between the
two libraries unchanged. Every weight starts as U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)).

The layers are compositions of tracegrad ops: the input projection of a whole sequence is
one matmul, then a Python loop runs the recurrence a time step at a time. So backward needs
nothing of its own, and ``tracegrad.compile`` unrolls the loop over a fixed sequence length.
A ``PackedSequence`` input runs each sequence over its own valid steps (``rnn_packed``) and
gives a ``PackedSequence`` output, as PyTorch's.
"""
import math

from .. import creation, dtypes
from ..ops import cat, relu, sigmoid, stack, tanh
from ..ops.declare import backward_name
from . import functional as F, init
from .module import Module
from .parameter import Parameter
from .rnn_packed import run_packed


def _linear(x, weight, bias):
    return F.linear(x, weight, bias)


def _rnn_tanh_step(x_proj, h, w_hh, b_hh):
    return tanh(x_proj + _linear(h, w_hh, b_hh))


def _rnn_relu_step(x_proj, h, w_hh, b_hh):
    return relu(x_proj + _linear(h, w_hh, b_hh))


def _lstm_step(x_proj, state, w_hh, b_hh, w_hr=None):
    h, c = state
    i, f, g, o = (x_proj + _linear(h, w_hh, b_hh)).chunk(4, -1)
    c = sigmoid(f) * c + sigmoid(i) * tanh(g)
    h = sigmoid(o) * tanh(c)
    if w_hr is not None:
        h = _linear(h, w_hr, None)
    return h, c


# the dtypes PyTorch's CPU LSTM runs through its fused (MKL-DNN) layer kernel; float64 and
# projected LSTMs run step by step there, as here
_MKLDNN = tuple(getattr(dtypes, n) for n in ("float32", "float16", "bfloat16")
                if hasattr(dtypes, n))


@backward_name("MkldnnRnnLayerBackward0")
def _lstm_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse=False, w_hr=None):
    """One LSTM layer in one direction over a ``(L, N, H_in)`` sequence: ``(output, h_T,
    c_T)``. In eager mode it is one node, as PyTorch's CPU kernel (``MkldnnRnnLayerBackward0``
    over the input, the four weights and the initial state)."""
    x_proj = _linear(input, w_ih, b_ih).unbind(0)
    steps = range(len(x_proj) - 1, -1, -1) if reverse else range(len(x_proj))
    hs = [None] * len(x_proj)
    state = (hx, cx)
    for t in steps:
        state = _lstm_step(x_proj[t], state, w_hh, b_hh, w_hr)
        hs[t] = state[0]
    return stack(hs, 0), state[0], state[1]


def _gru_step(x_proj, h, w_hh, b_hh):
    x_r, x_z, x_n = x_proj.chunk(3, -1)
    h_r, h_z, h_n = _linear(h, w_hh, b_hh).chunk(3, -1)
    r = sigmoid(x_r + h_r)
    z = sigmoid(x_z + h_z)
    n = tanh(x_n + r * h_n)
    return (1 - z) * n + z * h


_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}
_STEPS = {"RNN_TANH": _rnn_tanh_step, "RNN_RELU": _rnn_relu_step, "LSTM": _lstm_step,
          "GRU": _gru_step}


class RNNBase(Module):
    """What ``RNN``, ``LSTM`` and ``GRU`` share: the parameters of every layer and direction
    and the loop over layers, directions and time."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, proj_size=0,
                 device=None, dtype=None):
        super().__init__()
        if not isinstance(dropout, (int, float)) or not 0 <= dropout <= 1 \
                or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if not isinstance(hidden_size, int) or hidden_size <= 0:
            raise ValueError(f"hidden_size must be a positive integer, got {hidden_size!r}")
        if not isinstance(num_layers, int) or num_layers <= 0:
            raise ValueError(f"num_layers must be a positive integer, got {num_layers!r}")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        num_directions = 2 if bidirectional else 1
        real_hidden = proj_size if proj_size > 0 else hidden_size
        gate_size = _GATES[mode] * hidden_size
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * num_directions
            for direction in range(num_directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix,
                            Parameter(creation.empty(*shape, device=device, dtype=dtype)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """PyTorch packs weights for cuDNN here; tracegrad has nothing to pack."""

    @property
    def _flat_weights(self):
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        names = self._flat_weights_names
        per = len(names) // (self.num_layers * (2 if self.bidirectional else 1))
        return [[getattr(self, n) for n in names[i:i + per]] for i in range(0, len(names), per)]

    def _weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        get = lambda name: getattr(self, name + suffix, None)   # noqa: E731
        return (get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"),
                get("weight_hr"))

    def _state_shape(self, batch, hidden):
        d = self.num_layers * (2 if self.bidirectional else 1)
        return (d, hidden) if batch is None else (d, batch, hidden)

    def _check_input(self, input):
        expected = (2, 3)
        if input.ndim not in expected:
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.ndim}D tensor instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")

    def _check_hidden(self, hx, shape, what="Expected hidden size"):
        if tuple(hx.shape) != tuple(shape):
            raise RuntimeError(f"{what} {tuple(shape)}, got {list(hx.shape)}")

    def _run(self, input, states):
        """``input`` is ``(L, N, H_in)``; ``states`` a list (one per layer and direction) of
        the initial state. Returns the last layer's output and the final states."""
        step = _STEPS[self.mode]
        num_directions = 2 if self.bidirectional else 1
        finals = []
        layer_input = input
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(num_directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, direction)
                state = states[layer * num_directions + direction]
                if self.mode == "LSTM" and w_hr is None and layer_input.dtype in _MKLDNN:
                    out, h, c = _lstm_layer(layer_input, w_ih, w_hh, b_ih, b_hh, *state,
                                            reverse=bool(direction), w_hr=w_hr)
                    outputs.append(out)
                    finals.append((h, c))
                    continue
                # the input projection of every time step at once
                x_proj = _linear(layer_input, w_ih, b_ih).unbind(0)
                steps = range(len(x_proj) - 1, -1, -1) if direction else range(len(x_proj))
                hs = [None] * len(x_proj)
                for t in steps:
                    if self.mode == "LSTM":
                        state = step(x_proj[t], state, w_hh, b_hh, w_hr)
                        hs[t] = state[0]
                    else:
                        state = step(x_proj[t], state, w_hh, b_hh)
                        hs[t] = state
                outputs.append(stack(hs, 0))
                finals.append(state)
            layer_input = outputs[0] if num_directions == 1 else cat(outputs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        return layer_input, finals

    def forward(self, input, hx=None):
        if isinstance(input, tuple) and hasattr(input, "batch_sizes"):     # a PackedSequence
            return run_packed(self, input, hx, _STEPS[self.mode])
        self._check_input(input)
        batched = input.ndim == 3
        if batched and self.batch_first:
            input = input.transpose(0, 1)
        if not batched:
            input = input.unsqueeze(1)
        batch = input.shape[1]
        lstm = self.mode == "LSTM"
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        if hx is None:
            zeros = lambda size: creation.zeros(  # noqa: E731
                *self._state_shape(batch, size), dtype=input.dtype, device=input.device)
            hx = (zeros(real_hidden), zeros(self.hidden_size)) if lstm else zeros(real_hidden)
        else:
            hs = hx if lstm else (hx,)
            if lstm and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
                raise RuntimeError("LSTM expects hx to be a tuple (h_0, c_0)")
            sizes = (real_hidden, self.hidden_size) if lstm else (real_hidden,)
            for h, size in zip(hs, sizes):
                if h.ndim != (3 if batched else 2):
                    raise RuntimeError(
                        f"For {'batched' if batched else 'unbatched'} "
                        f"{'3' if batched else '2'}-D input, hx should also be "
                        f"{'3' if batched else '2'}-D but got {h.ndim}-D tensor")
                self._check_hidden(h, self._state_shape(batch if batched else None, size))
            if not batched:
                hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
        if lstm:
            states = list(zip(hx[0].unbind(0), hx[1].unbind(0)))
        else:
            states = list(hx.unbind(0))
        output, finals = self._run(input, states)
        if lstm:
            h_n = stack([s[0] for s in finals], 0)
            c_n = stack([s[1] for s in finals], 0)
        else:
            h_n = stack(finals, 0)
        if not batched:
            output = output.squeeze(1)
            h_n = h_n.squeeze(1)
            if lstm:
                c_n = c_n.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return (output, (h_n, c_n)) if lstm else (output, h_n)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: ``h_t = tanh(W_ih x_t + b_ih + W_hh h_{t-1} + b_hh)`` (or relu).

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False)``; returns ``(output, h_n)``.
    """

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None):
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)

    def extra_repr(self):
        s = super().extra_repr()
        return s + (f", nonlinearity={self.nonlinearity}" if self.nonlinearity != "tanh" else "")


class LSTM(RNNBase):
    """Long short-term memory; returns ``(output, (h_n, c_n))``. ``proj_size > 0`` projects
    each hidden state with ``weight_hr`` (so ``h`` has ``proj_size`` features)."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, proj_size, device=device, dtype=dtype)


class GRU(RNNBase):
    """Gated recurrent unit; returns ``(output, h_n)``."""

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, device=None, dtype=None):
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         bidirectional, device=device, dtype=dtype)


# cells ---------------------------------------------------------------------------------


class RNNCellBase(Module):
    """One time step: ``weight_ih (G*hidden, input)``, ``weight_hh (G*hidden, hidden)`` and
    the two biases, G being the number of gates."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        g = num_chunks * hidden_size
        self.weight_ih = Parameter(creation.empty(g, input_size, device=device, dtype=dtype))
        self.weight_hh = Parameter(creation.empty(g, hidden_size, device=device, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(creation.empty(g, device=device, dtype=dtype))
            self.bias_hh = Parameter(creation.empty(g, device=device, dtype=dtype))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _prepare(self, input, hx, n_states):
        """Batch an unbatched call and make the zero state; returns ``(input, states,
        batched)``."""
        if input.ndim not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.ndim}D instead")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} "
                               f"expected {self.input_size}")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            zero = creation.zeros(input.shape[0], self.hidden_size, dtype=input.dtype,
                                  device=input.device)
            states = (zero,) * n_states
        else:
            states = tuple(hx) if n_states > 1 else (hx,)
            for h in states:    # an unbatched call takes an unbatched (1-D) state
                if h.ndim != (2 if batched else 1) or h.shape[-1] != self.hidden_size:
                    raise RuntimeError(f"{type(self).__name__}: Expected hidden of shape "
                                       f"({input.shape[0]}, {self.hidden_size}), got "
                                       f"{list(h.shape)}")
            if not batched:
                states = tuple(h.unsqueeze(0) for h in states)
        return input, states, batched

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    """``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu)."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device=device, dtype=dtype)
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        input, (h,), batched = self._prepare(input, hx, 1)
        step = _rnn_tanh_step if self.nonlinearity == "tanh" else _rnn_relu_step
        h = step(_linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; returns ``(h', c')``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, state, batched = self._prepare(input, hx, 2)
        h, c = _lstm_step(_linear(input, self.weight_ih, self.bias_ih), state, self.weight_hh,
                          self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step; returns ``h'``."""

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device=device, dtype=dtype)

    def forward(self, input, hx=None):
        input, (h,), batched = self._prepare(input, hx, 1)
        h = _gru_step(_linear(input, self.weight_ih, self.bias_ih), h, self.weight_hh,
                      self.bias_hh)
        return h if batched else h.squeeze(0)
