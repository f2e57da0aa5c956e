"""Op-table entries for ops/search_count.py and ops/statistics.py."""
