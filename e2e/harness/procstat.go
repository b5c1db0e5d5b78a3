package harness

// What a benchmark reads of a running scheduler process from /proc: its id, resident memory and
// CPU time.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// RSSBytes is the scheduler process's resident set size (VmRSS in /proc/<pid>/status): what a
// container memory limit is measured against.
func (s *Scheduler) RSSBytes() (int64, error) { return s.statusBytes("VmRSS") }

// PeakRSSBytes is the most the scheduler process's resident set has been since it started
// (VmHWM, the "high water mark", in /proc/<pid>/status): what a container memory limit must hold.
func (s *Scheduler) PeakRSSBytes() (int64, error) { return s.statusBytes("VmHWM") }

// statusBytes reads one kB field of /proc/<pid>/status.
func (s *Scheduler) statusBytes(field string) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID()))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", field, rest, err)
			}
			return kib << 10, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, s.PID())
}

// CPUTime is the CPU time the scheduler process has used so far, every thread's user and system
// time (utime and stime in /proc/<pid>/stat, in USER_HZ ticks of 10 ms on Linux): what a
// benchmark divides by the pods scheduled to compare profiles by their work, not by a wall
// clock the other processes on the machine share.
func (s *Scheduler) CPUTime() (time.Duration, error) { return processCPUTime(s.PID()) }

// PID is the scheduler process's id (for a profiler to attach to).
func (s *Scheduler) PID() int { return s.proc.cmd.Process.Pid }

func processCPUTime(pid int) (time.Duration, error) {
	path := fmt.Sprintf("/proc/%d/stat", pid)
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: fields count from ")".
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, fmt.Errorf("%s: no command name in %q", path, data)
	}
	f := strings.Fields(string(data[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%s: %d fields after the command name, want at least 13", path, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: utime or stime %q: %w", path, v, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}

// PIDs are the ids of the control plane's processes and of the schedulers started on it that
// still run.
func (cp *ControlPlane) PIDs() []int {
	var pids []int
	for _, p := range cp.procs {
		if p.cmd != nil && p.cmd.Process != nil {
			pids = append(pids, p.cmd.Process.Pid)
		}
	}
	for _, s := range cp.schedulers {
		if s.proc != nil && s.proc.cmd != nil && s.proc.cmd.Process != nil {
			pids = append(pids, s.PID())
		}
	}
	return pids
}

// Settle waits until the processes together used at most busy of one core over an interval
// (the CPU time read from /proc at its start and end), or until timeout; it returns how long it
// waited and whether they settled. A benchmark calls it between runs, so that a run does not
// start while another process still digests the last one (a scheduler its pod deletions, the
// API server its watch events) and pay for it on the shared cores. A process that is gone
// counts as idle.
func Settle(ctx context.Context, pids []int, interval time.Duration, busy float64, timeout time.Duration) (time.Duration, bool) {
	start := time.Now()
	total := func() time.Duration {
		var sum time.Duration
		for _, pid := range pids {
			if t, err := processCPUTime(pid); err == nil {
				sum += t
			}
		}
		return sum
	}
	last := total()
	for {
		select {
		case <-ctx.Done():
			return time.Since(start), false
		case <-time.After(interval):
		}
		now := total()
		if float64(now-last) <= busy*float64(interval) {
			return time.Since(start), true
		}
		if time.Since(start) >= timeout {
			return time.Since(start), false
		}
		last = now
	}
}
