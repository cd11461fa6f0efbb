"""Stopping child processes: politely first, then for sure."""

from __future__ import annotations

import subprocess


def stop_process(process: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM ``process``, SIGKILL it if it is still running after ``grace`` seconds, and
    reap it. Nothing happens to a process that has already exited."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
