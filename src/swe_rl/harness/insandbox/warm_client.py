"""The warm test runner's client: stands where the eval script ran ``pytest`` (runs inside a sandbox).

Never imported by swe-rl: the eval script runs this file's text with ``python -I -S -c CODE ADDRESS PID
NOTE MODE WORD -- ARGS...``. It asks the server (``warm_server.py``, the process PID listening on the
abstract socket ADDRESS, which the host armed it with for this one grading) to fork a run of pytest with this process's stdin, stdout, stderr, directory,
environment and umask, waits for it and exits as it did (a signal's death included). Where the server
is absent, is not PID (checked by the socket's peer credentials), does not listen or answer within ANSWER_SECONDS
or refuses, it replaces itself with
the cold command, unchanged: ``WORD ARGS`` (MODE ``script``) or ``WORD -m pytest ARGS`` (``module``).
Which of the two ran is written to the file NOTE.

Its whole cost is the cold run's saving lost, so it imports only modules built into the interpreter
(no ``socket``, ``json`` or ``signal`` wrappers: 15 ms). Written for Python 3.6.

Request: NUL-separated fields (mode, interpreter, script, directory, umask, the number of arguments,
the arguments, then ``KEY=VALUE`` for each environment variable), after a 4-byte big-endian length.
"""

import _signal
import _socket
import os
import sys
import time

ADDRESS, SERVER, NOTE, MODE, WORD = sys.argv[1:6]
PID, _, START = SERVER.partition(":")  # the server's pid and start time (a pid can be handed out again)
ARGS = sys.argv[7:]  # after "--"
COLD = [WORD, *ARGS] if MODE == "script" else [WORD, "-m", "pytest", *ARGS]
ANSWER_SECONDS = 60.0  # a server that has not answered by then (wedged, stopped) is given up: a cold run


def note(text):
    with open(NOTE, "w") as fh:
        fh.write(text + "\n")


def cold(reason):
    note("cold " + reason)
    seal = os.environ.get("SWE_RL_SEAL")
    if seal:  # the seal plugin (harness/seal.py), which the server finds itself: a cold run finds it here
        path = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.path.dirname(seal) + (":" + path if path else "")
    os.execvp(COLD[0], COLD)


def which(name):
    for folder in os.environ.get("PATH", "").split(":"):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return ""


def connect():
    """The server's one connection of this use. A server launched moments ago may not listen yet (it does
    within milliseconds of its start, before its imports): while it runs, the client tries again."""
    deadline = time.monotonic() + ANSWER_SECONDS
    while True:
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        conn.settimeout(ANSWER_SECONDS)
        try:
            conn.connect("\0" + ADDRESS)
            break
        except ConnectionRefusedError:
            conn.close()
            state, start = status(PID)
            if state not in ("R", "S", "D") or start != START or time.monotonic() >= deadline:
                raise
            time.sleep(0.005)
    creds = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    if int.from_bytes(creds[:4], sys.byteorder) != int(PID) or status(PID)[1] != START:
        raise OSError("the socket is not the server's")
    return conn


def status(pid):
    """``pid``'s state letter and when it started (clock ticks since boot): a process that got the pid after
    the server died did not start when the server did."""
    with open("/proc/" + pid + "/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return fields[0], fields[19]


def request():
    umask = os.umask(0)
    os.umask(umask)
    script = which(WORD) if MODE == "script" else ""
    exe = which(WORD) if MODE == "module" else ""
    if script:
        with open(script, "rb") as fh:
            shebang = fh.readline()
        exe = os.fsdecode(shebang[2:].strip()) if shebang.startswith(b"#!") else ""
    fields = [MODE, exe, script, os.getcwd(), str(umask), str(len(ARGS)), *ARGS]
    data = b"\0".join([os.fsencode(f) for f in fields] + [k + b"=" + v for k, v in os.environb.items()])
    return len(data).to_bytes(4, "big") + data


def lines(conn):
    buffer = b""
    while True:
        data = conn.recv(4096)
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode()


def main():
    try:
        conn = connect()
        payload = request()
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
        conn.sendmsg([payload[:4]], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        conn.sendall(payload[4:])
        answers = lines(conn)
        first = next(answers, "cold the server closed the connection")
    except (OSError, ValueError) as exc:
        cold(f"(no server: {exc})")
    if first.startswith("cold "):
        cold(first[5:])
    child = int(first.split()[1])
    conn.settimeout(None)  # the run takes as long as its tests: the eval script's own timeout bounds it
    note("forked")

    def forward(signum, _frame):
        try:  # noqa: SIM105  # contextlib costs an import
            os.kill(child, signum)
        except OSError:
            pass

    for signum in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(signum, forward)
    last = next(answers, "")
    if not last.startswith("exit "):
        sys.exit(1)
    status = int(last.split()[1])
    if os.WIFSIGNALED(status):  # die the same way: the shell reports 128 + the signal, as for a cold run
        signum = os.WTERMSIG(status)
        if signum not in (_signal.SIGKILL, _signal.SIGSTOP):
            _signal.signal(signum, _signal.SIG_DFL)
        os.kill(os.getpid(), signum)
    sys.exit(os.WEXITSTATUS(status))


main()
