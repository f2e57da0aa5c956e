"""The recurrent layers over a ``PackedSequence``, as PyTorch's packed RNN runs them.

The loop works on the packed data itself: step ``t`` reads the ``batch_sizes[t]`` rows of
``data`` that belong to it, which are the first ``batch_sizes[t]`` sequences of the batch
sorted by decreasing length. Going forward in time the running state shrinks to those rows,
and the rows of the sequences that just ended are kept as their final state; going backward
the state grows as sequences start (each from its own initial state). So every sequence is
run over its own valid steps only, its outputs land in the packed order, and ``h_n`` (``c_n``)
is the state at its own last step (for the reverse direction, at its first).

It is all slicing, ``cat``, ``index_select`` and the layers' step functions, so backward (and
double backward) need nothing of their own.
"""
from .. import creation
from ..ops import cat, stack
from . import functional as F


def _slice(state, stop, start=0):
    """Rows ``start:stop`` of a state (an ``(h, c)`` pair for an LSTM)."""
    if isinstance(state, tuple):
        return tuple(s[start:stop] for s in state)
    return state[start:stop]


def _cat(states):
    if isinstance(states[0], tuple):
        return tuple(cat(list(parts), 0) for parts in zip(*states))
    return cat(states, 0)


def _direction(step, lstm, x_proj, sizes, state, w_hh, b_hh, w_hr, reverse):
    """One layer in one direction over packed ``x_proj`` (``(sum(lengths), G)``): returns the
    packed output (``(sum(lengths), H)``) and the final state of every sequence (sorted
    order)."""
    offsets = [0]
    for bs in sizes:
        offsets.append(offsets[-1] + bs)
    outs = [None] * len(sizes)

    def run(x, s):
        return step(x, s, w_hh, b_hh, w_hr) if lstm else step(x, s, w_hh, b_hh)

    if not reverse:
        ended = []                      # the final states of the sequences that have ended
        hidden, last = state, sizes[0]
        for t, bs in enumerate(sizes):
            if bs < last:
                ended.append(_slice(hidden, last, bs))
                hidden = _slice(hidden, bs)
            last = bs
            hidden = run(x_proj[offsets[t]:offsets[t + 1]], hidden)
            outs[t] = hidden[0] if lstm else hidden
        ended.append(hidden)
        return cat(outs, 0), _cat(ended[::-1])
    last = sizes[-1]
    hidden = _slice(state, last)
    for t in range(len(sizes) - 1, -1, -1):
        bs = sizes[t]
        if bs > last:                   # sequences that start (from their end) here
            hidden = _cat([hidden, _slice(state, bs, last)])
        last = bs
        hidden = run(x_proj[offsets[t]:offsets[t + 1]], hidden)
        outs[t] = hidden[0] if lstm else hidden
    return cat(outs, 0), hidden


def run_packed(module, packed, hx, step):
    """``module`` (an ``RNNBase``) over the ``PackedSequence`` ``packed``: returns
    ``(PackedSequence output, h_n)`` (``h_n`` an ``(h_n, c_n)`` pair for an LSTM), the
    states in the batch's original order, as ``hx`` is."""
    from .utils.rnn import PackedSequence
    data, batch_sizes, sorted_indices, unsorted_indices = packed
    if data.ndim != 2:
        raise ValueError(f"{type(module).__name__}: Expected packed input data to be 2D, "
                         f"got {data.ndim}D tensor instead")
    if data.shape[-1] != module.input_size:
        raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                           f"{module.input_size}, got {data.shape[-1]}")
    sizes = [int(v) for v in batch_sizes.tolist()]
    batch = sizes[0]
    lstm = module.mode == "LSTM"
    real_hidden = module.proj_size if module.proj_size > 0 else module.hidden_size
    state_sizes = (real_hidden, module.hidden_size) if lstm else (real_hidden,)
    if hx is None:
        hx = tuple(creation.zeros(*module._state_shape(batch, size), dtype=data.dtype,
                                  device=data.device) for size in state_sizes)
    else:
        if lstm and (not isinstance(hx, (tuple, list)) or len(hx) != 2):
            raise RuntimeError("LSTM expects hx to be a tuple (h_0, c_0)")
        hx = tuple(hx) if lstm else (hx,)
        for h, size in zip(hx, state_sizes):
            if h.ndim != 3:
                raise RuntimeError(f"For batched 3-D input, hx should also be 3-D but got "
                                   f"{h.ndim}-D tensor")
            module._check_hidden(h, module._state_shape(batch, size))
        if sorted_indices is not None:      # into the packed (sorted) order
            hx = tuple(h.index_select(1, sorted_indices.to(h.device)) for h in hx)
    per_state = [h.unbind(0) for h in hx]
    states = [tuple(s[i] for s in per_state) if lstm else per_state[0][i]
              for i in range(len(per_state[0]))]
    num_directions = 2 if module.bidirectional else 1
    finals = []
    layer_input = data
    for layer in range(module.num_layers):
        outputs = []
        for direction in range(num_directions):
            w_ih, w_hh, b_ih, b_hh, w_hr = module._weights(layer, direction)
            out, final = _direction(step, lstm, F.linear(layer_input, w_ih, b_ih), sizes,
                                    states[layer * num_directions + direction], w_hh, b_hh,
                                    w_hr, bool(direction))
            outputs.append(out)
            finals.append(final)
        layer_input = outputs[0] if num_directions == 1 else cat(outputs, -1)
        if module.dropout > 0 and module.training and layer < module.num_layers - 1:
            layer_input = F.dropout(layer_input, module.dropout, True)
    restore = (lambda h: h) if unsorted_indices is None else \
        (lambda h: h.index_select(1, unsorted_indices.to(h.device)))   # noqa: E731
    if lstm:
        h_n = (restore(stack([f[0] for f in finals], 0)),
               restore(stack([f[1] for f in finals], 0)))
    else:
        h_n = restore(stack(finals, 0))
    return PackedSequence(layer_input, batch_sizes, sorted_indices, unsorted_indices), h_n
