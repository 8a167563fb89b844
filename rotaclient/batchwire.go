package rotaclient

import (
	"encoding/json"
	"strconv"

	"github.com/rotahq/rota/internal/jsonwire"
	"github.com/rotahq/rota/rotaapi"
)

// A batch submit's body and answer without reflection: json.Marshal of
// each item (which scanned and compacted its payload again) and the two
// json.Unmarshal passes over the answer were most of what a batch cost
// the client.

// appendSubmit appends w as json.Marshal writes it, but for the HTML
// escapes (the same strings). compact says w.Task is known to be valid and
// compact (json.Marshal wrote it); otherwise it is checked and compacted
// here, and a payload that is not JSON gives json.Marshal's error.
func appendSubmit(b []byte, w *rotaapi.SubmitRequest, compact bool) ([]byte, error) {
	if !compact && !json.Valid(w.Task) {
		_, err := json.Marshal(w)
		return b, err
	}
	b = append(b, `{"kind":`...)
	b = jsonwire.AppendString(b, w.Kind)
	if w.Priority != nil {
		b = append(b, `,"priority":`...)
		b = jsonwire.AppendString(b, string(*w.Priority))
	}
	b = append(b, `,"task":`...)
	switch {
	case len(w.Task) == 0:
		b = append(b, "null"...)
	case compact:
		b = append(b, w.Task...)
	default:
		b = jsonwire.AppendCompact(b, w.Task)
	}
	if w.Key != nil {
		b = append(b, `,"key":`...)
		b = jsonwire.AppendString(b, *w.Key)
	}
	if w.RerunIfFinished {
		b = append(b, `,"rerun_if_finished":true`...)
	}
	b = appendInt(b, `,"run_at":`, w.RunAt)
	b = appendInt(b, `,"run_at_ms":`, w.RunAtMS)
	b = appendInt(b, `,"delay_seconds":`, w.DelaySeconds)
	b = appendSmall(b, `,"max_retries":`, w.MaxRetries)
	b = appendSmall(b, `,"timeout_seconds":`, w.TimeoutSeconds)
	b = appendSmall(b, `,"heartbeat_timeout_seconds":`, w.HeartbeatTimeoutSeconds)
	b = appendSmall(b, `,"workers":`, w.Workers)
	b = appendStrings(b, `,"worker_ids":`, w.WorkerIDs)
	b = appendStrings(b, `,"depends_on":`, w.DependsOn)
	if w.Ref != "" {
		b = append(b, `,"ref":`...)
		b = jsonwire.AppendString(b, w.Ref)
	}
	return append(b, '}'), nil
}

// appendInt appends key and *n unless n is nil (omitempty).
func appendInt(b []byte, key string, n *int64) []byte {
	if n == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), *n, 10)
}

// appendSmall is appendInt for an *int.
func appendSmall(b []byte, key string, n *int) []byte {
	if n == nil {
		return b
	}
	return strconv.AppendInt(append(b, key...), int64(*n), 10)
}

// appendStrings appends key and ss unless ss is empty (omitempty).
func appendStrings(b []byte, key string, ss []string) []byte {
	if len(ss) == 0 {
		return b
	}
	b = append(b, key...)
	b = append(b, '[')
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonwire.AppendString(b, s)
	}
	return append(b, ']')
}

// decodeBatchFast decodes a plain answer to a batch submit.
func decodeBatchFast(raw []byte) ([]SubmitResult, bool) {
	out := make([]SubmitResult, 0, 128)
	ok, saw := decodeResultsFast(raw, func(r *jsonwire.Reader) bool {
		out = append(out, SubmitResult{})
		return decodeSubmitResultFast(r, &out[len(out)-1])
	})
	return out, ok && saw
}

// decodeResultsFast decodes a plain answer whose data is {"results":
// [...]}, calling item for each element. ok: the answer was plain and
// item accepted every element; saw: it had its results.
func decodeResultsFast(raw []byte, item func(r *jsonwire.Reader) bool) (ok, saw bool) {
	ok = envelopeData(raw, func(r *jsonwire.Reader) bool {
		return r.Object(func(key []byte) bool {
			if string(key) != "results" || saw || r.Peek() != '[' {
				return false
			}
			saw = true
			return r.Array(func() bool { return item(r) })
		})
	})
	return ok, saw
}

// decodeSubmitResultFast decodes one result of a batch submit.
func decodeSubmitResultFast(r *jsonwire.Reader, res *SubmitResult) bool {
	var seen uint8
	return r.Object(func(key []byte) bool {
		var bit uint8
		var ok bool
		switch string(key) {
		case "task_id":
			bit = 1
			res.TaskID, ok = r.String()
		case "existing":
			bit = 2
			res.Existing, ok = r.Bool()
		case "rerun":
			bit = 4
			res.Rerun, ok = r.Bool()
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
}
