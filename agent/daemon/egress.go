package daemon

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// The egress proxy (op egress): in network mode "proxy" a sandbox has no
// route out, and every program reaches the world through a loopback port
// the agent listens on. The agent decides nothing: it carries each
// connection, bytes as they come, to sandboxd on a stream of its session,
// and sandboxd reads the proxy protocol, applies the sandbox's policy and
// adds credentials the sandbox never sees.

const (
	// egressFile records the proxy's port and CA in the state dir, so a
	// restarted daemon listens on the same port the commands were told.
	egressFile = "egress.json"
	// egressWait is how long a connection waits for a session to carry
	// it (sandboxd reopening its pipe) before the program is told why not.
	egressWait = 10 * time.Second
	// egressPending caps the connections waiting for a session or for
	// their stream to open; more get the refusal at once.
	egressPending = 1024
	// systemBundle is where Debian, Ubuntu and Alpine keep the system's
	// authorities.
	systemBundle = "/etc/ssl/certs/ca-certificates.crt"
)

// egressRecord is what egressFile holds.
type egressRecord struct {
	Port   int    `json:"port"`
	CACert string `json:"ca_cert,omitempty"`
}

// egressService is the agent's half of the egress proxy.
//
// Goroutines: the accept loop of the proxy's listener, once listening;
// per accepted connection one goroutine that waits for a session, opens
// its stream and splices (dial.go's splice: two copiers), ending with the
// connection or the session; per session that enabled egress one watcher
// that forgets it when it closes. close stops the listener; the splices end
// as their sessions close (Server.Close closes them first).
type egressService struct {
	log       *slog.Logger
	stateDir  string        // "" keeps the record in memory only
	bundleDir string        // where the CA bundle goes, readable by every process
	system    string        // the system bundle
	wait      time.Duration // egressWait, shorter in tests
	env       *sandboxEnv
	pending   chan struct{} // a slot per connection not yet spliced

	// mu guards everything below.
	mu     sync.Mutex
	ln     net.Listener
	rec    egressRecord
	sess   *session      // the newest open session that enabled egress
	ready  chan struct{} // closed while sess is set
	closed bool
}

func newEgressService(o options, env *sandboxEnv) *egressService {
	e := &egressService{
		log: o.log, stateDir: o.stateDir, env: env, system: o.systemBundle, wait: o.egressWait,
		pending: make(chan struct{}, egressPending),
		ready:   make(chan struct{}),
	}
	if e.system == "" {
		e.system = systemBundle
	}
	if e.wait <= 0 {
		e.wait = egressWait
	}
	if e.stateDir != "" {
		e.bundleDir = filepath.Join(filepath.Dir(e.stateDir), "egress")
	}
	return e
}

var _ service = (*egressService)(nil)

func (e *egressService) register(t opTable) {
	addBody(t, proto.OpEgress, func(r *proto.Request) *proto.EgressRequest { return r.Egress },
		func(ctx context.Context, rq *request, r *proto.EgressRequest) (*proto.Response, func(), error) {
			resp, err := e.enable(rq.sess, r)
			return &proto.Response{Egress: resp}, nil, err
		})
}

// resume listens again on the port a previous daemon recorded, before any
// session asks: a program started under that daemon keeps its proxy.
func (e *egressService) resume() {
	if e.stateDir == "" {
		return
	}
	b, err := os.ReadFile(filepath.Join(e.stateDir, egressFile))
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var rec egressRecord
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err == nil {
		e.mu.Lock()
		e.rec = rec
		e.mu.Unlock()
		_, err = e.enable(nil, &proto.EgressRequest{CACert: rec.CACert})
	}
	if err != nil {
		e.log.Error("the egress proxy of the previous agent is not resumed; it starts with sandboxd's next request", "err", err)
	}
}

// enable listens (once), installs the CA, sets the variables and makes
// sess the session that carries connections from now on.
func (e *egressService) enable(sess *session, r *proto.EgressRequest) (*proto.EgressResponse, error) {
	if r.CACert != "" {
		if err := checkCA(r.CACert); err != nil {
			return nil, err
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errServerClosed
	}
	if e.ln == nil {
		if err := e.listenLocked(); err != nil {
			return nil, err
		}
	}
	e.rec.CACert = r.CACert
	if err := e.saveLocked(); err != nil {
		return nil, err
	}
	resp := &proto.EgressResponse{Proxy: "http://" + e.ln.Addr().String()}
	env := proxyEnv(resp.Proxy)
	if r.CACert != "" {
		bundle, system, err := e.installCA(r.CACert)
		if err != nil {
			return nil, err
		}
		resp.CABundle, resp.SystemBundle = bundle, system
		for _, k := range []string{"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT"} {
			env[k] = bundle
		}
	}
	e.env.setEgress(env)
	resp.Env = env
	if sess != nil && sess != e.sess {
		e.sess = sess
		select {
		case <-e.ready:
		default:
			close(e.ready)
		}
		go e.forgetOnClose(sess)
	}
	return resp, nil
}

// proxyEnv is what every command gets in proxy mode. NO_PROXY keeps the
// sandbox's own servers reachable directly.
func proxyEnv(proxy string) map[string]string {
	env := map[string]string{}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"} {
		env[k] = proxy
		env[strings.ToLower(k)] = proxy
	}
	env["NO_PROXY"] = "localhost,127.0.0.1,::1"
	env["no_proxy"] = env["NO_PROXY"]
	return env
}

// listenLocked listens on the recorded port, or a free one the first time.
func (e *egressService) listenLocked() error {
	addr := "127.0.0.1:" + strconv.Itoa(e.rec.Port)
	ln, err := net.Listen("tcp", addr)
	if err != nil && e.rec.Port != 0 {
		e.log.Warn("the egress proxy's recorded port is taken; listening on another, which only commands started from now on are told", "port", e.rec.Port, "err", err)
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		return errdefs.Unavailable("the agent cannot listen for the egress proxy on %s (%v); free the port or recreate the sandbox", addr, err)
	}
	e.ln = ln
	e.rec.Port = ln.Addr().(*net.TCPAddr).Port
	go e.accept(ln)
	return nil
}

func (e *egressService) saveLocked() error {
	if e.stateDir == "" {
		return nil
	}
	b, _ := json.Marshal(e.rec)
	if err := writeDurable(filepath.Join(e.stateDir, egressFile), b); err != nil {
		return errdefs.Unavailable("the agent cannot record the egress proxy in its state dir (%v); check the state directory and retry", err)
	}
	return nil
}

// forgetOnClose drops sess once it closes, so connections wait for the next.
func (e *egressService) forgetOnClose(sess *session) {
	<-sess.CloseChan()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sess == sess {
		e.sess = nil
		e.ready = make(chan struct{})
	}
}

// current waits, bounded, for a session to carry a connection.
func (e *egressService) current() *session {
	deadline := time.NewTimer(e.wait)
	defer deadline.Stop()
	for {
		e.mu.Lock()
		sess, ready, closed := e.sess, e.ready, e.closed
		e.mu.Unlock()
		if closed {
			return nil
		}
		if sess != nil && !sess.IsClosed() {
			return sess
		}
		var tick <-chan time.Time
		if sess != nil {
			// Closed but not yet forgotten (forgetOnClose runs at once).
			ready, tick = nil, time.After(10*time.Millisecond)
		}
		select {
		case <-ready:
		case <-tick:
		case <-deadline.C:
			return nil
		}
	}
}

func (e *egressService) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		select {
		case e.pending <- struct{}{}:
		default:
			refuseLocal(c, "sandboxd: too many connections are waiting for the egress proxy; retry in a moment.")
			continue
		}
		go e.carry(c)
	}
}

// carry takes one connection to sandboxd.
func (e *egressService) carry(c net.Conn) {
	release := func() { <-e.pending }
	sess := e.current()
	if sess == nil {
		release()
		refuseLocal(c, "sandboxd: the sandbox is not connected to sandboxd right now, so nothing can leave it; retry in a moment.")
		return
	}
	st, err := sess.OpenStream()
	if err == nil {
		st.SetWriteDeadline(time.Now().Add(e.wait))
		err = proto.WriteFrame(st, &proto.Incoming{Kind: proto.IncomingEgress, Peer: c.RemoteAddr().String()})
		st.SetWriteDeadline(time.Time{})
		if err != nil {
			st.Close()
		}
	}
	release()
	if err != nil {
		refuseLocal(c, "sandboxd: the connection to sandboxd dropped; retry in a moment.")
		return
	}
	splice(st, c)
}

// refuseLocal answers a program the agent cannot carry, in the proxy's
// own protocol so that it shows the sentence.
func refuseLocal(c net.Conn, sentence string) {
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	body := sentence + "\n"
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	c.Close()
}

// installCA writes the bundle (the system's authorities and the CA) the
// variables name, and adds the CA to the system bundle where it can.
func (e *egressService) installCA(caPEM string) (bundle string, system bool, err error) {
	dir := e.bundleDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "sandboxd-egress-"); err != nil {
			return "", false, errdefs.Unavailable("the agent cannot make a directory for the egress CA (%v); check /tmp", err)
		}
		e.bundleDir = dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, errdefs.Unavailable("the agent cannot make %s for the egress CA (%v); check the state directory", dir, err)
	}
	os.Chmod(dir, 0o755) // readable by every user's programs, whatever the umask
	ca := []byte(caPEM)
	if !bytes.HasSuffix(ca, []byte("\n")) {
		ca = append(ca, '\n')
	}
	sys, _ := os.ReadFile(e.system)
	if bytes.Contains(sys, bytes.TrimSpace(ca)) {
		system = true
	} else if len(sys) > 0 {
		if f, err := os.OpenFile(e.system, os.O_WRONLY|os.O_APPEND, 0); err == nil {
			prefix := ""
			if !bytes.HasSuffix(sys, []byte("\n")) {
				prefix = "\n"
			}
			_, werr := f.WriteString(prefix + string(ca))
			system = f.Close() == nil && werr == nil
		}
		sys, _ = os.ReadFile(e.system)
	}
	all := sys
	if !bytes.Contains(all, bytes.TrimSpace(ca)) {
		all = append(append(bytes.Clone(all), '\n'), ca...)
	}
	bundle = filepath.Join(dir, "ca-bundle.pem")
	tmp := bundle + ".new"
	if err := os.WriteFile(tmp, all, 0o644); err != nil {
		return "", false, errdefs.Unavailable("the agent cannot write the egress CA bundle %s (%v); check the state directory", tmp, err)
	}
	os.Chmod(tmp, 0o644)
	if err := os.Rename(tmp, bundle); err != nil {
		os.Remove(tmp)
		return "", false, errdefs.Unavailable("the agent cannot write the egress CA bundle %s (%v); check the state directory", bundle, err)
	}
	return bundle, system, nil
}

// checkCA refuses anything but one PEM CA certificate.
func checkCA(s string) error {
	blk, rest := pem.Decode([]byte(s))
	if blk == nil || blk.Type != "CERTIFICATE" || len(bytes.TrimSpace(rest)) != 0 {
		return errdefs.InvalidArgument("the egress CA is not one PEM certificate; send the CA's certificate, and no key")
	}
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil || !cert.IsCA {
		return errdefs.InvalidArgument("the egress CA is not a CA certificate; send the certificate of the authority sandboxd signs with")
	}
	return nil
}

// close stops the listener; connections being carried end with their
// sessions.
func (e *egressService) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	if e.ln != nil {
		e.ln.Close()
	}
}
