package engine

import (
	"bytes"
	"context"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
)

// Source is where a search finds files: the sandbox through its agent, or a
// local directory (tests, benchmarks, the differential test).
type Source interface {
	// Read returns the contents of the named files, in order; a nil entry
	// is a file that could not be read (gone, too large) and is skipped.
	Read(ctx context.Context, paths []string) ([][]byte, error)
}

// Engine searches files with compiled patterns. It is safe for concurrent
// use; it owns no goroutines between calls (each Search starts and joins
// its own workers).
type Engine struct {
	reg       *Registry
	workers   int
	batchN    int   // files per Read
	batchB    int64 // bytes per Read, judged from listed sizes
	trees     *lru[FileKey, *Tree]
	results   *lru[resultKey, []Match]
	parses    atomic.Int64 // files parsed, for tests and stats
	filesRead atomic.Int64 // files whose contents were read
}

// Option configures an Engine.
type Option func(*Engine)

// WithWorkers bounds the parallel parses (default GOMAXPROCS).
func WithWorkers(n int) Option { return func(e *Engine) { e.workers = n } }

// WithTreeCache bounds the memory of cached syntax trees (default 128 MiB).
func WithTreeCache(bytes int64) Option {
	return func(e *Engine) { e.trees = newLRU[FileKey, *Tree](bytes) }
}

// WithResultCache bounds the memory of cached per-file results (default 32 MiB).
func WithResultCache(bytes int64) Option {
	return func(e *Engine) { e.results = newLRU[resultKey, []Match](bytes) }
}

// WithReadBatch sets how many files, and about how many bytes, one Read asks
// for (default 512 files, 8 MiB).
func WithReadBatch(files int, bytes int64) Option {
	return func(e *Engine) { e.batchN, e.batchB = files, bytes }
}

// New returns an engine over the shipped grammars.
func New(opts ...Option) *Engine {
	e := &Engine{
		reg:     NewRegistry(),
		workers: runtime.GOMAXPROCS(0),
		batchN:  512,
		batchB:  8 << 20,
		trees:   newLRU[FileKey, *Tree](128 << 20),
		results: newLRU[resultKey, []Match](32 << 20),
	}
	for _, o := range opts {
		o(e)
	}
	if e.workers < 1 {
		e.workers = 1
	}
	return e
}

// Registry returns the shipped grammars.
func (e *Engine) Registry() *Registry { return e.reg }

// Stats counts the files parsed and read since the engine was made.
func (e *Engine) Stats() (parsed, read int64) { return e.parses.Load(), e.filesRead.Load() }

// Compile compiles a pattern for language l.
func (e *Engine) Compile(ctx context.Context, l *Language, pattern string) (*Pattern, error) {
	return Compile(ctx, l, pattern)
}

// FileResult is the matches in one file, and its contents when the search
// had to read them (nil when they came from the cache).
type FileResult struct {
	File    FileKey
	Matches []Match
}

// Search finds p in files (which must be of p's language) and returns the
// files with at least one match, in the order given. Files already searched
// for p in the same version come from the cache without a read; files whose
// tree is cached are matched without a read or parse; the rest are read in
// batches, filtered on p's literal tokens, and parsed in parallel.
func (e *Engine) Search(ctx context.Context, p *Pattern, src Source, files []FileKey) ([]FileResult, error) {
	found := make([][]Match, len(files))
	var todo []int
	for i, f := range files {
		if ms, ok := e.results.get(resultKey{f, p.key()}); ok {
			found[i] = ms
			continue
		}
		if t, ok := e.trees.get(f); ok {
			found[i] = e.keep(f, p, p.FindAll(t))
			continue
		}
		todo = append(todo, i)
	}
	if len(todo) > 0 {
		if err := e.scan(ctx, p, src, files, todo, found); err != nil {
			return nil, err
		}
	}
	var out []FileResult
	for i, ms := range found {
		if len(ms) > 0 {
			out = append(out, FileResult{File: files[i], Matches: ms})
		}
	}
	return out, nil
}

func (e *Engine) keep(f FileKey, p *Pattern, ms []Match) []Match {
	e.results.put(resultKey{f, p.key()}, ms, matchesCost(ms)+int64(len(f.Path)))
	return ms
}

type job struct {
	idx int
	src []byte
}

// scan reads the files at todo in batches and hands them to parse workers.
// The reader runs one batch ahead of the workers; both stop at the first
// error or when ctx ends.
func (e *Engine) scan(ctx context.Context, p *Pattern, src Source, files []FileKey, todo []int, found [][]Match) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	jobs := make(chan job, e.batchN)
	var (
		errOnce  sync.Once
		firstErr error
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err; cancel() })
	}
	var wg sync.WaitGroup
	for w := 0; w < e.workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pr, err := newParser(p.Lang)
			if err != nil {
				fail(err)
				return
			}
			defer pr.Close()
			for j := range jobs {
				if ctx.Err() != nil {
					continue
				}
				f := files[j.idx]
				if !p.mayMatch(j.src) {
					found[j.idx] = e.keep(f, p, nil)
					continue
				}
				t, err := pr.parse(ctx, j.src)
				if err != nil {
					fail(err)
					continue
				}
				e.parses.Add(1)
				e.trees.put(f, t, t.bytes())
				found[j.idx] = e.keep(f, p, p.FindAll(t))
			}
		}()
	}
	readErr := e.read(ctx, src, files, todo, jobs)
	close(jobs)
	wg.Wait()
	if readErr != nil && firstErr == nil {
		firstErr = readErr
	}
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

func (e *Engine) read(ctx context.Context, src Source, files []FileKey, todo []int, jobs chan<- job) error {
	for len(todo) > 0 {
		n, size := 0, int64(0)
		for n < len(todo) && n < e.batchN && (n == 0 || size+files[todo[n]].Size <= e.batchB) {
			size += files[todo[n]].Size
			n++
		}
		batch := todo[:n]
		todo = todo[n:]
		paths := make([]string, len(batch))
		for i, idx := range batch {
			paths[i] = files[idx].Path
		}
		data, err := src.Read(ctx, paths)
		if err != nil {
			return err
		}
		for i, idx := range batch {
			if i >= len(data) || data[i] == nil || binary(data[i]) {
				continue
			}
			e.filesRead.Add(1)
			select {
			case jobs <- job{idx: idx, src: data[i]}:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// binary reports a file that is not text: a NUL byte in its first 8 KiB.
func binary(b []byte) bool {
	if len(b) > 8192 {
		b = b[:8192]
	}
	return bytes.IndexByte(b, 0) >= 0
}

// SortFiles orders files by path, the order results are shown in.
func SortFiles(files []FileKey) {
	sort.Slice(files, func(a, b int) bool { return files[a].Path < files[b].Path })
}

// Parse parses src in language l (one file, outside any search).
func (e *Engine) Parse(ctx context.Context, l *Language, src []byte) (*Tree, error) {
	p, err := newParser(l)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	e.parses.Add(1)
	return p.parse(ctx, src)
}
