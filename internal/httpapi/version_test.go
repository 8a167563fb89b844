package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/internal/buildinfo"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := e.do("GET", "/api/version", nil)
	if r.Status != http.StatusOK || r.Code != 0 {
		t.Fatalf("GET /api/version: %v", r)
	}
	// Exactly the four documented fields, with the build's values.
	dec := json.NewDecoder(bytes.NewReader(r.Data))
	dec.DisallowUnknownFields()
	var got struct {
		Version   *string `json:"version"`
		Commit    *string `json:"commit"`
		BuildDate *string `json:"build_date"`
		GoVersion *string `json:"go_version"`
	}
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("decode %s: %v", r.Data, err)
	}
	if got.Version == nil || got.Commit == nil || got.BuildDate == nil || got.GoVersion == nil {
		t.Fatalf("missing field in %s", r.Data)
	}
	b := buildinfo.Get()
	want := []string{b.Version, b.Commit, b.BuildDate, b.GoVersion}
	if d := cmp.Diff(want, []string{*got.Version, *got.Commit, *got.BuildDate, *got.GoVersion}); d != "" {
		t.Errorf("version data (-want +got):\n%s", d)
	}
	for _, f := range want {
		if f == "" {
			t.Errorf("empty field in %s", r.Data)
		}
	}

	wantErr(t, e.do("POST", "/api/version", nil), rota.CodeMethod)
}
