"""Graph-to-graph passes, one a file; ``pipeline`` runs them in order."""
