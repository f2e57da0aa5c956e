"""The partition's save-or-recompute decisions (the min cut), pinned as IR text.

Each case runs the real pipeline through ``tracegrad.compile`` and records the forward
and backward graphs exactly as ``partition`` returned them (before later passes such as
fusion), then checks the compiled gradients against eager ones.
"""
import numpy as np

import tracegrad as tg
import tracegrad.nn.functional as F
from tracegrad.ir import Namer, print_graph, verify
from tracegrad.passes import partition as P
from tracegrad.passes import pipeline
from tracegrad.passes.autodiff import autodiff


def _compile(monkeypatch, fn):
    """``fn`` compiled, and a list that receives ``(forward, backward, (joint, *args))`` from
    each partition."""
    split = []

    def record(joint, *args, **kwargs):
        forward, backward, residuals = P.partition(joint, *args, **kwargs)
        verify(forward)
        verify(backward)
        split.append((forward, backward, (joint,) + args))
        return forward, backward, residuals

    def hints(*args, **kwargs):         # the gradient names autodiff finds (d_x for x)
        joint, where, found = autodiff(*args, **kwargs)
        HINTS.update(found)
        return joint, where, found
    HINTS.clear()
    monkeypatch.setattr(pipeline, "partition", record)
    monkeypatch.setattr(pipeline, "autodiff", hints)
    return tg.compile(fn), split


HINTS = {}


def _text(split):
    forward, backward, _ = split[-1]
    return (print_graph(forward, "forward", Namer(hints=HINTS)) + "\n"
            + print_graph(backward, "backward", Namer(hints=HINTS)))


def _check_grads(fn, compiled, arrays, wrt):
    """Compiled and eager agree on the output and on the gradients of the ``wrt`` inputs."""
    def tensors():
        return [tg.tensor(a, requires_grad=i in wrt) for i, a in enumerate(arrays)]
    args = tensors()
    out = compiled(*args)
    grads = tg.autograd.grad(out, [args[i] for i in wrt])
    eargs = tensors()
    eout = fn(*eargs)
    egrads = tg.autograd.grad(eout, [eargs[i] for i in wrt])
    np.testing.assert_allclose(out.detach().numpy(), eout.detach().numpy(), rtol=1e-5, atol=1e-5)
    for g, e in zip(grads, egrads):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-4, atol=1e-5)


def _data(*shapes, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(np.float32) for s in shapes]


def _recompute_depth(backward, n_residuals):
    """The longest chain of recomputed ops (nodes reading no cotangent) in ``backward``."""
    tangent, depth = set(backward.inputs[n_residuals:]), {}
    for n in backward.nodes:
        if any(v in tangent for v in n.values()):
            tangent.add(n.out)
        else:
            depth[n.out] = 1 + max((depth.get(v, 0) for v in n.values()), default=0)
    return max(depth.values(), default=0)


# the cases -----------------------------------------------------------------------------------

def gelu_chain(x, a, b):
    return F.gelu(x * a + b, approximate="tanh").sum()


def layer_norm(x, g, b):
    mu = x.mean(-1, keepdim=True)
    xh = (x - mu) / tg.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)
    y = x + F.gelu(xh * g + b, approximate="tanh")
    return (y * y).sum()


def mlp(x, W1, b1, W2):
    return (tg.relu(x @ W1 + b1) @ W2).sum()


def dropout_like(x):
    return (x * (tg.rand(*x.shape) > 0.5)).sum()


def softmax_loss(x, t):
    return (F.softmax(x, -1) * t).sum()


def sines(x):
    for _ in range(40):
        x = tg.sin(x)
    return x.sum()


def test_gelu_chain_saves_only_its_inputs(monkeypatch):
    f, split = _compile(monkeypatch, gelu_chain)
    _check_grads(gelu_chain, f, _data(8, 8, 8), [0, 1, 2])
    assert _text(split) == """forward(x:f32[8], a:f32[8], b:f32[8]) {
  c:f32[8] = mul x a
  d:f32[8] = add c b
  e:f32[8] = mul d d
  f:f32[8] = mul e d
  g:f32[8] = mul f 0.044715
  h:f32[8] = add d g
  i:f32[8] = mul h 0.7978845608028654
  j:f32[8] = mul d 0.5
  k:f32[8] = tanh i
  l:f32[8] = add k 1
  m:f32[8] = mul j l
  out:f32[] = sum m  dims=(0,) dtype=None keepdim=False
  return (out, x, a, b)
}
backward(x:f32[8], a:f32[8], b:f32[8], d_out:f32[]) {
  c:f32[1] = reshape d_out  shape=(1,)
  d:f32[8] = mul x a
  e:f32[8] = add d b
  f:f32[8] = mul e e
  g:f32[8] = mul f e
  h:f32[8] = mul g 0.044715
  i:f32[8] = add e h
  j:f32[8] = mul i 0.7978845608028654
  k:f32[8] = tanh j
  l:f32[8] = add k 1
  m:f32[8] = mul c l
  n:f32[8] = mul e 0.5
  o:f32[8] = mul c n
  p:f32[8] = tanh_backward o k
  q:f32[8] = mul m 0.5
  r:f32[8] = mul p 0.7978845608028654
  s:f32[8] = add q r
  t:f32[8] = mul r 0.044715
  u:f32[8] = mul t e
  v:f32[8] = mul t f
  w:f32[8] = add s v
  y:f32[8] = mul u e
  z:f32[8] = add w y
  d_b:f32[8] = add z y
  d_x:f32[8] = mul d_b a
  d_a:f32[8] = mul d_b x
  return (d_x, d_a, d_b)
}"""


def test_layer_norm_saves_x_and_the_row_reductions(monkeypatch):
    f, split = _compile(monkeypatch, layer_norm)
    _check_grads(layer_norm, f, _data((4, 8), 8, 8), [0, 1, 2])
    assert _text(split) == """forward(x:f32[4,8], g:f32[8], b:f32[8]) {
  a:f32[4,1] = sum x  dims=(1,) dtype=None keepdim=True
  mu:f32[4,1] = div a 8
  c:f32[4,8] = sub x mu
  d:f32[4,8] = mul c c
  e:f32[4,1] = sum d  dims=(1,) dtype=None keepdim=True
  f:f32[4,1] = div e 8
  h:f32[4,1] = add f 1e-05
  i:f32[4,1] = sqrt h
  xh:f32[4,8] = div c i
  j:f32[4,8] = mul xh g
  k:f32[4,8] = add j b
  l:f32[4,8] = mul k k
  m:f32[4,8] = mul l k
  n:f32[4,8] = mul m 0.044715
  o:f32[4,8] = add k n
  p:f32[4,8] = mul o 0.7978845608028654
  q:f32[4,8] = mul k 0.5
  r:f32[4,8] = tanh p
  s:f32[4,8] = add r 1
  t:f32[4,8] = mul q s
  y:f32[4,8] = add x t
  u:f32[4,8] = mul y y
  out:f32[] = sum u  dims=(0,1) dtype=None keepdim=False
  return (out, x, mu, i, g, b)
}
backward(x:f32[4,8], mu:f32[4,1], a:f32[4,1], g:f32[8], b:f32[8], d_out:f32[]) {
  c:f32[1,1] = reshape d_out  shape=(1,1)
  d:f32[4,8] = sub x mu
  xh:f32[4,8] = div d a
  e:f32[4,8] = mul xh g
  f:f32[4,8] = add e b
  h:f32[4,8] = mul f f
  i:f32[4,8] = mul h f
  j:f32[4,8] = mul i 0.044715
  k:f32[4,8] = add f j
  l:f32[4,8] = mul k 0.7978845608028654
  m:f32[4,8] = mul f 0.5
  n:f32[4,8] = tanh l
  o:f32[4,8] = add n 1
  p:f32[4,8] = mul m o
  y:f32[4,8] = add x p
  q:f32[4,8] = mul c y
  d_y:f32[4,8] = add q q
  r:f32[4,8] = mul d_y o
  s:f32[4,8] = mul d_y m
  t:f32[4,8] = tanh_backward s n
  u:f32[4,8] = mul r 0.5
  v:f32[4,8] = mul t 0.7978845608028654
  w:f32[4,8] = add u v
  z:f32[4,8] = mul v 0.044715
  aa:f32[4,8] = mul z f
  ab:f32[4,8] = mul z h
  ac:f32[4,8] = add w ab
  ad:f32[4,8] = mul aa f
  ae:f32[4,8] = add ac ad
  af:f32[4,8] = add ae ad
  ag:f32[1,8] = sum af  dims=(0,) dtype=None keepdim=True
  d_b:f32[8] = reshape ag  shape=(8,)
  d_xh:f32[4,8] = mul af g
  ah:f32[4,8] = mul af xh
  ai:f32[1,8] = sum ah  dims=(0,) dtype=None keepdim=True
  d_g:f32[8] = reshape ai  shape=(8,)
  aj:f32[4,8] = div d_xh a
  ak:f32[4,8] = neg d_xh
  al:f32[4,8] = mul ak d
  am:f32[4,1] = mul a a
  an:f32[4,8] = div al am
  ao:f32[4,1] = sum an  dims=(1,) dtype=None keepdim=True
  ap:f32[4,1] = mul a 2
  aq:f32[4,1] = div ao ap
  ar:f32[4,1] = div aq 8
  as_:f32[4,8] = mul ar d
  at:f32[4,8] = add as_ as_
  au:f32[4,8] = neg at
  av:f32[4,8] = add d_y at
  aw:f32[4,1] = sum au  dims=(1,) dtype=None keepdim=True
  ax:f32[4,1] = div aw 8
  ay:f32[4,8] = add av ax
  az:f32[4,8] = neg aj
  ba:f32[4,8] = add ay aj
  d_mu:f32[4,1] = sum az  dims=(1,) dtype=None keepdim=True
  bb:f32[4,1] = div d_mu 8
  d_x:f32[4,8] = add ba bb
  return (d_x, d_g, d_b)
}"""


def test_matmuls_are_saved_never_recomputed(monkeypatch):
    f, split = _compile(monkeypatch, mlp)
    _check_grads(mlp, f, _data((4, 8), (8, 6), 6, (6, 3)), [1, 2, 3])
    assert _text(split) == """forward(x:f32[4,8], W1:f32[8,6], b1:f32[6], W2:f32[6,3]) {
  a:f32[4,6] = matmul x W1
  b:f32[4,6] = add a b1
  c:f32[4,6] = relu b
  d:f32[4,3] = matmul c W2
  out:f32[] = sum d  dims=(0,1) dtype=None keepdim=False
  return (out, W2, c, x)
}
backward(W2:f32[6,3], a:f32[4,6], x:f32[4,8], d_out:f32[]) {
  b:f32[1,1] = reshape d_out  shape=(1,1)
  c:f32[4,3] = broadcast_to b  shape=(4,3)
  d:f32[3,6] = permute W2  dims=(1,0)
  e:f32[4,6] = matmul c d
  f:f32[6,4] = permute a  dims=(1,0)
  d_W2:f32[6,3] = matmul f c
  g:bool[4,6] = le a 0
  h:f32[4,6] = where g 0 e
  i:f32[1,6] = sum h  dims=(0,) dtype=None keepdim=True
  d_b1:f32[6] = reshape i  shape=(6,)
  j:f32[8,4] = permute x  dims=(1,0)
  d_W1:f32[8,6] = matmul j h
  return (d_W1, d_b1, d_W2)
}"""


def test_a_random_draw_is_saved_never_redrawn(monkeypatch):
    f, split = _compile(monkeypatch, dropout_like)
    x = tg.ones(64, requires_grad=True)
    out = f(x)
    (g,) = tg.autograd.grad(out, x)
    mask = g.numpy()        # d out / d x is the forward's mask, drawn once
    assert set(np.unique(mask)) <= {0.0, 1.0} and mask.sum() == out.item()
    assert "random" not in print_graph(split[-1][1])
    f(tg.ones(8, requires_grad=True))       # a second size: traced with a symbolic size
    assert _text(split) == """forward(x:f32[s0]) {
  a:f32[s0] = random  dist='uniform' dtype=float32 generator=generator shape=(s0,)
  b:bool[s0] = gt a 0.5
  c:f32[s0] = mul x b
  out:f32[] = sum c  dims=(0,) dtype=None keepdim=False
  return (out, b)
}
backward(a:bool[s0], d_out:f32[]) {
  b:f32[1] = reshape d_out  shape=(1,)
  d_x:f32[s0] = mul b a
  return (d_x)
}"""


def test_reductions_are_saved_and_the_elementwise_map_recomputed(monkeypatch):
    f, split = _compile(monkeypatch, softmax_loss)
    _check_grads(softmax_loss, f, _data((4, 8), (4, 8)), [0])
    assert _text(split) == """forward(x:f32[4,8], t:f32[4,8]) {
  a:f32[4,1] = amax x  dims=(1,) keepdim=True
  b:f32[4,1] = stop_gradient a
  c:f32[4,8] = sub x b
  d:f32[4,8] = exp c
  e:f32[4,1] = sum d  dims=(1,) dtype=None keepdim=True
  f:f32[4,8] = div d e
  g:f32[4,8] = mul f t
  out:f32[] = sum g  dims=(0,1) dtype=None keepdim=False
  return (out, t, e, x, b)
}
backward(t:f32[4,8], a:f32[4,1], x:f32[4,8], b:f32[4,1], d_out:f32[]) {
  c:f32[1,1] = reshape d_out  shape=(1,1)
  d:f32[4,8] = mul c t
  e:f32[4,8] = div d a
  f:f32[4,8] = neg d
  g:f32[4,8] = sub x b
  h:f32[4,8] = exp g
  i:f32[4,8] = mul f h
  j:f32[4,1] = mul a a
  k:f32[4,8] = div i j
  l:f32[4,1] = sum k  dims=(1,) dtype=None keepdim=True
  m:f32[4,8] = add e l
  d_x:f32[4,8] = mul m h
  return (d_x)
}"""


def test_recomputation_stops_at_the_depth_bound(monkeypatch):
    f, split = _compile(monkeypatch, sines)
    _check_grads(sines, f, _data(8), [0])
    forward, backward, _ = split[-1]
    n_res = len(backward.inputs) - 1
    assert 1 < n_res and _recompute_depth(backward, n_res) <= P.MAX_RECOMPUTE_DEPTH


def mutate_then_use(x, buf):
    buf.mul_(2)
    return (tg.exp(x * buf) * buf).sum()


def test_an_input_written_in_place_is_not_free_to_save(monkeypatch):
    f, split = _compile(monkeypatch, mutate_then_use)
    got = [tg.tensor(np.linspace(-1, 1, 5), requires_grad=True), tg.tensor(np.arange(5.0))]
    want = [tg.tensor(np.linspace(-1, 1, 5), requires_grad=True), tg.tensor(np.arange(5.0))]
    (g,) = tg.autograd.grad(f(*got), got[0])
    (e,) = tg.autograd.grad(mutate_then_use(*want), want[0])
    np.testing.assert_allclose(g.numpy(), e.numpy())
    np.testing.assert_allclose(got[1].numpy(), want[1].numpy())
    joint, n_in, n_out = split[-1][2][:3]
    buf = joint.inputs[1]
    # free to save, buf is saved and the runtime copies it before the write-back; marked
    # written, the new value (a forward value the backward reads anyway) is saved instead
    assert buf in P.partition(joint, n_in, n_out)[2]
    residuals = P.partition(joint, n_in, n_out, written=(1,))[2]
    assert buf not in residuals and len(residuals) == 2


def test_explain_lists_saved_and_recomputed_values():
    f = tg.compile(layer_norm)
    f(*[tg.tensor(a, requires_grad=True) for a in _data((4, 8), 8, 8)])
    text = f.explain()
    assert "saves 5 value(s) for backward (224 bytes, 32 beyond the inputs)" in text
    assert "      x: f32[4,8], 128 bytes (an input)\n      mu: f32[4,1], 16 bytes\n" in text
    assert "backward recomputes 16 value(s) from them: " in text and " xh," in text


def test_max_flow_and_cut_on_a_small_network():
    # s -> a (3), s -> b (2), a -> b (1), a -> t (2), b -> t (3): max flow 5
    net = P._Network(4)
    s, a, b, t = range(4)
    for u, v, c in ((s, a, 3), (s, b, 2), (a, b, 1), (a, t, 2), (b, t, 3)):
        net.edge(u, v, c)
    assert net.max_flow(s, t) == 5
    assert net.reachable(s) == [True, False, False, False]
