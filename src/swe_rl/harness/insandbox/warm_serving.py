"""The warm test runner's serving loop: part of the server (``warm_server.py``), which runs this text in its
own namespace; runs *inside* a sandbox, with the env's Python (3.6 or later): no newer syntax.

What the server holds for its one use (:class:`Use`), the host's private channel (:class:`Channel`) and the
loop that serves the use's one connection and obeys the host (:func:`serve`); ``warm_server.py``'s docstring
says the protocol and why a server serves one use and then leaves.
"""

import contextlib
import os
import select
import signal
import socket
import struct
import time


def parse(data):
    """A whole request's body (``warm_client.py`` says its format)."""
    fields = [os.fsdecode(f) for f in data.split(b"\0")]
    mode, exe, script, cwd, umask, count = fields[:6]
    args = fields[6 : 6 + int(count)]
    env = dict(item.partition("=")[::2] for item in fields[6 + int(count) :] if "=" in item)
    request = {"mode": mode, "exe": exe, "script": script, "cwd": cwd, "umask": int(umask), "args": args}
    request["env"] = env
    return request


REQUEST_SECONDS = 10.0  # a connection that has not sent its whole request by then is dropped
MAX_REQUEST = 1 << 24


class Use:
    """What the server holds for the current use: its listener, its one connection, the request read so
    far with the fds that came with it, and the child forked for it."""

    def __init__(self):
        self.listener = self.conn = self.child = self.deadline = None
        self.data = b""
        self.fds = []

    def listen(self, address):
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind("\0" + address)
        self.listener.listen(1)

    def accept(self):
        """The one connection of this arm; nobody else can connect any more."""
        self.conn, _ = self.listener.accept()
        self.conn.setblocking(False)
        self.listener.close()
        self.listener = None
        self.deadline = time.monotonic() + REQUEST_SECONDS

    def read(self):
        """More of the request; the whole request once it has come, else None. ValueError: drop it."""
        data, ancdata, _, _ = self.conn.recvmsg(1 << 16, socket.CMSG_SPACE(3 * 4))
        if not data:
            raise ValueError("the client left")
        for level, kind, blob in ancdata:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                self.fds.extend(struct.unpack(f"{len(blob) // 4}i", blob[: len(blob) - len(blob) % 4]))
        self.data += data
        if len(self.fds) > 3 or len(self.data) > MAX_REQUEST + 4:
            raise ValueError("too many fds or too long")
        size = int.from_bytes(self.data[:4], "big") if len(self.data) >= 4 else None
        if size is None or len(self.data) < 4 + size:
            return None
        return parse(self.data[4 : 4 + size])

    def answer(self, text):
        self.conn.settimeout(REQUEST_SECONDS)
        self.conn.sendall(text.encode())
        self.conn.setblocking(False)

    def end(self):
        """Let go of everything: the child killed and reaped, every socket and fd closed."""
        if self.child is not None:
            with contextlib.suppress(OSError):
                os.kill(self.child, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(self.child, 0)
        for sock in (self.listener, self.conn):
            if sock is not None:
                sock.close()
        for fd in self.fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.__init__()


class Channel:
    """The host's private channel: commands in, one answer each out."""

    def __init__(self, commands, answers):
        self.commands = commands  # fds of the two FIFOs, opened (non-blocking) by the server's launch
        self.answers = answers
        self.buffer = b""

    def lines(self):
        """The whole commands that have come; None when the host has gone (its end closed)."""
        try:
            data = os.read(self.commands, 4096)
        except BlockingIOError:
            return []
        if not data:
            return None
        self.buffer += data
        *whole, self.buffer = self.buffer.split(b"\n")
        return [line.decode() for line in whole]

    def first(self, timeout):
        """The first whole command, waiting up to ``timeout`` seconds for it; None when none came."""
        deadline = time.monotonic() + timeout
        while True:
            commands = self.lines()
            if commands is None:
                return None
            if commands:
                rest = b"".join(c.encode() + b"\n" for c in commands[1:])
                self.buffer = rest + self.buffer
                return commands[0]
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.commands], [], [], left)[0]:
                return None

    def say(self, text):
        with contextlib.suppress(OSError):
            os.write(self.answers, text.encode() + b"\n")

    def close(self):
        os.close(self.commands)
        os.close(self.answers)


def serve(channel, wake, refusal, Run, use):
    """Serve ``use``'s one connection (its listener open already) and obey the host, until the run is forked:
    in that child, return its ``Run(request, fds)``. The server itself never returns: once the use is over
    (its run done and answered, its connection refused or dropped, the host's ``disarm`` or the host gone) it
    lets go of everything and exits. ``refusal(request)``: why a run could differ from a cold one (None: it
    cannot)."""
    while True:
        watch = [channel.commands, wake] + [s for s in (use.listener, use.conn) if s is not None]
        left = None if use.deadline is None else max(0.0, use.deadline - time.monotonic())
        ready = select.select(watch, [], [], left)[0]
        if wake in ready:
            with contextlib.suppress(OSError):
                os.read(wake, 512)
        if use.child is not None:
            done, status = os.waitpid(use.child, os.WNOHANG)
            if done:
                use.child = None
                with contextlib.suppress(OSError):
                    use.answer(f"exit {status}\n")
                finish(use)
        if channel.commands in ready:
            commands = channel.lines()
            if commands is None:  # the host let the server go
                finish(use)
            for command in commands:
                verb, _, generation = command.partition(" ")
                if verb == "disarm":
                    use.end()
                    channel.say("disarmed " + generation)
                    finish(use)
            continue  # anything else (another "arm" among them) is not obeyed: a server serves one use
        if use.listener is not None and use.listener in ready:
            use.accept()
        elif use.conn is not None and use.conn in ready:
            run = step(use, channel, wake, refusal, Run)
            if run is not None:
                return run
        if use.child is None and use.deadline is not None and time.monotonic() >= use.deadline:
            use.end()  # a request that did not come whole in time (a trickle of bytes included)
        if use.listener is None and use.conn is None and use.child is None:
            finish(use)  # the one connection was refused or dropped: nothing is left to serve


def finish(use):
    """The use is over: let go of everything and exit (the reset that ends the use ends what is left)."""
    use.end()
    os._exit(0)


def step(use, channel, wake, refusal, Run):
    """The connection has something: more of the request (then answer it), or, while its run goes on,
    the client leaving (then the run is killed)."""
    try:
        if use.child is not None:
            if not use.conn.recv(4096):
                use.end()
            return None
        request = use.read()
        if request is None:
            return None
        reason = refusal(request) if len(use.fds) == 3 else "stdin, stdout and stderr were not passed"
        if reason:
            use.answer("cold " + reason + "\n")
            use.end()
            return None
        pid = os.fork()
        if pid == 0:
            channel.close()
            os.close(wake)
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            use.conn.close()
            return Run(request, use.fds)
        use.child, use.deadline = pid, None
        use.answer(f"forked {pid}\n")
    except (OSError, ValueError, EOFError):
        use.end()
    return None
