"""The ``gnau`` command line: one module per group of commands.

gRPC's C core writes its own log lines (``E1130 ... add_port.cc] Failed to add port``) straight
to stderr, which would break a JSON log stream and repeat what the command reports itself. It
reads ``GRPC_VERBOSITY`` once, when grpc is first imported, so this must run before any command
module imports it; an operator's own setting wins.
"""

import os

os.environ.setdefault("GRPC_VERBOSITY", "NONE")
