"""Op-table entries for scatter_reduce, index_reduce and the small tensor functions PyTorch's
OpInfo database names (``ops/index_more.py``, ``ops/methods_more.py``)."""
from op_table import op  # noqa: F401
