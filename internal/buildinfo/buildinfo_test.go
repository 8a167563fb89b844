package buildinfo

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	vcs := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/rotahq/rota", Version: "v0.0.0-20260102030405-0123456789ab"},
		Settings: []debug.BuildSetting{
			{Key: "vcs", Value: "git"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "false"},
		},
	}
	dirty := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Version: Devel}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"},
	}}
	novcs := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/rotahq/rota", Version: Devel}}
	installed := &debug.BuildInfo{GoVersion: "go1.99.1", Main: debug.Module{Path: "github.com/rotahq/rota", Version: "v0.3.1"}}
	tests := []struct {
		name          string
		bi            *debug.BuildInfo
		ldV, ldC, ldD string
		want          Info
	}{
		{"vcs build", vcs, "", "", "", Info{"v0.0.0-20260102030405-0123456789ab", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z", "go1.99.1"}},
		{"dirty tree, no time", dirty, "", "", "", Info{Devel, "abc-dirty", Unknown, "go1.99.1"}},
		{"-buildvcs=false", novcs, "", "", "", Info{Devel, Unknown, Unknown, "go1.99.1"}},
		{"go install @v0.3.1", installed, "", "", "", Info{"v0.3.1", Unknown, Unknown, "go1.99.1"}},
		{"linker wins", vcs, "v1.0.0", "feed", "2027-01-01T00:00:00Z", Info{"v1.0.0", "feed", "2027-01-01T00:00:00Z", "go1.99.1"}},
		{"linker fills the gaps", novcs, "", "feed", "2027-01-01T00:00:00Z", Info{Devel, "feed", "2027-01-01T00:00:00Z", "go1.99.1"}},
		{"no build info", nil, "", "", "", Info{Devel, Unknown, Unknown, runtime.Version()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := resolve(tt.bi, tt.ldV, tt.ldC, tt.ldD)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("resolve (-want +got):\n%s", d)
			}
		})
	}
}

func TestGet(t *testing.T) {
	t.Parallel()
	got := Get()
	if got.Version == "" || got.Commit == "" || got.BuildDate == "" {
		t.Errorf("Get() has empty fields: %+v", got)
	}
	if got.GoVersion != runtime.Version() {
		t.Errorf("GoVersion = %q, want %q", got.GoVersion, runtime.Version())
	}
	if Get() != got {
		t.Errorf("Get() changed between calls")
	}
}

func TestString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   Info
		want string
	}{
		{Info{"v0.3.1", "0123456789abcdef0123456789abcdef01234567", "2026-01-02T03:04:05Z", "go1.26.8"},
			"rota v0.3.1 (commit 0123456789ab, built 2026-01-02T03:04:05Z, go1.26.8)"},
		{Info{"v0.3.1", "0123456789abcdef0123456789abcdef01234567-dirty", "2026-01-02T03:04:05Z", "go1.26.8"},
			"rota v0.3.1 (commit 0123456789ab-dirty, built 2026-01-02T03:04:05Z, go1.26.8)"},
		{Info{Devel, Unknown, Unknown, "go1.26.8"}, "rota (devel) (commit unknown, built unknown, go1.26.8)"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}
