"""Checks of a shared library file before anything loads it.

    problem("/cache/step_v0-1a2b.so", ["forward_fused0"])
    # None, or ("is truncated (812 of 15960 bytes)", ()), or ("lacks forward_fused0",
    # ("forward_fused0",))

dlopen maps a library's segments as its headers describe them; a file shorter than that
kills the process with SIGBUS at the first touch, so a library from the cache or from a
compiler is read here first: the ELF header, the program and section header tables, and
the names the dynamic symbol table defines.
"""
import os
import struct


def problem(path, symbols=()):
    """None when `path` is a complete ELF shared object defining every name in `symbols`,
    else (what is wrong with it, the symbols it lacks). Symbols are read from the dynamic
    symbol table; a file without section headers passes that part (the caller checks
    after loading)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(64)
        if head[:4] != b"\x7fELF":
            return f"is not an ELF file ({size} bytes)", ()
        if len(head) < 16:
            return f"is truncated ({size} bytes)", ()
        if head[4] not in (1, 2) or head[5] not in (1, 2):   # 32/64-bit, byte order
            return "has a malformed ELF header", ()
        wide, order = head[4] == 2, "<" if head[5] == 1 else ">"
        if len(head) < (64 if wide else 52):
            return f"is truncated ({size} bytes)", ()
        e_type, = struct.unpack_from(order + "H", head, 16)
        if e_type != 3:     # ET_DYN
            return f"is not a shared library (ELF type {e_type})", ()
        # e_phoff, e_shoff, e_phentsize, e_phnum, e_shentsize, e_shnum
        header = order + ("8xQQ4x2xHHHH" if wide else "4xII4x2xHHHH")
        phoff, shoff, phentsize, phnum, shentsize, shnum = struct.unpack_from(header, head, 24)
        segment = order + ("I4xQ8x8xQ" if wide else "II8xI")  # p_type, p_offset, p_filesz
        section = order + ("4xIQ8xQQI" if wide else "4xII4xIII")  # type flags off size link
        if phnum and phentsize < struct.calcsize(segment) \
                or shnum and shentsize < struct.calcsize(section):
            return "has a malformed ELF header", ()
        end = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
        f.seek(phoff)
        segments = f.read(phentsize * phnum)
        for i in range(phnum if len(segments) == phentsize * phnum else 0):
            kind, offset, filesz = struct.unpack_from(segment, segments, i * phentsize)
            if kind == 1:   # PT_LOAD
                end = max(end, offset + filesz)
        if size < end:
            return f"is truncated ({size} of {end} bytes)", ()
        if not symbols or not shnum:
            return None
        f.seek(shoff)
        table = f.read(shentsize * shnum)
        if len(table) < shentsize * shnum:
            return f"is truncated ({size} bytes)", ()
        sections = [struct.unpack_from(section, table, i * shentsize) for i in range(shnum)]
        defined = _dynamic_symbols(f, sections, wide, order, size)
    if defined is None:
        return None
    missing = tuple(s for s in symbols if s.encode() not in defined)
    return (f"lacks {', '.join(missing)}", missing) if missing else None


def _dynamic_symbols(f, sections, wide, order, size):
    """The names the dynamic symbol table (SHT_DYNSYM) defines, or None without one."""
    for kind, _, offset, length, link in sections:
        if kind != 11 or link >= len(sections):
            continue
        _, _, str_offset, str_length, _ = sections[link]
        if offset + length > size or str_offset + str_length > size:
            return set()
        f.seek(offset)
        table = f.read(length)
        f.seek(str_offset)
        names = f.read(str_length)
        entry = order + ("IxxH16x" if wide else "I8xxxH")   # st_name, st_shndx
        step = 24 if wide else 16
        defined = set()
        for i in range(0, len(table) - step + 1, step):
            name, shndx = struct.unpack_from(entry, table, i)
            if shndx and name < len(names):     # SHN_UNDEF (0): a name it needs, not defines
                defined.add(names[name:names.find(b"\0", name)])
        return defined
    return None
