"""sparkext benchmarks: one module per question, each measuring ours and a named peer in one run."""
