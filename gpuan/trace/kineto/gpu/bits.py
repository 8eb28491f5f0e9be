"""Bit tricks on 64-bit words, written once as plain Python and compiled for CUDA by their users (they
run as they are in numba's CUDA simulator and in the numpy twins)."""

from __future__ import annotations

import numpy as np

ONE = np.uint64(1)
ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
_M1 = np.uint64(0x5555555555555555)
_M2 = np.uint64(0x3333333333333333)
_M4 = np.uint64(0x0F0F0F0F0F0F0F0F)
_H01 = np.uint64(0x0101010101010101)
_LOW7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_HIGHS = np.uint64(0x8080808080808080)
_GATHER = np.uint64(0x0002040810204081)  # the high bit of byte k lands on bit 56 + k
_S1, _S2, _S4, _S7, _S8, _S16, _S32, _S56 = (np.uint64(s) for s in (1, 2, 4, 7, 8, 16, 32, 56))


def popcount64(x):
    """Return the number of set bits of the uint64 x (as an int64)."""
    x = x - ((x >> _S1) & _M1)
    x = (x & _M2) + ((x >> _S2) & _M2)
    x = (x + (x >> _S4)) & _M4
    return np.int64((x * _H01) >> _S56)


def trailing_zeros64(x):
    """Return the index of the lowest set bit of the uint64 x (64 for 0)."""
    return popcount64((x & (~x + ONE)) - ONE)


def byte_bits(w, pattern):
    """Return 8 bits, bit k set where byte k of the word w equals the byte that `pattern` repeats."""
    x = w ^ pattern
    nonzero = ((x & _LOW7) + _LOW7) | x  # high bit of a byte set where the byte is not zero, no carries
    return ((~nonzero & _HIGHS) * _GATHER) >> _S56


def prefix_xor64(x):
    """Return the inclusive prefix XOR of the bits of x: bit i is the parity of bits 0..i."""
    x ^= x << _S1
    x ^= x << _S2
    x ^= x << _S4
    x ^= x << _S8
    x ^= x << _S16
    x ^= x << _S32
    return x
