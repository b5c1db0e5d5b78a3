package cdplace

// The decision recorder (issue 37): what the policy saw and said, for `cdplace replay`.
//
// Where: at this wrapper, so every call that changes the view (ApplyFacts, Assume, Forget) or
// decides on it (PreFilter, Steer, Preempt) is captured in the order the library saw it. A
// Cluster records only when a Recorder is set (SetRecorder); without one nothing here runs.
// With one, the view-changing calls hold the cluster's record lock exclusively and the decisions
// hold it shared, so each decision is pinned to an exact position: the number of view-changing
// records before it (a batch waits for the decisions in flight, which kube-scheduler's one
// scheduling goroutine keeps few). Each decision's policy time (now_ms) is taken here and passed
// to the library (cdplace_cluster_*_at), so replay asks again at the same time.
//
// Trace file (format version 1, all integers little-endian):
//
//	file    = "CDTR", u32 format version, u32 header length, u32 CRC-32 (IEEE) of the header,
//	          header (JSON, TraceHeader), record*
//	record  = u32 payload length, u32 CRC-32 (IEEE) of the payload, payload
//	payload = u8 type, then by type:
//	  1 batch:    the packed facts batch exactly as ApplyFacts got it (its own magic, "CDF3")
//	  2 assume:   str namespace, str name, str node
//	  3 forget:   str namespace, str name
//	  4 decision: u8 call (1 pre-filter, 2 steer, 3 preempt), u64 position, i64 now_ms,
//	              str namespace, str name (both "" for steer), bytes overlay (the packed overlay
//	              for pre-filter; one byte gpus for steer; empty for preempt), u8 ok (1: the
//	              answer, 0: the call failed), bytes answer (packed "CDP4" for pre-filter and
//	              steer, the preemption JSON for preempt; the error message when not ok)
//	  5 gap:      u64 records dropped so far, u64 position: the writer fell behind and dropped
//	              records before this one (cdplace_record_dropped_total)
//	  6 policy:   u64 generation, str digest ("sha256:<hex>"): a swap (the `policy` source) put
//	              this component in; the decisions after it are its. Written when the swap
//	              returns: a decision in flight during the swap may be the old policy's.
//	str, bytes = u32 length, that many bytes
//
// A reader stops at the first record whose length runs past the end or whose CRC fails: a
// crash leaves at most a torn tail, which is dropped ("trace torn at byte N (record K)").
//
// Bounds: records are written by one goroutine from a buffered channel; the scheduling
// goroutines never wait for the disk. When the channel is full a record is dropped and counted
// (Dropped), and a gap record marks the place. Files rotate at MaxBytes and the newest MaxFiles
// of a run are kept. Every file starts with its header (firstPosition: the position of its first
// record); only the run's first file (file 0) starts from an empty view, so replay rebuilds the
// view only when file 0 is still there, and otherwise says so and compares nothing.

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// TraceMagic opens every trace file; TraceFormat is the version of the layout above.
const (
	TraceMagic  = "CDTR"
	TraceFormat = 1
)

// The record types of a trace file.
const (
	RecordBatch    byte = 1
	RecordAssume   byte = 2
	RecordForget   byte = 3
	RecordDecision byte = 4
	RecordGap      byte = 5
	RecordPolicy   byte = 6
)

// CallKind is the policy call a decision record holds.
type CallKind byte

// The recorded calls.
const (
	CallPreFilter CallKind = 1
	CallSteer     CallKind = 2
	CallPreempt   CallKind = 3
)

// TraceHeader opens each trace file (JSON).
type TraceHeader struct {
	// Format is TraceFormat.
	Format int `json:"format"`
	// Facts and Decisions are the packed formats' magics (versions) the records hold.
	Facts     string `json:"facts"`
	Decisions string `json:"decisions"`
	// PolicyDigest is "sha256:<hex>" of the policy component that decided first (policy records
	// name the ones swapped in later).
	PolicyDigest string `json:"policyDigest"`
	// Args are the plugin args the cluster was made with (the raw JSON object).
	Args json.RawMessage `json:"args"`
	// Run names one recorder's files (its start time and process); File is this file's index in
	// the run (0: it starts from an empty view).
	Run  string `json:"run"`
	File int    `json:"file"`
	// FirstPosition is the number of view-changing records before this file's first record.
	FirstPosition uint64 `json:"firstPosition"`
	// Created is when the file was started (RFC 3339).
	Created string `json:"created"`
}

// Recorder receives every call a Cluster makes, in order. The view-changing calls are never
// concurrent with each other or with a decision; decisions may be concurrent with each other.
// Implementations must not block (TraceRecorder drops and counts instead).
type Recorder interface {
	// Batch: ApplyFacts was called with this batch (the slice is only borrowed).
	Batch(batch []byte)
	// Assume, Forget: Reserve and Unreserve.
	Assume(namespace, name, node string)
	Forget(namespace, name string)
	// Decision: a policy call and its answer (answer and overlay only borrowed; err non-nil when it failed).
	Decision(call CallKind, nowMs int64, namespace, name string, overlay, answer []byte, err error)
	// Policy: a swap made the component of this digest the deciding one, as generation.
	Policy(generation uint64, digest string)
}

// TraceOptions configure a TraceRecorder.
type TraceOptions struct {
	// Dir is the directory the files go in (made when missing).
	Dir string
	// MaxBytes: a file that reaches it is closed and the next one started.
	MaxBytes uint64
	// MaxFiles: the newest this many files of the run are kept.
	MaxFiles int
	// Buffer is how many records may wait for the writer (default 8192).
	Buffer int
	// PolicyDigest and Args go into each file's header.
	PolicyDigest string
	Args         json.RawMessage
	// OnDrop, when set, is called for each dropped record (a metric).
	OnDrop func()
}

// TraceRecorder is the Recorder that writes trace files (see the file comment).
type TraceRecorder struct {
	opts     TraceOptions
	run      string
	ch       chan []byte
	done     chan struct{}
	position atomic.Uint64 // view-changing records so far, dropped or not
	dropped  atomic.Uint64
	written  atomic.Uint64
	mu       sync.Mutex // gap bookkeeping of concurrent decisions
	gap      bool
	closed   atomic.Bool
	errMu    sync.Mutex
	err      error

	// The writer's own state.
	file     *os.File
	buf      *bufio.Writer
	index    int
	size     uint64
	files    []string
	writePos uint64
}

// NewTraceRecorder makes the directory, starts the run's first file and the writer goroutine.
func NewTraceRecorder(opts TraceOptions) (*TraceRecorder, error) {
	if opts.Dir == "" {
		return nil, errors.New("cdplace: the recorder needs a directory")
	}
	if opts.MaxBytes == 0 {
		opts.MaxBytes = 64 << 20
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = 8
	}
	if opts.Buffer <= 0 {
		opts.Buffer = 8192
	}
	if len(opts.Args) == 0 {
		opts.Args = json.RawMessage("{}")
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return nil, fmt.Errorf("cdplace: recordPath: %w", err)
	}
	r := &TraceRecorder{
		opts: opts,
		run:  fmt.Sprintf("%s-%d", time.Now().UTC().Format("20060102T150405.000Z"), os.Getpid()),
		ch:   make(chan []byte, opts.Buffer),
		done: make(chan struct{}),
	}
	if err := r.startFile(); err != nil {
		return nil, err
	}
	go r.writer()
	return r, nil
}

// Dropped is how many records were dropped because the writer fell behind.
func (r *TraceRecorder) Dropped() uint64 { return r.dropped.Load() }

// Written is how many records reached the file buffer.
func (r *TraceRecorder) Written() uint64 { return r.written.Load() }

// Err is the first write error (the recorder stops writing after it), nil when none.
func (r *TraceRecorder) Err() error {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	return r.err
}

// Close writes what is queued, flushes and closes the file. Calls after it are ignored.
func (r *TraceRecorder) Close() error {
	if r.closed.Swap(true) {
		return r.Err()
	}
	r.mu.Lock()
	// Records dropped at the tail, with no send after them to carry the gap record: closing may
	// wait for the writer, so the gap is marked whatever the writer's pace.
	if r.gap {
		r.ch <- r.gapRecord()
		r.gap = false
	}
	close(r.ch)
	r.mu.Unlock()
	<-r.done
	return r.Err()
}

// Batch implements Recorder.
func (r *TraceRecorder) Batch(batch []byte) {
	p := make([]byte, 1+len(batch))
	p[0] = RecordBatch
	copy(p[1:], batch)
	r.viewChange(p)
}

// Assume implements Recorder.
func (r *TraceRecorder) Assume(namespace, name, node string) {
	p := make([]byte, 0, 1+12+len(namespace)+len(name)+len(node))
	p = append(p, RecordAssume)
	p = appendStr(appendStr(appendStr(p, namespace), name), node)
	r.viewChange(p)
}

// Forget implements Recorder.
func (r *TraceRecorder) Forget(namespace, name string) {
	p := make([]byte, 0, 1+8+len(namespace)+len(name))
	p = append(p, RecordForget)
	p = appendStr(appendStr(p, namespace), name)
	r.viewChange(p)
}

// Decision implements Recorder.
func (r *TraceRecorder) Decision(call CallKind, nowMs int64, namespace, name string, overlay, answer []byte, err error) {
	ok := byte(1)
	if err != nil {
		ok, answer = 0, []byte(err.Error())
	}
	p := make([]byte, 0, 1+1+8+8+16+len(namespace)+len(name)+len(overlay)+1+len(answer))
	p = append(p, RecordDecision, byte(call))
	p = binary.LittleEndian.AppendUint64(p, r.position.Load())
	p = binary.LittleEndian.AppendUint64(p, uint64(nowMs))
	p = appendStr(appendStr(p, namespace), name)
	p = appendBytes(p, overlay)
	p = append(p, ok)
	p = appendBytes(p, answer)
	r.send(p)
}

// Policy implements Recorder.
func (r *TraceRecorder) Policy(generation uint64, digest string) {
	p := make([]byte, 0, 1+8+4+len(digest))
	p = append(p, RecordPolicy)
	p = binary.LittleEndian.AppendUint64(p, generation)
	p = appendStr(p, digest)
	r.send(p)
}

// viewChange counts a view-changing record (also when it is dropped: replay sees the position
// jump) and queues it.
func (r *TraceRecorder) viewChange(p []byte) {
	r.position.Add(1)
	r.send(p)
}

// send queues a payload without ever waiting: full means dropped, counted, and a gap record
// before the next one that fits.
func (r *TraceRecorder) send(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() {
		return
	}
	if r.gap {
		select {
		case r.ch <- r.gapRecord():
			r.gap = false
		default:
			r.drop()
			return
		}
	}
	select {
	case r.ch <- p:
	default:
		r.drop()
		r.gap = true
	}
}

// gapRecord is the record marking drops: the count so far and the position reached.
func (r *TraceRecorder) gapRecord() []byte {
	g := []byte{RecordGap}
	g = binary.LittleEndian.AppendUint64(g, r.dropped.Load())
	return binary.LittleEndian.AppendUint64(g, r.position.Load())
}

func (r *TraceRecorder) drop() {
	r.dropped.Add(1)
	if r.opts.OnDrop != nil {
		r.opts.OnDrop()
	}
}

func (r *TraceRecorder) writer() {
	defer close(r.done)
	for p := range r.ch {
		if r.Err() != nil {
			continue
		}
		if err := r.write(p); err != nil {
			r.fail(err)
			continue
		}
		if len(r.ch) == 0 {
			if err := r.buf.Flush(); err != nil {
				r.fail(err)
			}
		}
	}
	if r.Err() == nil {
		if err := r.buf.Flush(); err != nil {
			r.fail(err)
		}
	}
	if err := r.file.Close(); err != nil && r.Err() == nil {
		r.fail(err)
	}
}

func (r *TraceRecorder) fail(err error) {
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if r.err == nil {
		r.err = fmt.Errorf("cdplace: recording to %s: %w", r.opts.Dir, err)
	}
}

func (r *TraceRecorder) write(p []byte) error {
	var h [8]byte
	binary.LittleEndian.PutUint32(h[:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(h[4:], crc32.ChecksumIEEE(p))
	if _, err := r.buf.Write(h[:]); err != nil {
		return err
	}
	if _, err := r.buf.Write(p); err != nil {
		return err
	}
	r.written.Add(1)
	r.size += uint64(len(h) + len(p))
	switch p[0] {
	case RecordBatch, RecordAssume, RecordForget:
		r.writePos++
	case RecordGap:
		r.writePos = binary.LittleEndian.Uint64(p[9:])
	}
	if r.size >= r.opts.MaxBytes {
		return r.rotate()
	}
	return nil
}

func (r *TraceRecorder) rotate() error {
	if err := r.buf.Flush(); err != nil {
		return err
	}
	if err := r.file.Close(); err != nil {
		return err
	}
	r.index++
	if err := r.startFile(); err != nil {
		return err
	}
	for len(r.files) > r.opts.MaxFiles {
		if err := os.Remove(r.files[0]); err != nil && !os.IsNotExist(err) {
			return err
		}
		r.files = r.files[1:]
	}
	return nil
}

// TraceFileName is the name of file index of a run: names sort by run, then index.
func TraceFileName(run string, index int) string {
	return fmt.Sprintf("cdplace-%s-%06d.cdtr", run, index)
}

func (r *TraceRecorder) startFile() error {
	path := filepath.Join(r.opts.Dir, TraceFileName(r.run, r.index))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("cdplace: recordPath: %w", err)
	}
	hdr, err := json.Marshal(TraceHeader{
		Format: TraceFormat, Facts: batchMagic, Decisions: decisionMagic,
		PolicyDigest: r.opts.PolicyDigest, Args: r.opts.Args, Run: r.run, File: r.index,
		FirstPosition: r.writePos, Created: time.Now().UTC().Format(time.RFC3339Nano),
	})
	if err != nil {
		_ = f.Close()
		return err
	}
	b := make([]byte, 0, 16+len(hdr))
	b = append(b, TraceMagic...)
	b = binary.LittleEndian.AppendUint32(b, TraceFormat)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(hdr)))
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(hdr))
	b = append(b, hdr...)
	r.file, r.buf, r.size = f, bufio.NewWriterSize(f, 256<<10), uint64(len(b))
	r.files = append(r.files, path)
	_, err = r.buf.Write(b)
	return err
}

// TraceFiles lists the trace files in dir of its newest run, in order.
func TraceFiles(dir string) ([]string, error) {
	m, err := filepath.Glob(filepath.Join(dir, "cdplace-*.cdtr"))
	if err != nil {
		return nil, err
	}
	sort.Strings(m)
	if len(m) == 0 {
		return nil, nil
	}
	run := runOf(m[len(m)-1])
	var out []string
	for _, f := range m {
		if runOf(f) == run {
			out = append(out, f)
		}
	}
	return out, nil
}

func runOf(path string) string {
	b := filepath.Base(path)
	return b[:len(b)-len("-000000.cdtr")]
}

func appendBytes(p, b []byte) []byte {
	p = binary.LittleEndian.AppendUint32(p, uint32(len(b)))
	return append(p, b...)
}
