package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
)

// perfHz is perf record's sampling frequency for -perf.
const perfHz = 499

// perfRecording is `perf record` attached to one scheduler process for one run (-perf): every
// thread and language of the process (Go, the cgo calls, the Rust library, wasmtime and the
// guest's code), which Go's pprof does not see whole; the plugin's share of the samples is the
// steady figure of what it costs, where pods/s swings with the machine.
type perfRecording struct {
	keep bool // leave the recording in place after stop (-keep-perf)
	cmd  *exec.Cmd
	path string
	log  bytes.Buffer
}

// startPerf attaches perf to pid, writing to path; it returns once perf has started recording.
func startPerf(pid int, path string) (*perfRecording, error) {
	r := &perfRecording{path: path}
	r.cmd = exec.Command("perf", "record", "-g", "-F", strconv.Itoa(perfHz), "-p", strconv.Itoa(pid), "-o", path)
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	if err := r.cmd.Start(); err != nil {
		return nil, fmt.Errorf("perf record (-perf needs perf: Debian's linux-perf): %w", err)
	}
	// perf writes the file's header once it has attached.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return r, nil
		}
		if time.Now().After(deadline) {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
			return nil, fmt.Errorf("perf record did not start in 10s: %s", r.log.String())
		}
	}
}

// abandon ends a recording that stop did not (a run that failed on the way): perf is killed and
// its file removed. A no-op after stop.
func (r *perfRecording) abandon() {
	if r == nil || r.cmd.ProcessState != nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	_ = os.Remove(r.path)
}

// stop ends the recording and counts the plugin's samples; the recording is removed unless
// kept (-keep-perf: `perf report -i` it, or diff two runs with `perf diff`).
func (r *perfRecording) stop() (cpuprofile.PerfShare, error) {
	if !r.keep {
		defer os.Remove(r.path)
	}
	if err := r.cmd.Process.Signal(os.Interrupt); err != nil {
		return cpuprofile.PerfShare{}, err
	}
	// perf record exits non-zero when interrupted on some versions; the file tells.
	_ = r.cmd.Wait()
	out, err := exec.Command("perf", "script", "-i", r.path, "-F", cpuprofile.PerfScriptFields).Output()
	if err != nil {
		return cpuprofile.PerfShare{}, fmt.Errorf("perf script -i %s: %w (perf record said: %s)", r.path, err, r.log.String())
	}
	samples, err := cpuprofile.ParsePerfScript(bytes.NewReader(out))
	if err != nil {
		return cpuprofile.PerfShare{}, fmt.Errorf("perf script -i %s: %w", r.path, err)
	}
	var share cpuprofile.PerfShare
	for i := range samples {
		share.Count(&samples[i])
	}
	if share.Samples == 0 {
		return share, fmt.Errorf("perf recorded no sample of the scheduler (%s)", r.log.String())
	}
	return share, nil
}
