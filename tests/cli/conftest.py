# The in-process service on each backend, for the commands that read it over gRPC (--target).
from tests.server.conftest import service, settings  # noqa: F401
