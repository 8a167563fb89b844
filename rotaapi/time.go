package rotaapi

import "time"

// Unix returns t as the API writes an instant: unix seconds, 0 for the
// zero time.
func Unix(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

// Time returns the instant of sec unix seconds, in UTC; 0 gives the zero time:
// the inverse of Unix for whole seconds.
func Time(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return time.Unix(sec, 0).UTC()
}
