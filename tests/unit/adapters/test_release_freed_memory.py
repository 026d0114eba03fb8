"""The dev server hands memory that retention freed back to the system (glibc's malloc_trim)."""

from __future__ import annotations

import gc
import platform

import pytest

from missions.local.devserver import release_freed_memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_memory_freed_by_the_interpreter_goes_back_to_the_system():
    # Given many small objects (as the emulation's table items are), freed again
    kept = [{"mission_id": f"m_{n:020d}", "status": "archived"} for n in range(200_000)]
    del kept
    gc.collect()
    # When the freed memory is released, glibc reports that it gave pages back
    assert release_freed_memory() is True
