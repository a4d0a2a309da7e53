#!/usr/bin/env python3
"""Soak test for `glia serve` (Python 3 standard library only).

Starts `glia serve` on a tiny model and sends REQUESTS requests over CONCURRENCY
connections at once, mixed: greedy and sampled, streamed and whole, chat and completion,
stop strings, clients that disconnect mid-request, and bad requests (malformed JSON, wrong
types, out-of-range values, unknown routes, garbage bytes). Then checks:

  - zero failures among the good requests (status 200 and a well-formed body or stream);
  - every greedy answer equals the same prompt's answer computed alone beforehand (and a
    stop string cuts that answer where it first appears);
  - every bad request gets a 4xx (never a 5xx, never a dropped connection);
  - no response at all is 503 (busy): requests whose client finished or went away stop
    counting as in flight (run with --max-concurrent at --concurrency to make it tight);
  - afterwards: no request running or waiting, KV-cache blocks in use back to 0 (/metrics),
    RSS flat (after the run vs. after a warm-up tenth), threads and open file
    descriptors back to their level before the load.

Prints the figures and exits non-zero on any failure.

  scripts/soak.py [--glia build/glia] [--model ../shared/models/stories260K.gguf]
                  [--requests 10000] [--concurrency 64] [--parallel 8] [--seed 1]
                  [--max-concurrent N]
"""
import argparse
import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

PROMPTS = [
    "Once upon a time", "Lily and Tom went to the park", "The little dog", "One day, a girl named Sue",
    "The sun was hot", "Tim had a big red ball", "Mom said", "In the forest there was a tree",
    "The cat sat", "Ben liked to run", "A bird flew", "The boat was small",
    "She found a shell", "They ate cake", "The moon was up", "He saw a frog",
]
MAX_TOKENS = 24


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return {
        "rss_kib": int(out["VmRSS"].split()[0]),
        "threads": int(out["Threads"]),
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }


class Server:
    def __init__(self, args):
        cmd = [args.glia, "serve", args.model, "--port", "0", "-np", str(args.parallel), "-c", str(args.ctx),
               "-t", str(args.threads), "--max-tokens-limit", "64"]
        if args.max_concurrent > 0:
            cmd += ["--max-concurrent", str(args.max_concurrent)]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port = None
        self.stderr_tail = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.stderr_tail.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise SystemExit("soak: the server did not start:\n" + "".join(self.stderr_tail))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.stderr_tail = (self.stderr_tail + [line])[-50:]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        return self.proc.returncode


def request(port, method, path, body=None, timeout=300, stream=False):
    """Returns (status, text) for whole responses, (status, [data payloads]) for streams."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = json.dumps(body) if isinstance(body, (dict, list)) else body
        headers = {"Content-Type": "application/json"} if data is not None else {}
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        if not stream or r.status != 200:
            return r.status, r.read().decode("utf-8", "replace")
        events = []
        for raw in r:
            line = raw.decode("utf-8", "replace").strip()
            if line.startswith("data: "):
                events.append(line[6:])
        return r.status, events
    finally:
        c.close()


def metrics(port):
    st, text = request(port, "GET", "/metrics", timeout=30)
    assert st == 200, st
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            try:
                out[k] = float(v)
            except ValueError:
                pass
    return out


def body_for(kind, prompt, stream, extra=None):
    b = {"max_tokens": MAX_TOKENS, "stream": stream}
    if kind == "chat":
        b["messages"] = [{"role": "user", "content": prompt}]
    else:
        b["prompt"] = prompt
    b.update(extra or {})
    return b


def text_of(endpoint, status, result, stream):
    """The generated text and finish reason of a good response, or raises."""
    if status != 200:
        raise RuntimeError(f"status {status}: {str(result)[:200]}")
    if not stream:
        j = json.loads(result)
        ch = j["choices"][0]
        text = ch["message"]["content"] if endpoint == "chat" else ch["text"]
        return text or "", ch["finish_reason"]
    if not result or result[-1] != "[DONE]":
        raise RuntimeError("the stream did not end with [DONE]")
    text, finish = "", None
    for ev in result[:-1]:
        j = json.loads(ev)
        if "error" in j:
            raise RuntimeError("error event: " + ev[:200])
        for ch in j.get("choices", []):
            if endpoint == "chat":
                text += ch.get("delta", {}).get("content") or ""
            else:
                text += ch.get("text") or ""
            finish = ch.get("finish_reason") or finish
    return text, finish


PATHS = {"chat": "/v1/chat/completions", "completion": "/v1/completions"}

BAD = [
    ("POST", "/v1/completions", "{not json"),
    ("POST", "/v1/completions", json.dumps({"prompt": 5})),
    ("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": -3})),
    ("POST", "/v1/completions", json.dumps({"prompt": "x", "max_tokens": 100000})),
    ("POST", "/v1/completions", json.dumps({"prompt": "x", "temperature": "hot"})),
    ("POST", "/v1/completions", '{"prompt": "x", "temperature": 1e400}'),
    ("POST", "/v1/chat/completions", json.dumps({"messages": "hi"})),
    ("POST", "/v1/chat/completions", json.dumps({"messages": [{"content": "x"}]})),
    ("POST", "/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": 5}]})),
    ("POST", "/v1/chat/completions", json.dumps({"messages": [], "top_p": 7})),
    ("POST", "/v1/chat/completions", ""),
    ("GET", "/v1/nothing-here", None),
    ("DELETE", "/v1/completions", None),
]


def raw_garbage(port, rng):
    """Garbage bytes on a socket: the server answers 400 (or closes); never 5xx."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    try:
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
        s.sendall(rng.choice([b"", b"GET ", b"POST /v1/completions HTTP/1.1\r\n"]) + junk + b"\r\n\r\n")
        s.shutdown(socket.SHUT_WR)
        data = b""
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
        if data and not re.match(rb"HTTP/1\.[01] 4\d\d", data):
            raise RuntimeError("garbage got " + data[:60].decode("latin-1"))
    finally:
        s.close()


def disconnect(port, rng, endpoint, prompt):
    """A client that goes away: after sending, or after a few stream chunks."""
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    try:
        stream = rng.random() < 0.5
        b = json.dumps(body_for(endpoint, prompt, stream, {"max_tokens": 48}))
        s.sendall((f"POST {PATHS[endpoint]} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(b)}\r\n\r\n{b}").encode())
        if stream:
            for _ in range(rng.randrange(1, 4)):
                if not s.recv(256):
                    break
        else:
            time.sleep(rng.random() * 0.05)
    finally:
        # RST instead of FIN now and then.
        if rng.random() < 0.5:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shared = os.environ.get("GLIA_SHARED") or os.environ.get("GLIA_SHARED_DEFAULT") or \
        os.path.join(os.path.dirname(root), "shared")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--glia", default=os.path.join(root, "build", "glia"))
    ap.add_argument("--model", default=os.path.join(shared, "models", "stories260K.gguf"))
    ap.add_argument("--requests", type=int, default=10000)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-concurrent", type=int, default=0,
                    help="the server's --max-concurrent (0: its default); with --concurrency at or below it, "
                         "no request may be refused as busy (a client's finished or abandoned requests must not count)")
    ap.add_argument("--rss-slack-kib", type=int, default=16384, help="RSS growth allowed after the warm-up")
    args = ap.parse_args()

    t_start = time.time()
    srv = Server(args)
    port = srv.port
    failures = []
    lock = threading.Lock()
    counts = {}

    def fail(msg):
        with lock:
            failures.append(msg)

    def count(k):
        with lock:
            counts[k] = counts.get(k, 0) + 1

    try:
        # Solo answers: each prompt alone, greedy, both endpoints.
        solo = {}
        for ep in ("chat", "completion"):
            for p in PROMPTS:
                st, res = request(port, "POST", PATHS[ep], body_for(ep, p, False, {"temperature": 0}))
                solo[(ep, p)] = text_of(ep, st, res, False)[0]
        base = proc_status(srv.proc.pid)
        warm = None
        warm_at = max(1, args.requests // 10)

        def one(i):
            rng = random.Random(args.seed * 1000003 + i)
            ep = rng.choice(("chat", "completion"))
            p = rng.choice(PROMPTS)
            kind = rng.choices(["greedy", "sampled", "stop", "disconnect", "bad", "garbage"],
                               [40, 20, 10, 12, 13, 5])[0]
            count(kind)
            try:
                if kind == "bad":
                    method, path, body = rng.choice(BAD)
                    st, res = request(port, method, path, body)
                    if not 400 <= st < 500:
                        fail(f"#{i} bad request {method} {path} {str(body)[:40]!r}: status {st} {res[:120]}")
                    return
                if kind == "garbage":
                    raw_garbage(port, rng)
                    return
                if kind == "disconnect":
                    disconnect(port, rng, ep, p)
                    return
                stream = rng.random() < 0.5
                extra = {"temperature": 0}
                want = solo[(ep, p)]
                if kind == "sampled":
                    extra = {"temperature": 0.9, "seed": rng.randrange(1 << 30)}
                elif kind == "stop":
                    words = [w for w in want.split(" ") if w]
                    stop = words[len(words) // 2] if words else "."
                    extra["stop"] = [stop]
                    cut = want.find(stop)
                    want = want[:cut] if cut >= 0 else want
                st, res = request(port, "POST", PATHS[ep], body_for(ep, p, stream, extra), stream=stream)
                text, finish = text_of(ep, st, res, stream)
                if kind in ("greedy", "stop") and text != want:
                    fail(f"#{i} {kind} {ep} stream={stream} prompt {p!r}: {text!r} != solo {want!r}")
                if finish not in ("stop", "length"):
                    fail(f"#{i} {kind} {ep}: finish_reason {finish!r}")
            except Exception as e:  # noqa: BLE001 - every failure is reported
                fail(f"#{i} {kind} {ep}: {type(e).__name__}: {e}")

        t0 = time.time()
        with ThreadPoolExecutor(max_workers=args.concurrency) as ex:
            first = list(ex.map(one, range(warm_at)))
            del first
            warm = proc_status(srv.proc.pid)
            list(ex.map(one, range(warm_at, args.requests)))
        load_s = time.time() - t0

        # Let the server settle: requests end (polled on /metrics), then idle connection
        # threads retire (after 10 s without work; /proc is read without requests, which
        # would keep them busy).
        settle_deadline = time.time() + 30
        while time.time() < settle_deadline:
            m = metrics(port)
            if m.get("glia_requests_running", 0) == 0 and m.get("glia_queue_depth", 0) == 0 and \
                    m.get("glia_kv_cache_blocks_used", 0) == 0:
                break
            time.sleep(1)
        settle_deadline = time.time() + 40
        while time.time() < settle_deadline:
            end = proc_status(srv.proc.pid)
            if end["threads"] <= base["threads"] + 4 and end["fds"] <= base["fds"] + 2:
                break
            time.sleep(1)
        m = metrics(port)
        end = proc_status(srv.proc.pid)
        if m.get("glia_requests_running", 0) != 0 or m.get("glia_queue_depth", 0) != 0:
            fail(f"requests still running/waiting after the load: {m.get('glia_requests_running')} / "
                 f"{m.get('glia_queue_depth')}")
        # At most --concurrency connections at once, each waiting for its answer or gone:
        # never more requests in flight than that, so none may be refused as busy.
        busy = m.get('glia_http_responses_total{code="503"}', 0)
        if busy:
            fail(f"{busy:.0f} responses were 503 (busy) with {args.concurrency} connections")
        if m.get("glia_kv_cache_blocks_used", -1) != 0:
            fail(f"KV-cache blocks in use after the load: {m.get('glia_kv_cache_blocks_used')}")
        if end["threads"] > base["threads"] + 4:
            fail(f"threads: {base['threads']} before, {end['threads']} after")
        if end["fds"] > base["fds"] + 2:
            fail(f"open file descriptors: {base['fds']} before, {end['fds']} after")
        if end["rss_kib"] > warm["rss_kib"] + args.rss_slack_kib:
            fail(f"RSS grew from {warm['rss_kib']} KiB (after the warm-up) to {end['rss_kib']} KiB")
        rc = srv.stop()
        if rc not in (0, -15):
            fail(f"the server exited with {rc}")
    except BaseException:
        srv.stop()
        raise

    good = counts.get("greedy", 0) + counts.get("sampled", 0) + counts.get("stop", 0)
    print(f"soak: {args.requests} requests at {args.concurrency} connections in {load_s:.1f} s "
          f"({args.requests / load_s:.0f} req/s; server -np {args.parallel}, total {time.time() - t_start:.0f} s)")
    print("soak: kinds " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + f" (good {good})")
    statuses = {k.split('"')[1]: v for k, v in m.items() if k.startswith("glia_http_responses_total{")}
    print("soak: HTTP statuses " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(statuses.items())))
    print(f"soak: engine: finished {m.get('glia_requests_finished_total', 0):.0f}, cancelled "
          f"{m.get('glia_requests_cancelled_total', 0):.0f}, rejected {m.get('glia_requests_rejected_total', 0):.0f}, "
          f"overrun {m.get('glia_requests_overrun_total', 0):.0f}; KV blocks used after: "
          f"{m.get('glia_kv_cache_blocks_used', -1):.0f} of {m.get('glia_kv_cache_blocks_total', 0):.0f}")
    print(f"soak: RSS {base['rss_kib']} KiB before, {warm['rss_kib']} after the warm-up tenth, {end['rss_kib']} after; "
          f"threads {base['threads']} -> {end['threads']}; fds {base['fds']} -> {end['fds']}")
    if failures:
        print(f"soak: {len(failures)} FAILURES", file=sys.stderr)
        for f in failures[:30]:
            print("  " + f, file=sys.stderr)
        if srv.stderr_tail:
            print("server stderr (tail):\n" + "".join(srv.stderr_tail[-20:]), file=sys.stderr)
        return 1
    print("soak: passed (0 failures among good requests, every greedy answer equal to its solo answer)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
