"""Starts the real banditd binary on port 0 in a fresh data directory and reads back its ports
(the same protocol as tests/integration/server_process.h)."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time


def banditd_path():
    path = os.environ.get("BANDITD")
    if not path:
        here = os.path.dirname(os.path.abspath(__file__))
        path = os.path.normpath(os.path.join(here, "..", "..", "..", "build", "bin", "banditd"))
    if not os.access(path, os.X_OK):
        raise RuntimeError("banditd not found at %s (set BANDITD)" % path)
    return path


class ServerProcess:
    def __init__(self, extra_args=()):
        self.dir = tempfile.mkdtemp(prefix="banditd-pytest-")
        port_file = os.path.join(self.dir, "ports")
        self._log = open(os.path.join(self.dir, "banditd.log"), "wb")
        self.proc = subprocess.Popen(
            [banditd_path(), "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
             "--data_dir=" + os.path.join(self.dir, "data"), "--port_file=" + port_file,
             *extra_args],
            stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        self.port = None
        while time.monotonic() < deadline:
            try:
                with open(port_file) as f:
                    parts = f.read().split()
                if len(parts) == 2:
                    self.port, self.metrics_port = int(parts[0]), int(parts[1])
                    break
            except FileNotFoundError:
                pass
            if self.proc.poll() is not None:
                break
            time.sleep(0.01)
        if self.port is None:
            self.stop()
            raise RuntimeError("banditd did not start:\n" + self.log())

    @property
    def target(self):
        return "127.0.0.1:%d" % self.port

    def log(self):
        with open(os.path.join(self.dir, "banditd.log"), errors="replace") as f:
            return f.read()

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def unused_port():
    """A loopback port with nothing listening on it (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
