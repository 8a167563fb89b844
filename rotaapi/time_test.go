package rotaapi_test

import (
	"testing"
	"time"

	"github.com/rotahq/rota/rotaapi"
)

func TestUnixAndTime(t *testing.T) {
	t.Parallel()
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		in   time.Time
		sec  int64
		back time.Time
	}{
		{"zero is unset", time.Time{}, 0, time.Time{}},
		{"whole seconds", time.Unix(1700000000, 0).In(paris), 1700000000, time.Unix(1700000000, 0).UTC()},
		{"fractions are cut", time.Unix(1700000000, 999_999_999), 1700000000, time.Unix(1700000000, 0).UTC()},
		{"before 1970", time.Unix(-86400, 0), -86400, time.Unix(-86400, 0).UTC()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sec := rotaapi.Unix(tt.in)
			if sec != tt.sec {
				t.Fatalf("Unix(%v) = %d, want %d", tt.in, sec, tt.sec)
			}
			back := rotaapi.Time(sec)
			if !back.Equal(tt.back) || back.Location() != time.UTC || back.IsZero() != tt.back.IsZero() {
				t.Fatalf("Time(%d) = %v, want %v in UTC", sec, back, tt.back)
			}
		})
	}
}
