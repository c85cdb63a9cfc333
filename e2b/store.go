package e2b

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/errdefs"
	"github.com/sandboxd/sandboxd/sandbox"
)

// What E2B knows of a sandbox and sandboxd does not is kept on the
// sandbox in the engine, so every replica reads the same and a new owner
// after a failover, or a restarted sandboxd, answers as before: what is
// fixed at create (the template, the metadata, autoPause and whether its
// pause keeps memory) in the sandbox's label labelE2B, set at create and
// kept by a fork's copies; the timeout as the sandbox's expiry
// (sandbox.Expiry), which setTimeout and connect change and the owner's
// reaper takes. A sandboxd from before kept both in e2b/sandboxes.json;
// at start its timeouts are moved onto the sandboxes and the file is
// renamed, and it is then only read for the template and metadata of the
// sandboxes it names.

// labelE2B is the sandbox label of what E2B fixes at create (fixed, as
// JSON).
const labelE2B = sandbox.LabelExtPrefix + "e2b"

// fixed is labelE2B's value.
type fixed struct {
	Template  string            `json:"template"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	AutoPause bool              `json:"auto_pause,omitempty"`
	// KeepMemory false makes the timeout's pause a hibernation.
	KeepMemory bool `json:"keep_memory,omitempty"`
	// Public is network.allowPublicTraffic: whether a request to one of
	// the sandbox's ports needs its traffic token; nil takes
	// e2b.public_ports.
	Public *bool `json:"public,omitempty"`
	// MaskHost is network.maskRequestHost: the Host such a request
	// reaches the sandbox's server with (${PORT} is the port).
	MaskHost string `json:"mask_host,omitempty"`
}

// then is the expiry step of f's timeout.
func (f fixed) then() string {
	switch {
	case f.AutoPause && f.KeepMemory:
		return sandbox.ExpirePause
	case f.AutoPause:
		return sandbox.ExpireHibernate
	}
	return sandbox.ExpireDelete
}

// label is f as the label's value; too long a one (the metadata) is E2B's
// 400, said in its terms.
func (f fixed) label() (map[string]string, error) {
	b, _ := json.Marshal(f)
	if n := len(labelE2B) + len(b); n > sandbox.MaxLabelBytes {
		return nil, errdefs.InvalidArgument("the template name and metadata take %d bytes as sandboxd keeps them on the sandbox; at most %d fit: send less metadata", n, sandbox.MaxLabelBytes)
	}
	return map[string]string{labelE2B: string(b)}, nil
}

// record is what E2B knows of one sandbox.
type record struct {
	Tenant    string            `json:"tenant"`
	Template  string            `json:"template"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	EndAt     time.Time         `json:"end_at,omitzero"` // the timeout; zero while paused by it
	AutoPause bool              `json:"auto_pause,omitempty"`
	// KeepMemory false makes the timeout's pause a hibernation.
	KeepMemory bool      `json:"keep_memory,omitempty"`
	Created    time.Time `json:"created"`
	// Public and MaskHost are fixed's (never in the old file).
	Public   *bool  `json:"-"`
	MaskHost string `json:"-"`
}

// recordOf is what E2B knows of info: its label and expiry, or, for a
// sandbox made before they were kept on it, what the old file said.
func (h *Handler) recordOf(info sandbox.Info) record {
	rec := record{Tenant: info.Tenant, Created: info.CreatedAt}
	var f fixed
	if raw, ok := info.Labels[labelE2B]; ok && json.Unmarshal([]byte(raw), &f) == nil {
		rec.Template, rec.Metadata, rec.AutoPause, rec.KeepMemory = f.Template, f.Metadata, f.AutoPause, f.KeepMemory
		rec.Public, rec.MaskHost = f.Public, f.MaskHost
	} else if old, ok := h.legacy[info.ID]; ok && old.Tenant == info.Tenant {
		rec.Template, rec.Metadata, rec.AutoPause, rec.KeepMemory = old.Template, old.Metadata, old.AutoPause, old.KeepMemory
	}
	if e, _, err := sandbox.ExpiryOf(info); err == nil {
		rec.EndAt = e.At
	}
	return rec
}

func (r record) fixed() fixed {
	return fixed{Template: r.Template, Metadata: r.Metadata, AutoPause: r.AutoPause, KeepMemory: r.KeepMemory, Public: r.Public, MaskHost: r.MaskHost}
}

// Where the records of a sandboxd from before were kept, and where they
// are once their timeouts are on the sandboxes.
const (
	legacyFile   = "sandboxes.json"
	migratedFile = "sandboxes.migrated.json"
)

// readRecords reads a file of records; a missing one is none.
func readRecords(path string) (map[string]record, error) {
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("the E2B records %s cannot be read: %w", path, err)
	}
	var recs map[string]record
	if err := json.Unmarshal(b, &recs); err != nil {
		return nil, fmt.Errorf("the E2B records %s are not valid JSON (%v); move the file away to start without them", path, err)
	}
	return recs, nil
}

// loadLegacy reads the records of a sandboxd from before (the migrated
// file, or the file still to migrate): toMigrate is true for the latter.
func loadLegacy(dir string) (recs map[string]record, toMigrate bool, err error) {
	if recs, err = readRecords(filepath.Join(dir, legacyFile)); err != nil || recs != nil {
		return recs, recs != nil, err
	}
	recs, err = readRecords(filepath.Join(dir, migratedFile))
	return recs, false, err
}

// migrate puts the old file's timeouts on its sandboxes that have no
// expiry of their own yet (so a second run changes nothing), then renames
// the file; a sandbox the engine refuses now leaves the file for the next
// start.
func (h *Handler) migrate(dir string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	failed := 0
	for id, rec := range h.legacy {
		if rec.EndAt.IsZero() {
			continue
		}
		info, err := h.cfg.Sandboxes.Get(ctx, rec.Tenant, id)
		if errors.Is(err, errdefs.ErrNotFound) {
			continue
		}
		if err == nil {
			// One made since (labelled) or whose expiry was set since
			// is not the file's to speak for.
			if _, set, _ := sandbox.ExpiryOf(info); set || info.Labels[labelE2B] != "" {
				continue
			}
			err = h.cfg.Sandboxes.SetExpiry(ctx, rec.Tenant, id, sandbox.Expiry{At: rec.EndAt, Then: rec.fixed().then()})
		}
		if err != nil {
			failed++
			h.log.Warn("e2b: an old sandbox's timeout cannot be moved onto it; tried again at the next start", "sandbox", id, "err", err)
		}
	}
	if failed > 0 {
		return
	}
	if err := os.Rename(filepath.Join(dir, legacyFile), filepath.Join(dir, migratedFile)); err != nil {
		h.log.Warn("e2b: the old records cannot be renamed; they are migrated again at the next start", "err", err)
		return
	}
	h.log.Info("e2b: the timeouts of the old records are kept on the sandboxes now", "records", len(h.legacy), "file", filepath.Join(dir, migratedFile))
}

// writeFile replaces path with data whole (a crash leaves the old or the new).
func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// The envd access token names a tenant and a sandbox, signed with a key
// kept in the data dir (e2b/access.key): requests to the sandbox URL carry
// only it, and sandboxd checks it on each.

const tokenPrefix = "e2b1."

type signer struct{ key []byte }

func loadSigner(dir string) (signer, error) {
	path := filepath.Join(dir, "access.key")
	b, err := os.ReadFile(path)
	if err == nil && len(b) >= 32 {
		return newSigner(b), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return signer{}, fmt.Errorf("the E2B access key %s cannot be read: %w", path, err)
	}
	b = make([]byte, 32)
	rand.Read(b)
	if err := writeFile(path, b); err != nil {
		return signer{}, fmt.Errorf("the E2B access key %s cannot be written: %w", path, err)
	}
	return newSigner(b), nil
}

// newSigner derives the token key from secret, so the secret signs
// nothing else with the same bytes.
func newSigner(secret []byte) signer {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("sandboxd e2b access tokens v1"))
	return signer{key: m.Sum(nil)}
}

func (s signer) mac(payload string) string {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// token is the access token of the tenant's sandbox id.
func (s signer) token(tenant, id string) string {
	payload := tokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(tenant+"\x00"+id))
	return payload + "." + s.mac(payload)
}

// verify returns the tenant and sandbox tok names, when sandboxd signed it.
func (s signer) verify(tok string) (tenant, id string, ok bool) {
	i := strings.LastIndexByte(tok, '.')
	if len(tok) > 1024 || i < 0 || !strings.HasPrefix(tok, tokenPrefix) {
		return "", "", false
	}
	payload, sig := tok[:i], tok[i+1:]
	if !hmac.Equal([]byte(sig), []byte(s.mac(payload))) {
		return "", "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(payload, tokenPrefix))
	if err != nil {
		return "", "", false
	}
	tenant, id, ok = strings.Cut(string(b), "\x00")
	return tenant, id, ok
}
