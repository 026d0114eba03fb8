"""The sandbox contract (missions.ports.sandbox) on the local backend: a child process of this Python.

A normal analysis returns its JSON and its chart; every escape ends its run with a clear one-line
reason, and afterwards this process, its environment and the file system are as they were, and the
next run works. Limits are the quick tier's, made small so the whole file runs in seconds.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from missions.adapters.sandbox_local import Caps, LocalSandbox, isolation
from missions.core.sandbox import TAIL_CHARS, SandboxRequest, SandboxResult, TierLimits

ROOT = Path(__file__).resolve().parents[3]
QUICK = {"quick": TierLimits(memory_mb=256, timeout_seconds=2)}
SMALL_CAPS = Caps(
    output_bytes=64 * 1024,
    chart_bytes=64 * 1024,
    stream_bytes=256 * 1024,
    file_bytes=512 * 1024,
    disk_bytes=1024 * 1024,
)
NORMAL = "RESULT = {'total': sum(INPUT['values'])}"

# a bar chart as a PNG, with the standard library only (zlib and struct), as a script would draw one
CHART = textwrap.dedent(
    """
    import statistics, struct, zlib

    values = INPUT["values"]
    width, height = 8 * len(values), 40
    top = max(values)
    rows = []
    for y in range(height):
        row = bytearray([0])  # filter: none
        for x in range(width):
            bar = values[x // 8] * height / top
            row += b"\\x20\\x60\\xc0" if height - y <= bar and x % 8 else b"\\xff\\xff\\xff"
        rows.append(bytes(row))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")
    with open("chart.png", "wb") as image:
        image.write(png)
    print("drew", len(png), "bytes")
    RESULT = {"mean": statistics.mean(values), "stdev": round(statistics.stdev(values), 3), "n": len(values)}
    """
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the runs' working directories are made (and must be gone after each run)."""
    return tmp_path_factory.mktemp("sandbox-runs")


@pytest.fixture(scope="module")
def sandbox(runs: Path) -> LocalSandbox:
    return LocalSandbox(tiers=QUICK, caps=SMALL_CAPS, base_dir=str(runs))


@pytest.fixture
def untouched(runs: Path, tmp_path: Path, sandbox: LocalSandbox):
    """Checks, after the test, that nothing outside the run changed and that the next run works."""
    environment = _environment()
    outside = sorted(p.name for p in tmp_path.iterdir())
    repository = sorted(p.name for p in ROOT.iterdir())
    yield tmp_path
    assert _environment() == environment, "this process's environment changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == outside, "a file appeared outside the sandbox"
    assert sorted(p.name for p in ROOT.iterdir()) == repository, "the repository changed"
    assert list(runs.iterdir()) == [], "a run's working directory was left behind"
    after = sandbox.run(SandboxRequest(script=NORMAL, input={"values": [1, 2, 3]}))
    assert after.ok and after.output == {"total": 6}, after.error


def _environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}  # pytest's own, per phase


def run(sandbox: LocalSandbox, script: str, data: object = None) -> SandboxResult:
    return sandbox.run(SandboxRequest(script=textwrap.dedent(script), input=data, tier="quick"))


def refused(result: SandboxResult, kind: str, *words: str) -> None:
    assert result.status == "error", result
    assert result.error_kind == kind, (result.error_kind, result.error)
    assert result.error is not None and "\n" not in result.error
    for word in words:
        assert word in result.error, result.error


# --------------------------------------------------------------------------- what a script may do


def test_an_analysis_returns_its_json_and_its_chart(sandbox, untouched):
    # Given a script that computes statistics on its input and draws a bar chart
    # When it runs
    result = run(sandbox, CHART, {"values": [3, 5, 8, 13, 21]})
    # Then its RESULT comes back as JSON, and its chart as a PNG
    assert result.ok, result.error
    assert result.output == {"mean": 10, "stdev": 7.211, "n": 5}
    assert result.chart_png is not None and result.chart_png.startswith(b"\x89PNG\r\n\x1a\n")
    assert "drew" in result.stdout_tail and result.duration_ms > 0 and result.error is None


def test_a_script_may_read_its_input_from_stdin_and_print_one_json_object(sandbox, untouched):
    result = run(
        sandbox,
        """
        import json, sys
        data = json.load(sys.stdin)
        print("working...")
        print(json.dumps({"count": len(data["rows"])}))
        """,
        {"rows": [[1], [2]]},
    )
    assert result.ok and result.output == {"count": 2}
    assert result.chart_png is None


def test_a_script_keeps_to_its_directory_with_files_and_pathlib(sandbox, untouched):
    result = run(
        sandbox,
        """
        import csv, os, tempfile
        from pathlib import Path
        Path("data").mkdir()
        with open("data/rows.csv", "w", newline="") as f:
            csv.writer(f).writerows([["a", 1], ["b", 2]])
        with tempfile.NamedTemporaryFile("w", delete=False) as scratch:
            scratch.write("x")
        RESULT = {
            "rows": list(csv.reader(open("data/rows.csv"))),
            "listed": sorted(p.name for p in Path("data").iterdir()),
            "cwd_is_home": os.getcwd() == os.environ["HOME"],
            "tmp_inside": scratch.name.startswith(os.getcwd()),
        }
        """,
    )
    assert result.ok, result.error
    assert result.output == {
        "rows": [["a", "1"], ["b", "2"]],
        "listed": ["rows.csv"],
        "cwd_is_home": True,
        "tmp_inside": True,
    }


# --------------------------------------------------------------------------- escapes


def test_a_socket_is_refused(sandbox, untouched):
    result = run(
        sandbox,
        """
        import socket
        try:
            socket.create_connection(("1.1.1.1", 80), timeout=1)
        except Exception:
            pass  # a script cannot catch its way past a refusal: the run ends at the attempt
        RESULT = {"escaped": True}
        """,
    )
    refused(result, "network", "network refused")


@pytest.mark.parametrize(
    "attempt",
    [
        "import socket; socket.getaddrinfo('example.com', 443)",
        "import urllib.request; urllib.request.urlopen('http://169.254.169.254/latest/meta-data/')",
    ],
    ids=["name lookup", "instance metadata"],
)
def test_name_lookups_and_urls_are_refused(sandbox, untouched, attempt):
    refused(run(sandbox, attempt), "network")


def test_the_parents_secrets_are_not_in_the_scripts_environment(sandbox, untouched, monkeypatch):
    # Given this process holds credentials in its environment
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key-of-the-parent")
    monkeypatch.setenv("MISSIONS_TOKEN", "fake-token-of-the-parent")
    # When a script dumps the environment it sees
    result = run(sandbox, "import os\nRESULT = dict(os.environ)")
    # Then nothing of this process's environment is there
    assert result.ok
    assert set(result.output) == {"PATH", "HOME", "TMPDIR", "LANG", "LC_ALL", "TZ"}  # type: ignore[arg-type]
    assert "fake-secret" not in json.dumps(result.output) and "fake-token" not in json.dumps(result.output)


@pytest.mark.parametrize(
    "target",
    ["/proc/{pid}/environ", "/proc/self/environ", "/proc/{pid}/mem", "/etc/passwd", "{repo}/pyproject.toml"],
)
def test_reading_outside_its_dir_and_the_standard_library_is_refused(sandbox, untouched, monkeypatch, target):
    # Given this process holds a secret, and the script knows this process's id
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-key-of-the-parent")
    path = target.format(pid=os.getpid(), repo=ROOT)
    # When the script reads the file
    result = run(sandbox, "RESULT = {'read': open(INPUT['path'], 'rb').read(200).decode('latin-1')}", {"path": path})
    # Then the read is refused, naming the file
    refused(result, "file_read", "file read outside its dir", path.split("/")[-1])
    assert "fake-secret" not in result.model_dump_json()


def test_reading_through_the_standard_library_path_is_still_refused(sandbox, untouched):
    result = run(
        sandbox,
        "import os, sys\nRESULT = {'x': open(os.path.dirname(os.__file__) + '/../../../../../../etc/passwd').read()}",
    )
    refused(result, "file_read", "/etc/passwd")


def test_the_standard_library_can_be_read(sandbox, untouched):
    result = run(sandbox, "import os\nRESULT = {'lines': len(open(os.__file__).readlines()) > 100}")
    assert result.ok and result.output == {"lines": True}


@pytest.mark.parametrize("where", ["outside", "repository", "escape"])
def test_writing_outside_its_dir_is_refused(sandbox, untouched, where):
    target = {
        "outside": str(untouched / "escape.txt"),  # a directory of this test, next to the sandbox's
        "repository": str(ROOT / "escape.txt"),
        "escape": f"/tmp/escape-{uuid.uuid4().hex}",
    }[where]
    result = run(sandbox, "open(INPUT['path'], 'w').write('escaped')", {"path": target})
    refused(result, "file_write", "file write outside its dir", target)
    assert not os.path.exists(target)


@pytest.mark.parametrize(
    "attempt",
    [
        "import os; os.remove(INPUT['path'])",
        "import os; os.rename(INPUT['path'], 'mine')",
        "import os; os.mkdir(INPUT['path'] + '.d')",
        "import os; os.symlink(INPUT['path'], 'link')",
        "import os; os.chdir('/')",
        "from pathlib import Path; Path(INPUT['path']).write_text('x')",
    ],
    ids=["remove", "rename", "mkdir", "symlink", "chdir", "pathlib"],
)
def test_changing_the_file_system_outside_its_dir_is_refused(sandbox, untouched, attempt):
    victim = untouched / "victim.txt"
    victim.write_text("mine")
    untouched_before = sorted(p.name for p in untouched.iterdir())
    result = run(sandbox, attempt, {"path": str(victim)})
    refused(result, "file_write")
    assert victim.read_text() == "mine" and sorted(p.name for p in untouched.iterdir()) == untouched_before
    victim.unlink()


def test_an_endless_loop_ends_at_the_wall_clock_limit(sandbox, untouched):
    started = time.monotonic()
    result = run(sandbox, "while True:\n    pass")
    refused(result, "timeout", "2 s")
    assert time.monotonic() - started < 6


def test_a_memory_bomb_ends_at_the_memory_limit(sandbox, untouched):
    result = run(sandbox, "hoard = []\nwhile True:\n    hoard.append(bytearray(16 * 1024 * 1024))")
    refused(result, "memory", "256 MB")


def test_a_fork_bomb_is_refused(sandbox, untouched):
    result = run(sandbox, "import os\nwhile True:\n    os.fork()")
    refused(result, "process", "os.fork")


@pytest.mark.parametrize(
    "attempt",
    [
        "import os; os.system('touch /tmp/escaped')",
        "import subprocess; subprocess.run(['touch', '/tmp/escaped'])",
        "import os; os.execv('/bin/sh', ['sh', '-c', 'touch /tmp/escaped'])",
        "import os; os.posix_spawn('/bin/sh', ['sh'], {})",
        "import _posixsubprocess; _posixsubprocess.fork_exec(*[None] * 23)",
    ],
    ids=["os.system", "subprocess", "exec", "posix_spawn", "fork_exec"],
)
def test_starting_processes_is_refused(sandbox, untouched, attempt):
    refused(run(sandbox, attempt), "process", "refused")
    assert not os.path.exists("/tmp/escaped")


def test_a_thread_is_refused(sandbox, untouched):
    refused(run(sandbox, "import threading\nthreading.Thread(target=print).start()"), "process", "threads refused")


@pytest.mark.parametrize(
    "attempt",
    [
        "import os, signal\nos.kill(INPUT['pid'], signal.SIGKILL)",
        "import os, signal\nos.killpg(0, signal.SIGKILL)",
        "import os, signal\nsignal.pidfd_send_signal(os.pidfd_open(INPUT['pid']), signal.SIGKILL)",
    ],
    ids=["kill", "killpg", "pidfd"],
)
def test_signalling_this_process_is_refused(sandbox, untouched, attempt):
    result = run(sandbox, attempt, {"pid": os.getpid()})
    refused(result, "process", "refused")


def test_100_mb_of_output_ends_with_a_clear_error_not_exhausted_memory(sandbox, untouched):
    started = time.monotonic()
    result = run(sandbox, "import sys\nfor _ in range(1600):\n    sys.stdout.write('x' * 65536)")
    refused(result, "output_too_large", "stdout")
    assert len(result.stdout_tail) <= TAIL_CHARS and time.monotonic() - started < 10


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ("RESULT = {'big': 'x' * 100_000}", ("RESULT",)),
        ("open('chart.png', 'wb').write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(100_000))\nRESULT = {}", ("chart.png",)),
        ("for i in range(4):\n    open(f'part{i}', 'wb').write(bytes(400_000))\nRESULT = {}", ("files in its dir",)),
        ("open('huge', 'wb').write(bytes(1_000_000))", ("a file it wrote",)),
    ],
    ids=["result", "chart", "disk", "one file"],
)
def test_what_a_script_produces_is_capped(sandbox, untouched, script, words):
    refused(run(sandbox, script), "output_too_large", *words)


@pytest.mark.parametrize(
    ("attempt", "kind"),
    [
        ("import ctypes", "native_code"),
        (
            "import importlib.machinery as m, importlib.util as u, glob, os\n"
            "path = glob.glob(os.path.dirname(os.__file__) + '/lib-dynload/_ctypes*')[0]\n"
            "m.ExtensionFileLoader('_ctypes', path).create_module(u.spec_from_file_location('_ctypes', path))",
            "native_code",
        ),
        ("import marshal\nmarshal.loads(marshal.dumps(compile('1', 'x', 'eval')))", "native_code"),
        ("(lambda: 0).__code__.replace(co_consts=())", "native_code"),
        ("import gc\ngc.get_objects()", "native_code"),
        ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))", "limits"),
    ],
    ids=["ctypes", "extension loader", "marshal", "code object", "gc", "raise limits"],
)
def test_native_code_and_raised_limits_are_refused(sandbox, untouched, attempt, kind):
    refused(run(sandbox, attempt), kind)


REWRITE_GLOBALS = """
import sys
frame = sys._getframe()
while frame.f_back is not None:
    frame = frame.f_back
    for name in list(frame.f_globals):
        if name.startswith("_") and not name.startswith("__"):
            frame.f_globals[name] = ()
    frame.f_globals["OSError"] = KeyError
import socket
socket.socket()
"""
# a finalizer run by a garbage collection in the middle of the hook's checks would see the hook's frame
FINALIZER_IN_THE_HOOK = """
import gc, sys
class Meddler:
    def __del__(self):
        frame = sys._getframe(1)
        while frame is not None:
            for value in list(frame.f_locals.values()):
                for cell in getattr(value, "__closure__", None) or ():
                    if isinstance(cell.cell_contents, tuple):
                        cell.cell_contents = ("/",)  # every directory readable
            frame = frame.f_back
gc.set_threshold(1, 1, 1)
for _ in range(200):
    a, b = Meddler(), Meddler()
    a.b, b.a = b, a
    del a, b
RESULT = {"read": open("/etc/hostname").read()}
"""


@pytest.mark.parametrize(
    ("attempt", "kind"),
    [
        (REWRITE_GLOBALS, "network"),
        (FINALIZER_IN_THE_HOOK, "file_read"),
        ("import sys\nsys.settrace(lambda *args: None)", "native_code"),
        ("import cProfile\ncProfile.Profile().enable()", "native_code"),
        ("import signal\nsignal.signal(signal.SIGALRM, lambda *args: None)", "native_code"),
    ],
    ids=["its globals", "a finalizer inside it", "a trace function", "a profiler", "a signal handler"],
)
def test_the_audit_hook_cannot_be_switched_off_from_python(sandbox, untouched, attempt, kind):
    # Given a script that tries to reach the hook's state, or to run its own code inside the hook
    # When it runs
    result = run(sandbox, attempt)
    # Then the hook still refuses: its state is its own and nothing of the script runs while it checks
    refused(result, kind)


# --------------------------------------------------------------------------- failures of the script


def test_a_script_exception_is_its_tracebacks_last_line(sandbox, untouched):
    result = run(sandbox, "values = INPUT['values']\nRESULT = {'x': values[0] / values[1]}", {"values": [1, 0]})
    refused(result, "exception", "ZeroDivisionError: division by zero", "line 2")
    assert "Traceback" in result.stderr_tail or result.stderr_tail == ""


def test_a_syntax_error_names_its_line(sandbox, untouched):
    refused(run(sandbox, "RESULT = {\n"), "exception", "SyntaxError")


@pytest.mark.parametrize(
    ("script", "words"),
    [
        ("x = 1", ("no RESULT",)),
        ("RESULT = {'x': float('nan')}", ("not JSON",)),
        ("RESULT = {'x': object()}", ("not JSON",)),
        ("open('chart.png', 'wb').write(b'GIF89a')\nRESULT = {}", ("not a PNG",)),
    ],
    ids=["no result", "nan", "object", "not a png"],
)
def test_a_missing_or_unreadable_result_is_an_error(sandbox, untouched, script, words):
    refused(run(sandbox, script), "no_result", *words)


def test_a_script_that_exits_non_zero_is_an_error(sandbox, untouched):
    refused(run(sandbox, "import sys\nsys.exit(3)"), "exception", "status 3")


# --------------------------------------------------------------------------- isolation


def test_without_namespaces_the_audit_hook_still_refuses(runs, untouched):
    # Given the fallback of machines (and Lambda) where unshare is not allowed
    bare = LocalSandbox(tiers=QUICK, caps=SMALL_CAPS, base_dir=str(runs), namespaces=False)
    assert bare.isolation.command == ()
    # Then the rules hold all the same
    refused(run(bare, "import socket\nsocket.create_connection(('1.1.1.1', 80))"), "network")
    refused(run(bare, "open(INPUT['p']).read()", {"p": f"/proc/{os.getpid()}/environ"}), "file_read")
    refused(run(bare, "import os\nos.fork()"), "process")
    assert run(bare, NORMAL, {"values": [2]}).output == {"total": 2}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="namespaces are Linux's")
def test_where_namespaces_are_allowed_the_script_has_no_network_and_sees_no_other_process(sandbox, untouched):
    if "network" not in isolation().namespaces:
        pytest.skip(f"this machine allows {isolation().description}")
    # the hook refuses reading /proc: the script can still ask the kernel who its parent is
    result = run(sandbox, "import os\nRESULT = {'ppid': os.getppid(), 'pid': os.getpid()}")
    assert result.ok
    if "pid" in isolation().namespaces:
        assert result.output == {"ppid": 0, "pid": 1}  # alone in its PID namespace
