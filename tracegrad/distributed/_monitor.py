"""The launcher's view of each rank, over one TCP connection per process.

``mpiexec`` reports one exit status for the whole job, and MPICH's hydra
reports 0 when a rank leaves by ``os._exit(0)``: it then kills the other ranks
and still says 0. So the launcher listens on ``TRACEGRAD_MONITOR`` (host:port)
and every rank's bootstrap connects to it (``connect``) and says, one line each:

    rank R            at start
    destroyed R       when destroy_process_group() ends its default group
    exit R CODE       when its script ends (return, sys.exit, an uncaught exception)

A connection that closes without ``exit`` or ``destroyed`` is a rank that
vanished (``os._exit``, a signal, killed by MPI). The launcher (``Monitor``)
fails the job when a rank exits non-zero or vanishes, whatever ``mpiexec``
says. Only ranks that connected are judged, so a job started without the
bootstrap (``--no-python``) keeps ``mpiexec``'s status.

For jobs over several machines the same server hands each other node's
launcher its ``hydra_pmi_proxy`` command line (``node K`` -> ``proxy CMD``) and,
at the end, the job's status (``result RC``); see ``_nodes``.
"""
import os
import selectors
import socket
import threading
import time

_client = {}


# rank side ----------------------------------------------------------------------------------

def connect(timeout=10.0):
    """Connect this rank to the launcher named by ``TRACEGRAD_MONITOR`` (if any)."""
    where = os.environ.get("TRACEGRAD_MONITOR")
    if not where or "sock" in _client:
        return
    host, port = where.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while True:
        try:
            sock = socket.create_connection((host, int(port)), timeout=5)
            break
        except OSError as e:
            if time.monotonic() > deadline:
                import sys
                print(f"tracegrad.distributed: cannot reach the launcher at {where} ({e}); "
                      "this rank's exit will not be reported to it", file=sys.stderr)
                return
            time.sleep(0.1)
    sock.settimeout(5)
    _client.update(sock=sock, rank=os.environ.get("RANK", "?"))
    # a forked child (a DataLoader worker) must not keep the connection open after this
    # process has gone, or the launcher would not see it vanish
    os.register_at_fork(after_in_child=lambda: _client.pop("sock", None))
    _send(f"rank {_client['rank']}")


def _send(line):
    sock = _client.get("sock")
    if sock is None:
        return
    try:
        sock.sendall(line.encode() + b"\n")
    except OSError:
        _client.pop("sock", None)


def report_exit(code):
    if not _client.get("exited"):
        _client["exited"] = True
        _send(f"exit {_client.get('rank')} {int(code)}")


def report_destroyed():
    _send(f"destroyed {_client.get('rank')}")


# launcher side ------------------------------------------------------------------------------

class Monitor:
    """The server ``connect`` talks to; runs in a daemon thread of the launcher."""

    def __init__(self, host="127.0.0.1", port=0):
        self.server = socket.create_server((host, port), reuse_port=False)
        self.port = self.server.getsockname()[1]
        self.lock = threading.Lock()
        self.ranks = {}         # rank -> "running" | "destroyed" | exit code
        self.failures = []      # (monotonic time, message), in order
        self.proxies = None     # {node: command line} once mpiexec printed them
        self.nodes = {}         # node -> socket of that node's launcher
        self._stop = False
        self._buffers = {}
        self._who = {}
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def first_failure(self):
        with self.lock:
            return self.failures[0] if self.failures else None

    def unfinished(self):
        """Ranks that connected and have not (yet) ended cleanly."""
        with self.lock:
            return sorted(r for r, s in self.ranks.items() if s not in (0, "destroyed"))

    def settle(self, timeout=2.0):
        """Wait (at most ``timeout`` s) until every rank's connection has closed, so that
        what the ranks said last has been read."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if not any(kind == "rank" for kind, _ in self._who.values()):
                    return
            time.sleep(0.02)

    def set_proxies(self, commands):
        with self.lock:
            self.proxies = dict(enumerate(commands))
            waiting = list(self.nodes.items())
        for node, conn in waiting:
            self._give_proxy(node, conn)

    def nodes_joined(self):
        with self.lock:
            return set(self.nodes)

    def send_result(self, code):
        with self.lock:
            conns = list(self.nodes.values())
        for conn in conns:
            try:
                conn.sendall(f"result {code}\n".encode())
            except OSError:
                pass

    def close(self):
        self._stop = True
        self.thread.join(1.0)
        self.server.close()

    # the thread -----------------------------------------------------------------------------
    def _loop(self):
        sel = selectors.DefaultSelector()
        self.server.setblocking(False)
        sel.register(self.server, selectors.EVENT_READ)
        while not self._stop:
            for key, _ in sel.select(0.1):
                if key.fileobj is self.server:
                    try:
                        conn, _ = self.server.accept()
                    except OSError:
                        continue
                    conn.setblocking(False)
                    self._buffers[conn] = b""
                    sel.register(conn, selectors.EVENT_READ)
                    continue
                conn = key.fileobj
                try:
                    data = conn.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(conn)
                    self._closed(conn)
                    conn.close()
                    continue
                self._buffers[conn] += data
                *lines, self._buffers[conn] = self._buffers[conn].split(b"\n")
                for line in lines:
                    self._line(conn, line.decode(errors="replace").split())
        sel.close()

    def _line(self, conn, words):
        if len(words) < 2:
            return
        kind, who = words[0], words[1]
        with self.lock:
            if kind == "rank":
                self._who[conn] = ("rank", who)     # under the lock: settle() reads it
                self.ranks[who] = "running"
            elif kind == "destroyed":
                if self.ranks.get(who) == "running":
                    self.ranks[who] = "destroyed"
            elif kind == "exit" and len(words) == 3:
                code = int(words[2])
                self.ranks[who] = code
                if code != 0:
                    self.failures.append((time.monotonic(), f"rank {who} exited with code {code}"))
            elif kind == "node":
                node = int(who)
                self._who[conn] = ("node", node)
                self.nodes[node] = conn
                ready = self.proxies is not None
        if kind == "node" and ready:
            self._give_proxy(int(who), conn)

    def _give_proxy(self, node, conn):
        command = self.proxies.get(node)
        line = f"proxy {command}\n" if command else f"error no node {node} in this job\n"
        conn.setblocking(True)
        try:
            conn.sendall(line.encode())
        except OSError:
            pass
        conn.setblocking(False)

    def _closed(self, conn):
        self._buffers.pop(conn, None)
        with self.lock:
            kind, who = self._who.pop(conn, (None, None))
            if kind == "rank" and self.ranks.get(who) == "running":
                self.ranks[who] = "vanished"
                self.failures.append((time.monotonic(), f"rank {who} ended without finishing "
                                      "its script (os._exit, a signal, or killed)"))
            elif kind == "node" and self.nodes.get(who) is conn:
                del self.nodes[who]
                self.failures.append((time.monotonic(), f"the launcher of node {who} went away"))
