// Package cpuprofile splits a pprof CPU profile of a process that runs kube-scheduler with
// ComputeDomainPlacement by who the samples belong to: the plugin's share of the scheduler's CPU,
// the figure both benchmarks that profile a scheduler report (bench-upstream on scheduler_perf,
// bench-throughput on a real control plane). It reads profile.proto itself: no pprof module.
package cpuprofile

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Share splits a CPU profile by who the samples belong to: of one scheduler_perf run (one
// process: the in-process kube-apiserver, the scheduler, informers and the load generator), or
// of a kube-scheduler process (no apiserver frames).
// Each is in nanoseconds of CPU; a sample counts for a category when any frame of its stack does.
type Share struct {
	TotalNs int64 `json:"totalNs"`
	// PluginNs: frames of github.com/cdplace/... (the Go plugin and its cgo wrapper: a sample
	// taken inside a cgo call carries the Go stack that made it) or of the Rust library and
	// wasmtime (cdplace_*, wasmtime*).
	PluginNs int64 `json:"pluginNs"`
	// APIServerNs: frames of the in-process kube-apiserver and its etcd client.
	APIServerNs int64 `json:"apiserverNs"`
	// SchedulerNs: frames of k8s.io/kubernetes/pkg/scheduler/ (the framework, the in-tree
	// plugins, the scheduler's event handlers), the DRA allocator, or the plugin.
	SchedulerNs int64 `json:"schedulerNs"`
}

// OfScheduler is the plugin's share of the scheduler's samples (the headline figure).
func (s Share) OfScheduler() float64 { return ratio(s.PluginNs, s.SchedulerNs) }

// OfNonAPIServer is the plugin's share of all samples outside the kube-apiserver.
func (s Share) OfNonAPIServer() float64 { return ratio(s.PluginNs, s.TotalNs-s.APIServerNs) }

// OfTotal is the plugin's share of the whole process.
func (s Share) OfTotal() float64 { return ratio(s.PluginNs, s.TotalNs) }

func ratio(a, b int64) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// Packages (and their sub-packages) by category; a frame's package is its function name up to
// the first dot after the last slash.
var (
	pluginPackages    = []string{"github.com/cdplace"}
	apiserverPackages = []string{
		"k8s.io/apiserver", "k8s.io/apiextensions-apiserver", "k8s.io/kube-aggregator",
		"k8s.io/kubernetes/pkg/registry", "k8s.io/kubernetes/pkg/controlplane",
		"k8s.io/kubernetes/pkg/kubeapiserver", "go.etcd.io", "google.golang.org/grpc",
	}
	schedulerPackages = []string{"k8s.io/kubernetes/pkg/scheduler", "k8s.io/dynamic-resource-allocation"}
)

// funcPackage is the import path of a Go function's package ("" for C and Rust symbols).
func funcPackage(name string) string {
	if i := strings.IndexByte(name, '['); i >= 0 { // type arguments may hold paths
		name = name[:i]
	}
	slash := strings.LastIndex(name, "/")
	dot := strings.Index(name[slash+1:], ".")
	if dot < 0 {
		return ""
	}
	return name[:slash+1+dot]
}

func inPackages(name string, packages []string) bool {
	pkg := funcPackage(name)
	for _, p := range packages {
		if pkg == p || strings.HasPrefix(pkg, p+"/") || strings.HasPrefix(pkg, p+".") {
			return true
		}
	}
	return false
}

// isPluginFrame: cgo's generated functions are named <package>._Cfunc_<C name>, so the package
// catches them; the C and Rust names (cdplace_*, wasmtime) only appear in a profile if a cgo
// traceback is registered.
func isPluginFrame(name string) bool {
	return inPackages(name, pluginPackages) || strings.HasPrefix(name, "cdplace_") || strings.Contains(name, "wasmtime")
}

// Analyze reads a pprof CPU profile (gzipped profile.proto, as runtime/pprof writes it).
func Analyze(path string) (Share, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Share{}, err
	}
	p, err := parseProfile(raw)
	if err == nil {
		var s Share
		if s, err = p.cpuShare(); err == nil {
			return s, nil
		}
	}
	return Share{}, fmt.Errorf("%s: %w", path, err)
}

// cpuShare classifies the samples of a CPU profile.
func (p *profile) cpuShare() (Share, error) {
	value := -1
	for i, t := range p.sampleTypes {
		if t == "cpu" {
			value = i
		}
	}
	if value < 0 {
		return Share{}, fmt.Errorf("not a CPU profile (sample types %v)", p.sampleTypes)
	}
	var s Share
	for _, smp := range p.samples {
		if value >= len(smp.values) {
			continue
		}
		v := smp.values[value]
		plugin, api, sched := false, false, false
		for _, loc := range smp.locations {
			for _, fn := range p.locationFuncs[loc] {
				name := p.funcNames[fn]
				plugin = plugin || isPluginFrame(name)
				api = api || inPackages(name, apiserverPackages)
				sched = sched || inPackages(name, schedulerPackages)
			}
		}
		s.TotalNs += v
		if plugin {
			s.PluginNs += v
		}
		if api && !plugin {
			s.APIServerNs += v
		}
		if sched || plugin {
			s.SchedulerNs += v
		}
	}
	return s, nil
}

// profile is the part of profile.proto this benchmark needs.
type profile struct {
	sampleTypes   []string
	samples       []sample
	locationFuncs map[uint64][]uint64 // location id -> function ids (inlined frames included)
	funcNames     map[uint64]string   // function id -> name
}

type sample struct {
	locations []uint64
	values    []int64
}

// Field numbers of profile.proto (github.com/google/pprof/proto/profile.proto).
const (
	profSampleType  = 1
	profSample      = 2
	profLocation    = 4
	profFunction    = 5
	profStringTable = 6
)

func parseProfile(raw []byte) (*profile, error) {
	if len(raw) > 2 && raw[0] == 0x1f && raw[1] == 0x8b {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	var strs []string
	var typeIdx []int64
	funcNameIdx := map[uint64]int64{}
	p := &profile{locationFuncs: map[uint64][]uint64{}, funcNames: map[uint64]string{}}
	err := fields(raw, func(num int, wire int, v uint64, b []byte) error {
		switch num {
		case profSampleType:
			return fields(b, func(n, _ int, v uint64, _ []byte) error {
				if n == 1 {
					typeIdx = append(typeIdx, int64(v))
				}
				return nil
			})
		case profSample:
			var s sample
			err := fields(b, func(n, w int, v uint64, pb []byte) error {
				switch n {
				case 1:
					return varints(w, v, pb, func(x uint64) { s.locations = append(s.locations, x) })
				case 2:
					return varints(w, v, pb, func(x uint64) { s.values = append(s.values, int64(x)) })
				}
				return nil
			})
			p.samples = append(p.samples, s)
			return err
		case profLocation:
			var id uint64
			var fns []uint64
			err := fields(b, func(n, _ int, v uint64, lb []byte) error {
				switch n {
				case 1:
					id = v
				case 4: // Line{function_id = 1, line = 2}
					return fields(lb, func(ln, _ int, lv uint64, _ []byte) error {
						if ln == 1 {
							fns = append(fns, lv)
						}
						return nil
					})
				}
				return nil
			})
			p.locationFuncs[id] = fns
			return err
		case profFunction:
			var id uint64
			var name int64
			err := fields(b, func(n, _ int, v uint64, _ []byte) error {
				switch n {
				case 1:
					id = v
				case 2:
					name = int64(v)
				}
				return nil
			})
			funcNameIdx[id] = name
			return err
		case profStringTable:
			strs = append(strs, string(b))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	str := func(i int64) string {
		if i < 0 || int(i) >= len(strs) {
			return ""
		}
		return strs[i]
	}
	for _, i := range typeIdx {
		p.sampleTypes = append(p.sampleTypes, str(i))
	}
	for id, i := range funcNameIdx {
		p.funcNames[id] = str(i)
	}
	return p, nil
}

// fields calls fn for each field of a protobuf message: v for varint and fixed fields, b for
// length-delimited ones.
func fields(msg []byte, fn func(num, wire int, v uint64, b []byte) error) error {
	for len(msg) > 0 {
		key, n := binary.Uvarint(msg)
		if n <= 0 {
			return errors.New("bad protobuf key")
		}
		msg = msg[n:]
		num, wire := int(key>>3), int(key&7)
		var v uint64
		var b []byte
		switch wire {
		case 0:
			v, n = binary.Uvarint(msg)
			if n <= 0 {
				return errors.New("bad protobuf varint")
			}
			msg = msg[n:]
		case 1:
			if len(msg) < 8 {
				return errors.New("short fixed64")
			}
			v, msg = binary.LittleEndian.Uint64(msg), msg[8:]
		case 2:
			l, n := binary.Uvarint(msg)
			if n <= 0 || uint64(len(msg)-n) < l {
				return errors.New("bad protobuf length")
			}
			b, msg = msg[n:n+int(l)], msg[n+int(l):]
		case 5:
			if len(msg) < 4 {
				return errors.New("short fixed32")
			}
			v, msg = uint64(binary.LittleEndian.Uint32(msg)), msg[4:]
		default:
			return fmt.Errorf("unsupported protobuf wire type %d", wire)
		}
		if err := fn(num, wire, v, b); err != nil {
			return err
		}
	}
	return nil
}

// varints reads a repeated integer field, packed (wire type 2) or not.
func varints(wire int, v uint64, b []byte, add func(uint64)) error {
	if wire != 2 {
		add(v)
		return nil
	}
	for len(b) > 0 {
		x, n := binary.Uvarint(b)
		if n <= 0 {
			return errors.New("bad packed varint")
		}
		add(x)
		b = b[n:]
	}
	return nil
}
