"""Benchmarks: the physical limit of checkpointing (``bench.raw``) and peer engines
(``bench.peers``), for comparison with Signoff's own journal."""
