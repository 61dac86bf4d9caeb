"""`llmk serve` scaled out behind nginx (issue 18, docs/deploy.md).

Two real replicas on loopback and a real nginx in front (run as this user,
its config, pid, logs and temp files in a temporary directory), configured
as docs/deploy.md says: an upstream with both replicas, no proxy buffering
(SSE), and `proxy_next_upstream error timeout http_503 non_idempotent`, so a
draining replica's 503 (and, once it has exited, its refused connection) is
retried on the other one. Requests flow through nginx, some streaming; one
replica gets SIGTERM mid-run. Asserted: every request answers 200 with a
whole, well-formed answer; the drained replica exits 0 after finishing what
it had; nginx's log shows both replicas served and at least one request
moved from the draining replica to the other."""
import concurrent.futures
import grp
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest

from test_serve import MODEL, Server
from test_serve_load import check_stream

pytestmark = [pytest.mark.skipif(not MODEL.exists(), reason="default model not present"),
              pytest.mark.skipif(not shutil.which("nginx") and not os.path.exists("/usr/sbin/nginx"),
                                 reason="nginx is not installed (scripts/setup.sh installs it)")]

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"

CONF = """\
daemon off;
{user}
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log info;
events {{ worker_connections 512; }}
http {{
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    log_format up '$request_uri $status upstream=$upstream_addr upstream_status=$upstream_status';
    access_log {tmp}/access.log up;
    upstream llmk {{
{servers}
    }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://llmk;
            proxy_http_version 1.1;
            proxy_buffering off;
            proxy_read_timeout 600s;
            client_max_body_size 8m;
            proxy_next_upstream error timeout http_503 non_idempotent;
            proxy_next_upstream_tries 2;
        }}
    }}
}}
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nginx:
    def __init__(self, tmp, ports):
        self.tmp, self.port = tmp, free_port()
        # as root, nginx's workers would switch to "nobody", who cannot write here
        user = ""
        if os.geteuid() == 0:
            user = f"user {pwd.getpwuid(os.getuid()).pw_name} {grp.getgrgid(os.getgid()).gr_name};"
        servers = "\n".join(f"        server 127.0.0.1:{p};" for p in ports)
        (tmp / "nginx.conf").write_text(CONF.format(tmp=tmp, user=user, servers=servers, port=self.port))
        # -e: the error log before the config is read (the default, /var/log/nginx, may not be writable)
        self.p = subprocess.Popen([NGINX, "-p", str(tmp), "-e", str(tmp / "error.log"), "-c", str(tmp / "nginx.conf")],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            except OSError:
                assert self.p.poll() is None, self.p.stderr.read() + self.log("error.log")
                assert time.time() < deadline, self.log("error.log")
                time.sleep(0.05)

    def log(self, name):
        path = self.tmp / name
        return path.read_text() if path.exists() else ""

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def request(port, i):
    """One request through nginx: returns (status, text) after checking a stream's events."""
    streaming = i % 2 == 0
    body = {"prompt": f"Story number {i}: once upon a time", "max_tokens": 32, "temperature": 1.0, "seed": i,
            "logit_bias": {"0": -100, "2": -100}, "stream": streaming}  # no early end: every request runs a while
    if streaming:
        body["stream_options"] = {"include_usage": True}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
        r = conn.getresponse()
        raw = r.read().decode()
        if r.status != 200:
            return r.status, raw
        if streaming:
            events = [line[6:] for line in raw.splitlines() if line.startswith("data: ")]
            return 200, check_stream("/v1/completions", body, events)
        ans = json.loads(raw)
        assert ans["usage"]["completion_tokens"] == 32 and ans["choices"][0]["finish_reason"] == "length", ans
        return 200, ans["choices"][0]["text"]
    finally:
        conn.close()


def test_two_replicas_behind_nginx_one_drained(tmp_path):
    a = Server("-np", 4, "-c", 512, "--drain-timeout", 30)
    b = Server("-np", 4, "-c", 512)
    ng = None
    try:
        ng = Nginx(tmp_path, [a.port, b.port])
        n, done = 24, []
        lock = threading.Lock()
        signalled = threading.Event()

        def one(i):
            res = request(ng.port, i)
            with lock:
                done.append(i)
                # a third of the way through, with requests in flight on both replicas
                if len(done) == n // 3 and not signalled.is_set():
                    a.p.send_signal(signal.SIGTERM)
                    signalled.set()
            return res

        with concurrent.futures.ThreadPoolExecutor(6) as ex:
            results = list(ex.map(one, range(n)))
        assert signalled.is_set()
        bad = [(i, r) for i, r in enumerate(results) if r[0] != 200]
        assert not bad, (bad, ng.log("access.log"))
        assert all(r[1] for r in results)
        assert a.stop(timeout=60) == 0, a.err()
        assert "draining" in a.err()
        log = ng.log("access.log")
        assert f"upstream=127.0.0.1:{a.port}" in log and f"127.0.0.1:{b.port}" in log, log
        # at least one request met the draining (or exited) replica and was moved to the other
        moved = [line for line in log.splitlines() if f"upstream=127.0.0.1:{a.port}, 127.0.0.1:{b.port}" in line]
        assert moved, log
        print(f"nginx: {len(log.splitlines())} requests, {len(moved)} moved from the draining replica:", *moved,
              sep="\n  ")
        assert all(line.split()[1] == "200" for line in log.splitlines()), log
    finally:
        if ng:
            ng.stop()
        a.stop()
        assert b.stop() == 0, b.err()
