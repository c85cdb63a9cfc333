package egress

import (
	"bytes"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// captureHello runs a real crypto/tls client against a pipe and returns the
// TLS record it writes first: its ClientHello, exactly as it would reach the
// proxy. The record is framed by hand so the capture does not depend on the
// code under test.
func captureHello(t testing.TB, cfg *tls.Config) []byte {
	t.Helper()
	client, server := net.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = tls.Client(client, cfg).Handshake() // fails once the server side closes
	}()
	defer func() {
		server.Close()
		client.Close()
		<-done
	}()
	if err := server.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	hdr := make([]byte, 5)
	if _, err := io.ReadFull(server, hdr); err != nil {
		t.Fatalf("reading the client's record header: %v", err)
	}
	if hdr[0] != 22 {
		t.Fatalf("the client's first record has type %d, want handshake", hdr[0])
	}
	body := make([]byte, binary.BigEndian.Uint16(hdr[3:]))
	if _, err := io.ReadFull(server, body); err != nil {
		t.Fatalf("reading the client's record body: %v", err)
	}
	return append(hdr, body...)
}

// splitRecords rewrites one handshake record into records carrying at most
// size payload bytes each, as a client may legally send.
func splitRecords(record []byte, size int) []byte {
	var out []byte
	payload := record[5:]
	for len(payload) > 0 {
		n := min(size, len(payload))
		out = append(out, record[0], record[1], record[2], byte(n>>8), byte(n))
		out = append(out, payload[:n]...)
		payload = payload[n:]
	}
	return out
}

type helloCase struct {
	name     string
	cfg      *tls.Config
	sni      string
	alpn     []string
	versions []uint16 // must all appear in Versions
	noTLS13  bool
}

func helloCases() []helloCase {
	return []helloCase{
		{name: "tls13_alpn", cfg: &tls.Config{ServerName: "Registry.NPMJS.org", NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12},
			sni: "registry.npmjs.org", alpn: []string{"h2", "http/1.1"}, versions: []uint16{tls.VersionTLS13, tls.VersionTLS12}},
		{name: "tls13_no_alpn", cfg: &tls.Config{ServerName: "pypi.org", MinVersion: tls.VersionTLS13},
			sni: "pypi.org", versions: []uint16{tls.VersionTLS13}},
		{name: "tls12_only", cfg: &tls.Config{ServerName: "github.com", NextProtos: []string{"http/1.1"}, MaxVersion: tls.VersionTLS12},
			sni: "github.com", alpn: []string{"http/1.1"}, versions: []uint16{tls.VersionTLS12}, noTLS13: true},
		{name: "no_sni", cfg: &tls.Config{InsecureSkipVerify: true}, versions: []uint16{tls.VersionTLS13}},
	}
}

func checkHello(t *testing.T, c helloCase, got ClientHello) {
	t.Helper()
	if got.ServerName != c.sni {
		t.Errorf("ServerName = %q, want %q", got.ServerName, c.sni)
	}
	if !slices.Equal(got.ALPN, c.alpn) {
		t.Errorf("ALPN = %q, want %q", got.ALPN, c.alpn)
	}
	for _, v := range c.versions {
		if !slices.Contains(got.Versions, v) {
			t.Errorf("Versions = %#x, want it to include %#x", got.Versions, v)
		}
	}
	if c.noTLS13 && slices.Contains(got.Versions, tls.VersionTLS13) {
		t.Errorf("Versions = %#x offers TLS 1.3 from a TLS 1.2-only client", got.Versions)
	}
}

func TestReadClientHelloRealClients(t *testing.T) {
	const after = "bytes the client sends after its hello"
	for _, c := range helloCases() {
		record := captureHello(t, c.cfg)
		inputs := map[string][]byte{
			"one_record":      record,
			"50_byte_records": splitRecords(record, 50),
			// One payload byte per record also splits the handshake
			// header itself across records.
			"1_byte_records": splitRecords(record, 1),
		}
		if n := len(inputs["50_byte_records"]); n <= len(record)+5 {
			t.Fatalf("%s: splitting into 50-byte records made %d bytes from %d; the hello is too small to test reassembly", c.name, n, len(record))
		}
		for inName, in := range inputs {
			for _, oneByte := range []bool{false, true} {
				name := c.name + "/" + inName
				if oneByte {
					name += "/one_byte_reads"
				}
				t.Run(name, func(t *testing.T) {
					src := bytes.NewReader(append(slices.Clip(in), after...))
					var r io.Reader = src
					if oneByte {
						r = iotest.OneByteReader(src)
					}
					hello, raw, err := ReadClientHello(r, 0)
					if err != nil {
						t.Fatalf("ReadClientHello: %v", err)
					}
					if !bytes.Equal(raw, in) {
						t.Fatalf("raw is %d bytes, want exactly the %d bytes of the hello's records", len(raw), len(in))
					}
					rest, _ := io.ReadAll(src)
					if string(rest) != after {
						t.Fatalf("left unread %q, want %q", rest, after)
					}
					checkHello(t, c, hello)
				})
			}
		}
	}
}

// Building blocks for hand-made ClientHellos: the error cases need fields
// crypto/tls will not produce.
func vec16(b ...[]byte) []byte {
	body := bytes.Join(b, nil)
	return append([]byte{byte(len(body) >> 8), byte(len(body))}, body...)
}

func ext(typ uint16, data []byte) []byte {
	return append([]byte{byte(typ >> 8), byte(typ)}, vec16(data)...)
}

func sniExt(names ...string) []byte {
	var list [][]byte
	for _, n := range names {
		list = append(list, append([]byte{0}, vec16([]byte(n))...))
	}
	return ext(0, vec16(list...))
}

// handRecord builds a ClientHello record whose extension block is exts
// verbatim (nil for none at all).
func handRecord(exts []byte) []byte {
	body := []byte{3, 3}
	body = append(body, make([]byte, 32)...)
	body = append(body, 0)                // empty session id
	body = append(body, 0, 2, 0x13, 0x01) // one cipher suite
	body = append(body, 1, 0)             // null compression
	body = append(body, exts...)
	msg := append([]byte{1, byte(len(body) >> 16), byte(len(body) >> 8), byte(len(body))}, body...)
	return append([]byte{22, 3, 1, byte(len(msg) >> 8), byte(len(msg))}, msg...)
}

func TestReadClientHelloHandMade(t *testing.T) {
	cases := []struct {
		name string
		exts []byte
		sni  string
	}{
		{"no_extensions", nil, ""},
		{"trailing_dot", vec16(sniExt("Example.COM.")), "example.com"},
		{"underscore_label", vec16(sniExt("_acme.example.com")), "_acme.example.com"},
		{"unknown_name_type_ignored", vec16(ext(0, vec16([]byte{7, 0, 1, 'x'}, append([]byte{0}, vec16([]byte("a.test"))...)))), "a.test"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := handRecord(c.exts)
			hello, raw, err := ReadClientHello(bytes.NewReader(in), 0)
			if err != nil {
				t.Fatalf("ReadClientHello: %v", err)
			}
			if hello.ServerName != c.sni || !bytes.Equal(raw, in) {
				t.Fatalf("ServerName = %q (want %q), raw %d bytes (want %d)", hello.ServerName, c.sni, len(raw), len(in))
			}
			if !slices.Equal(hello.Versions, []uint16{0x0303}) {
				t.Fatalf("Versions = %#x, want the legacy version alone", hello.Versions)
			}
		})
	}
}

func TestReadClientHelloErrors(t *testing.T) {
	real := captureHello(t, &tls.Config{ServerName: "github.com", NextProtos: []string{"h2"}})
	split := splitRecords(real, 50)
	serverHello := handRecord(nil)
	serverHello[5] = 2
	secondNotHandshake := slices.Clone(split)
	secondNotHandshake[5+50] = 23
	trailing := handRecord(nil)
	trailing = append(trailing, 0, 0, 0, 0)
	binary.BigEndian.PutUint16(trailing[3:], uint16(len(trailing)-5))

	cases := []struct {
		name string
		in   []byte
		max  int
		want error
		text string // a word the sentence must contain
	}{
		{"plain_http", []byte("GET / HTTP/1.1\r\nHost: github.com\r\n\r\n"), 0, ErrNotTLS, "plain HTTP"},
		{"short_plain_text", []byte("GE"), 0, ErrNotTLS, "plain HTTP"},
		{"binary_garbage", []byte{0x80, 1, 2, 3, 4, 5}, 0, ErrNotTLS, "0x80"},
		{"handshake_byte_bad_version", []byte{22, 'T', 'T', 0, 5, 1, 2, 3, 4, 5}, 0, ErrNotTLS, "not a TLS record"},
		{"application_data", []byte{23, 3, 3, 0, 2, 1, 2}, 0, ErrNotHandshake, "application_data"},
		{"alert", []byte{21, 3, 1, 0, 2, 2, 40}, 0, ErrNotHandshake, "alert"},
		{"second_record_not_handshake", secondNotHandshake, 0, ErrNotHandshake, "handshake"},
		{"server_hello", serverHello, 0, ErrNotClientHello, "ClientHello"},
		{"empty", nil, 0, io.EOF, "before sending"},
		{"truncated_header", real[:3], 0, io.ErrUnexpectedEOF, "ends early"},
		{"truncated_body", real[:len(real)-1], 0, io.ErrUnexpectedEOF, "ends early"},
		{"truncated_between_records", split[:5+50], 0, io.ErrUnexpectedEOF, "ends early"},
		{"over_cap", real, len(real) - 1, ErrClientHelloTooLarge, "bytes"},
		{"over_cap_split", split, len(split) - 1, ErrClientHelloTooLarge, "bytes"},
		{"over_default_cap", splitRecords(handRecord(vec16(ext(0xfe00, make([]byte, 16360)))), 8000), 0, ErrClientHelloTooLarge, "16384"},
		{"empty_record", []byte{22, 3, 1, 0, 0}, 0, ErrMalformedClientHello, "empty"},
		{"record_too_long", []byte{22, 3, 1, 0x40, 0x01}, 1 << 20, ErrMalformedClientHello, "16384"},
		{"bytes_after_hello", trailing, 0, ErrMalformedClientHello, "after"},
		{"extension_overruns", handRecord(vec16([]byte{0, 16, 0, 9, 0, 3, 2, 'h', '2'})), 0, ErrMalformedClientHello, "overruns"},
		{"extension_list_overruns", handRecord([]byte{0, 40, 0, 0, 0, 0}), 0, ErrMalformedClientHello, "overruns"},
		{"sni_list_overruns", handRecord(vec16(ext(0, []byte{0, 9, 0, 0, 3, 'a', '.', 'b'}))), 0, ErrMalformedClientHello, "server_name"},
		{"sni_entry_overruns", handRecord(vec16(ext(0, vec16([]byte{0, 0, 9, 'a'})))), 0, ErrMalformedClientHello, "overruns"},
		{"alpn_overruns", handRecord(vec16(ext(16, vec16([]byte{5, 'h', '2'})))), 0, ErrMalformedClientHello, "ALPN"},
		{"versions_odd", handRecord(vec16(ext(43, []byte{3, 3, 4, 3}))), 0, ErrMalformedClientHello, "supported_versions"},
		{"duplicate_extension", handRecord(vec16(ext(16, vec16([]byte{2, 'h', '2'})), ext(16, vec16([]byte{2, 'h', '2'})))), 0, ErrMalformedClientHello, "twice"},
		{"sni_empty", handRecord(vec16(sniExt(""))), 0, ErrInvalidServerName, "empty"},
		{"sni_only_dot", handRecord(vec16(sniExt("."))), 0, ErrInvalidServerName, "empty"},
		{"sni_non_ascii", handRecord(vec16(sniExt("gith\u00fcb.com"))), 0, ErrInvalidServerName, "ASCII"},
		{"sni_control_byte", handRecord(vec16(sniExt("github.com\x00.evil.test"))), 0, ErrInvalidServerName, "0x00"},
		{"sni_space", handRecord(vec16(sniExt("github.com evil.test"))), 0, ErrInvalidServerName, "0x20"},
		{"sni_empty_label", handRecord(vec16(sniExt("github..com"))), 0, ErrInvalidServerName, "label"},
		{"two_host_names", handRecord(vec16(sniExt("github.com", "evil.test"))), 0, ErrDuplicateServerName, "evil.test"},
		{"two_sni_extensions", handRecord(vec16(sniExt("github.com"), sniExt("evil.test"))), 0, ErrDuplicateServerName, "two"},
	}
	sentinels := []error{ErrNotTLS, ErrNotHandshake, ErrNotClientHello, ErrClientHelloTooLarge, ErrMalformedClientHello, ErrInvalidServerName, ErrDuplicateServerName, io.ErrUnexpectedEOF, io.EOF}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := bytes.NewReader(c.in)
			_, raw, err := ReadClientHello(src, c.max)
			if !errors.Is(err, c.want) {
				t.Fatalf("error %v, want one matching %v", err, c.want)
			}
			for _, s := range sentinels {
				if s != c.want && errors.Is(err, s) {
					t.Errorf("error %q also matches %v; the kinds must stay distinguishable", err, s)
				}
			}
			msg := err.Error()
			if !strings.Contains(msg, c.text) || strings.Count(msg, ". ") > 0 || strings.HasSuffix(msg, ".") {
				t.Errorf("error %q should be one sentence mentioning %q", msg, c.text)
			}
			limit := c.max
			if limit <= 0 {
				limit = DefaultClientHelloMax
			}
			if len(raw) > limit || !bytes.HasPrefix(c.in, raw) || len(raw) != len(c.in)-src.Len() {
				t.Errorf("raw (%d bytes) is not exactly the %d bytes consumed, or is over the cap %d", len(raw), len(c.in)-src.Len(), limit)
			}
		})
	}
}

// A reader's own failure reaches the caller wrapped, not as a parse error.
func TestReadClientHelloReaderError(t *testing.T) {
	boom := errors.New("connection reset")
	_, _, err := ReadClientHello(iotest.ErrReader(boom), 0)
	if !errors.Is(err, boom) || errors.Is(err, ErrMalformedClientHello) {
		t.Fatalf("error %v, want the reader's own error", err)
	}
}

func FuzzReadClientHello(f *testing.F) {
	for _, c := range helloCases() {
		record := captureHello(f, c.cfg)
		f.Add(record, uint16(0))
		f.Add(splitRecords(record, 50), uint16(0))
		f.Add(splitRecords(record, 7), uint16(600))
	}
	f.Add(handRecord(vec16(sniExt("github.com", "evil.test"))), uint16(0))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), uint16(0))
	f.Fuzz(func(t *testing.T, in []byte, max uint16) {
		limit := int(max)
		if limit <= 0 {
			limit = DefaultClientHelloMax
		}
		src := bytes.NewReader(in)
		hello, raw, err := ReadClientHello(src, int(max))
		if len(raw) > limit {
			t.Fatalf("raw is %d bytes, over the cap %d", len(raw), limit)
		}
		if !bytes.HasPrefix(in, raw) || len(raw) != len(in)-src.Len() {
			t.Fatalf("raw (%d bytes) is not exactly the prefix consumed (%d bytes)", len(raw), len(in)-src.Len())
		}
		if err == nil && hello.ServerName != "" {
			if n, nerr := normaliseHostName([]byte(hello.ServerName)); nerr != nil || n != hello.ServerName {
				t.Fatalf("accepted server name %q is not a normalised host name", hello.ServerName)
			}
		}
	})
}
