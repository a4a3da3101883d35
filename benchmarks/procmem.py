"""Resident memory of a process tree, sampled from /proc (Linux; no psutil needed)."""

from __future__ import annotations

import os
import threading
import time

PAGE = os.sysconf("SC_PAGE_SIZE")


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(name))
    return tree


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as f:
            return int(f.read().split()[1]) * PAGE
    except OSError:
        return 0


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def tree_rss(root: int) -> dict[str, int]:
    """RSS of ``root`` and its descendants, split into jvm / python workers / driver."""
    tree, todo, parts = _children(), [root], {"jvm": 0, "python": 0, "total": 0}
    while todo:
        pid = todo.pop()
        todo.extend(tree.get(pid, []))
        rss = _rss(pid)
        kind = "jvm" if "java" in _cmd(pid).split(" ", 1)[0] else "python"
        parts[kind] += rss
        parts["total"] += rss
    return parts


class TreeSampler:
    """Samples ``tree_rss(root)`` every ``interval`` seconds in a thread; keeps the peak."""

    def __init__(self, root: int, interval: float = 0.25) -> None:
        self.root, self.interval = root, interval
        self.peak = {"jvm": 0, "python": 0, "total": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            sample = tree_rss(self.root)
            if sample["total"] > self.peak["total"]:
                self.peak = sample
            self._stop.wait(self.interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, float]:
        mb = 1024 * 1024
        return {"peak_rss_mb": self.peak["total"] / mb, "peak_jvm_mb": self.peak["jvm"] / mb,
                "peak_python_mb": self.peak["python"] / mb}


if __name__ == "__main__":
    import sys

    print(tree_rss(int(sys.argv[1]) if len(sys.argv) > 1 else os.getpid()))
    time.sleep(0)
