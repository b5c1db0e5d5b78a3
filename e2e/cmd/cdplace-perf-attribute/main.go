// Command cdplace-perf-attribute counts, from a system-wide perf recording, how much of each
// kube-scheduler process's CPU went to ComputeDomainPlacement, per benchmark run and per pod.
//
// Wall-clock throughput pairs on a shared 2-core machine swing more than the plugin costs; the
// plugin's own CPU samples do not. perf sees every thread and every language (Go, cgo, the Rust
// library, wasmtime and the guest's compiled code), which Go's pprof does not: a SIGPROF that
// lands on a thread Go did not start (the epoch ticker) is recorded as runtime._ExternalCode, 9–12%
// of a cdplace scheduler's pprof samples in bench-throughput, while perf finds that thread idle.
//
//	target/e2e/bin/cdplace-bench-throughput -repo . -kinds gpu -sizes 5000 -reps 3 -all-nodes=false -out target/bench/perf &
//	perf record -a -g -F 299 -o perf.data -- sleep 100   # once the fleet is created
//	perf script -i perf.data -F pid,tid,comm,time,ip,sym,dso | cdplace-perf-attribute -hz 299 -pods 2001
//
// A run is a stretch of seconds in which a kube-scheduler process is busy (at least -busy of its
// busiest second); its window runs from a second before to three after, so the binds' tail is in.
// A sample is the plugin's when any frame of its stack is (cpuprofile.IsPluginPerfFrame).
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
)

// Run is one busy window of one process.
type Run struct {
	PID            int
	From, To       int // seconds from the recording's first sample
	Samples        int
	PluginSamples  int
	ProcessSeconds float64
	// Cut: the recording ended before the window did (the run's count is short).
	Cut bool
}

// Runs finds each kube-scheduler process's busy windows.
func Runs(samples []cpuprofile.PerfSample, comm string, hz, busy float64) []Run {
	if len(samples) == 0 {
		return nil
	}
	t0, end := samples[0].Time, samples[0].Time
	for _, s := range samples {
		t0, end = min(t0, s.Time), max(end, s.Time)
	}
	// The processes named comm; their other threads (the epoch ticker) count for them too.
	ofComm := map[int]bool{}
	for _, s := range samples {
		if strings.HasPrefix(s.Comm, comm) {
			ofComm[s.PID] = true
		}
	}
	byPID := map[int][]cpuprofile.PerfSample{}
	for _, s := range samples {
		if ofComm[s.PID] {
			byPID[s.PID] = append(byPID[s.PID], s)
		}
	}
	var pids []int
	for p := range byPID {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	var runs []Run
	for _, p := range pids {
		ss := byPID[p]
		perSec := map[int]int{}
		most := 0
		for _, s := range ss {
			sec := int(s.Time - t0)
			perSec[sec]++
			most = max(most, perSec[sec])
		}
		var secs []int
		for sec, n := range perSec {
			if float64(n) >= busy*float64(most) {
				secs = append(secs, sec)
			}
		}
		sort.Ints(secs)
		var windows [][2]int
		for _, sec := range secs {
			if n := len(windows); n > 0 && sec-windows[n-1][1] <= 2 {
				windows[n-1][1] = sec
			} else {
				windows = append(windows, [2]int{sec, sec})
			}
		}
		for _, w := range windows {
			r := Run{PID: p, From: w[0] - 1, To: w[1] + 3, Cut: float64(w[1]+3) > end-t0}
			var share cpuprofile.PerfShare
			for i := range ss {
				if sec := ss[i].Time - t0; sec >= float64(r.From) && sec < float64(r.To) {
					share.Count(&ss[i])
				}
			}
			r.Samples, r.PluginSamples = share.Samples, share.PluginSamples
			r.ProcessSeconds = float64(r.Samples) / hz
			runs = append(runs, r)
		}
	}
	return runs
}

func main() {
	hz := flag.Float64("hz", 299, "perf record's sampling frequency (-F)")
	pods := flag.Int("pods", 0, "pods scheduled per run (0: no per-pod column)")
	comm := flag.String("comm", "kube-scheduler", "process name of the schedulers")
	busy := flag.Float64("busy", 0.5, "a second is busy at this fraction of the process's busiest second")
	flag.Parse()
	samples, err := cpuprofile.ParsePerfScript(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runs := Runs(samples, *comm, *hz, *busy)
	if len(runs) == 0 {
		fmt.Fprintf(os.Stderr, "no busy %s process in %d samples\n", *comm, len(samples))
		os.Exit(1)
	}
	fmt.Println("| pid | window s | CPU s | plugin CPU s | plugin % | CPU ms/pod | plugin ms/pod |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, r := range runs {
		perPod, pluginPerPod := "–", "–"
		if *pods > 0 {
			perPod = fmt.Sprintf("%.3f", 1000*r.ProcessSeconds/float64(*pods))
			pluginPerPod = fmt.Sprintf("%.3f", 1000*float64(r.PluginSamples) / *hz / float64(*pods))
		}
		window := fmt.Sprintf("%d–%d", r.From, r.To)
		if r.Cut {
			window += " (cut by the recording's end)"
		}
		share := cpuprofile.PerfShare{Samples: r.Samples, PluginSamples: r.PluginSamples}
		fmt.Printf("| %d | %s | %.2f | %.2f | %.2f | %s | %s |\n", r.PID, window, r.ProcessSeconds,
			float64(r.PluginSamples) / *hz, share.Percent(), perPod, pluginPerPod)
	}
}
