package agent_test

import (
	"io"
	"net"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// fakeOldAgent answers every request with a hello of another version.
func fakeOldAgent(c net.Conn) {
	fakeAgent(c, proto.HelloResponse{Version: proto.Version + 1})
}

// fakeAgent answers every request with hello.
func fakeAgent(c net.Conn, hello proto.HelloResponse) {
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	sess, err := yamux.Server(c, cfg)
	if err != nil {
		return
	}
	defer sess.Close()
	for {
		st, err := sess.AcceptStream()
		if err != nil {
			return
		}
		var req proto.Request
		proto.ReadFrame(st, &req)
		proto.WriteFrame(st, &proto.Response{Hello: &hello})
		st.Close()
	}
}
