package facts

import (
	"math"
	"os"
	"reflect"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// Vector is one case of testdata/vectors.yaml.
type Vector struct {
	Name   string         `json:"name"`
	Object map[string]any `json:"object"`
	Facts  *struct {
		Node     *Node     `json:"node"`
		Pod      *Pod      `json:"pod"`
		Claim    *Claim    `json:"claim"`
		Template *Template `json:"template"`
		Slice    *Slice    `json:"slice"`
		Domain   *Domain   `json:"domain"`
		PodGroup *PodGroup `json:"podGroup"`
	} `json:"facts"`
	Error string `json:"error"`
}

// LoadVectors reads testdata/vectors.yaml.
func LoadVectors(t testing.TB, path string) []Vector {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var vs []Vector
	if err := yaml.UnmarshalStrict(raw, &vs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(vs) == 0 {
		t.Fatalf("%s has no vectors", path)
	}
	return vs
}

// extractAny decodes a vector's object as the informers deliver it (typed for the kinds the
// scheduler has types for, unstructured otherwise) and extracts its facts.
func extractAny(t *testing.T, obj map[string]any, k Keys) (any, error) {
	t.Helper()
	raw, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	// As the dynamic informer decodes it: integers are int64.
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(js); err != nil {
		t.Fatal(err)
	}
	switch u.GetKind() {
	case "ComputeDomain":
		return DomainOf(u, k)
	case "PodGroup":
		return PodGroupOf(u)
	}
	typed, _, err := scheme.Codecs.UniversalDeserializer().Decode(raw, nil, nil)
	if err != nil {
		t.Fatalf("decoding %s: %v", u.GetKind(), err)
	}
	switch o := typed.(type) {
	case *v1.Node:
		return NodeOf(o, k)
	case *v1.Pod:
		return PodOf(o, k)
	case *resourceapi.ResourceClaim:
		return ClaimOf(o, k)
	case *resourceapi.ResourceClaimTemplate:
		return TemplateOf(o, k)
	case *resourceapi.ResourceSlice:
		return SliceOf(o, k)
	}
	t.Fatalf("no extractor for %T", typed)
	return nil, nil
}

func TestVectors(t *testing.T) {
	for _, v := range LoadVectors(t, "testdata/vectors.yaml") {
		t.Run(v.Name, func(t *testing.T) {
			got, err := extractAny(t, v.Object, DefaultKeys)
			if v.Error != "" {
				if err == nil || err.Error() != v.Error {
					t.Fatalf("error %v, want %q", err, v.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want any
			switch f := v.Facts; {
			case f == nil:
				t.Fatal("vector has neither facts nor error")
			case f.Node != nil:
				want = *f.Node
			case f.Pod != nil:
				want = *f.Pod
			case f.Claim != nil:
				want = *f.Claim
			case f.Template != nil:
				want = *f.Template
			case f.Slice != nil:
				want = *f.Slice
			case f.Domain != nil:
				want = *f.Domain
			case f.PodGroup != nil:
				want = *f.PodGroup
			}
			if !reflect.DeepEqual(got, want) {
				gy, _ := yaml.Marshal(got)
				wy, _ := yaml.Marshal(want)
				t.Fatalf("got\n%s\nwant\n%s", gy, wy)
			}
		})
	}
}

func TestErrorsNameTheField(t *testing.T) {
	_, err := PodOf(&v1.Pod{}, DefaultKeys)
	e, ok := err.(*Error)
	if !ok || e.Field != "metadata.name" || e.Error() != "Pod <no name>: metadata.name is required" {
		t.Fatalf("got %#v", err)
	}
	u := &unstructured.Unstructured{}
	u.SetName("cd")
	u.SetNamespace("ns")
	u.SetUID("u")
	u.SetAnnotations(map[string]string{DefaultKeys.SizeAnnotation: "x"})
	_, err = DomainOf(u, DefaultKeys)
	if e, ok := err.(*Error); !ok || e.Field != "metadata.annotations[cdplace.nvidia.com/size]" {
		t.Fatalf("got %#v", err)
	}
}

// The runtime limit is the active deadline plus the termination grace period (30 s when unset)
// in milliseconds, saturating; none without a deadline. The start time is status.startTime, read
// only with a deadline.
func TestPodRuntimeLimitAndStartTime(t *testing.T) {
	started := metav1.Date(2026, 7, 1, 10, 0, 9, 0, time.UTC)
	cases := []struct {
		name            string
		deadline, grace *int64
		startTime       *metav1.Time
		limit           *int64
		startedMs       int64
	}{
		{"deadline and grace period", some(int64(600)), some(int64(30)), nil, some(int64(630_000)), 0},
		{"deadline, no grace period: 30 s", some(int64(600)), nil, nil, some(int64(630_000)), 0},
		{"deadline, grace period 0", some(int64(600)), some(int64(0)), nil, some(int64(600_000)), 0},
		// Without a deadline the start time is not a fact: the kubelet's start of the pod must
		// change nothing the policy reads.
		{"no deadline", nil, some(int64(30)), &started, nil, 0},
		{"started", some(int64(1)), nil, &started, some(int64(31_000)), 1_782_900_009_000},
		{"the sum saturates", some(int64(math.MaxInt64)), some(int64(1)), nil, some(int64(math.MaxInt64)), 0},
		{"the milliseconds saturate", some(int64(math.MaxInt64 / 1000)), some(int64(1)), nil, some(int64(math.MaxInt64)), 0},
		{"just below saturation", some(int64(math.MaxInt64/1000 - 30)), nil, nil, some(int64(math.MaxInt64 / 1000 * 1000)), 0},
		{"a negative grace period saturates low", some(int64(1)), some(int64(math.MinInt64)), nil, some(int64(math.MinInt64)), 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
				Spec:   v1.PodSpec{ActiveDeadlineSeconds: c.deadline, TerminationGracePeriodSeconds: c.grace},
				Status: v1.PodStatus{StartTime: c.startTime}}
			f, err := PodOf(p, DefaultKeys)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(f.RuntimeLimitMs, c.limit) || f.StartedMs != c.startedMs {
				t.Fatalf("runtime limit %v, started %d; want %v, %d", ptrString(f.RuntimeLimitMs), f.StartedMs, ptrString(c.limit), c.startedMs)
			}
		})
	}
}

func ptrString(v *int64) string {
	if v == nil {
		return "none"
	}
	return strconv.FormatInt(*v, 10)
}

// Pod.Equal must see a change in every field (and in every field of a claim): the feed skips an
// update whose facts are Equal, so a field it misses would be a fact that never reaches the view.
func TestPodEqualComparesEveryField(t *testing.T) {
	base := func() Pod {
		return Pod{Namespace: "ns", Name: "p", NodeName: some("n"), NominatedNodeName: some("m"),
			Claims: []PodClaim{{Name: "c", Template: some("t"), Claim: some("x"), Generated: some("g")}},
			GPUs:   4, SizeHint: some[uint32](2), PodGroup: some("pg"), Owner: some("o"), CreatedMs: 1,
			Priority: 2, RuntimeLimitMs: some[int64](3), StartedMs: 4}
	}
	a, b := base(), base()
	if !a.Equal(&b) {
		t.Fatal("equal facts must be Equal")
	}
	// change sets field i of v to another value (pointers: another value, then nil).
	var change func(v reflect.Value, path string, check func(path string))
	change = func(v reflect.Value, path string, check func(string)) {
		for i := 0; i < v.NumField(); i++ {
			f, name := v.Field(i), path+v.Type().Field(i).Name
			old := reflect.New(f.Type()).Elem()
			old.Set(f)
			switch f.Kind() {
			case reflect.String:
				f.SetString(f.String() + "-changed")
				check(name)
			case reflect.Bool:
				f.SetBool(!f.Bool())
				check(name)
			case reflect.Uint32:
				f.SetUint(f.Uint() + 1)
				check(name)
			case reflect.Int32, reflect.Int64:
				f.SetInt(f.Int() + 1)
				check(name)
			case reflect.Pointer:
				p := reflect.New(f.Type().Elem())
				p.Elem().Set(f.Elem())
				switch p.Elem().Kind() {
				case reflect.String:
					p.Elem().SetString(p.Elem().String() + "-changed")
				case reflect.Uint32:
					p.Elem().SetUint(p.Elem().Uint() + 1)
				default:
					p.Elem().SetInt(p.Elem().Int() + 1)
				}
				f.Set(p)
				check(name)
				f.Set(reflect.Zero(f.Type()))
				check(name + "=nil")
			case reflect.Slice:
				f.Set(reflect.Zero(f.Type()))
				check(name + "=nil")
				f.Set(old)
				elem := reflect.New(f.Type().Elem()).Elem()
				elem.Set(f.Index(0))
				f.Set(reflect.Append(reflect.MakeSlice(f.Type(), 0, 1), elem))
				change(f.Index(0), name+"[0].", check)
			default:
				t.Fatalf("field %s of kind %s: teach this test and Pod.Equal about it", name, f.Kind())
			}
			f.Set(old)
		}
	}
	b = base()
	change(reflect.ValueOf(&b).Elem(), "", func(path string) {
		a := base()
		if a.Equal(&b) || b.Equal(&a) {
			t.Errorf("Pod.Equal misses a change of %s", path)
		}
	})
}
