package envd

import (
	"context"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// File metadata (envd 0.6.2): string pairs an upload sets with
// X-Metadata-{key} headers, kept on each file as the extended attribute
// user.e2b.{key} (so a rename or copy with attributes keeps them), and
// answered in every entry (metadata). Keys are kept in lower case: HTTP
// header names have no case.

// metadataHeader starts the headers that carry an upload's metadata.
const metadataHeader = "X-Metadata-"

// metadataAttr starts the extended attributes that keep it.
const metadataAttr = "user.e2b."

// Caps on one upload's metadata, refused with a sentence past them.
const (
	maxMetadataKeys  = 64
	maxMetadataKey   = 200
	maxMetadataValue = 4096
)

// metadataOf reads an upload's metadata headers: their xattrs, and the
// metadata answered for each file; nil when there is none.
func metadataOf(h http.Header) (attrs, meta map[string]string, err error) {
	for k, vs := range h {
		key, ok := cutPrefixFold(k, metadataHeader)
		if !ok {
			continue
		}
		key = strings.ToLower(key)
		switch {
		case key == "":
			return nil, nil, rpcErr(codeInvalidArgument, "a metadata header has no key; name it X-Metadata-{key}")
		case len(key) > maxMetadataKey:
			return nil, nil, rpcErr(codeInvalidArgument, "metadata key %.40q… is over %d bytes; use a shorter key", key, maxMetadataKey)
		case len(vs) != 1:
			return nil, nil, rpcErr(codeInvalidArgument, "metadata key %q is given %d times; give each key once", key, len(vs))
		case len(vs[0]) > maxMetadataValue:
			return nil, nil, rpcErr(codeInvalidArgument, "the value of metadata key %q is over %d bytes; keep metadata short", key, maxMetadataValue)
		}
		if meta == nil {
			attrs, meta = map[string]string{}, map[string]string{}
		}
		if len(meta) == maxMetadataKeys {
			return nil, nil, rpcErr(codeInvalidArgument, "the upload has over %d metadata keys; keep at most %d per file", maxMetadataKeys, maxMetadataKeys)
		}
		meta[key] = vs[0]
		attrs[metadataAttr+key] = vs[0]
	}
	return attrs, meta, nil
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || !strings.EqualFold(s[:len(prefix)], prefix) {
		return s, false
	}
	return s[len(prefix):], true
}

// withMetadata fills the metadata of entries from their extended
// attributes. It never fails a listing: a sandbox whose agent cannot read
// them (one from before the agent could) answers the entries without.
func withMetadata(ctx context.Context, t target, es []entryInfo) {
	if len(es) == 0 {
		return
	}
	paths := make([]string, len(es))
	for i, e := range es {
		paths[i] = e.Path
	}
	res, err := t.c.Xattrs(ctx, &proto.XattrsRequest{Paths: paths, Prefix: metadataAttr})
	if err != nil {
		return
	}
	for i := range es {
		for name, v := range res.Attrs[es[i].Path] {
			if es[i].Metadata == nil {
				es[i].Metadata = map[string]string{}
			}
			es[i].Metadata[strings.TrimPrefix(name, metadataAttr)] = v
		}
	}
}

// entryTimeout bounds the look at one changed path for a watch event's
// entry.
const entryTimeout = 10 * time.Second

// withEntries adds to each event, best effort, the entry of its path as
// it is now (envd 0.6.3's includeEntry); an event whose path is gone has
// none.
func withEntries(ctx context.Context, t target, base string, evs []fsEvent) {
	for i := range evs {
		if evs[i].Type == "EVENT_TYPE_REMOVE" {
			continue
		}
		ctx, cancel := context.WithTimeout(ctx, entryTimeout)
		if e, err := stat(ctx, t, path.Join(base, evs[i].Name)); err == nil {
			evs[i].Entry = e
		}
		cancel()
	}
}
