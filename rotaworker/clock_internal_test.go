package rotaworker

import (
	"testing"
	"time"
)

func TestHandedOver(t *testing.T) {
	t.Parallel()
	recv := time.Now() // with a monotonic reading, as the worker's
	server := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name               string
		serverNow, started time.Time
		want               time.Duration // from recv
	}{
		{"old server: no times", time.Time{}, time.Time{}, 0},
		{"no start", server, time.Time{}, 0},
		{"started as it answered", server, server, 0},
		{"started 250ms before it answered", server, server.Add(-250 * time.Millisecond), -250 * time.Millisecond},
		// The server's clock an hour off: only the difference counts.
		{"clock skew", server.Add(time.Hour), server.Add(time.Hour - time.Second), -time.Second},
		{"start after its answer (bad clock): never later than recv", server, server.Add(time.Second), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := handedOver(recv, tt.serverNow, tt.started)
			if d := got.Sub(recv); d != tt.want {
				t.Errorf("handedOver = recv%+v, want recv%+v", d, tt.want)
			}
		})
	}
}
