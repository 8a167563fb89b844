package rotaworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotatest"
	"github.com/rotahq/rota/rotaworker"
)

// startExample runs a Rota server in-process for the examples (package
// rotatest); a real worker talks to a server started with `rota server`.
func startExample() *rotatest.Server {
	srv, err := rotatest.Start(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return srv
}

// waitDone polls a task until it is finished.
func waitDone(c *rotaclient.Client, id string) {
	for {
		t, err := c.GetTask(context.Background(), id)
		if err != nil || t.Status.Terminal() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Email is the payload of the "email" tasks of the examples.
type Email struct {
	To      string `json:"to"`
	Subject string `json:"subject"`
}

// A worker in three lines: New, Handle, Run.
func Example() {
	srv := startExample()
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)

	send := func(ctx context.Context, t *rotaworker.Task[Email]) error {
		fmt.Printf("sending %q to %s (attempt %d)\n", t.Payload.Subject, t.Payload.To, t.Attempt)
		t.SetMessage("sent")
		return nil
	}
	w := rotaworker.New(rotaworker.Config{Server: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	rotaworker.Handle(w, "email", send)
	go func() { done <- w.Run(ctx) }()

	// Somewhere else, a task is submitted.
	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	res, _ := c.Submit(context.Background(), rotaclient.TaskParams{Kind: "email", Payload: Email{To: "ada@example.com", Subject: "hello"}})
	waitDone(c, res.TaskID)
	task, _ := c.GetTask(context.Background(), res.TaskID)
	fmt.Println(task.Status, task.Message)

	cancel() // a graceful stop, as Stop would do
	fmt.Println(<-done)
	// Output:
	// sending "hello" to ada@example.com (attempt 1)
	// SUCCESS sent
	// <nil>
}

// NoRetry fails a task at once, whatever retries it has left.
func ExampleNoRetry() {
	srv := startExample()
	defer srv.Close()
	w := rotaworker.New(rotaworker.Config{Server: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	rotaworker.Handle(w, "email", func(ctx context.Context, t *rotaworker.Task[Email]) error {
		if t.Payload.To == "" {
			return rotaworker.NoRetry(errors.New("no recipient"))
		}
		return nil
	})
	go w.Run(context.Background())
	defer w.Stop(context.Background())

	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	res, _ := c.Submit(context.Background(), rotaclient.TaskParams{Kind: "email", Payload: Email{}, MaxRetries: new(5)})
	waitDone(c, res.TaskID)
	task, _ := c.GetTask(context.Background(), res.TaskID)
	fmt.Println(task.Status, len(task.Runs), task.Message)
	// Output: FAILED 1 no recipient
}

// A handler learns why its context ended from context.Cause; a stopped
// task's handler sees ErrTaskStopped.
func ExampleErrTaskStopped() {
	srv := startExample()
	defer srv.Close()
	started := make(chan string)
	w := rotaworker.New(rotaworker.Config{Server: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	rotaworker.Handle(w, "crawl", func(ctx context.Context, t *rotaworker.Task[string]) error {
		started <- t.ID
		<-ctx.Done() // a long job that watches its context
		fmt.Println(errors.Is(context.Cause(ctx), rotaworker.ErrTaskStopped))
		return ctx.Err()
	})
	go w.Run(context.Background())
	defer w.Stop(context.Background())

	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	// A short heartbeat timeout: the stop arrives with the next heartbeat.
	res, _ := c.Submit(context.Background(), rotaclient.TaskParams{Kind: "crawl", Payload: "https://example.com", HeartbeatTimeoutSeconds: 3})
	c.StopTask(context.Background(), <-started)
	waitDone(c, res.TaskID)
	task, _ := c.GetTask(context.Background(), res.TaskID)
	fmt.Println(task.Status)
	// Output:
	// true
	// CANCELED
}

// Raw handlers get the payload as submitted.
func ExampleWorker_Register() {
	srv := startExample()
	defer srv.Close()
	w := rotaworker.New(rotaworker.Config{Server: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	w.Register("echo", rotaworker.HandlerFunc(func(ctx context.Context, t *rotaworker.Task[json.RawMessage]) error {
		return t.SetResult(t.Payload) // the result is the payload
	}), rotaworker.HandlerOptions{Concurrency: 4})
	go w.Run(context.Background())
	defer w.Stop(context.Background())

	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	res, _ := c.Submit(context.Background(), rotaclient.TaskParams{Kind: "echo", Payload: json.RawMessage(`{"a":[1,2]}`)})
	waitDone(c, res.TaskID)
	task, _ := c.GetTask(context.Background(), res.TaskID)
	fmt.Println(task.Status, string(task.Result))
	// Output: SUCCESS {"a":[1,2]}
}
