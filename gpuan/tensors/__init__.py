"""Tensor-access analysis: which parts of a model file an instrumented llama.cpp touched, when, per token,
layer, component and expert; weights against intermediates; the checks that say whether to trust it.

``analyse(inputs)`` (:mod:`gpuan.tensors.analysis`) takes what
:func:`gpuan.trace.tensor_inputs.load_tensor_inputs` loaded, makes one pass over the log
(:mod:`gpuan.tensors.scan`) and returns a :class:`~gpuan.result.Result` of the tables
(:mod:`gpuan.tensors.tables`) and a summary holding the checks (:mod:`gpuan.tensors.checks`)."""

from gpuan.tensors.analysis import REPORT_TABLES, analyse

__all__ = ["REPORT_TABLES", "analyse"]
