package debug

// debugpyAdapterArgv runs debugpy's adapter with immediate ACKs on its TCP
// sockets. pydevd (inside the debuggee) writes each message as a header and
// a body in two sends with Nagle on; if the adapter delays its ACK of the
// header, the body waits about 40 ms, and in such sessions every stack or
// variables call paid that. Setting TCP_QUICKACK before each read on the
// adapter's side releases the body at once. Only the adapter process is
// touched, never the debuggee.
func debugpyAdapterArgv(python string) []string {
	return []string{python, "-c", quickackPrelude}
}

const quickackPrelude = `import runpy, socket, sys
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)
def _tcp(s):
    return s.family in (socket.AF_INET, socket.AF_INET6) and s.type == socket.SOCK_STREAM
def _wrap(name):
    orig = getattr(socket.socket, name)
    def read(self, *a, **k):
        if _QUICKACK is not None and _tcp(self):
            try:
                self.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:
                pass
        return orig(self, *a, **k)
    setattr(socket.socket, name, read)
for _n in ("recv", "recv_into"):
    _wrap(_n)
sys.argv = ["debugpy.adapter"] + sys.argv[1:]
runpy.run_module("debugpy.adapter", run_name="__main__", alter_sys=True)
`
