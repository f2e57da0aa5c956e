"""PyTorch names programs reach for: Tensor random fills, index_fill_/scatter_, tril/triu
indices, trunc_normal_, multiprocessing, amp, nn.utils.rnn and sdpa_kernel."""
import math
import pickle
import warnings

import numpy as np
import pytest

import tracegrad as tg

torch = pytest.importorskip("torch")

N = 200_000


def _close(value, expected, sd, k=5):
    """``value`` (a mean over N draws) within k standard errors of ``expected``."""
    assert abs(float(value) - expected) < k * sd / math.sqrt(N), (float(value), expected)


# random in-place fills ----------------------------------------------------------------

@pytest.mark.parametrize("fill, mean, sd", [
    (lambda x: x.normal_(2.0, 3.0), 2.0, 3.0),
    (lambda x: x.uniform_(-1.0, 3.0), 1.0, 4 / math.sqrt(12)),
    (lambda x: x.exponential_(2.0), 0.5, 0.5),
    (lambda x: x.geometric_(0.25), 4.0, math.sqrt(0.75) / 0.25),
    (lambda x: x.log_normal_(0.0, 0.5), math.exp(0.125),
     math.sqrt((math.exp(0.25) - 1) * math.exp(0.25))),
    (lambda x: x.bernoulli_(0.3), 0.3, math.sqrt(0.21)),
    (lambda x: x.random_(3, 9), 5.5, math.sqrt((6 ** 2 - 1) / 12)),
    (lambda x: x.random_(4), 1.5, math.sqrt((4 ** 2 - 1) / 12)),
])
def test_random_fills_have_the_distributions_moments_and_return_self(fill, mean, sd):
    x = tg.empty(N, dtype=tg.float64)
    before = x._version
    assert fill(x) is x and x.dtype is tg.float64 and x.shape == (N,)
    assert x._version > before
    _close(x.mean(), mean, sd)
    assert abs(float(x.std()) - sd) < 0.02 * sd


def test_the_random_fills_supports_are_pytorchs():
    x = tg.empty(N)
    assert float(x.geometric_(0.5).min()) == 1.0 and (x == x.floor()).all()
    assert float(x.exponential_().min()) >= 0 and float(x.log_normal_().min()) > 0
    assert set(x.random_(3, 6).unique().tolist()) == {3.0, 4.0, 5.0}
    assert float(x.uniform_(2, 3).min()) >= 2 and float(x.max()) < 3
    # cauchy: the median and the quartiles, median +- sigma
    c = x.cauchy_(1.0, 2.0).numpy()
    q1, q2, q3 = np.quantile(c, [0.25, 0.5, 0.75])
    assert abs(q2 - 1) < 0.05 and abs(q1 + 1) < 0.06 and abs(q3 - 3) < 0.06


def test_random_without_bounds_covers_the_dtypes_exact_integers():
    assert float(tg.empty(N).random_().max()) > 2 ** 23      # float32: [0, 2**24]
    assert float(tg.empty(N).random_().max()) <= 2 ** 24
    u8 = tg.empty(N, dtype=tg.uint8).random_()
    assert u8.dtype is tg.uint8 and int(u8.max()) == 255 and int(u8.min()) == 0
    assert set(tg.empty(1000, dtype=tg.bool).random_().tolist()) == {False, True}
    assert int(tg.empty(N, dtype=tg.int64).random_().max()) > 2 ** 60


def test_random_fills_are_reproducible_by_seed_and_generator():
    tg.manual_seed(7)
    a = tg.empty(5).normal_()
    tg.manual_seed(7)
    assert (tg.empty(5).normal_() == a).all()
    g1, g2 = tg.Generator().manual_seed(3), tg.Generator().manual_seed(3)
    assert (tg.empty(5).uniform_(0, 1, generator=g1) ==
            tg.empty(5).uniform_(0, 1, generator=g2)).all()
    assert (tg.empty(5).exponential_(generator=g1) != tg.empty(5).exponential_(generator=g2)
            ).sum() == 0


def test_fills_work_on_parameters_under_no_grad_and_through_data():
    m = tg.nn.Linear(50, 40)
    m.weight.data.normal_(0, 0.02)
    assert abs(float(m.weight.std()) - 0.02) < 0.002 and m.weight.requires_grad
    with tg.no_grad():
        m.bias.uniform_(5, 6)
    assert float(m.bias.min()) >= 5
    with pytest.raises(RuntimeError, match="leaf Variable"):
        m.weight.normal_()      # as in PyTorch: an in-place write to a leaf that needs grad


def test_bad_parameters_are_refused_like_pytorch():
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        tg.empty(3).normal_(0, -1)
    with pytest.raises(RuntimeError, match="from=2 >= to=2"):
        tg.empty(3).random_(2, 2)
    with pytest.raises(RuntimeError, match=r"p to be in \(0, 1\)"):
        tg.empty(3).geometric_(1.5)


def test_random_fills_stay_random_inside_compile():
    def f(x):
        y = tg.zeros(6)
        y.normal_(0, 1)
        x = x.clone()
        x.random_(2, 9)
        return y + x
    g = tg.compile(f)
    a = tg.zeros(6)
    assert not (g(a) == g(a)).all()
    tg.manual_seed(0)
    r1 = g(a)
    tg.manual_seed(0)
    assert (g(a) == r1).all()
    tg.manual_seed(0)
    assert (f(a) == r1).all()       # the compiled draws are eager's draws


# index_fill_, scatter_, tril/triu_indices, trunc_normal_ ------------------------------

def test_index_fill_matches_pytorch():
    base = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for dim, idx in [(0, [1]), (1, [0, 2]), (-1, [3, -4]), (2, 1)]:
        x, y = tg.tensor(base), torch.tensor(base)
        out = x.index_fill_(dim, tg.tensor(idx), -1.5)
        assert out is x and x._version == 1
        assert np.array_equal(x.numpy(), y.index_fill_(dim, torch.tensor(idx), -1.5).numpy())
    assert np.array_equal(tg.tensor(base).index_fill(1, tg.tensor([1]), tg.tensor(7.)).numpy(),
                          torch.tensor(base).index_fill(1, torch.tensor([1]), 7.).numpy())


def test_scatter_matches_pytorch():
    idx = [[0, 1, 2], [2, 0, 1]]
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    cases = [
        (lambda t, m: t.zeros(3, 5).scatter_(1, m.tensor([[0], [2], [4]]), 7.0)),
        (lambda t, m: t.zeros(3, 5).scatter_(1, m.tensor(idx[:1] * 3), t.tensor(src))),
        (lambda t, m: t.ones(3, 3).scatter_(0, m.tensor(idx), t.tensor(src), reduce="add")),
        (lambda t, m: t.full((3, 3), 2.).scatter(0, m.tensor(idx), t.tensor(src),
                                                 reduce="multiply")),
        (lambda t, m: t.zeros(2, 4, dtype=t.int64).scatter(1, m.tensor([[3], [0]]),
                                                           m.tensor([[5], [6]]))),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # PyTorch's deprecation of reduce=
        for case in cases:
            assert np.array_equal(case(tg, tg).numpy(), case(torch, torch).numpy())


def test_scatter_refuses_duplicate_targets_and_passes_gradients():
    with pytest.raises(RuntimeError, match="more than once"):
        tg.zeros(3).scatter(0, tg.tensor([1, 1]), tg.tensor([1., 2.]))
    src = tg.tensor([[1., 2.], [3., 4.]], requires_grad=True)
    base = tg.zeros(2, 3, requires_grad=True)
    out = base.scatter(1, tg.tensor([[0, 2], [1, 0]]), src)
    (out * tg.arange(6.).reshape(2, 3)).sum().backward()
    ts, tb = torch.tensor(src.detach().numpy(), requires_grad=True), torch.zeros(
        2, 3, requires_grad=True)
    (tb.scatter(1, torch.tensor([[0, 2], [1, 0]]), ts) * torch.arange(6.).reshape(2, 3)
     ).sum().backward()
    assert np.array_equal(src.grad.numpy(), ts.grad.numpy())
    assert np.array_equal(base.grad.numpy(), tb.grad.numpy())


def test_index_fill_and_scatter_compile_to_eagers_result():
    def f(x):
        y = x.clone()
        y.index_fill_(1, tg.tensor([0, 2]), 3.0)
        return y + tg.zeros(2, 3).scatter_(1, tg.tensor([[1], [0]]), 5.0)
    x = tg.arange(6.).reshape(2, 3)
    assert np.array_equal(tg.compile(f)(x).numpy(), f(x).numpy())
    assert np.array_equal(f(x).numpy(), [[3., 6., 3.], [8., 4., 3.]])


@pytest.mark.parametrize("args", [(4, 3), (4, 3, 1), (3, 5, -1), (0, 3), (3, 3, -5), (5, 5)])
def test_tril_and_triu_indices_match_pytorch(args):
    for name in ("tril_indices", "triu_indices"):
        ours, theirs = getattr(tg, name)(*args), getattr(torch, name)(*args)
        assert ours.dtype is tg.int64 and ours.shape == tuple(theirs.shape)
        assert np.array_equal(ours.numpy(), theirs.numpy())


def test_trunc_normal_has_the_truncated_moments_and_bounds():
    x = tg.empty(N)
    assert tg.nn.init.trunc_normal_(x, 1.0, 2.0, -1.0, 2.0) is x
    assert float(x.min()) >= -1 and float(x.max()) <= 2
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: 0.5 * (1 + math.erf(z / math.sqrt(2)))  # noqa: E731
    al, be = -1.0, 0.5
    mass = cdf(be) - cdf(al)
    mean = 1 + 2 * (pdf(al) - pdf(be)) / mass
    var = 4 * (1 + (al * pdf(al) - be * pdf(be)) / mass - ((pdf(al) - pdf(be)) / mass) ** 2)
    _close(x.mean(), mean, math.sqrt(var))
    assert abs(float(x.var()) - var) < 0.02 * var


# multiprocessing --------------------------------------------------------------------

def _put_square(rank, q):
    q.put((rank, tg.tensor([float(rank)]) ** 2))


def test_multiprocessing_is_the_stdlib_with_spawn():
    import multiprocessing

    import tracegrad.multiprocessing as mp
    assert mp.Process is multiprocessing.Process and mp.Queue and mp.set_start_method
    assert mp.get_context("spawn").get_start_method() == "spawn"
    assert pickle.loads(pickle.dumps(tg.arange(3.))).tolist() == [0.0, 1.0, 2.0]
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    mp.spawn(_put_square, args=(q,), nprocs=2, start_method="fork")
    got = dict(q.get(timeout=30) for _ in range(2))
    assert {k: v.tolist() for k, v in got.items()} == {0: [0.0], 1: [1.0]}


def _fail(rank):
    raise SystemExit(3)


def test_spawn_raises_when_a_process_fails():
    import tracegrad.multiprocessing as mp
    with pytest.raises(mp.ProcessRaisedException, match="exit code 3"):
        mp.spawn(_fail, nprocs=1, start_method="fork")


# amp --------------------------------------------------------------------------------

def test_autocast_is_a_switch_context_and_decorator_that_casts_nothing():
    x = tg.ones(2, 2)
    assert not tg.amp.is_autocast_enabled("cpu")
    with pytest.warns(UserWarning, match="casts nothing") if not tg.amp.autocast_mode._warned \
            else warnings.catch_warnings():
        with tg.autocast("cpu", dtype=tg.float16):
            assert tg.amp.is_autocast_enabled("cpu") and (x @ x).dtype is tg.float32
            with tg.amp.autocast("cpu", enabled=False):
                assert not tg.amp.is_autocast_enabled("cpu")
            assert tg.amp.is_autocast_enabled("cpu")
    assert not tg.amp.is_autocast_enabled("cpu")

    @tg.amp.autocast("cpu")
    def f():
        return tg.amp.is_autocast_enabled("cpu")
    assert f() and not tg.amp.is_autocast_enabled("cpu")
    with pytest.raises(RuntimeError, match="no bfloat16"):
        tg.amp.autocast("cpu", dtype=tg.int64)


@pytest.mark.skipif(tg.cuda.is_available(), reason="checks the CPU-only behaviour")
def test_cuda_amp_without_a_gpu_disables_itself_as_pytorch_does():
    with pytest.warns(UserWarning, match="CUDA is not available"):
        with tg.amp.autocast("cuda"):
            assert not tg.amp.is_autocast_enabled("cuda")
    with pytest.warns(UserWarning, match="Disabling"):
        s = tg.amp.GradScaler("cuda")
    assert not s.is_enabled() and s.get_scale() == 1.0 and s.state_dict() == {}
    loss = tg.tensor(2.0)
    assert s.scale(loss) is loss
    from tracegrad.cuda.amp import GradScaler, autocast
    with pytest.warns(UserWarning):
        assert not GradScaler().is_enabled()
    with pytest.warns(UserWarning):
        with autocast():
            pass
    assert tg.cuda.is_bf16_supported() is False


def _train(lib, grads_inf_at, steps=6, **kw):
    lib.manual_seed(0)
    w0 = np.array([[0.5, -1.0], [2.0, 0.25]], dtype=np.float32)
    w = lib.nn.Parameter(lib.tensor(w0))
    opt = lib.optim.SGD([w], lr=0.1)
    scaler = lib.amp.GradScaler("cpu", **kw)
    scales, x = [], lib.tensor([[1.0, 2.0]])
    for i in range(steps):
        opt.zero_grad()
        loss = (x @ w).pow(2).sum() * (float("inf") if i in grads_inf_at else 1.0)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        scales.append(scaler.get_scale())
    return w.detach().numpy(), scales, scaler.state_dict()


def test_grad_scaler_steps_skips_and_rescales_like_pytorch():
    for kw in ({"init_scale": 1024.0, "growth_interval": 2}, {}):
        ours = _train(tg, {2}, **kw)
        theirs = _train(torch, {2}, **kw)
        assert np.allclose(ours[0], theirs[0], rtol=1e-6)
        assert ours[1] == theirs[1] and ours[2] == theirs[2]


def test_grad_scaler_unscale_and_state_dict():
    w = tg.nn.Parameter(tg.tensor([1.0, 2.0]))
    opt = tg.optim.SGD([w], lr=1.0)
    s = tg.amp.GradScaler("cpu", init_scale=8.0)
    s.scale((w * 3).sum()).backward()
    assert w.grad.tolist() == [24.0, 24.0]
    s.unscale_(opt)
    assert w.grad.tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    assert w.detach().tolist() == [-2.0, -1.0]
    s.update(4.0)
    assert s.get_scale() == 4.0
    t = tg.amp.GradScaler("cpu")
    t.load_state_dict(s.state_dict())
    assert t.state_dict() == s.state_dict() and t.get_scale() == 4.0
    with pytest.raises(RuntimeError, match="empty"):
        t.load_state_dict({})


# nn.utils.rnn -------------------------------------------------------------------------

SEQS = [np.random.default_rng(i).standard_normal((n, 2)).astype(np.float32)
        for i, n in enumerate((3, 5, 1, 4))]


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["left", "right"])
def test_pad_sequence_matches_pytorch(batch_first, side):
    ours = tg.nn.utils.rnn.pad_sequence([tg.tensor(s) for s in SEQS], batch_first, -1.0, side)
    theirs = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in SEQS], batch_first,
                                             -1.0, side)
    assert np.array_equal(ours.numpy(), theirs.numpy())


@pytest.mark.parametrize("batch_first", [False, True])
def test_pack_then_pad_round_trips_like_pytorch(batch_first):
    from tracegrad.nn.utils import rnn
    R = torch.nn.utils.rnn
    lengths = [len(s) for s in SEQS]
    padded = rnn.pad_sequence([tg.tensor(s) for s in SEQS], batch_first)
    tpadded = R.pad_sequence([torch.tensor(s) for s in SEQS], batch_first)
    ours = rnn.pack_padded_sequence(padded, lengths, batch_first, enforce_sorted=False)
    theirs = R.pack_padded_sequence(tpadded, lengths, batch_first, enforce_sorted=False)
    assert isinstance(ours, rnn.PackedSequence)
    for a, b in zip(ours, theirs):
        assert np.array_equal(a.numpy(), b.numpy())
    out, lens = rnn.pad_packed_sequence(ours, batch_first, padding_value=9.0, total_length=7)
    tout, tlens = R.pad_packed_sequence(theirs, batch_first, padding_value=9.0,
                                        total_length=7)
    assert np.array_equal(out.numpy(), tout.numpy()) and lens.tolist() == tlens.tolist()
    back = rnn.unpack_sequence(rnn.pack_sequence([tg.tensor(s) for s in SEQS], False))
    assert all(np.array_equal(a.numpy(), s) for a, s in zip(back, SEQS))


def test_packing_sorted_input_and_its_errors():
    from tracegrad.nn.utils import rnn
    seqs = sorted(SEQS, key=len, reverse=True)
    p = rnn.pack_sequence([tg.tensor(s) for s in seqs])
    q = torch.nn.utils.rnn.pack_sequence([torch.tensor(s) for s in seqs])
    assert p.sorted_indices is None and q.sorted_indices is None
    assert p.batch_sizes.tolist() == q.batch_sizes.tolist()
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        rnn.pack_sequence([tg.tensor(s) for s in SEQS])
    out, (h, c) = tg.nn.LSTM(2, 3)(p)      # packed in, packed out (tests/test_rnn_packed.py)
    assert type(out) is rnn.PackedSequence and out.batch_sizes.tolist() == q.batch_sizes.tolist()
    assert h.shape == c.shape == (1, len(seqs), 3)


def test_gradients_flow_through_pack_and_pad():
    from tracegrad.nn.utils import rnn
    x = tg.tensor(np.ones((4, 3, 2), np.float32), requires_grad=True)
    packed = rnn.pack_padded_sequence(x, tg.tensor([2, 4, 1]), enforce_sorted=False)
    out, _ = rnn.pad_packed_sequence(packed)
    out.sum().backward()
    mask = (np.arange(4)[:, None] < np.array([2, 4, 1])[None, :]).astype(np.float32)
    assert np.array_equal(x.grad.numpy(), np.repeat(mask[..., None], 2, -1))


# nn.attention -------------------------------------------------------------------------

def test_sdpa_kernel_is_accepted_and_changes_nothing():
    from tracegrad.nn.attention import SDPBackend, sdpa_kernel
    theirs = torch.nn.attention.SDPBackend.__members__
    assert {b.name: b.value for b in SDPBackend} == {k: int(v) for k, v in theirs.items()}
    q = tg.randn(1, 2, 3, 4)
    ref = tg.nn.functional.scaled_dot_product_attention(q, q, q)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):
        assert (tg.nn.functional.scaled_dot_product_attention(q, q, q) == ref).all()
    with pytest.raises(TypeError, match="SDPBackend"):
        with sdpa_kernel("math"):
            pass
