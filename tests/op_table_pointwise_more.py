"""Op-table entries for ops/pointwise_more.py."""
