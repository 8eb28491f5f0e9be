"""Where a GGUF file is cut short: a walk over its header, field by field with bounds checks, and then over
the byte ranges its tensor infos promise. The ``gguf`` package reads past the end of a truncated file and
fails with whatever numpy says ("index 0 is out of bounds", "cannot reshape array"); this names the part
of the file that is missing instead. It only runs once the package has failed, so it may be slow on huge
vocabularies (one Python step per string)."""

from __future__ import annotations

import mmap
import os
import struct

GGUF_MAGIC = b"GGUF"
DEFAULT_ALIGNMENT = 32
# GGUF value types: bytes of the scalar ones; 8 is a string, 9 an array
SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
STRING, ARRAY, UINT32 = 8, 9, 4
VERSIONS = (2, 3)  # the versions the gguf package reads (version 1 had 32-bit counts)


class _Cut(Exception):
    """The file ends inside `what`, which runs to byte `needs` (or beyond, when `at_least`)."""

    def __init__(self, what: str, needs: int, at_least: bool = False) -> None:
        super().__init__(what)
        self.what, self.needs, self.at_least = what, needs, at_least


class _Walk:
    """A cursor over the file's bytes that raises :class:`_Cut` instead of reading past the end."""

    def __init__(self, buf: mmap.mmap, order: str) -> None:
        self.buf, self.size, self.order, self.pos = buf, len(buf), order, 0
        self.what = "the header (magic, version, tensor and key-value counts)"

    def need(self, n: int, at_least: bool = False) -> None:
        """Return None when `n` more bytes are there, else raise :class:`_Cut` for the part being read (`n`
        is only its least size when `at_least`)."""
        if self.pos + n > self.size:
            raise _Cut(self.what, self.pos + n, at_least)

    def skip(self, n: int) -> None:
        """Move past `n` bytes of the part being read (returns nothing)."""
        self.need(n)
        self.pos += n

    def unpack(self, fmt: str) -> int:
        """Return the next value of struct format `fmt` (one code) in the file's byte order."""
        at = self.pos
        self.skip(struct.calcsize(fmt))
        return struct.unpack_from(self.order + fmt, self.buf, at)[0]

    def string(self) -> bytes:
        """Return the next GGUF string (u64 length, bytes)."""
        n = self.unpack("Q")
        at = self.pos
        self.skip(n)
        return bytes(self.buf[at : at + n])

    def value(self, vtype: int) -> int | None:
        """Move past one value of GGUF type `vtype`; return it when it is a u32 (the alignment), else None."""
        if vtype == UINT32:
            return self.unpack("I")
        if vtype in SCALAR_BYTES:
            self.skip(SCALAR_BYTES[vtype])
        elif vtype == STRING:
            self.string()
        elif vtype == ARRAY:
            item, count = self.unpack("I"), self.unpack("Q")
            if item in SCALAR_BYTES:
                self.skip(count * SCALAR_BYTES[item])
            else:
                # every string or array item takes 8 bytes at least: a count the file cannot hold is cut
                # short here, not after billions of steps
                self.need(count * 8, at_least=True)
                for _ in range(count):
                    self.value(item)
        else:
            raise ValueError(f"unknown GGUF value type {vtype}")
        return None


def _tensor_bytes(dims: list[int], ggml_type: int) -> int | None:
    """Return the bytes of a tensor of shape `dims` and GGML type `ggml_type`, None for a type the gguf
    package does not know."""
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType

    try:
        block, type_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(ggml_type)]
    except (ValueError, KeyError):
        return None
    n = 1
    for d in dims:
        n *= d
    return n // block * type_bytes


def _walk(w: _Walk) -> str | None:
    """Walk the header and the tensor data ranges; return the sentence for a data section cut short, or None
    when every byte the header promises is there (the header's own cuts raise :class:`_Cut`)."""
    w.skip(4)  # the magic
    if w.unpack("I") not in VERSIONS:
        return None  # the gguf package's own message says which version it cannot read
    n_tensors, n_kv = w.unpack("Q"), w.unpack("Q")
    alignment = DEFAULT_ALIGNMENT
    for i in range(n_kv):
        w.what = f"metadata key-value pair {i + 1:,} of {n_kv:,}"
        key = w.string().decode("utf-8", "replace")
        w.what += f" ({key})"
        vtype = w.unpack("I")
        value = w.value(vtype)
        if key == "general.alignment" and value:
            alignment = value
    infos = []
    for j in range(n_tensors):
        w.what = f"tensor info {j + 1:,} of {n_tensors:,}"
        name = w.string().decode("utf-8", "replace")
        w.what += f" ({name})"
        n_dims = w.unpack("I")
        w.need(n_dims * 8 + 12, at_least=True)  # a corrupt count must not loop billions of times
        dims = [w.unpack("Q") for _ in range(n_dims)]
        ggml_type, offset = w.unpack("I"), w.unpack("Q")
        infos.append((offset, name, _tensor_bytes(dims, ggml_type) or 0))
    data_start = w.pos + (-w.pos) % alignment
    if data_start > w.size and n_tensors:
        raise _Cut("the alignment padding before the tensor data", data_start)
    ends = [(data_start + off + n, data_start + off, name) for off, name, n in infos]
    need = max((e for e, _, _ in ends), default=0)
    if need <= w.size:
        return None
    end, start, name = min(t for t in ends if t[0] > w.size)
    return (
        f"truncated GGUF file: {w.size:,} bytes, but its tensor data run to byte {need:,}; it ends inside "
        f"{name} (bytes {start:,} to {end:,})"
    )


def truncation(path: str | os.PathLike) -> str | None:
    """Return the sentence saying where the GGUF file at `path` is cut short (the part it ends inside, and
    the bytes that part needs), or None when it is not a truncated GGUF file (another magic, an unknown
    version or value type, or every byte is there)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return "empty file: not a GGUF model"
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if buf[: min(size, 4)] != GGUF_MAGIC[: min(size, 4)]:
                return None
            # a file written on a big-endian machine reads its version with the low 16 bits zero
            big = size >= 8 and struct.unpack_from("<I", buf, 4)[0] & 0xFFFF == 0
            try:
                return _walk(_Walk(buf, ">" if big else "<"))
            except _Cut as cut:
                return (
                    f"truncated GGUF file: it ends at byte {size:,}, inside {cut.what}, "
                    f"which runs to byte {cut.needs:,}{' or beyond' if cut.at_least else ''}"
                )
            except ValueError:  # an unknown value type: corrupt, not (only) cut short
                return None
