// Package buildinfo tells which build of Rota is running: its version, the
// commit it was built from, when, and with which Go.
//
// The values come from the linker first (make build, make image and the
// Dockerfile pass -ldflags "-X ...=..."), then from the build information
// the Go toolchain embeds (debug.ReadBuildInfo: the module version of
// `go install ...@vX`, and vcs.revision / vcs.time of a build inside a git
// checkout), and otherwise read "(devel)" for the version and "unknown" for
// the commit and the build date (a build with -buildvcs=false, or go run).
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"sync"
)

// Values set by the linker with -ldflags "-X
// github.com/rotahq/rota/internal/buildinfo.version=v1.2.3" (and .commit,
// .date). Only the linker writes them; the code reads them.
var (
	version string
	commit  string
	date    string
)

// Devel is the version of a build that knows no better (go run, a plain go
// build outside a tagged module).
const Devel = "(devel)"

// Unknown stands for a commit or a build date the build did not record.
const Unknown = "unknown"

// Info describes one build. Its JSON form is the data of GET /api/version.
type Info struct {
	// Version is the release ("v0.3.1"), a Go pseudo-version of a
	// commit, or Devel.
	Version string `json:"version"`
	// Commit is the git revision (with "-dirty" when the tree had
	// uncommitted changes), or Unknown.
	Commit string `json:"commit"`
	// BuildDate is the commit time (RFC 3339, UTC) of a VCS build, or the
	// date passed by the linker, or Unknown.
	BuildDate string `json:"build_date"`
	// GoVersion is the Go toolchain that built the binary ("go1.26.8").
	GoVersion string `json:"go_version"`
}

// get reads the build information once; it never changes while the
// process runs.
var get = sync.OnceValue(func() Info {
	bi, _ := debug.ReadBuildInfo()
	return resolve(bi, version, commit, date)
})

// Get returns this binary's build information. It is safe for concurrent
// use and cheap after the first call.
func Get() Info { return get() }

// resolve combines the linker's values (which win when set) with the
// toolchain's build information bi (nil when the binary has none).
func resolve(bi *debug.BuildInfo, ldVersion, ldCommit, ldDate string) Info {
	info := Info{Version: ldVersion, Commit: ldCommit, BuildDate: ldDate, GoVersion: runtime.Version()}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if info.Version == "" && bi.Main.Version != "" {
			info.Version = bi.Main.Version
		}
		var revision, vcsTime string
		modified := false
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.time":
				vcsTime = s.Value
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if info.Commit == "" && revision != "" {
			info.Commit = revision
			if modified {
				info.Commit += "-dirty"
			}
		}
		if info.BuildDate == "" {
			info.BuildDate = vcsTime
		}
	}
	if info.Version == "" {
		info.Version = Devel
	}
	if info.Commit == "" {
		info.Commit = Unknown
	}
	if info.BuildDate == "" {
		info.BuildDate = Unknown
	}
	return info
}

// String is the one-line form printed by `rota version`:
// "rota v0.3.1 (commit 1a2b3c4, built 2026-01-02T03:04:05Z, go1.26.8)".
func (i Info) String() string {
	return "rota " + i.Version + " (commit " + short(i.Commit) + ", built " + i.BuildDate + ", " + i.GoVersion + ")"
}

// short abbreviates a full git revision to 12 characters, keeping a
// "-dirty" mark.
func short(rev string) string {
	const n = 12
	base, dirty := rev, ""
	if len(rev) > 6 && rev[len(rev)-6:] == "-dirty" {
		base, dirty = rev[:len(rev)-6], "-dirty"
	}
	if len(base) == 40 {
		base = base[:n]
	}
	return base + dirty
}
