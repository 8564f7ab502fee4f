"""Run directories on disk, the run history and the lab's views across runs (store layer).

Import the module you need (``store.rundir``, ``store.history``, ``store.fleet``, …): the package
re-exports nothing, so a user of one module does not pay for the others' numpy, pyarrow and summary
model (~150 ms). The summary's model is :mod:`softrt.schema.summary`.
"""
