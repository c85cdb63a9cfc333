package files

// WithBeforeWriteForTest runs f between the read and the write of edit and
// apply_patch, so tests can change a file in that window.
func WithBeforeWriteForTest(f func()) Option { return func(c *config) { c.beforeWrite = f } }
