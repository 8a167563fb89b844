// Command ferretserve runs the embedded FerretDB v1 (SQLite backend) that
// the tests use, for `rota bench --store` and manual runs: it prints the
// mongodb:// URL and serves until interrupted.
//
//	go run ./internal/store/mongostore/mongotest/ferretserve -addr 127.0.0.1:27018 -dir /tmp/ferret
//
// With -cpuprofile it writes FerretDB's CPU profile (the process is
// FerretDB alone) when interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	_ "net/http/pprof" // -debug-listen
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"

	"github.com/rotahq/rota/internal/store/mongostore/mongotest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ferretserve:", err)
		os.Exit(1)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:27018", "listen address")
	dir := flag.String("dir", "", "SQLite directory (default: a new temporary one)")
	raw := flag.Bool("raw", false, "without the _id indexes that the tests add (see mongotest.Serve)")
	profile := flag.String("cpuprofile", "", "write a CPU profile here when interrupted")
	debug := flag.String("debug-listen", "", "serve Go's profiler (/debug/pprof/) on this loopback address")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "ferretserve-")
		if err != nil {
			return fmt.Errorf("dir: %w", err)
		}
		defer os.RemoveAll(d)
		*dir = d
	}
	srv, err := mongotest.Serve(*addr, *dir, !*raw)
	if err != nil {
		return err
	}
	defer srv.Close()
	if *profile != "" {
		out, err := os.Create(*profile)
		if err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		defer out.Close()
		if err := pprof.StartCPUProfile(out); err != nil {
			return fmt.Errorf("profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if *debug != "" {
		go func() { _ = http.ListenAndServe(*debug, nil) }() //nolint:gosec // a loopback tool
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Println(srv.URI)
	<-ctx.Done()
	return nil
}
