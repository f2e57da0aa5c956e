"""``tracegrad.optim``: optimizers that update parameters in place, PyTorch's formulas."""
from . import lr_scheduler
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam",
           "RAdam", "LBFGS", "lr_scheduler"]
