package rotaclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/jsonwire"
	"github.com/rotahq/rota/rotaapi"
)

// The worker protocol's hot path without reflection: a claim's answer and
// a batch of reports (and its answer) are read and written by hand when
// they are plain (jsonwire); anything else is decoded with encoding/json
// as before (decodeResponse), so the results and the errors do not change.

// claim sends a claim and decodes its answer.
func (c *Client) claim(ctx context.Context, in rotaapi.ClaimRequest) (ClaimResult, error) {
	const path = "/api/workers/claim"
	body, err := json.Marshal(in)
	if err != nil {
		return ClaimResult{}, fmt.Errorf("rotaclient: POST %s: encode body: %w", path, err)
	}
	status, raw, err := c.send(ctx, http.MethodPost, path, true, body)
	if err != nil {
		return ClaimResult{}, err
	}
	if status < 300 {
		if res, ok := decodeClaimFast(raw); ok {
			return res, nil
		}
	}
	var out claimResponseIn
	if err := decodeResponse(http.MethodPost, path, status, raw, &out); err != nil {
		return ClaimResult{}, err
	}
	res := ClaimResult{Drain: out.Drain}
	if out.ServerTimeMs > 0 {
		res.ServerTime = time.UnixMilli(out.ServerTimeMs).UTC()
	}
	for i := range out.Tasks {
		res.Runs = append(res.Runs, out.Tasks[i].claimed())
	}
	return res, nil
}

// envelopeData reads a success envelope {"code":0,"message":…,"data":…},
// calling data to read its data; false if raw is anything else.
func envelopeData(raw []byte, data func(r *jsonwire.Reader) bool) bool {
	r := jsonwire.NewReader(raw)
	var sawCode, sawMessage, sawData bool
	ok := r.Object(func(key []byte) bool {
		switch string(key) {
		case "code":
			n, ok := r.Int()
			if !ok || n != 0 || sawCode {
				return false
			}
			sawCode = true
			return true
		case "message":
			_, ok := r.String()
			if !ok || sawMessage {
				return false
			}
			sawMessage = true
			return true
		case "data":
			if sawData || r.Peek() != '{' {
				return false
			}
			sawData = true
			return data(r)
		}
		return false
	})
	return ok && sawData && r.End()
}

// unixInstant is what unixTime decodes from whole seconds n.
func unixInstant(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(n, 0).UTC()
}

// decodeClaimFast decodes a plain answer to a claim.
func decodeClaimFast(raw []byte) (ClaimResult, bool) {
	var res ClaimResult
	var sawTasks, sawDrain, sawTime bool
	ok := envelopeData(raw, func(r *jsonwire.Reader) bool {
		return r.Object(func(key []byte) bool {
			var ok bool
			switch string(key) {
			case "tasks":
				if sawTasks || r.Peek() != '[' {
					return false
				}
				sawTasks = true
				res.Runs = nil
				var kind, prio string
				return r.Array(func() bool {
					c, ok := decodeClaimedFast(r, &kind, &prio)
					res.Runs = append(res.Runs, c)
					return ok
				})
			case "drain":
				if sawDrain {
					return false
				}
				sawDrain = true
				res.Drain, ok = r.Bool()
			case "server_time_ms":
				if sawTime {
					return false
				}
				sawTime = true
				var ms int64
				ms, ok = r.Int()
				res.ServerTime = time.Time{}
				if ms > 0 {
					res.ServerTime = time.UnixMilli(ms).UTC()
				}
			}
			return ok
		})
	})
	return res, ok
}

// decodeClaimedFast decodes one plain run of a claim's answer; kind and
// prio hold the previous run's, whose strings it reuses.
func decodeClaimedFast(r *jsonwire.Reader, kind, prio *string) (rota.ClaimedRun, bool) {
	var c rota.ClaimedRun
	var startedAt, startedAtMs int64
	var seen uint16
	ok := r.Object(func(key []byte) bool {
		var bit uint16
		var ok bool
		var n int64
		switch string(key) {
		case "task_id":
			bit = 1 << 0
			c.TaskID, ok = r.String()
		case "run_id":
			bit = 1 << 1
			c.RunID, ok = r.String()
		case "kind":
			bit = 1 << 2
			c.Kind, ok = r.StringReuse(kind)
		case "priority":
			bit = 1 << 3
			var p string
			p, ok = r.StringReuse(prio)
			c.Priority = rota.Priority(p)
		case "task":
			bit = 1 << 4
			var v []byte
			v, ok = r.Raw()
			c.Payload = bytes.Clone(v)
		case "attempt":
			bit = 1 << 5
			n, ok = r.Int()
			c.Attempt = int(n)
		case "heartbeat_timeout_seconds":
			bit = 1 << 6
			n, ok = r.Int()
			c.HeartbeatTimeoutSeconds = int(n)
		case "timeout_seconds":
			bit = 1 << 7
			n, ok = r.Int()
			c.TimeoutSeconds = int(n)
		case "lease_expires_at":
			bit = 1 << 8
			n, ok = r.Int()
			c.LeaseExpiresAt = unixInstant(n)
		case "started_at":
			bit = 1 << 9
			startedAt, ok = r.Int()
		case "started_at_ms":
			bit = 1 << 10
			startedAtMs, ok = r.Int()
		case "schedule_id":
			bit = 1 << 11
			c.ScheduleID, ok = r.String()
		case "fire_time":
			bit = 1 << 12
			n, ok = r.Int()
			c.FireTime = unixInstant(n)
		}
		if !ok || seen&bit != 0 || n != int64(int(n)) {
			return false
		}
		seen |= bit
		return true
	})
	c.StartedAt = unixInstant(startedAt)
	if startedAtMs > 0 {
		c.StartedAt = time.UnixMilli(startedAtMs).UTC()
	}
	return c, ok
}

// reportsBody encodes the body of POST /api/runs/reports as
// json.Marshal(rotaapi.ReportsRequest) would, but for the HTML escapes
// (the same strings). A report with a result is encoded by reportItem.
func reportsBody(workerID string, reports []Report) ([]byte, error) {
	b := make([]byte, 0, 64+len(reports)*80)
	b = append(b, `{"worker_id":`...)
	b = jsonwire.AppendString(b, workerID)
	b = append(b, `,"reports":[`...)
	for i, r := range reports {
		if i > 0 {
			b = append(b, ',')
		}
		if r.Result != nil {
			raw, err := reportItem(i, r)
			if err != nil {
				return nil, err
			}
			b = append(b, raw...)
			continue
		}
		if r.NoRetry && r.Outcome != OutcomeFail {
			return nil, rota.Invalid(fmt.Sprintf("reports[%d].retry", i), "retry goes only with outcome %q", OutcomeFail)
		}
		b = append(b, `{"run_id":`...)
		b = jsonwire.AppendString(b, r.RunID)
		b = append(b, `,"outcome":`...)
		b = jsonwire.AppendString(b, string(r.Outcome))
		if r.Message != "" {
			b = append(b, `,"message":`...)
			b = jsonwire.AppendString(b, r.Message)
		}
		if r.Outcome == OutcomeFail {
			b = append(b, `,"retry":`...)
			b = jsonwire.AppendBool(b, !r.NoRetry)
		}
		b = append(b, '}')
	}
	return append(b, "]}"...), nil
}

// decodeReportsFast decodes a plain answer to a batch of reports, whose
// results carry no error. runIDs are the reports' run ids, in order (nil:
// unknown): a result's run id that is the same is the report's string (no
// allocation).
func decodeReportsFast(raw []byte, runIDs func(i int) string) ([]rotaapi.ReportResult, bool) {
	var out []rotaapi.ReportResult
	var status, runStatus string
	ok, _ := decodeResultsFast(raw, func(r *jsonwire.Reader) bool {
		var runID string
		if runIDs != nil {
			runID = runIDs(len(out))
		}
		out = append(out, rotaapi.ReportResult{})
		return decodeReportResultFast(r, &out[len(out)-1], runID, &status, &runStatus)
	})
	return out, ok
}

// decodeReportResultFast decodes one result without an error. runID is
// the run id expected ("" if unknown), status and runStatus hold the
// previous result's: their strings are reused.
func decodeReportResultFast(r *jsonwire.Reader, res *rotaapi.ReportResult, runID string, status, runStatus *string) bool {
	var seen uint8
	return r.Object(func(key []byte) bool {
		var bit uint8
		var ok bool
		var s string
		switch string(key) {
		case "run_id":
			bit = 1
			res.RunID, ok = r.StringReuse(&runID)
		case "task_id":
			bit = 2
			res.TaskID, ok = r.String()
		case "status":
			bit = 4
			s, ok = r.StringReuse(status)
			res.Status = rota.Status(s)
		case "run_status":
			bit = 8
			s, ok = r.StringReuse(runStatus)
			res.RunStatus = rota.Status(s)
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}
