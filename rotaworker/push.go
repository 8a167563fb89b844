package rotaworker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/rotahq/rota/rotaclient"
)

// Push mode (Config.Listen): instead of claiming, the worker serves HTTP
// on Listen, registers its address with the server (POST
// /api/workers/register, capacity = the sum of its kinds' concurrency) and
// runs the tasks the server posts to it (kinds in push mode), each as a
// claimed run: same handler, heartbeats, timeout, local retries and
// reports. It answers a delivery 202 once the run started, 503 when the
// kind has no free slot or the worker is stopping (the server hands the
// run to another worker, no retry spent), and GET /healthz 200 while it
// runs, draining included, so that the server does not take its runs
// back. It deregisters as it exits, then stops serving.

// maxDelivery bounds the body of a delivery the worker reads.
const maxDelivery = 32 << 20

// pushServer is the HTTP side of a worker in push mode.
type pushServer struct {
	// Immutable after startPush.
	w       *Worker
	base    context.Context // the runs' base context
	runs    *sync.WaitGroup // the runs started
	ln      net.Listener
	srv     *http.Server
	address string // the URL registered with the server
	served  chan struct{}

	mu     sync.Mutex // guards closed and the start of runs
	closed bool       // no more runs start: Run waits for them
}

// pushMode starts push mode when Config.Listen is set: the server and,
// on loops, the registration; nil otherwise.
func (w *Worker) pushMode(ctx, base context.Context, kinds []string, loops, runs *sync.WaitGroup) (*pushServer, error) {
	if w.cfg.Listen == "" {
		return nil, nil
	}
	p, err := w.startPush(base, runs)
	if err != nil {
		return nil, err
	}
	loops.Go(func() { p.serve(ctx, kinds) })
	return p, nil
}

// startPush listens on Config.Listen and serves deliveries and health
// checks in the background; runs started go on runs.
func (w *Worker) startPush(base context.Context, runs *sync.WaitGroup) (*pushServer, error) {
	ln, err := net.Listen("tcp", w.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("rotaworker: listen on %s: %w", w.cfg.Listen, err)
	}
	address, err := pushAddress(w.cfg.PushAddress, ln.Addr())
	if err != nil {
		ln.Close()
		return nil, err
	}
	p := &pushServer{w: w, base: base, runs: runs, ln: ln, address: address, served: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(rw, "ok\n") })
	mux.HandleFunc("POST /{$}", p.deliver)
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.served)
		if err := p.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			w.log.Error("rotaworker: push server", "err", err)
		}
	}()
	return p, nil
}

// pushAddress is the URL to register: Config.PushAddress, else
// http://{the listener's address}, which needs a specific host.
func pushAddress(configured string, addr net.Addr) (string, error) {
	if configured != "" {
		return configured, nil
	}
	tcp, ok := addr.(*net.TCPAddr)
	if !ok || tcp.IP.IsUnspecified() {
		return "", fmt.Errorf("rotaworker: listening on %s, which is no address to give the server: set Config.PushAddress", addr)
	}
	return "http://" + tcp.String() + "/", nil
}

// capacity is the runs the worker takes at once: its kinds' slots.
func (w *Worker) capacity() int {
	n := 0
	for _, kh := range w.handlers {
		n += cap(kh.slots)
	}
	return n
}

// serve registers the worker (again after failures, with the claims'
// backoff) and serves until ctx ends (a stop began); then it refuses new
// deliveries, waits for the runs, deregisters (in Run) and closes.
func (p *pushServer) serve(ctx context.Context, kinds []string) {
	w := p.w
	for fails := 0; ; {
		_, err := w.client.RegisterWorker(ctx, rotaclient.RegisterParams{
			WorkerID: w.cfg.ID, Kinds: kinds, Address: p.address, Capacity: w.capacity(),
		})
		if err == nil {
			w.log.Info("rotaworker: push mode: registered", "address", p.address, "capacity", w.capacity())
			break
		}
		if ctx.Err() != nil {
			break
		}
		fails++
		d := backoff(fails)
		w.log.Warn("rotaworker: register failed", "err", err, "retry_in", d)
		if !sleep(d, w.stopping) {
			break
		}
	}
	<-ctx.Done()
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// close stops serving (after the worker deregistered); nil does nothing.
func (p *pushServer) close() {
	if p == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.srv.Shutdown(ctx)
	<-p.served
}

// deliver starts the run of a delivery: 202 once started, 503 when no
// slot is free or the worker stops, 400 for a delivery it cannot take.
func (p *pushServer) deliver(rw http.ResponseWriter, r *http.Request) {
	w := p.w
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxDelivery))
	recv := time.Now()
	if err != nil {
		http.Error(rw, "read the delivery: "+err.Error(), http.StatusBadRequest)
		return
	}
	d, err := rotaclient.DecodeDelivery(body)
	if err != nil {
		http.Error(rw, err.Error(), http.StatusBadRequest)
		return
	}
	kh := w.handlers[d.Run.Kind]
	switch {
	case d.WorkerID != w.cfg.ID:
		http.Error(rw, fmt.Sprintf("this is worker %s, not %s", w.cfg.ID, d.WorkerID), http.StatusBadRequest)
		return
	case kh == nil:
		http.Error(rw, "no handler for kind "+d.Run.Kind, http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		http.Error(rw, "stopping", http.StatusServiceUnavailable)
		return
	}
	select {
	case kh.slots <- struct{}{}: // released when the handler returns
	default:
		http.Error(rw, "no free slot for kind "+d.Run.Kind, http.StatusServiceUnavailable)
		return
	}
	st := newRunState(w, kh, d.Run, handedOver(recv, d.ServerTime, d.Run.StartedAt))
	st.slotted = true
	kh.hand.mu.Lock()
	kh.hand.n++ // the run is in the kind's hand until it leaves (startHandler)
	kh.hand.mu.Unlock()
	p.runs.Add(1) // Done when the run ends (execute)
	go st.execute(p.base, p.runs)
	rw.WriteHeader(http.StatusAccepted)
}
