"""The gRPC port: each RPC's servicer method, the interceptor every call passes, refusals as
gRPC statuses, who may call what, streams and the log watch. A new RPC lands in
:mod:`~gnau_service.server.grpc.servicers` (its round logic in :mod:`gnau_service.rounds`)."""
