package httpapi

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/rotahq/rota"
)

// serverHandlers stands for the handlers a server adds (Config.Handlers).
func serverHandlers() map[string]http.Handler {
	stub := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	return map[string]http.Handler{RouteEvents: stub, RouteThroughput: stub, RouteMetrics: stub}
}

// TestRouteTableCoversRoutes fails when a route of the router has no entry
// in the role table, or an entry names no route.
func TestRouteTableCoversRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) { o.handlers = serverHandlers() })
	table := routePolicies()
	mounted := e.api.Patterns()
	for _, p := range mounted {
		if _, ok := table[p]; !ok {
			t.Errorf("route %q has no entry in the role table (roles.go)", p)
		}
	}
	for p := range table {
		if !slices.Contains(mounted, p) {
			t.Errorf("role table entry %q is not a route", p)
		}
	}
	// Audited routes are exactly the operators' and admins' changes, and
	// the worker protocol's one change of where Rota sends requests (a
	// push worker's address).
	for p, pol := range table {
		change := !strings.HasPrefix(p, "GET ")
		want := change && (pol.perm == permOperate || pol.perm == permAdmin) || p == "POST /api/workers/register"
		if (pol.audit != "") != want {
			t.Errorf("route %q (perm %v): audit action %q", p, pol.perm, pol.audit)
		}
	}
}

// concretePath fills a pattern's wildcards with well-formed values.
func concretePath(pattern string) (method, path string) {
	method, path, _ = strings.Cut(pattern, " ")
	r := strings.NewReplacer("{id}", "0123456789abcdef0123456789abcdef", "{run_id}", "0123456789abcdef0123456789abcdef",
		"{token_id}", "0123456789abcdef0123456789abcdef", "{kind}", "k")
	return method, r.Replace(path)
}

// TestRouteRoleMatrix walks every route × role (and no token) and asserts
// the status: 401 without a token (but open routes), 403 (code 40300) for a
// role the table does not allow, anything else for one it allows.
func TestRouteRoleMatrix(t *testing.T) {
	t.Parallel()
	e := setup(t, func(o *setupOptions) {
		o.auth = &AuthConfig{BootstrapToken: "boot"}
		o.handlers = serverHandlers()
	})
	tokens := map[rota.Role]string{}
	for _, role := range rota.Roles() {
		tokens[role], _ = mustToken(t, e, "boot", "t-"+string(role), role)
	}
	table := routePolicies()
	for _, pattern := range e.api.Patterns() {
		method, path := concretePath(pattern)
		var body any
		if method != http.MethodGet {
			body = "{}"
		}
		pol := table[pattern]
		r := doAs(t, e.url, "", method, path, body)
		if pol.perm == permOpen {
			if r.Status == 401 || r.Status == 403 {
				t.Errorf("%s without a token: %d, want it open", pattern, r.Status)
			}
		} else if r.Status != 401 || r.Code != 40100 {
			t.Errorf("%s without a token: %v, want 401 unauthorized", pattern, r)
		}
		for _, role := range rota.Roles() {
			r := doAs(t, e.url, tokens[role], method, path, body)
			allowed := roleAllows(role, pol.perm)
			switch {
			case allowed && (r.Status == 401 || r.Status == 403 || r.Status >= 500):
				t.Errorf("%s as %s: %v, want it allowed", pattern, role, r)
			case !allowed && (r.Status != 403 || r.Code != 40300):
				t.Errorf("%s as %s: %v, want 403 forbidden (40300)", pattern, role, r)
			}
		}
	}
}

// TestRolesAsDocumented pins the role table against the words.
func TestRolesAsDocumented(t *testing.T) {
	t.Parallel()
	table := routePolicies()
	can := func(role rota.Role, pattern string) bool { return roleAllows(role, table[pattern].perm) }
	checks := []struct {
		role    rota.Role
		pattern string
		want    bool
	}{
		{rota.RoleReader, "GET /api/tasks", true},
		{rota.RoleReader, RouteEvents, true},
		{rota.RoleReader, RouteMetrics, true},
		{rota.RoleReader, "POST /api/tasks", false},
		{rota.RoleReader, "GET /api/audit", false},
		{rota.RoleSubmitter, "POST /api/tasks/batch", true},
		{rota.RoleSubmitter, "POST /api/workers/claim", false},
		{rota.RoleWorker, "POST /api/runs/reports", true},
		{rota.RoleWorker, "POST /api/tasks", false},
		{rota.RoleWorker, "POST /api/tasks/stop/{id}", false},
		{rota.RoleOperator, "POST /api/tasks/stop/{id}", true},
		{rota.RoleOperator, "POST /api/schedules", true},
		{rota.RoleOperator, "POST /api/workers/{id}/stop", true},
		{rota.RoleOperator, "POST /api/tokens", false},
		{rota.RoleOperator, "GET /api/tokens", false},
		{rota.RoleOperator, "GET /api/audit", false},
		{rota.RoleAdmin, "DELETE /api/tokens/{token_id}", true},
		{rota.RoleAdmin, "GET /api/audit", true},
	}
	for _, c := range checks {
		if got := can(c.role, c.pattern); got != c.want {
			t.Errorf("%s may %s: %v, want %v", c.role, c.pattern, got, c.want)
		}
	}
}
