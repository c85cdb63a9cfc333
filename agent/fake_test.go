package agent_test

import (
	"io"
	"net"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// fakeOldAgent answers every request with a hello of another version.
func fakeOldAgent(c net.Conn) {
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
		proto.WriteFrame(st, &proto.Response{Hello: &proto.HelloResponse{Version: proto.Version + 1}})
		st.Close()
	}
}
