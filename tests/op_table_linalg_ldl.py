"""Op-table entries for linalg's LDL factorization and Householder products
(``linalg_ldl.py``)."""
from op_table import op  # noqa: F401
