"""A small GPT in nanoGPT's shape, trained with AdamW, warmup then cosine decay, clipping.

Causal self-attention with a ``tril`` buffer and ``masked_fill(..., float('-inf'))``, pre-norm
blocks (nanoGPT's LayerNorm with an optional bias, GELU MLP), dropout 0 (so the runs are
deterministic), the token embedding tied to the LM head, nanoGPT's initialisation and its
``configure_optimizers`` (weight decay on matrices only), a ``LambdaLR`` with linear warmup
and cosine decay, and ``clip_grad_norm_`` before every step. ``bias=False`` (nanoGPT's
option): with a bias on the attention keys, whose gradient is zero in exact arithmetic
(softmax is shift-invariant), AdamW would turn each library's rounding noise into
different updates of the order of 1e-2 lr, and the parameters could not be compared
closely.
"""
import math

import numpy as np

from . import compiled_as

VOCAB, BLOCK, N_EMBD, N_HEAD, N_LAYER, BATCH = 17, 8, 16, 2, 2, 4
BIAS = False
WARMUP, MAX_STEPS = 2, 6
STEPS = 4


def build(torch):
    nn = torch.nn
    F = torch.nn.functional

    class LayerNorm(nn.Module):
        """LayerNorm but with an optional bias. PyTorch doesn't support simply bias=False"""

        def __init__(self, ndim, bias):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(ndim))
            self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

        def forward(self, input):
            return F.layer_norm(input, self.weight.shape, self.weight, self.bias, 1e-5)

    class CausalSelfAttention(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD, bias=BIAS)
            self.c_proj = nn.Linear(N_EMBD, N_EMBD, bias=BIAS)
            self.attn_dropout = nn.Dropout(0.0)
            self.resid_dropout = nn.Dropout(0.0)
            self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK))
                                 .view(1, 1, BLOCK, BLOCK))

        def forward(self, x):
            B, T, C = x.size()
            q, k, v = self.c_attn(x).split(N_EMBD, dim=2)
            k = k.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            q = q.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            v = v.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            return self.resid_dropout(self.c_proj(y))

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD, bias=BIAS)
            self.gelu = nn.GELU()
            self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD, bias=BIAS)
            self.dropout = nn.Dropout(0.0)

        def forward(self, x):
            return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln_1 = LayerNorm(N_EMBD, bias=BIAS)
            self.attn = CausalSelfAttention()
            self.ln_2 = LayerNorm(N_EMBD, bias=BIAS)
            self.mlp = MLP()

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            x = x + self.mlp(self.ln_2(x))
            return x

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.transformer = nn.ModuleDict(dict(
                wte=nn.Embedding(VOCAB, N_EMBD),
                wpe=nn.Embedding(BLOCK, N_EMBD),
                drop=nn.Dropout(0.0),
                h=nn.ModuleList([Block() for _ in range(N_LAYER)]),
                ln_f=LayerNorm(N_EMBD, bias=BIAS),
            ))
            self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)
            self.transformer.wte.weight = self.lm_head.weight     # weight tying
            self.apply(self._init_weights)
            for pn, p in self.named_parameters():
                if pn.endswith("c_proj.weight"):
                    torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * N_LAYER))

        def _init_weights(self, module):
            if isinstance(module, nn.Linear):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
                if module.bias is not None:
                    torch.nn.init.zeros_(module.bias)
            elif isinstance(module, nn.Embedding):
                torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

        def forward(self, idx, targets=None):
            b, t = idx.size()
            pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
            tok_emb = self.transformer.wte(idx)
            pos_emb = self.transformer.wpe(pos)
            x = self.transformer.drop(tok_emb + pos_emb)
            for block in self.transformer.h:
                x = block(x)
            x = self.transformer.ln_f(x)
            logits = self.lm_head(x)
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1),
                                       ignore_index=-1)
            return logits, loss

        def configure_optimizers(self, weight_decay, learning_rate, betas):
            param_dict = {pn: p for pn, p in self.named_parameters() if p.requires_grad}
            decay_params = [p for n, p in param_dict.items() if p.dim() >= 2]
            nodecay_params = [p for n, p in param_dict.items() if p.dim() < 2]
            optim_groups = [
                {"params": decay_params, "weight_decay": weight_decay},
                {"params": nodecay_params, "weight_decay": 0.0},
            ]
            return torch.optim.AdamW(optim_groups, lr=learning_rate, betas=betas)

    return {"model": GPT()}


def generate(torch, model, idx, max_new_tokens, temperature=1.0, top_k=None):
    """nanoGPT's ``GPT.generate`` with greedy decoding instead of ``torch.multinomial`` (the
    two libraries draw different random numbers): take a conditioning sequence of indices
    ``idx`` (LongTensor of shape (b,t)) and complete the sequence max_new_tokens times,
    feeding the predictions back into the model each time. Written as a function over
    ``model`` so that a compiled model runs its compiled forward (``compile(model)``
    returns a module whose ``generate`` would be the original's, calling the eager
    forward)."""
    with torch.no_grad():
        for _ in range(max_new_tokens):
            # if the sequence context is growing too long we must crop it at block_size
            idx_cond = idx if idx.size(1) <= BLOCK else idx[:, -BLOCK:]
            logits, _ = model(idx_cond)
            # pluck the logits at the final step and scale by desired temperature
            logits = logits[:, -1, :] / temperature
            # optionally crop the logits to only the top k options
            if top_k is not None:
                v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
                logits[logits < v[:, [-1]]] = -float("Inf")
            probs = torch.nn.functional.softmax(logits, dim=-1)
            idx_next = torch.argmax(probs, dim=-1, keepdim=True)
            idx = torch.cat((idx, idx_next), dim=1)
    return idx


def data(steps):
    """``steps`` batches of (inputs, next-token targets) cut from one token stream; a -1
    target (ignored by the loss) in every batch, as padding would give."""
    rng = np.random.default_rng(0)
    stream = rng.integers(0, VOCAB, size=steps * BATCH * BLOCK + 1)
    batches = []
    for s in range(steps):
        starts = rng.integers(0, len(stream) - BLOCK - 1, size=BATCH)
        x = np.stack([stream[i:i + BLOCK] for i in starts])
        y = np.stack([stream[i + 1:i + 1 + BLOCK] for i in starts])
        y[s % BATCH, -1] = -1
        batches.append((x, y))
    return batches


def train(torch, models, batches, how="eager"):
    """One optimizer step per batch: the losses, and what was compiled."""
    model = models["model"]
    model.train()
    optimizer = model.configure_optimizers(weight_decay=0.1, learning_rate=6e-3,
                                           betas=(0.9, 0.95))

    def lr_lambda(it):
        if it < WARMUP:
            return (it + 1) / (WARMUP + 1)
        progress = (it - WARMUP) / (MAX_STEPS - WARMUP)
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)
    if how == "model":
        model = torch.compile(model)

    def train_step(x, y):
        logits, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        return loss.detach()

    train_step, compiled = compiled_as(torch, how, model, train_step)
    losses = []
    for x, y in batches:
        loss = train_step(torch.from_numpy(x), torch.from_numpy(y))
        losses.append(loss.item())
    # greedy completion from 6 tokens to 10 (the context cropped to BLOCK); the chosen
    # tokens beat the runners-up by >= 6e-4 in probability, thousands of times the rounding
    # difference, so the tokens compare exactly
    model.eval()
    prompt = torch.from_numpy(batches[0][0][:2, :BLOCK - 2])
    tokens = generate(torch, model, prompt, max_new_tokens=4, top_k=5)
    return {"loss": losses, "tokens": tokens.flatten().tolist()}, compiled
