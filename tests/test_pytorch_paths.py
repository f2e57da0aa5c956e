"""PyTorch's module paths and device flags: the imports PyTorch programs make at the top of
the file succeed with ``torch`` replaced by ``tracegrad``, each path names the same object
as tracegrad's own namespace, and ``accelerator``, ``backends`` and the tensor predicates
give the values PyTorch's CPU build gives (or, with a GPU, the honest cuda ones)."""
import importlib
import warnings

import pytest

import tracegrad as tg

# The import lines of PyTorch's examples and tutorials (MNIST, word language model, DCGAN,
# ImageNet, DDP, nanoGPT-style trainers, the data and optimisation tutorials).
IMPORTS = """
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch import nn, optim, Tensor
from torch.nn import functional as F
from torch.nn import init
from torch.nn import Module, Parameter
from torch.nn.parameter import Parameter
from torch.nn.modules.module import Module
from torch.nn.modules.rnn import LSTM, GRU, RNN, RNNBase
from torch.nn.modules.conv import Conv2d, ConvTranspose2d, _ConvNd
from torch.nn.modules.linear import Linear, Identity
from torch.nn.modules.loss import _Loss, _WeightedLoss, CrossEntropyLoss
from torch.nn.modules.batchnorm import _BatchNorm, BatchNorm2d
from torch.nn.modules.dropout import Dropout, Dropout1d, Dropout2d, Dropout3d, _DropoutNd
from torch.nn.modules.activation import MultiheadAttention, ReLU, GELU
from torch.nn.modules.container import Sequential, ModuleList, ModuleDict
from torch.nn.modules.sparse import Embedding
from torch.nn.modules.transformer import TransformerEncoder, TransformerEncoderLayer
from torch.nn.modules.normalization import LayerNorm, GroupNorm
from torch.nn.modules.pooling import MaxPool2d, AdaptiveAvgPool2d
from torch.nn.modules.flatten import Flatten, Unflatten
from torch.nn.modules.utils import _pair, _single, _triple
from torch.nn.modules import Module, Linear
from torch.nn.utils import clip_grad_norm_, parameters_to_vector
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.nn.init import xavier_uniform_, kaiming_normal_, zeros_
from torch.optim import Adam, AdamW, SGD, Adadelta, RMSprop, lr_scheduler
from torch.optim.lr_scheduler import StepLR, CosineAnnealingLR, LambdaLR, OneCycleLR
from torch.optim.lr_scheduler import ReduceLROnPlateau
from torch.optim.optimizer import Optimizer
from torch.optim.adam import Adam
from torch.optim.adamw import AdamW
from torch.optim.sgd import SGD
from torch.optim.adadelta import Adadelta
from torch.utils.data import DataLoader, Dataset, TensorDataset, random_split, Subset
from torch.utils.data import IterableDataset, get_worker_info, default_collate, ConcatDataset
from torch.utils.data.dataloader import DataLoader, default_collate
from torch.utils.data.dataset import Dataset, TensorDataset, random_split
from torch.utils.data.sampler import RandomSampler, SequentialSampler, BatchSampler
from torch.utils.data.sampler import SubsetRandomSampler, WeightedRandomSampler
from torch.utils.data.distributed import DistributedSampler
from torch.utils.data._utils.collate import default_collate
from torch.utils.checkpoint import checkpoint
import torch.utils.data
import torch.distributed as dist
from torch.distributed import init_process_group, destroy_process_group
import torch.backends.cudnn as cudnn
from torch.backends import cudnn
import torch.backends.mps
import torch.accelerator
from torch.autograd import Variable, Function, grad
from torch.autograd.function import Function
import torch.autograd.profiler as profiler
from torch.profiler import profile, record_function, ProfilerActivity
from torch.serialization import safe_globals
from torch.testing import assert_close
from torch.utils.hooks import RemovableHandle
import torch.linalg
import torch.onnx
import torch.cuda
from torch.nn.utils.rnn import pad_sequence, pack_padded_sequence
import torch.multiprocessing as mp
from torch.amp import autocast, GradScaler
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn import DataParallel
from torch.nn.parallel import DataParallel
from torch.nn.utils import spectral_norm, weight_norm, remove_spectral_norm, remove_weight_norm
from torch.optim.swa_utils import AveragedModel, SWALR, update_bn, get_ema_multi_avg_fn
from torch.random import fork_rng
from torch.utils.checkpoint import checkpoint_sequential
""".strip().splitlines()


@pytest.mark.parametrize("line", IMPORTS)
def test_pytorch_import_lines_succeed(line):
    exec(line.replace("torch", "tracegrad"), {})


def test_paths_name_tracegrads_own_objects():
    from tracegrad.nn.modules.rnn import LSTM
    from tracegrad.optim.adam import Adam
    from tracegrad.optim.optimizer import Optimizer
    from tracegrad.utils.data.dataloader import DataLoader
    from tracegrad.utils.data.distributed import DistributedSampler
    from tracegrad.utils.data.sampler import RandomSampler
    assert LSTM is tg.nn.LSTM and Adam is tg.optim.Adam and Optimizer is tg.optim.Optimizer
    assert DataLoader is tg.utils.data.DataLoader
    assert RandomSampler is tg.utils.data.RandomSampler
    assert DistributedSampler is tg.utils.data.DistributedSampler
    assert tg.nn.modules.Conv2d is tg.nn.Conv2d
    assert tg.nn.modules.utils._pair(3) == (3, 3) and tg.nn.modules.utils._pair((1, 2)) == (1, 2)


def test_nn_modules_files_match_pytorchs():
    """Every layer tracegrad has is found in the same ``nn.modules.<file>`` as PyTorch's."""
    torch = pytest.importorskip("torch")
    import pkgutil
    checked = 0
    for info in pkgutil.iter_modules(torch.nn.modules.__path__):
        theirs = importlib.import_module(f"torch.nn.modules.{info.name}")
        names = [n for n in getattr(theirs, "__all__", []) if hasattr(tg.nn, n)]
        if not names:
            continue
        ours = importlib.import_module(f"tracegrad.nn.modules.{info.name}")
        for name in names:
            assert getattr(ours, name) is getattr(tg.nn, name), f"nn.modules.{info.name}.{name}"
            assert getattr(tg.nn.modules, name) is getattr(tg.nn, name)
            checked += 1
    assert checked >= 90


def test_optim_and_data_modules_match_pytorchs():
    torch = pytest.importorskip("torch")
    checked = 0
    for name in dir(torch.optim):
        cls = getattr(torch.optim, name)
        if isinstance(cls, type) and hasattr(tg.optim, name):
            # a class PyTorch reports as torch.optim's own (Adafactor) is tracegrad.optim's
            path = cls.__module__.replace("torch", "tracegrad", 1)
            ours = importlib.import_module(path)
            file = path.rsplit(".", 1)[1]
            assert getattr(ours, name) is getattr(tg.optim, name), f"optim.{file}.{name}"
            checked += 1
    assert checked >= 11
    wanted = [n for n in torch.utils.data.__all__ if "DataPipe" not in n and not n.startswith(
        "_") and n not in ("DataChunk", "functional_datapipe", "argument_validation",
                           "guaranteed_datapipes_determinism", "non_deterministic",
                           "runtime_validation", "runtime_validation_disabled")]
    assert [n for n in wanted if not hasattr(tg.utils.data, n)] == []
    for sub in ("dataset", "sampler", "dataloader", "distributed"):
        theirs = importlib.import_module(f"torch.utils.data.{sub}")
        ours = importlib.import_module(f"tracegrad.utils.data.{sub}")
        for n in wanted:
            if getattr(theirs, n, None) is getattr(torch.utils.data, n) \
                    and n in getattr(theirs, "__all__", [n]):
                assert getattr(ours, n) is getattr(tg.utils.data, n), f"data.{sub}.{n}"


def test_accelerator_is_honest():
    acc = tg.accelerator
    if tg.cuda.is_available():
        assert acc.is_available() and acc.current_accelerator() == tg.device("cuda")
        assert acc.device_count() == tg.cuda.device_count()
        assert acc.current_device_index() == tg.cuda.current_device()
        return
    torch = pytest.importorskip("torch")
    assert acc.is_available() is torch.accelerator.is_available() is False
    assert acc.current_accelerator() is torch.accelerator.current_accelerator() is None
    assert acc.device_count() == torch.accelerator.device_count() == 0
    for name in ("current_device_index", "synchronize", "empty_cache", "memory_allocated"):
        with pytest.raises(RuntimeError) as ours:
            getattr(acc, name)()
        with pytest.raises(RuntimeError) as theirs:
            getattr(torch.accelerator, name)()
        assert str(ours.value) == str(theirs.value)
    with acc.device_index(None):    # a no-op in PyTorch too
        pass
    # the idiom of PyTorch's current examples
    device = a if (a := acc.current_accelerator()) else tg.device("cpu")
    assert tg.ones(2, device=device).device.type == "cpu"


def test_backends_flags_have_pytorchs_defaults_and_honest_availability():
    torch = pytest.importorskip("torch")
    B, TB = tg.backends, torch.backends
    for flag in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(B.cudnn, flag) == getattr(TB.cudnn, flag), flag
    assert B.cudnn.is_available() is False and B.cudnn.version() is None     # never used
    assert B.mps.is_available() is TB.mps.is_available() is False
    assert B.mps.is_built() is False
    assert B.mkldnn.is_available() is False
    assert B.cuda.is_built() == (importlib.util.find_spec("cupy") is not None)
    for flag in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                 "allow_bf16_reduced_precision_reduction"):
        assert getattr(B.cuda.matmul, flag) == getattr(TB.cuda.matmul, flag), flag
    assert B.cuda.flash_sdp_enabled() == TB.cuda.flash_sdp_enabled()
    if TB.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT"):
        assert B.cpu.get_cpu_capability() == TB.cpu.get_cpu_capability()
    assert tg.get_float32_matmul_precision() == "highest"


def test_backends_flags_are_settable():
    cudnn = tg.backends.cudnn
    cudnn.benchmark = True          # the line of PyTorch's examples
    try:
        assert tg.backends.cudnn.benchmark is True
        with cudnn.flags(enabled=False, deterministic=True):
            assert cudnn.enabled is False and cudnn.deterministic is True
        assert cudnn.enabled is True and cudnn.deterministic is False
        assert cudnn.benchmark is True      # the block gives back what was set before it
    finally:
        cudnn.benchmark = False
    tg.backends.cuda.matmul.allow_tf32 = True
    tg.backends.cuda.matmul.allow_tf32 = False
    tg.set_float32_matmul_precision("high")     # PyTorch's effect on allow_tf32, recorded
    try:
        assert tg.get_float32_matmul_precision() == "high"
        assert tg.backends.cuda.matmul.allow_tf32 is True
    finally:
        tg.set_float32_matmul_precision("highest")
    assert tg.backends.cuda.matmul.allow_tf32 is False
    with pytest.warns(UserWarning, match="is not one of 'highest', 'high', or 'medium'"):
        tg.set_float32_matmul_precision("fast")


def test_tensor_predicates_match_pytorch():
    torch = pytest.importorskip("torch")
    t = torch.ones(2)
    ours = tg.ones(2)
    names = [n for n in dir(t) if n.startswith("is_") and not callable(getattr(t, n))]
    assert {"is_cuda", "is_xpu", "is_mps", "is_meta", "is_sparse", "is_quantized", "is_mkldnn",
            "is_vulkan", "is_ipu", "is_nested", "is_cpu"} <= set(names)
    for n in names:
        assert getattr(ours, n) == getattr(t, n), n
    for dt in ("float32", "float64", "int64", "int32", "uint8", "bool"):
        a, b = tg.zeros(2, dtype=getattr(tg, dt)), torch.zeros(2, dtype=getattr(torch, dt))
        for n in ("is_complex", "is_conj", "is_neg", "is_signed", "is_floating_point"):
            assert getattr(a, n)() == getattr(b, n)(), (dt, n)


def test_safe_globals_path():
    from tracegrad.serialization import safe_globals
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with safe_globals([]):
            pass
