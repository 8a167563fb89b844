package rotatest_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"time"

	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotatest"
	"github.com/rotahq/rota/rotaworker"
)

// A test server, a worker and a task, outside of a test function. In a
// test, rotatest.NewServer(t) does the same and stops the server when the
// test ends.
func ExampleStart() {
	ctx := context.Background()
	srv, err := rotatest.Start(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	w := rotaworker.New(rotaworker.Config{Server: srv.URL, Logger: slog.New(slog.DiscardHandler)})
	rotaworker.Handle(w, "greet", func(ctx context.Context, t *rotaworker.Task[string]) error {
		t.SetMessage("hello, " + t.Payload)
		return nil
	})
	go w.Run(ctx)
	defer w.Stop(ctx)

	res, err := srv.Client.Submit(ctx, rotaclient.TaskParams{Kind: "greet", Payload: "Ada"})
	if err != nil {
		log.Fatal(err)
	}
	for {
		task, err := srv.Client.GetTask(ctx, res.TaskID)
		if err != nil {
			log.Fatal(err)
		}
		if task.Status.Terminal() {
			fmt.Println(task.Status, task.Message)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Output: SUCCESS hello, Ada
}
