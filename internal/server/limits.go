package server

import (
	"time"

	"github.com/rotahq/rota/internal/httpapi"
)

// Limits bounds the resources clients and workers can make a server hold.
// Zero values mean the defaults below.
type Limits struct {
	// ReadHeaderTimeout bounds the time to read a request's headers
	// (default 10s): a client that trickles them is cut off.
	ReadHeaderTimeout time.Duration
	// IdleTimeout closes keep-alive connections idle this long (default
	// 120s).
	IdleTimeout time.Duration
	// MaxHeaderBytes caps a request's line and headers (default 64 KiB);
	// over it the answer is 431 too_large.
	MaxHeaderBytes int
	// MaxInflightBytes caps the request bodies being read and handled at
	// once (default 256 MiB); beyond it a new body waits briefly, then is
	// refused with 503 unavailable and Retry-After.
	MaxInflightBytes int64
	// WorkerRetention is how long a worker that is no longer seen (lost or
	// stopped) stays listed before the leader prunes it (default 24h).
	WorkerRetention time.Duration
}

// Defaults of Limits.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultWorkerRetention   = 24 * time.Hour
)

func (l Limits) withDefaults() Limits {
	if l.ReadHeaderTimeout <= 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if l.IdleTimeout <= 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = httpapi.DefaultMaxHeaderBytes
	}
	if l.MaxInflightBytes <= 0 {
		l.MaxInflightBytes = httpapi.DefaultMaxInflightBytes
	}
	if l.WorkerRetention <= 0 {
		l.WorkerRetention = DefaultWorkerRetention
	}
	return l
}
