package envd

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/sandboxd/sandboxd/agent/proto"
	"github.com/sandboxd/sandboxd/errdefs"
)

// GET and POST /files: a file's bytes down and up, through the agent's
// file operations (whole files, at most Options.MaxFileBytes each).

// httpError is envd's REST error body.
type httpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func writeJSONBody(w io.Writer, v any) { json.NewEncoder(w).Encode(v) }

func writeHTTPError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	writeJSONBody(w, httpError{Code: status, Message: msg})
}

// statusOf is the REST status of an error of sandboxd's classes.
func statusOf(err error) int {
	switch {
	case errors.Is(err, errdefs.ErrInvalidArgument), errors.Is(err, errdefs.ErrFailedPrecondition):
		return http.StatusBadRequest
	case errors.Is(err, errdefs.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, errdefs.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, errdefs.ErrResourceExhausted):
		return http.StatusTooManyRequests
	case errors.Is(err, errdefs.ErrConflict):
		return http.StatusConflict
	case errors.Is(err, errdefs.ErrUnavailable):
		return http.StatusServiceUnavailable
	case errors.Is(err, errdefs.ErrDeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// writtenEntry is what an upload answers per file.
type writtenEntry struct {
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Path     string            `json:"path"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (s *Service) serveFiles(w http.ResponseWriter, r *http.Request, t target) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		s.download(w, r, t)
	case http.MethodPost:
		s.upload(w, r, t)
	default:
		w.Header().Set("Allow", "GET, POST")
		writeHTTPError(w, http.StatusMethodNotAllowed, "/files takes GET (download) and POST (upload)")
	}
}

func (s *Service) download(w http.ResponseWriter, r *http.Request, t target) {
	q := r.URL.Query()
	p := q.Get("path")
	if p == "" {
		writeHTTPError(w, http.StatusBadRequest, "the path query parameter is missing; give the file to read")
		return
	}
	abs := t.acct.abs(p)
	f, err := t.c.ReadFile(r.Context(), &proto.ReadFileRequest{Root: "/", Path: abs, MaxBytes: s.o.MaxFileBytes + 1})
	if err != nil {
		if errors.Is(err, errdefs.ErrNotFound) {
			writeHTTPError(w, http.StatusNotFound, fmt.Sprintf("path %s does not exist", abs))
			return
		}
		writeHTTPError(w, statusOf(err), err.Error())
		return
	}
	if f.Truncated || int64(len(f.Data)) > s.o.MaxFileBytes {
		writeHTTPError(w, http.StatusBadRequest, fmt.Sprintf("file %s is %d bytes, over the %d MiB sandboxd reads through /files; read it in parts with a command (e.g. split or dd)", abs, f.Size, s.o.MaxFileBytes>>20))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(abs)}))
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Vary", "Accept-Encoding")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodHead {
			return
		}
		zw := gzip.NewWriter(w)
		zw.Write(f.Data)
		zw.Close()
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(f.Data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(f.Data)
	}
}

// acceptsGzip reports whether the client asked for gzip.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(enc), "gzip") {
			continue
		}
		q := 1.0
		if v, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
			q, _ = strconv.ParseFloat(v, 64)
		}
		return q > 0
	}
	return false
}

func (s *Service) upload(w http.ResponseWriter, r *http.Request, t target) {
	q := r.URL.Query()
	attrs, meta, err := metadataOf(r.Header)
	if err != nil {
		writeHTTPError(w, http.StatusBadRequest, err.Error())
		return
	}
	// Room for multipart framing past the file itself.
	body := http.MaxBytesReader(w, r.Body, s.o.MaxFileBytes+1<<20)
	var files []proto.WriteFile
	ct, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch {
	case ct == "multipart/form-data":
		mr := multipart.NewReader(body, params["boundary"])
		for {
			part, err := mr.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				writeHTTPError(w, uploadStatus(err), "the multipart body cannot be read: "+err.Error())
				return
			}
			if part.FormName() != "file" {
				continue
			}
			// The file name is the path to write (FileName would keep only
			// its last element).
			_, cd, _ := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
			name := cd["filename"]
			if p := q.Get("path"); p != "" {
				name = p
			}
			if name == "" {
				writeHTTPError(w, http.StatusBadRequest, "a file part has no file name and the path query parameter is missing; give the path to write")
				return
			}
			data, err := readCapped(part, s.o.MaxFileBytes)
			if err != nil {
				writeHTTPError(w, uploadStatus(err), err.Error())
				return
			}
			files = append(files, proto.WriteFile{Path: t.acct.abs(name), Data: data, MkdirAll: true})
		}
	case ct == "application/octet-stream" || ct == "":
		p := q.Get("path")
		if p == "" {
			writeHTTPError(w, http.StatusBadRequest, "the path query parameter is missing; give the file to write")
			return
		}
		var rd io.Reader = body
		if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
			zr, err := gzip.NewReader(body)
			if err != nil {
				writeHTTPError(w, http.StatusBadRequest, "the body says gzip but is not: "+err.Error())
				return
			}
			defer zr.Close()
			rd = zr
		}
		data, err := readCapped(rd, s.o.MaxFileBytes)
		if err != nil {
			writeHTTPError(w, uploadStatus(err), err.Error())
			return
		}
		files = append(files, proto.WriteFile{Path: t.acct.abs(p), Data: data, MkdirAll: true})
	default:
		writeHTTPError(w, http.StatusBadRequest, "content type "+ct+" is not taken; upload as multipart/form-data (field file) or application/octet-stream")
		return
	}
	if len(files) == 0 {
		writeHTTPError(w, http.StatusBadRequest, "the upload holds no file part named file")
		return
	}
	for i := range files {
		files[i].Xattrs = attrs
	}
	if err := t.c.WriteFiles(r.Context(), &proto.WriteFilesRequest{Root: "/", Files: files, Owner: t.acct.agentUser()}); err != nil {
		writeHTTPError(w, statusOf(err), err.Error())
		return
	}
	out := make([]writtenEntry, len(files))
	for i, f := range files {
		out[i] = writtenEntry{Name: path.Base(f.Path), Type: "file", Path: f.Path, Metadata: meta}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	writeJSONBody(w, out)
}

// readCapped reads all of r, refusing more than max bytes.
func readCapped(r io.Reader, max int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, max+1))
	var mb *http.MaxBytesError
	if errors.As(err, &mb) {
		return nil, errTooLarge(max)
	}
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errTooLarge(max)
	}
	return b, nil
}

type errTooLarge int64

func (e errTooLarge) Error() string {
	return fmt.Sprintf("the file is over the %d MiB sandboxd writes through /files at once; write it in parts", int64(e)>>20)
}

func uploadStatus(err error) int {
	var tl errTooLarge
	if errors.As(err, &tl) {
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusBadRequest
}
