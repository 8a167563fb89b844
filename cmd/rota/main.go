// Command rota is Rota's single binary: server, worker runner and CLI.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/rotahq/rota/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// A second signal stops at once.
		<-ctx.Done()
		stop()
		hard := make(chan os.Signal, 1)
		signal.Notify(hard, os.Interrupt, syscall.SIGTERM)
		<-hard
		fmt.Fprintln(os.Stderr, "rota: second signal, stopping now")
		os.Exit(1)
	}()
	code := cli.Run(ctx, os.Args[1:], cli.Env{Stdout: os.Stdout, Stderr: os.Stderr, Stdin: os.Stdin})
	stop()
	os.Exit(code)
}
