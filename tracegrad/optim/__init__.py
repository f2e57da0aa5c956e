"""``tracegrad.optim``: optimizers that update parameters in place, PyTorch's formulas.

Each lives under PyTorch's module path (``optim.adam.Adam``, ``optim.adamw.AdamW``,
``optim.optimizer.Optimizer``, ``optim.lr_scheduler``)."""
from . import lr_scheduler
from . import adadelta, adagrad, adam, adamax, adamw, lbfgs, nadam, optimizer, radam  # noqa: F401
from . import rmsprop, sgd  # noqa: F401
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "LBFGS", "lr_scheduler"]
