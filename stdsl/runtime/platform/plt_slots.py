"""Rebind a loaded shared library's calls into another library: its PLT slots (`.got.plt`), read from its ELF file.

CPython loads extension modules with RTLD_NOW, so a library's calls into its dependencies are resolved once, at
import, into its writable `.got.plt` (x86-64 JUMP_SLOT relocations). Writing another function's address into a
slot sends every later call there, as if that library had come first in the symbol lookup. A slot is written only
when it verifiably holds the function of that very name (`dladdr`) on a writable page, so a layout this module does
not understand is refused (BindingError), never guessed at.
"""

from __future__ import annotations

import ctypes
import os
import struct
from dataclasses import dataclass
from pathlib import Path

R_X86_64_JUMP_SLOT = 7
SHT_RELA = 4
RTLD_DI_LINKMAP = 2


class BindingError(Exception):
    """A library's slots cannot be rebound safely (the reason says which check failed)."""


@dataclass(frozen=True)
class Mapping:
    """One line of /proc/self/maps: [start, end), its permissions and the file mapped."""

    start: int
    end: int
    perms: str
    path: str


class _DlInfo(ctypes.Structure):
    _fields_ = [("dli_fname", ctypes.c_char_p), ("dli_fbase", ctypes.c_void_p),
                ("dli_sname", ctypes.c_char_p), ("dli_saddr", ctypes.c_void_p)]


class _LinkMap(ctypes.Structure):
    _fields_ = [("l_addr", ctypes.c_size_t), ("l_name", ctypes.c_char_p)]


_libc = ctypes.CDLL(None)
_libc.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
_libc.dlinfo.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]


def mappings() -> list[Mapping]:
    """The process's file mappings, from /proc/self/maps."""
    out = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            out.append(Mapping(start, end, fields[1], fields[5]))
    return out


def loaded_library(prefix: str) -> str | None:
    """Path of the loaded shared library whose file name starts with `prefix` (e.g. 'libmlx.'), or None."""
    for mapping in mappings():
        if Path(mapping.path).name.startswith(prefix):
            return mapping.path
    return None


def jump_slots(path: str) -> dict[str, int]:
    """Symbol name -> offset from the load base of its JUMP_SLOT, read from the ELF64 little-endian x86-64 file."""
    with open(path, "rb") as elf:
        header = elf.read(64)
        machine, = struct.unpack_from("<H", header, 18)
        if header[:4] != b"\x7fELF" or header[4] != 2 or header[5] != 1 or machine != 62:
            raise BindingError(f"{path} is not an ELF64 little-endian x86-64 library")
        shoff, = struct.unpack_from("<Q", header, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", header, 0x3A)
        elf.seek(shoff)
        raw = elf.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQIIQQ", raw, i * shentsize) for i in range(shnum)]

        def read(index: int) -> bytes:
            elf.seek(sections[index][4])
            return elf.read(sections[index][5])

        names = read(shstrndx)
        slots: dict[str, int] = {}
        for section in sections:
            name = names[section[0]:names.index(b"\0", section[0])]
            if section[1] != SHT_RELA or name != b".rela.plt":
                continue
            symbols, strings = read(section[6]), read(sections[section[6]][6])
            relocations = read(sections.index(section))
            for offset, info, _ in struct.iter_unpack("<QQq", relocations):
                if info & 0xFFFFFFFF != R_X86_64_JUMP_SLOT:
                    continue
                st_name, = struct.unpack_from("<I", symbols, (info >> 32) * 24)
                slots[strings[st_name:strings.index(b"\0", st_name)].decode()] = offset
        return slots


def load_base(path: str) -> int:
    """The load base (link map `l_addr`) of the already loaded library at `path`."""
    handle = ctypes.CDLL(path, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)._handle
    link_map = ctypes.POINTER(_LinkMap)()
    if _libc.dlinfo(handle, RTLD_DI_LINKMAP, ctypes.byref(link_map)) != 0:
        raise BindingError(f"dlinfo found no link map for {path}")
    return int(link_map.contents.l_addr)


def symbol_at(address: int) -> tuple[str, str] | None:
    """(library path, symbol name) of the function that starts exactly at `address`, or None."""
    info = _DlInfo()
    if not address or _libc.dladdr(address, ctypes.byref(info)) == 0 or info.dli_saddr != address:
        return None
    if info.dli_sname is None or info.dli_fname is None:
        return None
    return os.fsdecode(info.dli_fname), info.dli_sname.decode()


def slot_library(path: str, name: str) -> str | None:
    """The file of the function that the loaded library `path` calls for `name` now (None: no such slot)."""
    offset = jump_slots(path).get(name)
    if offset is None:
        return None
    address = load_base(path) + offset
    if not any(m.start <= address and address + 8 <= m.end for m in mappings() if m.path == path):
        raise BindingError(f"the slot of {name} lies outside {path}'s mappings")
    found = symbol_at(ctypes.c_uint64.from_address(address).value)
    return None if found is None else found[0]


def rebind(path: str, target: ctypes.CDLL) -> tuple[int, int]:
    """Point every slot of the loaded library `path` whose function the file of `target` defines at that function.

    Returns (slots rewritten, slots already pointing into `target`). Raises BindingError if a slot to rewrite does
    not hold the function of its name or lies on a page that is not writable.
    """
    base = load_base(path)
    writable = [m for m in mappings() if m.path == path and "w" in m.perms]
    target_file = Path(target._name).resolve()
    plan: list[tuple[int, int]] = []
    kept = 0
    for name, offset in jump_slots(path).items():
        try:
            replacement = ctypes.cast(getattr(target, name), ctypes.c_void_p).value or 0
        except AttributeError:
            continue
        defined = symbol_at(replacement)
        if defined is None or Path(defined[0]).resolve() != target_file:
            continue
        address = base + offset
        if not any(m.start <= address and address + 8 <= m.end for m in writable):
            raise BindingError(f"the slot of {name} in {path} is not on a writable page")
        current = ctypes.c_uint64.from_address(address).value
        if current == replacement:
            kept += 1
            continue
        found = symbol_at(current)
        if found is None or found[1] != name:
            raise BindingError(f"the slot of {name} in {path} holds {found} instead of {name}")
        plan.append((address, replacement))
    for address, replacement in plan:
        ctypes.c_uint64.from_address(address).value = replacement
    return len(plan), kept
