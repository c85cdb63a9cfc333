package agent_test

import (
	"io"
	"net"

	"github.com/hashicorp/yamux"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// fakeOldAgent responds to every request with a hello of another version.
func fakeOldAgent(c net.Conn) {
	fakeAgent(c, proto.HelloResponse{Version: proto.Version + 1})
}

// fakeAgent responds to every request with hello.
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

// fakeJSONAgent is an agent that predates raw frames: its hello does not
// advertise them and it responds to read_file with the data in JSON. It
// records whether a request asked for raw frames.
func fakeJSONAgent(c net.Conn, data []byte, sawRaw chan<- bool) {
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
		switch req.Op {
		case proto.OpHello:
			proto.WriteFrame(st, &proto.Response{Hello: &proto.HelloResponse{Version: proto.Version}})
		case proto.OpReadFile:
			sawRaw <- req.Raw
			proto.WriteFrame(st, &proto.Response{ReadFile: &proto.ReadFileResponse{Data: data, Size: int64(len(data))}})
		}
		st.Close()
	}
}
