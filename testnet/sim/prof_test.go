package sim

import "testing"

func BenchmarkOverlayRun(b *testing.B) {
	for i := 0; i < b.N; i++ {
		p := DefaultOverlayParams()
		p.Nodes, p.Keys, p.Lookups, p.Scans = 5000, 500000, 20000, 1000
		s, err := RunOverlay(p, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(s.MessagesPerSec, "msgs/s")
	}
}
