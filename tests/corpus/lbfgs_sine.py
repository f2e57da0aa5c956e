"""Two stacked ``LSTMCell`` fitted to sine waves with LBFGS, in the shape of pytorch/examples'
``time_sequence_prediction``.

The model unrolls the cells over the input one step at a time (``input.split(1, dim=1)``),
feeds its own prediction back for ``future`` extra steps, and is fitted with
``optim.LBFGS`` through a closure that zeroes the grads, runs the forward and ``MSELoss`` and
calls ``backward``. A prediction with ``future`` steps under ``no_grad`` follows each step.
"""
import numpy as np

HIDDEN, T, L, N, FUTURE = 8, 8, 20, 3, 2
STEPS = 3


def build(torch):
    nn = torch.nn

    class Sequence(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm1 = nn.LSTMCell(1, HIDDEN)
            self.lstm2 = nn.LSTMCell(HIDDEN, HIDDEN)
            self.linear = nn.Linear(HIDDEN, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)
            c_t = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)
            h_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)
            c_t2 = torch.zeros(input.size(0), HIDDEN, dtype=torch.float)

            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):  # if we should predict the future
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            outputs = torch.cat(outputs, dim=1)
            return outputs

    return {"model": Sequence()}


def data(steps):
    """Sine waves with random phases: (train input, train target, test input, test target)."""
    rng = np.random.default_rng(5)
    x = np.arange(L) + rng.integers(-4 * T, 4 * T, size=(N + 1, 1))
    wave = np.sin(x / 1.0 / T).astype(np.float32)
    return wave[1:, :-1], wave[1:, 1:], wave[:1, :-1], wave[:1, 1:]


def train(torch, models, arrays, how="eager"):
    """``STEPS`` LBFGS steps: every closure evaluation's loss, and after each step the loss
    of a prediction ``FUTURE`` steps beyond the test input."""
    seq = models["model"]
    input, target, test_input, test_target = (torch.from_numpy(a) for a in arrays)
    criterion = torch.nn.MSELoss()
    # use LBFGS as optimizer since we can load the whole data to train
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8, max_iter=4)
    if how == "model":
        seq = torch.compile(seq)

    def closure_loss():
        out = seq(input)
        return criterion(out, target)

    compiled = [seq] if how == "model" else []
    if how == "step":
        # the closure's forward and loss compiled: LBFGS calls the closure several times a step
        closure_loss = torch.compile(closure_loss)
        compiled = [closure_loss]
    losses, test_losses = [], []
    for i in range(STEPS):
        def closure():
            optimizer.zero_grad()
            loss = closure_loss()
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        # begin to predict, no need to track gradient here
        with torch.no_grad():
            pred = seq(test_input, future=FUTURE)
            loss = criterion(pred[:, :-FUTURE], test_target)
            test_losses.append(loss.item())
    return {"loss": losses, "test_loss": test_losses}, compiled
