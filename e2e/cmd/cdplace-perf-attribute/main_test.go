package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cdplace/cdplace/e2e/cpuprofile"
)

// A recording of two schedulers: pid 10 busy in seconds 0–2 (a third of its samples in the
// plugin's Go code, the Rust library or the guest's JIT code), idle, busy again in 20–21; pid 20
// busy in 10–12 with no plugin frame; an apiserver all along. Runs finds the three windows and
// counts each one's samples and plugin samples; Parse reads perf script's layout (command names
// with spaces, frames with and without symbols).
func TestRunsCountThePluginsSamplesPerBusyWindow(t *testing.T) {
	var b strings.Builder
	sample := func(comm string, pid int, tm float64, frames ...string) {
		fmt.Fprintf(&b, "%s %d/%d %.6f: \n", comm, pid, pid+1, tm)
		for _, f := range frames {
			fmt.Fprintf(&b, "\t         1fc99a3 %s\n", f)
		}
		b.WriteString("\n")
	}
	plugin := []string{
		"github.com/cdplace/cdplace/host-shim/go/pkg/computedomain.(*Plugin).Score (/bin/kube-scheduler)",
		"cdplace_host::state::State::upsert (/bin/kube-scheduler)",
		"[unknown] (/tmp/perf-10.map)",
	}
	stock := "k8s.io/kubernetes/pkg/scheduler.(*Scheduler).scheduleOne (/bin/kube-scheduler)"
	for i := 0; i < 300; i++ { // seconds 0–2, 100 a second
		tm := 1000 + float64(i)/100
		if i%3 == 0 {
			sample("kube-scheduler", 10, tm, plugin[i%len(plugin)], stock)
		} else {
			sample("kube-scheduler", 10, tm, stock)
		}
		sample("kube-apiserver", 30, tm, "k8s.io/apiserver/pkg/endpoints.handler (/bin/kube-apiserver)")
	}
	for i := 0; i < 300; i++ { // seconds 10–12
		sample("kube-scheduler", 20, 1010+float64(i)/100, stock)
	}
	sample("cdplace-epoch", 10, 1015, "clock_nanosleep@GLIBC_2.2.5 (/usr/lib/libc.so.6)")
	for i := 0; i < 200; i++ { // seconds 20–21, all the plugin's
		sample("kube-scheduler", 10, 1020+float64(i)/100, plugin[0])
	}
	samples, err := cpuprofile.ParsePerfScript(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 300*2+300+1+200 {
		t.Fatalf("parsed %d samples", len(samples))
	}
	runs := Runs(samples, "kube-scheduler", 100, 0.5)
	want := []Run{
		{PID: 10, From: -1, To: 5, Samples: 300, PluginSamples: 100, ProcessSeconds: 3},
		{PID: 10, From: 19, To: 24, Samples: 200, PluginSamples: 200, ProcessSeconds: 2, Cut: true},
		{PID: 20, From: 9, To: 15, Samples: 300, PluginSamples: 0, ProcessSeconds: 3},
	}
	if fmt.Sprint(runs) != fmt.Sprint(want) {
		t.Fatalf("runs\n%+v\nwant\n%+v", runs, want)
	}
	if _, err := cpuprofile.ParsePerfScript(strings.NewReader("\t  1234 frame before a header\n")); err == nil {
		t.Error("a frame before any header was accepted")
	}
	if _, err := cpuprofile.ParsePerfScript(strings.NewReader("kube-scheduler nopid 12.5:\n")); err == nil {
		t.Error("a header without pid/tid was accepted")
	}
}
