"""Benchmarks of Odradek beside its peers and the machine's limits; `make bench` runs `python -m bench.suite`."""
