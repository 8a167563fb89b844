package httpapi

import (
	"bytes"
	"encoding/json"

	"github.com/rotahq/rota/internal/jsonwire"
	"github.com/rotahq/rota/rotaapi"
)

// The worker protocol's hot path without reflection: the answers of a
// claim and of a batch of reports are appended by hand, byte for byte what
// encoding/json writes (TestFastEncodeMatches), and a batch of reports is
// read in one pass when it is plain (decodeFast; anything else takes the
// strict decoder, which gives the errors).

// encodeFast appends the success envelope of data to buf when data is a
// shape encoded by hand, and reports whether it was (it cannot fail).
func encodeFast(buf *bytes.Buffer, data any) bool {
	switch d := data.(type) {
	case *rotaapi.ClaimResponse:
		appendClaimEnvelope(buf, d)
		return true
	case *rotaapi.ReportsResponse:
		appendReportsEnvelope(buf, d)
		return true
	case *rotaapi.BatchSubmitResponse:
		appendBatchEnvelope(buf, d)
		return true
	}
	return false
}

const okPrefix = `{"code":0,"message":"ok","data":`

// appendClaimEnvelope appends the envelope of a claim's answer.
// A payload is written compact, as encoding/json writes a RawMessage,
// without its check: the store holds only payloads checked on submit.
func appendClaimEnvelope(buf *bytes.Buffer, c *rotaapi.ClaimResponse) {
	size := 64
	for i := range c.Tasks {
		t := &c.Tasks[i]
		size += 320 + len(t.TaskID) + len(t.RunID) + len(t.Kind) + len(t.Task) + len(t.ScheduleID)
	}
	buf.Grow(size)
	buf.WriteString(okPrefix + `{"tasks":`)
	if c.Tasks == nil {
		buf.WriteString("null")
	} else {
		buf.WriteByte('[')
		for i := range c.Tasks {
			t := &c.Tasks[i]
			b := buf.AvailableBuffer()
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"task_id":`...)
			b = jsonwire.AppendString(b, t.TaskID)
			b = append(b, `,"run_id":`...)
			b = jsonwire.AppendString(b, t.RunID)
			b = append(b, `,"kind":`...)
			b = jsonwire.AppendString(b, t.Kind)
			b = append(b, `,"priority":`...)
			b = jsonwire.AppendString(b, string(t.Priority))
			b = append(b, `,"task":`...)
			if len(t.Task) == 0 {
				b = append(b, "null"...)
			} else {
				b = jsonwire.AppendCompact(b, t.Task)
			}
			b = append(b, `,"attempt":`...)
			b = jsonwire.AppendInt(b, int64(t.Attempt))
			b = append(b, `,"heartbeat_timeout_seconds":`...)
			b = jsonwire.AppendInt(b, int64(t.HeartbeatTimeoutSeconds))
			b = append(b, `,"timeout_seconds":`...)
			b = jsonwire.AppendInt(b, int64(t.TimeoutSeconds))
			b = append(b, `,"lease_expires_at":`...)
			b = jsonwire.AppendInt(b, t.LeaseExpiresAt)
			b = append(b, `,"started_at":`...)
			b = jsonwire.AppendInt(b, t.StartedAt)
			b = append(b, `,"started_at_ms":`...)
			b = jsonwire.AppendInt(b, t.StartedAtMs)
			b = append(b, `,"schedule_id":`...)
			b = jsonwire.AppendString(b, t.ScheduleID)
			b = append(b, `,"fire_time":`...)
			b = jsonwire.AppendInt(b, t.FireTime)
			b = append(b, '}')
			buf.Write(b)
		}
		buf.WriteByte(']')
	}
	b := buf.AvailableBuffer()
	b = append(b, `,"drain":`...)
	b = jsonwire.AppendBool(b, c.Drain)
	b = append(b, `,"server_time_ms":`...)
	b = jsonwire.AppendInt(b, c.ServerTimeMs)
	b = append(b, "}}\n"...)
	buf.Write(b)
}

// appendReportsEnvelope appends the envelope of the answer to a batch of
// reports.
func appendReportsEnvelope(buf *bytes.Buffer, rr *rotaapi.ReportsResponse) {
	buf.WriteString(okPrefix + `{"results":`)
	if rr.Results == nil {
		buf.WriteString("null")
	} else {
		buf.WriteByte('[')
		for i := range rr.Results {
			r := &rr.Results[i]
			b := buf.AvailableBuffer()
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"run_id":`...)
			b = jsonwire.AppendString(b, r.RunID)
			if r.TaskID != "" {
				b = append(b, `,"task_id":`...)
				b = jsonwire.AppendString(b, r.TaskID)
			}
			if r.Status != "" {
				b = append(b, `,"status":`...)
				b = jsonwire.AppendString(b, string(r.Status))
			}
			if r.RunStatus != "" {
				b = append(b, `,"run_status":`...)
				b = jsonwire.AppendString(b, string(r.RunStatus))
			}
			if e := r.Error; e != nil {
				b = append(b, `,"error":{"code":`...)
				b = jsonwire.AppendInt(b, int64(e.Code))
				b = append(b, `,"message":`...)
				b = jsonwire.AppendString(b, e.Message)
				if e.Field != "" {
					b = append(b, `,"field":`...)
					b = jsonwire.AppendString(b, e.Field)
				}
				b = append(b, '}')
			}
			b = append(b, '}')
			buf.Write(b)
		}
		buf.WriteByte(']')
	}
	buf.WriteString("}}\n")
}

// appendBatchEnvelope appends the envelope of a batch submit's answer
// (encoding/json's reflection over its results was a twentieth of the
// server's CPU under a load of batches).
func appendBatchEnvelope(buf *bytes.Buffer, br *rotaapi.BatchSubmitResponse) {
	buf.Grow(64 + len(br.Results)*(48+32))
	b := buf.AvailableBuffer()
	b = append(b, okPrefix+`{"results":`...)
	if br.Results == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range br.Results {
			r := &br.Results[i]
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"task_id":`...)
			b = jsonwire.AppendString(b, r.TaskID)
			b = append(b, `,"existing":`...)
			b = jsonwire.AppendBool(b, r.Existing)
			b = append(b, `,"rerun":`...)
			b = jsonwire.AppendBool(b, r.Rerun)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, "}}\n"...)
	buf.Write(b)
}

// fastDecoder is implemented by requests that can read a plain body in one
// pass: decodeFast reports false, having set nothing that validate reads,
// when the body is not plain, and the strict decoder takes it.
type fastDecoder interface {
	decodeFast(data []byte) bool
}

// decodeFast reads {"worker_id":…,"reports":[{…},…]} whose strings have no
// escapes, whose keys are each known and given once, and whose values are
// not null; the results are checked as checkKeys checks them.
func (b *reportsRequest) decodeFast(data []byte) bool {
	r := jsonwire.NewReader(data)
	var (
		workerID            string
		items               []rotaapi.ReportItem
		sawWorker, sawItems bool
	)
	ok := r.Object(func(key []byte) bool {
		switch string(key) {
		case "worker_id":
			if sawWorker {
				return false
			}
			sawWorker = true
			var ok bool
			workerID, ok = r.String()
			return ok
		case "reports":
			if sawItems || r.Peek() != '[' {
				return false
			}
			sawItems = true
			items = make([]rotaapi.ReportItem, 0, 64)
			return r.Array(func() bool {
				if len(items) >= maxReports {
					return false
				}
				items = append(items, rotaapi.ReportItem{})
				return decodeReportItem(r, &items[len(items)-1])
			})
		}
		return false
	})
	if !ok || !r.End() {
		return false
	}
	b.WorkerID, b.items = workerID, items
	if b.items == nil {
		b.items = []rotaapi.ReportItem{}
	}
	return true
}

// decodeReportItem reads one plain report.
func decodeReportItem(r *jsonwire.Reader, it *rotaapi.ReportItem) bool {
	var seen uint8
	once := func(bit uint8) bool {
		if seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	}
	return r.Object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "run_id":
			if !once(1) {
				return false
			}
			it.RunID, ok = r.String()
		case "outcome":
			if !once(2) {
				return false
			}
			var s string
			s, ok = r.String()
			it.Outcome = rotaapi.Outcome(s)
		case "message":
			if !once(4) {
				return false
			}
			it.Message, ok = r.String()
		case "result":
			if !once(8) {
				return false
			}
			it.Result, ok = r.Raw()
			ok = ok && textProblem(it.Result) == ""
		case "retry":
			if !once(16) {
				return false
			}
			var v bool
			v, ok = r.Bool()
			it.Retry = &v
		}
		return ok
	})
}

// decodeFast reads a plain {"worker_id":…,"message":…,"result":…}.
func (s *succeedRequest) decodeFast(data []byte) bool {
	var v rotaapi.SucceedRequest
	if !decodeRunBody(data, &v.WorkerID, &v.Message, &v.Result, nil) {
		return false
	}
	s.SucceedRequest = v
	return true
}

// decodeFast reads a plain {"worker_id":…,"message":…,"retry":…}.
func (f *failRequest) decodeFast(data []byte) bool {
	var v rotaapi.FailRequest
	if !decodeRunBody(data, &v.WorkerID, &v.Message, nil, &v.Retry) {
		return false
	}
	f.FailRequest = v
	return true
}

// decodeRunBody reads the plain body of a single report: worker_id and
// message, and result or retry when asked for (non-nil).
func decodeRunBody(data []byte, workerID, message *string, result *json.RawMessage, retry **bool) bool {
	r := jsonwire.NewReader(data)
	var seen uint8
	ok := r.Object(func(key []byte) bool {
		var bit uint8
		var ok bool
		switch string(key) {
		case "worker_id":
			bit = 1
			*workerID, ok = r.String()
		case "message":
			bit = 2
			*message, ok = r.String()
		case "result":
			if result == nil {
				return false
			}
			bit = 4
			*result, ok = r.Raw()
			ok = ok && textProblem(*result) == ""
		case "retry":
			if retry == nil {
				return false
			}
			bit = 8
			var v bool
			v, ok = r.Bool()
			*retry = &v
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	return ok && r.End()
}
