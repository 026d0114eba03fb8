"""The sandbox on this machine (and inside the sandbox Lambda function): each script runs in a child
process of this same Python, and only its report comes back.

Layers, outermost first (which ones a machine allows is found once per process, see `isolation()`):
- namespaces, where the kernel lets this user make them (`unshare`): a network namespace (no
  interface but a downed loopback: nothing to connect to), and where possible a PID namespace with a
  fresh /proc (the script sees no other process: not this one, its environment, nor any to signal);
- a scrubbed environment (PATH, HOME, TMPDIR, locale, TZ: nothing of this process's, so no AWS_*
  variable, token or key reaches the script) and no inherited descriptor but its pipes;
- resource limits set in the child before the script is compiled (missions.adapters.sandbox_child):
  address space, CPU time, file size, open files, processes, core dumps; and here, a wall-clock
  deadline that kills the child's process group, caps on what it prints, reports and writes (each read
  in bounded chunks: 100 MB printed ends the run at the cap, it never reaches this process's memory);
- `python -I -S`: isolated mode, no site-packages, no PYTHON* variables, no user directory;
- the child's audit hook, which ends the run at the first forbidden event with a one-line reason.

A run leaves nothing behind: its working directory (under `base_dir`) is removed, its process group
is killed whatever happened, and nothing of this process changes (its environment, its files, its
descriptors). Errors of the script are results (missions.ports.sandbox); only a machine that cannot
start a child at all raises DependencyUnavailable.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from missions.core.errors import DependencyUnavailable, StageRequestError
from missions.core.sandbox import (
    MAX_CHART_BYTES,
    MAX_OUTPUT_BYTES,
    MAX_STREAM_BYTES,
    TIERS,
    ErrorKind,
    SandboxRequest,
    SandboxResult,
    Tier,
    TierLimits,
    tail,
)

log = logging.getLogger(__name__)

CHILD = Path(__file__).with_name("sandbox_child.py")
CHART = "chart.png"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
EXIT_VIOLATION = 86  # sandbox_child's hook ended the run
MB = 1024 * 1024
WORKDIR_PREFIX = "missions-sandbox-"


@dataclass(frozen=True)
class Caps:
    """What a run may produce besides its memory and time (the tier's)."""

    output_bytes: int = MAX_OUTPUT_BYTES  # RESULT as JSON
    chart_bytes: int = MAX_CHART_BYTES
    stream_bytes: int = MAX_STREAM_BYTES  # stdout, stderr each
    file_bytes: int = 16 * MB  # one file it writes (RLIMIT_FSIZE)
    disk_bytes: int = 64 * MB  # all the files in its directory
    disk_entries: int = 1024  # files and directories in its directory
    open_files: int = 64  # descriptors (RLIMIT_NOFILE)


@dataclass(frozen=True)
class Isolation:
    """The namespaces a child runs in: the `unshare` command that makes them, and what they are."""

    command: tuple[str, ...] = ()
    description: str = "no namespaces"
    namespaces: tuple[str, ...] = field(default_factory=tuple)


_NAMESPACE_LEVELS: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (
        ("--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child", "--mount-proc"),
        ("user", "network", "pid", "mount"),
    ),
    (("--user", "--map-root-user", "--net"), ("user", "network")),
)


@functools.lru_cache(maxsize=8)
def isolation(python: str = sys.executable) -> Isolation:
    """The strongest namespaces `unshare` can make for this user here, tried once per process.

    Lambda and many containers refuse user namespaces: the child then runs without namespaces, and the
    audit hook (plus, in AWS, the function's own isolation and its network-less VPC) stands alone."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return Isolation(description="no namespaces: unshare is not installed")
    for flags, namespaces in _NAMESPACE_LEVELS:
        command = (unshare, *flags)
        try:
            probe = subprocess.run(
                [*command, python, "-I", "-S", "-c", "pass"],
                env=_clean_environment(tempfile.gettempdir()),
                capture_output=True,
                timeout=10,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if probe.returncode == 0:
            return Isolation(command, f"{', '.join(namespaces)} namespaces (unshare)", namespaces)
    return Isolation(description="no namespaces: this kernel or user may not create them")


class LocalSandbox:
    """The Sandbox port, in a child process here.

    `tiers` and `caps` override the contract's limits (tests use small ones). `in_function`: this
    process is a sandbox function, the only user of `base_dir`: what runs cut short by a Lambda timeout
    left there is removed, and this process is made undumpable, so not even native code in a child of
    the same user could read its memory or /proc/<pid>/environ (its AWS credentials)."""

    def __init__(
        self,
        *,
        tiers: Mapping[Tier, TierLimits] | None = None,
        caps: Caps | None = None,
        base_dir: str | None = None,
        python: str = sys.executable,
        namespaces: bool = True,
        in_function: bool = False,
    ):
        self.tiers: dict[Tier, TierLimits] = {**TIERS, **(tiers or {})}
        self.caps = caps or Caps()
        self.base_dir = base_dir
        self.python = python
        self._namespaces = namespaces
        if in_function:
            _undumpable()
            _remove_leftovers(base_dir or tempfile.gettempdir())

    @property
    def isolation(self) -> Isolation:
        return isolation(self.python) if self._namespaces else Isolation(description="no namespaces (turned off)")

    def run(self, request: SandboxRequest, *, within: TierLimits | None = None) -> SandboxResult:
        """`within`: tighter limits than the tier's (the sandbox function's memory and remaining time)."""
        limits = self.tiers[request.tier]
        if within is not None:
            limits = TierLimits(
                min(limits.memory_mb, within.memory_mb), min(limits.timeout_seconds, within.timeout_seconds)
            )
        workdir = tempfile.mkdtemp(prefix=WORKDIR_PREFIX, dir=self.base_dir)
        try:
            return self._run_in(workdir, request, limits)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    # -- one run ------------------------------------------------------------------------------------

    def _run_in(self, workdir: str, request: SandboxRequest, limits: TierLimits) -> SandboxResult:
        Path(workdir, "script.py").write_text(request.script, encoding="utf-8")
        input_path = Path(workdir, "input.json")
        input_path.write_text(json.dumps(request.input), encoding="utf-8")
        report_read, report_write = os.pipe()
        config = {
            "workdir": workdir,
            "report_fd": report_write,
            "max_output_bytes": self.caps.output_bytes,
            "limits": {
                "memory_bytes": limits.memory_mb * MB,
                "cpu_seconds": int(limits.timeout_seconds) + 1,  # the wall clock ends an endless loop first
                "file_bytes": self.caps.file_bytes,
                "open_files": self.caps.open_files,
            },
        }
        argv = [*self.isolation.command, self.python, "-I", "-S", "-B", "-X", "utf8", str(CHILD), json.dumps(config)]
        started = time.monotonic()
        try:
            with input_path.open("rb") as stdin:
                child = subprocess.Popen(
                    argv,
                    stdin=stdin,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(report_write,),
                    cwd=workdir,
                    env=_clean_environment(workdir),
                    start_new_session=True,  # its own process group: one kill ends everything it is
                    close_fds=True,
                )
        except OSError as exc:
            os.close(report_read)
            raise DependencyUnavailable(f"the sandbox could not start a child process: {exc}") from exc
        finally:
            os.close(report_write)
        watch = _Watch(child, report_read, self.caps, workdir, started + limits.timeout_seconds)
        try:
            watch.follow()
        finally:
            _kill(child)
            os.close(report_read)
        return self._result(watch, limits, workdir, round((time.monotonic() - started) * 1000))

    def _result(self, watch: _Watch, limits: TierLimits, workdir: str, duration_ms: int) -> SandboxResult:
        stdout = watch.stdout.decode("utf-8", "replace")
        stderr = watch.stderr.decode("utf-8", "replace")
        streams = {"stdout_tail": tail(stdout), "stderr_tail": tail(stderr), "duration_ms": duration_ms}

        def failed(kind: ErrorKind, reason: str) -> SandboxResult:
            return SandboxResult.failed(kind, reason, **streams)

        violation, final = watch.records()
        if violation is not None:  # the first rule broken, whatever the script did after
            return failed(violation[0], violation[1])
        if watch.stopped is not None:
            kind, reason = watch.stopped
            if kind == "timeout":
                reason = f"timeout: the script ran past its {limits.timeout_seconds:g} s wall-clock limit"
            return failed(kind, reason)
        if final is None:
            return self._no_report(watch, limits, stdout, stderr, failed, workdir, streams)
        if "error" in final:
            kind = final["error"]
            reason = str(final.get("reason", ""))
            if kind == "memory":
                reason = f"memory: the script ran out of its {limits.memory_mb} MB memory limit ({reason})"
            elif kind == "exception":
                reason = f"the script raised {reason}" if not reason.startswith("the script") else reason
            return failed(kind if kind in _KINDS else "exception", reason)
        if "result" in final:
            try:
                output = json.loads(str(final["result"]))
            except ValueError:
                return failed("no_result", "RESULT could not be read back as JSON")
            return self._with_chart(output, workdir, streams)
        return self._from_stdout(stdout, workdir, streams)

    def _no_report(
        self,
        watch: _Watch,
        limits: TierLimits,
        stdout: str,
        stderr: str,
        failed: Any,
        workdir: str,
        streams: dict[str, Any],
    ) -> SandboxResult:
        """The child ended without a final report: a signal, a limit the kernel enforced, or os._exit."""
        code = watch.returncode
        if code is not None and code < 0:
            signal_number = -code
            cpu_seconds = int(limits.timeout_seconds) + 1
            if signal_number == signal.SIGXCPU:
                return failed("cpu", f"cpu: the script used up its {cpu_seconds} s of CPU time")  # type: ignore[no-any-return]
            if signal_number == signal.SIGKILL and "MemoryError" not in stderr:  # nobody here sent it
                return failed(  # type: ignore[no-any-return]
                    "cpu", f"cpu: killed by the kernel, past its {cpu_seconds} s of CPU time (or out of memory)"
                )
            if "MemoryError" in stderr or "Cannot allocate memory" in stderr:
                return failed(  # type: ignore[no-any-return]
                    "memory", f"memory: the script ran out of its {limits.memory_mb} MB memory limit"
                )
            try:
                name = signal.Signals(signal_number).name
            except ValueError:
                name = f"signal {signal_number}"
            return failed("crashed", f"crashed: the interpreter died of {name}")  # type: ignore[no-any-return]
        if code == EXIT_VIOLATION:
            return failed("native_code", "the sandbox refused an operation (its report was lost)")  # type: ignore[no-any-return]
        if "MemoryError" in stderr:
            return failed(  # type: ignore[no-any-return]
                "memory", f"memory: the script ran out of its {limits.memory_mb} MB memory limit"
            )
        if code == 0:  # os._exit(0) after printing, perhaps
            return self._from_stdout(stdout, workdir, streams)
        last = stderr.strip().splitlines()[-1] if stderr.strip() else ""
        return failed("exception", f"the script exited with status {code}" + (f": {last}" if last else ""))  # type: ignore[no-any-return]

    def _from_stdout(self, stdout: str, workdir: str, streams: dict[str, Any]) -> SandboxResult:
        """No RESULT: the JSON object the script printed (all of stdout, or its last line)."""
        text = stdout.strip()
        candidates = [text, text.splitlines()[-1]] if text else []
        for candidate in candidates:
            try:
                output = json.loads(candidate)
            except ValueError:
                continue
            if isinstance(output, dict):
                if len(candidate.encode()) > self.caps.output_bytes:
                    return SandboxResult.failed(
                        "output_too_large",
                        f"output too large: the printed JSON is over the {self.caps.output_bytes}-byte cap",
                        **streams,
                    )
                return self._with_chart(output, workdir, streams)
        return SandboxResult.failed(
            "no_result", "no result: the script set no RESULT and printed no JSON object", **streams
        )

    def _with_chart(self, output: Any, workdir: str, streams: dict[str, Any]) -> SandboxResult:
        chart: bytes | None = None
        path = os.path.join(workdir, CHART)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            fd = -1
        except OSError:
            return SandboxResult.failed("no_result", f"{CHART} is not a regular file", **streams)
        if fd >= 0:
            try:
                status = os.fstat(fd)
                if not _is_regular(status.st_mode):
                    return SandboxResult.failed("no_result", f"{CHART} is not a regular file", **streams)
                if status.st_size > self.caps.chart_bytes:
                    return SandboxResult.failed(
                        "output_too_large",
                        f"output too large: {CHART} is {status.st_size} bytes, "
                        f"over the {self.caps.chart_bytes}-byte cap",
                        **streams,
                    )
                with os.fdopen(os.dup(fd), "rb") as stream:
                    chart = stream.read(self.caps.chart_bytes + 1)
            finally:
                os.close(fd)
            if not chart.startswith(PNG_SIGNATURE) or len(chart) > self.caps.chart_bytes:
                return SandboxResult.failed("no_result", f"{CHART} is not a PNG image", **streams)
        return SandboxResult(status="ok", output=output, chart_png=chart, **streams)


_KINDS: frozenset[str] = frozenset(ErrorKind.__args__)  # type: ignore[attr-defined]


class _Watch:
    """Reads a child's stdout, stderr and reports in bounded chunks until it ends, is out of time, or
    passes a cap; `stopped` says why this side ended it."""

    CHUNK = 64 * 1024
    DISK_EVERY = 0.2  # seconds between measurements of its directory

    def __init__(self, child: subprocess.Popen[bytes], report_fd: int, caps: Caps, workdir: str, deadline: float):
        self.child, self.report_fd, self.caps, self.workdir, self.deadline = child, report_fd, caps, workdir, deadline
        self.stdout = bytearray()
        self.stderr = bytearray()
        self.report = bytearray()
        self.stopped: tuple[ErrorKind, str] | None = None
        self.returncode: int | None = None
        # a report holds RESULT as a JSON string inside JSON: escaping can make it up to 6 times longer
        self._report_cap = 6 * caps.output_bytes + 64 * 1024

    def follow(self) -> None:
        assert self.child.stdout is not None and self.child.stderr is not None
        buffers = {
            self.child.stdout.fileno(): (self.stdout, "stdout", self.caps.stream_bytes),
            self.child.stderr.fileno(): (self.stderr, "stderr", self.caps.stream_bytes),
            self.report_fd: (self.report, "its report", self._report_cap),
        }
        selector = selectors.DefaultSelector()
        for fd in buffers:
            selector.register(fd, selectors.EVENT_READ)
        next_disk_check = time.monotonic() + self.DISK_EVERY
        try:
            while buffers and self.stopped is None:
                now = time.monotonic()
                if now >= self.deadline:
                    self.stopped = ("timeout", "timeout")
                    break
                if now >= next_disk_check:
                    self.stopped = self._disk_over()
                    next_disk_check = now + self.DISK_EVERY
                    if self.stopped:
                        break
                for key, _ in selector.select(timeout=min(self.deadline - now, self.DISK_EVERY)):
                    fd = int(key.fd)
                    buffer, name, cap = buffers[fd]
                    chunk = os.read(fd, min(self.CHUNK, cap + 1 - len(buffer)))
                    if not chunk:
                        selector.unregister(fd)
                        del buffers[fd]
                        continue
                    buffer += chunk
                    if len(buffer) > cap:
                        del buffer[cap:]
                        self.stopped = ("output_too_large", f"output too large: {name} passed its {cap}-byte cap")
                        break
        finally:
            selector.close()
        if self.stopped is None:
            try:
                self.returncode = self.child.wait(timeout=max(0.0, self.deadline - time.monotonic()) + 1)
            except subprocess.TimeoutExpired:  # closed its pipes but lingers
                self.stopped = ("timeout", "timeout")
        if self.stopped is None and self.returncode is not None:
            self.stopped = self._disk_over()  # files written in its last moments count too

    def _disk_over(self) -> tuple[ErrorKind, str] | None:
        total, entries = 0, 0
        pending = [self.workdir]
        while pending:
            try:
                with os.scandir(pending.pop()) as listing:
                    for entry in listing:
                        entries += 1
                        if entries > self.caps.disk_entries:
                            return (
                                "output_too_large",
                                f"output too large: over {self.caps.disk_entries} files in its dir",
                            )
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        else:
                            total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
        if total > self.caps.disk_bytes:
            return ("output_too_large", f"output too large: the files in its dir passed {self.caps.disk_bytes} bytes")
        return None

    def records(self) -> tuple[tuple[ErrorKind, str] | None, dict[str, Any] | None]:
        """The first violation the hook reported, and the child's final record."""
        violation: tuple[ErrorKind, str] | None = None
        final: dict[str, Any] | None = None
        for line in bytes(self.report).splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if not isinstance(record, dict):
                continue
            if "violation" in record and violation is None:
                kind = str(record["violation"])
                violation = (kind if kind in _KINDS else "native_code", str(record.get("reason", kind)))  # type: ignore[assignment]
            elif {"result", "no_result", "error"} & record.keys():
                final = record
        return violation, final


def _kill(child: subprocess.Popen[bytes]) -> None:
    """Its whole process group, whatever state it is in (a no-op for a group that has ended)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.kill()  # itself, should it have left its group (os.setsid)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        child.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover - a SIGKILLed process that does not end
        pass
    for stream in (child.stdout, child.stderr):
        if stream is not None:
            stream.close()


def _clean_environment(workdir: str) -> dict[str, str]:
    """Nothing of this process's environment: a child needs a PATH, a home, a temp dir, a locale."""
    return {
        "PATH": "/usr/bin:/bin",
        "HOME": workdir,
        "TMPDIR": workdir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
    }


def _is_regular(mode: int) -> bool:
    import stat

    return stat.S_ISREG(mode)


def _remove_leftovers(base_dir: str) -> None:
    """Working directories of runs an earlier invocation could not finish (Lambda ended it at its timeout)."""
    for leftover in Path(base_dir).glob(f"{WORKDIR_PREFIX}*"):
        shutil.rmtree(leftover, ignore_errors=True)


class SandboxFunction:
    """The sandbox function: one request run in a child process of this one, within the tier this
    function serves (`tier`; None serves every tier), its memory less its own headroom, and its remaining
    time less a margin (`within`, from missions.app.events.sandbox_room)."""

    def __init__(self, tier: Tier | None):
        self.tier = tier
        # in the function (its tier is set) it owns /tmp's sandbox directories and no child may read this
        # process's memory or /proc/<pid>/environ
        self.local = LocalSandbox(in_function=tier is not None)

    def handle(self, event: dict[str, Any], within: TierLimits | None = None) -> dict[str, Any]:
        request = SandboxRequest.model_validate(event)
        if self.tier is not None and request.tier != self.tier:
            raise StageRequestError(f"this sandbox function runs {self.tier} scripts, not {request.tier} ones")
        result = self.local.run(request, within=within)
        log.info(
            "analysis script run",
            extra={
                "tier": request.tier,
                "status": result.status,
                "error_kind": result.error_kind,
                "duration_ms": result.duration_ms,
                "isolation": self.local.isolation.description,
            },
        )
        return result.to_event()


def _undumpable() -> None:
    """prctl(PR_SET_DUMPABLE, 0): no process of the same user may ptrace this one or read its /proc files."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)


__all__ = ["Caps", "Isolation", "LocalSandbox", "SandboxFunction", "isolation"]
