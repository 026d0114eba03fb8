"""The sandbox's child process: what runs between `python -I -S sandbox_child.py` and the script.

Never imported by the runtime: missions.adapters.sandbox_local runs this file as the child's main
module, with only the standard library on its path. In order, it
1. lowers its resource limits (address space, CPU time, file size, open files, processes, core dumps);
2. imports the standard-library modules scripts use, while it may still read compiled bytecode;
3. takes away what no script may have: loading native modules (extension modules and built-ins not
   already loaded; the import fails with ImportError), `_posixsubprocess.fork_exec`, and the few posix
   calls that change the filesystem without an audit event (mkfifo, mknod);
4. installs an audit hook (PEP 578) that ends the process, with a report, at the first event outside
   the rules in the port's docstring (missions.ports.sandbox);
5. runs the script with INPUT, and reports its RESULT (or its failure) on the report descriptor.

The audit hook is a policy layer, not a security boundary on its own (PEP 578 says as much): it turns
every ordinary and most clever attempts into a clear reason. It is written so that a script cannot
switch it off from Python: its state lives in its own default arguments (a tuple: replacing it is an
audited attribute write, which it refuses), holds only immutable values and builtin functions, and it
reads no global name, so rebinding this module's globals (reachable through frames) changes nothing.
Native code is kept out by step 3 and by refusing ctypes, hand-made code objects, marshal data and the
garbage collector's object lists. The boundaries that hold even against native code are the kernel's:
this separate process and its rlimits, the scrubbed environment, and the namespaces the parent adds
where the kernel allows them (network, PID, a fresh /proc), or the Lambda sandbox around all of it.

Report lines (JSON, one per line) on descriptor 3: {"violation": kind, "reason": ...} from the hook,
else one final {"result": ...} | {"no_result": true} | {"error": kind, "reason": ...}.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sized
from typing import Any, NoReturn

REPORT_FD = 3
EXIT_VIOLATION = 86  # the hook ended the run
NATIVE_REFUSED = "is not available in the sandbox (no native modules are loaded)"

# extension and built-in modules a script may import (loaded before the loaders are taken away);
# not ctypes, sqlite3, ssl/hashlib (OpenSSL), mmap, fcntl, termios, multiprocessing, curses, grp, syslog
NATIVE_MODULES = (
    "_asyncio _bisect _blake2 _bz2 _codecs_cn _codecs_hk _codecs_iso2022 _codecs_jp _codecs_kr _codecs_tw "
    "_contextvars _csv _datetime _decimal _elementtree _heapq _json _lsprof _lzma _md5 _multibytecodec _opcode "
    "_pickle _posixsubprocess _queue _random _sha1 _sha256 _sha3 _sha512 _socket _statistics _struct _typing "
    "_uuid _zoneinfo array binascii cmath math pyexpat resource select unicodedata zlib "
    "_ast _symtable _tokenize _tracemalloc _locale faulthandler errno gc itertools _string _sre _stat "
    "_operator _functools _collections _signal _warnings _weakref _thread _abc _io atexit time"
).split()
# pure-Python modules imported from their compiled bytecode now; any other compiles from source later
PYTHON_MODULES = (
    "json statistics math datetime collections collections.abc csv re random itertools functools operator "
    "dataclasses typing enum decimal fractions numbers zlib struct io base64 binascii string textwrap "
    "heapq bisect copy pprint calendar zoneinfo array unicodedata hashlib traceback linecache "
    "contextlib abc types weakref keyword socket subprocess uuid"
).split()


def main() -> None:
    import json
    import os

    config = json.loads(sys.argv[1])
    workdir: str = config["workdir"]
    os.dup2(int(config["report_fd"]), REPORT_FD)
    if int(config["report_fd"]) != REPORT_FD:
        os.close(int(config["report_fd"]))
    os.umask(0o077)
    _limit(config["limits"])

    for name in NATIVE_MODULES + PYTHON_MODULES:
        try:
            __import__(name)
        except ImportError:
            pass  # not built on this Python: scripts do without it
    import traceback

    _pathlib_passes_strings()
    with open(os.path.join(workdir, "input.json"), encoding="utf-8") as stream:
        data = json.load(stream)
    with open(os.path.join(workdir, "script.py"), encoding="utf-8") as stream:
        source = stream.read()
    try:
        code = compile(source, "script.py", "exec", dont_inherit=True)
    except SyntaxError as exc:
        _finish({"error": "exception", "reason": _last_line(traceback.format_exception_only(exc))})
        return
    # what a script may find under sys.path is read-only to it; what it imports later compiles from source
    import zoneinfo

    read_roots = tuple(_real(p) for p in (*sys.path, *zoneinfo.TZPATH, "/etc/localtime") if p and os.path.exists(p))
    sys.pycache_prefix = os.path.join(workdir, ".no-bytecode", "")
    sys.dont_write_bytecode = True
    _take_away_native_loaders()
    hook = _make_hook(_real(workdir), read_roots)
    sys.addaudithook(hook)
    del hook

    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__, "INPUT": data}
    del data, source
    try:
        exec(code, namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            _finish({"error": "exception", "reason": f"the script exited with status {exc.code!r}"})
            return
    except MemoryError:
        namespace.clear()
        _finish({"error": "memory", "reason": "MemoryError"})
        return
    except BaseException as exc:  # the script's own failure, reported as its traceback's last line
        _finish(_failure(exc, int(config["limits"]["file_bytes"])))
        return
    if "RESULT" not in namespace:
        _finish({"no_result": True})
        return
    try:
        output = json.dumps(namespace["RESULT"], allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        _finish({"error": "no_result", "reason": f"RESULT is not JSON: {exc}"})
        return
    except RecursionError:
        _finish({"error": "no_result", "reason": "RESULT is not JSON: it is nested too deeply"})
        return
    if len(output) > int(config["max_output_bytes"]):
        _finish(
            {
                "error": "output_too_large",
                "reason": f"RESULT is {len(output)} bytes of JSON, over the {config['max_output_bytes']}-byte cap",
            }
        )
        return
    _finish({"result": output})


def _limit(limits: dict[str, int]) -> None:
    import resource as rlimits

    def set_limit(which: int, soft: int, hard: int | None = None) -> None:
        rlimits.setrlimit(which, (soft, soft if hard is None else hard))

    set_limit(rlimits.RLIMIT_AS, limits["memory_bytes"])
    set_limit(rlimits.RLIMIT_CPU, limits["cpu_seconds"], limits["cpu_seconds"] + 1)  # SIGXCPU, then SIGKILL
    set_limit(rlimits.RLIMIT_FSIZE, limits["file_bytes"])
    set_limit(rlimits.RLIMIT_NOFILE, limits["open_files"])
    set_limit(rlimits.RLIMIT_NPROC, 0)  # no new process or thread (for root only the audit hook stops them)
    set_limit(rlimits.RLIMIT_CORE, 0)


def _pathlib_passes_strings() -> None:
    """pathlib hands its Path objects to os functions, and the hook accepts only str paths (an object's
    __fspath__ could answer the check and the call differently): pathlib's os calls get the str."""
    import os
    import pathlib

    def strings(value: object) -> object:
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    class StrPaths:
        def __getattr__(self, name: str) -> object:
            attribute = getattr(os, name)
            if not callable(attribute) or isinstance(attribute, type):
                return attribute

            def call(*args: object, **kwargs: object) -> object:
                return attribute(*map(strings, args), **{key: strings(v) for key, v in kwargs.items()})

            return call

    pathlib.os = StrPaths()  # type: ignore[attr-defined]


def _take_away_native_loaders() -> None:
    """No module can be loaded from native code any more, and the posix calls that change the file
    system without an audit event are gone. The originals are not kept anywhere a script could reach."""
    import _imp
    import _posixsubprocess
    import _thread
    import posix
    import signal  # noqa: F401 - loads _signal, whose function signal.signal calls

    _signal = sys.modules["_signal"]

    def no_native_module(spec: object, *args: object) -> object:
        raise ImportError(f"module {getattr(spec, 'name', '?')!r} {NATIVE_REFUSED}")

    def no_process(*args: object) -> object:
        sys.audit("os.fork")  # the hook reports it and ends the run
        raise PermissionError("process spawn refused")

    def no_special_file(*args: object, **kwargs: object) -> object:
        sys.audit("os.mknod", *args)
        raise PermissionError("creating special files is refused")

    def no_thread(*args: object, **kwargs: object) -> object:
        sys.audit("_thread.start_new_thread")  # Python 3.11 has no audit event of its own for it
        raise RuntimeError("threads refused")

    replacements: dict[int, Callable[..., object]] = {
        id(_imp.create_dynamic): no_native_module,
        id(_imp.create_builtin): no_native_module,
        id(_posixsubprocess.fork_exec): no_process,
        id(_thread.start_new_thread): no_thread,
    }
    if hasattr(_thread, "start_new"):  # an alias, with a function object of its own
        replacements[id(_thread.start_new)] = no_thread
    for name in ("mkfifo", "mknod"):
        if hasattr(posix, name):
            replacements[id(getattr(posix, name))] = no_special_file
    # a Python signal handler runs between any two bytecodes, the hook's too: none may be installed
    replacements[id(_signal.signal)] = _refusing("signal.signal")
    # signals through a process descriptor: no audit event, and another process of this user could be hit
    for module, name in ((posix, "pidfd_open"), (_signal, "pidfd_send_signal")):
        if hasattr(module, name):
            replacements[id(getattr(module, name))] = _refusing(("os." if module is posix else "signal.") + name)
    for name in _PRIVILEGED:  # no audit event either; root outside a user namespace could use them
        if hasattr(posix, name):
            replacements[id(getattr(posix, name))] = _refusing("os." + name)
    # wherever a loaded module holds one of them (threading keeps its own _start_new_thread, for one)
    for module in list(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for name, value in list(namespace.items()):
            if id(value) in replacements and callable(value):
                namespace[name] = replacements[id(value)]


def _refusing(event: str) -> Callable[..., object]:
    def refused(*args: object, **kwargs: object) -> object:
        sys.audit(event)  # the hook reports it and ends the run
        raise PermissionError(f"{event} refused")

    return refused


# posix calls without an audit event that change the process's privileges, scheduling or session
_PRIVILEGED = (
    "nice setpriority sched_setscheduler sched_setparam sched_setaffinity setuid setgid seteuid setegid "
    "setreuid setregid setresuid setresgid setgroups initgroups chroot setns unshare setsid setpgid setpgrp"
).split()


def _make_hook(workdir: str, read_roots: tuple[str, ...]) -> Callable[[str, tuple[Any, ...]], None]:
    import gc
    import os
    import posix

    def hook(
        event: str,
        args: tuple[Any, ...],
        _W: str = workdir,
        _R: tuple[str, ...] = read_roots,
        _E: frozenset[str] = frozenset(_WATCHED),
        _NET: frozenset[str] = frozenset(_NETWORK),
        _PROC: frozenset[str] = frozenset(_PROCESS),
        _NATIVE: frozenset[str] = frozenset(_NATIVE_EVENTS),
        _PRIV: frozenset[str] = frozenset("os." + name for name in _PRIVILEGED),
        _WRITES: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = _WRITE_EVENTS,
        _READS: frozenset[str] = frozenset(("os.listdir", "os.scandir", "os.getxattr", "os.listxattr")),
        _SPECIAL: frozenset[str] = frozenset(("/dev/null", "/dev/urandom", "/dev/random", "/dev/zero")),
        _WRITE_FLAGS: int = os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC,
        _lstat: Callable[[str], os.stat_result] = posix.lstat,
        _readlink: Callable[[str], str] = posix.readlink,
        _write: Callable[[int, bytes], int] = posix.write,
        _exit: Callable[[int], NoReturn] = posix._exit,
        _decode: Callable[[bytes, str, str], str] = bytes.decode,
        _OSError: type[OSError] = OSError,
        _str: type[str] = str,
        _bytes: type[bytes] = bytes,
        _int: type[int] = int,
        _type: Callable[[object], type] = type,
        _len: Callable[[Sized], int] = len,
        _quote: Callable[[str], str] = _json_quote(),
        _gc_isenabled: Callable[[], bool] = gc.isenabled,
        _gc_disable: Callable[[], None] = gc.disable,
        _gc_enable: Callable[[], None] = gc.enable,
        _self: object = None,
    ) -> None:
        if event not in _E:
            return

        # No garbage collection while checking: a collection runs finalizers and gc.callbacks, which are the
        # script's code, and could reach this frame (sys._getframe) and the cells the checks below share.
        collecting = _gc_isenabled()
        _gc_disable()
        try:

            def refuse(kind: str, reason: str) -> NoReturn:
                line = '{"violation": "' + kind + '", "reason": ' + _quote(reason[:300]) + "}\n"
                try:
                    _write(3, line.encode("utf-8", "replace"))
                finally:
                    _exit(86)

            def path_of(value: object) -> str | None:
                """The absolute path an argument names, symlinks resolved; None for a file descriptor."""
                kind = _type(value)
                if kind is _int or value is None:
                    return None
                if kind is _bytes:
                    return resolve(_decode(value, "utf-8", "surrogateescape"))  # type: ignore[arg-type]
                if kind is _str:
                    return resolve(value)  # type: ignore[arg-type]
                # a path object's __fspath__ could answer the check and the call differently: str paths only
                refuse("file_read", "a path given as an object (not a str) refused: " + event)

            def resolve(text: str) -> str:
                if not text.startswith("/"):
                    text = _W + "/" + text
                pending = text.split("/")
                pending.reverse()
                done: list[str] = []
                hops = 0
                while pending:
                    part = pending.pop()
                    if part in ("", "."):
                        continue
                    if part == "..":
                        if done:
                            done.pop()
                        continue
                    candidate = "/" + "/".join([*done, part])
                    try:
                        mode = _lstat(candidate).st_mode
                    except _OSError:
                        mode = 0
                    if mode & 0o170000 == 0o120000:  # a symbolic link: follow it, as the call will
                        hops += 1
                        if hops > 40:
                            refuse("file_read", "too many symbolic links in " + text)
                        target = _readlink(candidate)
                        if target.startswith("/"):
                            done = []
                        more = target.split("/")
                        more.reverse()
                        pending.extend(more)
                        continue
                    done.append(part)
                return "/" + "/".join(done)

            def inside(path: str, root: str) -> bool:
                return path == root or path.startswith(root + "/") or root == "/"

            def is_dir(path: str) -> bool:
                try:
                    return _lstat(path).st_mode & 0o170000 == 0o040000
                except _OSError:
                    return False

            def check_read(path: str | None) -> None:
                if path is None or inside(path, _W) or path in _SPECIAL:
                    return
                for root in _R:
                    if inside(path, root):
                        return
                refuse("file_read", "file read outside its dir and the standard library refused: " + path)

            def check_write(path: str | None, what: str) -> None:
                if path is not None and not inside(path, _W):
                    refuse("file_write", what + " outside its dir refused: " + path)

            if event == "open":
                path = path_of(args[0])
                mode: str = args[1] if _len(args) > 1 and _type(args[1]) is _str else ""
                flags: int = args[2] if _len(args) > 2 and _type(args[2]) is _int else 0
                writes = flags & _WRITE_FLAGS or "w" in mode or "a" in mode or "x" in mode or "+" in mode
                if writes:
                    check_write(path, "file write")
                else:
                    check_read(path)
                if path is not None and not inside(path, _W) and is_dir(path):
                    refuse("file_read", "opening a directory outside its dir refused: " + path)
                return
            if event in _READS:
                check_read(path_of(args[0]) if args else None)
                return
            for name, paths, dir_fds in _WRITES:
                if event == name:
                    for index in dir_fds:
                        if _len(args) > index and args[index] is not None and args[index] != -1:
                            refuse("file_write", event + " relative to a directory descriptor refused")
                    for index in paths:
                        if _len(args) > index:
                            check_write(path_of(args[index]), event)
                    return
            if event in _NET:
                refuse("network", "network refused: " + event)
            if event == "_thread.start_new_thread":
                refuse("process", "threads refused")
            if event in _PROC:
                refuse("process", "process spawn refused: " + event)
            if event in _NATIVE or event.startswith("ctypes."):
                refuse("native_code", "native code and interpreter internals refused: " + event)
            if event == "os.chdir":
                refuse("file_write", "changing the working directory refused")
            if event in ("os.link", "os.symlink"):
                refuse("file_write", "creating links refused: " + event)
            if event in ("resource.setrlimit", "resource.prlimit"):
                refuse("limits", "changing its resource limits refused")
            if event == "os.mknod":
                refuse("file_write", "creating special files refused")
            if event == "signal.signal":
                refuse("native_code", "installing signal handlers refused")
            if event in _PRIV:
                refuse("limits", "changing its privileges, scheduling or session refused: " + event)
            if event == "object.__setattr__" and args and args[0] is _self:
                refuse("native_code", "changing the audit hook refused")
        finally:
            if collecting:
                _gc_enable()

    defaults = hook.__defaults__
    assert defaults is not None
    hook.__defaults__ = (*defaults[:-1], hook)  # the hook knows itself (before it is installed)
    return hook


_NETWORK = (
    "socket.__new__",
    "socket.bind",
    "socket.connect",
    "socket.getaddrinfo",
    "socket.gethostbyname",
    "socket.gethostbyaddr",
    "socket.getnameinfo",
    "socket.sendmsg",
    "socket.sendto",
    "socket.sethostname",
    "urllib.Request",
    "http.client.connect",
    "ftplib.connect",
    "smtplib.connect",
    "poplib.connect",
    "imaplib.open",
    "nntplib.connect",
    "telnetlib.Telnet.open",
    "webbrowser.open",
)
_PROCESS = (
    "os.fork",
    "os.forkpty",
    "os.exec",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.startfile",
    "subprocess.Popen",
    "os.kill",
    "os.killpg",
    "signal.pthread_kill",
    "os.pidfd_open",
    "signal.pidfd_send_signal",
    "pty.spawn",
    "_thread.start_new_thread",  # threads too: the kernel refuses them where RLIMIT_NPROC binds
)
_NATIVE_EVENTS = (
    "code.__new__",
    "marshal.load",
    "marshal.loads",
    "gc.get_objects",
    "gc.get_referrers",
    "gc.get_referents",
    "mmap.__new__",
    # a trace or profile function runs inside every Python frame, this hook's too
    "sys.settrace",
    "sys.setprofile",
)
# event, positions of path arguments, positions of directory-descriptor arguments
_WRITE_EVENTS: tuple[tuple[str, tuple[int, ...], tuple[int, ...]], ...] = (
    ("os.remove", (0,), (1,)),
    ("os.rmdir", (0,), (1,)),
    ("os.rename", (0, 1), (2, 3)),
    ("os.mkdir", (0,), (2,)),
    ("os.chmod", (0,), (2,)),
    ("os.chown", (0,), (3,)),
    ("os.utime", (0,), (3,)),
    ("os.truncate", (0,), ()),
    ("os.setxattr", (0,), ()),
    ("os.removexattr", (0,), ()),
    ("os.chflags", (0,), ()),
    ("os.lchflags", (0,), ()),
    ("os.lchmod", (0,), ()),
)
_WATCHED = (
    {"open", "os.listdir", "os.scandir", "os.getxattr", "os.listxattr", "os.chdir", "os.link", "os.symlink"}
    | {"resource.setrlimit", "resource.prlimit", "os.mknod", "object.__setattr__", "_thread.start_new_thread"}
    | {"os." + name for name in _PRIVILEGED}
    | {"signal.signal"}
    | {name for name, _, _ in _WRITE_EVENTS}
    | set(_NETWORK)
    | set(_PROCESS)
    | set(_NATIVE_EVENTS)
    | {
        "ctypes.dlopen",
        "ctypes.dlsym",
        "ctypes.dlsym/handle",
        "ctypes.cdata",
        "ctypes.cdata/buffer",
        "ctypes.call_function",
        "ctypes.addressof",
        "ctypes.string_at",
        "ctypes.wstring_at",
        "ctypes.create_string_buffer",
        "ctypes.create_unicode_buffer",
        "ctypes.set_errno",
        "ctypes.get_errno",
        "ctypes.seh_exception",
    }
)


def _json_quote() -> Callable[[str], str]:
    """A str as a JSON string literal, by C code (_json) that runs nothing of the script's."""
    try:
        from _json import encode_basestring_ascii
    except ImportError:  # pragma: no cover - every CPython has _json
        from json.encoder import py_encode_basestring_ascii as encode_basestring_ascii
    return encode_basestring_ascii


def _real(path: str) -> str:
    import os

    return os.path.realpath(path)


def _failure(exc: BaseException, file_bytes: int) -> dict[str, object]:
    """The record of an exception the script raised: its kind and its traceback's last line."""
    import errno
    import traceback

    try:
        line = _last_line(traceback.format_exception_only(type(exc), exc)) + _where(exc)
    except Exception:  # an exception whose __str__ fails
        line = type(exc).__name__ + _where(exc)
    if isinstance(exc, ImportError) and NATIVE_REFUSED in line:
        return {"error": "native_code", "reason": "native code refused: " + line.removeprefix("ImportError: ")}
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return {"error": "output_too_large", "reason": f"output too large: a file it wrote passed {file_bytes} bytes"}
    return {"error": "exception", "reason": line}


def _last_line(lines: list[str]) -> str:
    text = "".join(lines).strip().splitlines()
    return text[-1] if text else "the script failed"


def _where(exc: BaseException) -> str:
    """(line N of the script), from the innermost frame of the script in the traceback."""
    line = None
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "script.py":
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (script line {line})" if line is not None else ""


def _finish(record: dict[str, object]) -> None:
    import json
    import os

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed or broken stream: what was written was written
            pass
    os.write(REPORT_FD, (json.dumps(record) + "\n").encode())
    os._exit(0)


if __name__ == "__main__":
    main()
