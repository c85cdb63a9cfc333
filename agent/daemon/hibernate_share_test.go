package daemon

import (
	"slices"
	"testing"

	"github.com/sandboxd/sandboxd/agent/proto"
)

// The kept output is shared so that small outputs are kept whole and the
// large ones split what is left evenly.
func TestShareOutput(t *testing.T) {
	for _, tc := range []struct {
		sizes  []int64
		budget int64
		want   []int64
	}{
		{[]int64{10, 100, 1000}, 300, []int64{10, 100, 190}},
		{[]int64{1000, 10, 1000}, 300, []int64{145, 10, 145}},
		{[]int64{5, 5}, 300, []int64{5, 5}},
		{nil, 300, []int64{}},
	} {
		got := shareOutput(tc.sizes, tc.budget)
		if !slices.Equal(got, tc.want) {
			t.Errorf("shareOutput(%v, %d) = %v, want %v", tc.sizes, tc.budget, got, tc.want)
		}
	}
}

// A restored ring without chunks holds nothing and says every byte before
// its end was lost; with chunks, it reads them back at their offsets.
func TestRestoredRing(t *testing.T) {
	empty := restoredRing(proto.MinProcRing, nil, 42)
	if rd := empty.read(0, 100); len(rd.chunks) != 0 || rd.dropped != 42 || rd.next != 42 || !rd.closed {
		t.Fatalf("empty restored ring: %+v", rd)
	}
	big := make([]byte, ringChunkMax+10)
	r := restoredRing(proto.MinProcRing, []proto.ProcChunk{{Stream: "stdout", Offset: 100, Data: big}, {Stream: "stderr", Offset: 100 + int64(len(big)), Data: []byte("e")}}, 0)
	rd := r.read(0, 1<<20)
	if rd.dropped != 100 || len(rd.chunks) != 2 || len(rd.chunks[0].Data) != len(big) || string(rd.chunks[1].Data) != "e" || rd.next != 100+int64(len(big))+1 {
		t.Fatalf("restored ring read: dropped %d, %d chunks, next %d", rd.dropped, len(rd.chunks), rd.next)
	}
}
