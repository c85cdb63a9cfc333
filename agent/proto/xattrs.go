package proto

// OpXattrs reads extended attributes of many files at once, for a daemon
// that says HelloResponse.Xattrs: XattrsRequest -> XattrsResponse
// (Response.Xattrs). It is meant for every entry of a directory listing,
// so one entry never fails it: a path that does not exist, one without an
// attribute of the prefix, one on a file system that keeps no extended
// attributes, or one the agent cannot read is left out of the answer.
const OpXattrs Op = "xattrs"

// Limits of extended attributes.
const (
	// MaxXattrPaths caps XattrsRequest.Paths.
	MaxXattrPaths = 100000
	// MaxXattrsAnswer caps an XattrsResponse, as JSON: a request whose
	// attributes come to more is refused (CodeResourceExhausted), to be
	// asked again in parts.
	MaxXattrsAnswer = 16 << 20
	// MaxXattrValue caps one value (the kernel's own limit too).
	MaxXattrValue = 64 << 10
	// MaxXattrsPerFile caps WriteFile.Xattrs.
	MaxXattrsPerFile = 64
	// XattrUserPrefix begins every name the agent writes or reads: the
	// attributes of the "user" namespace, which belong to the file's
	// owner (not the kernel's security, trusted or system ones).
	XattrUserPrefix = "user."
)

// XattrsRequest names the files, by absolute path inside the sandbox,
// and the prefix of the attribute names to read (such as "user.e2b."; it
// must begin with XattrUserPrefix). A symlink's own attributes are read,
// not its target's. Paths are not confined to a workspace.
type XattrsRequest struct {
	Paths  []string `json:"paths"`
	Prefix string   `json:"prefix"`
}

// XattrsResponse maps each path that has attributes of the prefix to
// them, by full name. A value that is not valid UTF-8 (which JSON cannot
// carry as it is) is left out.
type XattrsResponse struct {
	Attrs map[string]map[string]string `json:"attrs,omitempty"`
}
