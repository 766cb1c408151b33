"""Real processes a test starts at once, so their JVMs start side by side."""

from __future__ import annotations

import subprocess


def side_by_side(
    processes: list[subprocess.Popen], timeout: float = 600
) -> list[subprocess.CompletedProcess]:
    """Wait for every process (in order) and return what each printed; any still running when
    one fails to finish in time is killed."""
    try:
        done = []
        for process in processes:
            out, err = process.communicate(timeout=timeout)
            done.append(subprocess.CompletedProcess(process.args, process.returncode, out, err))
        return done
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
