package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Limits of a Query.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Query selects records, oldest first (by seq).
type Query struct {
	Tenant string // only this tenant's records, unless All
	All    bool   // every tenant's (the admin token)
	Since  time.Time
	Until  time.Time // exclusive; zero: no end
	Run    string
	Sand   string // sandbox id
	After  uint64 // only records with a greater seq (the cursor)
	Limit  int    // 1 to MaxLimit; 0: DefaultLimit
}

// Page is one answer: the records, and the seq to continue after when
// there are more (0: none).
type Page struct {
	Records []Record
	Next    uint64
}

// Query reads the records q selects from this Log's files, after every
// record queued before it has been written.
func (l *Log) Query(q Query) (Page, error) {
	if err := l.barrier(2 * time.Second); err != nil {
		return Page{}, fmt.Errorf("the audit record cannot be read now: %w; try again", err)
	}
	return Read(l.opt.Dir, q)
}

// Read answers q from the files in dir.
func Read(dir string, q Query) (Page, error) {
	if q.Limit <= 0 {
		q.Limit = DefaultLimit
	}
	q.Limit = min(q.Limit, MaxLimit)
	files, err := listFiles(dir)
	if err != nil {
		return Page{}, err
	}
	out := Page{Records: []Record{}}
	for i, f := range files {
		// A file all of whose records come at or before the cursor is
		// skipped by the next file's first seq; one last written before
		// since holds nothing later (a record's time is its action's
		// start, before it was written).
		if i+1 < len(files) && files[i+1].first <= q.After+1 {
			continue
		}
		p := filepath.Join(dir, f.name)
		if !q.Since.IsZero() {
			if st, err := os.Stat(p); err == nil && st.ModTime().Before(q.Since) {
				continue
			}
		}
		full := false
		err := eachLine(p, func(_ int, line []byte) bool {
			var r Record
			if err := json.Unmarshal(line, &r); err != nil {
				return true // Verify reports it; a reader skips it
			}
			if r.Seq <= q.After || !q.match(r) {
				return true
			}
			if len(out.Records) == q.Limit {
				out.Next = out.Records[len(out.Records)-1].Seq
				full = true
				return false
			}
			out.Records = append(out.Records, r)
			return true
		})
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by the retention since it was listed
		}
		if err != nil {
			return Page{}, err
		}
		if full {
			break
		}
	}
	return out, nil
}

func (q Query) match(r Record) bool {
	switch {
	case !q.All && r.Tenant != q.Tenant:
		return false
	case !q.Since.IsZero() && r.Time.Before(q.Since):
		return false
	case !q.Until.IsZero() && !r.Time.Before(q.Until):
		return false
	case q.Run != "" && r.Run != q.Run:
		return false
	case q.Sand != "" && r.Sandbox != q.Sand:
		return false
	}
	return true
}
