"""tracegrad.onnx.export: models written as ONNX from the traced IR, run in onnxruntime.

Each export is checked by ``onnx.checker`` (full check, with shape inference) inside
``export``, then run by onnxruntime and compared with tracegrad's own outputs. Tolerance:
float32, atol = rtol = 1e-5, i.e. ~100 ulps at magnitude 1: onnxruntime's kernels (MLAS
GEMM, its exp/tanh, its reduction order) round differently from NumPy's in every op of a
chain of tens of ops, but compute the same functions.
"""
import inspect
import io
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import tracegrad as torch  # noqa: E402
from tracegrad import nn  # noqa: E402
import tracegrad.nn.functional as F  # noqa: E402
from tracegrad.trace import map_structure  # noqa: E402

TOL = dict(rtol=1e-5, atol=1e-5)


def _flat(result):
    out = []
    map_structure(result, lambda t: out.append(t) if isinstance(t, torch.Tensor) else None)
    return out


def _session(buf):
    return ort.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])


def roundtrip(model, args, runs=(), **kw):
    """Export ``model`` on ``args``; run onnxruntime on ``args`` and on each of ``runs``
    (other inputs: other batch sizes) and compare with the model's own outputs."""
    buf = io.BytesIO()
    was = model.training
    program = torch.onnx.export(model, args, buf, **kw)
    assert model.training == was        # exported in eval mode, its own mode given back
    sess = _session(buf)
    names = [i.name for i in sess.get_inputs()]
    model.eval()
    for xs in (args,) + tuple(runs):
        got = sess.run(None, {n: x.numpy() for n, x in zip(names, xs)})
        with torch.no_grad():
            want = _flat(model(*xs))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == tuple(w.shape) and g.dtype == w.numpy().dtype
            np.testing.assert_allclose(g, w.numpy(), **TOL)
    model.train(was)
    return program, sess


# the four models ------------------------------------------------------------------------------

def test_mlp_with_dynamic_batch():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(),
                          nn.Linear(16, 3), nn.LogSoftmax(-1))
    program, sess = roundtrip(model, (torch.randn(4, 6),), runs=[(torch.randn(9, 6),)],
                              input_names=["x"], output_names=["logp"],
                              dynamic_axes={"x": {0: "batch"}, "logp": {0: "batch"}})
    graph = program.model_proto.graph
    dims = lambda v: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]  # noqa
    assert [i.name for i in graph.input] == ["x"] and dims(graph.input[0]) == ["batch", 6]
    assert [o.name for o in graph.output] == ["logp"] and dims(graph.output[0]) == ["batch", 3]
    assert {"0.weight", "0.bias", "4.weight"} <= {t.name for t in graph.initializer}


def test_cnn_conv_batchnorm_pool():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2), nn.BatchNorm2d(8), nn.ReLU(),
        nn.Flatten(), nn.Linear(8 * 4 * 4, 10))
    model.train()
    for _ in range(3):      # running statistics that are not the initial ones
        model(torch.randn(8, 3, 16, 16) * 2 + 1)
    assert model.training
    roundtrip(model, (torch.randn(2, 3, 16, 16),), runs=[(torch.randn(5, 3, 16, 16),)],
              input_names=["image"], dynamic_axes={"image": [0]})


class LSTMModel(nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.lstm = nn.LSTM(5, 7, num_layers=layers, batch_first=True)
        self.head = nn.Linear(7, 2)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return self.head(out), h, c


@pytest.mark.parametrize("layers", [1, 2])
def test_lstm_unrolled(layers):
    torch.manual_seed(0)
    model = LSTMModel(layers)
    program, _ = roundtrip(model, (torch.randn(3, 6, 5),), runs=[(torch.randn(2, 6, 5),)],
                           input_names=["seq"], output_names=["y", "h", "c"],
                           dynamic_axes={"seq": {0: "batch"}})
    assert [o.name for o in program.model_proto.graph.output] == ["y", "h", "c"]


def test_transformer_encoder():
    torch.manual_seed(0)
    model = nn.TransformerEncoder(
        nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True), num_layers=2)
    roundtrip(model, (torch.randn(2, 5, 16),), runs=[(torch.randn(3, 5, 16),)],
              input_names=["src"], dynamic_axes={"src": {0: "batch"}})


def test_attention_with_causal_mask():
    torch.manual_seed(0)

    class Attn(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)

        def forward(self, x):
            q, k, v = self.qkv(x).split(8, dim=-1)
            q, k, v = (t.view(x.shape[0], x.shape[1], 2, 4).transpose(1, 2) for t in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return y.transpose(1, 2).reshape(x.shape[0], x.shape[1], 8)

    roundtrip(Attn(), (torch.randn(2, 6, 8),), runs=[(torch.randn(4, 6, 8),)],
              input_names=["x"], dynamic_axes={"x": {0: "batch"}})


# ops beyond the four models -------------------------------------------------------------------

class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


class InPlace(nn.Module):
    def forward(self, x):
        y = x * 2
        y[:, 0] = 0.0
        y[1] += 5
        z = y.t()
        z[0, 1:] = torch.tensor([7.0, 8.0])
        y[torch.tensor([0, 2]), torch.tensor([1, 1])] = -1.0
        return y


OPS = {
    "unary": (lambda x: (torch.exp(x), torch.log(x.abs() + 1), torch.tanh(x), torch.sigmoid(x),
                         torch.erf(x), torch.sqrt(x.abs()), torch.rsqrt(x.abs() + 1),
                         x.sin() * x.cos(), torch.log1p(x.abs()), torch.expm1(x), x.floor(),
                         x.ceil(), x.trunc(), x.round(), x.sign(), x.abs(), -x), [(3, 4)]),
    "binary": (lambda x, y: (x ** 2, x ** 3, x.abs() ** 0.5, x.abs() ** 1.7,
                             torch.pow(x.abs() + 1, y), x // y, x % y, torch.fmod(x, y),
                             torch.div(x, y, rounding_mode="trunc"), torch.atan2(x, y),
                             torch.maximum(x, y), torch.minimum(x, y), x / y), [(3, 4), (3, 4)]),
    "compare": (lambda x, y: (torch.where(x > y, x, y), x >= 0, x != y, x <= y, x == y,
                              (x > 0) & (y > 0), (x > 0) | (y > 0), ~(x > 0),
                              x.clamp(-0.5, 0.5), x.clamp(min=0)), [(3, 4), (4,)]),
    "reduce": (lambda x: (x.sum(1), x.mean(1), x.amax(1), x.amin(0), x.prod(1), x.std(1),
                          x.var(1), x.sum(), x.argmax(1), x.argmin(), (x > 0).any(1),
                          (x > 0).all(), x.max(1).values, x.logsumexp(1), x.cumsum(1),
                          x.norm()), [(3, 4)]),
    "shape": (lambda x: (x.reshape(4, 3), x.t(), x.unsqueeze(0).expand(2, 3, 4), x.flatten(),
                         x.permute(1, 0), torch.stack([x, x], 1), x[None, :, None],
                         x.split(2, 1), x.chunk(3, 0), x.tril(), x.triu(1), torch.roll(x, 1, 1),
                         torch.roll(x, -2, 0), x.flip(0), torch.cat([x, x * 2], 0)), [(3, 4)]),
    "index": (lambda x: (x[1], x[:, 1:3], x[..., -1], x[::2], x[1:, ::2], x[-1, -2],
                         x[torch.tensor([0, 2])], x[:, torch.tensor([3, 1])],
                         x[torch.tensor([0, 1]), torch.tensor([2, 3])],
                         x.gather(1, torch.tensor([[0], [1], [2]])),
                         x.index_select(1, torch.tensor([0, 0]))), [(3, 4)]),
    "activation": (lambda x: (F.softmax(x, -1), F.log_softmax(x, 1), F.gelu(x),
                              F.gelu(x, approximate="tanh"), F.silu(x), F.softplus(x), F.elu(x),
                              F.leaky_relu(x), F.layer_norm(x, (4,)), F.normalize(x)),
                   [(3, 4)]),
    "pool": (lambda x: (F.avg_pool2d(x, 2), F.max_pool2d(x, 3, 2, 1), F.adaptive_avg_pool2d(x, 1),
                        F.adaptive_avg_pool2d(x, (2, 4)),
                        F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                        F.max_pool2d(x, 2, ceil_mode=True), F.adaptive_max_pool2d(x, 2)),
             [(2, 3, 8, 8)]),
    "resize": (lambda x: (F.interpolate(x, scale_factor=2, mode="nearest"),
                          F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=False),
                          F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True),
                          F.interpolate(x, scale_factor=2, mode="bilinear"),
                          F.interpolate(x, size=(3, 5), mode="nearest-exact"),
                          F.interpolate(x, size=(5, 11), mode="nearest")), [(1, 2, 4, 6)]),
    "pad": (lambda x: (F.pad(x, (1, 2)), F.pad(x, (1, 1, 2, 0), value=3.0), F.pad(x, (-1, 1)),
                       F.pad(x, (2, 1, 1, 2), mode="reflect"),
                       F.pad(x[0], (2, 1), mode="replicate"),
                       F.pad(x, (1, 2, 1, 1), mode="circular")), [(1, 2, 4, 5)]),
    "cast": (lambda x: (x.int(), x.long() + 1, (x * 10).to(torch.int32) // 3, x.double() * 2,
                        x.bool(), torch.arange(4) * 2.5, torch.zeros(3, 4) + x,
                        (x * 10).long() % 3), [(3, 4)]),
}


@pytest.mark.parametrize("case", sorted(OPS))
def test_ops(case):
    fn, shapes = OPS[case]
    torch.manual_seed(0)
    roundtrip(Fn(fn), tuple(torch.randn(*s) for s in shapes))


def test_conv_transpose_groups_groupnorm():
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.ReLU(),
        nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1),
        nn.Conv2d(2, 4, 3, groups=2, padding="same"), nn.GroupNorm(2, 4), nn.AvgPool2d(2))
    roundtrip(model, (torch.randn(2, 3, 9, 9),))


def test_writes_through_views():
    """In-place writes (a slice, a transposed view, index tensors) are functionalised in the
    trace and become ScatterElements on the positions of the written region."""
    roundtrip(InPlace(), (torch.randn(3, 4),))


# names, modes, errors ------------------------------------------------------------------------

def test_op_without_onnx_form_names_op_and_line():
    class Chol(nn.Module):
        def forward(self, x):
            return torch.linalg.cholesky(x @ x.mT + torch.eye(3))
    line = inspect.getsourcelines(Chol.forward)[1] + 1
    with pytest.raises(torch.onnx.OnnxExporterError) as e:
        torch.onnx.export(Chol(), (torch.randn(3, 3),), io.BytesIO())
    assert "'linalg_cholesky'" in str(e.value)
    assert f"{__file__}:{line}" in str(e.value)


def test_dynamic_axis_the_model_needs_fixed_is_refused():
    class Branchy(nn.Module):
        def forward(self, x):
            if x.shape[0] == 4:
                return x * 2
            return x
    with pytest.raises(torch.onnx.OnnxExporterError, match="batch.*fixed number"):
        torch.onnx.export(Branchy(), (torch.randn(4, 3),), io.BytesIO(), input_names=["x"],
                          dynamic_axes={"x": {0: "batch"}})


def test_dynamic_axis_of_size_one_is_refused():
    with pytest.raises(ValueError, match="size 2 or more"):
        torch.onnx.export(nn.Linear(3, 2), (torch.randn(1, 3),), io.BytesIO(),
                          input_names=["x"], dynamic_axes={"x": {0: "batch"}})


def test_arguments_checked():
    model, x = nn.Linear(3, 2), torch.randn(2, 3)
    with pytest.raises(ValueError, match="opset_version"):
        torch.onnx.export(model, (x,), io.BytesIO(), opset_version=9)
    with pytest.raises(ValueError, match="neither inputs"):
        torch.onnx.export(model, (x,), io.BytesIO(), dynamic_axes={"nope": [0]})
    with pytest.raises(ValueError, match="input_names"):
        torch.onnx.export(model, (x,), io.BytesIO(), input_names=["a", "b"])


@pytest.mark.parametrize("opset", [13, 17])
def test_older_opsets(opset):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3), nn.Softmax(-1))
    program, _ = roundtrip(model, (torch.randn(2, 4),), opset_version=opset)
    assert program.model_proto.opset_import[0].version == opset


def test_program_save_call_verify_and_export_flag(tmp_path):
    seen = []

    class Probe(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)
            self.drop = nn.Dropout(0.5)

        def forward(self, x):
            seen.append((torch.onnx.is_in_onnx_export(), self.training))
            return self.drop(self.lin(x))

    model, x = Probe(), torch.randn(4, 3)
    path = tmp_path / "probe.onnx"
    program = torch.onnx.export(model, x, str(path), verify=True, dynamo=True,
                                do_constant_folding=True, export_params=True)
    assert seen[0] == (True, False)     # traced in eval mode, inside the export
    assert not torch.onnx.is_in_onnx_export() and model.training
    loaded = onnx.load(str(path))
    assert loaded.graph.node == program.model_proto.graph.node
    model.eval()
    np.testing.assert_allclose(program(x)[0].numpy(), model(x).detach().numpy(), **TOL)


def test_export_params_false_makes_parameters_inputs():
    program = torch.onnx.export(nn.Linear(3, 2), (torch.randn(2, 3),), None,
                                input_names=["x"], export_params=False)
    graph = program.model_proto.graph
    assert [i.name for i in graph.input] == ["x", "weight", "bias"]
    assert not graph.initializer


def test_import_without_onnx_installed():
    code = ("import sys\nsys.modules['onnx'] = None\nsys.modules['onnxruntime'] = None\n"
            "import tracegrad, tracegrad.onnx\nfrom tracegrad import nn\n"
            "assert tracegrad.onnx.TrainingMode.EVAL == 0\n"
            "try:\n    tracegrad.onnx.export(nn.Linear(2, 2), tracegrad.randn(1, 2), 'x.onnx')\n"
            "except ImportError as e:\n    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "pip install 'tracegrad[onnx]'" in out.stdout


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_same_model_exported_by_pytorch_agrees():
    """The same weights exported by torch.onnx (its TorchScript exporter, which needs no
    extra packages) and by tracegrad give the same outputs in onnxruntime."""
    real = pytest.importorskip("torch")
    torch.manual_seed(0)
    ours = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(4 * 3 * 3, 5))
    ours.eval()
    theirs = real.nn.Sequential(real.nn.Conv2d(2, 4, 3, padding=1), real.nn.BatchNorm2d(4),
                                real.nn.ReLU(), real.nn.MaxPool2d(2), real.nn.Flatten(),
                                real.nn.Linear(4 * 3 * 3, 5))
    theirs.load_state_dict({k: real.from_numpy(v.numpy().copy())
                            for k, v in ours.state_dict().items()})
    theirs.eval()
    x = torch.randn(3, 2, 6, 6)
    buf_ours, buf_theirs = io.BytesIO(), io.BytesIO()
    torch.onnx.export(ours, (x,), buf_ours, input_names=["x"])
    try:
        real.onnx.export(theirs, (real.from_numpy(x.numpy().copy()),), buf_theirs,
                         input_names=["x"], dynamo=False)
    except Exception as e:  # noqa: BLE001 - a torch build whose exporter needs more packages
        pytest.skip(f"torch.onnx.export does not run here: {e}")
    a = _session(buf_ours).run(None, {"x": x.numpy()})[0]
    b = _session(buf_theirs).run(None, {"x": x.numpy()})[0]
    np.testing.assert_allclose(a, b, **TOL)


def test_dynamic_shapes_read_as_dynamic_axes():
    class Scale(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1) * 2

    program, _ = roundtrip(Scale(), (torch.randn(3, 2, 2),), runs=[(torch.randn(6, 2, 2),)],
                           dynamic_shapes={"x": {0: "n"}})
    dim = program.model_proto.graph.input[0].type.tensor_type.shape.dim[0]
    assert dim.dim_param == "n"
