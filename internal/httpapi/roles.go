package httpapi

import "github.com/rotahq/rota"

// The patterns of the routes a server adds through Config.Handlers; they
// are in the role table like the API's own.
const (
	RouteEvents     = "GET /api/events"
	RouteThroughput = "GET /api/stats/throughput"
	RouteMetrics    = "GET /metrics"
)

// permission is what a route needs of a principal's role.
type permission int

const (
	permOpen    permission = iota // no credentials: health probes
	permRead                      // any role
	permSubmit                    // submitter, operator, admin
	permWork                      // worker, operator, admin
	permOperate                   // operator, admin
	permAdmin                     // admin
)

// String names the permission in 403 messages.
func (p permission) String() string {
	switch p {
	case permOpen:
		return "nothing"
	case permRead:
		return "any role"
	case permSubmit:
		return "role submitter, operator or admin"
	case permWork:
		return "role worker, operator or admin"
	case permOperate:
		return "role operator or admin"
	}
	return "role admin"
}

// roleAllows reports whether role grants perm.
func roleAllows(role rota.Role, perm permission) bool {
	switch perm {
	case permOpen:
		return true
	case permRead:
		return role.Valid()
	case permSubmit:
		return role == rota.RoleSubmitter || role == rota.RoleOperator || role == rota.RoleAdmin
	case permWork:
		return role == rota.RoleWorker || role == rota.RoleOperator || role == rota.RoleAdmin
	case permOperate:
		return role == rota.RoleOperator || role == rota.RoleAdmin
	}
	return role == rota.RoleAdmin
}

// policy is a route's entry in the role table: the permission it needs
// and, for an operator's change, the audit action it records.
type policy struct {
	perm  permission
	audit string // "" for routes that are not audited
}

// routePolicies is the role table: one entry per route of the router,
// keyed by the route's own pattern (the string given to mount). A route
// without an entry is refused to everyone but admins (and
// TestRouteTableCoversRoutes fails). Task submits and the worker protocol
// are the workload: they are not audited.
func routePolicies() map[string]policy {
	return map[string]policy{
		// Open: orchestrators' probes.
		"GET /api/healthz": {perm: permOpen},
		"GET /api/readyz":  {perm: permOpen},

		// Reads.
		"GET /api/tasks":               {perm: permRead},
		"GET /api/tasks/counts":        {perm: permRead},
		"GET /api/tasks/{id}":          {perm: permRead},
		"GET /api/tasks/bulk/{id}":     {perm: permRead},
		"GET /api/stats/history":       {perm: permRead},
		"GET /api/kinds":               {perm: permRead},
		"GET /api/kinds/{kind}":        {perm: permRead},
		"GET /api/workers":             {perm: permRead},
		"GET /api/stats":               {perm: permRead},
		"GET /api/version":             {perm: permRead},
		"GET /api/openapi.json":        {perm: permRead},
		"GET /api/cluster":             {perm: permRead},
		"GET /api/schedules":           {perm: permRead},
		"GET /api/schedules/{id}":      {perm: permRead},
		"GET /api/schedules/{id}/runs": {perm: permRead},
		"GET /api/schedules/{id}/next": {perm: permRead},
		"POST /api/schedules/preview":  {perm: permRead}, // computes, changes nothing
		"GET /api/auth/me":             {perm: permRead},
		"GET /api/events":              {perm: permRead},
		"GET /api/stats/throughput":    {perm: permRead},
		"GET /metrics":                 {perm: permRead},

		// Submits.
		"POST /api/tasks":       {perm: permSubmit},
		"POST /api/tasks/batch": {perm: permSubmit},

		// The worker protocol.
		"POST /api/workers/claim":           {perm: permWork},
		"POST /api/runs/{run_id}/heartbeat": {perm: permWork},
		"POST /api/runs/{run_id}/succeed":   {perm: permWork},
		"POST /api/runs/{run_id}/fail":      {perm: permWork},
		"POST /api/runs/{run_id}/release":   {perm: permWork},
		"POST /api/runs/reports":            {perm: permWork},
		"POST /api/workers/{id}/deregister": {perm: permWork}, // a worker's goodbye
		// A push worker's address: a change of where Rota sends requests,
		// so audited although it is the worker protocol.
		"POST /api/workers/register": {perm: permWork, audit: "worker.register"},

		// Operators' changes, audited.
		"PATCH /api/tasks/{id}":             {perm: permOperate, audit: "task.update"},
		"POST /api/tasks/run_again/{id}":    {perm: permOperate, audit: "task.run_again"},
		"POST /api/tasks/stop/{id}":         {perm: permOperate, audit: "task.stop"},
		"POST /api/tasks/bulk":              {perm: permOperate, audit: "task.bulk"},
		"PUT /api/kinds/{kind}":             {perm: permOperate, audit: "kind.update"},
		"POST /api/kinds/{kind}/pause":      {perm: permOperate, audit: "kind.pause"},
		"POST /api/kinds/{kind}/resume":     {perm: permOperate, audit: "kind.resume"},
		"POST /api/workers/{id}/stop":       {perm: permOperate, audit: "worker.stop"},
		"POST /api/schedules":               {perm: permOperate, audit: "schedule.create"},
		"PATCH /api/schedules/{id}":         {perm: permOperate, audit: "schedule.update"},
		"DELETE /api/schedules/{id}":        {perm: permOperate, audit: "schedule.delete"},
		"POST /api/schedules/{id}/pause":    {perm: permOperate, audit: "schedule.pause"},
		"POST /api/schedules/{id}/resume":   {perm: permOperate, audit: "schedule.resume"},
		"POST /api/schedules/{id}/trigger":  {perm: permOperate, audit: "schedule.trigger"},
		"POST /api/schedules/{id}/backfill": {perm: permOperate, audit: "schedule.backfill"},

		// Admins only.
		"POST /api/tokens":              {perm: permAdmin, audit: "token.create"},
		"GET /api/tokens":               {perm: permAdmin},
		"DELETE /api/tokens/{token_id}": {perm: permAdmin, audit: "token.revoke"},
		"GET /api/audit":                {perm: permAdmin},
	}
}
