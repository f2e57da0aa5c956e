"""``nn.utils.rnn``: PyTorch's padding and packing of variable-length sequences.

A ``PackedSequence`` holds the time steps of a batch sorted by decreasing length, step by
step: ``data`` is ``(sum(lengths), *)``, and ``batch_sizes[t]`` says how many sequences are
still running at step ``t``. Everything here is a composition of slicing, ``cat`` and
``index_select``, so gradients flow through packing and padding.

The recurrent layers (``nn.RNN``/``LSTM``/``GRU``) take a ``PackedSequence`` and return one,
as PyTorch's (see ``nn.rnn_packed``).
"""
from collections import namedtuple

from ... import creation
from ...ops import cat, stack
from ...tensor import Tensor


class PackedSequence(namedtuple("PackedSequence",
                                ["data", "batch_sizes", "sorted_indices", "unsorted_indices"])):
    """``(data, batch_sizes, sorted_indices, unsorted_indices)``; the indices are None when
    the batch was packed already sorted (``enforce_sorted=True``)."""

    def __new__(cls, data, batch_sizes=None, sorted_indices=None, unsorted_indices=None):
        if unsorted_indices is None and sorted_indices is not None:
            unsorted_indices = _invert_permutation(sorted_indices)
        return super().__new__(cls, data, batch_sizes, sorted_indices, unsorted_indices)

    def to(self, *args, **kwargs):
        data = self.data.to(*args, **kwargs)
        if data is self.data:
            return self
        move = lambda t: None if t is None else t.to(data.device)  # noqa: E731
        return type(self)(data, self.batch_sizes, move(self.sorted_indices),
                          move(self.unsorted_indices))

    def cpu(self):
        return self.to("cpu")

    def double(self):
        return self.to(dtype=creation.dtypes.float64)

    def float(self):
        return self.to(dtype=creation.dtypes.float32)

    @property
    def is_cuda(self):
        return self.data.is_cuda


def _invert_permutation(perm):
    out = creation.empty(perm.shape[0], dtype=perm.dtype)
    out[perm] = creation.arange(perm.shape[0], dtype=perm.dtype)
    return out


def _lengths_list(lengths):
    if isinstance(lengths, Tensor):
        if lengths.ndim != 1:
            raise ValueError(f"pack_padded_sequence: lengths must be a 1D tensor, got "
                             f"{lengths.ndim}D")
        return [int(v) for v in lengths.tolist()]
    return [int(v) for v in lengths]


def pad_sequence(sequences, batch_first=False, padding_value=0.0, padding_side="right"):
    """Stack ``L_i x *`` tensors into ``max(L) x B x *`` (``B x max(L) x *`` with
    ``batch_first``), filling with ``padding_value`` on ``padding_side``."""
    if padding_side not in ("left", "right"):
        raise ValueError(f"Expected padding_side to be one of left or right, but got "
                         f"{padding_side}.")
    if isinstance(sequences, Tensor):
        sequences = sequences.unbind(0)
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    longest = max(s.shape[0] for s in sequences)
    padded = []
    for s in sequences:
        short = longest - s.shape[0]
        if short:
            fill = creation.full((short,) + tuple(s.shape[1:]), padding_value, dtype=s.dtype,
                                 device=s.device)
            s = cat([s, fill] if padding_side == "right" else [fill, s], 0)
        padded.append(s)
    return stack(padded, 0 if batch_first else 1)


def pack_padded_sequence(input, lengths, batch_first=False, enforce_sorted=True):
    """Pack a padded batch ``T x B x *`` (``B x T x *``) whose sequence ``b`` has
    ``lengths[b]`` valid steps."""
    lens = _lengths_list(lengths)
    if enforce_sorted:
        if any(a < b for a, b in zip(lens, lens[1:])):
            raise RuntimeError("`lengths` array must be sorted in decreasing order when "
                               "`enforce_sorted` is True. You can pass `enforce_sorted=False` "
                               "to pack_padded_sequence and/or pack_sequence to sidestep this "
                               "requirement if you do not need ONNX exportability.")
        sorted_indices = None
    else:
        order = sorted(range(len(lens)), key=lambda b: -lens[b])     # stable, as argsort's
        sorted_indices = creation.tensor(order, dtype=creation.dtypes.int64)
        lens = [lens[b] for b in order]
    if batch_first:
        input = input.transpose(0, 1)
    if sorted_indices is not None:
        input = input.index_select(1, sorted_indices.to(input.device))
    if not lens or lens[-1] <= 0:
        raise RuntimeError("Length of all samples has to be greater than 0, but found an "
                           "element in 'lengths' that is <= 0")
    if lens[0] > input.shape[0]:
        raise RuntimeError(f"pack_padded_sequence: a length ({lens[0]}) exceeds the padded "
                           f"length {input.shape[0]}")
    batch_sizes = [sum(1 for n in lens if n > t) for t in range(lens[0])]
    data = cat([input[t, :bs] for t, bs in enumerate(batch_sizes)], 0)
    return PackedSequence(data, creation.tensor(batch_sizes, dtype=creation.dtypes.int64),
                          sorted_indices, None)


def pad_packed_sequence(sequence, batch_first=False, padding_value=0.0, total_length=None):
    """The inverse of ``pack_padded_sequence``: ``(padded, lengths)``, in the batch's
    original order."""
    data = sequence.data
    sizes = [int(v) for v in sequence.batch_sizes.tolist()]
    steps = len(sizes)
    if total_length is not None:
        if total_length < steps:
            raise ValueError(f"Expected total_length to be at least the length of the longest "
                             f"sequence in input, but got total_length={total_length} and max "
                             f"sequence length being {steps}")
        steps = total_length
    batch = sizes[0]
    rows, offset = [], 0
    for t in range(steps):
        bs = sizes[t] if t < len(sizes) else 0
        row = data[offset:offset + bs]
        offset += bs
        if bs < batch:
            fill = creation.full((batch - bs,) + tuple(data.shape[1:]), padding_value,
                                 dtype=data.dtype, device=data.device)
            row = cat([row, fill], 0)
        rows.append(row)
    padded = stack(rows, 0)
    lengths = creation.tensor([sum(1 for bs in sizes if bs > b) for b in range(batch)],
                              dtype=creation.dtypes.int64)
    if sequence.unsorted_indices is not None:
        padded = padded.index_select(1, sequence.unsorted_indices.to(data.device))
        lengths = lengths[sequence.unsorted_indices.cpu()]
    return (padded.transpose(0, 1) if batch_first else padded), lengths


def pack_sequence(sequences, enforce_sorted=True):
    """Pack a list of ``L_i x *`` tensors (sorted by decreasing length unless
    ``enforce_sorted=False``)."""
    lengths = [s.shape[0] for s in sequences]
    return pack_padded_sequence(pad_sequence(sequences), lengths, enforce_sorted=enforce_sorted)


def unpad_sequence(padded_sequences, lengths, batch_first=False):
    """The list of sequences ``pad_sequence`` stacked, cut back to their ``lengths``."""
    if not batch_first:
        padded_sequences = padded_sequences.transpose(0, 1)
    return [padded_sequences[b, :n] for b, n in enumerate(_lengths_list(lengths))]


def unpack_sequence(packed_sequences):
    """The list of sequences a ``PackedSequence`` holds, in their original order."""
    padded, lengths = pad_packed_sequence(packed_sequences, batch_first=True)
    return unpad_sequence(padded, lengths, batch_first=True)


__all__ = ["PackedSequence", "pad_sequence", "pack_padded_sequence", "pad_packed_sequence",
           "pack_sequence", "unpad_sequence", "unpack_sequence"]
