package cpuprofile

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// PerfScriptFields is the -F argument of `perf script` that ParsePerfScript reads.
const PerfScriptFields = "pid,tid,comm,time,ip,sym,dso"

// PerfSample is one sample of a perf recording: the process, its time, its stack (leaf first).
type PerfSample struct {
	Comm   string
	PID    int
	Time   float64
	Frames []string
}

// ParsePerfScript reads `perf script -F pid,tid,comm,time,ip,sym,dso` output: a header line per
// sample ("comm pid/tid time:"), then one indented line per frame, then a blank line.
//
// perf sees every thread and language of a process: Go, the cgo calls, the Rust library,
// wasmtime and the guest's JIT code, where Go's pprof sees the Go stacks that made the calls.
func ParsePerfScript(r io.Reader) ([]PerfSample, error) {
	var out []PerfSample
	var cur *PerfSample
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := sc.Text()
		switch {
		case strings.TrimSpace(t) == "":
			if cur != nil {
				out = append(out, *cur)
				cur = nil
			}
		case t[0] == ' ' || t[0] == '\t':
			if cur == nil {
				return nil, fmt.Errorf("line %d: a frame before any sample header: %q", line, t)
			}
			cur.Frames = append(cur.Frames, strings.TrimSpace(t))
		default:
			s, err := perfHeader(t)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			if cur != nil {
				out = append(out, *cur)
			}
			cur = &s
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out, sc.Err()
}

// perfHeader parses "comm pid/tid time:"; the command name may hold spaces.
func perfHeader(t string) (PerfSample, error) {
	f := strings.Fields(strings.TrimSuffix(strings.TrimSpace(t), ":"))
	if len(f) < 3 {
		return PerfSample{}, fmt.Errorf("not a sample header: %q", t)
	}
	ids, ts := f[len(f)-2], f[len(f)-1]
	pid, _, ok := strings.Cut(ids, "/")
	if !ok {
		return PerfSample{}, fmt.Errorf("no pid/tid in %q", t)
	}
	p, err := strconv.Atoi(pid)
	if err != nil {
		return PerfSample{}, fmt.Errorf("pid in %q: %w", t, err)
	}
	sec, err := strconv.ParseFloat(strings.TrimSuffix(ts, ":"), 64)
	if err != nil {
		return PerfSample{}, fmt.Errorf("time in %q: %w", t, err)
	}
	return PerfSample{Comm: strings.Join(f[:len(f)-2], " "), PID: p, Time: sec}, nil
}

// IsPluginPerfFrame reports whether a frame of `perf script` is ComputeDomainPlacement's: a Go
// function of github.com/cdplace, a cdplace_ C or Rust symbol, wasmtime, or code from a JIT's
// perf map (the guest: wasmtime is the only JIT in kube-scheduler).
func IsPluginPerfFrame(frame string) bool {
	return strings.Contains(frame, "github.com/cdplace/") || strings.Contains(frame, "cdplace_") ||
		strings.Contains(frame, "wasmtime") || strings.Contains(frame, "/tmp/perf-") && strings.HasSuffix(frame, ".map)")
}

// PerfShare counts a process's samples and those with a frame of the plugin, in all and by
// phase (Phases): what the framework spends around the plugin is the phase's samples less the
// plugin's there.
type PerfShare struct {
	Samples, PluginSamples int
	Phase, PluginPhase     []int
}

// Percent is the plugin's share of the samples, in percent.
func (s PerfShare) Percent() float64 {
	if s.Samples == 0 {
		return 0
	}
	return 100 * float64(s.PluginSamples) / float64(s.Samples)
}

// Count adds a sample.
func (s *PerfShare) Count(p *PerfSample) {
	if s.Phase == nil {
		s.Phase, s.PluginPhase = make([]int, len(Phases)), make([]int, len(Phases))
	}
	s.Samples++
	phase := PhaseOf(p.Frames)
	s.Phase[phase]++
	for _, f := range p.Frames {
		if IsPluginPerfFrame(f) {
			s.PluginSamples++
			s.PluginPhase[phase]++
			return
		}
	}
}

// Phases are where in kube-scheduler a perf sample was taken, in the order PhaseOf tries them:
// the extension points of a scheduling cycle (each with the framework's own work around its
// plugins), the binding cycle, the informers' handlers, Go's garbage collector, and the rest.
var Phases = []string{"Score", "PreScore", "Filter", "PreFilter", "Reserve", "Bind", "Informers", "GC", "Other"}

// phaseMarkers are the frames that put a sample in each phase of Phases (the last, Other, has none).
var phaseMarkers = [][]string{
	{"(*frameworkImpl).RunScorePlugins", "(*frameworkImpl).normalizeScores"},
	{"(*frameworkImpl).RunPreScorePlugins"},
	{"(*Scheduler).findNodesThatPassFilters", "(*frameworkImpl).RunFilterPlugins"},
	{"(*frameworkImpl).RunPreFilterPlugins"},
	{"(*frameworkImpl).RunReservePlugins", "(*Scheduler).assume", "(*frameworkImpl).RunPermitPlugins"},
	{"(*Scheduler).bindingCycle", "(*frameworkImpl).RunPreBindPlugins", "(*frameworkImpl).RunBindPlugins", "(*frameworkImpl).RunPostBindPlugins"},
	{"(*processorListener)", "cache.(*Reflector)", "cache.(*DeltaFIFO)", "(*sharedIndexInformer)", "watch.(*StreamWatcher)"},
	{"runtime.gcBgMarkWorker", "runtime.gcAssistAlloc", "runtime.bgsweep", "runtime.bgscavenge"},
}

// PhaseOf is the index in Phases of the first phase any frame of the stack marks; Other when
// none does.
func PhaseOf(frames []string) int {
	for i, markers := range phaseMarkers {
		for _, f := range frames {
			for _, m := range markers {
				if strings.Contains(f, m) {
					return i
				}
			}
		}
	}
	return len(Phases) - 1
}
