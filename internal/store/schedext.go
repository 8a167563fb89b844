package store

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/rotahq/rota"
)

// The schedule fields added after the first schedule schema are kept by
// both backends in two JSON text columns, options (configuration) and
// ext_state (engine state), plus an error_message column of their own
// (it is filtered on). These helpers encode and decode them the same way
// for every backend.

// scheduleOptions is the options column.
type scheduleOptions struct {
	BackoffSeconds    int `json:"backoff_s,omitempty"`
	BackoffMaxSeconds int `json:"backoff_max_s,omitempty"`
	FailureThreshold  int `json:"failure_threshold,omitempty"`
	CooldownSeconds   int `json:"cooldown_s,omitempty"`
	JitterSeconds     int `json:"jitter_s,omitempty"`
}

// scheduleExtState is the ext_state column.
type scheduleExtState struct {
	EndReason           string `json:"end_reason,omitempty"`
	ConsecutiveFailures int    `json:"failures,omitempty"`
	Circuit             string `json:"circuit,omitempty"`
	NextAllowedAt       int64  `json:"next_allowed_ms,omitempty"`
	CountedRunID        string `json:"counted_run,omitempty"`
}

// ScheduleOptionsValue returns the options column of s.
func ScheduleOptionsValue(s *rota.Schedule) string {
	b, _ := json.Marshal(scheduleOptions{
		BackoffSeconds: s.BackoffSeconds, BackoffMaxSeconds: s.BackoffMaxSeconds,
		FailureThreshold: s.FailureThreshold, CooldownSeconds: s.CooldownSeconds, JitterSeconds: s.JitterSeconds,
	})
	return string(b)
}

// ScheduleExtStateValue returns the ext_state column of st.
func ScheduleExtStateValue(st *rota.ScheduleState) string {
	var allowed int64
	if !st.NextAllowedAt.IsZero() {
		allowed = st.NextAllowedAt.UnixMilli()
	}
	b, _ := json.Marshal(scheduleExtState{
		EndReason: st.EndReason, ConsecutiveFailures: st.ConsecutiveFailures, Circuit: string(st.Circuit),
		NextAllowedAt: allowed, CountedRunID: st.CountedRunID,
	})
	return string(b)
}

// ScheduleDecodeExt sets the fields of s kept in the options and ext_state
// columns and in error_message.
func ScheduleDecodeExt(s *rota.Schedule, options, extState, errorMessage string) error {
	var o scheduleOptions
	if options != "" {
		if err := json.Unmarshal([]byte(options), &o); err != nil {
			return fmt.Errorf("schedule %s: decode options: %w", s.ID, err)
		}
	}
	var x scheduleExtState
	if extState != "" {
		if err := json.Unmarshal([]byte(extState), &x); err != nil {
			return fmt.Errorf("schedule %s: decode state: %w", s.ID, err)
		}
	}
	s.BackoffSeconds, s.BackoffMaxSeconds = o.BackoffSeconds, o.BackoffMaxSeconds
	s.FailureThreshold, s.CooldownSeconds, s.JitterSeconds = o.FailureThreshold, o.CooldownSeconds, o.JitterSeconds
	s.EndReason, s.ConsecutiveFailures, s.Circuit, s.CountedRunID = x.EndReason, x.ConsecutiveFailures, rota.Circuit(x.Circuit), x.CountedRunID
	s.NextAllowedAt = time.Time{}
	if x.NextAllowedAt != 0 {
		s.NextAllowedAt = time.UnixMilli(x.NextAllowedAt).UTC()
	}
	s.ErrorMessage = errorMessage
	return nil
}

// ScheduleStateFilter returns the SQL condition (both backends' dialects
// agree on it) of a ScheduleListParams.State value; "" for any state.
func ScheduleStateFilter(state string) string {
	switch state {
	case rota.StateError:
		return ` AND error_message <> ''`
	case rota.StateEnded:
		return ` AND error_message = '' AND ended`
	case rota.StatePaused:
		return ` AND error_message = '' AND NOT ended AND NOT enabled`
	case rota.StateActive:
		return ` AND error_message = '' AND NOT ended AND enabled`
	}
	return ""
}
