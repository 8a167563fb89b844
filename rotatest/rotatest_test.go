package rotatest_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotatest"
)

func TestNewServer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var url string
	t.Run("serve", func(t *testing.T) {
		srv := rotatest.NewServer(t)
		url = srv.URL
		if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
			t.Errorf("URL = %q, want a loopback URL", srv.URL)
		}
		if srv.Client.BaseURL() != srv.URL {
			t.Errorf("Client.BaseURL() = %q, want %q", srv.Client.BaseURL(), srv.URL)
		}
		if err := srv.Client.Ready(ctx); err != nil {
			t.Fatalf("ready: %v", err)
		}
		res, err := srv.Client.Submit(ctx, rotaclient.TaskParams{Kind: "email", Payload: map[string]string{"to": "a@b.c"}})
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
		task, err := srv.Client.GetTask(ctx, res.TaskID)
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if task.Kind != "email" || task.Status != rota.StatusScheduled || string(task.Payload) != `{"to":"a@b.c"}` {
			t.Errorf("task = %+v", task)
		}
	})
	// The subtest's cleanup stopped its server.
	assertDown(t, url)
}

func TestServersAreIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := rotatest.NewServer(t), rotatest.NewServer(t)
	if a.URL == b.URL {
		t.Fatalf("two servers share %s", a.URL)
	}
	res, err := a.Client.Submit(ctx, rotaclient.TaskParams{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Client.GetTask(ctx, res.TaskID); !errors.Is(err, rota.ErrNotFound) {
		t.Errorf("task of server a on server b: err = %v, want not found", err)
	}
}

func TestStartCanceled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	srv, err := rotatest.Start(ctx)
	if err == nil {
		srv.Close()
		t.Fatal("Start with a canceled context succeeded")
	}
	if !strings.HasPrefix(err.Error(), "rotatest: ") {
		t.Errorf("err = %v, want it prefixed rotatest:", err)
	}
}

// assertDown checks that nothing serves url any more.
func assertDown(t *testing.T, url string) {
	t.Helper()
	c := &http.Client{Timeout: 2 * time.Second}
	res, err := c.Get(url + "/api/healthz")
	if err == nil {
		res.Body.Close()
		t.Errorf("%s still answers after Close: %s", url, res.Status)
	}
}
