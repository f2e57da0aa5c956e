"""A Transformer word language model in the shape of pytorch/examples' ``TransformerModel``.

``Embedding`` scaled by ``sqrt(ninp)``, sinusoidal ``PositionalEncoding`` (a buffer), an
``nn.TransformerEncoder`` of sequence-first ``TransformerEncoderLayer`` with the causal mask
``torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)`` built on the first forward and
cached on the model, ``log_softmax`` and ``NLLLoss``, ``clip_grad_norm_`` and the example's
hand-written SGD (``p.data.add_(p.grad, alpha=-lr)``).
"""
import math

import numpy as np

from . import compiled_as

NTOKEN, NINP, NHEAD, NHID, NLAYERS, BSZ, BPTT, EVAL_BSZ = 20, 16, 2, 32, 2, 3, 6, 2
STEPS = 4


def build(torch):
    nn = torch.nn
    F = torch.nn.functional

    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.0, max_len=64):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            pe = torch.zeros(max_len, d_model)
            position = torch.arange(0, max_len, dtype=torch.float).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2).float()
                                 * (-math.log(10000.0) / d_model))
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            pe = pe.unsqueeze(0).transpose(0, 1)
            self.register_buffer("pe", pe)

        def forward(self, x):
            x = x + self.pe[:x.size(0), :]
            return self.dropout(x)

    class TransformerModel(nn.Module):
        def __init__(self, ntoken, ninp, nhead, nhid, nlayers, dropout=0.0):
            super().__init__()
            self.model_type = "Transformer"
            self.src_mask = None
            self.pos_encoder = PositionalEncoding(ninp, dropout)
            encoder_layers = nn.TransformerEncoderLayer(ninp, nhead, nhid, dropout)
            self.transformer_encoder = nn.TransformerEncoder(encoder_layers, nlayers)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.ninp = ninp
            self.decoder = nn.Linear(ninp, ntoken)
            self.init_weights()

        def _generate_square_subsequent_mask(self, sz):
            return torch.triu(torch.full((sz, sz), float("-inf")), diagonal=1)

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, src, has_mask=True):
            if has_mask:
                device = src.device
                if self.src_mask is None or self.src_mask.size(0) != len(src):
                    mask = self._generate_square_subsequent_mask(len(src)).to(device)
                    self.src_mask = mask
            else:
                self.src_mask = None
            src = self.encoder(src) * math.sqrt(self.ninp)
            src = self.pos_encoder(src)
            output = self.transformer_encoder(src, self.src_mask)
            output = self.decoder(output)
            return F.log_softmax(output, dim=-1)

    return {"model": TransformerModel(NTOKEN, NINP, NHEAD, NHID, NLAYERS)}


def data(steps):
    """A training stream long enough for ``steps`` chunks of ``BPTT`` tokens per column,
    and a validation stream whose last chunk is shorter (3 tokens: a new causal mask)."""
    rng = np.random.default_rng(2)
    return (rng.integers(0, NTOKEN, size=steps * BPTT * BSZ + BSZ),
            rng.integers(0, NTOKEN, size=(BPTT + 4) * EVAL_BSZ))


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def train(torch, models, streams, how="eager"):
    model = models["model"]
    model.train()
    criterion = torch.nn.NLLLoss()
    lr = 0.5
    train_data = batchify(torch.tensor(streams[0]), BSZ)
    val_data = batchify(torch.tensor(streams[1]), EVAL_BSZ)
    if how == "model":
        model = torch.compile(model)

    def train_step(data, targets):
        model.zero_grad()
        output = model(data)
        output = output.view(-1, NTOKEN)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        return loss.detach()

    train_step, compiled = compiled_as(torch, how, model, train_step)
    losses = []
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i)
        losses.append(train_step(data, targets).item())
    return {"loss": losses, "val_loss": [evaluate(torch, model, criterion, val_data)]}, compiled


def evaluate(torch, model, criterion, data_source):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, BPTT):
            data, targets = get_batch(data_source, i)
            output = model(data)
            output = output.view(-1, NTOKEN)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)
