"""Just enough of the WebAssembly binary format to read custom sections.

Written here because wasmtime-py exposes no custom-section API; the format is tiny
(https://webassembly.github.io/spec/core/binary/modules.html): magic, version, then
sections of (id byte, LEB128 size, payload); a custom section (id 0) starts with its name.
"""

from __future__ import annotations

from wasm_rules.errors import ModuleRejectedError

__all__ = ["custom_sections"]

_MAGIC = b"\x00asm\x01\x00\x00\x00"


def _uleb(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 35:
            raise ModuleRejectedError("malformed module: truncated or oversized LEB128 number")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def custom_sections(module: bytes) -> dict[str, list[bytes]]:
    """Every custom section of ``module`` by name, in order."""
    if not module.startswith(_MAGIC):
        raise ModuleRejectedError("not a WebAssembly 1.0 binary module")
    found: dict[str, list[bytes]] = {}
    pos = len(_MAGIC)
    while pos < len(module):
        section_id = module[pos]
        size, start = _uleb(module, pos + 1)
        end = start + size
        if end > len(module):
            raise ModuleRejectedError("malformed module: a section runs past the end")
        if section_id == 0:
            name_len, name_at = _uleb(module, start)
            if name_at + name_len > end:
                raise ModuleRejectedError("malformed module: custom section name too long")
            try:
                name = module[name_at : name_at + name_len].decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ModuleRejectedError("malformed module: custom section name") from exc
            found.setdefault(name, []).append(module[name_at + name_len : end])
        pos = end
    return found
