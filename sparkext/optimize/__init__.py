"""Table layout optimisation: pure, vectorised space-filling-curve keys for clustering rows."""
