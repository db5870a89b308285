"""Starts the real `swiftinfer serve` binary for end-to-end tests and stops it the way an operator
would (SIGTERM), checking that it exits 0.

The CLI cannot bind port 0, so a free port is found by binding a socket, reading its number and
closing it; another process may take the port in between, so a server that exits early saying
the address is in use is started again on a new port.

Also here: a tiny Prometheus text-format parser (exposition format 0.0.4) and a raw HTTP helper
for the cases the OpenAI client hides (bad JSON, wrong paths, huge bodies)."""
import contextlib
import http.client
import json
import math
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

from conftest import BINARY, DEFAULT_MODEL

STARTUP_TIMEOUT = float(os.environ.get("SI_SERVER_STARTUP_TIMEOUT", 120))
SHUTDOWN_TIMEOUT = float(os.environ.get("SI_SERVER_SHUTDOWN_TIMEOUT", 30))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `swiftinfer serve` process. Its stdout and stderr go to a log file (a pipe nobody
    reads would fill and block the server's request log)."""

    def __init__(self, *extra_args, model=DEFAULT_MODEL, api_key=None):
        self.extra_args = [str(a) for a in extra_args]
        self.model = model
        self.api_key = api_key
        self.proc = None
        self.port = None
        self.log = tempfile.NamedTemporaryFile(prefix="swiftinfer-serve-", suffix=".log",
                                               delete=False)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.port}"

    def log_text(self):
        with open(self.log.name, "rb") as f:
            return f.read().decode(errors="replace")

    def start(self):
        for _attempt in range(3):
            self.port = free_port()
            args = [str(BINARY), "serve", "-m", str(self.model), "--host", "127.0.0.1",
                    "--port", str(self.port), *self.extra_args]
            if self.api_key is not None:
                args += ["--api-key", self.api_key]
            self.log.seek(0)
            self.log.truncate()
            self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
            if self._wait_ready():
                return self
            if "in use" not in self.log_text().lower():
                break
        raise AssertionError(f"server did not become healthy (exit {self.proc.poll()}): "
                             f"{' '.join(args)}\n{self.log_text()[-4000:]}")

    def _wait_ready(self):
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=2) as r:
                    if r.status == 200:
                        return True
            except urllib.error.HTTPError as e:
                # while the model loads /health says 503; anything else is wrong
                assert e.code == 503, f"/health answered {e.code} while starting"
            except (urllib.error.URLError, ConnectionError, OSError):
                pass  # not listening yet
            time.sleep(0.1)
        self.proc.kill()
        self.proc.wait()
        return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self):
        """SIGTERM, then the exit status (killed and None when it did not exit in time)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=SHUTDOWN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


@contextlib.contextmanager
def running_server(*extra_args, **kw):
    """Yields a started Server; on exit stops it and asserts a clean exit (0) within
    SHUTDOWN_TIMEOUT, showing the server's log when it did not."""
    srv = Server(*extra_args, **kw).start()
    try:
        yield srv
    finally:
        was_alive = srv.alive()
        rc = srv.stop()
        log = srv.log_text()
        os.unlink(srv.log.name)
        assert was_alive, f"server died during the tests (exit {rc}):\n{log[-4000:]}"
        assert rc == 0, f"SIGTERM: exit {rc} (None: still running after " \
                        f"{SHUTDOWN_TIMEOUT}s)\n{log[-4000:]}"


def raw_request(base_url, method, path, body=None, headers=None, timeout=60):
    """A raw HTTP request. body: bytes, or anything else to send as JSON. Returns (status,
    headers dict with lower-case names, body bytes)."""
    host, port = base_url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    hdrs = dict(headers or {})
    if body is not None and not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=body, headers=hdrs)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def check_openai_error(status_body, status, *needles, code=None):
    """Asserts an OpenAI-shaped error: {"error": {"message", "type", "param", "code"}} with
    each needle in the message (or in param)."""
    got_status, _, body = status_body
    assert got_status == status, (got_status, body[:500])
    doc = json.loads(body)
    err = doc["error"]
    for k in ("message", "type", "param", "code"):
        assert k in err, f"{k!r} missing from {err}"
    assert isinstance(err["message"], str) and err["message"], err
    for n in needles:
        assert n in err["message"] or n == err.get("param"), f"{n!r} not in {err}"
    if code is not None:
        assert err["code"] == code, err
    return err


_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_SAMPLE = re.compile(rf"^({_NAME})(\{{(.*)\}})?\s+(\S+)(\s+-?\d+)?$")
_LABEL = re.compile(rf'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*(,|$)')


def parse_prometheus(text):
    """Parses Prometheus text exposition format. Returns (types, samples): types maps a metric
    family to its TYPE; samples is a list of (name, labels dict, float value). Raises ValueError
    on any line that is not a comment, blank, or a well-formed sample."""
    types, samples = {}, []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE":
                if len(parts) != 4 or parts[3] not in ("counter", "gauge", "histogram",
                                                       "summary", "untyped"):
                    raise ValueError(f"line {n}: bad TYPE: {line!r}")
                types[parts[2]] = parts[3]
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError(f"line {n}: not a sample: {line!r}")
        labels = {}
        if m.group(3):
            rest = m.group(3).rstrip(",")
            pos = 0
            while pos < len(rest):
                lm = _LABEL.match(rest, pos)
                if not lm:
                    raise ValueError(f"line {n}: bad labels: {line!r}")
                labels[lm.group(1)] = lm.group(2)
                pos = lm.end()
        value = m.group(4)
        try:
            v = float(value)  # accepts NaN, +Inf, -Inf as the format spells them
        except ValueError:
            raise ValueError(f"line {n}: bad value {value!r}") from None
        samples.append((m.group(1), labels, v))
    return types, samples


def metric(samples, name, **labels):
    """Sum of the samples named `name` whose labels include `labels` (None when none match)."""
    vals = [v for n, l, v in samples
            if n == name and all(l.get(k) == str(x) for k, x in labels.items())]
    return sum(vals) if vals else None


def check_histograms(types, samples):
    """Each histogram has cumulative, non-decreasing buckets ending in le="+Inf" equal to
    _count, and a _sum."""
    for fam, t in types.items():
        if t != "histogram":
            continue
        series = {}
        for n, l, v in samples:
            if n == fam + "_bucket":
                key = tuple(sorted((k, x) for k, x in l.items() if k != "le"))
                series.setdefault(key, []).append((float(l["le"]), v))
        assert series, f"histogram {fam} has no buckets"
        for key, buckets in series.items():
            buckets.sort()
            assert math.isinf(buckets[-1][0]), f"{fam}{key}: no +Inf bucket"
            counts = [c for _, c in buckets]
            assert counts == sorted(counts), f"{fam}{key}: buckets not cumulative {counts}"
            total = metric(samples, fam + "_count", **dict(key))
            assert total == counts[-1], f"{fam}{key}: _count {total} != +Inf {counts[-1]}"
            assert metric(samples, fam + "_sum", **dict(key)) is not None, f"{fam}: no _sum"
