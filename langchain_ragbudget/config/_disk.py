"""Where the package keeps files of its own, and how it publishes them safely.

A folder or file is written under a temporary name, flushed (fsync) and renamed
into place, so a crash or a power cut leaves the old version or the new one, never
half of one.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

CACHE_DIR_ENV = "RAGBUDGET_CACHE_DIR"


def cache_root() -> Path:
    """RAGBUDGET_CACHE_DIR, else the user cache folder (never the working tree)."""
    configured = os.environ.get(CACHE_DIR_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "langchain-ragbudget"


def staging_path(target: Path) -> Path:
    """A unique hidden name next to `target`, so on the same file system."""
    return target.with_name(f".{target.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")


def atomic_write_text(path: Path, text: str) -> None:
    """Write `text` so that readers see the old file or the new one."""
    staging = staging_path(path)
    staging.write_text(text, encoding="utf-8")
    fsync(staging)
    os.replace(staging, path)
    fsync(path.parent)


def publish_folder(staging: Path, target: Path, *, replace: bool = False) -> None:
    """Flush the folder `staging`, then rename it to `target`.

    Without `replace`, the rename fails if `target` exists (another process
    published first).
    """
    fsync_tree(staging)
    if replace and target.exists():
        shutil.rmtree(target)
    os.rename(staging, target)
    fsync(target.parent)


def fsync_tree(root: Path) -> None:
    folders = [root, *(p for p in root.rglob("*") if p.is_dir())]
    for item in root.rglob("*"):
        if item.is_file():
            fsync(item)
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        fsync(folder)


def fsync(path: Path) -> None:
    """Flush a file, or a folder (its entries) where the platform allows it."""
    if path.is_dir() and os.name != "posix":
        return  # Windows cannot open a folder to flush it
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
