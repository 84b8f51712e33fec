"""Benchmarks of the memory layer that ship with memlab.

- ``workload``: THE seeded workload generator (records, queries and their vectors)
  used by ``memlab bench store`` and by the scripts in ``benchmarks/``;
- ``store``: ``memlab bench store``, every store backend on one workload.
"""
