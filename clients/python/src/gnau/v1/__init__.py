"""Generated messages (``*_pb2``) and gRPC stubs (``*_pb2_grpc``) of ``gnau.v1``. Do not edit."""
