"""Joining processes that were not started by ``mpiexec`` into one MPI communicator.

Each process runs MPI as a singleton. Rank 0 opens an MPI port and serves its
name at ``MASTER_ADDR:MASTER_PORT`` (only the port name goes over this socket;
tensors always travel through MPI). The others fetch it and connect; the group
grows one ``MPI_Comm_accept``/``connect`` and ``Intercomm_merge`` at a time, and a
final ``Split`` orders the ranks by ``RANK``.

Known limit: MPICH 5.0's singleton connect/accept is broken
(pmodels/mpich#7805); the launcher therefore prefers ``mpiexec``, which the
``mpich`` wheel provides.
"""
import os
import socket
import threading
import time


def _serve(port_name, clients, address, deadline):
    srv = socket.create_server(address, reuse_port=False)
    srv.settimeout(max(0.1, deadline - time.monotonic()))
    try:
        for _ in range(clients):
            conn, _ = srv.accept()
            with conn:
                conn.sendall(port_name.encode() + b"\n")
    except OSError:
        pass
    finally:
        srv.close()


def _fetch(address, deadline):
    while True:
        try:
            with socket.create_connection(address, timeout=5) as s:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = s.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                return data.decode().strip()
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(f"init_process_group: no rank 0 answered at "
                                   f"{address[0]}:{address[1]} before the timeout") from None
            time.sleep(0.05)


def join(MPI, rank, size, timeout):
    """This process's communicator over ``size`` ranks met at MASTER_ADDR:MASTER_PORT."""
    try:
        return _join(MPI, rank, size, timeout)
    except MPI.Exception as e:
        raise RuntimeError(
            f"init_process_group: joining {size} processes without mpiexec failed in "
            f"MPI_Comm_connect/accept ({MPI.Get_library_version().splitlines()[0].strip()}; "
            "MPICH 5.0 cannot connect singleton processes, pmodels/mpich#7805). Start the job "
            "with mpiexec or `python -m tracegrad.distributed.run`, which uses it. "
            f"MPI said: {str(e).splitlines()[0]}") from None


def _join(MPI, rank, size, timeout):
    addr = (os.environ.get("MASTER_ADDR", "127.0.0.1"), int(os.environ.get("MASTER_PORT", 29500)))
    deadline = time.monotonic() + timeout
    if rank == 0:
        port = MPI.Open_port()
        threading.Thread(target=_serve, args=(port, size - 1, addr, deadline),
                         daemon=True).start()
        comm = MPI.COMM_SELF
    else:
        port = _fetch(addr, deadline)
        inter = MPI.COMM_SELF.Connect(port, root=0)
        comm = inter.Merge(True)
        inter.Disconnect()
    while comm.Get_size() < size:
        inter = comm.Accept(port, root=0)
        comm = inter.Merge(False)
        inter.Disconnect()
    if rank == 0:
        MPI.Close_port(port)
    return comm.Split(0, rank)
