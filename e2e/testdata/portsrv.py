# A small app for the port and preview tests, in the standard library
# only: a 4 KiB page that loads a script and fetches JSON, server-sent
# events, a download of N bytes, and a WebSocket echo (RFC 6455: text and
# binary frames, ping, close). A third argument "nodelay" turns Nagle's
# algorithm off on its connections (Python's default leaves it on).
import base64, hashlib, http.server, socketserver, struct, sys, time

PORT = int(sys.argv[1])
MARK = sys.argv[2]
PAGE = ("<!doctype html><title>%s</title><script src=\"app.js\"></script>" % MARK).encode()
PAGE += b"<!--" + b"x" * (4096 - len(PAGE) - 7) + b"-->"
GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, ctype, body):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        path, _, query = self.path.partition("?")
        if path == "/":
            return self.send(200, "text/html", PAGE)
        if path == "/app.js":
            return self.send(200, "text/javascript", b"fetch('data.json')")
        if path == "/data.json":
            return self.send(200, "application/json", ('{"mark": "%s", "port": %d}' % (MARK, PORT)).encode())
        if path == "/headers":
            return self.send(200, "text/plain", str(self.headers).encode())
        if path == "/events":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.end_headers()
            for i in range(5):
                self.wfile.write(b"data: %d %f\n\n" % (i, time.time()))
                self.wfile.flush()
                time.sleep(0.3)
            self.close_connection = True
            return
        if path == "/big":
            n = int(query.partition("=")[2] or "0")
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(n))
            self.end_headers()
            chunk = b"\0" * 65536
            while n > 0:
                self.wfile.write(chunk[: min(n, len(chunk))])
                n -= len(chunk)
            return
        if path == "/ws":
            return self.websocket()
        self.send(404, "text/plain", b"no such page")

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        self.send(200, "text/plain", b"got %d bytes" % len(body))

    def websocket(self):
        key = self.headers.get("Sec-WebSocket-Key", "").encode()
        accept = base64.b64encode(hashlib.sha1(key + GUID).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.end_headers()
        self.wfile.flush()
        r, w = self.rfile, self.wfile
        while True:
            head = r.read(2)
            if len(head) < 2:
                return
            op, n = head[0] & 0x0F, head[1] & 0x7F
            if n == 126:
                n = struct.unpack(">H", r.read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", r.read(8))[0]
            mask = r.read(4) if head[1] & 0x80 else b"\0\0\0\0"
            data = bytes(b ^ mask[i % 4] for i, b in enumerate(r.read(n)))
            if op == 8:
                w.write(b"\x88\x00")
                w.flush()
                return
            if op == 9:
                op = 10
            if n < 126:
                hdr = bytes([0x80 | op, n])
            elif n < 65536:
                hdr = bytes([0x80 | op, 126]) + struct.pack(">H", n)
            else:
                hdr = bytes([0x80 | op, 127]) + struct.pack(">Q", n)
            w.write(hdr + data)
            w.flush()


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


H.disable_nagle_algorithm = sys.argv[3:] == ["nodelay"]
S(("0.0.0.0", PORT), H).serve_forever()
