"""Imports the generated stubs (package ``bandit_pb``), with a helpful error when missing."""
try:
    from bandit_pb.bandit.v1 import policy_pb2, service_pb2, service_pb2_grpc  # noqa: F401
    from bandit_pb.grpc.health.v1 import health_pb2, health_pb2_grpc  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "bandit_client: generated stubs (package bandit_pb) not found. Either `pip install "
        "client/python`, or build with CMake (target python_stubs writes <build>/python_gen) "
        "and put that directory on PYTHONPATH.") from e
