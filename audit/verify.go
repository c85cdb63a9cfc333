package audit

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// What a broken chain was found to be.
const (
	BreakChanged   = "changed"   // a record's bytes no longer hash to the next record's prev
	BreakRemoved   = "removed"   // a seq is missing
	BreakReordered = "reordered" // a seq comes before a lower one
)

// maxLine bounds one line of an audit file; records are far smaller.
const maxLine = 1 << 20

// Report is what Verify found.
type Report struct {
	Files    int
	Records  int
	FirstSeq uint64 // of the first kept record (1 unless old files were removed)
	LastSeq  uint64
	// Break is the first place the chain is not whole; nil when it is.
	Break *Break
}

// Break names the first record found changed, removed or reordered.
type Break struct {
	Kind string
	File string // base name
	Line int    // from 1
	Seq  uint64
	What string // one sentence
}

// Sentence says in one sentence what Verify found.
func (r Report) Sentence() string {
	if r.Break != nil {
		return r.Break.What
	}
	if r.Records == 0 {
		return "the audit chain is empty: no record files (audit-*.jsonl) were found"
	}
	files := "1 file"
	if r.Files != 1 {
		files = fmt.Sprintf("%d files", r.Files)
	}
	s := fmt.Sprintf("the audit chain of %d records (seq %d to %d, in %s) is whole", r.Records, r.FirstSeq, r.LastSeq, files)
	if r.FirstSeq > 1 {
		s += fmt.Sprintf("; it begins at seq %d because older files were removed (audit.retention), and the first kept record's prev is taken as it is", r.FirstSeq)
	}
	return s
}

// Verify reads every file of dir in order and checks each record's seq
// and prev. The first kept record's prev is accepted as it is (retention
// removes whole files from the front). A record edited so that it is no
// longer one JSON object, or a changed record followed by nothing (the
// newest), is only found in the first case: the chain proves what comes
// before its last link.
func Verify(dir string) (Report, error) {
	files, err := listFiles(dir)
	if err != nil {
		return Report{}, fmt.Errorf("the audit directory %s cannot be read: %w", dir, err)
	}
	rep := Report{Files: len(files)}
	// A first pass collects every seq, so that a gap can be told apart
	// from a record that was moved further on (8 bytes per record).
	var seqs []uint64
	for _, f := range files {
		err := eachLine(filepath.Join(dir, f.name), func(n int, line []byte) bool {
			if s, ok := seqOf(line); ok {
				seqs = append(seqs, s)
			}
			return true
		})
		if err != nil {
			return rep, err
		}
	}
	slices.Sort(seqs)
	seen := func(s uint64) bool { _, ok := slices.BinarySearch(seqs, s); return ok }

	type at struct {
		file string
		line int
		seq  uint64
		hash string
	}
	var prev *at
	for _, f := range files {
		err := eachLine(filepath.Join(dir, f.name), func(n int, line []byte) bool {
			var h struct {
				Seq  uint64 `json:"seq"`
				Prev string `json:"prev"`
			}
			if err := json.Unmarshal(line, &h); err != nil || h.Seq == 0 {
				rep.Break = &Break{Kind: BreakChanged, File: f.name, Line: n,
					What: fmt.Sprintf("the record at %s line %d was changed: it is no longer a record (not a JSON object with a seq)", f.name, n)}
				return false
			}
			cur := &at{file: f.name, line: n, seq: h.Seq, hash: Digest(line)}
			if prev == nil {
				rep.FirstSeq = h.Seq
			} else if b := check(prev.file, prev.line, prev.seq, prev.hash, cur.file, cur.line, h.Seq, h.Prev, seen); b != nil {
				rep.Break = b
				return false
			}
			rep.Records++
			rep.LastSeq = h.Seq
			prev = cur
			return true
		})
		if err != nil {
			return rep, err
		}
		if rep.Break != nil {
			return rep, nil
		}
	}
	return rep, nil
}

// check judges the link from the record before (pf:pl, pseq, phash) to
// the record at cf:cl with seq and prev.
func check(pf string, pl int, pseq uint64, phash, cf string, cl int, seq uint64, prev string, seen func(uint64) bool) *Break {
	links := prev == phash
	switch {
	case links && seq == pseq+1:
		return nil
	case links:
		// It links to the record before, so nothing is missing between
		// them: its own seq was edited.
		return &Break{Kind: BreakChanged, File: cf, Line: cl, Seq: seq,
			What: fmt.Sprintf("the record at %s line %d was changed: its seq %d should be %d (it links to seq %d before it)", cf, cl, seq, pseq+1, pseq)}
	case seq == pseq+1:
		return &Break{Kind: BreakChanged, File: pf, Line: pl, Seq: pseq,
			What: fmt.Sprintf("the record seq %d at %s line %d was changed: its hash no longer matches the prev of the next record (seq %d at %s line %d)", pseq, pf, pl, seq, cf, cl)}
	case seq <= pseq:
		return &Break{Kind: BreakReordered, File: cf, Line: cl, Seq: seq,
			What: fmt.Sprintf("the record seq %d at %s line %d was reordered: it comes after seq %d (%s line %d)", seq, cf, cl, pseq, pf, pl)}
	case seen(pseq + 1):
		return &Break{Kind: BreakReordered, File: cf, Line: cl, Seq: seq,
			What: fmt.Sprintf("the record seq %d at %s line %d was reordered: it comes before seq %d, which is further on", seq, cf, cl, pseq+1)}
	}
	missing := fmt.Sprintf("seq %d", pseq+1)
	if seq-pseq > 2 {
		missing = fmt.Sprintf("seq %d to %d", pseq+1, seq-1)
	}
	return &Break{Kind: BreakRemoved, File: cf, Line: cl, Seq: pseq + 1,
		What: fmt.Sprintf("the record %s was removed: it is missing between seq %d (%s line %d) and seq %d (%s line %d)", missing, pseq, pf, pl, seq, cf, cl)}
}

// seqOf reads a line's seq, if it has one.
func seqOf(line []byte) (uint64, bool) {
	var h struct {
		Seq uint64 `json:"seq"`
	}
	if json.Unmarshal(line, &h) != nil || h.Seq == 0 {
		return 0, false
	}
	return h.Seq, true
}

// eachLine calls f with every whole line of the file (without its
// newline) and its number, until f returns false. A last line without a
// newline (a write under way) is left out.
func eachLine(path string, f func(n int, line []byte) bool) error {
	fh, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("the audit file %s cannot be read: %w", path, err)
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: gather it whole, up to maxLine.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) && len(long) <= maxLine {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			if len(long) > maxLine {
				return fmt.Errorf("the audit file %s has a line %d longer than %d bytes; it is not an audit record file", path, n, maxLine)
			}
			line = long
		}
		if errors.Is(err, io.EOF) {
			return nil // with or without a torn last line
		}
		if err != nil {
			return fmt.Errorf("the audit file %s cannot be read: %w", path, err)
		}
		if !f(n, bytes.TrimSuffix(line, []byte("\n"))) {
			return nil
		}
	}
}
