"""``tracegrad.optim``: optimizers that update parameters in place, PyTorch's formulas.

Each lives under PyTorch's module path (``optim.adam.Adam``, ``optim.adamw.AdamW``,
``optim.optimizer.Optimizer``, ``optim.lr_scheduler``; ``Adafactor`` in ``optim._adafactor``,
which PyTorch's reports as ``torch.optim``)."""
from . import lr_scheduler
from . import adadelta, adagrad, adam, adamax, adamw, asgd, lbfgs, nadam, optimizer  # noqa: F401
from . import radam, rmsprop, rprop, sgd  # noqa: F401
from ._adafactor import Adafactor
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "Rprop", "ASGD", "Adafactor", "LBFGS", "lr_scheduler"]

Adafactor.__module__ = __name__     # as PyTorch reports its Adafactor: torch.optim
