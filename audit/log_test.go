package audit

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func openT(t *testing.T, opt Options) *Log {
	t.Helper()
	if opt.Dir == "" {
		opt.Dir = t.TempDir()
	}
	if opt.Replica == "" {
		opt.Replica = "r1"
	}
	l, err := Open(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func rec(tenant, action string) Record {
	return Record{Kind: KindAPI, Tenant: tenant, Action: action, Outcome: "ok", Time: time.Now()}
}

// lines reads every line of every file of dir, in chain order.
func lines(t *testing.T, dir string) (names []string, all [][]byte) {
	t.Helper()
	files, err := listFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, f.name)
		all = append(all, bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))...)
	}
	return names, all
}

func TestChainLinksEveryRecordToTheOneBefore(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	for i := range 10 {
		if err := l.Append(rec("a", fmt.Sprint("GET /x", i)), i%3 == 0); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	_, all := lines(t, dir)
	if len(all) != 10 {
		t.Fatalf("%d lines, want 10", len(all))
	}
	prev := ""
	for i, line := range all {
		r, ok := parse(line)
		if !ok || r.Seq != uint64(i+1) || r.Prev != prev || r.Replica != "r1" {
			t.Fatalf("line %d: %s (want seq %d prev %q)", i+1, line, i+1, prev)
		}
		prev = Digest(line)
	}
	rep, err := Verify(dir)
	if err != nil || rep.Break != nil || rep.Records != 10 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
	if !strings.Contains(rep.Sentence(), "chain of 10 records") || !strings.Contains(rep.Sentence(), "is whole") {
		t.Fatalf("sentence: %s", rep.Sentence())
	}
}

func TestRestartContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	l.Append(rec("a", "one"), true)
	l.Close()
	// A crash mid-write leaves a torn line; the restart cuts it.
	files, _ := listFiles(dir)
	f, _ := os.OpenFile(filepath.Join(dir, files[0].name), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":2,"prev":"ab`)
	f.Close()
	l2 := openT(t, Options{Dir: dir})
	l2.Append(rec("a", "two"), true)
	l2.Close()
	rep, err := Verify(dir)
	if err != nil || rep.Break != nil || rep.Records != 2 || rep.LastSeq != 2 {
		t.Fatalf("after a restart the chain should go on whole: %+v %v", rep, err)
	}
}

func TestRotationAndRetentionKeepWhatIsKeptVerifiable(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir, MaxFileBytes: 4096, Retention: 3})
	for range 200 {
		if err := l.Append(rec("a", "POST /v1/runs/{id}/tools/{name}"), false); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	names, all := lines(t, dir)
	if len(names) != 3 {
		t.Fatalf("%d files kept, want the retention's 3: %v", len(names), names)
	}
	for _, n := range names {
		st, _ := os.Stat(filepath.Join(dir, n))
		if st.Size() > 4096 {
			t.Fatalf("%s is %d bytes, past max_file_bytes", n, st.Size())
		}
	}
	first, _ := parse(all[0])
	if names[0] != FileName(first.Seq) || first.Seq == 1 {
		t.Fatalf("the oldest kept file %s begins with seq %d", names[0], first.Seq)
	}
	last, _ := parse(all[len(all)-1])
	if last.Seq != 200 {
		t.Fatalf("last seq %d, want 200", last.Seq)
	}
	rep, err := Verify(dir)
	if err != nil || rep.Break != nil {
		t.Fatalf("verify after retention: %+v %v", rep, err)
	}
	if !strings.Contains(rep.Sentence(), fmt.Sprintf("begins at seq %d", first.Seq)) {
		t.Fatalf("the sentence should say where the kept chain begins: %s", rep.Sentence())
	}
}

// Concurrent durable appends share fsyncs (group commit) and each returns
// only once its record is in the file.
func TestDurableAppendsAreOnDiskWhenTheyReturn(t *testing.T) {
	dir := t.TempDir()
	m := NewMetrics()
	l := openT(t, Options{Dir: dir, Metrics: m})
	var wg sync.WaitGroup
	const n = 64
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rec("a", fmt.Sprintf("write-%d", i))
			if err := l.Append(r, true); err != nil {
				errs <- err
				return
			}
			b, err := os.ReadFile(filepath.Join(dir, FileName(1)))
			if err != nil || !bytes.Contains(b, []byte(fmt.Sprintf(`"write-%d"`, i))) {
				errs <- fmt.Errorf("write-%d returned before its record was in the file (%v)", i, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	fs := testutil.ToFloat64(m.fsyncs)
	if fs < 1 || fs > n {
		t.Fatalf("%v fsyncs for %d durable records", fs, n)
	}
	if got := testutil.ToFloat64(m.records.WithLabelValues(KindAPI)); got != n {
		t.Fatalf("records written %v, want %d", got, n)
	}
	t.Logf("%d durable records, %v fsyncs", n, fs)
}

func TestAppendAfterCloseIsCountedDropped(t *testing.T) {
	m := NewMetrics()
	l := openT(t, Options{Metrics: m})
	l.Close()
	if err := l.Append(rec("a", "x"), false); err != ErrClosed {
		t.Fatalf("append after close: %v", err)
	}
	if testutil.ToFloat64(m.drops.WithLabelValues(dropClosed)) != 1 {
		t.Fatal("the drop was not counted")
	}
}

func TestQueryPagesATenantsOwnRecords(t *testing.T) {
	l := openT(t, Options{MaxFileBytes: 4096})
	for i := range 30 {
		tenant := "a"
		if i%3 == 0 {
			tenant = "b"
		}
		r := rec(tenant, fmt.Sprint(i))
		r.Run = fmt.Sprint("run", i%2)
		l.Append(r, false)
	}
	var got []Record
	q := Query{Tenant: "a", Limit: 7}
	for page := 0; ; page++ {
		p, err := l.Query(q)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.Records...)
		if p.Next == 0 {
			break
		}
		if len(p.Records) != 7 || page > 5 {
			t.Fatalf("page %d has %d records", page, len(p.Records))
		}
		q.After = p.Next
	}
	if len(got) != 20 {
		t.Fatalf("%d records of tenant a, want 20", len(got))
	}
	for i, r := range got {
		if r.Tenant != "a" || i > 0 && r.Seq <= got[i-1].Seq {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	p, _ := l.Query(Query{Tenant: "a", Run: "run1", Limit: 1000})
	for _, r := range p.Records {
		if r.Run != "run1" {
			t.Fatalf("run filter let through %+v", r)
		}
	}
	if len(p.Records) != 10 {
		t.Fatalf("%d records of run1, want 10", len(p.Records))
	}
	all, _ := l.Query(Query{All: true, Limit: 1000})
	if len(all.Records) != 30 {
		t.Fatalf("the admin sees %d, want 30", len(all.Records))
	}
}

func parse(line []byte) (Record, bool) {
	var r Record
	return r, jsonUnmarshal(line, &r) == nil
}

// A writer that cannot keep up never holds a call for longer than its
// wait: a buffered record is dropped and counted after EnqueueWait, a
// durable one gets an error after DurableWait.
func TestAFullQueueDropsAfterItsWaitInsteadOfBlocking(t *testing.T) {
	m := NewMetrics()
	// No writer goroutine: the queue of one fills and stays full.
	l := &Log{opt: Options{EnqueueWait: 20 * time.Millisecond, DurableWait: 30 * time.Millisecond},
		m: m, in: make(chan item, 1), stop: make(chan struct{}), exited: make(chan struct{})}
	if err := l.Append(rec("a", "first"), false); err != nil {
		t.Fatalf("the first record should fit: %v", err)
	}
	if err := l.Append(rec("a", "second"), false); err == nil || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("a buffered record into a full queue: %v", err)
	}
	if err := l.Append(rec("a", "third"), true); err == nil {
		t.Fatal("a durable record into a full queue returned no error")
	}
	if got := testutil.ToFloat64(m.drops.WithLabelValues(dropQueueFull)); got != 2 {
		t.Fatalf("queue_full drops %v, want 2", got)
	}
}

// A restart reads only the end of a big newest file, and still goes on
// with its chain after cutting a torn line.
func TestRestartReadsTheTailOfABigFile(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	r := rec("a", strings.Repeat("x", 400))
	for range 6000 { // about 3.4 MB, past the tail read
		if err := l.Append(r, false); err != nil {
			t.Fatal(err)
		}
	}
	l.Close()
	f, _ := os.OpenFile(filepath.Join(dir, FileName(1)), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString(`{"seq":6001,"pr`)
	f.Close()
	l2 := openT(t, Options{Dir: dir})
	l2.Append(rec("a", "after"), true)
	l2.Close()
	rep, err := Verify(dir)
	if err != nil || rep.Break != nil || rep.LastSeq != 6001 || rep.Records != 6001 {
		t.Fatalf("verify: %+v %v", rep, err)
	}
}

// A newest file whose last line is not a record stops the start with a
// sentence that says what to do, rather than beginning a second chain.
func TestADamagedLastRecordStopsTheStart(t *testing.T) {
	dir := t.TempDir()
	l := openT(t, Options{Dir: dir})
	l.Append(rec("a", "one"), true)
	l.Close()
	f, _ := os.OpenFile(filepath.Join(dir, FileName(1)), os.O_WRONLY|os.O_APPEND, 0)
	f.WriteString("not a record\n")
	f.Close()
	_, err := Open(Options{Dir: dir})
	if err == nil || !strings.Contains(err.Error(), "audit verify") || !strings.Contains(err.Error(), "move the damaged file") {
		t.Fatalf("open over a damaged last record: %v", err)
	}
}
