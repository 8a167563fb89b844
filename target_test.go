package rota_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/rotahq/rota"
)

// A Target printed or logged never shows its header values.
func TestTargetMasksHeaderValues(t *testing.T) {
	t.Parallel()
	tg := &rota.Target{URL: "https://h.example/x", Method: "POST", Headers: map[string]string{"Authorization": "Bearer s3cret", "X-Key": "k3y-value"}}
	s := rota.Schedule{Name: "n", Target: tg}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("target", "target", tg, "value", *tg)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("target", "target", tg)
	for _, out := range []string{fmt.Sprint(tg), fmt.Sprintf("%+v", s), fmt.Sprintf("%#v", *tg), fmt.Sprintf("%v", s), buf.String()} {
		if strings.Contains(out, "s3cret") || strings.Contains(out, "k3y-value") {
			t.Errorf("shows a header value: %s", out)
		}
		if !strings.Contains(out, "Authorization") {
			t.Errorf("lost the header names: %s", out)
		}
	}
}
