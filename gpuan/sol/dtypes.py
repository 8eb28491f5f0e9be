"""Element types as the PyTorch profiler writes them (``Input type``), with their sizes in bytes."""

from __future__ import annotations

#: profiler spelling → (gpuan dtype name, bytes per element)
DTYPES: dict[str, tuple[str, int]] = {
    "float": ("fp32", 4),
    "double": ("fp64", 8),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "c10::Float8_e8m0fnu": ("fp8", 1),
    "long int": ("int64", 8),
    "long": ("int64", 8),
    "int": ("int32", 4),
    "short int": ("int16", 2),
    "short": ("int16", 2),
    "signed char": ("int8", 1),
    "unsigned char": ("uint8", 1),
    "bool": ("bool", 1),
    "c10::complex<float>": ("complex64", 8),
    "c10::complex<double>": ("complex128", 16),
    "c10::complex<c10::Half>": ("complex32", 4),
}

#: c10::ScalarType codes (as ``Concrete Inputs`` write a ``dtype=`` argument) → gpuan dtype and size
SCALAR_TYPES: dict[int, tuple[str, int]] = {
    0: ("uint8", 1), 1: ("int8", 1), 2: ("int16", 2), 3: ("int32", 4), 4: ("int64", 8), 5: ("fp16", 2),
    6: ("fp32", 4), 7: ("fp64", 8), 11: ("bool", 1), 15: ("bf16", 2), 23: ("fp8", 1), 24: ("fp8", 1),
}  # fmt: skip


def dtype_of(type_name: str) -> tuple[str, int] | None:
    """Return (dtype, bytes per element) for a profiler type name, or None for non-tensors ("Scalar", "")."""
    return DTYPES.get(type_name)
