package changeset

import "github.com/sandboxd/sandboxd/agent/proto"

// File is one file of a Set: as it was read, and as changed so far.
type File struct {
	path    string
	existed bool   // when read
	hash    string // of the content as read; "" when absent
	known   bool   // orig holds the content as read (false after Expect)
	orig    string
	text    string // content now; "" when absent
	exists  bool   // now
	mode    uint32 // for the write; 0 keeps the file's mode (0644 when new)
	touched bool   // a Put, Delete or SetMode since the read or Revert
}

// Path is the file's path as loaded.
func (f *File) Path() string { return f.path }

// Existed reports whether the file existed when it was read.
func (f *File) Existed() bool { return f.existed }

// Exists reports whether the file exists after the changes so far.
func (f *File) Exists() bool { return f.exists }

// Text is the file's content after the changes so far ("" when absent).
func (f *File) Text() string { return f.text }

// Put gives the file new content; it exists afterwards, whatever it was
// before. Commit writes it even when the content is what was read.
func (f *File) Put(text string) {
	f.text, f.exists, f.touched = text, true, true
}

// Delete removes the file; Put may bring it back.
func (f *File) Delete() {
	f.text, f.exists, f.touched = "", false, true
}

// SetMode sets the permission bits the write gives the file.
func (f *File) SetMode(mode uint32) {
	f.mode, f.touched = mode, true
}

// Unchanged reports whether the file ends as it was read: absent both
// times, or present with the same content and no new mode. A file recorded
// with Expect is unchanged only while nothing touched it.
func (f *File) Unchanged() bool {
	if !f.touched || (!f.existed && !f.exists) {
		return true
	}
	if f.existed != f.exists || f.mode != 0 || !f.known {
		return false
	}
	return f.text == f.orig
}

// Revert drops the file's changes, so Commit leaves it alone.
func (f *File) Revert() {
	f.text, f.exists, f.mode, f.touched = f.orig, f.existed, 0, false
}

// write is the file's entry in the set's request: it expects the file
// absent, or holding the content whose hash was recorded.
func (f *File) write() proto.WriteFile {
	w := proto.WriteFile{Path: f.path}
	if f.existed {
		w.ExpectSHA256 = f.hash
	} else {
		w.ExpectAbsent, w.MkdirAll = true, true
	}
	if f.exists {
		w.Data, w.Mode = []byte(f.text), f.mode
	} else {
		w.Delete = true
	}
	return w
}
