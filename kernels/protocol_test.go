package kernels

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Every message a kernel sends while a cell runs names that cell, so that
// sandboxd can drop a message the agent delivers twice across a restart.
// The real interpreters run each kernel here, speaking on fds 3 and 4.
func TestKernelMessagesNameTheirCell(t *testing.T) {
	for lang, interp := range map[string]string{"python": "python3", "javascript": "node"} {
		t.Run(lang, func(t *testing.T) {
			bin, err := exec.LookPath(interp)
			if err != nil {
				t.Skipf("%s is not installed", interp)
			}
			p, err := Get(lang)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			for name, data := range p.Files {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			inR, inW, _ := os.Pipe()
			outR, outW, _ := os.Pipe()
			cmd := exec.Command(bin, filepath.Join(dir, p.Entry))
			cmd.Dir = dir
			cmd.ExtraFiles = []*os.File{inR, outW} // fds 3 and 4
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			inR.Close()
			outW.Close()
			t.Cleanup(func() { inW.Close(); cmd.Process.Kill(); cmd.Wait() })

			code := map[string]string{"python": "print('out')\n21 * 2", "javascript": "console.log('out'); 21 * 2"}[lang]
			line, _ := json.Marshal(map[string]any{"type": "execute", "id": 1 << 45, "code": code})
			if _, err := inW.Write(append(line, '\n')); err != nil {
				t.Fatal(err)
			}
			msgs := make(chan map[string]any)
			go func() {
				defer close(msgs)
				sc := bufio.NewScanner(outR)
				for sc.Scan() {
					var m map[string]any
					if json.Unmarshal(sc.Bytes(), &m) == nil {
						msgs <- m
					}
				}
			}()
			var kinds []string
			timeout := time.After(30 * time.Second)
			for {
				select {
				case m, ok := <-msgs:
					if !ok {
						t.Fatalf("the kernel ended before done; it sent %v", kinds)
					}
					kinds = append(kinds, m["type"].(string))
					switch m["type"] {
					case "hello":
						if _, has := m["cell"]; has {
							t.Errorf("hello names a cell: %v", m)
						}
					case "done":
						if m["id"] != float64(1<<45) {
							t.Errorf("done = %v, want the cell's id", m)
						}
						if len(kinds) < 3 {
							t.Errorf("messages %v, want output and a display before done", kinds)
						}
						return
					default:
						if m["cell"] != float64(1<<45) {
							t.Errorf("%s message %v does not name its cell", m["type"], m)
						}
					}
				case <-timeout:
					t.Fatalf("no done within 30 s; messages %v", kinds)
				}
			}
		})
	}
}
