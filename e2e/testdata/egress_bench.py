# The egress benchmark's client, run in a proxy sandbox (through sandboxd's
# egress proxy, which HTTPS_PROXY names) and in a bridge container (the
# peer, straight to the server). It prints one JSON object.
#
#   egress_bench.py get HOST PORT N          N HTTPS GETs of /hello, a new connection each: ms per GET
#   egress_bench.py download HOST PORT BYTES one GET of /bytes/BYTES: seconds
#   egress_bench.py cps HOST PORT SECONDS THREADS  GETs of /hello on new connections, as many as THREADS make in SECONDS
import http.client, json, os, ssl, sys, threading, time, urllib.parse

mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE"))
proxy = os.environ.get("HTTPS_PROXY")


def connect():
    if proxy:
        p = urllib.parse.urlparse(proxy)
        c = http.client.HTTPSConnection(p.hostname, p.port, context=ctx, timeout=60)
        c.set_tunnel(host, port)
    else:
        c = http.client.HTTPSConnection(host, port, context=ctx, timeout=60)
    return c


def get(path):
    c = connect()
    try:
        c.request("GET", path, headers={"Connection": "close"})
        r = c.getresponse()
        n = 0
        while True:
            b = r.read(1 << 20)
            if not b:
                break
            n += len(b)
        if r.status != 200:
            raise SystemExit("GET %s: %d" % (path, r.status))
        return n
    finally:
        c.close()


if mode == "get":
    n = int(sys.argv[4])
    get("/hello")  # warm-up
    out = []
    for _ in range(n):
        t = time.perf_counter()
        get("/hello")
        out.append((time.perf_counter() - t) * 1000)
    print(json.dumps({"ms": out}))
elif mode == "download":
    size = int(sys.argv[4])
    t = time.perf_counter()
    got = get("/bytes/%d" % size)
    print(json.dumps({"seconds": time.perf_counter() - t, "bytes": got}))
elif mode == "cps":
    secs, threads = float(sys.argv[4]), int(sys.argv[5])
    done = [0] * threads
    end = time.perf_counter() + secs

    def work(i):
        while time.perf_counter() < end:
            get("/hello")
            done[i] += 1

    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    t = time.perf_counter()
    for x in ts:
        x.start()
    for x in ts:
        x.join()
    print(json.dumps({"connections": sum(done), "seconds": time.perf_counter() - t}))
