package cdplace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// traceRecord is one record as a test reads it back.
type traceRecord struct {
	typ     byte
	payload []byte
}

// readTrace reads one trace file the way record.go describes it (the replay's reader is the
// Rust one, host-shim/cli/src/replay; this one checks what the writer wrote).
func readTrace(t *testing.T, path string) (TraceHeader, []traceRecord) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(b[:4]) != TraceMagic || binary.LittleEndian.Uint32(b[4:]) != TraceFormat {
		t.Fatalf("%s: header %q", path, b[:8])
	}
	n := binary.LittleEndian.Uint32(b[8:])
	hdr := b[16 : 16+n]
	if crc32.ChecksumIEEE(hdr) != binary.LittleEndian.Uint32(b[12:]) {
		t.Fatalf("%s: header CRC", path)
	}
	var h TraceHeader
	if err := json.Unmarshal(hdr, &h); err != nil {
		t.Fatal(err)
	}
	var out []traceRecord
	for off := 16 + int(n); off < len(b); {
		l := int(binary.LittleEndian.Uint32(b[off:]))
		p := b[off+8 : off+8+l]
		if crc32.ChecksumIEEE(p) != binary.LittleEndian.Uint32(b[off+4:]) {
			t.Fatalf("%s: record CRC at %d", path, off)
		}
		out = append(out, traceRecord{p[0], p[1:]})
		off += 8 + l
	}
	return h, out
}

func newTestRecorder(t *testing.T, opts TraceOptions) *TraceRecorder {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	r, err := NewTraceRecorder(opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A recorded cluster: the batch exactly as applied, the assumption, and each decision with the
// position it was made on, its time and the library's answer bytes.
func TestRecorderRoundTrip(t *testing.T) {
	c := newTestCluster(t, "")
	rec := newTestRecorder(t, TraceOptions{PolicyDigest: "sha256:00", Args: json.RawMessage(`{"sizeSettleSeconds":0}`)})
	c.SetRecorder(rec)
	batch := twoRacks().Bytes()
	if err := c.ApplyFacts(batch); err != nil {
		t.Fatal(err)
	}
	d1, err := c.PreFilter("ns", "p1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assume("ns", "p1", "a-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PreFilter("ns", "nobody", nil); !errors.Is(err, ErrUnknownPod) {
		t.Fatalf("unknown pod: %v", err)
	}
	if err := c.Forget("ns", "p1"); err != nil {
		t.Fatal(err)
	}
	c.RecordPolicy(2, "sha256:11")
	if _, err := c.Steer(true); err != nil {
		t.Fatal(err)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	files, err := TraceFiles(rec.opts.Dir)
	if err != nil || len(files) != 1 {
		t.Fatalf("files %v %v", files, err)
	}
	h, recs := readTrace(t, files[0])
	if h.Facts != "CDF3" || h.Decisions != "CDP4" || h.PolicyDigest != "sha256:00" || string(h.Args) != `{"sizeSettleSeconds":0}` || h.File != 0 {
		t.Fatalf("header %+v", h)
	}
	types := []byte{}
	for _, r := range recs {
		types = append(types, r.typ)
	}
	if want := []byte{RecordBatch, RecordDecision, RecordAssume, RecordDecision, RecordForget, RecordPolicy, RecordDecision}; !bytes.Equal(types, want) {
		t.Fatalf("record types %v, want %v", types, want)
	}
	if !bytes.Equal(recs[0].payload, batch) {
		t.Fatal("the batch is not recorded exactly as applied")
	}
	dec := recs[1].payload
	if CallKind(dec[0]) != CallPreFilter || binary.LittleEndian.Uint64(dec[1:]) != 1 {
		t.Fatalf("decision call %d at position %d, want pre-filter at 1", dec[0], binary.LittleEndian.Uint64(dec[1:]))
	}
	// The answer closes the record: u32 length, then the packed decision the call decoded.
	ans, ok := lastBytes(dec)
	if !ok {
		t.Fatal("decision has no answer")
	}
	again, err := DecodeDecision(ans)
	if err != nil || again.Domain != d1.Domain || again.Status != d1.Status || len(again.NodeSet) != len(d1.NodeSet) {
		t.Fatalf("recorded answer %+v %v, made %+v", again, err, d1)
	}
	if p := recs[5].payload; binary.LittleEndian.Uint64(p) != 2 || string(p[8+4:]) != "sha256:11" {
		t.Fatalf("policy record %q: generation 2, digest sha256:11", p)
	}
	if binary.LittleEndian.Uint64(recs[3].payload[1:]) != 2 || binary.LittleEndian.Uint64(recs[6].payload[1:]) != 3 {
		t.Fatal("positions after the assumption and the forget")
	}
	if !bytes.Contains(recs[3].payload, []byte("nobody")) || !bytes.Contains(recs[3].payload, []byte("not in the cluster view")) {
		t.Fatalf("a failed call is recorded with its error: %q", recs[3].payload)
	}
}

// lastBytes finds the trailing `bytes` field of a decision payload (after the u8 ok flag).
func lastBytes(p []byte) ([]byte, bool) {
	off := 1 + 8 + 8
	for i := 0; i < 3; i++ { // namespace, name, overlay
		off += 4 + int(binary.LittleEndian.Uint32(p[off:]))
	}
	if p[off] != 1 {
		return nil, false
	}
	off++
	n := int(binary.LittleEndian.Uint32(p[off:]))
	return p[off+4 : off+4+n], off+4+n == len(p)
}

// Files rotate at MaxBytes; the newest MaxFiles stay; each header says where its file starts.
func TestRecorderRotates(t *testing.T) {
	rec := newTestRecorder(t, TraceOptions{MaxBytes: 4096, MaxFiles: 3})
	big := bytes.Repeat([]byte{7}, 1000)
	for i := 0; i < 40; i++ {
		rec.Batch(big)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := TraceFiles(rec.opts.Dir)
	all, _ := filepath.Glob(filepath.Join(rec.opts.Dir, "*"))
	if len(files) != 3 || len(all) != 3 {
		t.Fatalf("kept %v (all %v), want 3", files, all)
	}
	total := 0
	for i, f := range files {
		h, recs := readTrace(t, f)
		if i > 0 && h.File != files0(t, files[i-1]).File+1 {
			t.Fatalf("file indices not consecutive: %s", f)
		}
		if int(h.FirstPosition) != 40-countAfter(t, files, i) {
			t.Fatalf("%s: firstPosition %d", f, h.FirstPosition)
		}
		total += len(recs)
	}
	if h := files0(t, files[0]); h.File == 0 {
		t.Fatal("the head should have rotated away")
	}
	if rec.Dropped() != 0 || rec.Written() != 40 {
		t.Fatalf("dropped %d written %d", rec.Dropped(), rec.Written())
	}
}

func files0(t *testing.T, f string) TraceHeader {
	h, _ := readTrace(t, f)
	return h
}

// countAfter counts the records in files[i:].
func countAfter(t *testing.T, files []string, i int) int {
	n := 0
	for _, f := range files[i:] {
		_, recs := readTrace(t, f)
		n += len(recs)
	}
	return n
}

// A full buffer drops (never waits), counts, and marks the gap with the position reached.
func TestRecorderDropsAndMarksTheGap(t *testing.T) {
	drops := 0
	rec := newTestRecorder(t, TraceOptions{Buffer: 1, OnDrop: func() { drops++ }})
	// One slot: sends while the writer is in a write (a syscall per record: it flushes whenever
	// the channel is empty) are dropped; this many make drops certain.
	const n = 20000
	for i := 0; i < n; i++ {
		rec.Assume("ns", fmt.Sprintf("p%d", i), "node")
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if rec.Dropped() == 0 {
		t.Fatal("no record dropped with a one-record buffer")
	}
	if uint64(drops) != rec.Dropped() {
		t.Fatalf("OnDrop called %d times, dropped %d", drops, rec.Dropped())
	}
	files, _ := TraceFiles(rec.opts.Dir)
	_, recs := readTrace(t, files[0])
	gaps, assumes := 0, 0
	for _, r := range recs {
		switch r.typ {
		case RecordGap:
			gaps++
			if binary.LittleEndian.Uint64(r.payload[8:]) > n {
				t.Fatal("gap position beyond the records sent")
			}
		case RecordAssume:
			assumes++
		}
	}
	if gaps == 0 {
		t.Fatal("drops without a gap record")
	}
	// Each drop is one payload lost (a gap record that does not fit waits for the next send).
	if uint64(assumes)+rec.Dropped() != n {
		t.Fatalf("assumes %d + dropped %d != %d", assumes, rec.Dropped(), n)
	}
}

// BenchmarkRecordDecision is the recorder's cost on the scheduling goroutine per decision: a
// packed answer of the size PreFilter returns on a 72-tray fleet (about 1.2 kB), copied and
// queued (the writer's share is in BenchmarkRecordPerPod).
func BenchmarkRecordDecision(b *testing.B) {
	rec, err := NewTraceRecorder(TraceOptions{Dir: b.TempDir(), Buffer: 1 << 14})
	if err != nil {
		b.Fatal(err)
	}
	defer rec.Close()
	answer := bytes.Repeat([]byte{1}, 1200)
	b.ReportAllocs()
	for b.Loop() {
		rec.Decision(CallPreFilter, 1, "default", "job-7-worker-3", nil, answer, nil)
		for len(rec.ch) > cap(rec.ch)/2 {
			runtime.Gosched()
		}
	}
}

// BenchmarkRecordPerPod is the recorder's whole CPU cost (the calling goroutine and the writer,
// from getrusage) per scheduled pod: its PreFilter decision (1.2 kB answer), its Reserve, and
// the fact batch of its binding (300 B), written to disk; reported as cpu-ns/pod. The loop
// waits for the writer when it is half a buffer behind, so nothing is dropped.
func BenchmarkRecordPerPod(b *testing.B) {
	rec, err := NewTraceRecorder(TraceOptions{Dir: b.TempDir(), Buffer: 1 << 14, MaxBytes: 64 << 20, MaxFiles: 2})
	if err != nil {
		b.Fatal(err)
	}
	answer := bytes.Repeat([]byte{1}, 1200)
	batch := bytes.Repeat([]byte{2}, 300)
	before := cpuTime()
	n := 0
	for b.Loop() {
		rec.Decision(CallPreFilter, 1, "default", "job-7-worker-3", nil, answer, nil)
		rec.Assume("default", "job-7-worker-3", "tray-0-12")
		rec.Batch(batch)
		n++
		for len(rec.ch) > cap(rec.ch)/2 {
			runtime.Gosched()
		}
	}
	if err := rec.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(cpuTime()-before)/float64(n), "cpu-ns/pod")
	if rec.Dropped() > 0 {
		b.Fatalf("dropped %d", rec.Dropped())
	}
}

// cpuTime is the process's user and system CPU time in nanoseconds.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
