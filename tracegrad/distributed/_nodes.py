"""Jobs over several machines, torchrun's way: one launcher per node.

    node 0:  python -m tracegrad.distributed.run --nnodes 2 --node-rank 0 \\
                 --master-addr HOST0 --master-port 29500 --nproc-per-node 4 train.py
    node 1:  the same with --node-rank 1

MPICH's hydra does the work. The launcher of node 0 runs ``mpiexec
-launcher manual``, which places ``nproc`` ranks on each of ``nnodes`` nodes
and, instead of logging in anywhere by ssh, prints one ``hydra_pmi_proxy``
command per node. The launcher runs node 0's proxy itself and serves node k's
command at ``MASTER_ADDR:MASTER_PORT`` (the monitor, ``_monitor``); node k's
launcher fetches it and runs it. The proxies connect back to ``mpiexec`` at
``MASTER_ADDR``, start the ranks, and carry their output to node 0's terminal.
At the end node 0 sends every node the job's status, so every launcher exits
with it.

Every node must have the same Python environment (the same paths), as for any
``mpiexec`` job; TCP must reach ``MASTER_ADDR`` from every node.
"""
import os
import shlex
import socket
import subprocess
import sys
import threading
import time

_LAUNCH = "HYDRA_LAUNCH:"


def start_head(mpiexec, nproc, nnodes, master_addr, command, env, timeout):
    """Start ``mpiexec -launcher manual`` and node 0's proxy; the proxies' command lines (one
    per node) and the processes to supervise."""
    hosts = ",".join(f"node{k}" for k in range(nnodes))
    job = subprocess.Popen([mpiexec, "-launcher", "manual", "-localhost", master_addr,
                            "-hosts", hosts, "-ppn", str(nproc), "-n", str(nproc * nnodes),
                            *command], env=env, stdout=subprocess.PIPE)
    proxies, deadline = [], time.monotonic() + timeout
    for raw in job.stdout:
        line = raw.decode(errors="replace").strip()
        if line.startswith(_LAUNCH):
            proxies.append(line[len(_LAUNCH):].strip())
        elif line == "HYDRA_LAUNCH_END":
            break
        else:
            sys.stdout.write(raw.decode(errors="replace"))
        if time.monotonic() > deadline:
            break
    if len(proxies) != nnodes:
        job.kill()
        raise SystemExit(f"tracegrad.distributed.run: mpiexec printed {len(proxies)} proxy "
                         f"commands for {nnodes} nodes")
    threading.Thread(target=_pump, args=(job.stdout,), daemon=True).start()
    local = subprocess.Popen(_local_proxy(proxies[0]), env=env)
    return proxies, [job, local]


def _pump(stream):
    """The ranks' output, as mpiexec gathers it, onto this launcher's stdout."""
    out = sys.stdout.buffer
    for chunk in iter(lambda: stream.read1(65536), b""):
        out.write(chunk)
        out.flush()


def _local_proxy(command):
    """``command`` with its ``hydra_pmi_proxy`` replaced by this node's (the one beside this
    Python, as the mpich wheel installs it), when there is one."""
    argv = shlex.split(command)
    here = os.path.join(os.path.dirname(sys.executable), "hydra_pmi_proxy")
    if os.access(here, os.X_OK):
        argv[0] = here
    return argv


def join_head(node, master_addr, master_port, env, timeout):
    """Node ``node``'s launcher: fetch its proxy command from node 0, run it, and return the
    job's status as node 0 reports it."""
    sock = _connect(master_addr, master_port, timeout)
    sock.sendall(f"node {node}\n".encode())
    reader = sock.makefile("rb")
    sock.settimeout(timeout)
    try:
        line = reader.readline().decode().strip()
    except OSError:
        line = ""
    if not line.startswith("proxy "):
        raise SystemExit(f"tracegrad.distributed.run: node 0 at {master_addr}:{master_port} "
                         f"did not hand out node {node}'s part of the job ({line or 'no answer'})")
    proxy = subprocess.Popen(_local_proxy(line[len("proxy "):]), env=env)
    result = {}

    def listen():
        sock.settimeout(None)
        try:
            for raw in reader:
                words = raw.decode().split()
                if len(words) == 2 and words[0] == "result":
                    result["code"] = int(words[1])
                    return
        except OSError:
            pass
        result.setdefault("gone", True)
    listener = threading.Thread(target=listen, daemon=True)
    listener.start()
    try:
        while proxy.poll() is None:
            if "gone" in result:          # node 0 went away: this node's ranks go too
                proxy.terminate()
                proxy.wait()
                print(f"tracegrad.distributed.run: lost node 0 ({master_addr}:{master_port})",
                      file=sys.stderr)
                return 1
            time.sleep(0.05)
    except KeyboardInterrupt:
        proxy.terminate()
        proxy.wait()
        return 130
    listener.join(30)
    sock.close()
    if "code" in result:
        return result["code"]
    return proxy.returncode or 1


def _connect(host, port, timeout):
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.create_connection((host, port), timeout=5)
        except OSError as e:
            if time.monotonic() > deadline:
                raise SystemExit(f"tracegrad.distributed.run: no node 0 launcher answered at "
                                 f"{host}:{port} within {timeout:g} s ({e})") from None
            time.sleep(0.2)
