"""The launcher: ``python -m tracegrad.distributed.run --nproc-per-node N script.py args...``.

torchrun's interface. With an ``mpiexec`` at hand (the one beside this Python,
as the ``mpich`` wheel installs it, else on ``PATH``) the processes are an MPI
job; otherwise N Python processes are started with torchrun's environment
(``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``)
and meet in ``init_process_group``. Either way every rank also sees those
variables before it imports anything.

Several machines (``--nnodes K``), always through ``mpiexec``:

- ``--node-rank`` on each node, as torchrun: one launcher per node, met at
  ``--master-addr``/``--master-port`` (see ``_nodes``);
- ``--hostfile FILE`` or ``--hosts a,b`` on one node: hydra starts the other
  nodes' part itself (by ssh), ``--nproc-per-node`` ranks on each.

As torchrun, the job fails as soon as one rank fails: SIGINT and SIGTERM are
passed on to the job; the launcher exits with the first non-zero exit status of
a rank; when one rank fails, exits non-zero or vanishes (``os._exit``, a
signal), the others are stopped (SIGTERM, then SIGKILL after
``--kill-timeout`` seconds) instead of being left waiting in a collective, and
the launcher never reports success for a job whose ranks did not all finish
(each rank reports its end to the launcher: ``_monitor``). A rank that ends
cleanly while others still run is no failure; if the others wait for it in a
collective, they raise at the group's timeout, which fails the job.
"""
import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from ._monitor import Monitor


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m tracegrad.distributed.run",
        description="Start N copies of a training script that use tracegrad.distributed.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc", default="1",
                   help="processes to start on each machine (an integer, or 'cpu')")
    p.add_argument("--nnodes", default="1", help="machines in the job (K or K:K)")
    p.add_argument("--node-rank", "--node_rank", dest="node_rank", type=int, default=0,
                   help="this machine's index, 0 .. nnodes-1 (one launcher per machine)")
    p.add_argument("--master-addr", "--master_addr", dest="master_addr", default=None,
                   help="address of node 0, reachable from every node (default 127.0.0.1 "
                        "on one machine)")
    p.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=None,
                   help="TCP port of node 0's launcher (default 29500 for several machines)")
    p.add_argument("--hostfile", default=None,
                   help="several machines from one launcher: MPICH's host file (one host a line)")
    p.add_argument("--hosts", default=None,
                   help="several machines from one launcher: comma-separated host names")
    p.add_argument("--join-timeout", dest="join_timeout", type=float, default=300.0,
                   help="seconds for every node's launcher to join node 0's")
    p.add_argument("--standalone", action="store_true", help="accepted for torchrun scripts")
    p.add_argument("--launcher", choices=("auto", "mpiexec", "env"),
                   default=os.environ.get("TRACEGRAD_LAUNCHER", "auto"),
                   help="mpiexec, environment rendezvous, or auto (mpiexec when found)")
    p.add_argument("--kill-timeout", dest="kill_timeout", type=float, default=5.0,
                   help="seconds between SIGTERM and SIGKILL for the ranks left when one fails")
    p.add_argument("-m", "--module", action="store_true",
                   help="run the target as a module (python -m)")
    p.add_argument("--no-python", "--no_python", dest="no_python", action="store_true",
                   help="run the target as a program, not with python")
    p.add_argument("target", help="the training script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    return p


def find_mpiexec():
    """The mpiexec beside this interpreter (a venv with the mpich wheel), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    return shutil.which("mpiexec")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command(opts):
    if opts.no_python:
        return [opts.target, *opts.args]
    boot = [sys.executable, "-u", "-m", "tracegrad.distributed._bootstrap"]
    return boot + (["-m"] if opts.module else []) + [opts.target, *opts.args]


def _nnodes(text):
    low, _, high = str(text).partition(":")
    try:
        low, high = int(low), int(high or low)
    except ValueError:
        raise SystemExit(f"tracegrad.distributed.run: --nnodes {text!r}: expected K or K:K") \
            from None
    if low != high or low < 1:
        raise SystemExit(f"tracegrad.distributed.run: --nnodes {text}: elastic ranges are not "
                         "supported; give one number of machines")
    return low


def _fail(message):
    raise SystemExit(f"tracegrad.distributed.run: {message}")


def main(argv=None):
    opts = _parser().parse_args(argv)
    nnodes = _nnodes(opts.nnodes)
    n = os.cpu_count() if opts.nproc == "cpu" else int(opts.nproc)
    several = nnodes > 1
    by_hosts = opts.hostfile is not None or opts.hosts is not None
    if several and not 0 <= opts.node_rank < nnodes:
        _fail(f"--node-rank {opts.node_rank} must be below --nnodes {nnodes}")
    if by_hosts and opts.node_rank != 0:
        _fail("--hostfile/--hosts start every node from node 0: run one launcher, not one "
              "per node")
    mpiexec = find_mpiexec() if opts.launcher in ("auto", "mpiexec") else None
    if mpiexec is None and (opts.launcher == "mpiexec" or several or by_hosts):
        _fail("no mpiexec was found; it starts multi-process jobs over several machines "
              '(pip install "tracegrad[distributed]")')
    master_addr = opts.master_addr or ("127.0.0.1" if not (several or by_hosts)
                                       else socket.getfqdn())
    rendezvous = several and not by_hosts
    port = opts.master_port or (29500 if rendezvous else _free_port())
    env = dict(os.environ, MASTER_ADDR=master_addr, MASTER_PORT=str(port),
               WORLD_SIZE=str(n * nnodes), LOCAL_WORLD_SIZE=str(n), TRACEGRAD_LAUNCHED="1")
    if rendezvous and opts.node_rank > 0:
        if opts.master_addr is None:
            _fail("--master-addr (node 0's address) is needed on every node but node 0")
        from ._nodes import join_head
        return join_head(opts.node_rank, master_addr, port, env, opts.join_timeout)

    # node 0 (or the only node): the monitor every rank reports to
    if rendezvous:
        monitor = Monitor("0.0.0.0", port)
    else:
        monitor = Monitor("127.0.0.1" if not by_hosts else "0.0.0.0", 0)
    env["TRACEGRAD_MONITOR"] = f"{master_addr}:{monitor.port}"
    cmd = _command(opts)
    watch = None
    try:
        if rendezvous:
            from ._nodes import start_head
            proxies, procs = start_head(mpiexec, n, nnodes, master_addr, cmd, env,
                                        opts.join_timeout)
            monitor.set_proxies(proxies)
            watch = _watch_nodes(monitor, nnodes, opts.join_timeout)
        elif mpiexec is not None:
            hosts = []
            if by_hosts:
                hosts = (["-f", opts.hostfile] if opts.hostfile else ["-hosts", opts.hosts])
                hosts += ["-ppn", str(n)]
            procs = [subprocess.Popen([mpiexec, *hosts, "-n", str(n * nnodes), *cmd], env=env)]
        else:
            procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r),
                                                    GROUP_RANK="0"))
                     for r in range(n)]
        code = _supervise(procs, opts.kill_timeout, monitor, watch)
        monitor.send_result(code)
        return code
    finally:
        monitor.close()


def _watch_nodes(monitor, nnodes, timeout):
    """A failure once ``timeout`` seconds pass without every node's launcher joining."""
    deadline = time.monotonic() + timeout

    def watch():
        if time.monotonic() > deadline:
            missing = sorted(set(range(1, nnodes)) - monitor.nodes_joined())
            if missing:
                return (f"node(s) {missing} did not join within --join-timeout "
                        f"{timeout:g} s")
        return None
    return watch


def _supervise(procs, kill_timeout, monitor=None, watch=None):
    """Wait for the job; stop it when a process exits non-zero or the monitor reports a
    failed rank; the job's exit status."""
    def forward(signum, frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    grace = min(kill_timeout, 2.0)  # time for MPI's own abort to end the job, with its output
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                _stop(procs, kill_timeout)
                failure = monitor.first_failure() if monitor is not None else None
                if failure:
                    _say(failure[1])
                code = failed[0]
                return 128 - code if code < 0 else code     # killed by a signal: 128 + signum
            if all(c == 0 for c in codes):
                break
            failure = monitor.first_failure() if monitor is not None else None
            late = watch() if watch is not None else None
            if late or (failure and time.monotonic() - failure[0] > grace):
                _say(f"{late or failure[1]}; stopping the job")
                _stop(procs, kill_timeout)
                return 1
            time.sleep(0.05)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if monitor is not None:
        monitor.settle()            # the last lines of ranks that just ended
        failure = monitor.first_failure()
        unfinished = monitor.unfinished()
        if failure or unfinished:
            _say((failure[1] if failure else f"rank(s) {unfinished} did not finish")
                 + " (the MPI launcher reported success)")
            return 1
    return 0


def _say(message):
    print(f"tracegrad.distributed.run: {message}", file=sys.stderr, flush=True)


def _stop(procs, kill_timeout):
    for p in procs:
        if p.poll() is None:
            p.terminate()
    deadline = time.monotonic() + kill_timeout
    for p in procs:
        try:
            p.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


if __name__ == "__main__":
    sys.exit(main())
