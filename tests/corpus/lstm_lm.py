"""An LSTM word language model in the shape of pytorch/examples' ``word_language_model``.

``Embedding`` -> 2-layer ``nn.LSTM`` -> ``Linear`` decoder, the token stream batchified into
columns and cut into ``bptt``-long chunks, the hidden state carried across chunks and
detached between them (``repackage_hidden``), ``CrossEntropyLoss``, ``clip_grad_norm_`` and
SGD.
"""
import numpy as np

from . import compiled_as

NTOKEN, NINP, NHID, NLAYERS, BSZ, BPTT, EVAL_BSZ = 20, 12, 16, 2, 3, 5, 2
STEPS = 4


def build(torch):
    nn = torch.nn

    class RNNModel(nn.Module):
        def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.0):
            super().__init__()
            self.ntoken = ntoken
            self.drop = nn.Dropout(dropout)
            self.encoder = nn.Embedding(ntoken, ninp)
            self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
            self.decoder = nn.Linear(nhid, ntoken)
            self.nhid = nhid
            self.nlayers = nlayers
            self.init_weights()

        def init_weights(self):
            initrange = 0.1
            nn.init.uniform_(self.encoder.weight, -initrange, initrange)
            nn.init.zeros_(self.decoder.bias)
            nn.init.uniform_(self.decoder.weight, -initrange, initrange)

        def forward(self, input, hidden):
            emb = self.drop(self.encoder(input))
            output, hidden = self.rnn(emb, hidden)
            output = self.drop(output)
            decoded = self.decoder(output)
            decoded = decoded.view(-1, self.ntoken)
            return decoded, hidden

        def init_hidden(self, bsz):
            weight = next(self.parameters())
            return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                    weight.new_zeros(self.nlayers, bsz, self.nhid))

    return {"model": RNNModel(NTOKEN, NINP, NHID, NLAYERS)}


def data(steps):
    """A training stream long enough for ``steps`` chunks of ``BPTT`` tokens per column,
    and a validation stream whose last chunk is shorter (2 tokens)."""
    rng = np.random.default_rng(1)
    return (rng.integers(0, NTOKEN, size=steps * BPTT * BSZ + BSZ),
            rng.integers(0, NTOKEN, size=(2 * BPTT + 3) * EVAL_BSZ))


def batchify(torch, data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i):
    seq_len = min(BPTT, len(source) - 1 - i)
    data = source[i:i + seq_len]
    target = source[i + 1:i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(torch, h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(torch, v) for v in h)


def train(torch, models, streams, how="eager"):
    model = models["model"]
    model.train()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=20.0)
    train_data = batchify(torch, torch.tensor(streams[0]), BSZ)
    val_data = batchify(torch, torch.tensor(streams[1]), EVAL_BSZ)
    hidden = model.init_hidden(BSZ)
    if how == "model":
        model = torch.compile(model)

    def train_step(data, targets, hidden):
        optimizer.zero_grad()
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        optimizer.step()
        return loss.detach(), hidden

    train_step, compiled = compiled_as(torch, how, model, train_step)
    losses = []
    for i in range(0, train_data.size(0) - 1, BPTT):
        data, targets = get_batch(train_data, i)
        hidden = repackage_hidden(torch, hidden)
        loss, hidden = train_step(data, targets, hidden)
        losses.append(loss.item())
    return {"loss": losses, "val_loss": [evaluate(torch, model, criterion, val_data)]}, compiled


def evaluate(torch, model, criterion, data_source):
    # Turn on evaluation mode which disables dropout.
    model.eval()
    total_loss = 0.
    hidden = model.init_hidden(EVAL_BSZ)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, BPTT):
            data, targets = get_batch(data_source, i)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(torch, hidden)
            total_loss += len(data) * criterion(output, targets).item()
    return total_loss / (len(data_source) - 1)
