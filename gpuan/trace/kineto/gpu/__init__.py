"""Kineto JSON read on the GPU: the structural scan, field extraction and string ids as device kernels.

``structure_cuda`` finds the events (stage 1: quote, escape and bracket masks per 64-byte word, the
in-string mask by prefix XOR, nesting depth by a prefix sum); ``fields_cuda`` parses each event in its
own thread with the CPU scanner's own functions compiled for CUDA; ``strings_cuda`` turns the string
spans into the ids the CPU reader gives; ``reader`` drives them and hands the rows to the CPU reader's
assembly. Every kernel runs unchanged in numba's CUDA simulator, which is how CI checks it.
"""
