#!/usr/bin/python3
"""Slow clients against banditd's Personalizer HTTP port, from outside the process.

    bench/http/slow_clients.py build/bin/banditd --half 1000 --trickle 1000 --period 0.3 \
        --watch 16 [--addresses 10] [-- extra banditd flags]

Starts BANDITD (--http_listen on port 0, --personalizer_auto_create, --durability=none), then
opens --half connections that send the first 40 bytes of a rank and stop and --trickle
connections that send one header byte every --period seconds (never the whole header), from
--addresses client addresses (127.0.1.1, 127.0.1.2, ...). Half a second later another client
(127.0.0.2) sends three ranks one after the other, each given 5 s. Then it watches for up to
--watch seconds from the first connection how many of the held connections the server closed,
and prints banditd's bandit_http_connections_* metrics. Nothing is asserted: the figures are
for docs/security.md and docs/performance.md.
"""
import argparse
import os
import resource
import select
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request

BODY = (b'{"contextFeatures":[{"User":{"kind":"a"}}],"actions":['
        b'{"id":"x","features":[{"A":{"id":"x"}}]},{"id":"y","features":[{"A":{"id":"y"}}]}]}')
REQUEST = (b"POST /instances/probe/personalizer/v1.0/rank HTTP/1.1\r\nHost: x\r\n"
           b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(BODY)) + BODY
HEAD_LENGTH = REQUEST.index(b"\r\n\r\n") + 4


def rank(port, timeout=5.0):
    """(seconds, status line) of one rank from 127.0.0.2, or (None, why)."""
    start = time.time()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                     source_address=("127.0.0.2", 0))
        s.sendall(REQUEST)
        got = b""
        while True:
            end = got.find(b"\r\n\r\n")
            if end >= 0:
                length = 0
                for line in got[:end].split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if len(got) >= end + 4 + length:
                    s.close()
                    return time.time() - start, got.split(b"\r\n")[0].decode()
            left = timeout - (time.time() - start)
            if left <= 0:
                return None, "no answer within %.0f s" % timeout
            s.settimeout(left)
            chunk = s.recv(65536)
            if not chunk:
                return None, "closed without an answer"
            got += chunk
    except OSError as e:
        return None, type(e).__name__


def main():
    p = argparse.ArgumentParser()
    p.add_argument("banditd")
    p.add_argument("--half", type=int, default=1000)
    p.add_argument("--trickle", type=int, default=1000)
    p.add_argument("--period", type=float, default=0.3)
    p.add_argument("--watch", type=float, default=16)
    p.add_argument("--addresses", type=int, default=10)
    p.add_argument("flags", nargs="*", help="extra banditd flags (after --)")
    a = p.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))

    work = tempfile.mkdtemp(prefix="slow-clients-")
    server = subprocess.Popen(
        [a.banditd, "--listen=127.0.0.1:0", "--metrics_listen=127.0.0.1:0",
         "--http_listen=127.0.0.1:0", "--port_file=" + work + "/ports", "--durability=none",
         "--data_dir=" + work + "/data", "--personalizer_auto_create"] + a.flags,
        stdout=subprocess.DEVNULL, stderr=open(work + "/log", "w"))
    try:
        for _ in range(200):
            if os.path.exists(work + "/ports") and os.path.getsize(work + "/ports") > 0:
                break
            time.sleep(0.05)
        _, metrics_port, port = (int(x) for x in open(work + "/ports").read().split())
        print("warm-up rank (creates the instance):", rank(port, 10))

        held = []  # [socket, trickling, bytes sent, time the server closed it]
        start = time.time()
        for i in range(a.half + a.trickle):
            trickling = i >= a.half
            s = socket.create_connection(
                ("127.0.0.1", port), timeout=5,
                source_address=("127.0.1.%d" % (i % a.addresses + 1), 0))
            sent = 1 if trickling else 40
            s.sendall(REQUEST[:sent])
            s.setblocking(False)
            held.append([s, trickling, sent, None])
        print("opened %d connections in %.2f s from %d addresses" %
              (len(held), time.time() - start, a.addresses))

        stop = threading.Event()

        def watch_and_trickle():
            poller = select.epoll()
            by_fd = {}
            for h in held:
                poller.register(h[0].fileno(), select.EPOLLIN | select.EPOLLRDHUP)
                by_fd[h[0].fileno()] = h
            next_byte = time.time() + a.period
            while not stop.is_set():
                for fd, _ in poller.poll(0.05):
                    h = by_fd[fd]
                    try:
                        if h[0].recv(4096) == b"":
                            h[3] = time.time()
                    except BlockingIOError:
                        continue
                    except OSError:
                        h[3] = time.time()
                    if h[3] is not None:
                        poller.unregister(fd)
                if time.time() >= next_byte:
                    for h in held:
                        if h[3] is None and h[1] and h[2] + 1 < HEAD_LENGTH:
                            try:
                                h[0].send(REQUEST[h[2]:h[2] + 1])
                                h[2] += 1
                            except OSError:
                                pass
                    next_byte = time.time() + a.period

        thread = threading.Thread(target=watch_and_trickle)
        thread.start()
        time.sleep(0.5)
        for _ in range(3):
            print("rank beside the held connections:", rank(port))
        while time.time() < start + a.watch and any(h[3] is None for h in held):
            time.sleep(0.2)
        stop.set()
        thread.join()
        cut = sorted(h[3] - start for h in held if h[3] is not None)
        print("after %.1f s: %d half-sent and %d trickling still open; %d closed by the server%s" %
              (time.time() - start, sum(1 for h in held if h[3] is None and not h[1]),
               sum(1 for h in held if h[3] is None and h[1]), len(cut),
               " between %.1f and %.1f s" % (cut[0], cut[-1]) if cut else ""))
        print("rank after:", rank(port))
        try:
            text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % metrics_port,
                                          timeout=5).read().decode()
            print(" ".join(l for l in text.splitlines() if l.startswith("bandit_http_connections")))
        except OSError:
            print("(no HTTP connection metrics: an older banditd)")
        for h in held:
            h[0].close()
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
