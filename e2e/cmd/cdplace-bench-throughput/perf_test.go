package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A run's recording is removed once counted, and kept with -keep-perf. (The process recorded is
// a sleep and the file not perf's: stop fails to read it either way, and must still obey keep.)
func TestARecordingIsRemovedUnlessKept(t *testing.T) {
	for _, keep := range []bool{false, true} {
		path := filepath.Join(t.TempDir(), "perf-cdp-gpu-5004-0.data")
		if err := os.WriteFile(path, []byte("not a recording"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := &perfRecording{keep: keep, cmd: exec.Command("sleep", "30"), path: path}
		if err := r.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.stop(); err == nil {
			t.Fatal("stop read a file that is not a recording")
		}
		if _, err := os.Stat(path); (err == nil) != keep {
			t.Fatalf("keep %v: the recording exists = %v", keep, err == nil)
		}
	}
}
