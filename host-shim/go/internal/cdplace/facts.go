package cdplace

import (
	"encoding/binary"

	"github.com/cdplace/cdplace/host-shim/go/internal/facts"
)

// The packed facts batch, as include/cdplace.h specifies it (little-endian; str = u32 length +
// UTF-8; ostr/ou32/oi32/oi64 = u8 0 | u8 1 and the value):
//
//	batch  = "CDF3", u32 nrecords, nrecords x record
//	record = u8 op (1 upsert, 2 remove), u8 kind (cdplace_kind_t), body
//
// The Append* functions write one record each (the feed keeps each object's last record to
// drop updates that change no fact); Batch gathers records for one ApplyFacts call.

const (
	batchMagic = "CDF3"
	opUpsert   = 1
	opRemove   = 2
)

// Batch is a packed facts batch being built. The zero value is an empty batch.
type Batch struct {
	buf []byte // the header, then the records
	n   int
}

// Add appends one record (from an Append* function).
func (b *Batch) Add(record []byte) {
	if b.buf == nil {
		b.buf = make([]byte, 8, 8+len(record)+4096)
		copy(b.buf, batchMagic)
	}
	b.buf = append(b.buf, record...)
	b.n++
}

// Reset empties the batch and keeps its buffer for the next records.
func (b *Batch) Reset() {
	if b.buf != nil {
		b.buf = b.buf[:8]
	}
	b.n = 0
}

// Cap is the capacity of the batch's buffer in bytes.
func (b *Batch) Cap() int { return cap(b.buf) }

// Len is the number of records.
func (b *Batch) Len() int { return b.n }

// Size is the batch's size in bytes.
func (b *Batch) Size() int { return len(b.buf) }

// Bytes is the batch as ApplyFacts takes it; valid until the next Add.
func (b *Batch) Bytes() []byte {
	if b.buf == nil {
		b.buf = make([]byte, 8)
		copy(b.buf, batchMagic)
	}
	binary.LittleEndian.PutUint32(b.buf[4:8], uint32(b.n))
	return b.buf
}

// AppendRemove writes a removal: the namespace is "" for cluster-scoped kinds and owners, the
// name an owner's key for KindOwner.
func AppendRemove(dst []byte, k Kind, namespace, name string) []byte {
	dst = append(dst, opRemove, byte(k))
	dst = appendStr(dst, namespace)
	return appendStr(dst, name)
}

// AppendNode writes a Node upsert.
func AppendNode(dst []byte, f *facts.Node) []byte {
	dst = append(dst, opUpsert, byte(KindNode))
	dst = appendStr(dst, f.Name)
	dst = appendOStr(dst, f.CliqueLabel)
	dst = appendOStr(dst, f.DomainLabel)
	dst = appendBool(dst, f.Unschedulable)
	return binary.LittleEndian.AppendUint32(dst, f.GPUs)
}

// AppendPod writes a Pod upsert.
func AppendPod(dst []byte, f *facts.Pod) []byte {
	dst = append(dst, opUpsert, byte(KindPod))
	dst = appendStr(dst, f.Namespace)
	dst = appendStr(dst, f.Name)
	dst = appendBool(dst, f.Terminal)
	dst = appendOStr(dst, f.NodeName)
	dst = appendOStr(dst, f.NominatedNodeName)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(f.Claims)))
	for i := range f.Claims {
		c := &f.Claims[i]
		dst = appendStr(dst, c.Name)
		dst = appendOStr(dst, c.Template)
		dst = appendOStr(dst, c.Claim)
		dst = appendOStr(dst, c.Generated)
	}
	dst = binary.LittleEndian.AppendUint32(dst, f.GPUs)
	dst = appendOU32(dst, f.SizeHint)
	dst = appendOStr(dst, f.PodGroup)
	dst = appendOStr(dst, f.Owner)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(f.CreatedMs))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(f.Priority))
	dst = appendOI64(dst, f.RuntimeLimitMs)
	return binary.LittleEndian.AppendUint64(dst, uint64(f.StartedMs))
}

// AppendClaim writes a ResourceClaim upsert.
func AppendClaim(dst []byte, f *facts.Claim) []byte {
	dst = append(dst, opUpsert, byte(KindResourceClaim))
	dst = appendStr(dst, f.Namespace)
	dst = appendStr(dst, f.Name)
	dst = appendOStr(dst, f.Domain)
	dst = appendBool(dst, f.Daemon)
	dst = appendDemand(dst, f.GPUs)
	return appendOU32(dst, f.AllocatedGPUs)
}

// AppendTemplate writes a ResourceClaimTemplate upsert.
func AppendTemplate(dst []byte, f *facts.Template) []byte {
	dst = append(dst, opUpsert, byte(KindResourceClaimTemplate))
	dst = appendStr(dst, f.Namespace)
	dst = appendStr(dst, f.Name)
	dst = appendOStr(dst, f.Domain)
	dst = appendBool(dst, f.Daemon)
	return appendDemand(dst, f.GPUs)
}

// AppendSlice writes a ResourceSlice upsert.
func AppendSlice(dst []byte, f *facts.Slice) []byte {
	dst = append(dst, opUpsert, byte(KindResourceSlice))
	dst = appendStr(dst, f.Name)
	dst = appendOStr(dst, f.Node)
	dst = binary.LittleEndian.AppendUint32(dst, f.GPUs)
	dst = appendStr(dst, f.Pool)
	return binary.LittleEndian.AppendUint64(dst, uint64(f.Generation))
}

// AppendDomain writes a ComputeDomain upsert.
func AppendDomain(dst []byte, f *facts.Domain) []byte {
	dst = append(dst, opUpsert, byte(KindComputeDomain))
	dst = appendStr(dst, f.Namespace)
	dst = appendStr(dst, f.Name)
	dst = appendStr(dst, f.UID)
	dst = appendOU32(dst, f.SizeHint)
	return appendOU32(dst, f.NumNodes)
}

// AppendPodGroup writes a PodGroup upsert.
func AppendPodGroup(dst []byte, f *facts.PodGroup) []byte {
	dst = append(dst, opUpsert, byte(KindPodGroup))
	dst = appendStr(dst, f.Namespace)
	dst = appendStr(dst, f.Name)
	dst = appendOU32(dst, f.MinCount)
	return appendOI32(dst, f.Priority)
}

// AppendOwner writes an Owner upsert.
func AppendOwner(dst []byte, f *facts.Owner) []byte {
	dst = append(dst, opUpsert, byte(KindOwner))
	dst = appendStr(dst, f.Key)
	dst = appendOU32(dst, f.Size)
	dst = appendStr(dst, f.Source)
	return appendOI32(dst, f.Priority)
}

func appendStr(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func appendOStr(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, 0)
	}
	return appendStr(append(dst, 1), *s)
}

func appendOU32(dst []byte, v *uint32) []byte {
	if v == nil {
		return append(dst, 0)
	}
	return binary.LittleEndian.AppendUint32(append(dst, 1), *v)
}

func appendOI32(dst []byte, v *int32) []byte {
	if v == nil {
		return append(dst, 0)
	}
	return binary.LittleEndian.AppendUint32(append(dst, 1), uint32(*v))
}

func appendOI64(dst []byte, v *int64) []byte {
	if v == nil {
		return append(dst, 0)
	}
	return binary.LittleEndian.AppendUint64(append(dst, 1), uint64(*v))
}

func appendBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendDemand(dst []byte, d facts.GPUDemand) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, d.Count)
	return appendBool(dst, d.All)
}
