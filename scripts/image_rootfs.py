"""Assembles the image's root filesystem; the Dockerfile's build stage runs it
with the base image's own Python (standard library only).

The tree holds what a voter runs and nothing else: the interpreter, its
standard library without what a server never imports (tests, Tk, IDLE, the
REPL's line editing, packaging tools), the virtualenv with metaquorum and its
dependencies (pip and setuptools removed), every shared library these load
(found with ldd, as the dynamic loader will), their Debian copyright files,
and a passwd/group naming the service user. No shell, no package manager: the
final stage is this tree alone (``FROM scratch``), so what is deleted here is
really absent, not hidden under a later layer (docs/decisions.md 78).

    python3 image_rootfs.py VENV ROOTFS [--uid 10001] [--gid 10001]
"""

from __future__ import annotations

import argparse
import compileall
import os
import py_compile
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

# Top-level entries of the standard library a voter never imports.
STDLIB_SKIP = {
    "test", "idlelib", "tkinter", "turtledemo", "turtle.py", "ensurepip", "lib2to3",
    "distutils", "venv", "pydoc_data", "curses", "sqlite3", "dbm", "site-packages",
    "dist-packages",
}  # fmt: skip
# Extension modules in lib-dynload that are tests or pull in libraries a server
# does not use (readline, ncurses, Tk, Berkeley DB, gdbm, SQLite, NIS, OSS).
DYNLOAD_SKIP = re.compile(
    r"^(_test|xx|_ctypes_test|_curses|readline|_tkinter|_dbm|_gdbm|_sqlite3|nis|ossaudiodev)"
)
# glibc loads it with dlopen (thread cancellation and unwinding): ldd cannot see it.
DLOPENED = ("libgcc_s.so.1",)


class Tree:
    """Copies paths into ``root`` at the same place, with every symlink on the
    way (Debian's /lib -> usr/lib, the venv's bin/python -> the interpreter)."""

    def __init__(self, root: Path):
        self.root = root
        self.placed: set[str] = set()

    def place(self, path: str) -> None:
        path = os.path.normpath(path)
        if path == "/" or path in self.placed:
            return
        self.placed.add(path)
        parent, name = os.path.split(path)
        self.place(parent)
        src = os.path.join(os.path.realpath(parent), name)
        dest = Path(str(self.root) + src)
        if os.path.islink(src):
            target = os.readlink(src)
            if not os.path.lexists(dest):
                os.symlink(target, dest)
            self.place(os.path.join(os.path.dirname(src), target))
        elif os.path.isdir(src):
            dest.mkdir(exist_ok=True)
            shutil.copystat(src, dest)
        else:
            shutil.copy2(src, dest)

    def place_tree(self, top: str, skip=lambda path: False) -> None:
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if not skip(os.path.join(dirpath, d))]
            self.place(dirpath)
            for name in filenames:
                if not skip(os.path.join(dirpath, name)):
                    self.place(os.path.join(dirpath, name))


def is_elf(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def needed_libraries(binaries: list[str]) -> set[str]:
    """Every library the loader maps for these binaries, as ldd resolves them."""
    found: set[str] = set()
    for binary in binaries:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout
        if "not found" in out:
            sys.exit(f"image_rootfs: {binary} needs a library the base image lacks:\n{out}")
        for line in out.splitlines():
            m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
            if m:
                found.add(m.group(1))
    return found


def dlopened_libraries() -> set[str]:
    cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    found = set()
    for name in DLOPENED:
        m = re.search(rf"^\s*{re.escape(name)} \(libc6,x86-64\) => (\S+)$", cache, re.M)
        if m is None:
            sys.exit(f"image_rootfs: {name} is not in the base image's loader cache")
        found.add(m.group(1))
    return found


def copyright_files(libraries: set[str]) -> set[str]:
    """The Debian packages' copyright notices for the libraries shipped (glibc's
    LGPL among them); none where the base has no dpkg."""
    if shutil.which("dpkg") is None:
        return set()
    packages = set()
    for lib in libraries:
        for candidate in (lib, os.path.realpath(lib)):
            r = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True)
            if r.returncode == 0:
                packages.add(r.stdout.split(":", 1)[0])
                break
    paths = (f"/usr/share/doc/{p}/copyright" for p in packages)
    return {p for p in paths if os.path.exists(p)}


def strip_wheels(objects: list[str]) -> None:
    """Drops the debug information some wheels ship in their shared objects
    (uvloop's is 12 of its 13.6 MB); the code and its symbols stay. Where the
    build stage has no ``strip`` (python:slim has no binutils) they keep it."""
    if shutil.which("strip") is None:
        print(
            "image_rootfs: no strip in the base image: the wheels' shared objects keep "
            "their debug information (about 16 MB)"
        )
        return
    before = sum(os.path.getsize(p) for p in objects)
    subprocess.run(["strip", "--strip-unneeded", *objects], check=True)
    after = sum(os.path.getsize(p) for p in objects)
    print(
        f"image_rootfs: strip: the wheels' shared objects {before / 1e6:.1f} -> {after / 1e6:.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("venv")
    parser.add_argument("rootfs", type=Path)
    parser.add_argument("--uid", type=int, default=10001)
    parser.add_argument("--gid", type=int, default=10001)
    args = parser.parse_args()
    stdlib = sysconfig.get_paths()["stdlib"]
    tree = Tree(args.rootfs)
    args.rootfs.mkdir(parents=True, exist_ok=True)

    def skip_stdlib(path: str) -> bool:
        rel = os.path.relpath(path, stdlib)
        top = rel.split(os.sep)[0]
        if top in STDLIB_SKIP or top.startswith("config-") or "__pycache__" in rel:
            return True
        return top == "lib-dynload" and bool(DYNLOAD_SKIP.match(os.path.basename(path)))

    interpreter = os.path.realpath(sys.executable)
    tree.place(sys.executable)
    tree.place_tree(stdlib, skip_stdlib)
    tree.place_tree(args.venv, lambda path: "__pycache__" in path)
    elves = [p for p in tree.placed if os.path.isfile(p) and not os.path.islink(p) and is_elf(p)]
    libraries = needed_libraries([interpreter, *elves]) | dlopened_libraries()
    for path in sorted(libraries | copyright_files(libraries)):
        tree.place(path)
    # The loader's cache: the python:slim base keeps libpython in /usr/local/lib.
    tree.place("/etc/ld.so.cache")
    strip_wheels([str(args.rootfs) + p for p in elves if p.startswith(args.venv)])

    # Bytecode, compiled once here: the root filesystem is read-only in the pod,
    # so without it every start compiles every module again (decisions.md 78).
    # unchecked-hash: no source timestamps in it, and no stat per import.
    for top in (stdlib, args.venv):
        ok = compileall.compile_dir(
            str(args.rootfs) + top,
            quiet=1,
            workers=0,
            ddir=top,
            invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
        )
        if not ok:
            sys.exit(f"image_rootfs: compiling {top} failed")

    etc = args.rootfs / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(
        "root:x:0:0:root:/root:/sbin/nologin\n"
        f"metaquorum:x:{args.uid}:{args.gid}:metaquorum:/nonexistent:/sbin/nologin\n"
    )
    (etc / "group").write_text(f"root:x:0:\nmetaquorum:x:{args.gid}:\n")
    (etc / "nsswitch.conf").write_text("passwd: files\ngroup: files\nhosts: files dns\n")
    tmp = args.rootfs / "tmp"
    tmp.mkdir(exist_ok=True)
    tmp.chmod(0o1777)
    print(f"image_rootfs: {len(tree.placed)} paths, {len(libraries)} shared libraries")


if __name__ == "__main__":
    main()
