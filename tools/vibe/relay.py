# The worker relay, run inside a sandbox by sandboxd (python3 -c). A worker
# in a sandbox without networking reaches sandboxd through it: the worker
# connects to 127.0.0.1:PORT (printed on stdout first), and each such
# connection is paired with one connection that sandboxd opened into the
# sandbox through its agent, to the unix socket given as argv[1]. sandboxd
# serves its HTTP API on those connections. Nothing listens outside the
# sandbox's loopback, and no port of the host is opened.
import os
import queue
import socket
import sys
import threading

sock_path = sys.argv[1]
try:
    os.unlink(sock_path)
except FileNotFoundError:
    pass
back = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
back.bind(sock_path)
os.chmod(sock_path, 0o600)
back.listen(16)
front = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
front.bind(("127.0.0.1", 0))
front.listen(64)
print(front.getsockname()[1], flush=True)

pool = queue.Queue()


def accept_back():
    while True:
        conn, _ = back.accept()
        pool.put(conn)


def pipe(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def serve(client):
    upstream = pool.get()
    t = threading.Thread(target=pipe, args=(upstream, client), daemon=True)
    t.start()
    pipe(client, upstream)
    t.join()
    client.close()
    upstream.close()


threading.Thread(target=accept_back, daemon=True).start()
while True:
    c, _ = front.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
