package bench

import (
	"os"
	"strings"
	"testing"
)

func TestParseVmRSS(t *testing.T) {
	status := "Name:\tsandboxd\nVmPeak:\t 1000 kB\nVmRSS:\t   12345 kB\nThreads:\t9\n"
	got, err := ParseVmRSS(strings.NewReader(status))
	if err != nil || got != 12345*1024 {
		t.Errorf("ParseVmRSS = %d, %v; want %d", got, err, 12345*1024)
	}
	for name, bad := range map[string]string{
		"no line":      "Name:\tkthreadd\n",
		"no unit":      "VmRSS:\t12345\n",
		"not a number": "VmRSS:\tlots kB\n",
	} {
		if _, err := ParseVmRSS(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestRSSOfThisProcess(t *testing.T) {
	// A live process has a resident set of at least a few hundred KiB.
	got, err := RSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got < 256<<10 {
		t.Errorf("RSS of this test = %d bytes, implausibly small", got)
	}
}

func TestParseStatusKBFindsRssAnon(t *testing.T) {
	status := "Name:\tsandboxd\nVmRSS:\t   70000 kB\nRssAnon:\t    6236 kB\nRssFile:\t   63764 kB\n"
	if got, err := ParseStatusKB(strings.NewReader(status), "RssAnon"); err != nil || got != 6236*1024 {
		t.Errorf("ParseStatusKB(RssAnon) = %d, %v; want %d", got, err, 6236*1024)
	}
	if _, err := ParseStatusKB(strings.NewReader(status), "RssShmem"); err == nil {
		t.Error("a missing key was not an error")
	}
}
