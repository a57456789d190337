"""One module per workload of the suite; each has `run(results, brokers, sizes)` and adds its rows to `results`."""
