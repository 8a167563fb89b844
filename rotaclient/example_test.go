package rotaclient_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/rotahq/rota"
	"github.com/rotahq/rota/rotaclient"
	"github.com/rotahq/rota/rotatest"
)

// startExample runs a Rota server in-process for the examples (package
// rotatest); a real program talks to a server started with `rota server`.
func startExample() *rotatest.Server {
	srv, err := rotatest.Start(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	return srv
}

// Submit a task and read it back.
func Example() {
	srv := startExample()
	defer srv.Close()
	ctx := context.Background()

	c, err := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Submit(ctx, rotaclient.TaskParams{
		Kind:     "email",
		Priority: rota.PriorityHigh,
		Payload:  map[string]string{"to": "ada@example.com"},
	})
	if err != nil {
		log.Fatal(err)
	}
	task, err := c.GetTask(ctx, res.TaskID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(task.Kind, task.Priority, task.Status, string(task.Payload))
	// Output: email high SCHEDULED {"to":"ada@example.com"}
}

// Errors from the server are *rota.Error values: test them with errors.Is
// and read the field at fault.
func Example_errors() {
	srv := startExample()
	defer srv.Close()
	ctx := context.Background()
	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})

	_, err := c.GetTask(ctx, "0123456789abcdef0123456789abcdef")
	fmt.Println(errors.Is(err, rota.ErrNotFound))

	_, err = c.Submit(ctx, rotaclient.TaskParams{Kind: "email", Priority: "urgent"})
	var re *rota.Error
	if errors.As(err, &re) {
		fmt.Println(errors.Is(err, rota.ErrInvalid), re.Field)
	}
	// Output:
	// true
	// true priority
}

// A key makes submits idempotent while the task is unfinished.
func ExampleClient_Submit_key() {
	srv := startExample()
	defer srv.Close()
	ctx := context.Background()
	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})

	p := rotaclient.TaskParams{Kind: "report", Key: "daily-2025-01-02", Delay: time.Hour, MaxRetries: new(0)}
	first, _ := c.Submit(ctx, p)
	second, _ := c.Submit(ctx, p)
	fmt.Println(first.Existing, second.Existing, first.TaskID == second.TaskID)
	// Output: false true true
}

// AllTasks walks every page of a listing.
func ExampleClient_AllTasks() {
	srv := startExample()
	defer srv.Close()
	ctx := context.Background()
	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})

	for i := range 5 {
		c.Submit(ctx, rotaclient.TaskParams{Kind: "resize", Payload: map[string]int{"n": i}})
	}
	for task, err := range c.AllTasks(ctx, rotaclient.ListParams{Kind: "resize", Limit: 2}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(task.Payload)) // newest first
	}
	// Output:
	// {"n":4}
	// {"n":3}
	// {"n":2}
	// {"n":1}
	// {"n":0}
}

// The raw worker protocol: claim, heartbeat, report. Package rotaworker
// does all of this for you.
func ExampleClient_Claim() {
	srv := startExample()
	defer srv.Close()
	ctx := context.Background()
	c, _ := rotaclient.New(rotaclient.Config{BaseURL: srv.URL})
	c.Submit(ctx, rotaclient.TaskParams{Kind: "email", Payload: "hello"})

	claim, err := c.Claim(ctx, rotaclient.ClaimParams{WorkerID: "w1", Kinds: []string{"email"}, Max: 10, Wait: 5 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	for _, run := range claim.Runs {
		if hb, err := c.Heartbeat(ctx, run.RunID, "w1", ""); err != nil || hb.Stop {
			continue // lease lost or asked to stop: abandon the run
		}
		err := c.Succeed(ctx, run.RunID, rotaclient.SucceedParams{WorkerID: "w1", Message: "sent " + string(run.Payload)})
		fmt.Println(run.Attempt, err)
		task, _ := c.GetTask(ctx, run.TaskID)
		fmt.Println(task.Status, task.Message)
	}
	// Output:
	// 1 <nil>
	// SUCCESS sent "hello"
}
