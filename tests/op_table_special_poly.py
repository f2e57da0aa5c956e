"""Op-table entries for torch.special's orthogonal polynomials, airy_ai and
spherical_bessel_j0 (``ops/special_poly.py``)."""
from op_table import op  # noqa: F401
