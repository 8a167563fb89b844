package events

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rotahq/rota"
)

// ThroughputWindow is how far back the throughput series goes.
const ThroughputWindow = time.Hour

// counts are one minute's run starts and ends of one kind.
type counts struct {
	Started, Succeeded, Failed int
}

// throughput counts run starts, successes and failures per minute and
// kind over the last ThroughputWindow. It is guarded by the Hub's mutex.
type throughput struct {
	minutes map[int64]map[string]*counts // by unix minute, then kind
}

func newThroughput() *throughput {
	return &throughput{minutes: map[int64]map[string]*counts{}}
}

// add counts a run event in the minute of its time.
func (t *throughput) add(ev rota.Event, now time.Time) {
	if ev.Type != rota.EventRun {
		return
	}
	var field func(*counts) *int
	switch ev.Status {
	case rota.StatusRunning:
		field = func(c *counts) *int { return &c.Started }
	case rota.StatusSuccess:
		field = func(c *counts) *int { return &c.Succeeded }
	case rota.StatusFailed, rota.StatusTimeout:
		field = func(c *counts) *int { return &c.Failed }
	default:
		return
	}
	oldest := now.Add(-ThroughputWindow).Unix() / 60
	for m := range t.minutes {
		if m <= oldest {
			delete(t.minutes, m)
		}
	}
	m := ev.Time.Unix() / 60
	if m <= oldest {
		return
	}
	byKind := t.minutes[m]
	if byKind == nil {
		byKind = map[string]*counts{}
		t.minutes[m] = byKind
	}
	c := byKind[ev.Kind]
	if c == nil {
		c = &counts{}
		byKind[ev.Kind] = c
	}
	*field(c)++
}

// Bucket is one minute of the throughput series.
type Bucket struct {
	Time      int64 `json:"time"`      // the minute's start, unix seconds
	Started   int   `json:"started"`   // runs started
	Succeeded int   `json:"succeeded"` // runs that ended SUCCESS
	Failed    int   `json:"failed"`    // runs that ended FAILED or TIMEOUT
}

// Throughput returns the last 60 minutes of run starts, successes and
// failures seen by this Hub, oldest first, the last bucket being the
// current minute; kinds, when not empty, keeps only those kinds. Counts
// begin when the Hub was created.
func (h *Hub) Throughput(kinds []string) []Bucket {
	now := h.cfg.Now()
	last := now.Unix() / 60
	n := int64(ThroughputWindow / time.Minute)
	out := make([]Bucket, 0, n)
	h.mu.Lock()
	defer h.mu.Unlock()
	for m := last - n + 1; m <= last; m++ {
		b := Bucket{Time: m * 60}
		for k, c := range h.rates.minutes[m] {
			if len(kinds) > 0 && !slices.Contains(kinds, k) {
				continue
			}
			b.Started += c.Started
			b.Succeeded += c.Succeeded
			b.Failed += c.Failed
		}
		out = append(out, b)
	}
	return out
}

// throughputResponse is the data of GET /api/stats/throughput.
type throughputResponse struct {
	Buckets []Bucket `json:"buckets"`
}

// ThroughputHandler serves GET /api/stats/throughput?kinds=a,b: the
// per-minute series of Throughput in the API's envelope.
func (h *Hub) ThroughputHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeError(w, rota.Errorf(rota.CodeMethod, "method %s is not allowed on %s; allowed: GET, HEAD", r.Method, r.URL.Path))
			return
		}
		f, _, err := parseQuery(r, false)
		if err != nil {
			writeError(w, err)
			return
		}
		writeData(w, throughputResponse{Buckets: h.Throughput(f.Kinds)})
	})
}

// parseQuery reads the query parameters: kinds, a comma-separated list of
// kind names (possibly repeated), and, when withID (the stream),
// last_event_id, types and task_id. Any other parameter is refused.
func parseQuery(r *http.Request, withID bool) (f Filter, lastID uint64, err error) {
	kinds, types, lastID, err := parseLists(r, withID)
	if err != nil {
		return Filter{}, 0, err
	}
	f = Filter{Kinds: kinds, Types: types}
	if vs, ok := r.URL.Query()["task_id"]; ok && withID {
		if len(vs) > 1 {
			return Filter{}, 0, rota.Invalid("task_id", "is given %d times; give it once", len(vs))
		}
		if f.TaskID = vs[0]; !rota.ValidID(f.TaskID) && f.TaskID != "" {
			return Filter{}, 0, rota.Invalid("task_id", "must be a task id (32 lowercase hex characters), got %q", f.TaskID)
		}
	}
	return f, lastID, nil
}

// parseLists reads the parameters of parseQuery but task_id.
func parseLists(r *http.Request, withID bool) (kinds []string, types []string, lastID uint64, err error) {
	for name, vs := range r.URL.Query() {
		switch {
		case name == "task_id" && withID: // parseQuery's
		case name == "kinds":
			for _, v := range vs {
				for k := range strings.SplitSeq(v, ",") {
					if k = strings.TrimSpace(k); k == "" {
						continue
					}
					if !rota.ValidKind(k) {
						return nil, nil, 0, rota.Invalid("kinds", "must be a comma-separated list of kinds of 1 to 128 characters of A-Z a-z 0-9 _ . : -, got %q", k)
					}
					if !slices.Contains(kinds, k) {
						kinds = append(kinds, k)
					}
				}
			}
		case name == "last_event_id" && withID:
			if len(vs) > 1 {
				return nil, nil, 0, rota.Invalid(name, "is given %d times; give it once", len(vs))
			}
			if lastID, err = parseID("last_event_id", vs[0]); err != nil {
				return nil, nil, 0, err
			}
		case name == "types" && withID:
			for _, v := range vs {
				for t := range strings.SplitSeq(v, ",") {
					if t = strings.TrimSpace(t); t == "" {
						continue
					}
					if !typeRE.MatchString(t) {
						return nil, nil, 0, rota.Invalid("types", "must be a comma-separated list of event types (task) or names (task.succeeded): lower-case words of up to 64 characters, got %q", t)
					}
					if !slices.Contains(types, t) {
						types = append(types, t)
					}
				}
			}
		default:
			return nil, nil, 0, &rota.Error{Code: rota.CodeUnknownField, Message: fmt.Sprintf("unknown query parameter %q", name), Field: name}
		}
	}
	return kinds, types, lastID, nil
}

// typeRE is what an entry of the types parameter looks like: a type, or a
// type and a word (rota.Event.Name).
var typeRE = regexp.MustCompile(`^[a-z_]{1,32}(\.[a-z_]{1,31})?$`)

// parseID reads an event ID; "" is 0.
func parseID(field, s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	id, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, rota.Invalid(field, "must be an event id (a decimal integer), got %q", s)
	}
	return id, nil
}
