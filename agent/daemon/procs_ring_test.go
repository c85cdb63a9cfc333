package daemon

import (
	"bytes"
	"os"
	"testing"
)

// TestRingOffsetsStreamsAndDrops writes more than the ring holds in
// alternating streams and checks what a reader from each position gets.
func TestRingOffsetsStreamsAndDrops(t *testing.T) {
	r := newOutRing(128 << 10)
	var all bytes.Buffer
	for i := range 40 {
		stream := "stdout"
		if i%3 == 2 {
			stream = "stderr"
		}
		b := bytes.Repeat([]byte{byte('a' + i%26)}, 10<<10)
		r.write(stream, b)
		all.Write(b)
	}
	start, end, used := r.bounds()
	if end != int64(all.Len()) {
		t.Fatalf("end %d, want %d", end, all.Len())
	}
	if used > 128<<10 || start == 0 {
		t.Fatalf("ring uses %d bytes (cap %d), start %d: it should have dropped the oldest", used, 128<<10, start)
	}
	// From 0: what is left, and how much was missed.
	rd := r.read(0, 1<<30)
	if rd.dropped != start {
		t.Fatalf("dropped %d, want %d", rd.dropped, start)
	}
	var got bytes.Buffer
	off := start
	for i, c := range rd.chunks {
		if c.Offset != off {
			t.Fatalf("chunk %d at %d, want %d (no gap)", i, c.Offset, off)
		}
		if i > 0 && rd.chunks[i-1].Stream == c.Stream {
			t.Fatalf("chunks %d and %d are both %s; consecutive chunks of one stream are merged", i-1, i, c.Stream)
		}
		off += int64(len(c.Data))
		got.Write(c.Data)
	}
	if !bytes.Equal(got.Bytes(), all.Bytes()[start:]) || rd.next != end {
		t.Fatalf("read %d bytes up to %d, want the %d from %d to %d", got.Len(), rd.next, end-start, start, end)
	}
	// In pieces from the middle of a chunk: no gap and no repeat.
	got.Reset()
	cur := start + 1234
	for cur < end {
		rd := r.read(cur, 3000)
		if rd.dropped != 0 {
			t.Fatalf("dropped %d reading from %d", rd.dropped, cur)
		}
		for _, c := range rd.chunks {
			got.Write(c.Data)
		}
		cur = rd.next
	}
	if !bytes.Equal(got.Bytes(), all.Bytes()[start+1234:]) {
		t.Fatal("reading in pieces gave other bytes than were written")
	}
}

// TestRingCountsChunkCost writes single bytes to both streams in turn: the
// ring's memory stays within its size however small the writes.
func TestRingCountsChunkCost(t *testing.T) {
	r := newOutRing(64 << 10)
	for i := range 200000 {
		r.write([]string{"stdout", "stderr"}[i%2], []byte{'x'})
	}
	_, end, used := r.bounds()
	if end != 200000 || used > 64<<10 {
		t.Fatalf("end %d used %d; want 200000 and at most %d", end, used, 64<<10)
	}
	r.mu.Lock()
	n := len(r.chunks)
	r.mu.Unlock()
	if n > (64<<10)/ringChunkCost {
		t.Fatalf("%d chunks held in a 64 KiB ring", n)
	}
}

// The OOM kill count is read from either cgroup version's file.
func TestOOMCounterReadsBothCgroupVersions(t *testing.T) {
	dir := t.TempDir()
	v2 := dir + "/memory.events"
	v1 := dir + "/memory.oom_control"
	os.WriteFile(v2, []byte("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"), 0o644)
	os.WriteFile(v1, []byte("oom_kill_disable 0\nunder_oom 0\noom_kill 7\n"), 0o644)
	for path, want := range map[string]int64{v2: 2, v1: 7} {
		if n, ok := (&oomCounter{path: path}).read(); !ok || n != want {
			t.Errorf("%s: %d, %v; want %d", path, n, ok, want)
		}
	}
	if _, ok := (&oomCounter{path: dir + "/none"}).read(); ok {
		t.Error("a missing file read as a count")
	}
	if _, ok := (*oomCounter)(nil).read(); ok {
		t.Error("no counter read as a count")
	}
}
