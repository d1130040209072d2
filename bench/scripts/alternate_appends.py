"""Journal appends against several labd builds side by side, in alternating
rounds, so that a slow moment of the machine falls on every build alike.

usage: BATCH=FACTS python3 alternate_appends.py ROUNDS PER_ROUND CLIENTS JOURNALS NAME=LABD...

Each build starts on a fresh store in a temporary directory, gets JOURNALS
journals under the root, and serves one warm-up round. Then each of ROUNDS
rounds sends PER_ROUND appends of BATCH facts (default 1) from CLIENTS
keep-alive connections to every build in turn, the order reversed every
round. A build's time and labd CPU (utime + stime from /proc, in clock
ticks) are summed over its own rounds only. Prints, per build, appends per
second and labd CPU per append. The client is Python: at many clients it is
slower than lab-bench, so compare builds, not rates.
"""
import base64
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")
BATCH = int(os.environ.get("BATCH", "1"))


def cbor_uint(n):
    if n < 24:
        return bytes([n])
    if n < 256:
        return bytes([0x18, n])
    return bytes([0x19]) + n.to_bytes(2, "big")


# The facts [text "bench", n] for n in 0..BATCH, as the bench appends them.
FACTS = [
    base64.b64encode(bytes([0x82, 0x65]) + b"bench" + cbor_uint(n)).decode()
    for n in range(BATCH)
]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND


def call(conn, method, path, body=None):
    headers = {} if body is None else {"content-type": "application/json"}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    response = conn.getresponse()
    return response.status, response.read()


class Labd:
    def __init__(self, binary, clients, journals):
        self.scratch = tempfile.mkdtemp(prefix="alternate-appends-")
        ready_file = os.path.join(self.scratch, "ready.json")
        args = [binary, "--data-dir", os.path.join(self.scratch, "data"),
                "--ready-file", ready_file, "--log", "warn"]
        for service in ("bytes", "journal", "coord"):
            args += [f"--{service}-listen", "127.0.0.1:0",
                     f"--{service}-management-listen", "127.0.0.1:0"]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        ready = None
        for _ in range(1200):
            try:
                ready = json.load(open(ready_file))
                break
            except (OSError, ValueError):
                time.sleep(0.05)
        if ready is None:
            raise SystemExit(f"{binary} did not become ready")
        host, port = ready["journal"]["operations"].rsplit(":", 1)
        self.address = (host, int(port))
        conn = http.client.HTTPConnection(*self.address)
        identity = json.loads(call(conn, "GET", "/healthz")[1])["identity"]
        root = {"root_id": identity["root_id"], "space_id": identity["root_space_id"]}
        self.spaces = []
        for j in range(journals):
            status, body = call(conn, "POST", "/v1/create",
                                {"parent": root, "key": f"k{j}", "operation_id": f"create-{j}"})
            if status != 201:
                raise SystemExit(f"create: {status} {body!r}")
            child = json.loads(body)["child"]
            self.spaces.append({"root_id": child["root_id"], "space_id": child["space_id"]})
        self.connections = [http.client.HTTPConnection(*self.address) for _ in range(clients)]
        self.sent = 0
        self.measured = 0
        self.seconds = 0.0
        self.cpu = 0.0

    def round(self, count, measure):
        first = self.sent
        self.sent += count
        clients = len(self.connections)

        def client(k):
            for i in range(k, count, clients):
                n = first + i
                status, body = call(self.connections[k], "POST", "/v1/append", {
                    "space": self.spaces[n % len(self.spaces)],
                    "facts": FACTS,
                    "operation_id": f"append-{n}",
                })
                if status != 201:
                    raise SystemExit(f"append: {status} {body!r}")

        cpu_before = cpu_seconds(self.process.pid)
        start = time.perf_counter()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if measure:
            self.seconds += time.perf_counter() - start
            self.cpu += cpu_seconds(self.process.pid) - cpu_before
            self.measured += count

    def stop(self):
        self.process.terminate()
        self.process.wait()
        subprocess.run(["rm", "-rf", self.scratch], check=False)


def main():
    rounds, per_round, clients, journals = map(int, sys.argv[1:5])
    builds = [arg.split("=", 1) for arg in sys.argv[5:]]
    started = []
    try:
        for name, binary in builds:
            started.append((name, Labd(binary, clients, journals)))
        for _, labd in started:
            labd.round(per_round, measure=False)
        for r in range(rounds):
            for _, labd in (started if r % 2 == 0 else started[::-1]):
                labd.round(per_round, measure=True)
        for name, labd in started:
            print(f"{name}: {BATCH} facts, c={clients}, {journals} journals: "
                  f"{labd.measured / labd.seconds:.0f} appends/s, "
                  f"labd {1e6 * labd.cpu / labd.measured:.1f} µs CPU per append (n={labd.measured})")
    finally:
        for _, labd in started:
            labd.stop()


if __name__ == "__main__":
    main()
