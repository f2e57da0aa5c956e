"""The launcher: ``python -m tracegrad.distributed.run --nproc-per-node N script.py args...``.

torchrun's interface for one machine. With an ``mpiexec`` at hand (the one
beside this Python, as the ``mpich`` wheel installs it, else on ``PATH``) the N
processes are an MPI job; otherwise N Python processes are started with
torchrun's environment (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``) and meet in ``init_process_group``. Either
way every rank also sees those variables before it imports anything.

SIGINT and SIGTERM are passed on to the job. The launcher exits with the first
non-zero exit status of a rank (or 0); when one rank fails, the others are
stopped (SIGTERM, then SIGKILL after ``--kill-timeout`` seconds) instead of
being left waiting in a collective.
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import time


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m tracegrad.distributed.run",
        description="Start N copies of a training script that use tracegrad.distributed.")
    p.add_argument("--nproc-per-node", "--nproc_per_node", dest="nproc", default="1",
                   help="processes to start on this machine (an integer, or 'cpu')")
    p.add_argument("--nnodes", default="1", help="only 1 is supported")
    p.add_argument("--node-rank", "--node_rank", dest="node_rank", type=int, default=0)
    p.add_argument("--master-addr", "--master_addr", dest="master_addr", default="127.0.0.1")
    p.add_argument("--master-port", "--master_port", dest="master_port", type=int, default=None)
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
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _command(opts):
    if opts.no_python:
        return [opts.target, *opts.args]
    boot = [sys.executable, "-u", "-m", "tracegrad.distributed._bootstrap"]
    return boot + (["-m"] if opts.module else []) + [opts.target, *opts.args]


def main(argv=None):
    opts = _parser().parse_args(argv)
    if str(opts.nnodes) not in ("1", "1:1"):
        raise SystemExit("tracegrad.distributed.run: only --nnodes 1 is supported; for several "
                         "machines run mpiexec with a host file")
    n = os.cpu_count() if opts.nproc == "cpu" else int(opts.nproc)
    env = dict(os.environ, MASTER_ADDR=opts.master_addr,
               MASTER_PORT=str(opts.master_port or _free_port()), WORLD_SIZE=str(n),
               LOCAL_WORLD_SIZE=str(n), TRACEGRAD_LAUNCHED="1")
    mpiexec = find_mpiexec() if opts.launcher in ("auto", "mpiexec") else None
    if opts.launcher == "mpiexec" and mpiexec is None:
        raise SystemExit("tracegrad.distributed.run: --launcher mpiexec, but no mpiexec was "
                         'found (pip install "tracegrad[distributed]")')
    cmd = _command(opts)
    if mpiexec is not None:
        procs = [subprocess.Popen([mpiexec, "-n", str(n), *cmd], env=env)]
    else:
        procs = [subprocess.Popen(cmd, env=dict(env, RANK=str(r), LOCAL_RANK=str(r),
                                                GROUP_RANK="0"))
                 for r in range(n)]
    return _supervise(procs, opts.kill_timeout)


def _supervise(procs, kill_timeout):
    def forward(signum, frame):
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)
    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed:
                _stop(procs, kill_timeout)
                code = failed[0]
                return 128 - code if code < 0 else code     # killed by a signal: 128 + signum
            if all(c == 0 for c in codes):
                return 0
            time.sleep(0.05)
    finally:
        for s, h in old.items():
            signal.signal(s, h)


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
