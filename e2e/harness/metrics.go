package harness

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Histogram is one Prometheus histogram series: cumulative bucket counts by upper bound.
type Histogram struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// Metrics maps "name{label=value,...}" (labels sorted) to a histogram.
type Metrics map[string]Histogram

// ScrapeHistograms reads every histogram of the given metric families from url.
func ScrapeHistograms(ctx context.Context, url string, families ...string) (Metrics, error) {
	parsed, err := scrape(ctx, url)
	if err != nil {
		return nil, err
	}
	out := Metrics{}
	for _, fam := range families {
		mf := parsed[fam]
		if mf == nil || mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		for _, m := range mf.Metric {
			h := Histogram{Count: m.Histogram.GetSampleCount(), Sum: m.Histogram.GetSampleSum(), Buckets: map[float64]uint64{}}
			for _, b := range m.Histogram.Bucket {
				h.Buckets[b.GetUpperBound()] = b.GetCumulativeCount()
			}
			out[seriesKey(fam, m)] = h
		}
	}
	return out, nil
}

// Fetch GETs url from a loopback scheduler (self-signed certificate) and writes the body to path.
func Fetch(ctx context.Context, url, path string) error {
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// Sub returns m - before, series by series (what happened between two scrapes).
func (m Metrics) Sub(before Metrics) Metrics {
	out := Metrics{}
	for k, h := range m {
		b := before[k]
		d := Histogram{Count: h.Count - b.Count, Sum: h.Sum - b.Sum, Buckets: map[float64]uint64{}}
		for ub, c := range h.Buckets {
			d.Buckets[ub] = c - b.Buckets[ub]
		}
		if d.Count > 0 {
			out[k] = d
		}
	}
	return out
}

// Merge sums the series whose key contains every one of the given substrings.
func (m Metrics) Merge(substrings ...string) Histogram {
	out := Histogram{Buckets: map[float64]uint64{}}
	for k, h := range m {
		match := true
		for _, s := range substrings {
			if !strings.Contains(k, s) {
				match = false
			}
		}
		if !match {
			continue
		}
		out.Count += h.Count
		out.Sum += h.Sum
		for ub, c := range h.Buckets {
			out.Buckets[ub] += c
		}
	}
	return out
}

// Quantile estimates the q-quantile by linear interpolation inside the bucket, as PromQL's
// histogram_quantile does. NaN when empty.
func (h Histogram) Quantile(q float64) float64 {
	if h.Count == 0 {
		return math.NaN()
	}
	bounds := make([]float64, 0, len(h.Buckets))
	for ub := range h.Buckets {
		bounds = append(bounds, ub)
	}
	sort.Float64s(bounds)
	rank := q * float64(h.Count)
	prevBound, prevCount := 0.0, uint64(0)
	for _, ub := range bounds {
		c := h.Buckets[ub]
		if float64(c) >= rank {
			if math.IsInf(ub, 1) {
				return prevBound
			}
			if c == prevCount {
				return ub
			}
			return prevBound + (ub-prevBound)*(rank-float64(prevCount))/float64(c-prevCount)
		}
		prevBound, prevCount = ub, c
	}
	return prevBound
}

// Gauges maps "name{label=value,...}" (labels sorted) to a gauge's value.
type Gauges map[string]float64

// ScrapeGauges reads every gauge of the given metric families from url.
func ScrapeGauges(ctx context.Context, url string, families ...string) (Gauges, error) {
	return scrapeValues(ctx, url, dto.MetricType_GAUGE, func(m *dto.Metric) float64 { return m.GetGauge().GetValue() }, families)
}

// scrapeValues reads every series of type typ of the given families from url, by series key.
func scrapeValues(ctx context.Context, url string, typ dto.MetricType, value func(*dto.Metric) float64, families []string) (map[string]float64, error) {
	parsed, err := scrape(ctx, url)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, fam := range families {
		mf := parsed[fam]
		if mf == nil || mf.GetType() != typ {
			continue
		}
		for _, m := range mf.Metric {
			out[seriesKey(fam, m)] = value(m)
		}
	}
	return out, nil
}

// Counters maps "name{label=value,...}" (labels sorted) to a counter's value.
type Counters map[string]float64

// ScrapeCounters reads every counter of the given metric families from url.
func ScrapeCounters(ctx context.Context, url string, families ...string) (Counters, error) {
	return scrapeValues(ctx, url, dto.MetricType_COUNTER, func(m *dto.Metric) float64 { return m.GetCounter().GetValue() }, families)
}

// MetricFamilies lists the names of the metric families url exposes now (a family appears with
// its first series), sorted.
func MetricFamilies(ctx context.Context, url string) ([]string, error) {
	parsed, err := scrape(ctx, url)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(parsed))
	for name := range parsed {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// scrape reads a /metrics endpoint (the scheduler's self-signed loopback HTTPS) into its
// metric families.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	return ScrapeWithToken(ctx, url, "")
}

// ScrapeWithToken reads a /metrics endpoint, sending token (when not empty) as a bearer token, as
// Prometheus does with a ServiceMonitor's authorization; a status other than 200 is an error
// that names it.
func ScrapeWithToken(ctx context.Context, url, token string) (map[string]*dto.MetricFamily, error) {
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // loopback, self-signed
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	parsed, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	return parsed, nil
}

// seriesKey names one series of family fam: "fam{label=value,...}", labels sorted.
func seriesKey(fam string, m *dto.Metric) string {
	var labels []string
	for _, l := range m.Label {
		labels = append(labels, l.GetName()+"="+l.GetValue())
	}
	sort.Strings(labels)
	return fam + "{" + strings.Join(labels, ",") + "}"
}
