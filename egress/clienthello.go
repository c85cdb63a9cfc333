package egress

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// DefaultClientHelloMax is the byte cap ReadClientHello applies when its
// caller passes no positive cap. Real ClientHellos are a few hundred bytes
// to a few KiB (a post-quantum key share adds about 1.2 KiB); 16 KiB leaves
// room for the largest legitimate ones without letting a client make the
// proxy buffer without bound.
const DefaultClientHelloMax = 16 << 10

// maxRecordPayload is the largest plaintext record TLS allows (RFC 8446
// §5.1); a ClientHello is always sent in plaintext records.
const maxRecordPayload = 1 << 14

// TLS wire constants used below.
const (
	recordTypeChangeCipherSpec = 20
	recordTypeAlert            = 21
	recordTypeHandshake        = 22
	recordTypeApplicationData  = 23
	recordTypeHeartbeat        = 24

	handshakeTypeClientHello = 1

	extServerName        = 0
	extALPN              = 16
	extSupportedVersions = 43

	serverNameTypeHostName = 0
)

// Sentinel errors for ReadClientHello. Every error it returns wraps exactly
// one of these (or io.ErrUnexpectedEOF, io.EOF, or the reader's own error),
// so a proxy can choose its refusal with errors.Is while the error's text
// stays one sentence a person can act on.
var (
	// ErrNotTLS: the first bytes are not a TLS record at all, such as plain
	// HTTP sent through a CONNECT tunnel.
	ErrNotTLS = errors.New("not a TLS connection")
	// ErrNotHandshake: a TLS record arrived that is not a handshake record.
	ErrNotHandshake = errors.New("TLS record is not a handshake")
	// ErrNotClientHello: the first handshake message is not a ClientHello.
	ErrNotClientHello = errors.New("TLS handshake message is not a ClientHello")
	// ErrClientHelloTooLarge: the ClientHello needs more bytes than the cap.
	ErrClientHelloTooLarge = errors.New("TLS ClientHello is larger than allowed")
	// ErrMalformedClientHello: a length inside the ClientHello or its records
	// overruns or contradicts the data around it.
	ErrMalformedClientHello = errors.New("TLS ClientHello is malformed")
	// ErrInvalidServerName: the server_name extension names something that is
	// not a valid DNS host name.
	ErrInvalidServerName = errors.New("TLS server name is invalid")
	// ErrDuplicateServerName: the server_name extension carries more than one
	// host name, which would leave the tunnel's real destination ambiguous.
	ErrDuplicateServerName = errors.New("TLS ClientHello names more than one server")
)

// ClientHello is what a proxy needs from a TLS ClientHello to decide whether
// the tunnel goes where it was allowed to go.
type ClientHello struct {
	// ServerName is the SNI host name, lower case and without a trailing
	// dot; "" when the client sent no server_name extension.
	ServerName string
	// ALPN lists the application protocols the client offered, in order.
	ALPN []string
	// Versions lists the TLS versions from supported_versions, or holds
	// only the ClientHello's legacy version when that extension is absent.
	Versions []uint16
}

// helloError is one sentence for people, plus the sentinel (and underlying
// cause, if any) for code.
type helloError struct {
	msg   string
	kind  error
	cause error
}

func (e *helloError) Error() string { return e.msg }

func (e *helloError) Unwrap() []error {
	if e.cause != nil {
		return []error{e.kind, e.cause}
	}
	return []error{e.kind}
}

func helloErr(kind error, format string, args ...any) error {
	return &helloError{msg: fmt.Sprintf(format, args...), kind: kind}
}

// ReadClientHello reads from r exactly the TLS records that carry the first
// handshake message, reassembling it when it spans several records, and
// parses it as a ClientHello. It never reads past the last of those records,
// so r may be a live connection whose remaining bytes the caller relays
// afterwards. raw holds every byte read, on success and on error alike, for
// the caller to replay upstream unchanged; it is never longer than max
// (DefaultClientHelloMax when max <= 0).
func ReadClientHello(r io.Reader, max int) (hello ClientHello, raw []byte, err error) {
	if max <= 0 {
		max = DefaultClientHelloMax
	}
	raw = make([]byte, 0, min(max, 1024))
	var msg []byte // the handshake message reassembled from record payloads
	msgLen := -1   // the message's full length, header included, once known
	for msgLen < 0 || len(msg) < msgLen {
		if len(raw)+5 > max {
			return hello, raw, helloErr(ErrClientHelloTooLarge, "the TLS ClientHello needs more than %d bytes, the most this proxy reads before choosing where the tunnel goes", max)
		}
		first := len(raw) == 0
		raw, err = readRecordHeader(r, raw, first)
		if err != nil {
			return hello, raw, err
		}
		hdr := raw[len(raw)-5:]
		typ, recLen := hdr[0], int(binary.BigEndian.Uint16(hdr[3:5]))
		if typ != recordTypeHandshake {
			return hello, raw, helloErr(ErrNotHandshake, "the client sent a TLS %s record where its ClientHello was expected; only a TLS handshake can open this tunnel", recordTypeName(typ))
		}
		if recLen == 0 {
			return hello, raw, helloErr(ErrMalformedClientHello, "the client sent an empty TLS handshake record, which TLS forbids")
		}
		if recLen > maxRecordPayload {
			return hello, raw, helloErr(ErrMalformedClientHello, "the client sent a TLS record of %d bytes, more than the %d TLS allows", recLen, maxRecordPayload)
		}
		if len(raw)+recLen > max {
			return hello, raw, helloErr(ErrClientHelloTooLarge, "the TLS ClientHello needs more than %d bytes, the most this proxy reads before choosing where the tunnel goes", max)
		}
		start := len(raw)
		raw = extend(raw, recLen)
		if n, err := io.ReadFull(r, raw[start:]); err != nil {
			raw = raw[:start+n]
			return hello, raw, readErr(err, false)
		}
		msg = append(msg, raw[start:]...)
		if msgLen < 0 && len(msg) >= 4 {
			if msg[0] != handshakeTypeClientHello {
				return hello, raw, helloErr(ErrNotClientHello, "the client's first TLS handshake message has type %d, not a ClientHello (type 1)", msg[0])
			}
			msgLen = 4 + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
			// Each further record costs a 5-byte header on top of its
			// payload, so at least this many bytes must fit under the cap.
			if 5+msgLen > max {
				return hello, raw, helloErr(ErrClientHelloTooLarge, "the TLS ClientHello declares %d bytes, more than the %d this proxy reads before choosing where the tunnel goes", msgLen, max)
			}
		}
	}
	if len(msg) > msgLen {
		// Anything after the ClientHello in its last record would reach the
		// upstream unchecked, so it is refused rather than relayed.
		return hello, raw, helloErr(ErrMalformedClientHello, "the TLS record that ends the ClientHello carries %d more bytes after it, which a client must not send before the server answers", len(msg)-msgLen)
	}
	hello, err = parseClientHello(msg[4:msgLen])
	return hello, raw, err
}

// readRecordHeader appends a 5-byte record header to raw. On the first
// record it checks the first byte before reading on, so a client that sent
// a short line of plain text is told it is not TLS rather than truncated.
func readRecordHeader(r io.Reader, raw []byte, first bool) ([]byte, error) {
	start := len(raw)
	raw = extend(raw, 5)
	if first {
		if n, err := io.ReadFull(r, raw[start:start+1]); err != nil {
			return raw[:start+n], readErr(err, true)
		}
		if !isRecordType(raw[start]) {
			return raw[:start+1], notTLS(raw[start])
		}
		start++
	}
	n, err := io.ReadFull(r, raw[start:])
	if err != nil {
		return raw[:start+n], readErr(err, false)
	}
	if first {
		hdr := raw[len(raw)-5:]
		if hdr[1] != 3 || hdr[2] > 4 {
			return raw, helloErr(ErrNotTLS, "the client's first bytes are not a TLS record (version %d.%d); the tunnel carries only TLS", hdr[1], hdr[2])
		}
	}
	return raw, nil
}

// extend lengthens b by n bytes, reallocating when its capacity is short.
func extend(b []byte, n int) []byte {
	return slices.Grow(b, n)[:len(b)+n]
}

func isRecordType(b byte) bool {
	return b >= recordTypeChangeCipherSpec && b <= recordTypeHeartbeat
}

func notTLS(b byte) error {
	if b >= 'A' && b <= 'Z' {
		return helloErr(ErrNotTLS, "the client sent what looks like plain HTTP or other text through a CONNECT tunnel that carries only TLS; use an https:// URL, or send plain HTTP to the proxy without CONNECT")
	}
	return helloErr(ErrNotTLS, "the client's first byte 0x%02x does not start a TLS record; the tunnel carries only TLS", b)
}

func recordTypeName(b byte) string {
	switch b {
	case recordTypeChangeCipherSpec:
		return "change_cipher_spec"
	case recordTypeAlert:
		return "alert"
	case recordTypeApplicationData:
		return "application_data"
	case recordTypeHeartbeat:
		return "heartbeat"
	}
	return fmt.Sprintf("type %d", b)
}

// readErr turns a short read into the truncation error, keeping io.EOF apart
// when the client sent nothing at all.
func readErr(err error, nothingYet bool) error {
	switch {
	case nothingYet && errors.Is(err, io.EOF):
		return &helloError{msg: "the client closed the connection before sending a TLS ClientHello", kind: io.EOF}
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return &helloError{msg: "the client's TLS ClientHello ends early: the connection closed in the middle of it", kind: io.ErrUnexpectedEOF}
	}
	return &helloError{msg: fmt.Sprintf("reading the TLS ClientHello failed: %v", err), kind: err}
}

// reader walks a byte slice; every method reports false when the data runs
// out, and the caller turns that into one ErrMalformedClientHello.
type reader []byte

func (r *reader) u8() (byte, bool) {
	if len(*r) < 1 {
		return 0, false
	}
	v := (*r)[0]
	*r = (*r)[1:]
	return v, true
}

func (r *reader) u16() (uint16, bool) {
	if len(*r) < 2 {
		return 0, false
	}
	v := binary.BigEndian.Uint16(*r)
	*r = (*r)[2:]
	return v, true
}

func (r *reader) bytes(n int) (reader, bool) {
	if len(*r) < n {
		return nil, false
	}
	v := (*r)[:n:n]
	*r = (*r)[n:]
	return v, true
}

// vec8 and vec16 read a vector with a 1- or 2-byte length prefix.
func (r *reader) vec8() (reader, bool) {
	n, ok := r.u8()
	if !ok {
		return nil, false
	}
	return r.bytes(int(n))
}

func (r *reader) vec16() (reader, bool) {
	n, ok := r.u16()
	if !ok {
		return nil, false
	}
	return r.bytes(int(n))
}

func malformed(what string) error {
	return helloErr(ErrMalformedClientHello, "the TLS ClientHello is malformed: %s", what)
}

// parseClientHello parses a ClientHello body (RFC 8446 §4.1.2), the
// handshake header already removed.
func parseClientHello(body reader) (ClientHello, error) {
	var hello ClientHello
	legacy, ok := body.u16()
	if !ok {
		return hello, malformed("it ends inside its version")
	}
	if _, ok := body.bytes(32); !ok {
		return hello, malformed("it ends inside its random")
	}
	if sid, ok := body.vec8(); !ok || len(sid) > 32 {
		return hello, malformed("its session id overruns the message or is longer than 32 bytes")
	}
	if cs, ok := body.vec16(); !ok || len(cs) < 2 || len(cs)%2 != 0 {
		return hello, malformed("its cipher suite list overruns the message or has an invalid length")
	}
	if cm, ok := body.vec8(); !ok || len(cm) < 1 {
		return hello, malformed("its compression method list overruns the message or is empty")
	}
	hello.Versions = []uint16{legacy}
	if len(body) == 0 {
		return hello, nil // a ClientHello from before extensions existed
	}
	exts, ok := body.vec16()
	if !ok {
		return hello, malformed("its extension list overruns the message")
	}
	if len(body) != 0 {
		return hello, malformed("bytes follow its extension list")
	}
	seen := map[uint16]bool{}
	for len(exts) > 0 {
		typ, ok := exts.u16()
		if !ok {
			return hello, malformed("an extension header is cut short")
		}
		data, ok := exts.vec16()
		if !ok {
			return hello, malformed(fmt.Sprintf("extension %d's length overruns the extension list", typ))
		}
		if seen[typ] {
			if typ == extServerName {
				return hello, helloErr(ErrDuplicateServerName, "the TLS ClientHello carries two server_name extensions; send one server name, the host given to CONNECT")
			}
			return hello, malformed(fmt.Sprintf("extension %d appears twice", typ))
		}
		seen[typ] = true
		var err error
		switch typ {
		case extServerName:
			hello.ServerName, err = parseServerName(data)
		case extALPN:
			hello.ALPN, err = parseALPN(data)
		case extSupportedVersions:
			hello.Versions, err = parseSupportedVersions(data)
		}
		if err != nil {
			return hello, err
		}
	}
	return hello, nil
}

func parseServerName(data reader) (string, error) {
	list, ok := data.vec16()
	if !ok || len(data) != 0 || len(list) == 0 {
		return "", malformed("its server_name list's length does not match the extension")
	}
	name := "" // normaliseHostName never returns "", so "" means none yet
	for len(list) > 0 {
		typ, ok := list.u8()
		if !ok {
			return "", malformed("a server_name entry is cut short")
		}
		value, ok := list.vec16()
		if !ok {
			return "", malformed("a server_name entry's length overruns the list")
		}
		if typ != serverNameTypeHostName {
			continue // other name types are undefined and carry no host
		}
		if name != "" {
			return "", helloErr(ErrDuplicateServerName, "the TLS ClientHello names two servers (%q and %q); send one server name, the host given to CONNECT", name, printable(value))
		}
		host, err := normaliseHostName(value)
		if err != nil {
			return "", err
		}
		name = host
	}
	return name, nil
}

// normaliseHostName checks an SNI host name is plain DNS (RFC 6066 §3:
// ASCII, no trailing dot) and returns it in lower case without a trailing
// dot, so the proxy compares it with the CONNECT host byte for byte.
func normaliseHostName(b []byte) (string, error) {
	s := strings.TrimSuffix(string(b), ".")
	if s == "" {
		return "", helloErr(ErrInvalidServerName, "the TLS server name is empty; send the host given to CONNECT as the server name, or none")
	}
	if len(s) > 253 {
		return "", helloErr(ErrInvalidServerName, "the TLS server name is %d bytes long, more than the 253 a DNS name may have", len(s))
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		case c >= 'A' && c <= 'Z':
		default:
			return "", helloErr(ErrInvalidServerName, "the TLS server name %q contains the byte 0x%02x; a server name must be an ASCII DNS name (letters, digits, '-', '.')", printable([]byte(s)), c)
		}
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return "", helloErr(ErrInvalidServerName, "the TLS server name %q has an empty label or one longer than 63 bytes", s)
		}
	}
	return strings.ToLower(s), nil
}

// printable keeps an attacker's bytes from reaching a log line raw.
func printable(b []byte) string {
	const limit = 64
	if len(b) > limit {
		b = b[:limit]
	}
	return strings.ToValidUTF8(string(b), "?")
}

func parseALPN(data reader) ([]string, error) {
	list, ok := data.vec16()
	if !ok || len(data) != 0 || len(list) == 0 {
		return nil, malformed("its ALPN list's length does not match the extension")
	}
	var protos []string
	for len(list) > 0 {
		p, ok := list.vec8()
		if !ok || len(p) == 0 {
			return nil, malformed("an ALPN protocol name is empty or overruns the list")
		}
		protos = append(protos, string(p))
	}
	return protos, nil
}

func parseSupportedVersions(data reader) ([]uint16, error) {
	list, ok := data.vec8()
	if !ok || len(data) != 0 || len(list) < 2 || len(list)%2 != 0 {
		return nil, malformed("its supported_versions list's length does not match the extension")
	}
	versions := make([]uint16, 0, len(list)/2)
	for len(list) > 0 {
		v, _ := list.u16()
		versions = append(versions, v)
	}
	return versions, nil
}
