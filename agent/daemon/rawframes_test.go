package daemon

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

func TestHelloAdvertisesRawData(t *testing.T) {
	sess := rawSession(t, New())
	resp := exchange(t, sess, frame(`{"op":"hello"}`))
	if resp.Hello == nil || !resp.Hello.RawData {
		t.Fatalf("hello = %+v, want raw_data", resp.Hello)
	}
}

// An old client sets no raw flag and gets the data inside the JSON, as
// before raw frames existed.
func TestReadWithoutRawKeepsDataInJSON(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("old client"), 0o644)
	sess := rawSession(t, New())
	resp := exchange(t, sess, frame(`{"op":"read_file","read_file":{"root":"`+root+`","path":"a.txt"}}`))
	if resp.Error != nil || resp.ReadFile == nil || string(resp.ReadFile.Data) != "old client" {
		t.Fatalf("response = %+v", resp)
	}
}

func TestRawReadAnswerCarriesDataAfterJSON(t *testing.T) {
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "a.txt"), []byte("raw data"), 0o644)
	sess := rawSession(t, New())
	st, err := sess.OpenStream()
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.SetDeadline(time.Now().Add(10 * time.Second))
	st.Write(frame(`{"op":"read_file","raw":true,"read_file":{"root":"` + root + `","path":"a.txt"}}`))
	var resp proto.Response
	if err := proto.ReadFrame(st, &resp); err != nil {
		t.Fatal(err)
	}
	if resp.ReadFile == nil || resp.ReadFile.Data != nil || resp.ReadFile.Size != 8 {
		t.Fatalf("JSON part = %+v, want no data in it", resp.ReadFile)
	}
	blobs, err := proto.ReadRaw(st, proto.MaxRawTotal)
	if err != nil || len(blobs) != 1 || string(blobs[0]) != "raw data" {
		t.Fatalf("raw part: %q, %v", blobs, err)
	}
}

func TestBadRawWriteFramesGetErrorResponses(t *testing.T) {
	root := t.TempDir()
	sess := rawSession(t, New())
	req := frame(`{"op":"write_files","raw":true,"write_files":{"root":"` + root + `","files":[{"path":"a.txt"}]}}`)
	end := []byte{byte(proto.RawEnd), 0, 0, 0, 0}
	for _, tc := range []struct {
		name, says string
		raw        []byte
	}{
		{"no data frame", "1 files came with 0 data frames", append(bytes.Clone(req), end...)},
		{"unknown kind", "unknown kind", append(bytes.Clone(req), 'z', 0, 0, 0, 0)},
		{"oversized", "cap", append(bytes.Clone(req), byte(proto.RawData), 0xff, 0xff, 0xff, 0xff)},
		{"data twice", "both in JSON and as a raw frame", append(frame(`{"op":"write_files","raw":true,"write_files":{"root":"`+root+`","files":[{"path":"a.txt","data":"eA=="}]}}`),
			byte(proto.RawData), 0, 0, 0, 1, 'y', byte(proto.RawEnd), 0, 0, 0, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := exchange(t, sess, tc.raw)
			if resp.Error == nil || resp.Error.Code != "invalid_argument" || !strings.Contains(resp.Error.Message, tc.says) {
				t.Fatalf("response = %+v", resp.Error)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(root, "a.txt")); !os.IsNotExist(err) {
		t.Fatalf("a refused write left a file: %v", err)
	}
}
