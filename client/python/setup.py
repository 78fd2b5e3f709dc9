"""Generates the stubs from ../../proto while building (`pip install client/python`).

Needs `protoc` + `grpc_python_plugin` on PATH (Debian: protobuf-compiler, protobuf-compiler-grpc)
or the grpcio-tools module. Set BANDIT_PROTO_DIR when building from a copy outside the repo.
"""
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gen_stubs  # noqa: E402


class BuildPyWithStubs(build_py):
    def run(self):
        super().run()
        proto_dir = os.environ.get("BANDIT_PROTO_DIR", gen_stubs.default_proto_dir())
        gen_stubs.generate(proto_dir, self.build_lib)


setup(cmdclass={"build_py": BuildPyWithStubs})
