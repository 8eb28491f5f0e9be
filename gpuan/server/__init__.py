"""A warm gpuan process that runs commands for the command line (``gpuan server start``).

A command on a small trace spends most of its time before it reads a byte: importing numpy, pyarrow,
pandas and numba and loading numba's compiled code. The server does that once, then forks a child per
command, which starts with all of it in memory. The ``gpuan`` command line (:mod:`gpuan.server.client`)
hands its arguments, working directory, environment and its own stdin, stdout and stderr to the server
of its environment when one is running, and exits with the child's exit code; otherwise it runs the
command itself, as ever.

- :mod:`gpuan.server.address`: where the server of an environment listens (stdlib only: the client
  computes it on every command).
- :mod:`gpuan.server.client`: hand a command to the server.
- :mod:`gpuan.server.warm`: what the server loads before it serves.
- :mod:`gpuan.server.serve`: the server's loop and the child that runs one command.
"""
