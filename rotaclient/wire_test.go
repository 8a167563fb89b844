package rotaclient

import (
	"reflect"
	"strings"
	"testing"

	"github.com/rotahq/rota/rotaapi"
)

// jsonFieldTypes returns the Go type of each JSON field of struct type t,
// as encoding/json resolves them: the fields of embedded structs are
// promoted, and the shallowest field of a name wins.
func jsonFieldTypes(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	level := []reflect.Type{t}
	for len(level) > 0 {
		var next []reflect.Type
		found := map[string]reflect.Type{}
		for _, st := range level {
			for i := range st.NumField() {
				f := st.Field(i)
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
					next = append(next, f.Type)
					continue
				}
				if !f.IsExported() || name == "-" {
					continue
				}
				if name == "" {
					name = f.Name
				}
				if _, shadowed := out[name]; !shadowed {
					found[name] = f.Type
				}
			}
		}
		for name, ft := range found {
			out[name] = ft
		}
		level = next
	}
	return out
}

// isInstant reports whether a JSON field of the API is an instant the
// client decodes into a time.Time, by the API's naming.
func isInstant(name string) bool {
	switch name {
	case "deadline", "first_seen", "last_seen", "high_water", "last_heartbeat":
		return true
	case "plan_time": // a plan's setting, kept as unix seconds (rota.PlanSpec.Time)
		return false
	}
	return strings.HasSuffix(name, "_at") || strings.HasSuffix(name, "_time")
}

// TestLenientShapes checks that each type the client decodes has exactly
// the JSON fields of its rotaapi shape, with the same types but for the
// instants, which it decodes leniently.
func TestLenientShapes(t *testing.T) {
	t.Parallel()
	pairs := map[reflect.Type]reflect.Type{
		reflect.TypeFor[taskIn]():            reflect.TypeFor[rotaapi.Task](),
		reflect.TypeFor[taskDetailIn]():      reflect.TypeFor[rotaapi.TaskDetail](),
		reflect.TypeFor[runIn]():             reflect.TypeFor[rotaapi.Run](),
		reflect.TypeFor[taskListIn]():        reflect.TypeFor[rotaapi.TaskList](),
		reflect.TypeFor[workerIn]():          reflect.TypeFor[rotaapi.Worker](),
		reflect.TypeFor[workerListIn]():      reflect.TypeFor[rotaapi.WorkerList](),
		reflect.TypeFor[workerRunIn]():       reflect.TypeFor[rotaapi.WorkerRun](),
		reflect.TypeFor[claimedIn]():         reflect.TypeFor[rotaapi.ClaimedRun](),
		reflect.TypeFor[claimResponseIn]():   reflect.TypeFor[rotaapi.ClaimResponse](),
		reflect.TypeFor[heartbeatIn]():       reflect.TypeFor[rotaapi.HeartbeatResponse](),
		reflect.TypeFor[scheduleIn]():        reflect.TypeFor[rotaapi.Schedule](),
		reflect.TypeFor[schedulePlanIn]():    reflect.TypeFor[rotaapi.SchedulePlan](),
		reflect.TypeFor[scheduleListIn]():    reflect.TypeFor[rotaapi.ScheduleList](),
		reflect.TypeFor[scheduleRunIn]():     reflect.TypeFor[rotaapi.ScheduleRun](),
		reflect.TypeFor[scheduleRunListIn](): reflect.TypeFor[rotaapi.ScheduleRunList](),
		reflect.TypeFor[triggerIn]():         reflect.TypeFor[rotaapi.TriggerResponse](),
		reflect.TypeFor[pushDeliveryIn]():    reflect.TypeFor[rotaapi.PushDelivery](),
	}
	unix, int64Type := reflect.TypeFor[unixTime](), reflect.TypeFor[int64]()
	for in, api := range pairs {
		got, want := jsonFieldTypes(in), jsonFieldTypes(api)
		for name, wt := range want {
			gt, ok := got[name]
			switch {
			case !ok:
				t.Errorf("%v lacks field %q of %v", in, name, api)
			case isInstant(name) && wt == int64Type:
				if gt != unix {
					t.Errorf("%v.%s is %v, want unixTime (an instant of %v)", in, name, gt, api)
				}
			case gt == wt:
			case (gt.Kind() == reflect.Slice || gt.Kind() == reflect.Pointer) && gt.Kind() == wt.Kind() && pairs[gt.Elem()] == wt.Elem():
			default:
				t.Errorf("%v.%s is %v, want %v as in %v", in, name, gt, wt, api)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("%v has field %q, which %v lacks", in, name, api)
			}
		}
	}
}
